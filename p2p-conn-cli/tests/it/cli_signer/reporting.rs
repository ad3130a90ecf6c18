//! What the signer tells: a long outage on a steady schedule, an HTTP
//! port named as such, the Prometheus metrics and the slow-signing watch.

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{
    count, json_events, leveled, prevote, sigterm, stderr, untimed, validator_key, ScriptedNode,
    BIN, CHAIN, LIMIT,
};
use crate::common::process::{scratch, Feed, Proc};

/// A long outage is told on a steady schedule: the first three failed
/// dials, then one "still disconnected" line per `--disconnected-every`
/// (text), and a `still_disconnected` event (JSON) with the outage's
/// length, the attempts and the last error.
#[test]
fn a_long_outage_is_told_on_a_steady_schedule() {
    let dir = scratch("signer-outage");
    let (key, _) = validator_key(&dir);
    let state = dir.join("priv_validator_state.json");
    let node = format!("unix://{}", dir.join("absent.sock").display());
    for json in [false, true] {
        let mut args = vec![
            "signer",
            "--node",
            &node,
            "--key",
            key.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
            "--create-state",
            "--chain-id",
            CHAIN,
            "--stats-every",
            "0",
            "--disconnected-every",
            "1",
        ];
        if json {
            args.push("--json");
        }
        let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
        std::thread::sleep(Duration::from_millis(3_600));
        sigterm(&signer);
        let out = signer.finish(Instant::now() + LIMIT);
        out.assert_ok("the disconnected signer, stopped by SIGTERM");
        if json {
            let events = json_events(&out);
            let still: Vec<_> = events
                .iter()
                .filter(|e| e["event"] == "still_disconnected")
                .collect();
            assert!((2..=4).contains(&still.len()), "{events:?}");
            for (e, after) in still.iter().zip(1u64..) {
                // Its only node away: nothing can be signed.
                assert_eq!(e["level"], "error", "{e}");
                assert_eq!(e["connected_nodes"], 0, "{e}");
                let secs = e["disconnected_s"].as_f64().unwrap();
                assert!(secs >= after as f64 && secs < after as f64 + 1.0, "{e}");
                assert!(e["attempts"].as_u64().unwrap() >= 3, "{e}");
                assert!(
                    e["last_error"].as_str().unwrap().contains("No such file"),
                    "{e}"
                );
            }
        } else {
            let leveled = leveled(&stderr(&out));
            for (level, line) in &leveled {
                if line.starts_with("cannot connect") {
                    assert_eq!(level, "WARN", "{line}");
                } else if line.starts_with("still disconnected") {
                    assert_eq!(level, "ERROR", "{line}");
                }
            }
            let lines = untimed(&stderr(&out));
            let tries = lines
                .iter()
                .filter(|l| l.starts_with("cannot connect"))
                .count();
            assert_eq!(tries, 3, "{lines:?}");
            let still: Vec<_> = lines
                .iter()
                .filter(|l| l.starts_with("still disconnected from"))
                .collect();
            assert!((2..=4).contains(&still.len()), "{lines:?}");
            assert!(still[0].contains(" for 1s "), "{lines:?}");
            assert!(still[1].contains(" for 2s "), "{lines:?}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Pointed at an HTTP port (a node's RPC, a common mistake for
/// `priv_validator_laddr`'s), the signer says that the peer answered in
/// HTTP rather than only "length prefix 0x48".
#[test]
fn a_signer_pointed_at_an_http_port_says_so() {
    let dir = scratch("signer-http");
    let (key, _) = validator_key(&dir);
    let state = dir.join("priv_validator_state.json");
    let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = http.local_addr().unwrap();
    // Answers every connection as an HTTP server answers bytes it cannot
    // read, then hangs up.
    std::thread::spawn(move || {
        for mut c in http.incoming().flatten() {
            let mut buf = [0u8; 64];
            let _ = c.read(&mut buf);
            let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let node = format!("tcp://{addr}");
    let args = [
        "signer",
        "--node",
        &node,
        "--key",
        key.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--create-state",
        "--chain-id",
        CHAIN,
        "--stats-every",
        "0",
    ];
    let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    std::thread::sleep(Duration::from_millis(1_500));
    sigterm(&signer);
    let out = signer.finish(Instant::now() + LIMIT);
    out.assert_ok("the signer, stopped by SIGTERM");
    let text = stderr(&out);
    let line = text
        .lines()
        .find(|l| l.contains("cannot connect"))
        .unwrap_or_else(|| panic!("no failed dial told: {text}"));
    assert!(line.contains("answered in HTTP"), "{line}");
    assert!(line.contains("priv_validator_laddr"), "{line}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--metrics`: Prometheus text with every request counted per node and
/// kind, the latency quantiles and the slow-signing watch; with a
/// threshold no disk meets (`--slow-sign-ms 0.001`), the 50th signature
/// brings one `slow_signing` event and the metric to 1.
#[test]
fn metrics_count_requests_and_watch_the_median_sign() {
    let dir = scratch("signer-metrics");
    let (key, _) = validator_key(&dir);
    let state = dir.join("signer.state");
    let socket = dir.join("privval.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let node = format!("unix://{}", socket.display());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metrics = format!("127.0.0.1:{port}");
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
        "--json",
        "--stats-every",
        "0",
        "--metrics",
        metrics.as_str(),
        "--slow-sign-ms",
        "0.001",
    ];
    let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let mut conn = ScriptedNode::accept(&listener);
    for h in 1..=55 {
        conn.sign(CHAIN, &prevote(h, 1, h)).expect("signed");
    }
    conn.sign(CHAIN, &prevote(55, 2, 55))
        .expect_err("a conflict");
    conn.settle();
    let get = |path: &str| {
        let mut tcp = std::net::TcpStream::connect(&metrics).unwrap();
        write!(tcp, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut text = String::new();
        tcp.read_to_string(&mut text).unwrap();
        text
    };
    let text = get("/metrics");
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    // Every signer series is labelled with its chain first.
    let chain = format!("chain_id=\"{CHAIN}\"");
    for line in [
        format!("p2p_conn_signer_requests_total{{{chain},node=\"{node}\",kind=\"vote\"}} 56"),
        format!("p2p_conn_signer_request_errors_total{{{chain},node=\"{node}\",kind=\"vote\"}} 1"),
        format!("p2p_conn_signer_connects_total{{{chain},node=\"{node}\"}} 1"),
        format!("p2p_conn_signer_connected{{{chain},node=\"{node}\"}} 1"),
        format!("p2p_conn_signer_sign_slow{{{chain}}} 1"),
        format!("p2p_conn_signer_sign_slow_episodes_total{{{chain}}} 1"),
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }
    assert!(
        text.contains(&format!(
            "p2p_conn_signer_request_latency_seconds{{{chain},node=\"{node}\",kind=\"vote\",quantile=\"0.99\"}}"
        )),
        "{text}"
    );
    assert!(get("/other").starts_with("HTTP/1.1 404"));
    sigterm(&signer);
    let out = signer.finish_within(LIMIT);
    out.assert_ok("the signer");
    let events = json_events(&out);
    assert_eq!(count(&events, "slow_signing"), 1);
    let slow = events
        .iter()
        .find(|e| e["event"] == "slow_signing")
        .unwrap();
    assert_eq!(slow["window"], 50, "{slow}");
    // Told at the 50th signature, not before.
    let served_before = events
        .iter()
        .take_while(|e| e["event"] != "slow_signing")
        .filter(|e| e["event"] == "served")
        .count();
    assert_eq!(served_before, 50);
    std::fs::remove_dir_all(&dir).unwrap();
}
