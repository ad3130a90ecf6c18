//! `listen` and `dial` as a netcat: addresses, both directions with
//! half-close, failures worded by their cause.

use std::io::Read;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use super::{
    run_cli, spawn, spawn_listener, spawn_listener_any_port, BIN, LISTEN_LIMIT, RUN_LIMIT,
};
use crate::common::process::{free_port, listening, scratch, Feed, Proc};

/// `listen 127.0.0.1:0` binds a free port and names it on stderr before any
/// peer connects, so a dialer can start at once.
#[test]
fn listen_on_port_zero_prints_the_bound_address() {
    let (listener, addr) = spawn_listener_any_port(&[], Feed::Now(b"from listener".to_vec()));
    let bound: std::net::SocketAddr = addr.parse().unwrap_or_else(|e| panic!("{addr:?}: {e}"));
    assert_eq!(bound.ip(), std::net::Ipv4Addr::LOCALHOST);
    assert_ne!(bound.port(), 0, "{addr}");
    let d = spawn(&["dial", &addr], b"from dialer").finish_within(Duration::from_secs(30));
    let l = listener.finish_within(Duration::from_secs(30));
    d.assert_ok("dialer");
    l.assert_ok("listener");
    assert_eq!(d.stdout, b"from listener");
    assert_eq!(l.stdout, b"from dialer");
    let lines = l.stderr_lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0], format!("listening {addr}"));
    assert!(lines[1].starts_with("peer "), "{lines:?}");
}

