//! docs/embedding.md's reader task over a stream the send queue packed.
//!
//! The queue fills frames across messages, so a message boundary can fall
//! anywhere inside what one read returns. The document's `read_messages`
//! (compiled here from the file `scripts/doc-examples.py` generates from the
//! document, so the test runs the code readers copy) must deliver every
//! message intact; parsing whole messages out of each `fill_buf` chunk and
//! consuming the chunk, what the document's reader once hinted at, loses
//! the messages that straddle two chunks.

use std::io;

use bytes::Bytes;
use p2p_conn::io::queue::{QueueConfig, Sender};
use p2p_conn::io::tokio::{handshake, ReadHalf};
use p2p_conn::{Config, Identity};
use tokio::io::AsyncBufReadExt;
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};

/// The document's first example, as `scripts/doc-examples.py` extracts it.
mod embedding {
    #![allow(dead_code)]
    include!("../../../docs/examples/embedding/src/connect.rs");

    /// The document's `read_messages` (private there).
    pub async fn read<R: AsyncRead + Unpin>(
        rx: R,
        handle: impl FnMut(Vec<u8>),
    ) -> std::io::Result<()> {
        read_messages(rx, handle).await
    }
}

const MESSAGES: usize = 2000;

/// The messages: sizes from 1 B to 400 B (a deterministic spread, each
/// smaller than a frame, so only packing puts boundaries inside a chunk),
/// each filled with bytes of its own index so a misplaced byte shows.
fn messages() -> Vec<Vec<u8>> {
    let mut x: u32 = 12345;
    (0..MESSAGES)
        .map(|i| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let len = 1 + (x >> 8) as usize % 400;
            (0..len).map(|j| (i + j) as u8).collect()
        })
        .collect()
}

/// Send `msgs` through a send queue (length-prefixed, each message one
/// bundle, as the document's `framed`), and hand the peer's read half to
/// `read`; returns what `read` delivered.
async fn deliver<F, Fut>(msgs: &[Vec<u8>], read: F) -> Vec<Vec<u8>>
where
    F: FnOnce(ReadHalf<OwnedReadHalf>) -> Fut,
    Fut: std::future::Future<Output = Vec<Vec<u8>>>,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (ours, theirs) = tokio::join!(
        async {
            let tcp = TcpStream::connect(addr).await.unwrap();
            handshake(tcp, &Identity::generate(), &Config::default())
                .await
                .unwrap()
        },
        async {
            let (tcp, _) = listener.accept().await.unwrap();
            handshake(tcp, &Identity::generate(), &Config::default())
                .await
                .unwrap()
        }
    );
    let (_our_rx, tx) = ours.into_split();
    let (rx, _their_tx) = theirs.into_split();
    let sender = Sender::new(tx, &QueueConfig::default()).unwrap();
    let reader = read(rx);
    let producer = async {
        for m in msgs {
            let len = u32::try_from(m.len()).unwrap().to_be_bytes();
            sender
                .send_bundle([Bytes::copy_from_slice(&len), Bytes::copy_from_slice(m)])
                .await
                .unwrap();
        }
        sender.flush().await.unwrap();
        let stats = sender.stats();
        assert!(
            stats.messages_per_batch() > 1.0,
            "the queue batched nothing, so frames were not packed: {stats:?}"
        );
        sender.shutdown();
    };
    let ((), got) = tokio::join!(producer, reader);
    got
}

#[tokio::test]
async fn the_documented_reader_gets_every_message_intact() {
    let msgs = messages();
    let got = deliver(&msgs, |rx| async move {
        let mut got = Vec::new();
        embedding::read(rx, |m| got.push(m))
            .await
            .expect("a clean end after the last message");
        got
    })
    .await;
    assert_eq!(got.len(), msgs.len());
    assert!(got == msgs, "a message arrived altered");
}

/// Whole messages parsed out of each chunk, then the chunk consumed.
async fn per_chunk(mut rx: ReadHalf<OwnedReadHalf>) -> io::Result<(Vec<Vec<u8>>, usize, usize)> {
    let (mut got, mut chunks, mut cut) = (Vec::new(), 0, 0);
    loop {
        let data = rx.fill_buf().await?;
        if data.is_empty() {
            return Ok((got, chunks, cut));
        }
        chunks += 1;
        let mut rest = data;
        while rest.len() >= 4 {
            let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            if rest.len() < 4 + len {
                break;
            }
            got.push(rest[4..4 + len].to_vec());
            rest = &rest[4 + len..];
        }
        cut += usize::from(!rest.is_empty());
        let n = data.len();
        rx.consume(n);
    }
}

/// The stream above really is packed: a reader that takes each chunk for
/// whole messages loses some (so the test above can fail).
#[tokio::test]
async fn parsing_each_chunk_alone_loses_messages() {
    let msgs = messages();
    let mut seen = (0, 0);
    let got = deliver(&msgs, |rx| async {
        let (got, chunks, cut) = per_chunk(rx).await.unwrap();
        seen = (chunks, cut);
        got
    })
    .await;
    let (chunks, cut) = seen;
    assert!(cut > 0, "no chunk ended inside a message ({chunks} chunks)");
    eprintln!(
        "per chunk: {} of {} messages; {cut} of {chunks} chunks ended inside one",
        got.len(),
        msgs.len()
    );
    assert!(
        got.len() < msgs.len(),
        "{} of {} messages, {cut} of {chunks} chunks ended inside a message",
        got.len(),
        msgs.len()
    );
}
