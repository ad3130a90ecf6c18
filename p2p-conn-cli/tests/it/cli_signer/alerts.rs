//! What an operator alerts on: the series beside the counts (the last
//! signature's time and height, the missed heights), each labelled with
//! its chain.

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use p2p_conn_privval::{signed_msg_type, Vote};

use super::{
    json_events, leveled, prevote, sigterm, stderr, validator_key, ScriptedNode, BIN, CHAIN, LIMIT,
};
use crate::common::process::{scratch, Feed, Proc};

fn precommit(height: i64, round: i32) -> Vote {
    let mut v = prevote(height, 1, height);
    v.msg_type = signed_msg_type::PRECOMMIT;
    v.round = round;
    v
}

/// The body of GET /metrics at `addr`.
pub(super) fn scrape(addr: &str) -> String {
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    write!(tcp, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    tcp.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    text.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// The value of the sample `series` (name and labels, as written).
pub(super) fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
        .parse()
        .unwrap()
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A free port on loopback, for `--metrics`.
pub(super) fn metrics_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

/// Precommits at heights 1, 2, 5 (twice: rounds 0 and 1), a prevote alone
/// at 7 and a precommit at 10: heights 3, 4 and 6 to 9 have none, 6
/// missed. A second signer on the same state file counts from the
/// precommit the file records (10): one at 13 misses 11 and 12. Every
/// signer series has `chain_id` first.
#[test]
fn the_last_signature_and_missed_heights_are_exported() {
    let dir = scratch("signer-alerts");
    let (key, _) = validator_key(&dir);
    let state = dir.join("signer.state");
    let socket = dir.join("privval.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let node = format!("unix://{}", socket.display());
    let metrics = metrics_addr();
    let args = [
        "signer",
        "--node",
        node.as_str(),
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
        metrics.as_str(),
    ];
    let chain = format!("{{chain_id=\"{CHAIN}\"}}");
    let series = |name: &str| format!("p2p_conn_signer_{name}{chain}");

    let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let mut conn = ScriptedNode::accept(&listener);
    let before = unix_now();
    for v in [
        precommit(1, 0),
        precommit(2, 0),
        prevote(5, 1, 5),
        precommit(5, 0),
        precommit(5, 1),
        prevote(7, 1, 7),
        precommit(10, 0),
    ] {
        conn.sign(CHAIN, &v).expect("signed");
    }
    conn.settle();
    let after = unix_now();
    let text = scrape(&metrics);
    assert_eq!(value(&text, &series("missed_heights_total")), 6.0);
    assert_eq!(value(&text, &series("last_signed_height")), 10.0);
    let at = value(&text, &series("last_sign_timestamp_seconds"));
    assert!(
        at >= before.floor() && at <= after.ceil(),
        "{at} not in {before}..{after}"
    );
    assert_eq!(
        value(
            &text,
            &format!(
                "p2p_conn_signer_requests_total{{chain_id=\"{CHAIN}\",node=\"{node}\",kind=\"vote\"}}"
            )
        ),
        7.0
    );
    for l in text.lines().filter(|l| l.starts_with("p2p_conn_signer_")) {
        assert!(
            l.contains(&format!("{{chain_id=\"{CHAIN}\"")),
            "not labelled with the chain: {l}"
        );
    }
    sigterm(&signer);
    signer.finish_within(LIMIT).assert_ok("the first signer");

    // The same state file: its mark is the precommit at 10.
    let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let mut conn = ScriptedNode::accept(&listener);
    conn.sign(CHAIN, &prevote(11, 1, 11)).expect("signed");
    conn.settle();
    let text = scrape(&metrics);
    assert_eq!(value(&text, &series("last_signed_height")), 11.0);
    assert_eq!(value(&text, &series("missed_heights_total")), 0.0);
    conn.sign(CHAIN, &precommit(13, 0)).expect("signed");
    conn.settle();
    let text = scrape(&metrics);
    assert_eq!(value(&text, &series("missed_heights_total")), 2.0);
    sigterm(&signer);
    signer.finish_within(LIMIT).assert_ok("the second signer");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Before it signs anything, a signer exports the mark its state file
/// holds and 0 as the time of its last signature (so that `time() - x`
/// is large: nothing signed since start).
#[test]
fn a_signer_that_has_signed_nothing_says_so() {
    let dir = scratch("signer-alerts-idle");
    let (key, _) = validator_key(&dir);
    let state = dir.join("signer.state");
    let node = format!("unix://{}", dir.join("absent.sock").display());
    let metrics = metrics_addr();
    let args = [
        "signer",
        "--node",
        node.as_str(),
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
        metrics.as_str(),
    ];
    let mut signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    // The port is bound before the first line.
    let first = signer.next_line(std::time::Instant::now() + LIMIT);
    assert!(first.contains("signer for validator"), "{first}");
    let text = scrape(&metrics);
    let chain = format!("{{chain_id=\"{CHAIN}\"}}");
    for (name, want) in [
        ("last_sign_timestamp_seconds", 0.0),
        ("last_signed_height", 0.0),
        ("missed_heights_total", 0.0),
    ] {
        assert_eq!(
            value(&text, &format!("p2p_conn_signer_{name}{chain}")),
            want
        );
    }
    assert_eq!(
        value(
            &text,
            &format!("p2p_conn_signer_connected{{chain_id=\"{CHAIN}\",node=\"{node}\"}}")
        ),
        0.0
    );
    sigterm(&signer);
    signer.finish_within(LIMIT).assert_ok("the signer");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The alert rules operators load.
const RULES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../docs/deploy/p2p-conn-signer-alerts.yml"
);

/// What the rules must watch (docs/operator-manual.md, "Metrics and
/// alerts").
const REQUIRED: [&str; 6] = [
    "SignerSlow",
    "SignerMissedHeights",
    "SignerNoSignature",
    "SignerNoNodeConnected",
    "SignerErrorsRising",
    "SignerStandbyWithoutPrimary",
];

/// Series Prometheus makes itself, not the signer.
const PROMETHEUS_MADE: [&str; 1] = ["up"];

/// The metric names a PromQL expression selects: its identifiers, less
/// functions (a name before `(`), keywords, the label lists of `by`,
/// `without`, `on`, `ignoring` and `group_*`, and anything inside label
/// matchers, ranges and strings.
fn metric_names(expr: &str) -> Vec<String> {
    // Operators, and the aggregations (which take `by` before their `(`).
    const KEYWORDS: [&str; 20] = [
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "atan2",
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    ];
    const GROUPING: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    // Blank out strings, `{...}` and `[...]`.
    let mut plain = String::new();
    let (mut quote, mut nest) = (None, 0i32);
    for c in expr.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'' | '`') => quote = Some(c),
            (None, '{' | '[') => nest += 1,
            (None, '}' | ']') => nest -= 1,
            (None, c) if nest == 0 => {
                plain.push(c);
                continue;
            }
            _ => {}
        }
        plain.push(' ');
    }
    let b = plain.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut names = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() || b[i] == b'.' {
            // A number or a duration, with its suffix.
            while i < b.len() && (ident(b[i]) || b[i] == b'.') {
                i += 1;
            }
            continue;
        }
        if !ident(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && ident(b[i]) {
            i += 1;
        }
        let word = &plain[start..i];
        let next = plain[i..].trim_start();
        if GROUPING.contains(&word) {
            // Skip its label list.
            if next.starts_with('(') {
                i = plain.len() - next.len();
                i += plain[i..].find(')').map_or(plain.len() - i, |e| e + 1);
            }
        } else if !next.starts_with('(')
            && !KEYWORDS.contains(&word)
            && !["inf", "nan"].contains(&word.to_ascii_lowercase().as_str())
        {
            names.push(word.to_string());
        }
    }
    names
}

#[test]
fn metric_names_are_read_from_an_expression() {
    assert_eq!(
        metric_names(
            "sum by (a, b) (increase(x_total{k=~\"v|w\", j='{'}[5m])) - y offset 1h > 0 \
             and on (a) time() - max without (c) (z:rate) > 1e3 or up == Inf"
        ),
        ["x_total", "y", "z:rate", "up"]
    );
}

/// docs/deploy/p2p-conn-signer-alerts.yml is YAML in Prometheus's rule
/// layout (groups of named rules, each an alert with an expression), has
/// the alerts [`REQUIRED`], and every metric each expression names is one
/// a running signer exports, so that renaming a series breaks this test.
/// With `promtool` on the PATH, `promtool check rules` passes it too.
#[test]
fn the_alert_rules_name_only_series_the_signer_exports() {
    let text = std::fs::read_to_string(RULES).unwrap();
    let docs = yaml_rust2::YamlLoader::load_from_str(&text)
        .unwrap_or_else(|e| panic!("{RULES} is not YAML: {e}"));
    assert_eq!(docs.len(), 1, "one document");
    let mut rules = Vec::new();
    for group in docs[0]["groups"].as_vec().expect("a list of groups") {
        assert!(group["name"].as_str().is_some(), "a group with no name");
        for rule in group["rules"].as_vec().expect("a list of rules") {
            let alert = rule["alert"].as_str().expect("an alert rule").to_string();
            let expr = rule["expr"].as_str().expect("an expr").to_string();
            if let Some(severity) = rule["labels"]["severity"].as_str() {
                assert!(["critical", "warning"].contains(&severity), "{alert}");
            }
            assert!(rule["annotations"]["summary"].as_str().is_some(), "{alert}");
            rules.push((alert, expr));
        }
    }
    for want in REQUIRED {
        assert!(rules.iter().any(|(a, _)| a == want), "no {want} rule");
    }

    // A signer that has served every kind of signature, so that every
    // series it has exists.
    let dir = scratch("signer-alert-rules");
    let (key, _) = validator_key(&dir);
    let state = dir.join("signer.state");
    let socket = dir.join("privval.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let node = format!("unix://{}", socket.display());
    let metrics = metrics_addr();
    let args = [
        "signer",
        "--node",
        node.as_str(),
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
        metrics.as_str(),
    ];
    let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let mut conn = ScriptedNode::accept(&listener);
    conn.sign(CHAIN, &prevote(1, 1, 1)).expect("signed");
    conn.sign(CHAIN, &precommit(1, 0)).expect("signed");
    conn.settle();
    let text = scrape(&metrics);
    sigterm(&signer);
    signer.finish_within(LIMIT).assert_ok("the signer");
    std::fs::remove_dir_all(&dir).unwrap();
    let mut exported: Vec<String> = Vec::new();
    for l in text.lines() {
        if let Some(t) = l.strip_prefix("# TYPE ") {
            let (name, kind) = t.split_once(' ').unwrap();
            exported.push(name.to_string());
            if kind == "summary" {
                exported.push(format!("{name}_sum"));
                exported.push(format!("{name}_count"));
            }
        }
    }
    for (alert, expr) in &rules {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{alert}: no metric in {expr:?}");
        for name in names {
            assert!(
                exported.contains(&name) || PROMETHEUS_MADE.contains(&name.as_str()),
                "{alert}: {name} is not a series the signer exports: {exported:?}"
            );
        }
    }

    match std::process::Command::new("promtool")
        .args(["check", "rules", RULES])
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "promtool check rules: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(_) => eprintln!("promtool is not installed: `promtool check rules` not run"),
    }
}

/// Every event and line carries a level: a signature served is `info`, a
/// refusal that is not a standby node's an `error` with its kind
/// (`error_kind`), slow signing a `warn`.
#[test]
fn events_carry_a_level_and_failures_are_errors() {
    let dir = scratch("signer-levels");
    let (key, _) = validator_key(&dir);
    for json in [true, false] {
        let state = dir.join(format!("signer-{json}.state"));
        let socket = dir.join(format!("privval-{json}.sock"));
        let listener = UnixListener::bind(&socket).unwrap();
        let node = format!("unix://{}", socket.display());
        let mut args = vec![
            "signer",
            "--node",
            node.as_str(),
            "--key",
            key.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
            "--create-state",
            "--chain-id",
            CHAIN,
            "--stats-every",
            "0",
            "--slow-sign-ms",
            "0.001",
        ];
        if json {
            args.push("--json");
        }
        let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
        let mut conn = ScriptedNode::accept(&listener);
        for h in 1..=50 {
            conn.sign(CHAIN, &prevote(h, 1, h)).expect("signed");
        }
        conn.sign(CHAIN, &prevote(50, 2, 50))
            .expect_err("a conflict");
        conn.sign("another-chain", &prevote(51, 1, 51))
            .expect_err("another chain");
        conn.settle();
        sigterm(&signer);
        let out = signer.finish_within(LIMIT);
        out.assert_ok("the signer");
        if json {
            let events = json_events(&out);
            for e in &events {
                let level = e["level"]
                    .as_str()
                    .unwrap_or_else(|| panic!("no level: {e}"));
                assert!(["info", "warn", "error"].contains(&level), "{e}");
            }
            let level = |name: &str| {
                let e = events.iter().find(|e| e["event"] == name);
                e.unwrap_or_else(|| panic!("no {name}: {events:?}"))["level"].clone()
            };
            assert_eq!(level("start"), "info");
            assert_eq!(level("connected"), "info");
            assert_eq!(level("slow_signing"), "warn");
            let served: Vec<_> = events.iter().filter(|e| e["event"] == "served").collect();
            let (ok, failed): (Vec<&serde_json::Value>, Vec<_>) =
                served.iter().partition(|e| e["error"].is_null());
            assert!(ok.len() >= 50, "{served:?}");
            for e in ok {
                assert_eq!(e["level"], "info", "{e}");
                assert!(e["error_kind"].is_null(), "{e}");
            }
            let kinds: Vec<_> = failed
                .iter()
                .map(|e| {
                    assert_eq!(e["level"], "error", "{e}");
                    e["error_kind"].as_str().unwrap().to_string()
                })
                .collect();
            assert_eq!(kinds, ["double_sign_guard", "chain_id"]);
        } else {
            let lines = leveled(&stderr(&out));
            let level = |start: &str| {
                let found = lines.iter().filter(|(_, l)| l.starts_with(start));
                found.map(|(level, _)| level.as_str()).collect::<Vec<_>>()
            };
            assert_eq!(level("connected to"), ["INFO"], "{lines:?}");
            assert_eq!(level("refused or failed"), ["ERROR", "ERROR"], "{lines:?}");
            assert_eq!(level("the median of the last 50"), ["WARN"], "{lines:?}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
