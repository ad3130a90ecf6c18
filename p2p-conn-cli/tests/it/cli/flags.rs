//! Connection flags on `listen` and `dial`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{file_in, file_out, pseudo_random, spawn, spawn_io, BIN, LISTEN_LIMIT};
use crate::common::process::{free_port, scratch};

#[test]
fn frame_size_mismatch_names_frame_size() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut listener = spawn_io(
        &["listen", &addr, "--frame-size", "4096"],
        Stdio::null(),
        Stdio::piped(),
    );
    listener.wait_listening(port, Instant::now() + LISTEN_LIMIT);
    let dialer = spawn_io(&["dial", &addr], Stdio::null(), Stdio::piped());
    let d = dialer.finish_within(Duration::from_secs(30));
    let l = listener.finish_within(Duration::from_secs(30));
    let derr = String::from_utf8_lossy(&d.stderr);
    let lerr = String::from_utf8_lossy(&l.stderr);
    // The listener's first line is `listening ADDR`; then the failure.
    let lerr = lerr
        .strip_prefix(&format!("listening {addr}\n"))
        .unwrap_or_else(|| panic!("listener: {lerr}"));
    // Exit 4: the handshake failed.
    assert_eq!(d.status.code(), Some(4), "dialer: {derr}");
    assert_eq!(l.status.code(), Some(4), "listener: {lerr}");
    for err in [&*derr, lerr] {
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("error: "), "{err}");
    }
    assert!(
        derr.contains("frame_size") || lerr.contains("frame_size"),
        "neither side names frame_size:\n{derr}{lerr}"
    );
}

#[test]
fn same_non_standard_settings_exchange_data() {
    let dir = scratch("frame4096");
    let input = dir.join("input");
    let copy = dir.join("copy");
    let data = pseudo_random(300_001, 42);
    std::fs::write(&input, &data).unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let flags = [
        "--frame-size",
        "4096",
        "--flush-size",
        "20000",
        "--read-buffer",
        "5000",
        "--backend",
        "rustcrypto",
    ];
    let mut largs = vec!["listen", addr.as_str()];
    largs.extend_from_slice(&flags);
    let mut listener = spawn_io(&largs, Stdio::null(), file_out(&copy));
    listener.wait_listening(port, Instant::now() + LISTEN_LIMIT);
    let mut dargs = vec!["dial", addr.as_str(), "--connect-timeout", "5"];
    dargs.extend_from_slice(&flags);
    let dialer = spawn_io(&dargs, file_in(&input), Stdio::piped());
    let d = dialer.finish_within(Duration::from_secs(30));
    let l = listener.finish_within(Duration::from_secs(30));
    d.assert_ok("dialer");
    l.assert_ok("listener");
    assert!(std::fs::read(&copy).unwrap() == data, "copy differs");
}

#[test]
fn bad_connection_flags_fail_with_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["dial", "127.0.0.1:9", "--connect-timeout", "0"],
            "--connect-timeout",
        ),
        (
            &["dial", "127.0.0.1:9", "--connect-timeout=-1"],
            "--connect-timeout",
        ),
        (
            &["dial", "127.0.0.1:9", "--connect-timeout", "NaN"],
            "--connect-timeout",
        ),
        (&["dial", "127.0.0.1:9", "--frame-size", "7"], "frame size"),
        (
            &["listen", "127.0.0.1:0", "--frame-size", "0"],
            "frame size",
        ),
        (
            &["listen", "127.0.0.1:0", "--handshake-timeout", "0"],
            "--handshake-timeout",
        ),
    ];
    for (args, needle) in cases {
        let out = spawn(args, b"").finish_within(Duration::from_secs(10));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(needle),
            "{args:?}: {err}"
        );
    }
}

/// A listener whose accept queue is full drops new SYNs, so a dial to it
/// cannot connect: `--connect-timeout` must end the wait with one line.
#[test]
fn connect_timeout_ends_a_hanging_dial() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (listener, port) = rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let port = sock.local_addr().unwrap().port();
        (sock.listen(0).unwrap(), port)
    });
    // Fill the accept queue (never accepted).
    let mut fillers = Vec::new();
    for _ in 0..4 {
        if let Ok(s) = std::net::TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            Duration::from_millis(300),
        ) {
            fillers.push(s);
        }
    }
    let start = Instant::now();
    let out = spawn(
        &[
            "dial",
            &format!("127.0.0.1:{port}"),
            "--connect-timeout",
            "1",
        ],
        b"",
    )
    .finish_within(Duration::from_secs(20));
    let err = String::from_utf8_lossy(&out.stderr);
    // Exit 3 (connect), not 7: the TCP connection never came.
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "error: connect failed: no TCP connection to 127.0.0.1:{port} within 1s"
        )),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(15));
    drop((listener, fillers));
}

/// Defect found by a code review: the CLI checks `--handshake-timeout`
/// only for being finite and positive, then calls `Duration::from_secs_f64`, which panics on values
/// above ~1.8e19 s. README: failures exit 1 with one `error:` line.
#[test]
fn cli_huge_handshake_timeout_is_a_clean_error() {
    let out = Command::new(BIN)
        .args(["dial", "127.0.0.1:1", "--handshake-timeout", "1e20"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(err.starts_with("error: "), "stderr: {err}");
    assert!(!err.contains("panicked"), "stderr: {err}");
}

// ---------------------------------------------------------------------------
// A refused peer never exits 0: the side that refuses resets the connection.
