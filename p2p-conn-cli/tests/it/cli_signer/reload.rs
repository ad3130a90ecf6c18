//! SIGHUP reloads a config's node list over real sockets: a node added is
//! dialed, a node removed is hung up on, a node unchanged keeps its very
//! connection; a reload with a mistake, or that changes a chain's key or
//! state file, is refused and the running set kept, and the chain's state
//! file stays locked throughout. Without `--config`, SIGHUP is logged and
//! ignored.

use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::Instant;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use p2p_conn_privval::testkit::message::Sum;
use p2p_conn_privval::testkit::PingRequest;

use super::alerts::{metrics_addr, scrape};
use super::config::{write_config, TestChain};
use super::{prevote, run_cli, sigterm, stderr, ScriptedNode, BIN, CHAIN, LIMIT};
use crate::common::process::{scratch, Feed, Proc};

fn sighup(p: &Proc) {
    kill(
        Pid::from_raw(i32::try_from(p.id()).unwrap()),
        Signal::SIGHUP,
    )
    .unwrap();
}

/// Read the signer's stderr until a line containing `needle`.
fn wait_line(p: &mut Proc, needle: &str, deadline: Instant) -> String {
    loop {
        let line = p.next_line(deadline);
        if line.contains(needle) {
            return line;
        }
    }
}

fn pings(node: &mut ScriptedNode) -> bool {
    matches!(
        node.try_request(Sum::PingRequest(PingRequest::default())),
        Some(Sum::PingResponse(_))
    )
}

#[test]
fn sighup_reloads_the_node_list_and_keeps_the_chain() {
    let dir = scratch("signer-reload");
    let a = TestChain::new(&dir, CHAIN);
    let folder = a.state.parent().unwrap();
    let sockets: Vec<_> = ["n1.sock", "n2.sock", "n3.sock"]
        .iter()
        .map(|s| folder.join(s))
        .collect();
    let listeners: Vec<_> = sockets
        .iter()
        .map(|s| UnixListener::bind(s).unwrap())
        .collect();
    let metrics = metrics_addr();
    let config_with = |nodes: &[usize], chain: &str| {
        let mut text = format!("stats_every = 0\n\n{chain}");
        for &n in nodes {
            text += &a.node(&sockets[n]);
        }
        text + &format!("[metrics]\nlisten = \"{metrics}\"\n")
    };
    let config = write_config(&dir, "signer.toml", &config_with(&[0, 1], &a.table()));
    let mut signer = Proc::spawn(
        Path::new(BIN),
        &["signer", "--config", config.to_str().unwrap()],
        Feed::none(),
    );
    let deadline = Instant::now() + LIMIT;
    let mut n1 = ScriptedNode::accept_within(&listeners[0]);
    let mut n2 = ScriptedNode::accept_within(&listeners[1]);
    n1.sign(CHAIN, &prevote(5, 1, 1_000)).expect("signed");
    assert!(pings(&mut n2));

    // Node 2 out, node 3 in.
    write_config(&dir, "signer.toml", &config_with(&[0, 2], &a.table()));
    sighup(&signer);
    let mut n3 = ScriptedNode::accept_within(&listeners[2]);
    assert!(
        !pings(&mut n2),
        "a node removed by the reload is hung up on"
    );
    assert!(pings(&mut n1), "an unchanged node keeps its connection");
    listeners[0].set_nonblocking(true).unwrap();
    assert!(
        listeners[0].accept().is_err(),
        "an unchanged node is not dialed again"
    );
    let line = wait_line(&mut signer, "reloaded ", deadline);
    assert!(
        line.contains(&format!(
            "added unix://{}; removed unix://{}; 1 unchanged",
            sockets[2].display(),
            sockets[1].display()
        )),
        "{line}"
    );
    // The removed node's series go with it: a stale `connected 1` would
    // hide an outage from the alerts.
    n1.settle();
    let scraped = scrape(&metrics);
    let gone = format!("node=\"unix://{}\"", sockets[1].display());
    let kept = format!("node=\"unix://{}\"", sockets[0].display());
    assert!(
        !scraped.contains(&gone) && scraped.contains(&kept),
        "after the reload, no series of {gone} and still {kept}:\n{scraped}"
    );
    // Node 3 serves the same chain through the same guard: below the
    // mark node 1 moved is refused, above it is signed.
    let below = n3.sign(CHAIN, &prevote(4, 1, 1_000)).unwrap_err();
    assert!(below.contains("height regression"), "{below}");
    n3.sign(CHAIN, &prevote(6, 1, 1_000)).expect("signed");

    // Refused reloads: a mistake, another key, another state file.
    let other_key = TestChain::new(&dir, "other");
    let refusals = [
        (
            config_with(&[0], &a.table()).replace("chain = ", "chan = "),
            "line 11: unknown field `chan`".to_string(),
        ),
        (
            config_with(&[0], &a.table())
                .replace(a.key.to_str().unwrap(), other_key.key.to_str().unwrap()),
            format!("chain \"{CHAIN}\" has another key"),
        ),
        (
            config_with(&[0], &a.table())
                .replace(a.state.to_str().unwrap(), other_key.state.to_str().unwrap()),
            format!("chain \"{CHAIN}\" has another state file"),
        ),
    ];
    for (text, says) in &refusals {
        write_config(&dir, "signer.toml", text);
        sighup(&signer);
        let line = wait_line(&mut signer, "reload refused", deadline);
        assert!(
            line.contains(says) && line.contains("still serving the 2 node(s) running before"),
            "{line}"
        );
        assert!(pings(&mut n1) && pings(&mut n3), "the running set is kept");
    }
    // The chain's state file is still locked by this signer.
    let second = run_cli(&[
        "signer",
        "--node",
        "unix:///nonexistent.sock",
        "--key",
        a.key.to_str().unwrap(),
        "--state",
        a.state.to_str().unwrap(),
        "--chain-id",
        CHAIN,
    ]);
    assert_eq!(second.status.code(), Some(1), "{second:?}");
    assert!(
        stderr(&second).contains("in use by another signer"),
        "{second:?}"
    );

    sigterm(&signer);
    signer.finish_ok(deadline);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn without_a_config_sighup_is_told_and_ignored() {
    let dir = scratch("signer-hup-flags");
    let a = TestChain::new(&dir, CHAIN);
    let listener = UnixListener::bind(&a.socket).unwrap();
    let node = format!("unix://{}", a.socket.display());
    let mut signer = Proc::spawn(
        Path::new(BIN),
        &[
            "signer",
            "--node",
            &node,
            "--key",
            a.key.to_str().unwrap(),
            "--state",
            a.state.to_str().unwrap(),
            "--create-state",
            "--chain-id",
            CHAIN,
            "--stats-every",
            "0",
        ],
        Feed::none(),
    );
    let deadline = Instant::now() + LIMIT;
    let mut conn = ScriptedNode::accept_within(&listener);
    sighup(&signer);
    wait_line(&mut signer, "SIGHUP ignored: no --config", deadline);
    assert!(pings(&mut conn), "still serving, on the same connection");
    sigterm(&signer);
    let out = signer.finish(deadline);
    out.assert_ok("the signer after SIGHUP, then SIGTERM");
    std::fs::remove_dir_all(&dir).unwrap();
}
