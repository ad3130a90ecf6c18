//! `p2p-conn crawl` against a real network of CometBFT nodes on loopback
//! (`p2p_conn_interop::cometbft_network`: five nodes of three release
//! lines in a line, the last one a seed; and three v1.0.1 nodes, which
//! keep no peers of the other lines): from node 0 it finds every node with
//! its NodeInfo, and no node logs our peer as bad or as asking too soon.
//!
//! Without Go the test prints a notice and passes; with `CI=true` it fails.
//! With `CRAWL_TEST_SHOW=DIR` it prints the log lines naming the crawler
//! and keeps the picture as `DIR/crawl.svg`.

use std::collections::HashSet;
use std::time::Duration;

use crate::common::complaints;
use crate::common::process::{run, scratch};
use p2p_conn_interop::cometbft_go::GoVersion;
use p2p_conn_interop::cometbft_network::{Network, LAYOUT};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

/// Bound on the line linking up once every node has started.
const LINK_LIMIT: Duration = Duration::from_secs(60);

/// Bound on one crawl process (five nodes, a few seconds each at most).
const CRAWL_LIMIT: Duration = Duration::from_secs(120);

/// The crawler's ID, from its `crawler id` line on stderr.
fn crawler_id(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    text.lines()
        .find_map(|l| l.strip_prefix("crawler id "))
        .unwrap_or_else(|| panic!("no `crawler id` line: {text}"))
        .trim()
        .to_string()
}

