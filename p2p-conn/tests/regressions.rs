//! Regression tests for defects found by a code review: each failed before
//! its fix (codec holding back frame #0 data, no flush during the handshake,
//! overflow on a huge timeout in the std adapter and the CLI, node key file
//! mode on overwrite).

use std::time::Duration;

use ed25519_dalek::Signer;
use futures::StreamExt;
use p2p_conn::io::{blocking, codec, tokio as ptokio};
use p2p_conn::proto::aead::Cipher;
use p2p_conn::proto::handshake::EPH_MSG_LEN;
use p2p_conn::proto::FrameSize;
use p2p_conn::proto::{auth_sig, kdf, Backend, Sealer, STANDARD_SEALED_FRAME};
use p2p_conn::{Config, Identity};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use x25519_dalek::{PublicKey as XPublic, StaticSecret};

/// A hand-built peer (keys derived from the public sans-IO pieces, as
/// `tests/evil_peer.rs` does) that puts `early` application bytes after its
/// AuthSigMessage in frame #0 (spec §5: receivers MUST deliver them first),
/// then reads our frame #0 and waits for us to speak, keeping the stream open.
async fn early_data_peer(mut io: DuplexStream, early: Vec<u8>) -> DuplexStream {
    let seed = [0x42u8; 32];
    let mut first = [0u8; EPH_MSG_LEN];
    io.read_exact(&mut first).await.unwrap();
    let victim_eph: [u8; 32] = first[3..].try_into().unwrap();

    let secret = StaticSecret::from([0x17u8; 32]);
    let eph = XPublic::from(&secret).to_bytes();
    let mut m = vec![0x22, 0x0a, 0x20];
    m.extend_from_slice(&eph);
    io.write_all(&m).await.unwrap();

    let dh = secret.diffie_hellman(&XPublic::from(victim_eph)).to_bytes();
    let (lo, hi, least) = kdf::sort_keys(&eph, &victim_eph);
    let challenge = kdf::challenge(lo, hi, &dh);
    let keys = kdf::derive_keys(&dh, least);
    let sk = ed25519_dalek::SigningKey::from_bytes(&seed);
    let auth = auth_sig::encode(
        &sk.verifying_key().to_bytes(),
        &sk.sign(&challenge).to_bytes(),
    );
    let mut frame0_plain = auth.to_vec();
    frame0_plain.extend_from_slice(&early);
    let mut sealer = Sealer::new(
        Cipher::new(Backend::RustCrypto, &keys.send),
        FrameSize::STANDARD,
    );
    let mut out = Vec::new();
    sealer.seal_frame(&frame0_plain, &mut out).unwrap();
    io.write_all(&out).await.unwrap();

    let mut theirs = vec![0u8; STANDARD_SEALED_FRAME];
    io.read_exact(&mut theirs).await.unwrap();
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
    let (got, _peer_io) = tokio::join!(victim, early_data_peer(theirs, early.clone()));
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
    let (got, _peer_io) = tokio::join!(victim, early_data_peer(theirs, early.clone()));
    match got {
        Ok(Some(Ok(item))) => assert_eq!(&item[..], &early[..]),
        other => panic!("expected the frame #0 bytes, got {other:?}"),
    }
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

/// Defect: the CLI checks `--handshake-timeout` only for being finite and
/// positive, then calls `Duration::from_secs_f64`, which panics on values
/// above ~1.8e19 s. README: failures exit 1 with one `error:` line.
#[test]
fn cli_huge_handshake_timeout_is_a_clean_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_p2p-conn"))
        .args(["dial", "127.0.0.1:1", "--handshake-timeout", "1e20"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(err.starts_with("error: "), "stderr: {err}");
    assert!(!err.contains("panicked"), "stderr: {err}");
}

/// Defect: `Identity::save` documents "readable by its owner only on Unix",
/// but `mode(0o600)` only applies when the file is created; saving over an
/// existing world-readable file leaves the secret key world-readable.
#[cfg(unix)]
#[test]
fn identity_save_over_existing_file_is_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("p2p-conn-review-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("node_key.json");
    std::fs::write(&path, b"old").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    Identity::generate().save(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(mode, 0o600, "node key saved with mode {mode:o}");
}