/// The readiness probe the listener tests rely on.
#[test]
fn listening_probe_sees_a_listener() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    assert!(listening(port));
    drop(listener);
    // A process another test is spawning right now may hold a copy of the
    // socket until it execs (close-on-exec), so give it a moment.
    let start = Instant::now();
    while listening(port) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "port {port} still listening"
        );
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn keygen_and_id() {
    let dir = scratch("keygen");
    let key = dir.join("node_key.json");
    let out = run_cli(&["keygen", "--out", key.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(printed.len(), 40);
    let id = p2p_conn::keyfile::load(&key).unwrap();
    assert_eq!(printed, id.node_id().to_string());
    let out = run_cli(&["id", "--key", key.to_str().unwrap()]);
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), printed);
    // Never overwrites a key.
    let out = run_cli(&["keygen", "--out", key.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
}

#[test]
fn netcat_exchange_both_ways_with_half_close() {
    let dir = scratch("nc");
    let lkey = dir.join("l.json");
    let dkey = dir.join("d.json");
    let lid = p2p_conn::Identity::generate();
    p2p_conn::keyfile::save_new(&lid, &lkey).unwrap();
    let did = p2p_conn::Identity::generate();
    p2p_conn::keyfile::save_new(&did, &dkey).unwrap();
    let up: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let down: Vec<u8> = (0..70_001u32).map(|i| (i % 13) as u8).collect();
    let port = free_port();
    // The listener's stdin stays open until the listener has printed the
    // whole upload, as a person typing would: the dialer has half-closed by
    // then and must keep reading until the listener's stream ends too.
    let addr = format!("127.0.0.1:{port}");
    let mut listener = Proc::spawn(
        Path::new(BIN),
        &["listen", &addr, "--key", lkey.to_str().unwrap()],
        Feed::UntilOutput(down.clone(), up.len()),
    );
    listener.wait_listening(port, Instant::now() + LISTEN_LIMIT);
    let target = format!("{}@{addr}", lid.node_id());
    let dialer = spawn(&["dial", &target, "--key", dkey.to_str().unwrap()], &up);
    let d = dialer.finish_within(Duration::from_secs(30));
    let l = listener.finish_within(Duration::from_secs(30));
    d.assert_ok("dialer");
    l.assert_ok("listener");
    assert_eq!(l.stdout, up);
    assert_eq!(d.stdout, down);
    assert_eq!(
        String::from_utf8(d.stderr).unwrap(),
        format!("peer {}\n", lid.node_id())
    );
    assert_eq!(
        String::from_utf8(l.stderr).unwrap(),
        format!("listening {addr}\npeer {}\n", did.node_id())
    );
}

/// `dial` takes the `tcp://` forms config.toml and `net_info` use, with
/// and without the node ID.
#[test]
fn dial_takes_tcp_addresses() {
    let dir = scratch("dial-tcp");
    let lkey = dir.join("l.json");
    let lid = p2p_conn::Identity::generate();
    p2p_conn::keyfile::save_new(&lid, &lkey).unwrap();
    let lkey = lkey.to_str().unwrap();
    for form in ["tcp://ADDR", "tcp://ID@ADDR"] {
        let (listener, addr) = spawn_listener_any_port(&["--key", lkey], Feed::Now(Vec::new()));
        let target = form
            .replace("ID", &lid.node_id().to_string())
            .replace("ADDR", &addr);
        let d = spawn(&["dial", &target], b"hello").finish_within(Duration::from_secs(30));
        let l = listener.finish_within(Duration::from_secs(30));
        d.assert_ok(&target);
        l.assert_ok(&target);
        assert_eq!(l.stdout, b"hello", "{target}");
    }
}

/// `listen` takes `tcp://HOST:PORT`, config.toml's `laddr` form, too.
#[test]
fn listen_takes_a_tcp_address() {
    let args = ["listen", "tcp://127.0.0.1:0"];
    let mut listener = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let line = listener.next_line(Instant::now() + LISTEN_LIMIT);
    let addr = line
        .strip_prefix("listening 127.0.0.1:")
        .unwrap_or_else(|| listener.fail(&format!("first stderr line {line:?}")))
        .to_string();
    let d = spawn(&["dial", &format!("127.0.0.1:{addr}")], b"hi").finish_within(RUN_LIMIT);
    d.assert_ok("dial");
    let l = listener.finish_within(RUN_LIMIT);
    l.assert_ok("listen");
    assert_eq!(l.stdout, b"hi");
}

/// A `dial` address that cannot name a node is a usage error (exit 1, one
/// line naming the address), before anything is dialed: never exit 3
/// ("connect"), which a script reads as "node down".
#[test]
fn dial_refuses_malformed_addresses_as_usage() {
    for addr in [
        "127.0.0.1",
        "127.0.0.1:",
        ":26656",
        "127.0.0.1:99999",
        "127.0.0.1:0",
        "tcp://",
        "tcp://127.0.0.1",
        "http://127.0.0.1:26657",
        "nothex@127.0.0.1:26656",
    ] {
        let out = spawn(&["dial", addr], b"").finish_within(Duration::from_secs(10));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{addr}: {err}");
        assert_eq!(err.lines().count(), 1, "{addr}: {err}");
        assert!(err.starts_with("error: "), "{addr}: {err}");
    }
}

#[test]
fn peer_id_mismatch_fails_with_one_line() {
    let port = free_port();
    let listener = spawn_listener(port, &[], b"");
    let wrong = "00".repeat(20);
    let out = spawn(
        &["dial", &format!("127.0.0.1:{port}"), "--peer-id", &wrong],
        b"",
    )
    .finish_within(Duration::from_secs(30));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: peer ID mismatch"), "{err}");
    let _ = listener.finish_within(Duration::from_secs(30));
}

#[test]
fn stalled_peer_times_out() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let holder = std::thread::spawn(move || {
        let (mut s, _) = silent.accept().unwrap();
        let mut b = [0u8; 64];
        // Read and ignore until the dialer gives up.
        while let Ok(n) = s.read(&mut b) {
            if n == 0 {
                break;
            }
        }
    });
    let start = Instant::now();
    let out = spawn(
        &[
            "dial",
            &format!("127.0.0.1:{port}"),
            "--handshake-timeout",
            "0.5",
        ],
        b"",
    )
    .finish_within(Duration::from_secs(10));
    assert!(start.elapsed() < Duration::from_secs(5));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert!(err.starts_with("error: timeout"), "{err}");
    holder.join().unwrap();
}

#[test]
/// Exit 3 is the stage `connect` (docs/operator-manual.md, "Exit
/// codes"): the message names the same stage.
fn connection_refused_is_a_connect_failure() {
    let port = free_port();
    let out = run_cli(&["dial", &format!("127.0.0.1:{port}")]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.starts_with(&format!(
            "error: connect failed: no TCP connection to 127.0.0.1:{port}: "
        )),
        "{err}"
    );
}

// ---------------------------------------------------------------------------
// Key files: errors never echo the secret; keygen never replaces a path.
