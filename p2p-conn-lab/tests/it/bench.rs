//! `bench` says when its figures are not fit to compare: runs too short, or
//! a ratio from a single pair. Behaviour only: a tiny `--mib` is too short
//! on any machine; no test depends on how fast a run is.

use std::path::Path;
use std::time::Duration;

use p2p_conn_interop::process::{run, Finished};

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn-lab");

const RUN_LIMIT: Duration = Duration::from_secs(120);

fn run_cli(args: &[&str]) -> Finished {
    let out = run(Path::new(BIN), args, RUN_LIMIT);
    out.assert_ok(&args.join(" "));
    out
}

/// 1 MiB takes milliseconds: the text report ends with the "too short"
/// note and the `--mib` to use instead; with `--json` the note goes to
/// stderr and stdout stays JSON lines.
#[test]
fn bench_says_a_tiny_run_is_too_short() {
    let out = run_cli(&["bench", "--mib", "1", "--size", "4096"]);
    let text = out.stdout_text();
    let note = text
        .lines()
        .find(|l| l.starts_with("note: runs of "))
        .unwrap_or_else(|| panic!("no note: {text}"));
    assert!(note.contains("too short to compare"), "{note}");
    assert!(note.contains("use --mib "), "{note}");
    assert!(note.ends_with("(1 MiB now)"), "{note}");

    let out = run_cli(&["bench", "--mib", "1", "--size", "4096", "--json"]);
    for l in out.stdout_text().lines() {
        serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{l:?}: {e}"));
    }
    let stderr = out.stderr_lines();
    assert!(
        stderr.iter().any(|l| l.contains("too short to compare")),
        "{stderr:?}"
    );
}

/// With a baseline and no `--repeat`, `bench` alternates 5 pairs and
/// reports their medians; `--repeat 1` runs one pair and says that one
/// pair's ratio is not to be trusted (in text; not with `--json`).
#[test]
fn bench_with_a_baseline_repeats_or_says_why_not() {
    let args = [
        "bench",
        "--mib",
        "1",
        "--size",
        "4096",
        "--json",
        "--baseline",
        "tendermint-p2p",
    ];
    let out = run_cli(&args);
    let kinds: Vec<String> = out
        .stdout_text()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["kind"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| *k == "run").count(),
        10,
        "{kinds:?}"
    );
    assert_eq!(kinds.last().map(String::as_str), Some("ratio"), "{kinds:?}");
    assert!(
        !out.stderr_lines()
            .iter()
            .any(|l| l.contains("one run each")),
        "{:?}",
        out.stderr_lines()
    );

    // In text only: a script's --json runs alternate the pairs themselves
    // and are spared the note.
    let mut one: Vec<&str> = args.iter().copied().filter(|a| *a != "--json").collect();
    one.extend(["--repeat", "1"]);
    let out = run_cli(&one);
    let text = out.stdout_text();
    assert!(
        text.lines().any(|l| l.starts_with("note: one run each")),
        "{text}"
    );
    let mut json = args.to_vec();
    json.extend(["--repeat", "1"]);
    let out = run_cli(&json);
    assert!(
        !out.stderr_lines()
            .iter()
            .any(|l| l.contains("one run each")),
        "{:?}",
        out.stderr_lines()
    );
}

