//! The `p2p-conn` binary as a user runs it: keys, netcat-style exchange,
//! failure exits.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::process::{free_port, listening, run, scratch, Feed, Finished, Proc};

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

/// Bound on the commands that run to their end by themselves (`keygen`,
/// `id`, a dial that cannot connect).
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// Bound on a listener's start, from its spawn to listening.
const LISTEN_LIMIT: Duration = Duration::from_secs(5);

/// `p2p-conn args` to its end.
fn run_cli(args: &[&str]) -> Finished {
    run(Path::new(BIN), args, RUN_LIMIT)
}

/// `p2p-conn args` with `stdin`, then end of file.
fn spawn(args: &[&str], stdin: &[u8]) -> Proc {
    Proc::spawn(Path::new(BIN), args, Feed::Now(stdin.to_vec()))
}

/// Start a listener and wait until it listens.
fn spawn_listener(port: u16, extra: &[&str], stdin: &[u8]) -> Proc {
    let addr = format!("127.0.0.1:{port}");
    let mut args = vec!["listen", addr.as_str()];
    args.extend_from_slice(extra);
    let mut listener = spawn(&args, stdin);
    listener.wait_listening(port, Instant::now() + LISTEN_LIMIT);
    listener
}

/// Start `listen 127.0.0.1:0 extra...` and the address it reports on its
/// first stderr line (`listening ADDR`).
fn spawn_listener_any_port(extra: &[&str], feed: Feed) -> (Proc, String) {
    let mut args = vec!["listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut listener = Proc::spawn(Path::new(BIN), &args, feed);
    let line = listener.next_line(Instant::now() + LISTEN_LIMIT);
    match line.strip_prefix("listening ") {
        Some(addr) => {
            let addr = addr.to_string();
            (listener, addr)
        }
        None => listener.fail(&format!("first stderr line {line:?}, not `listening ADDR`")),
    }
}

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
fn connection_refused_is_an_io_error() {
    let port = free_port();
    let out = run_cli(&["dial", &format!("127.0.0.1:{port}")]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.starts_with("error: I/O error"), "{err}");
}

// ---------------------------------------------------------------------------
// Key files: errors never echo the secret; keygen never replaces a path.

/// Every 8-byte window of `secret` that occurs in `text`, if any.
fn leaked_window(text: &str, secret: &str) -> Option<String> {
    let s = secret.as_bytes();
    s.windows(8)
        .find(|w| text.as_bytes().windows(8).any(|t| t == *w))
        .map(|w| String::from_utf8_lossy(w).into_owned())
}

#[test]
fn malformed_key_file_never_echoes_the_secret() {
    use base64::Engine;
    let dir = scratch("leak");
    // A valid-looking secret: base64 of 64 random-ish bytes (88 characters).
    let raw: Vec<u8> = (0..64u32)
        .map(|i| (i.wrapping_mul(97) ^ 0x5a) as u8)
        .collect();
    let secret = base64::engine::general_purpose::STANDARD.encode(&raw);
    let ty = "tendermint/PrivKeyEd25519";
    let cases = [
        // priv_key is the bare value instead of an object.
        ("bare", format!(r#"{{"priv_key":"{secret}"}}"#)),
        // "type" and "value" swapped by a hand edit.
        (
            "swapped",
            format!(r#"{{"priv_key":{{"type":"{secret}","value":"{ty}"}}}}"#),
        ),
        // A field of the wrong type right after the value.
        (
            "wrong-field-type",
            format!(r#"{{"priv_key":{{"value":"{secret}","type":5}}}}"#),
        ),
        // Trailing garbage after a complete document.
        (
            "trailing",
            format!(r#"{{"priv_key":{{"type":"{ty}","value":"{secret}"}}}} {secret}"#),
        ),
        // Not base64.
        (
            "not-base64",
            format!(r#"{{"priv_key":{{"type":"{ty}","value":"{secret}!!{secret}"}}}}"#),
        ),
        // Truncated in the middle of the value.
        (
            "truncated",
            format!(r#"{{"priv_key":{{"type":"{ty}","value":"{secret}"#),
        ),
    ];
    for (name, json) in cases {
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, &json).unwrap();
        let p = path.to_str().unwrap();
        for args in [
            vec!["id", "--key", p],
            vec!["listen", "127.0.0.1:0", "--key", p],
        ] {
            let out = spawn(&args, b"").finish_within(Duration::from_secs(10));
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{name} {args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{name} {args:?}: {err}");
            assert!(err.starts_with("error: "), "{name} {args:?}: {err}");
            if let Some(w) = leaked_window(&err, &secret) {
                panic!("{name} {args:?}: stderr echoes the secret ({w:?}): {err}");
            }
            assert!(err.contains(p), "{name}: error must name the file: {err}");
        }
    }
}

#[test]
fn keygen_never_replaces_an_existing_path() {
    let dir = scratch("keygen-existing");
    let existing = dir.join("node_key.json");
    std::fs::write(&existing, b"precious").unwrap();
    let out = run_cli(&["keygen", "--out", existing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: ") && err.contains("already exists"),
        "{err}"
    );
    assert_eq!(std::fs::read(&existing).unwrap(), b"precious");

    // A dangling symlink is an existing path too: writing through it would
    // create a key wherever it points.
    #[cfg(unix)]
    {
        let target = dir.join("elsewhere.json");
        let link = dir.join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let out = run_cli(&["keygen", "--out", link.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("already exists"),
            "{out:?}"
        );
        assert!(!target.exists(), "keygen wrote through a symlink");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    }
    // Nothing but what the test made is left in the directory (no temp files).
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let expected: &[&str] = if cfg!(unix) {
        &["link.json", "node_key.json"]
    } else {
        &["node_key.json"]
    };
    assert_eq!(names, expected);
}

// ---------------------------------------------------------------------------
// Data transfer: no side exits 0 before both directions are done.

/// `len` pseudo-random bytes (xorshift64*), so a shifted or repeated chunk
/// cannot compare equal by accident.
fn pseudo_random(len: usize, mut seed: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        v.extend_from_slice(&seed.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    v.truncate(len);
    v
}

/// `p2p-conn args` with stdin and stdout as given (a piped stdout is
/// collected; stdin gets no input).
fn spawn_io(args: &[&str], stdin: Stdio, stdout: Stdio) -> Proc {
    Proc::start(
        Command::new(BIN).args(args).stdin(stdin).stdout(stdout),
        Feed::none(),
    )
}

fn file_in(path: &std::path::Path) -> Stdio {
    Stdio::from(std::fs::File::open(path).unwrap())
}

fn file_out(path: &std::path::Path) -> Stdio {
    Stdio::from(std::fs::File::create(path).unwrap())
}

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
            "error: timeout: could not connect to 127.0.0.1:{port} within 1s"
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

/// How many times each refusal test runs: the outcome used to depend on
/// nothing but timing (a clean close read as a clean end).
const REFUSAL_RUNS: usize = 5;

/// Fail unless `peer` (the refused side's peer) exited non-zero with one
/// `error:` line that names the reset.
fn assert_saw_reset(peer: &Finished, what: &str) {
    let err = String::from_utf8_lossy(&peer.stderr);
    assert!(!peer.status.success(), "{what}: the peer exited 0: {err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ") && last.contains("reset the connection"),
        "{what}: {err}"
    );
}

/// `listen --peer-id` (another ID) refuses the dialer, which was fed a line
/// and end of file.
#[test]
fn dialer_refused_by_peer_id_exits_non_zero() {
    let wrong = "00".repeat(20);
    for run in 0..REFUSAL_RUNS {
        let (listener, addr) = spawn_listener_any_port(&["--peer-id", &wrong], Feed::none());
        let d = spawn(&["dial", &addr], b"hello\n").finish_within(Duration::from_secs(30));
        let l = listener.finish_within(Duration::from_secs(30));
        let lerr = String::from_utf8_lossy(&l.stderr);
        assert!(
            lerr.contains("error: peer ID mismatch"),
            "run {run}: {lerr}"
        );
        assert_saw_reset(&d, &format!("run {run}: dialer"));
    }
}

/// `dial WRONG_ID@ADDR` refuses the listener, which was fed a line and end
/// of file.
#[test]
fn listener_refused_by_peer_id_exits_non_zero() {
    let wrong = "00".repeat(20);
    for run in 0..REFUSAL_RUNS {
        let (listener, addr) = spawn_listener_any_port(&[], Feed::Now(b"hello\n".to_vec()));
        let d = spawn(&["dial", &format!("{wrong}@{addr}")], b"")
            .finish_within(Duration::from_secs(30));
        let l = listener.finish_within(Duration::from_secs(30));
        let derr = String::from_utf8_lossy(&d.stderr);
        assert!(
            derr.contains("error: peer ID mismatch"),
            "run {run}: {derr}"
        );
        assert_saw_reset(&l, &format!("run {run}: listener"));
    }
}

/// `listen --nodeinfo` refuses a dialer whose NodeInfo breaks a rule (an
/// empty moniker); the dialer finds the listener's NodeInfo fine, goes on to
/// copy, and must not exit 0.
#[test]
fn dialer_refused_by_nodeinfo_exits_non_zero() {
    for run in 0..REFUSAL_RUNS {
        let (listener, addr) =
            spawn_listener_any_port(&["--nodeinfo", "--network", "refusal-net"], Feed::none());
        let d = spawn(
            &[
                "dial",
                &addr,
                "--nodeinfo",
                "--network",
                "refusal-net",
                "--moniker",
                "",
            ],
            b"hello\n",
        )
        .finish_within(Duration::from_secs(30));
        let l = listener.finish_within(Duration::from_secs(30));
        let lerr = String::from_utf8_lossy(&l.stderr);
        assert!(lerr.contains("not acceptable"), "run {run}: {lerr}");
        assert!(lerr.contains("moniker"), "run {run}: {lerr}");
        assert_eq!(l.status.code(), Some(6), "run {run}: {lerr}");
        assert_saw_reset(&d, &format!("run {run}: dialer"));
    }
}

// ---------------------------------------------------------------------------
// Exit codes by stage, and the NodeInfo flags.

/// `dial --nodeinfo` against scripted peers (see `probe.rs`), each failing
/// one NodeInfo stage: the same exit codes as `probe`'s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dial_nodeinfo_stages_exit_as_probe_does() {
    use crate::common::scripted::{scripted_peer, Then};
    use p2p_conn::nodeinfo::NodeInfo;
    let info = |id| {
        let mut n = NodeInfo::new(id, "test-chain");
        n.channels = vec![0x40];
        n.encode_delimited().unwrap()
    };
    let other = p2p_conn::Identity::generate().node_id();
    let cases: Vec<(Vec<u8>, &[&str], i32, &str)> = vec![
        // Another network than --network: 8.
        (Vec::new(), &["--network", "other-chain"], 8, "network"),
        // A NodeInfo claiming another node's ID: 6.
        (
            info(other),
            &["--network", "test-chain"],
            6,
            "not acceptable",
        ),
        // No NodeInfo in time: 7.
        (Vec::new(), &["--handshake-timeout", "0.5"], 7, "timeout"),
    ];
    for (i, (fixed, extra, code, needle)) in cases.into_iter().enumerate() {
        let (addr, _) = scripted_peer(
            move |id| {
                if i == 0 {
                    info(id)
                } else {
                    fixed
                }
            },
            Then::Hold,
        )
        .await;
        let mut args = vec!["dial".to_string(), addr.to_string(), "--nodeinfo".into()];
        args.extend(extra.iter().map(|a| a.to_string()));
        let out = tokio::task::spawn_blocking(move || {
            Proc::spawn(Path::new(BIN), &args, Feed::none()).finish_within(Duration::from_secs(30))
        })
        .await
        .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "case {i}: {err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("error: ") && last.contains(needle),
            "case {i}: {err}"
        );
    }
}

/// A peer that is not a secret connection: exit 4 (handshake).
#[test]
fn not_a_secret_connection_exits_4() {
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        use std::io::Write;
        let (mut tcp, _) = server.accept().unwrap();
        let _ = tcp.write_all(&[0xff; 200]);
        let mut sink = Vec::new();
        let _ = tcp.read_to_end(&mut sink);
    });
    let out = spawn(&["dial", &addr.to_string()], b"").finish_within(Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.starts_with("error: handshake failed"), "{err}");
    peer.join().unwrap();
}

/// `--network`, `--moniker` and `--channels` need `--nodeinfo`: without it
/// they are an error at once (before any connection), and the help says so;
/// `--ping-interval` needs `--mconn` and a positive number, checked as early.
/// A crawl seed that names no dialable HOST:PORT is a usage error before
/// anything is dialed (it was a table row, "connect failed", exit 0).
#[test]
fn crawl_refuses_seeds_without_host_and_port() {
    for seed in [
        "nonsense",
        "127.0.0.1:",
        ":26656",
        "127.0.0.1:99999",
        "127.0.0.1:0",
        "tcp://127.0.0.1",
    ] {
        let out = spawn(&["crawl", seed], b"").finish_within(Duration::from_secs(10));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{seed}: {err}");
        assert_eq!(
            err.trim_end(),
            format!(
                "error: seed {seed:?}: want ID@HOST:PORT, HOST:PORT, or either after tcp:// \
                 (a port from 1 to 65535)"
            ),
            "{seed}"
        );
        assert!(out.stdout.is_empty(), "{seed}: a table was printed");
    }
    // An RPC address is named as one.
    let out =
        spawn(&["crawl", "http://127.0.0.1:26657"], b"").finish_within(Duration::from_secs(10));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not a p2p address") && err.contains("RPC"),
        "{err}"
    );
    // tcp:// is taken: a closed port is a row of the table, not an error.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let out =
        spawn(&["crawl", &format!("tcp://{addr}")], b"").finish_within(Duration::from_secs(20));
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{table}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(table.contains(&format!("{addr}  refused")), "{table}");
}

#[test]
fn nodeinfo_flags_need_nodeinfo() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["listen", "127.0.0.1:0", "--moniker", "m"],
            "--moniker needs --nodeinfo",
        ),
        (
            &["dial", "127.0.0.1:9", "--moniker", "m"],
            "--moniker needs --nodeinfo",
        ),
        (
            &["listen", "127.0.0.1:0", "--network", "n"],
            "--network needs --nodeinfo",
        ),
        (
            &["dial", "127.0.0.1:9", "--channels", "40"],
            "--channels needs --nodeinfo or --mconn",
        ),
        (
            &["dial", "127.0.0.1:9", "--mconn"],
            "--mconn needs --channels (the MConnection's channels)",
        ),
        (
            &["listen", "127.0.0.1:0", "--network", "n", "--moniker", "m"],
            "--network and --moniker need --nodeinfo",
        ),
        (
            &["dial", "127.0.0.1:9", "--ping-interval", "5"],
            "--ping-interval needs --mconn",
        ),
        (
            &["listen", "127.0.0.1:0", "--output", "raw"],
            "--output needs --mconn",
        ),
        (
            &[
                "dial",
                "127.0.0.1:9",
                "--mconn",
                "--channels",
                "20",
                "--ping-interval",
                "0",
            ],
            "--ping-interval must be a positive number of seconds, at most about 1.8e19",
        ),
    ];
    for (args, needle) in cases {
        let out = spawn(args, b"").finish_within(Duration::from_secs(10));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert_eq!(err.trim_end(), format!("error: {needle}"), "{args:?}");
    }
    for cmd in ["listen", "dial"] {
        let help = run_cli(&[cmd, "--help"]).stdout_text();
        let flags = ["--network", "--moniker", "--channels"];
        for flag in flags {
            let at = help
                .find(&format!("      {flag} "))
                .unwrap_or_else(|| panic!("{cmd} --help: no {flag}: {help}"));
            let entry = &help[at..];
            let end = entry[flag.len() + 6..]
                .find("\n      --")
                .map_or(entry.len(), |e| e + flag.len() + 6);
            let entry = entry[..end]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                entry.contains("needs --nodeinfo"),
                "{cmd} --help, {flag}: {entry}"
            );
        }
    }
}

/// The lines of `help`'s `Commands:` list.
fn command_list(help: &str) -> Vec<&str> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

/// `p2p-conn --help` (and `state --help`) list each command in one short
/// line, at most 80 columns; the detail is in the command's own `--help`.
#[test]
fn help_lists_each_command_in_one_short_line() {
    for args in [&["--help"][..], &["-h"], &["state", "--help"]] {
        let help = run_cli(args).stdout_text();
        let list = command_list(&help);
        assert!(list.len() >= 3, "{args:?}: no command list: {help}");
        for line in list {
            assert!(
                line.chars().count() <= 80,
                "{args:?}: {} columns: {line}",
                line.chars().count()
            );
        }
    }
    // The detail is still there, one level down.
    for (cmd, detail) in [
        ("probe", "8 network mismatch"),
        ("signer", "exits 1 if it cannot start"),
        (
            "listen",
            "plus 9 for a connection that failed after the handshake",
        ),
    ] {
        let help = run_cli(&[cmd, "--help"]).stdout_text();
        assert!(help.contains(detail), "{cmd} --help: {help}");
    }
}

/// The flags `help` lists, by their long names (`--help` included).
fn listed_flags(help: &str) -> Vec<String> {
    help.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix("-v, ")
                .or(l.strip_prefix("-h, "))
                .unwrap_or(l);
            let flag = l.strip_prefix("--")?.split([' ', '=']).next()?;
            Some(format!("--{flag}"))
        })
        .collect()
}

