//! `p2p-conn check` against real networks of CometBFT nodes on loopback
//! (`p2p_conn_interop::cometbft_network`, the last node in `seed_mode`): a
//! chain registry `chain.json` and a `config.toml` with good and bad
//! entries get the right verdict for each (a real seed; a regular node
//! listed as a seed; a wrong node ID; a closed port; an entry without an
//! ID; another network), the exit code says whether any failed, and no
//! node complains of the checker.
//!
//! Without Go the test prints a notice and passes; with `CI=true` it fails.

use std::time::Duration;

use crate::common::complaints;
use crate::common::process::{run, scratch};
use p2p_conn_interop::cometbft_go::GoVersion;
use p2p_conn_interop::cometbft_network::{Network, LAYOUT};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");
const LINK_LIMIT: Duration = Duration::from_secs(60);
const CHECK_LIMIT: Duration = Duration::from_secs(120);

/// The checker's ID, from its `checker id` line on stderr.
fn checker_id(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    text.lines()
        .find_map(|l| l.strip_prefix("checker id "))
        .unwrap_or_else(|| panic!("no `checker id` line: {text}"))
        .trim()
        .to_string()
}

/// A closed port on loopback.
fn closed_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap().to_string();
    drop(l);
    a
}

fn entry(id: &str, addr: &str) -> Value {
    json!({"id": id, "address": addr, "provider": "test"})
}

/// The problems of the entry from `source`, in `v`'s JSON.
fn problems<'a>(v: &'a Value, source: &str) -> (&'a Value, Vec<String>) {
    let e = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["source"] == source)
        .unwrap_or_else(|| panic!("no entry {source}: {v:#}"));
    let p = e["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    (e, p)
}

