//! What an operator alerts on: the series beside the counts (the last
//! signature's time and height, the missed heights), each labelled with
//! its chain.

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use p2p_conn_privval::{signed_msg_type, Vote};

use super::{prevote, sigterm, validator_key, ScriptedNode, BIN, CHAIN, LIMIT};
use crate::common::process::{scratch, Feed, Proc};

fn precommit(height: i64, round: i32) -> Vote {
    let mut v = prevote(height, 1, height);
    v.msg_type = signed_msg_type::PRECOMMIT;
    v.round = round;
    v
}

/// The body of GET /metrics at `addr`.
fn scrape(addr: &str) -> String {
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    write!(tcp, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    tcp.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    text.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// The value of the sample `series` (name and labels, as written).
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
        .parse()
        .unwrap()
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A free port on loopback, for `--metrics`.
fn metrics_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

/// Precommits at heights 1, 2, 5 (twice: rounds 0 and 1), a prevote alone
/// at 7 and a precommit at 10: heights 3, 4 and 6 to 9 have none, 6
/// missed. A second signer on the same state file counts from the
/// precommit the file records (10): one at 13 misses 11 and 12. Every
/// signer series has `chain_id` first.
#[test]
fn the_last_signature_and_missed_heights_are_exported() {
    let dir = scratch("signer-alerts");
    let (key, _) = validator_key(&dir);
    let state = dir.join("signer.state");
    let socket = dir.join("privval.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let node = format!("unix://{}", socket.display());
    let metrics = metrics_addr();
    let args = [
        "signer",
        "--node",
        node.as_str(),
        "--key",
        key.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--create-state",
        "--chain-id",
        CHAIN,
        "--stats-every",
        "0",
        "--metrics",
        metrics.as_str(),
    ];
    let chain = format!("{{chain_id=\"{CHAIN}\"}}");
    let series = |name: &str| format!("p2p_conn_signer_{name}{chain}");

    let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let mut conn = ScriptedNode::accept(&listener);
    let before = unix_now();
    for v in [
        precommit(1, 0),
        precommit(2, 0),
        prevote(5, 1, 5),
        precommit(5, 0),
        precommit(5, 1),
        prevote(7, 1, 7),
        precommit(10, 0),
    ] {
        conn.sign(CHAIN, &v).expect("signed");
    }
    let after = unix_now();
    let text = scrape(&metrics);
    assert_eq!(value(&text, &series("missed_heights_total")), 6.0);
    assert_eq!(value(&text, &series("last_signed_height")), 10.0);
    let at = value(&text, &series("last_sign_timestamp_seconds"));
    assert!(
        at >= before.floor() && at <= after.ceil(),
        "{at} not in {before}..{after}"
    );
    assert_eq!(
        value(
            &text,
            &format!(
                "p2p_conn_signer_requests_total{{chain_id=\"{CHAIN}\",node=\"{node}\",kind=\"vote\"}}"
            )
        ),
        7.0
    );
    for l in text.lines().filter(|l| l.starts_with("p2p_conn_signer_")) {
        assert!(
            l.contains(&format!("{{chain_id=\"{CHAIN}\"")),
            "not labelled with the chain: {l}"
        );
    }
    sigterm(&signer);
    signer.finish_within(LIMIT).assert_ok("the first signer");

    // The same state file: its mark is the precommit at 10.
    let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let mut conn = ScriptedNode::accept(&listener);
    conn.sign(CHAIN, &prevote(11, 1, 11)).expect("signed");
    let text = scrape(&metrics);
    assert_eq!(value(&text, &series("last_signed_height")), 11.0);
    assert_eq!(value(&text, &series("missed_heights_total")), 0.0);
    conn.sign(CHAIN, &precommit(13, 0)).expect("signed");
    let text = scrape(&metrics);
    assert_eq!(value(&text, &series("missed_heights_total")), 2.0);
    sigterm(&signer);
    signer.finish_within(LIMIT).assert_ok("the second signer");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Before it signs anything, a signer exports the mark its state file
/// holds and 0 as the time of its last signature (so that `time() - x`
/// is large: nothing signed since start).
#[test]
fn a_signer_that_has_signed_nothing_says_so() {
    let dir = scratch("signer-alerts-idle");
    let (key, _) = validator_key(&dir);
    let state = dir.join("signer.state");
    let node = format!("unix://{}", dir.join("absent.sock").display());
    let metrics = metrics_addr();
    let args = [
        "signer",
        "--node",
        node.as_str(),
        "--key",
        key.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--create-state",
        "--chain-id",
        CHAIN,
        "--stats-every",
        "0",
        "--metrics",
        metrics.as_str(),
    ];
    let mut signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    // The port is bound before the first line.
    let first = signer.next_line(std::time::Instant::now() + LIMIT);
    assert!(first.contains("signer for validator"), "{first}");
    let text = scrape(&metrics);
    let chain = format!("{{chain_id=\"{CHAIN}\"}}");
    for (name, want) in [
        ("last_sign_timestamp_seconds", 0.0),
        ("last_signed_height", 0.0),
        ("missed_heights_total", 0.0),
    ] {
        assert_eq!(
            value(&text, &format!("p2p_conn_signer_{name}{chain}")),
            want
        );
    }
    assert_eq!(
        value(
            &text,
            &format!("p2p_conn_signer_connected{{chain_id=\"{CHAIN}\",node=\"{node}\"}}")
        ),
        0.0
    );
    sigterm(&signer);
    signer.finish_within(LIMIT).assert_ok("the signer");
    std::fs::remove_dir_all(&dir).unwrap();
}
