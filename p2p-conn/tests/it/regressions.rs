//! Regression tests for defects found by a code review: each failed before
//! its fix (codec holding back frame #0 data, no flush during the handshake,
//! overflow on a huge timeout in the std adapter, node key file mode on
//! overwrite; the CLI's huge-timeout case is in p2p-conn-cli/tests/it/cli.rs).

use std::time::Duration;

use ed25519_dalek::Signer;
use futures::StreamExt;
use p2p_conn::io::{blocking, codec, tokio as ptokio};
use p2p_conn::proto::FrameSize;
use p2p_conn::testkit::internals::auth_sig;
use p2p_conn::testkit::internals::wire::{EPH_MSG_LEN, STANDARD_SEALED_FRAME};
use p2p_conn::testkit::internals::SealerHooks;
use p2p_conn::testkit::PeerKeys;
use p2p_conn::Backend;
use p2p_conn::{Config, Identity};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

/// A hand-built peer (keys derived from the public sans-IO pieces, as
/// `tests/it/evil_peer.rs` does) that puts `early` application bytes after its
/// AuthSigMessage in frame #0 (spec §5: receivers MUST deliver them first),
/// then reads our frame #0, sends `then` (if any) in one more frame and waits
/// for us to speak, keeping the stream open.
async fn early_data_peer(mut io: DuplexStream, early: Vec<u8>, then: &[u8]) -> DuplexStream {
    let seed = [0x42u8; 32];
    let mut first = [0u8; EPH_MSG_LEN];
    io.read_exact(&mut first).await.unwrap();
    let victim_eph: [u8; 32] = first[3..].try_into().unwrap();

    let keys = PeerKeys::derive([0x17u8; 32], &victim_eph);
    io.write_all(&keys.eph_message()).await.unwrap();

    let sk = ed25519_dalek::SigningKey::from_bytes(&seed);
    let auth = auth_sig::encode(
        &sk.verifying_key().to_bytes(),
        &sk.sign(&keys.challenge).to_bytes(),
    );
    let mut frame0_plain = auth.to_vec();
    frame0_plain.extend_from_slice(&early);
    let mut sealer = p2p_conn::testkit::internals::sealer(
        p2p_conn::testkit::internals::cipher(Backend::RustCrypto, &keys.send),
        FrameSize::STANDARD,
    );
    let mut out = Vec::new();
    sealer.seal_frame(&frame0_plain, &mut out).unwrap();
    io.write_all(&out).await.unwrap();

    let mut theirs = vec![0u8; STANDARD_SEALED_FRAME];
    io.read_exact(&mut theirs).await.unwrap();
    if !then.is_empty() {
        let mut out = Vec::new();
        sealer.seal_append(then, &mut out).unwrap();
        io.write_all(&out).await.unwrap();
    }
    io
}

/// Defect: the codec adapter holds back application bytes that arrived with
/// the handshake until the transport delivers more bytes (or EOF), because
/// `FramedRead` only calls `decode` after its first read. A peer that sends
/// data in frame #0 and then waits for a reply deadlocks with us.
#[tokio::test]
async fn codec_delivers_frame0_application_data_without_further_reads() {
    let early = b"early application bytes in frame #0".to_vec();
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let cfg = Config::default().handshake_timeout(Duration::from_secs(5));
    let identity = Identity::generate();
    let victim = async {
        let mut framed = codec::handshake(ours, &identity, &cfg).await.unwrap();
        tokio::time::timeout(Duration::from_secs(2), framed.next()).await
    };
    let (got, _peer_io) = tokio::join!(victim, early_data_peer(theirs, early.clone(), &[]));
    match got {
        Ok(Some(Ok(item))) => assert_eq!(&item[..], &early[..]),
        Ok(other) => panic!("expected the frame #0 bytes, got {other:?}"),
        Err(_) => panic!(
            "codec FramedRead did not yield the application bytes of frame #0 within 2 s \
             (they are only released after the transport delivers more bytes)"
        ),
    }
}

/// Same, through the split `FramedRead` / `FramedWrite` halves.
#[tokio::test]
async fn codec_split_delivers_frame0_application_data_without_further_reads() {
    let early = b"early bytes, split halves".to_vec();
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let cfg = Config::default().handshake_timeout(Duration::from_secs(5));
    let identity = Identity::generate();
    let victim = async {
        let ((mut read, _write), _peer) = codec::handshake_split_locked(ours, &identity, &cfg)
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(2), read.next()).await
    };
    let (got, _peer_io) = tokio::join!(victim, early_data_peer(theirs, early.clone(), &[]));
    match got {
        Ok(Some(Ok(item))) => assert_eq!(&item[..], &early[..]),
        other => panic!("expected the frame #0 bytes, got {other:?}"),
    }
}

