//! privval messages over a tokio stream: a
//! [`p2p_conn::io::tokio::SecretConnection`] (`tcp://`) or any `AsyncBufRead`,
//! such as a `tokio::io::BufReader` over a `UnixStream` (`unix://`).

use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::{encode, Message, PrivvalError};

/// Reads the next message, taking only its bytes from the stream's buffer.
/// A clean end of stream between messages is
/// [`std::io::ErrorKind::UnexpectedEof`] in [`PrivvalError::Io`]; inside a
/// message it is [`PrivvalError::Truncated`].
///
/// Cancel-safe: the partial message lives in `decoder`, and only bytes fed
/// to it are consumed. Call again with the same decoder to resume.
#[cfg(any(test, feature = "testkit"))]
pub async fn read<S>(
    stream: &mut S,
    decoder: &mut super::codec::MessageDecoder,
) -> Result<Message, PrivvalError>
where
    S: tokio::io::AsyncBufRead + Unpin,
{
    use p2p_conn::io::tokio::poll_decode;
    std::future::poll_fn(|cx| poll_decode(std::pin::Pin::new(&mut *stream), cx, decoder)).await
}

/// Writes `msg` with its length prefix and flushes it.
///
/// Not cancel-safe: dropped mid-write, part of the message may have been
/// sent and the stream is out of step.
pub async fn write<S>(stream: &mut S, msg: &Message) -> Result<(), PrivvalError>
where
    S: AsyncWrite + Unpin,
{
    stream.write_all(&encode(msg)).await?;
    stream.flush().await?;
    Ok(())
}