/// Each connection command lists exactly the flags it uses: `probe` has no
/// wire settings (it only talks to CometBFT nodes, on CometBFT's wire), and
/// its help does not send the reader to `listen` and `dial`'s flags.
#[test]
fn each_connection_command_lists_only_its_flags() {
    let conn = ["--key", "--handshake-timeout", "--peer-id"];
    let wire = ["--frame-size", "--flush-size", "--read-buffer", "--backend"];
    let info = ["--network", "--moniker", "--channels"];
    let pipe = [
        "--nodeinfo",
        "--mconn",
        "--ping-interval",
        "--output",
        "--count-io",
    ];
    let common = ["--verbose", "--help"];
    let cases: [(&str, Vec<&str>); 3] = [
        (
            "probe",
            [&["--connect-timeout", "--json"][..], &conn, &info, &common].concat(),
        ),
        ("listen", [&conn[..], &wire, &info, &pipe, &common].concat()),
        (
            "dial",
            [
                &["--connect-timeout"][..],
                &conn,
                &wire,
                &info,
                &pipe,
                &common,
            ]
            .concat(),
        ),
    ];
    for (cmd, want) in cases {
        let help = run_cli(&[cmd, "--help"]).stdout_text();
        let mut listed = listed_flags(&help);
        let mut want: Vec<String> = want.iter().map(|f| f.to_string()).collect();
        listed.sort();
        want.sort();
        assert_eq!(listed, want, "{cmd} --help:\n{help}");
    }
    let help = run_cli(&["probe", "--help"]).stdout_text();
    for other in ["--nodeinfo", "--mconn", "listen", "dial"] {
        assert!(!help.contains(other), "probe --help names {other}:\n{help}");
    }
    // And a wire flag is refused, as any unknown flag (clap's exit 2).
    let out = run_cli(&["probe", "127.0.0.1:9", "--frame-size", "1024"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// `check` without inputs is clap's usage error (2); a file that is not a
/// chain.json or a config.toml with peers is a usage error (1); an entry
/// without a node ID fails (10) without anything being dialed.
#[test]
fn check_refuses_what_it_cannot_read() {
    let out = spawn(&["check"], b"").finish_within(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2));
    let dir = crate::common::process::scratch("check-usage");
    let bad = dir.join("chain.json");
    std::fs::write(&bad, "{\"chain_id\": \"x\"}").unwrap();
    let out = spawn(&["check", bad.to_str().unwrap()], b"").finish_within(Duration::from_secs(10));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no \"peers\" object"), "{err}");
    let toml = dir.join("config.toml");
    std::fs::write(&toml, "[p2p]\nladdr = \"tcp://0.0.0.0:26656\"\n").unwrap();
    let out = spawn(&["check", toml.to_str().unwrap()], b"").finish_within(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no seeds or persistent_peers"));
    let out =
        spawn(&["check", "--json", "127.0.0.1:9"], b"").finish_within(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(10));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["entries"][0]["problems"][0],
        "no node ID: an entry needs ID@HOST:PORT"
    );
    assert_eq!(
        v["entries"][0]["status"],
        serde_json::Value::Null,
        "dialed: {v:#}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
