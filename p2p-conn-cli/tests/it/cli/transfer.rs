//! Data transfer: no side exits 0 before both directions are done, and
//! stdin and stdout move in large chunks.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{file_in, file_out, pseudo_random, spawn_io, BIN, LISTEN_LIMIT};
use crate::common::process::{free_port, scratch, Feed, Proc};

const TRANSFER_BYTES: usize = 10 << 20;

/// `listen < /dev/null > copy` and `dial < file`: the dialer must not stop at
/// the listener's end of stream before its own stdin is through.
#[test]
fn file_to_listener_arrives_whole() {
    let dir = scratch("to-listener");
    let input = dir.join("input");
    let copy = dir.join("copy");
    let data = pseudo_random(TRANSFER_BYTES, 0x9e37_79b9_7f4a_7c15);
    std::fs::write(&input, &data).unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut listener = spawn_io(&["listen", &addr], Stdio::null(), file_out(&copy));
    listener.wait_listening(port, Instant::now() + LISTEN_LIMIT);
    let dialer = spawn_io(&["dial", &addr], file_in(&input), Stdio::piped());
    let d = dialer.finish_within(Duration::from_secs(60));
    let l = listener.finish_within(Duration::from_secs(60));
    d.assert_ok("dialer");
    l.assert_ok("listener");
    assert!(d.stdout.is_empty());
    let got = std::fs::read(&copy).unwrap();
    assert_eq!(got.len(), data.len(), "copy has the wrong length");
    assert!(got == data, "copy differs from the input");
}

/// The mirror: the listener sends a file, the dialer's stdin is empty.
#[test]
fn file_from_listener_arrives_whole() {
    let dir = scratch("from-listener");
    let input = dir.join("input");
    let copy = dir.join("copy");
    let data = pseudo_random(TRANSFER_BYTES, 0x0123_4567_89ab_cdef);
    std::fs::write(&input, &data).unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut listener = spawn_io(&["listen", &addr], file_in(&input), Stdio::piped());
    listener.wait_listening(port, Instant::now() + LISTEN_LIMIT);
    let dialer = spawn_io(&["dial", &addr], Stdio::null(), file_out(&copy));
    let d = dialer.finish_within(Duration::from_secs(60));
    let l = listener.finish_within(Duration::from_secs(60));
    d.assert_ok("dialer");
    l.assert_ok("listener");
    let got = std::fs::read(&copy).unwrap();
    assert_eq!(got.len(), data.len(), "copy has the wrong length");
    assert!(got == data, "copy differs from the input");
}

/// The `io ...` line `--count-io` prints on stderr, as (name, number) pairs.
fn io_counts(stderr: &[u8]) -> std::collections::HashMap<String, u64> {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .find(|l| l.starts_with("io "))
        .unwrap_or_else(|| panic!("no `io` line in {text:?}"));
    line.split_whitespace()
        .skip(1)
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or_else(|| panic!("{line}"));
            (
                k.to_string(),
                v.parse().unwrap_or_else(|e| panic!("{line}: {e}")),
            )
        })
        .collect()
}

/// Bytes a copy must move per stdout write(2), on average, at least.
///
/// The receiving side gathers the opened frames the connection has ready
/// into one write of up to 256 KiB, and one socket read brings up to the
/// read buffer (64 KiB) of them, so a bulk copy averages far more than this
/// (about 230 KiB per write in the runs this was written with). The old
/// download loop wrote each frame alone: 1 KiB per write, 32 times over
/// this bound.
const MIN_BYTES_PER_STDOUT_WRITE: u64 = 32 * 1024;

