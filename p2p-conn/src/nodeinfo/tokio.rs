//! The NodeInfo exchange over a tokio stream: a
//! [`crate::io::tokio::SecretConnection`] or any `AsyncBufRead +
//! AsyncWrite`.
//!
//! Reads take only the NodeInfo's bytes from the stream's buffer, so what
//! the peer sent after it stays there for the next read.

use std::future::poll_fn;
use std::pin::Pin;
use std::task::Poll;

use tokio::io::{AsyncBufRead, AsyncWrite, AsyncWriteExt};

use super::{Decoder, NodeInfo, NodeInfoError};
use crate::io::tokio::poll_decode;

/// Sends `ours` and reads the peer's at the same time, as CometBFT does (so
/// neither side can wait on the other), and returns the peer's NodeInfo,
/// unchecked: apply [`NodeInfo::validate`], [`NodeInfo::check_id`] and
/// [`NodeInfo::compatible_with`] next. Bound it with `tokio::time::timeout`.
pub async fn exchange<S>(stream: &mut S, ours: &NodeInfo) -> Result<NodeInfo, NodeInfoError>
where
    S: AsyncBufRead + AsyncWrite + Unpin,
{
    let out = ours.encode_delimited()?;
    let mut sent = 0;
    let mut flushed = false;
    let mut decoder = Decoder::new();
    let mut theirs = None;
    poll_fn(|cx| {
        let mut s = Pin::new(&mut *stream);
        while sent < out.len() {
            match s.as_mut().poll_write(cx, &out[sent..]) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(
                        std::io::Error::from(std::io::ErrorKind::WriteZero).into()
                    ))
                }
                Poll::Ready(Ok(n)) => sent += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e.into())),
                Poll::Pending => break,
            }
        }
        if sent == out.len() && !flushed {
            match s.as_mut().poll_flush(cx) {
                Poll::Ready(Ok(())) => flushed = true,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e.into())),
                Poll::Pending => {}
            }
        }
        if theirs.is_none() {
            match poll_decode(s.as_mut(), cx, &mut decoder) {
                Poll::Ready(Ok(info)) => theirs = Some(info),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {}
            }
        }
        match (&theirs, flushed) {
            (Some(_), true) => Poll::Ready(Ok(theirs.take().expect("checked"))),
            _ => Poll::Pending,
        }
    })
    .await
}

/// Reads the peer's NodeInfo without sending ours (send it next with
/// [`write()`]). A CometBFT node sends its NodeInfo without waiting for ours,
/// so a client may read first, for example to announce the network the node
/// is on. Two peers that both read first wait for each other until a timeout.
pub async fn read<S>(stream: &mut S) -> Result<NodeInfo, NodeInfoError>
where
    S: AsyncBufRead + Unpin,
{
    let mut decoder = Decoder::new();
    poll_fn(|cx| poll_decode(Pin::new(&mut *stream), cx, &mut decoder)).await
}

/// Sends `ours` and flushes it.
pub async fn write<S>(stream: &mut S, ours: &NodeInfo) -> Result<(), NodeInfoError>
where
    S: AsyncWrite + Unpin,
{
    let out = ours.encode_delimited()?;
    stream.write_all(&out).await?;
    stream.flush().await?;
    Ok(())
}