fn check_network(net: &Network, test: &str) {
    net.wait_line(LINK_LIMIT);
    let dir = scratch(test);
    let n = net.nodes.len();
    let seed = &net.nodes[n - 1];
    assert!(seed.seed, "the last node is the seed");
    let (a, b) = (&net.nodes[0].node, &net.nodes[1].node);
    let closed = closed_port();
    let chain = json!({
        "chain_name": "test",
        "chain_id": net.chain_id,
        "peers": {
            "seeds": [
                entry(&seed.node.node_id, &seed.node.p2p_addr),
                // A regular node listed as a seed.
                entry(&b.node_id, &b.p2p_addr),
                // Node 0's ID at node 1's address.
                entry(&a.node_id, &b.p2p_addr),
                entry(&a.node_id, &closed),
                entry("", &a.p2p_addr),
            ],
            "persistent_peers": [
                entry(&a.node_id, &a.p2p_addr),
            ],
        },
    });
    let path = dir.join("chain.json");
    std::fs::write(&path, serde_json::to_string_pretty(&chain).unwrap()).unwrap();
    let out = run(
        BIN.as_ref(),
        &["check", "--json", "--timeout", "10", path.to_str().unwrap()],
        CHECK_LIMIT,
    );
    assert_eq!(out.status.code(), Some(10), "{test}: {out:?}");
    let id1 = checker_id(&out.stderr);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{test}: no JSON ({e}): {out:?}"));
    assert_eq!(v["network"], net.chain_id.as_str());
    assert_eq!(v["failed"], 4, "{test}: {v:#}");

    let (e, p) = problems(&v, "chain.json peers.seeds[0]");
    assert!(p.is_empty(), "{test}: the real seed fails: {e:#}");
    assert_eq!(e["ok"], true);
    assert!(e["pex_addrs"].as_u64().unwrap() >= 1, "{e:#}");
    assert!(e["hung_up_after_answer_ms"].as_f64().is_some(), "{e:#}");
    assert_eq!(e["version"], seed.node.version.as_str());
    assert_eq!(e["network"], net.chain_id.as_str());
    assert!(e["handshake_ms"].as_f64().is_some());
    assert!(e["release_line"].as_str().is_some(), "{e:#}");

    let (e, p) = problems(&v, "chain.json peers.seeds[1]");
    assert_eq!(p.len(), 1, "{e:#}");
    assert!(
        p[0].starts_with("not a seed: answered PEX but stayed"),
        "{e:#}"
    );
    assert!(e["pex_addrs"].as_u64().is_some(), "{e:#}");

    let (e, p) = problems(&v, "chain.json peers.seeds[2]");
    assert_eq!(
        p,
        vec![format!(
            "wrong node ID: the entry names {}, but the node at {} is {}",
            a.node_id, b.p2p_addr, b.node_id
        )],
        "{e:#}"
    );

    let (e, p) = problems(&v, "chain.json peers.seeds[3]");
    assert_eq!(p.len(), 1, "{e:#}");
    assert!(p[0].starts_with("unreachable: connect failed"), "{e:#}");

    let (_, p) = problems(&v, "chain.json peers.seeds[4]");
    assert_eq!(p, vec!["no node ID: an entry needs ID@HOST:PORT"]);

    let (e, p) = problems(&v, "chain.json peers.persistent_peers[0]");
    assert!(p.is_empty(), "{test}: a good peer fails: {e:#}");
    assert_eq!(e["pex_addrs"], Value::Null, "a peer is not asked: {e:#}");

    // The same as a table: a row per entry, the reasons last.
    let shown = run(
        BIN.as_ref(),
        &["check", "--timeout", "10", path.to_str().unwrap()],
        CHECK_LIMIT,
    );
    assert_eq!(shown.status.code(), Some(10), "{test}: {shown:?}");
    let failing = String::from_utf8_lossy(&shown.stdout).into_owned();
    eprintln!("{test}:\n{failing}");
    assert_eq!(
        failing.lines().filter(|l| l.starts_with("FAIL ")).count(),
        4,
        "{failing}"
    );
    assert!(failing.contains("6 entries, 2 ok, 4 failed"), "{failing}");
    let id0 = checker_id(&shown.stderr);

    // A config.toml for another network, and the good entries only: the
    // table, exit 0, then exit 10 with the network named.
    let toml = format!(
        "[p2p]\nseeds = \"{}\"\npersistent_peers = \"{},{}\"\n",
        seed.address(),
        net.nodes[0].address(),
        net.nodes[1].address()
    );
    let cfg = dir.join("config.toml");
    std::fs::write(&cfg, toml).unwrap();
    let good = run(
        BIN.as_ref(),
        &["check", "--network", &net.chain_id, cfg.to_str().unwrap()],
        CHECK_LIMIT,
    );
    let table = String::from_utf8_lossy(&good.stdout).into_owned();
    eprintln!("{test}:\n{table}");
    assert_eq!(good.status.code(), Some(0), "{test}: {good:?}");
    assert!(table.starts_with("VERDICT"), "{table}");
    assert_eq!(
        table.lines().filter(|l| l.starts_with("ok ")).count(),
        3,
        "{table}"
    );
    assert!(table.contains("3 entries, 3 ok, 0 failed"), "{table}");
    let id2 = checker_id(&good.stderr);
    let other = run(
        BIN.as_ref(),
        &[
            "check",
            "--json",
            "--network",
            "other-chain",
            &net.nodes[0].address(),
        ],
        CHECK_LIMIT,
    );
    assert_eq!(other.status.code(), Some(10), "{test}: {other:?}");
    let v3: Value = serde_json::from_slice(&other.stdout).unwrap();
    let (_, p) = problems(&v3, "the command line");
    assert_eq!(
        p,
        vec![format!(
            "wrong network: the node is on {}, not other-chain",
            net.chain_id
        )]
    );
    let id3 = checker_id(&other.stderr);

    std::thread::sleep(Duration::from_secs(2));
    for n in &net.nodes {
        let log = n.node.log();
        for who in [&id0, &id1, &id2, &id3] {
            let bad = complaints(&log, who);
            assert!(
                bad.is_empty(),
                "{test}: node {} complains of {who}: {bad:#?}",
                n.index
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_judges_a_registry_of_a_real_network() {
    let test = "check_judges_a_registry_of_a_real_network";
    let Some(net) = Network::start(&LAYOUT, test) else {
        return;
    };
    check_network(&net, test);
}

/// The same against v1.0.1 nodes (a network of their own: v1.0.1 does not
/// keep peers of the other lines).
#[test]
fn check_judges_a_registry_of_a_v1_network() {
    let test = "check_judges_a_registry_of_a_v1_network";
    let Some(net) = Network::start(&[GoVersion::V1, GoVersion::V1, GoVersion::V1], test) else {
        return;
    };
    check_network(&net, test);
}

// ---------------------------------------------------------------------------
// Without nodes: files it cannot read, and scripted peers (real p2p-conn
// connections, `p2p_conn_interop::scripted`).

const LIMIT: Duration = Duration::from_secs(30);

/// Runs `p2p-conn check ARGS` on a blocking thread.
async fn check(args: Vec<String>) -> crate::common::process::Finished {
    tokio::task::spawn_blocking(move || {
        let mut all = vec!["check".to_string()];
        all.extend(args);
        run(BIN.as_ref(), &all, LIMIT)
    })
    .await
    .unwrap()
}

/// `check ARG` must exit 1 (usage), print no table, and name `ARG` and
/// each of `words` on stderr.
fn usage_error(arg: &str, words: &[&str]) {
    let out = run(BIN.as_ref(), &["check", arg], LIMIT);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "check {arg}: {out:?}");
    assert!(out.stdout.is_empty(), "check {arg}: a table: {out:?}");
    assert!(
        err.contains(arg),
        "check {arg}: the file is not named: {err}"
    );
    for w in words {
        assert!(err.contains(w), "check {arg}: no {w:?} in {err}");
    }
}

/// A path that does not exist is a usage error (exit 1) that names it,
/// not an entry that fails (exit 10): a registry's CI must not report a
/// mistyped path as a dead peer. An argument is a path when it contains
/// `/` or ends in `.json` or `.toml`, or exists.
#[test]
fn check_names_a_missing_path_as_a_usage_error() {
    let dir = scratch("check-missing");
    let missing_dir = dir.join("missing").join("chain.json");
    for missing in [
        "nonexistent.json",
        "peers.TOML",
        "./chain",
        missing_dir.to_str().unwrap(),
    ] {
        usage_error(missing, &["no such file"]);
    }
    // A folder is not a list either.
    usage_error(dir.to_str().unwrap(), &["cannot read"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file that is not valid JSON or TOML is a usage error that names the
/// file and the problem: broken JSON as broken JSON (by its name, `.json`,
/// or its first character, `{`), never as a config.toml without peers.
#[test]
fn check_names_a_broken_file_as_a_usage_error() {
    let dir = scratch("check-broken");
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    usage_error(
        &write("garbage.json", "garbage{"),
        &["not valid JSON", "line 1 column 1"],
    );
    usage_error(
        &write(
            "comma.json",
            "{\"chain_id\": \"x\",\n \"peers\": {\"seeds\": []},\n}\n",
        ),
        &["not valid JSON", "trailing comma at line 3"],
    );
    usage_error(
        &write("config.toml", "[p2p]\nseeds = \"\"\ngarbage{\n"),
        &["not valid TOML", "line 3"],
    );
    usage_error(
        &write("registry", "garbage{"),
        &["neither JSON", "nor TOML", "line 1"],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The NodeInfo a scripted peer announces for itself.
fn scripted_info(id: p2p_conn::NodeId) -> Vec<u8> {
    let mut n = p2p_conn::nodeinfo::NodeInfo::new(id, "test-chain");
    n.channels = vec![0x40, 0x20, 0x38];
    n.encode_delimited().unwrap()
}

/// An entry whose node answers with another ID: the NODE ID column shows
/// who answered, beside that node's network and version; WHY names the
/// ID the entry expected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_shows_who_answered_in_the_node_id_column() {
    use p2p_conn_interop::scripted::{scripted_peer, Then};
    let (addr, real) = scripted_peer(scripted_info, Then::Hold).await;
    let expected = p2p_conn::Identity::generate().node_id();
    let out = check(vec![format!("{expected}@{addr}")]).await;
    assert_eq!(out.status.code(), Some(10), "{out:?}");
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = table.lines();
    let head = lines.next().unwrap();
    let row = lines.next().unwrap();
    let shown = row[head.find("NODE ID").unwrap()..]
        .split_whitespace()
        .next()
        .unwrap();
    assert!(
        shown.len() >= 12 && real.to_string().starts_with(shown),
        "NODE ID is not the node that answered ({real}):\n{table}"
    );
    let why = &row[head.find("WHY").unwrap()..];
    assert!(why.contains(&expected.to_string()), "{table}");
    assert!(why.contains(&real.to_string()), "{table}");
}

/// A closed port is worded by its stage, `connect` (exit 3 of `probe` and
/// `dial`; docs/operator-manual.md, "Exit codes"), not as an I/O error.
#[test]
fn check_words_an_unreachable_entry_by_its_stage() {
    let id = p2p_conn::Identity::generate().node_id();
    let out = run(
        BIN.as_ref(),
        &["check", "--json", &format!("{id}@{}", closed_port())],
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(10), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (e, p) = problems(&v, "the command line");
    assert_eq!(p.len(), 1, "{e:#}");
    assert!(
        p[0].starts_with("unreachable: connect failed: ") && !p[0].contains("I/O error"),
        "{e:#}"
    );
}

/// One entry is "1 entry".
#[test]
fn check_counts_one_entry_in_the_singular() {
    let id = p2p_conn::Identity::generate().node_id();
    let out = run(
        BIN.as_ref(),
        &["check", &format!("{id}@{}", closed_port())],
        LIMIT,
    );
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(table.contains("\n1 entry, 0 ok, 1 failed;"), "{table}");
}
