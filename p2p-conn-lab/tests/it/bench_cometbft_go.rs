//! `p2p-conn-lab bench --baseline` takes every line's Go peer by its name
//! (`cometbft-go-0.39`, ...), CometBFT's own Go `SecretConnection`
//! (`interop/cometbft-go`, built at every line the suite proves), alone and
//! over several connections at once.
//!
//! Without the Go toolchain each test prints a notice and passes, unless
//! `CI=true`, where it fails.

use std::path::Path;
use std::time::Duration;

use p2p_conn_interop::go_peer::{go_peer, GoVersion};
use p2p_conn_interop::process::run_ok;

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn-lab");

/// Bound on every process of a test, from its start.
const LIMIT: Duration = Duration::from_secs(30);

/// `bench --baseline cometbft-go-0.NN` (`cometbft-go` for v1.0.1, also
/// `cometbft-go-1`) runs the Go peer of that line: its row is named by the
/// CometBFT version it reports.
fn bench_baseline_runs_the_lines_go_peer(version: GoVersion, test: &str) {
    if go_peer(version, test).is_none() {
        return;
    }
    let names = match version.line() {
        "v1" => vec!["cometbft-go".to_string(), "cometbft-go-1".to_string()],
        line => vec![format!("cometbft-go-{}", line.trim_start_matches('v'))],
    };
    for name in names {
        let args = ["bench", "--mib", "1", "--json", "--baseline", &name];
        let out = run_ok(Path::new(BIN), &args, LIMIT);
        let text = String::from_utf8_lossy(&out.stdout);
        let impls: Vec<String> = text
            .lines()
            .map(|l| {
                let row: serde_json::Value = serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("{test}: {name}: {l:?}: {e}"));
                row["impl"].as_str().unwrap_or_default().to_string()
            })
            .collect();
        let go = format!("cometbft-go {}", version.label());
        assert_eq!(impls[1], go, "{test}: --baseline {name}: {text}");
    }
}

/// `bench --baseline cometbft-go* --connections 2` runs that line's Go peer
/// with two pairs at once beside ours (its `bench -connections 2`): every
/// round has both implementations over one connection and over two, each
/// run moving the whole workload, and the ratios at 2 connections and each
/// implementation's scaling line follow, all JSON lines saying their
/// connection count.
fn bench_connections_runs_go_pairs_at_once(version: GoVersion, test: &str) {
    if go_peer(version, test).is_none() {
        return;
    }
    let name = match version.line() {
        "v1" => "cometbft-go".to_string(),
        line => format!("cometbft-go-{}", line.trim_start_matches('v')),
    };
    let args = [
        "bench",
        "--mib",
        "2",
        "--size",
        "4096",
        "--json",
        "--repeat",
        "1",
        "--connections",
        "2",
        "--baseline",
        &name,
    ];
    let out = run_ok(Path::new(BIN), &args, LIMIT);
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{test}: {l:?}: {e}")))
        .collect();
    let go = format!("cometbft-go {}", version.label());
    let of = |kind: &str, imp: &str, n: u64| {
        rows.iter()
            .filter(|r| r["kind"] == kind && r["impl"] == imp && r["connections"] == n)
            .count()
    };
    for n in [1, 2] {
        for imp in ["p2p-conn (tokio)", go.as_str()] {
            assert_eq!(of("run", imp, n), 1, "{test}: {imp} over {n}: {rows:?}");
        }
        assert_eq!(of("ratio", "p2p-conn (tokio)", n), 1, "{test}: {rows:?}");
    }
    assert_eq!(of("scaling", "p2p-conn (tokio)", 2), 1, "{test}: {rows:?}");
    assert_eq!(of("scaling", &go, 2), 1, "{test}: {rows:?}");
    for r in rows.iter().filter(|r| r["kind"] == "run") {
        assert_eq!(r["bytes"], 2u64 << 20, "{test}: {r}");
        assert_eq!(r["messages"], 512, "{test}: {r}");
    }
}

p2p_conn_interop::per_release! {
    v0_34: V034, v0_37: V037, v0_38: V038, v0_39: V039, v0_40: V040, v1: V1;
    [
        bench_baseline_runs_the_lines_go_peer,
        bench_connections_runs_go_pairs_at_once,
    ]
}
