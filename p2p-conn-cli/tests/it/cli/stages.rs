//! Exit codes by stage, and the NodeInfo flags.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use super::{run_cli, spawn, BIN};
use crate::common::process::{Feed, Proc};

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
