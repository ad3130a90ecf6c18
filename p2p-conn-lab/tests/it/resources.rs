//! `p2p-conn-lab resources` at small scale: every measurement runs, its JSON
//! lines are well-formed, the library reports its read buffers released
//! after the message pass, and every stalled handshake ends with the
//! timeout. With Go installed, the Go holder (`cometbft-peer hold`) reports
//! the same fields.

use std::path::Path;
use std::time::{Duration, Instant};

use p2p_conn_interop::go_peer::{go_peer, GoVersion};
use p2p_conn_interop::process::{run, Finished};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn-lab");

/// Bound on one `resources` run.
const LIMIT: Duration = Duration::from_secs(60);

fn resources(args: &[&str]) -> Finished {
    let mut all = vec!["resources"];
    all.extend_from_slice(args);
    run(Path::new(BIN), &all, LIMIT)
}

/// The JSON lines of a successful run, by kind.
fn lines(out: &Finished) -> Vec<Value> {
    assert!(
        out.status.success(),
        "resources failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"));
            assert!(v.is_object(), "{l}");
            v
        })
        .collect()
}

fn of_kind<'a>(rows: &'a [Value], kind: &str) -> Vec<&'a Value> {
    rows.iter().filter(|r| r["kind"] == kind).collect()
}

fn u(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not a count in {v}"))
}

fn f(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

/// The RSS fields every holder reports, checked for sense.
fn check_hold_figures(h: &Value, connections: u64) {
    assert_eq!(u(h, "connections"), connections, "{h}");
    assert_eq!(u(h, "message"), 100, "{h}");
    for key in ["rss_before_kib", "rss_idle_kib", "rss_message_kib"] {
        assert!(u(h, key) > 0, "{h}");
    }
    // The peak of the pass is at least what is resident at its end, less
    // what the settling after it may have given back.
    assert!(u(h, "hwm_pass_kib") > 0 && u(h, "hwm_idle_kib") >= u(h, "rss_idle_kib"));
    assert!(
        f(h, "pass_seconds") > 0.0 && f(h, "handshake_seconds") > 0.0,
        "{h}"
    );
}

#[test]
fn resources_runs_small_and_stalled_handshakes_all_time_out() {
    let start = Instant::now();
    let out = resources(&[
        "--connections",
        "50",
        "--stalled",
        "20",
        "--stall-timeout",
        "0.5",
        "--churn",
        "200",
        "--churn-sample",
        "50",
        "--json",
    ]);
    let rows = lines(&out);
    eprintln!("resources took {:?}", start.elapsed());

    let holds = of_kind(&rows, "hold");
    let names: Vec<&str> = holds
        .iter()
        .map(|h| h["hold"].as_str().unwrap().split(':').next().unwrap())
        .collect();
    assert_eq!(names, ["bare", "reader", "node"], "{rows:?}");
    for h in &holds {
        assert_eq!(h["impl"], "p2p-conn");
        check_hold_figures(h, 50);
        assert!(h["peak_reset"].is_boolean(), "{h}");
        assert!(u(h, "inline_bytes") > 0, "{h}");
    }
    // No buffers while idle; after the pass, the read buffers are released
    // again and only each writer's kept one-frame buffer remains (a read
    // buffer still held would add at least another sealed frame, 1044 bytes).
    for h in &holds[..2] {
        assert_eq!(u(h, "buffers_idle"), 0, "{h}");
        let per = u(h, "buffers_message") / 50;
        assert!(
            (1044..2048).contains(&per),
            "{per} bytes per connection: {h}"
        );
    }
    assert!(holds[2]["buffers_idle"].is_null(), "{}", holds[2]);

    let stalled = of_kind(&rows, "stalled");
    let modes: Vec<&str> = stalled
        .iter()
        .map(|r| r["stall"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["silent", "ephemeral"], "{rows:?}");
    for r in &stalled {
        assert_eq!(u(r, "handshakes"), 20, "{r}");
        assert_eq!(
            u(r, "timed_out"),
            20,
            "every stalled handshake ends with the timeout: {r}"
        );
        assert_eq!(u(r, "other_errors") + u(r, "succeeded"), 0, "{r}");
        assert_eq!(u(r, "ended_before_reading"), 0, "{r}");
        assert!(
            f(r, "min_seconds") >= 0.45 && f(r, "max_seconds") < 5.0,
            "{r}"
        );
        assert!(
            u(r, "rss_stalled_kib") > 0 && u(r, "rss_before_kib") > 0,
            "{r}"
        );
    }

    let churn = of_kind(&rows, "churn");
    assert_eq!(churn.len(), 1, "{rows:?}");
    let c = churn[0];
    assert_eq!(u(c, "handshakes"), 200);
    let samples: Vec<u64> = c["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[0].as_u64().unwrap())
        .collect();
    assert_eq!(samples, [50, 100, 150, 200], "{c}");
    assert!(c["samples"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s[1].as_u64().unwrap() > 0));
    assert_eq!(rows.len(), 6, "{rows:?}");
}

#[test]
fn resources_refuses_more_connections_than_descriptors() {
    let out = resources(&[
        "--connections",
        "100000000",
        "--stalled",
        "0",
        "--churn",
        "0",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("file descriptors"), "{err}");
}

#[test]
fn resources_go_holder_reports_the_same_fields() {
    if go_peer(GoVersion::V1, "resources_go_holder_reports_the_same_fields").is_none() {
        return;
    }
    let out = resources(&[
        "--connections",
        "30",
        "--hold",
        "reader",
        "--stalled",
        "0",
        "--churn",
        "0",
        "--baseline",
        "cometbft-go",
        "--json",
    ]);
    let rows = lines(&out);
    let holds = of_kind(&rows, "hold");
    assert_eq!(holds.len(), 2, "{rows:?}");
    assert_eq!(holds[0]["impl"], "p2p-conn");
    assert_eq!(holds[1]["impl"], "cometbft-go v1.0.1");
    for h in &holds {
        check_hold_figures(h, 30);
    }
    assert!(u(holds[1], "go_heap_idle_kib") > 0, "{}", holds[1]);
}
