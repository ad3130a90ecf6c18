//! `bench` says when its figures are not fit to compare: runs too short, or
//! a ratio from a single pair. Behaviour only: a tiny `--mib` is too short
//! on any machine; no test depends on how fast a run is.

use std::path::Path;
use std::time::Duration;

use crate::common::process::{run, Finished};

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

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
    let scratch = crate::common::process::scratch("bench-go-build");
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
