//! Memory held by connections stuck in the handshake, counted by a global
//! allocator: a peer that sends its ephemeral key and then stalls costs at
//! most 4 KiB of heap per connection until the handshake timeout ends it.

use std::time::{Duration, Instant};

use crate::common::alloc::live;
use p2p_conn::io::tokio::handshake;
use p2p_conn::proto::{Handshake, HandshakeParams};
use p2p_conn::{Config, Error, Identity};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A well-formed ephemeral-key message (a fresh state machine's first bytes).
fn ephemeral_message() -> Vec<u8> {
    let hs = Handshake::new(&Identity::generate(), HandshakeParams::default());
    hs.outgoing().to_vec()
}

#[test]
fn stalled_handshakes_hold_at_most_4_kib_each_and_end_at_the_timeout() {
    let _serial = crate::common::serial();
    const N: usize = 200;
    let timeout = Duration::from_millis(1500);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let identity = Identity::generate();
        let cfg = Config::default().handshake_timeout(timeout);
        let eph = ephemeral_message();
        // Both ends of `n` loopback connections, the evil end having sent its
        // ephemeral key.
        let connect = |n: usize| {
            let (listener, eph) = (&listener, &eph);
            async move {
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
                    let (tcp, _) = listener.accept().await.unwrap();
                    sock.write_all(eph).await.unwrap();
                    pairs.push((sock, tcp));
                }
                pairs
            }
        };
        // Control: the sockets alone (and warm-up of tokio's lazily
        // allocated parts).
        drop(connect(N).await);
        let before = live();
        let pairs = connect(N).await;
        let sockets = (live() - before) / N as isize;
        drop(pairs);
        // The same, with our side handshaking and stalled after the peer's
        // ephemeral key.
        let before = live();
        let pairs = connect(N).await;
        let mut evil = Vec::with_capacity(N);
        let mut tasks = Vec::with_capacity(N);
        for (sock, tcp) in pairs {
            let (id, cfg) = (identity.clone(), cfg.clone());
            tasks.push(tokio::spawn(async move {
                let start = Instant::now();
                let r = handshake(tcp, &id, &cfg).await;
                (r.err(), start.elapsed())
            }));
            evil.push(sock);
        }
        // Let every handshake read the ephemeral key and wait for the
        // authentication frame.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let with = (live() - before) / N as isize;
        let per = with - sockets;
        eprintln!(
            "{N} stalled handshakes: {with} heap bytes per connection with both sockets, \
             {sockets} for the sockets alone: {per} for the handshake"
        );
        assert!(per <= 4096, "{per} bytes per stalled handshake");
        for t in tasks {
            let (err, took) = t.await.unwrap();
            assert!(matches!(err, Some(Error::Timeout(_))), "{err:?}");
            assert!(
                took >= timeout && took < timeout + Duration::from_secs(2),
                "{took:?}"
            );
        }
        // The peer got our ephemeral key and our sealed authentication
        // frame, then the end of the stream when we gave up.
        let mut got = Vec::new();
        evil[0].read_to_end(&mut got).await.unwrap();
        assert_eq!(
            got.len(),
            eph.len() + p2p_conn::testkit::internals::wire::STANDARD_SEALED_FRAME
        );
    });
}