/// Defect: `SecretCodec::new` handed frame #0's trailing plaintext back to the
/// caller and told the decoder to pass its first N input bytes through
/// unopened. A caller who built `FramedRead` over the plain transport (no
/// `WithInitial`) got up to ~2 KiB of raw wire bytes as if they were
/// plaintext. Now the decoder owns those bytes: whatever transport it reads,
/// it yields the authenticated early bytes first, then opened frames only.
#[tokio::test]
async fn codec_decoder_built_by_hand_never_yields_unopened_bytes() {
    use p2p_conn::proto::{Handshake, HandshakeParams};
    use tokio_util::codec::FramedRead;
    let early = b"early bytes".to_vec();
    let then = b"the next frame".to_vec();
    let (mut ours, theirs) = tokio::io::duplex(1 << 16);
    let cfg = Config::default();
    let identity = Identity::generate();
    let victim = async {
        // Drive the sans-IO handshake by hand, as an embedder with its own
        // transport would, then build the codec over the bare transport.
        let mut hs = Handshake::new(&identity, HandshakeParams::default());
        while !hs.is_finished() {
            if !hs.outgoing().is_empty() {
                let n = ours.write(hs.outgoing()).await.unwrap();
                hs.advance_outgoing(n);
            } else {
                let n = ours.read(hs.read_buffer()).await.unwrap();
                hs.advance_read(n).unwrap();
            }
        }
        let codec = codec::SecretCodec::new(hs.into_established().unwrap(), &cfg).unwrap();
        let mut read = FramedRead::new(ours, codec);
        let first = read.next().await.unwrap().unwrap();
        let second = read.next().await.unwrap().unwrap();
        (first, second)
    };
    let ((first, second), _peer_io) =
        tokio::join!(victim, early_data_peer(theirs, early.clone(), &then));
    assert_eq!(
        &first[..],
        &early[..],
        "first item is not the early plaintext"
    );
    assert_eq!(
        &second[..],
        &then[..],
        "second item is not the next frame's plaintext"
    );
}

/// Defect: the handshake driver never flushes the transport. Over any
/// `AsyncWrite` that buffers (here `tokio::io::BufStream`), each side's
/// 35-byte ephemeral key sits in its write buffer, so both sides wait for the
/// other's key until the handshake timeout.
#[tokio::test]
async fn tokio_handshake_over_buffered_transport_completes() {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (a, b) = (tokio::io::BufStream::new(a), tokio::io::BufStream::new(b));
    let cfg = Config::default().handshake_timeout(Duration::from_secs(2));
    let (ia, ib) = (Identity::generate(), Identity::generate());
    let (ra, rb) = tokio::join!(
        ptokio::handshake(a, &ia, &cfg),
        ptokio::handshake(b, &ib, &cfg)
    );
    let (ca, cb) = (
        ra.unwrap_or_else(|e| panic!("side a: {e}")),
        rb.unwrap_or_else(|e| panic!("side b: {e}")),
    );
    assert_eq!(ca.remote_node_id(), ib.node_id());
    assert_eq!(cb.remote_node_id(), ia.node_id());
}

/// Defect: `blocking::handshake_tcp` computes `Instant::now() + timeout`
/// before validating the config, so a large timeout that `Config::validate`
/// accepts (and the tokio adapter handles) panics with an overflow.
#[test]
fn blocking_handshake_tcp_with_huge_timeout_does_not_panic() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        let cfg = Config::default().handshake_timeout(Duration::from_secs(5));
        blocking::handshake_tcp(tcp, &Identity::generate(), &cfg).map(|_| ())
    });
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    let cfg = Config::default().handshake_timeout(Duration::MAX);
    assert!(cfg.validate().is_ok(), "validate accepts Duration::MAX");
    let identity = Identity::generate();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        blocking::handshake_tcp(tcp, &identity, &cfg)
    }));
    match r {
        Ok(r) => {
            r.unwrap();
            peer.join().unwrap().unwrap();
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("handshake_tcp panicked: {msg}");
        }
    }
}

/// Defect: `Identity::save` documents "readable by its owner only on Unix",
/// but `mode(0o600)` only applies when the file is created; saving over an
/// existing world-readable file left the secret key world-readable. Saving
/// now never replaces a file at all: the old file, and its mode, stay.
#[cfg(unix)]
#[test]
fn saving_a_key_over_an_existing_file_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("p2p-conn-review-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("node_key.json");
    std::fs::write(&path, b"old").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = p2p_conn::keyfile::save_new(&Identity::generate(), &path);
    let content = std::fs::read(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        matches!(
            r,
            Err(p2p_conn::keyfile::KeyFileError::AlreadyExists { .. })
        ),
        "{r:?}"
    );
    assert_eq!(content, b"old");
    assert_eq!(mode, 0o644);
}

