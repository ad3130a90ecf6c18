//! `dial --nodeinfo --mconn` stays a real node's peer past the node's first
//! ping and its pong timeout, at v0.38.26 and v1.0.1 together.
//!
//! CometBFT hard-codes its MConnection keepalive: `p2p.MConnConfig` starts
//! from `conn.DefaultMConnConfig()` (ping every 60 s, pong within 45 s) and
//! copies only the rates, the payload size and the fuzz settings from
//! `[p2p]` of `config.toml`; nothing in the config or on the command line
//! changes the timers. So the test waits [`STAY`] (60 s + 45 s + a margin)
//! after the node started our MConnection. Both nodes run at once, one
//! thread each, so the test takes about one [`STAY`], not two.
//!
//! Each node runs with `--log_level=p2p:debug,*:info`, so its MConnection
//! with us logs `Send Ping` and `Starting pong timer` when it pings us,
//! `Receive Pong` when our pong arrives, `Receive Ping` and `Send Pong` for
//! our pings (`dial --ping-interval 10`), each line with `peer=OURID@ADDR`.
//! After [`STAY`] the test checks that:
//! - `dial` still runs;
//! - the node's RPC `net_info` lists our node ID;
//! - the node's log names us in no `Stopping peer for error` and no `Pong
//!   timeout` line, and in at least one each of `Send Ping`, `Receive
//!   Pong`, `Receive Ping` and `Send Pong`;
//! - at the end of stdin `dial` closes and exits 0, and its `-v` event
//!   `mconn closed` counts at least one ping received and one pong sent
//!   (the node's), and at least one ping sent and one pong received (ours).
//!
//! Without Go the test prints a notice and passes, unless `CI=true`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::cometbft_node::{node_binary, Node};
use crate::common::process::{Feed, Proc};
use p2p_conn_interop::cometbft_go::GoVersion;

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");
const LIMIT: Duration = Duration::from_secs(30);

/// How long we stay the node's peer: its first ping comes 60 s after our
/// MConnection started, and without our pong it would drop us 45 s later.
const STAY: Duration = Duration::from_secs(60 + 45 + 5);

/// Our own ping interval (`--ping-interval`), so the node's pongs show.
const OUR_PING_SECS: &str = "10";

/// The node's MConnection debug lines, `p2p` module only.
const LOG_LEVEL: &str = "p2p:debug,*:info";

/// The value of `key=N` in a tracing line.
fn field(line: &str, key: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

/// What one node's run showed, for the test's summary.
struct Seen {
    version: String,
    counts: Vec<(&'static str, usize)>,
    /// The node's own ping of us and our pong, as it logged them.
    pinged: Vec<String>,
    closed: String,
}

fn stay_past_pong_timeout(version: GoVersion, test: &str) -> Option<Seen> {
    let bin = node_binary(version, test)?;
    let node = Node::start_logging(&bin, LOG_LEVEL);
    let own = crate::common::our_node_key(test);
    let (key, our_id) = (own.path.as_str(), own.id.clone());
    let mark = node.log_len();
    let target = format!("{}@{}", node.node_id, node.p2p_addr);

    // Our stdin is a pipe we hold: empty while we stay, closed to end it.
    let (stdin_r, stdin_w) = std::io::pipe().expect("a pipe for dial's stdin");
    let mut cmd = Command::new(BIN);
    cmd.args([
        "-v",
        "dial",
        &target,
        "--key",
        key,
        "--nodeinfo",
        "--mconn",
        "--channels",
        "0x20",
        "--ping-interval",
        OUR_PING_SECS,
        "--handshake-timeout",
        "10",
    ])
    .stdin(Stdio::from(stdin_r))
    .stdout(Stdio::piped());
    let mut dial = Proc::start(&mut cmd, Feed::none());

    crate::common::wait_joined(&node, mark, &our_id, test);
    let until = Instant::now() + STAY;
    while Instant::now() < until {
        dial.check_running("it should stay the node's peer");
        node.check_running("we stayed its peer");
        std::thread::sleep(Duration::from_secs(1));
    }
    crate::common::check_still_peer(&mut dial, &node, &our_id, test);

    let log = node.log_since(mark);
    let ours: Vec<&str> = log.lines().filter(|l| l.contains(&our_id)).collect();
    let bad: Vec<&&str> = ours
        .iter()
        .filter(|l| l.contains("Stopping peer for error") || l.contains("Pong timeout"))
        .collect();
    assert!(bad.is_empty(), "{test}: {bad:?}");
    let counts: Vec<(&'static str, usize)> =
        ["Send Ping", "Receive Pong", "Receive Ping", "Send Pong"]
            .into_iter()
            .map(|what| (what, ours.iter().filter(|l| l.contains(what)).count()))
            .collect();
    for &(what, n) in &counts {
        assert!(
            n >= 1,
            "{test}: no `{what}` naming us in the node's log: {counts:?}\n{log}"
        );
    }

    let pinged = ours
        .iter()
        .filter(|l| l.contains("Send Ping") || l.contains("Receive Pong"))
        .map(|l| l.to_string())
        .collect();

    // The end of stdin: dial closes the connection and exits 0.
    drop(stdin_w);
    let out = dial.finish_within(LIMIT);
    out.assert_ok(test);
    let lines = out.stderr_lines();
    let closed = lines
        .iter()
        .find(|l| l.contains("mconn closed"))
        .unwrap_or_else(|| panic!("{test}: no `mconn closed` event: {lines:?}"))
        .clone();
    for key in [
        "pings_received",
        "pongs_sent",
        "pings_sent",
        "pongs_received",
    ] {
        let n = field(&closed, key);
        assert!(matches!(n, Some(n) if n >= 1), "{test}: {key}: {closed}");
    }
    let _ = std::fs::remove_dir_all(&own.dir);
    Some(Seen {
        version: node.version.clone(),
        counts,
        pinged,
        closed,
    })
}

/// One node of each release at once (see the module docs).
#[test]
fn dial_mconn_stays_past_the_pong_timeout() {
    let started = Instant::now();
    let releases = [
        (
            GoVersion::V038,
            "v0_38::dial_mconn_stays_past_the_pong_timeout",
        ),
        (GoVersion::V1, "v1::dial_mconn_stays_past_the_pong_timeout"),
    ];
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = releases
            .iter()
            .map(|&(version, test)| s.spawn(move || stay_past_pong_timeout(version, test)))
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    let mut failed = Vec::new();
    for (result, (_, test)) in results.into_iter().zip(releases) {
        match result {
            Ok(Some(seen)) => eprintln!(
                "{test}: node {} logged {:?} naming us:\n  {}\ndial: {}",
                seen.version,
                seen.counts,
                seen.pinged.join("\n  "),
                seen.closed
            ),
            Ok(None) => {}
            Err(_) => failed.push(test),
        }
    }
    eprintln!("both releases in {:?}", started.elapsed());
    assert!(
        failed.is_empty(),
        "failed: {failed:?} (see their panics above)"
    );
}