/// The crawl's JSON `v` has each node of `net` once, with its own
/// NodeInfo, an answer and at least one neighbour known.
fn check_every_node(net: &Network, v: &Value, test: &str) {
    let nodes = v["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), net.nodes.len(), "{test}: {v:#}");
    for n in &net.nodes {
        let found: Vec<&Value> = nodes
            .iter()
            .filter(|j| j["node_id"] == n.node.node_id.as_str())
            .collect();
        assert_eq!(found.len(), 1, "{test}: node {} in {v:#}", n.index);
        let j = found[0];
        assert_eq!(j["status"], "ok", "{test}: node {}: {j:#}", n.index);
        assert_eq!(j["reachable"], true);
        assert_eq!(j["moniker"], n.moniker.as_str());
        assert_eq!(j["version"], n.node.version.as_str());
        assert_eq!(j["network"], net.chain_id.as_str());
        assert_eq!(j["address"], n.node.p2p_addr.as_str());
        assert!(j["handshake_ms"].as_f64().is_some(), "{j:#}");
        assert!(j["pex_addrs"].as_u64().unwrap() >= 1, "{j:#}");
        // Its blocks, from its blocksync status: nothing pruned, a height
        // no greater than its RPC says after the crawl.
        let height = j["height"]
            .as_i64()
            .unwrap_or_else(|| panic!("{test}: no height: {j:#}"));
        assert!(height >= 1, "{j:#}");
        assert!(j["base"].as_i64().unwrap() <= 1, "{j:#}");
        let rpc = n.height().expect("the node's RPC height");
        assert!(
            height <= rpc,
            "{test}: node {}: crawl saw {height}, RPC {rpc}",
            n.index
        );
    }
}

#[test]
fn crawl_maps_a_real_network() {
    let test = "crawl_maps_a_real_network";
    let Some(net) = Network::start(&LAYOUT, test) else {
        return;
    };
    net.wait_line(LINK_LIMIT);
    // Blocks to report: the chain past its first ones.
    net.wait_height(2, LINK_LIMIT);
    let dir = scratch(test);
    let svg = dir.join("net.svg");
    let seed = net.nodes[0].address();

    // --json and --graph FILE.svg.
    let out = run(
        BIN.as_ref(),
        &[
            "crawl",
            "--allow-unroutable",
            "--json",
            "--timeout",
            "10",
            "--graph",
            svg.to_str().unwrap(),
            &seed,
        ],
        CRAWL_LIMIT,
    );
    assert!(out.status.success(), "{test}: crawl failed: {out:?}");
    let id = crawler_id(&out.stderr);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{test}: no JSON ({e}): {out:?}"));
    assert_eq!(v["crawler_id"], id.as_str());
    assert_eq!(v["network"], net.chain_id.as_str(), "{v:#}");
    let nodes = v["nodes"].as_array().expect("nodes");
    check_every_node(&net, &v, test);
    // The seed is dialed last, through node n-2's answer (records come in
    // the order visits end: `probe` is the dial order).
    let last = nodes
        .iter()
        .max_by_key(|n| n["probe"].as_u64().unwrap())
        .unwrap();
    assert_eq!(
        last["node_id"],
        net.nodes.last().unwrap().node.node_id.as_str()
    );
    // Every edge leaves a visited node; the line's links are among them.
    let edges: HashSet<(String, String)> = nodes
        .iter()
        .flat_map(|n| {
            let from = n["node_id"].as_str().unwrap().to_string();
            n["reported"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |e| (from.clone(), e["id"].as_str().unwrap().to_string()))
        })
        .collect();
    // The total counts every reported address, each in its node's record.
    let listed: usize = nodes
        .iter()
        .map(|n| n["reported"].as_array().unwrap().len())
        .sum();
    assert_eq!(v["reported"], listed, "{v:#}");
    assert_eq!(v["dialed"], nodes.len());
    for i in 0..net.nodes.len() - 1 {
        let (a, b) = (&net.nodes[i].node.node_id, &net.nodes[i + 1].node.node_id);
        assert!(
            edges.contains(&(a.clone(), b.clone())) || edges.contains(&(b.clone(), a.clone())),
            "{test}: link {i}-{} not reported: {edges:?}",
            i + 1
        );
    }
    // The picture names every node.
    let picture = std::fs::read_to_string(&svg).expect("the SVG was written");
    if let Some(keep) = std::env::var_os("CRAWL_TEST_SHOW") {
        let _ = std::fs::write(std::path::Path::new(&keep).join("crawl.svg"), &picture);
    }
    assert!(picture.starts_with("<?xml") && picture.trim_end().ends_with("</svg>"));
    for n in &net.nodes {
        assert!(
            picture.contains(&n.node.node_id),
            "{test}: SVG lacks node {}",
            n.index
        );
        assert!(
            picture.contains(&n.moniker),
            "{test}: SVG lacks {}",
            n.moniker
        );
    }

    // --has-height: every node holds block 1; none holds a block far
    // beyond the chain's height.
    for (h, rows) in [(1, net.nodes.len()), (1_000_000_000, 0)] {
        let out = run(
            BIN.as_ref(),
            &[
                "crawl",
                "--allow-unroutable",
                "--has-height",
                &h.to_string(),
                &seed,
            ],
            CRAWL_LIMIT,
        );
        assert!(out.status.success(), "{test}: crawl failed: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let shown = net
            .nodes
            .iter()
            .filter(|n| text.lines().any(|l| l.starts_with(&n.node.node_id)))
            .count();
        assert_eq!(shown, rows, "{test}: --has-height {h}: {text}");
        assert!(text.contains(&format!("can serve height {h}")), "{text}");
    }

    // Snapshots: every node lists the state-sync channel and is asked
    // once; the kvstore application offers no snapshot, so each answers
    // nothing, which the crawl reports as an empty list, not a failure.
    // With --no-snapshots nobody is asked (null).
    let unasked = run(
        BIN.as_ref(),
        &[
            "crawl",
            "--allow-unroutable",
            "--json",
            "--no-snapshots",
            &seed,
        ],
        CRAWL_LIMIT,
    );
    let vu: Value = serde_json::from_slice(&unasked.stdout).unwrap();
    for n in vu["nodes"].as_array().unwrap() {
        assert_eq!(n["snapshots"], Value::Null, "{n:#}");
    }
    let snaps = run(
        BIN.as_ref(),
        &["crawl", "--allow-unroutable", "--json", &seed],
        CRAWL_LIMIT,
    );
    assert!(snaps.status.success(), "{test}: crawl failed: {snaps:?}");
    let id_snaps = crawler_id(&snaps.stderr);
    let vs: Value = serde_json::from_slice(&snaps.stdout).unwrap();
    for n in vs["nodes"].as_array().unwrap() {
        assert_eq!(n["status"], "ok", "{n:#}");
        assert_eq!(n["snapshots"], serde_json::json!([]), "{n:#}");
    }

    // A second crawl (another ID): the table and DOT.
    let dot = dir.join("net.dot");
    let out2 = run(
        BIN.as_ref(),
        &[
            "crawl",
            "--allow-unroutable",
            "--graph",
            dot.to_str().unwrap(),
            &seed,
        ],
        CRAWL_LIMIT,
    );
    assert!(out2.status.success(), "{test}: crawl failed: {out2:?}");
    let id2 = crawler_id(&out2.stderr);
    assert_ne!(id, id2);
    let table = String::from_utf8_lossy(&out2.stdout).into_owned();
    eprintln!("{}{table}", String::from_utf8_lossy(&out2.stderr));
    assert!(table.starts_with("NODE ID"), "{table}");
    for n in &net.nodes {
        let row = table
            .lines()
            .find(|l| l.starts_with(&n.node.node_id))
            .unwrap_or_else(|| panic!("{test}: no row for node {}: {table}", n.index));
        assert!(row.contains(&n.moniker) && row.contains(" ok "), "{row}");
    }
    let dot = std::fs::read_to_string(&dot).expect("the DOT was written");
    assert!(dot.starts_with("digraph crawl {"));

    // A third crawl: a closed port, and node 0 under another network than
    // its own. Both reported, node 0 not asked, nothing followed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let out3 = run(
        BIN.as_ref(),
        &[
            "crawl",
            "--json",
            "--network",
            "other-chain",
            &closed_addr,
            &seed,
        ],
        CRAWL_LIMIT,
    );
    assert!(out3.status.success(), "{test}: crawl failed: {out3:?}");
    let id3 = crawler_id(&out3.stderr);
    let v3: Value = serde_json::from_slice(&out3.stdout).unwrap();
    let nodes3 = v3["nodes"].as_array().unwrap();
    assert_eq!(nodes3.len(), 2, "{v3:#}");
    assert_eq!(nodes3[0]["address"], closed_addr.as_str());
    assert_eq!(nodes3[0]["status"], "refused", "{v3:#}");
    assert_eq!(nodes3[0]["reachable"], false);
    assert_eq!(nodes3[1]["status"], "other network", "{v3:#}");
    assert_eq!(nodes3[1]["network"], net.chain_id.as_str());
    assert_eq!(nodes3[1]["moniker"], "node-0");
    assert_eq!(nodes3[1]["pex_addrs"], Value::Null);
    for n in nodes3 {
        assert_eq!(n["reported"], serde_json::json!([]), "{v3:#}");
    }
    assert_eq!(v3["reported"], 0);
    assert_eq!(v3["network"], "other-chain");

    // A fourth crawl, without --allow-unroutable: node 0 answers, and the
    // loopback addresses it knows are recorded, not followed, as a CometBFT
    // node's address book (addr_book_strict = true) refuses them.
    let out4 = run(BIN.as_ref(), &["crawl", "--json", &seed], CRAWL_LIMIT);
    assert!(out4.status.success(), "{test}: crawl failed: {out4:?}");
    let id4 = crawler_id(&out4.stderr);
    let v4: Value = serde_json::from_slice(&out4.stdout).unwrap();
    let nodes4 = v4["nodes"].as_array().unwrap();
    assert_eq!(nodes4.len(), 1, "{v4:#}");
    assert_eq!(nodes4[0]["status"], "ok", "{v4:#}");
    let edges4 = nodes4[0]["reported"].as_array().unwrap();
    assert!(!edges4.is_empty(), "{v4:#}");
    for e in edges4 {
        let why = e["invalid"].as_str().unwrap_or_default();
        assert!(why.contains("not routable"), "{test}: {e:#}");
    }

    // A fifth crawl, the mistake of issue #31: node 0's ID given at its
    // RPC port, and its p2p address without an ID. The table shows the
    // failed dial with no ID and a short status; the picture draws node 0
    // by the ID it proved, with the RPC address as a box of its own.
    let n0 = &net.nodes[0].node;
    let rpc = n0.rpc_laddr.trim_start_matches("tcp://");
    let wrong = format!("{}@{rpc}", n0.node_id);
    let svg5 = dir.join("wrong-port.svg");
    let out5 = run(
        BIN.as_ref(),
        &[
            "crawl",
            "--max-nodes",
            "2",
            "--graph",
            svg5.to_str().unwrap(),
            &wrong,
            &n0.p2p_addr,
        ],
        CRAWL_LIMIT,
    );
    assert!(out5.status.success(), "{test}: crawl failed: {out5:?}");
    let id5 = crawler_id(&out5.stderr);
    let table5 = String::from_utf8_lossy(&out5.stdout).into_owned();
    eprintln!("{table5}");
    let failed = table5
        .lines()
        .find(|l| l.contains(rpc))
        .unwrap_or_else(|| panic!("{test}: no row for {rpc}: {table5}"));
    assert!(failed.starts_with("- "), "{test}: {failed}");
    assert!(failed.contains(" handshake failed"), "{test}: {failed}");
    assert!(failed.len() < 200, "{test}: {failed}");
    let answered = table5
        .lines()
        .find(|l| l.starts_with(&n0.node_id))
        .unwrap_or_else(|| panic!("{test}: no row for node 0: {table5}"));
    assert!(answered.contains(" ok "), "{test}: {answered}");
    let picture5 = std::fs::read_to_string(&svg5).expect("the SVG was written");
    // Node 0's box: green, its moniker, its ID as the tooltip.
    let boxes: Vec<&str> = picture5.split("<g><title>").skip(1).collect();
    let node0 = boxes
        .iter()
        .find(|b| b.starts_with(&format!("{}</title>", n0.node_id)))
        .unwrap_or_else(|| panic!("{test}: no box for node 0: {picture5}"));
    assert!(
        node0.contains("#d5f5d5") && node0.contains(">node-0<"),
        "{node0}"
    );
    let rpc_box = boxes
        .iter()
        .find(|b| b.starts_with(rpc))
        .unwrap_or_else(|| panic!("{test}: no box for {rpc}: {picture5}"));
    assert!(
        rpc_box.contains("#eeeeee") && rpc_box.contains("handshake failed"),
        "{rpc_box}"
    );
    if let Some(keep) = std::env::var_os("CRAWL_TEST_SHOW") {
        let _ = std::fs::write(
            std::path::Path::new(&keep).join("wrong-port.svg"),
            &picture5,
        );
    }

    // Give the nodes a moment to log our hang-ups, then read their logs.
    std::thread::sleep(Duration::from_secs(2));
    for n in &net.nodes {
        let log = n.node.log();
        for who in [&id, &id2, &id3, &id4, &id5, &id_snaps] {
            let bad = complaints(&log, who);
            assert!(
                bad.is_empty(),
                "{test}: node {} ({}) complains about {who}: {bad:#?}",
                n.index,
                n.release.label()
            );
        }
        if std::env::var_os("CRAWL_TEST_SHOW").is_some() {
            for l in log.lines().filter(|l| l.contains(&id) || l.contains(&id3)) {
                eprintln!("node {}: {l}", n.index);
            }
        }
        // And it did see us: the connection is in its log.
        assert!(
            log.contains(&id),
            "{test}: node {} never logged {id}",
            n.index
        );
    }
    eprintln!(
        "{test}: {} nodes crawled twice, stderr: {}",
        nodes.len(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same against a v1.0.1 network (three nodes in a line, the last a
/// seed): v1.0.1 drops peers of the other lines, so it has a chain of its
/// own (`cometbft_network`'s module docs); its PEX rules are v0.38's.
#[test]
fn crawl_maps_a_v1_network() {
    let test = "crawl_maps_a_v1_network";
    let Some(net) = Network::start(&[GoVersion::V1, GoVersion::V1, GoVersion::V1], test) else {
        return;
    };
    net.wait_line(LINK_LIMIT);
    // Blocks to report: the chain past its first ones.
    net.wait_height(2, LINK_LIMIT);
    let seed = net.nodes[0].address();
    let out = run(
        BIN.as_ref(),
        &[
            "crawl",
            "--allow-unroutable",
            "--json",
            "--timeout",
            "10",
            &seed,
        ],
        CRAWL_LIMIT,
    );
    assert!(out.status.success(), "{test}: crawl failed: {out:?}");
    let id = crawler_id(&out.stderr);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{test}: no JSON ({e}): {out:?}"));
    assert_eq!(v["network"], net.chain_id.as_str(), "{v:#}");
    check_every_node(&net, &v, test);
    for n in &net.nodes {
        assert_eq!(n.node.version, "1.0.1", "{test}: node {}", n.index);
    }
    std::thread::sleep(Duration::from_secs(2));
    for n in &net.nodes {
        let log = n.node.log();
        let bad = complaints(&log, &id);
        assert!(
            bad.is_empty(),
            "{test}: node {} complains: {bad:#?}",
            n.index
        );
        assert!(
            log.contains(&id),
            "{test}: node {} never logged {id}",
            n.index
        );
    }
}

/// `crawl --addrbook`: a fresh node of `release`, with no seeds and no
/// persistent peers, whose only knowledge of the network is the
/// `addrbook.json` a crawl of that network wrote, loads it, dials a peer
/// from it and syncs the chain.
fn a_node_starts_from_the_crawls_addrbook(release: GoVersion, test: &str) {
    let Some(net) = Network::start(&[release, release], test) else {
        return;
    };
    net.wait_line(LINK_LIMIT);
    net.wait_height(2, LINK_LIMIT);
    let dir = scratch(test);
    let book = dir.join("addrbook.json");
    let out = run(
        BIN.as_ref(),
        &[
            "crawl",
            "--allow-unroutable",
            "--addrbook",
            book.to_str().unwrap(),
            &net.nodes[0].address(),
        ],
        CRAWL_LIMIT,
    );
    assert!(out.status.success(), "{test}: crawl failed: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("address book of 2 nodes written"),
        "{stderr}"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&book).unwrap()).unwrap();
    let in_book: Vec<String> = v["addrs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["addr"]["id"].as_str().unwrap().to_string())
        .collect();
    for n in &net.nodes {
        assert!(in_book.contains(&n.node.node_id), "{test}: {v:#}");
    }

    let bin = p2p_conn_interop::cometbft_node::node_binary(release, test).expect("built above");
    let genesis = net.nodes[0].node.home.join("config/genesis.json");
    let extra = [
        ("", "moniker", "\"fresh\"".to_string()),
        ("p2p", "persistent_peers", "\"\"".into()),
        ("p2p", "seeds", "\"\"".into()),
        ("p2p", "pex", "true".into()),
        (
            "p2p",
            "addr_book_file",
            format!("{:?}", book.display().to_string()),
        ),
    ];
    let fresh = p2p_conn_interop::cometbft_node::Node::start_with(&bin, &extra, Some(&genesis));
    let want = net
        .nodes
        .iter()
        .map(|n| n.height().unwrap_or(0))
        .max()
        .unwrap();
    let deadline = std::time::Instant::now() + LINK_LIMIT;
    let (peers, height) = loop {
        let peers = fresh.peers().unwrap_or_default();
        let height = fresh.height().unwrap_or(0);
        if peers.iter().any(|p| in_book.contains(&p.id)) && height >= want {
            break (peers, height);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{test}: the fresh node found no peer of its book or did not sync to {want} (height {height}, peers {peers:?}); log:\n{}",
            fresh.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!(
        "{test}: the fresh {} node reached {} peer(s) from the book and height {height}",
        release.label(),
        peers.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_v038_node_starts_from_the_crawls_addrbook() {
    a_node_starts_from_the_crawls_addrbook(
        GoVersion::V038,
        "a_v038_node_starts_from_the_crawls_addrbook",
    );
}

#[test]
fn a_v1_node_starts_from_the_crawls_addrbook() {
    a_node_starts_from_the_crawls_addrbook(
        GoVersion::V1,
        "a_v1_node_starts_from_the_crawls_addrbook",
    );
}

/// A node of CometBFT's e2e application (its own chain, one validator)
/// that takes a snapshot every 3 blocks and keeps the last 5 blocks:
/// `crawl --snapshots` reports the pruned range (base above 1) from its
/// blocksync status and the snapshots its state-sync reactor lists.
fn crawl_reports_pruning_and_snapshots(release: GoVersion, test: &str) {
    let Some(bin) = p2p_conn_interop::cometbft_node::node_binary(release, test) else {
        return;
    };
    let Some(e2e) = p2p_conn_interop::cometbft_node::e2e_node_binary(release, test) else {
        return;
    };
    let app = [
        ("snapshot_interval", "3".to_string()),
        ("retain_blocks", "5".to_string()),
        ("persist_interval", "1".to_string()),
    ];
    let mut extra = vec![("consensus", "timeout_commit", "\"300ms\"".to_string())];
    if release == GoVersion::V1 {
        // v1 prunes in a background service, every 10 s by default.
        extra.push(("storage.pruning", "interval", "\"1s\"".to_string()));
    }
    let node = p2p_conn_interop::cometbft_node::Node::start_e2e(&bin, &e2e, &app, &extra);
    // Past the first prunes (the RPC's earliest block above 1) and several
    // snapshots.
    let earliest = || {
        node.rpc("/status")?["result"]["sync_info"]["earliest_block_height"]
            .as_str()?
            .parse::<i64>()
            .ok()
    };
    let deadline = std::time::Instant::now() + LINK_LIMIT;
    while node.height().unwrap_or(0) < 14 || earliest().unwrap_or(0) <= 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "{test}: no height 14 pruned (earliest {:?}); log:\n{}",
            earliest(),
            node.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let seed = format!("{}@{}", node.node_id, node.p2p_addr);
    let out = run(
        BIN.as_ref(),
        &["crawl", "--allow-unroutable", "--json", &seed],
        CRAWL_LIMIT,
    );
    assert!(out.status.success(), "{test}: crawl failed: {out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = &v["nodes"][0];
    assert_eq!(n["status"], "ok", "{test}: {n:#}");
    let (base, height) = (n["base"].as_i64().unwrap(), n["height"].as_i64().unwrap());
    assert!(height >= 14, "{test}: {n:#}");
    assert!(base > 1 && base > height - 10, "{test}: not pruned: {n:#}");
    let snaps = n["snapshots"].as_array().expect("snapshots listed");
    assert!(snaps.len() >= 3, "{test}: {n:#}");
    for s in snaps {
        let h = s["height"].as_u64().unwrap();
        assert_eq!(h % 3, 0, "{test}: {s:#}");
        assert!(h as i64 <= height);
        assert_eq!(s["hash"].as_str().unwrap().len(), 64, "{s:#}");
        assert!(s["chunks"].as_u64().unwrap() >= 1);
    }
    eprintln!(
        "{test}: blocks {base}-{height}, {} snapshots, newest {}",
        snaps.len(),
        snaps
            .iter()
            .filter_map(|s| s["height"].as_u64())
            .max()
            .unwrap()
    );
    // The table's columns say the same.
    let t = run(
        BIN.as_ref(),
        &["crawl", "--allow-unroutable", "--has-height", "2", &seed],
        CRAWL_LIMIT,
    );
    let text = String::from_utf8_lossy(&t.stdout);
    assert!(
        text.contains("0 nodes can serve height 2"),
        "{test}: pruned block 2 listed: {text}"
    );
}

#[test]
fn crawl_reports_a_v038_nodes_pruning_and_snapshots() {
    crawl_reports_pruning_and_snapshots(
        GoVersion::V038,
        "crawl_reports_a_v038_nodes_pruning_and_snapshots",
    );
}

#[test]
fn crawl_reports_a_v1_nodes_pruning_and_snapshots() {
    crawl_reports_pruning_and_snapshots(
        GoVersion::V1,
        "crawl_reports_a_v1_nodes_pruning_and_snapshots",
    );
}

/// A node with `pex = false` in its config (as validators and private
/// sentries run) lists no PEX channel: the crawl asks it for its blocks
/// (and snapshots) all the same, so `--has-height 1` lists it, and it
/// logs nothing against the crawler.
#[test]
fn crawl_lists_a_node_without_pex_by_its_blocks() {
    let test = "crawl_lists_a_node_without_pex_by_its_blocks";
    let Some(bin) = p2p_conn_interop::cometbft_node::node_binary(GoVersion::V038, test) else {
        return;
    };
    let extra = [
        ("p2p", "pex", "false".to_string()),
        // Blocks to hold: the chain moves on its own.
        ("consensus", "create_empty_blocks", "true".into()),
        ("consensus", "timeout_commit", "\"300ms\"".into()),
    ];
    let node = p2p_conn_interop::cometbft_node::Node::start_with(&bin, &extra, None);
    let deadline = std::time::Instant::now() + LINK_LIMIT;
    while node.height().unwrap_or(0) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "{test}: no height 2; log:\n{}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let seed = format!("{}@{}", node.node_id, node.p2p_addr);
    let out = run(
        BIN.as_ref(),
        &["crawl", "--has-height", "1", &seed],
        CRAWL_LIMIT,
    );
    assert!(out.status.success(), "{test}: crawl failed: {out:?}");
    let id = crawler_id(&out.stderr);
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with(&node.node_id))
        .unwrap_or_else(|| panic!("{test}: the node is not listed: {table}"));
    assert!(row.contains(" no PEX "), "{test}: {row}");
    assert!(table.contains("1 node can serve height 1"), "{table}");
    // The JSON says the same: its channels, its blocks, no answer.
    let out = run(
        BIN.as_ref(),
        &["crawl", "--json", "--has-height", "1", &seed],
        CRAWL_LIMIT,
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = &v["nodes"][0];
    assert_eq!(n["status"], "no PEX", "{test}: {n:#}");
    assert!(
        !n["channels"].as_array().unwrap().contains(&"00".into()),
        "{n:#}"
    );
    assert!(n["base"].as_i64().unwrap() <= 1, "{n:#}");
    assert!(n["height"].as_i64().unwrap() >= 2, "{n:#}");
    assert_eq!(n["pex_addrs"], Value::Null, "{n:#}");
    assert_eq!(n["snapshots"], serde_json::json!([]), "{n:#}");
    let id2 = crawler_id(&out.stderr);
    std::thread::sleep(Duration::from_secs(2));
    let log = node.log();
    for who in [&id, &id2] {
        let bad = complaints(&log, who);
        assert!(bad.is_empty(), "{test}: the node complains: {bad:#?}");
        assert!(log.contains(who.as_str()), "{test}: never logged {who}");
    }
}
