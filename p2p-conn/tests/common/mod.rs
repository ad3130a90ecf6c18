//! Test-only helpers on top of the crate's `testkit` (the shared I/O double
//! and handshake pumps live there, for the fuzz targets too): byte-stream
//! checks here, child processes in [`process`], CometBFT's Go peer in
//! [`go_peer`].
#![allow(dead_code, unused_imports)]

pub mod alloc;
pub mod cometbft_node;
pub mod go_peer;
pub mod process;

pub use p2p_conn::testkit::*;
use proptest::test_runner::Config as ProptestConfig;

/// `cases` unless `PROPTEST_CASES` says otherwise; no regression files are
/// written (proptest prints the minimal failing input instead).
pub fn proptest_config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Check `got` byte for byte, naming the first bad offset and the 16 bytes
/// from there on each side (without dumping megabytes).
pub fn check_bytes(what: &str, got: &[u8], expected: &[u8]) {
    check_bytes_at(what, got, expected, |_| String::new());
}

/// [`check_bytes`], with `place(offset)` added after the first bad offset
/// (e.g. ` (message 3, offset 17)`).
pub fn check_bytes_at(
    what: &str,
    got: &[u8],
    expected: &[u8],
    place: impl FnOnce(usize) -> String,
) {
    if got == expected {
        return;
    }
    let at = got
        .iter()
        .zip(expected)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(expected.len()));
    let show = |b: &[u8]| format!("{:02x?}", &b[at.min(b.len())..(at + 16).min(b.len())]);
    panic!(
        "{what}: got {} bytes, expected {}; first difference at byte {at}{}: got {} expected {}",
        got.len(),
        expected.len(),
        place(at),
        show(got),
        show(expected),
    );
}

/// Resume a tokio task's panic in the caller (or fail with the task's
/// cancellation).
pub fn rethrow(e: tokio::task::JoinError) -> ! {
    match e.try_into_panic() {
        Ok(payload) => std::panic::resume_unwind(payload),
        Err(e) => panic!("task failed: {e}"),
    }
}

/// Run-length summary of a size list, e.g. `[1024 x2, 1, 1024 x2, 1]`; after
/// 12 runs, only how many sizes are left.
pub fn summarize(sizes: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sizes.len() {
        let run = sizes[i..].iter().take_while(|&&n| n == sizes[i]).count();
        parts.push(if run == 1 {
            sizes[i].to_string()
        } else {
            format!("{} x{run}", sizes[i])
        });
        i += run;
        if parts.len() == 12 && i < sizes.len() {
            parts.push(format!("... ({} more)", sizes.len() - i));
            break;
        }
    }
    format!("[{}]", parts.join(", "))
}

/// Both ends of one loopback TCP connection, handshaken by the tokio
/// adapter with fresh identities and `cfg`: (accepting end, dialing end).
pub async fn tokio_tcp_pair(
    cfg: &p2p_conn::Config,
) -> (
    p2p_conn::io::tokio::SecretConnection<tokio::net::TcpStream>,
    p2p_conn::io::tokio::SecretConnection<tokio::net::TcpStream>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (ia, ib) = (
        p2p_conn::Identity::generate(),
        p2p_conn::Identity::generate(),
    );
    let (acc, dial) = tokio::join!(listener.accept(), tokio::net::TcpStream::connect(addr));
    let (a, b) = tokio::join!(
        p2p_conn::io::tokio::handshake(acc.unwrap().0, &ia, cfg),
        p2p_conn::io::tokio::handshake(dial.unwrap(), &ib, cfg)
    );
    (a.unwrap(), b.unwrap())
}