/// 16 MiB through `dial < file` into `listen > copy` (or the listener
/// sending, `sender_listens`): every byte arrives, in order, and both stdin
/// and stdout move it in large chunks. A count of read(2) and write(2)
/// calls, never a timing: `p2p-conn-lab/scripts/cli-copy.sh` measures the speed.
fn copy_in_large_chunks(sender_listens: bool) {
    const BYTES: u64 = 16 << 20;
    let dir = scratch(&format!("chunks-{sender_listens}"));
    let input = dir.join("input");
    let copy = dir.join("copy");
    let data = pseudo_random(BYTES as usize, 0x5eed ^ sender_listens as u64);
    std::fs::write(&input, &data).unwrap();
    let (send_in, recv_in) = (file_in(&input), Stdio::null());
    let (send_out, recv_out) = (Stdio::null(), file_out(&copy));
    let (l_io, d_io) = if sender_listens {
        ((send_in, send_out), (recv_in, recv_out))
    } else {
        ((recv_in, recv_out), (send_in, send_out))
    };
    let mut listener = Proc::start(
        Command::new(BIN)
            .args(["listen", "127.0.0.1:0", "--count-io"])
            .stdin(l_io.0)
            .stdout(l_io.1),
        Feed::none(),
    );
    let line = listener.next_line(Instant::now() + LISTEN_LIMIT);
    let addr = line
        .strip_prefix("listening ")
        .unwrap_or_else(|| listener.fail(&format!("first line {line:?}")))
        .to_string();
    let dialer = Proc::start(
        Command::new(BIN)
            .args(["dial", &addr, "--count-io"])
            .stdin(d_io.0)
            .stdout(d_io.1),
        Feed::none(),
    );
    let d = dialer.finish_within(Duration::from_secs(120));
    let l = listener.finish_within(Duration::from_secs(120));
    d.assert_ok("dialer");
    l.assert_ok("listener");
    let got = std::fs::read(&copy).unwrap();
    assert_eq!(got.len(), data.len(), "copy has the wrong length");
    assert!(got == data, "copy differs from the input");
    let (sender, receiver) = if sender_listens { (&l, &d) } else { (&d, &l) };
    let sent = io_counts(&sender.stderr);
    let received = io_counts(&receiver.stderr);
    let what = format!("sender {sent:?}, receiver {received:?}");
    assert_eq!(sent["stdin-bytes"], BYTES, "{what}");
    assert_eq!(received["stdout-bytes"], BYTES, "{what}");
    // Reads of 64 KiB from a file, and the read that sees end of file.
    assert!(sent["stdin-reads"] <= BYTES / (64 << 10) + 1, "{what}");
    assert!(
        received["stdout-writes"] <= BYTES / MIN_BYTES_PER_STDOUT_WRITE,
        "{what}"
    );
}

#[test]
fn file_to_listener_moves_in_large_chunks() {
    copy_in_large_chunks(false);
}

#[test]
fn file_from_listener_moves_in_large_chunks() {
    copy_in_large_chunks(true);
}

/// How the test peer of [`sender_fails_when_peer_quits`] stops.
#[derive(Clone, Copy, Debug)]
enum Quit {
    /// Close with unread data in the receive queue: the kernel resets.
    Reset,
    /// Half-close its sending side (a clean end of its stream), stop reading
    /// for a while, then close.
    HalfCloseThenStopReading,
}

/// A dialer sends 40 MB to a peer that handshakes, reads about 100 KB and
/// then quits as `how` says: the dialer must exit 9 (the connection failed
/// after the handshake) with `peer ...` and one `error: connection failed
/// ...` line, never 0 with stdin unsent.
fn sender_fails_when_peer_quits(how: Quit) {
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let peer = std::thread::spawn(move || {
        let (tcp, _) = server.accept().unwrap();
        let raw = tcp.try_clone().unwrap();
        let cfg = p2p_conn::Config::default();
        let mut conn =
            p2p_conn::io::blocking::handshake_tcp(tcp, &p2p_conn::Identity::generate(), &cfg)
                .unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = 0;
        while got < 100_000 {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        if let Quit::HalfCloseThenStopReading = how {
            raw.shutdown(std::net::Shutdown::Write).unwrap();
            std::thread::sleep(Duration::from_millis(500));
        }
        // Dropping with unread data in the receive queue sends a reset.
    });
    let dir = scratch(&format!("quit-{how:?}"));
    let input = dir.join("input");
    std::fs::write(&input, pseudo_random(4 * TRANSFER_BYTES, 7)).unwrap();
    let dialer = spawn_io(
        &["dial", &format!("127.0.0.1:{port}")],
        file_in(&input),
        Stdio::null(),
    );
    let out = dialer.finish_within(Duration::from_secs(60));
    peer.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{how:?}: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{how:?}: {err}");
    assert!(lines[0].starts_with("peer "), "{how:?}: {err}");
    assert!(
        lines[1].starts_with("error: connection failed"),
        "{how:?}: {err}"
    );
}

#[test]
fn peer_reset_mid_transfer_fails_the_sender() {
    sender_fails_when_peer_quits(Quit::Reset);
}

#[test]
fn peer_ending_its_stream_early_does_not_end_the_upload() {
    sender_fails_when_peer_quits(Quit::HalfCloseThenStopReading);
}

// ---------------------------------------------------------------------------
// Connection flags on listen and dial.