/// Defect: `blocking::handshake_tcp` set the socket's read and write timeouts
/// to `None` afterwards, on error paths too, so a server that had set a 30 s
/// read timeout on an accepted socket ended up with none. The caller's
/// timeouts must come back, whatever the outcome.
#[test]
fn handshake_tcp_restores_the_callers_socket_timeouts() {
    let read_t = Some(Duration::from_secs(30));
    let write_t = Some(Duration::from_secs(7));
    let cfg = Config::default().handshake_timeout(Duration::from_secs(5));

    // Success path.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        blocking::handshake_tcp(tcp, &Identity::generate(), &Config::default()).map(|_| ())
    });
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(read_t).unwrap();
    tcp.set_write_timeout(write_t).unwrap();
    let conn = blocking::handshake_tcp(tcp, &Identity::generate(), &cfg).unwrap();
    peer.join().unwrap().unwrap();
    assert_eq!(conn.get_ref().read_timeout().unwrap(), read_t);
    assert_eq!(conn.get_ref().write_timeout().unwrap(), write_t);

    // Error path: the peer hangs up during the handshake. A clone of the
    // socket shares its options, so it shows what the failed call left.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || drop(listener.accept().unwrap()));
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(read_t).unwrap();
    tcp.set_write_timeout(write_t).unwrap();
    let witness = tcp.try_clone().unwrap();
    peer.join().unwrap();
    assert!(blocking::handshake_tcp(tcp, &Identity::generate(), &cfg).is_err());
    assert_eq!(witness.read_timeout().unwrap(), read_t);
    assert_eq!(witness.write_timeout().unwrap(), write_t);
}

/// Defect: `Debug` of `Established` printed `initial_plaintext`, decrypted
/// application bytes, into logs. It shows their length only.
#[test]
fn established_debug_shows_no_plaintext() {
    use p2p_conn::proto::HandshakeParams;
    use p2p_conn::testkit::{deterministic_handshake, run_handshakes};
    let (_, a) = deterministic_handshake(1, HandshakeParams::default());
    let (_, b) = deterministic_handshake(2, HandshakeParams::default());
    let mut run = run_handshakes(a, b, 64).unwrap();
    run.a.initial_plaintext = b"SECRET-PLAINTEXT".to_vec();
    let shown = format!("{:?}", run.a);
    assert!(shown.contains("initial_plaintext_len: 16"), "{shown}");
    for leak in ["SECRET", "83, 69, 67"] {
        assert!(!shown.contains(leak), "Debug shows plaintext: {shown}");
    }
}

/// Halves carry every accessor of the connection and go back together; halves
/// of two different connections do not.
#[tokio::test]
async fn tokio_halves_have_accessors_and_reunite() {
    async fn pair() -> (
        ptokio::SecretConnection<tokio::net::TcpStream>,
        ptokio::SecretConnection<tokio::net::TcpStream>,
    ) {
        p2p_conn::testkit::tokio_secret_pair(&Config::default()).await
    }
    let (a, mut b) = pair().await;
    let (a_peer, b_peer) = (a.remote_node_id(), b.remote_node_id());
    let (mut r, mut w) = a.into_split();
    assert_eq!(r.remote_node_id(), a_peer);
    assert_eq!(w.remote_node_id(), a_peer);
    assert_eq!(w.remote_public_key().node_id(), a_peer);
    w.send(b"through the owned write half").await.unwrap();
    let mut got = vec![0u8; 28];
    b.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"through the owned write half");
    b.send(b"back").await.unwrap();
    let mut back = [0u8; 4];
    r.read_exact(&mut back).await.unwrap();

    // Halves of another connection are refused and handed back intact.
    let (c, _d) = pair().await;
    let (cr, cw) = c.into_split();
    let err = r.reunite(cw).unwrap_err();
    let (r, _cw) = (err.0, err.1);
    let err = cr.reunite(w).unwrap_err();
    let (_cr, w) = (err.0, err.1);

    let mut a = r.reunite(w).unwrap();
    assert_eq!(a.remote_node_id(), a_peer);
    a.send(b"whole again").await.unwrap();
    let mut got = [0u8; 11];
    b.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"whole again");
    assert_eq!(b_peer, b.remote_node_id());

    // The locked split reunites too.
    let (r, w) = a.into_split_locked();
    assert_eq!(r.remote_node_id(), a_peer);
    let mut a = r.reunite(w).unwrap();
    a.send(b"locked").await.unwrap();
    let mut got = [0u8; 6];
    b.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"locked");
}

/// The std halves of a TCP connection: accessors and reunite.
#[test]
fn blocking_halves_have_accessors_and_reunite() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server_id = Identity::generate();
    let server_node = server_id.node_id();
    let peer = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        let mut conn = blocking::handshake_tcp(tcp, &server_id, &Config::default()).unwrap();
        let mut buf = [0u8; 5];
        conn.read_exact(&mut buf).unwrap();
        conn.write_all(&buf).unwrap();
        conn.flush().unwrap();
        conn.read_exact(&mut buf).unwrap();
        buf
    });
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    let conn = blocking::handshake_tcp(tcp, &Identity::generate(), &Config::default()).unwrap();
    let (mut r, mut w) = conn.split().unwrap();
    assert_eq!(r.remote_node_id(), server_node);
    assert_eq!(w.remote_node_id(), server_node);
    w.send(b"hello").unwrap();
    let mut buf = [0u8; 5];
    r.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"hello");
    let mut conn = r.reunite(w).unwrap();
    conn.send(b"again").unwrap();
    assert_eq!(&peer.join().unwrap(), b"again");
}