/// `bench --baseline cometbft-go` builds the Go peer on first use (minutes):
/// it says so on stderr before it starts, and says nothing when the peer is
/// built already. A fresh target folder and no `go` on PATH make the build
/// start and fail at once.
#[test]
fn bench_says_when_it_builds_the_go_peer() {
    let scratch = p2p_conn_interop::process::scratch("bench-go-build");
    let empty_path = scratch.join("bin");
    std::fs::create_dir_all(&empty_path).unwrap();
    let out = std::process::Command::new(BIN)
        .args([
            "bench",
            "--mib",
            "1",
            "--baseline",
            "cometbft-go",
            "--repeat",
            "1",
        ])
        .env("CARGO_TARGET_DIR", scratch.join("target"))
        .env("PATH", &empty_path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert_eq!(
        lines[0], "building CometBFT's Go peer v1.0.1 (first run only; up to a few minutes)...",
        "{err}"
    );
    assert!(lines[1].starts_with("error: the Go toolchain"), "{err}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let _ = std::fs::remove_dir_all(&scratch);

    // Built already: not a word of it.
    let test = "cli_bench::bench_says_when_it_builds_the_go_peer";
    let version = p2p_conn_interop::cometbft_go::GoVersion::V1;
    if p2p_conn_interop::go_peer::go_peer(version, test).is_none() {
        return;
    }
    let out = run_cli(&[
        "bench",
        "--mib",
        "1",
        "--baseline",
        "cometbft-go",
        "--repeat",
        "1",
    ]);
    let err = out.stderr_lines();
    assert!(!err.iter().any(|l| l.contains("building")), "{err:?}");
}

/// Each figure of a text row says what it is: the run's time is labelled
/// wall time, beside the CPU time per GiB (or per handshake).
#[test]
fn bench_rows_label_the_wall_time() {
    let out = run_cli(&["bench", "--mib", "1", "--size", "4096"]);
    let text = out.stdout_text();
    let row = text
        .lines()
        .find(|l| l.contains("MB/s"))
        .unwrap_or_else(|| panic!("no row: {text}"));
    let paren = &row[row.rfind('(').unwrap_or_else(|| panic!("{row}"))..];
    let secs = paren
        .strip_prefix("(wall ")
        .and_then(|r| r.strip_suffix(" s, content verified)"))
        .unwrap_or_else(|| panic!("unlabelled time: {row}"));
    secs.parse::<f64>().unwrap_or_else(|e| panic!("{row}: {e}"));
    assert!(row.contains(" s CPU/GiB"), "{row}");

    let out = run_cli(&["bench", "--handshakes", "20"]);
    let text = out.stdout_text();
    let row = text
        .lines()
        .find(|l| l.contains("handshakes/s"))
        .unwrap_or_else(|| panic!("no row: {text}"));
    assert!(row.contains("(20 handshakes, wall "), "{row}");
}

/// Every JSON line of `bench ARGS --json`, each checked to carry a
/// connection count.
fn json_lines(args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = args.to_vec();
    all.push("--json");
    let out = run_cli(&all);
    out.stdout_text()
        .lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"));
            assert!(v["connections"].as_u64().is_some(), "no connections: {l}");
            v
        })
        .collect()
}

