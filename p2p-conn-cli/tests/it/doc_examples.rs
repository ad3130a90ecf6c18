//! The documents' complete program, run against real `cometbft` nodes.
//! `scripts/doc-examples.py` writes each document's Rust blocks to
//! `docs/examples/` (CI builds them there with the document's own Cargo
//! line); here docs/library-guide.md's program (`docs/examples/pex-addresses`)
//! is built the same way and run against a network of nodes, so a program
//! a node would refuse, or one that prints nothing useful, fails the suite.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use p2p_conn_interop::cometbft_go::GoVersion;
use p2p_conn_interop::cometbft_network::Network;
use p2p_conn_interop::process::run_ok;

/// The example crate, under the workspace root.
const PROGRAM: &str = "docs/examples/pex-addresses";

/// docs/examples/pex-addresses built as a user would build it (its own
/// Cargo.toml, the workspace's lock file, as the `doc-examples` CI stage
/// does, in the same target directory), once per test binary: its binary.
fn program() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            let krate = root.join(PROGRAM);
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target"));
            std::fs::copy(root.join("Cargo.lock"), krate.join("Cargo.lock"))
                .unwrap_or_else(|e| panic!("copying Cargo.lock into {krate:?}: {e}"));
            // The cargo running the tests, where it says; else the one on PATH.
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let out = Command::new(cargo)
                .arg("build")
                .arg("--manifest-path")
                .arg(krate.join("Cargo.toml"))
                .arg("--target-dir")
                .arg(&target)
                .stdin(Stdio::null())
                .output()
                .expect("running cargo");
            assert!(
                out.status.success(),
                "building {PROGRAM}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            target.join("debug").join("doc-example-pex-addresses")
        })
        .clone()
}

/// docs/library-guide.md's complete program against node 0 of a two-node
/// network of `version` (node 1 dials node 0, so node 0's address book
/// holds node 1's address): it prints node 0's NodeInfo and node 1's
/// address from node 0's `PexAddrs`, exits 0, and the node does not stop
/// it for anything but its hang-up.
fn complete_program_prints_nodeinfo_and_addresses(version: GoVersion, test: &str) {
    let Some(net) = Network::start(&[version, version], test) else {
        return;
    };
    net.wait_line(Duration::from_secs(60));
    let (asked, known) = (&net.nodes[0], &net.nodes[1]);
    let mark = asked.node.log_len();
    let run = run_ok(&program(), &[asked.address()], Duration::from_secs(60));
    let out = run.stdout_text();
    eprintln!("{test}: the program printed:\n{out}");
    let expect = [
        format!("node      {}", asked.node.node_id),
        format!("moniker   {}", asked.moniker),
        format!("network   {}", net.chain_id),
        format!("version   {}", asked.node.version),
        format!("listen    tcp://{}", asked.node.p2p_addr),
    ];
    for line in &expect {
        assert!(
            out.lines().any(|l| l == line),
            "{test}: no line `{line}` in:\n{out}"
        );
    }
    let count = out
        .lines()
        .find_map(|l| l.strip_prefix("addresses "))
        .unwrap_or_else(|| panic!("{test}: no `addresses` line in:\n{out}"));
    assert_ne!(count, "0", "{test}: an empty PEX answer");
    let other = format!("  {} (not publicly routable)", known.address());
    assert!(
        out.lines().any(|l| l == other),
        "{test}: node 1's address `{other}` is not listed in:\n{out}"
    );
    // Our close ends the stream, which the node may log as "Stopping peer
    // for error" with `EOF`; any other stop is the node refusing us (lines
    // about node 1 are not about us).
    let log = asked.node.log_since(mark);
    let stopped: Vec<&str> = log
        .lines()
        .filter(|l| !l.contains(&known.node.node_id))
        .filter(|l| {
            l.contains("rejected msg")
                || (l.contains("Stopping peer for error") && !l.contains("EOF"))
        })
        .collect();
    assert!(stopped.is_empty(), "{test}: {stopped:?}");
}

p2p_conn_interop::per_release! {
    v0_38: V038, v0_40: V040, v1: V1;
    [complete_program_prints_nodeinfo_and_addresses]
}
