//! One signer for two nodes: the node that is behind asks for the heights
//! the other already got, and is refused. That is how a standby node
//! works, not a fault: the signer counts it per node (a metric) and tells
//! it once, then in a summary, never a line per refused request; a real
//! fault (a node asking below its own mark) is still told per request.

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;

use p2p_conn_privval::signed_msg_type;

use super::{
    json_events, prevote, sigterm, stderr, untimed, validator_key, ScriptedNode, BIN, CHAIN, LIMIT,
};
use crate::common::process::{scratch, Feed, Proc};

/// Blocks asked by both nodes.
const HEIGHTS: i64 = 20;

fn precommit(height: i64, block: u8) -> p2p_conn_privval::Vote {
    let mut v = prevote(height, block, height);
    v.msg_type = signed_msg_type::PRECOMMIT;
    v
}

/// Runs a signer for two nodes over `unix://`: for each of [`HEIGHTS`]
/// heights, node A gets its prevote and precommit signed, node B asks for
/// the same steps with another block and is refused (two refusals per
/// block, as a standby CometBFT node's). Then A asks below its own mark
/// once (a fault). Returns the metrics text and the signer's output.
fn two_nodes(json: bool) -> (String, crate::common::process::Finished, [String; 2]) {
    let dir = scratch(if json {
        "signer-standby-json"
    } else {
        "signer-standby"
    });
    let (key, _) = validator_key(&dir);
    let state = dir.join("signer.state");
    let (sock_a, sock_b) = (dir.join("a.sock"), dir.join("b.sock"));
    let (listen_a, listen_b) = (
        UnixListener::bind(&sock_a).unwrap(),
        UnixListener::bind(&sock_b).unwrap(),
    );
    let nodes = [
        format!("unix://{}", sock_a.display()),
        format!("unix://{}", sock_b.display()),
    ];
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metrics = format!("127.0.0.1:{port}");
    let mut args = vec![
        "signer",
        "--node",
        &nodes[0],
        "--node",
        &nodes[1],
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
        &metrics,
    ];
    if json {
        args.push("--json");
    }
    let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let mut a = ScriptedNode::accept(&listen_a);
    let mut b = ScriptedNode::accept(&listen_b);
    for h in 1..=HEIGHTS {
        a.sign(CHAIN, &prevote(h, 1, h)).expect("A's prevote");
        let why = b.sign(CHAIN, &prevote(h, 2, h)).expect_err("B's prevote");
        assert!(why.contains("conflicting data"), "{why}");
        a.sign(CHAIN, &precommit(h, 1)).expect("A's precommit");
        b.sign(CHAIN, &precommit(h, 2)).expect_err("B's precommit");
    }
    // B behind by a height: a regression, still standby.
    b.sign(CHAIN, &prevote(HEIGHTS - 1, 1, 1))
        .expect_err("B's old prevote");
    // A fault: A below its own mark.
    a.sign(CHAIN, &prevote(1, 1, 1))
        .expect_err("A's own regression");
    let mut tcp = std::net::TcpStream::connect(&metrics).unwrap();
    write!(tcp, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    tcp.read_to_string(&mut text).unwrap();
    sigterm(&signer);
    let out = signer.finish_within(LIMIT);
    out.assert_ok("the signer");
    std::fs::remove_dir_all(&dir).unwrap();
    (text, out, nodes)
}

/// Text mode: one notice for B, one summary with the count, one line for
/// A's fault, and the metric per node.
#[test]
fn a_standby_node_is_summarised_not_told_per_refusal() {
    let (metrics, out, [a, b]) = two_nodes(false);
    let refused = 2 * HEIGHTS + 1;
    let lines = untimed(&stderr(&out));
    let per_request: Vec<_> = lines
        .iter()
        .filter(|l| l.starts_with("refused or failed"))
        .collect();
    assert_eq!(
        per_request.len(),
        1,
        "only A's own fault is told per request: {lines:#?}"
    );
    assert!(per_request[0].contains("height regression"), "{lines:#?}");
    for (node, n) in [(&a, 0), (&b, refused)] {
        let line = format!(
            "p2p_conn_signer_standby_refusals_total{{chain_id=\"{CHAIN}\",node=\"{node}\"}} {n}"
        );
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line:?} in:\n{metrics}"
        );
    }
    let standby: Vec<_> = lines
        .iter()
        .filter(|l| l.starts_with("standby: ") || l.contains(" is on standby: "))
        .collect();
    assert_eq!(standby.len(), 2, "a notice and a summary: {lines:#?}");
    assert!(standby[0].contains(&b), "{lines:#?}");
    assert!(
        standby[1].contains(&b) && standby[1].contains(&format!("{refused} requests refused")),
        "{lines:#?}"
    );
}

/// `--json`: every request is still an event (`standby: true` on B's
/// refusals), and the summary is a `standby_summary` event.
#[test]
fn a_standby_node_is_summarised_in_json() {
    let (_, out, [a, b]) = two_nodes(true);
    let events = json_events(&out);
    let refusals = |node: &str, standby: bool| {
        events
            .iter()
            .filter(|e| {
                e["event"] == "served"
                    && e["node"] == node
                    && !e["error"].is_null()
                    && e["standby"] == standby
            })
            .count()
    };
    assert_eq!(refusals(&b, true), 2 * HEIGHTS as usize + 1, "{events:#?}");
    assert_eq!(refusals(&a, false), 1, "{events:#?}");
    let summaries: Vec<_> = events
        .iter()
        .filter(|e| e["event"] == "standby_summary")
        .collect();
    assert_eq!(summaries.len(), 1, "{events:#?}");
    assert_eq!(summaries[0]["node"], b.as_str());
    assert_eq!(summaries[0]["refused"], 2 * HEIGHTS + 1);
    assert_eq!(summaries[0]["refused_total"], 2 * HEIGHTS + 1);
}