/// `bench --connections 2` runs, in every round, the one-connection run
/// and the same workload over two connections at once: each of its runs
/// moves every byte (the receivers' opened plaintext adds up to the
/// workload; a byte short or wrong fails the run, see below), its JSON
/// lines say 2 connections, and medians and a "scaling" line (2 over 1)
/// follow. Without --repeat it repeats 5 times, as with a baseline.
#[test]
fn bench_over_two_connections_moves_every_byte() {
    let args = [
        "bench",
        "--connections",
        "2",
        "--mib",
        "4",
        "--size",
        "4096",
    ];
    let lines = json_lines(&[&args[..], &["--repeat", "2"]].concat());
    let kind = |v: &serde_json::Value, k: &str, n: u64| v["kind"] == k && v["connections"] == n;
    for n in [1, 2] {
        let runs: Vec<_> = lines.iter().filter(|v| kind(v, "run", n)).collect();
        assert_eq!(runs.len(), 2, "{n} connections: {lines:?}");
        for r in runs {
            assert_eq!(r["bytes"], 4u64 << 20, "{r}");
            assert_eq!(r["messages"], 1024, "{r}");
            assert_eq!(r["impl"], "p2p-conn (tokio)", "{r}");
            // With per-connection stats compiled in, the receivers opened
            // every byte: both connections' shares, summed.
            if let Some(opened) = r["recv_bytes_opened"].as_u64() {
                assert_eq!(opened, 4 << 20, "{r}");
            }
        }
        assert_eq!(
            lines.iter().filter(|v| kind(v, "median", n)).count(),
            1,
            "{lines:?}"
        );
    }
    let scaling: Vec<_> = lines.iter().filter(|v| v["kind"] == "scaling").collect();
    assert_eq!(scaling.len(), 1, "{lines:?}");
    assert_eq!(scaling[0]["connections"], 2, "{lines:?}");
    assert!(scaling[0]["ratio"].as_f64().unwrap() > 0.0, "{lines:?}");

    // Text: the N-connection rows are named "NAME x2" and say so, and the
    // scaling line names both runs' throughput.
    let out = run_cli(&[&args[..], &["--repeat", "1"]].concat());
    let text = out.stdout_text();
    let row = text
        .lines()
        .find(|l| l.starts_with("p2p-conn (tokio) x2 "))
        .unwrap_or_else(|| panic!("no x2 row: {text}"));
    assert!(
        row.ends_with(" s, 2 connections, content verified)"),
        "{row}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("scaling 2 connections over 1, p2p-conn (tokio): ")),
        "{text}"
    );

    // The default --repeat is 5.
    let lines = json_lines(&args);
    let runs = lines.iter().filter(|v| v["kind"] == "run").count();
    assert_eq!(runs, 10, "{lines:?}");
}

/// One bad connection fails the whole run, over every adapter, and the
/// error names it: connection 3's sender flips a byte of its last message
/// (`--corrupt-connection`, a hidden flag for this test).
#[test]
fn bench_fails_when_one_connection_arrives_corrupted() {
    for adapter in ["tokio", "codec", "std"] {
        let args = [
            "bench",
            "--connections",
            "3",
            "--mib",
            "1",
            "--size",
            "4096",
            "--repeat",
            "1",
            "--adapter",
            adapter,
            "--corrupt-connection",
            "3",
        ];
        let out = run(Path::new(BIN), &args, RUN_LIMIT);
        let err = out.stderr_lines();
        assert!(!out.status.success(), "{adapter}: {err:?}");
        // 1 MiB of 4 KiB messages is 256; connection 3 of 3 has 85 of
        // them (0 to 84).
        assert_eq!(
            err.last().map(String::as_str),
            Some("error: connection 3 of 3: message 84 arrived corrupted"),
            "{adapter}"
        );
    }
}

/// `--all-cores` runs as many connections as this machine's cores (as the
/// test process sees them), and `--connections` refuses what it cannot run.
#[test]
fn bench_all_cores_and_what_connections_refuses() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let lines = json_lines(&["bench", "--all-cores", "--mib", "2", "--repeat", "1"]);
    let most = lines.iter().filter_map(|v| v["connections"].as_u64()).max();
    assert_eq!(most, Some(cores), "{lines:?}");

    for extra in [
        &["--producers", "2"][..],
        &["--handshakes", "10"],
        &["--runtime", "current-thread"],
        &["--baseline", "tendermint-p2p"],
        &["--corrupt-connection", "3"],
    ] {
        let args = [&["bench", "--connections", "2", "--mib", "1"][..], extra].concat();
        let out = run(Path::new(BIN), &args, RUN_LIMIT);
        let err = out.stderr_lines();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err:?}");
        assert!(
            err.iter()
                .any(|l| l.contains("--connections") || l.contains("--corrupt-connection")),
            "{args:?}: {err:?}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // More connections than messages.
    let out = run(
        Path::new(BIN),
        &[
            "bench",
            "--connections",
            "3",
            "--size",
            "1000000",
            "--mib",
            "1",
        ],
        RUN_LIMIT,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stderr_lines()
            .iter()
            .any(|l| l.contains("needs at least one message per connection")),
        "{:?}",
        out.stderr_lines()
    );
}
