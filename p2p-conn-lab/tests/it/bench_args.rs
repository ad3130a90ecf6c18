//! `p2p-conn-lab bench`'s arguments and JSON output: a small run, sizes
//! out of range, one JSON schema for every line.

use std::path::Path;
use std::time::Duration;

use p2p_conn_interop::process::{run, Feed, Finished, Proc};

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn-lab");

/// Bound on a run to its end.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// `p2p-conn-lab args` to its end.
fn run_cli(args: &[&str]) -> Finished {
    run(Path::new(BIN), args, RUN_LIMIT)
}

/// `p2p-conn-lab args` with `stdin`, then end of file.
fn spawn(args: &[&str], stdin: &[u8]) -> Proc {
    Proc::spawn(Path::new(BIN), args, Feed::Now(stdin.to_vec()))
}

#[test]
fn bench_runs_small() {
    let out = run_cli(&["bench", "--mib", "2", "--size", "4096"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("MB/s") && text.contains("content verified"),
        "{text}"
    );
    let out = run_cli(&[
        "bench",
        "--mib",
        "1",
        "--size",
        "1000",
        "--json",
        "--backend",
        "rustcrypto",
        "--frame-size",
        "4096",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["backend"], "rustcrypto");
    assert_eq!(v["frame_size"], 4096);
    assert!(v["mb_per_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn bench_rejects_huge_sizes() {
    for args in [
        &["bench", "--size", "18446744073709551615", "--mib", "1"][..],
        &["bench", "--size", "1073741825", "--mib", "1"],
        &["bench", "--mib", "18446744073709551615"],
        &["bench", "--mib", "1048577"],
        &["bench", "--size", "0"],
    ] {
        let out = spawn(args, b"").finish_within(Duration::from_secs(10));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: --"), "{args:?}: {err}");
    }
}

/// Every `--json` line is an object with the same keys, and summary rows are
/// told apart by `kind` with `run: null`.
#[test]
fn bench_json_lines_share_one_schema() {
    for extra in [&[][..], &["--baseline", "tendermint-p2p"]] {
        let mut args = vec![
            "bench", "--mib", "1", "--size", "4096", "--repeat", "2", "--json",
        ];
        args.extend_from_slice(extra);
        let out = run_cli(&args);
        out.assert_ok("bench");
        let text = String::from_utf8(out.stdout).unwrap();
        let rows: Vec<serde_json::Map<String, serde_json::Value>> = text
            .lines()
            .map(|l| match serde_json::from_str(l) {
                Ok(serde_json::Value::Object(m)) => m,
                other => panic!("not a JSON object: {l:?} ({other:?})"),
            })
            .collect();
        let keys =
            |m: &serde_json::Map<String, serde_json::Value>| m.keys().cloned().collect::<Vec<_>>();
        for r in &rows {
            assert_eq!(keys(r), keys(&rows[0]), "{text}");
        }
        let kinds: Vec<&str> = rows.iter().map(|r| r["kind"].as_str().unwrap()).collect();
        let runs: Vec<&serde_json::Value> = rows.iter().map(|r| &r["run"]).collect();
        if extra.is_empty() {
            assert_eq!(kinds, ["run", "run", "median"], "{text}");
            assert_eq!(runs, [&0.into(), &1.into(), &serde_json::Value::Null]);
        } else {
            assert_eq!(
                kinds,
                ["run", "run", "run", "run", "median", "median", "ratio"],
                "{text}"
            );
            assert!(rows[6]["ratio"].as_f64().unwrap() > 0.0, "{text}");
            assert!(rows[6]["run"].is_null());
        }
        let median = &rows[kinds.iter().position(|k| *k == "median").unwrap()];
        let (a, b) = (
            rows[0]["mb_per_s"].as_f64().unwrap(),
            rows[if extra.is_empty() { 1 } else { 2 }]["mb_per_s"]
                .as_f64()
                .unwrap(),
        );
        let m = median["mb_per_s"].as_f64().unwrap();
        assert!(
            (m - (a + b) / 2.0).abs() <= 1e-6 * m.max(1.0),
            "median of two runs must be their mean: {a} {b} -> {m}"
        );
    }
}
