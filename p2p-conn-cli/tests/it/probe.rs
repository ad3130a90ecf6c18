//! `p2p-conn probe` against scripted peers (real p2p-conn connections that
//! write exactly the bytes a test gives them after the handshake, see
//! `p2p_conn_interop::scripted`): the exit code of each stage, and the JSON.

use std::time::Duration;

use crate::common::process::run;
use crate::common::scripted::{scripted_peer, Then};
use p2p_conn::nodeinfo::{self, NodeInfo};
use p2p_conn::{Identity, NodeId};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

/// The NodeInfo a valid scripted peer announces for itself.
fn info_for(id: NodeId) -> NodeInfo {
    let mut n = NodeInfo::new(id, "test-chain");
    n.channels = vec![0x40, 0x20, 0x38];
    n.moniker = "scripted".into();
    n
}

/// Runs `p2p-conn probe --json <args>` on a blocking thread; returns the
/// exit code and the JSON object.
async fn probe(args: Vec<String>) -> (i32, Value) {
    tokio::task::spawn_blocking(move || {
        let mut all = vec!["probe".to_string(), "--json".to_string()];
        all.extend(args);
        let out = run(BIN.as_ref(), &all, Duration::from_secs(30));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("probe printed no JSON ({e}): {out:?}");
        });
        (out.status.code().expect("exit code"), v)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_reports_a_valid_peer_and_checks_its_id() {
    let (addr, id) = scripted_peer(|id| info_for(id).encode_delimited().unwrap(), Then::Hold).await;
    let (code, v) = probe(vec![format!("{id}@{addr}")]).await;
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["node_id"], id.to_string());
    assert_eq!(v["id_matches"], true);
    assert_eq!(v["moniker"], "scripted");
    assert_eq!(v["network"], "test-chain");
    assert_eq!(v["channels"], serde_json::json!(["40", "20", "38"]));
    assert_eq!(v["protocol_version"]["p2p"], nodeinfo::P2P_PROTOCOL);
    assert_eq!(v["violations"], serde_json::json!([]));
    // The scripted peer announces p2p-conn's own version (`NodeInfo::new`),
    // no CometBFT release line.
    assert_eq!(v["version"], NodeInfo::new(id, "x").version);
    assert_eq!(v["release_lines"], serde_json::json!([]), "{v}");
    assert_eq!(v["version_note"], Value::Null, "{v}");

    // Another expected ID: exit 5, and the ID that answered.
    let (addr, id) = scripted_peer(|id| info_for(id).encode_delimited().unwrap(), Then::Hold).await;
    let wrong = Identity::generate().node_id();
    let (code, v) = probe(vec![format!("{wrong}@{addr}")]).await;
    assert_eq!(code, 5, "{v}");
    assert_eq!(v["stage"], "id_mismatch");
    assert_eq!(v["node_id"], id.to_string());

    // The right chain, then a wrong one: exit 0, then 8.
    for (network, want) in [("test-chain", 0), ("other-chain", 8)] {
        let (addr, _) =
            scripted_peer(|id| info_for(id).encode_delimited().unwrap(), Then::Hold).await;
        let (code, v) = probe(vec![addr.to_string(), "--network".into(), network.into()]).await;
        assert_eq!(code, want, "{v}");
        assert_eq!(v["network"], "test-chain");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_names_each_failing_stage() {
    // NodeInfo claiming another ID: exit 6 with the rule's name.
    let other = Identity::generate().node_id();
    let (addr, _) = scripted_peer(
        move |_| info_for(other).encode_delimited().unwrap(),
        Then::Hold,
    )
    .await;
    let (code, v) = probe(vec![addr.to_string()]).await;
    assert_eq!(code, 6, "{v}");
    assert_eq!(v["stage"], "nodeinfo");
    assert_eq!(v["violations"][0]["rule"], "id_matches_key");

    // An oversized prefix: exit 6, with the limit in the message.
    let (addr, _) = scripted_peer(|_| vec![0x81, 0x50], Then::Hold).await;
    let (code, v) = probe(vec![addr.to_string()]).await;
    assert_eq!(code, 6, "{v}");
    assert!(v["error"].as_str().unwrap().contains("10240"), "{v}");
    assert!(v["node_id"].is_string(), "{v}");

    // No NodeInfo at all within the timeout: exit 7.
    let (addr, _) = scripted_peer(|_| Vec::new(), Then::Hold).await;
    let (code, v) = probe(vec![
        addr.to_string(),
        "--handshake-timeout".into(),
        "0.5".into(),
    ])
    .await;
    assert_eq!(code, 7, "{v}");
    assert_eq!(v["stage"], "timeout");

    // Not a secret connection: exit 4.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let _ = tcp.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    let (code, v) = probe(vec![addr.to_string()]).await;
    assert_eq!(code, 4, "{v}");
    assert_eq!(v["stage"], "handshake");

    // Nothing listening: exit 3.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (code, v) = probe(vec![closed.to_string()]).await;
    assert_eq!(code, 3, "{v}");
    assert_eq!(v["stage"], "connect");
}

/// The forms config.toml (`persistent_peers`, `seeds`), `net_info` and the
/// probe's own output use all name the same node: `ID@HOST:PORT`,
/// `HOST:PORT`, and either behind `tcp://`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_takes_every_address_form() {
    for form in ["ID@ADDR", "ADDR", "tcp://ID@ADDR", "tcp://ADDR"] {
        let (addr, id) =
            scripted_peer(|id| info_for(id).encode_delimited().unwrap(), Then::Hold).await;
        let target = form
            .replace("ID", &id.to_string())
            .replace("ADDR", &addr.to_string());
        let (code, v) = probe(vec![target.clone()]).await;
        assert_eq!(code, 0, "{target}: {v}");
        assert_eq!(v["node_id"], id.to_string(), "{target}");
        assert_eq!(v["address"], addr.to_string(), "{target}");
        let expected = if form.contains("ID@") {
            Value::String(id.to_string())
        } else {
            Value::Null
        };
        assert_eq!(v["expected_id"], expected, "{target}");
    }
}

/// An address that cannot name a node is a usage error (exit 1, stage
/// `usage`), never a connect failure (exit 3), which a script would read
/// as "node down".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_refuses_malformed_addresses_as_usage() {
    let id = Identity::generate().node_id();
    for addr in [
        "127.0.0.1".to_string(),
        "127.0.0.1:".into(),
        ":26656".into(),
        "127.0.0.1:99999".into(),
        "127.0.0.1:0".into(),
        "127.0.0.1:port".into(),
        "tcp://".into(),
        "tcp://127.0.0.1".into(),
        "http://127.0.0.1:26657".into(),
        "unix:///tmp/node.sock".into(),
        format!("{id}@"),
        format!("tcp://{id}@127.0.0.1"),
        "nothex@127.0.0.1:26656".into(),
    ] {
        let (code, v) = probe(vec![addr.clone()]).await;
        assert_eq!(code, 1, "{addr}: {v}");
        assert_eq!(v["stage"], "usage", "{addr}: {v}");
    }
}

/// A loopback listener that answers as an HTTP server (CometBFT's RPC
/// port) does to the bytes of a handshake: `400 Bad Request`, then close.
async fn http_server() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let _ = tcp
                .write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
                      Connection: close\r\n\r\n400 Bad Request",
                )
                .await;
        }
    });
    addr
}

/// Pointed at an RPC port, the probe says that the peer answered in HTTP
/// (and still exits 4, `handshake`), rather than only naming the byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_says_an_http_peer_is_probably_the_rpc_port() {
    let addr = http_server().await;
    let (code, v) = probe(vec![addr.to_string()]).await;
    assert_eq!(code, 4, "{v}");
    assert_eq!(v["stage"], "handshake");
    let error = v["error"].as_str().unwrap();
    assert!(error.starts_with("handshake failed: "), "{error}");
    assert!(error.contains("answered in HTTP"), "{error}");
    assert!(error.contains("RPC port (26657)"), "{error}");

    // dial words it the same way.
    let out = tokio::task::spawn_blocking(move || {
        run(
            BIN.as_ref(),
            &["dial", &addr.to_string()],
            Duration::from_secs(30),
        )
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("answered in HTTP"), "{err}");
}

/// A network mismatch names both networks: the one `--network` expected
/// and the one the node announced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_network_mismatch_names_both_networks() {
    let (addr, _) = scripted_peer(|id| info_for(id).encode_delimited().unwrap(), Then::Hold).await;
    let (code, v) = probe(vec![addr.to_string(), "--network".into(), "foo".into()]).await;
    assert_eq!(code, 8, "{v}");
    assert_eq!(v["stage"], "network");
    let error = v["error"].as_str().unwrap();
    assert!(error.contains("\"test-chain\""), "{error}");
    assert!(error.contains("\"foo\""), "{error}");

    // The text report says it on stderr, one line.
    let (addr, _) = scripted_peer(|id| info_for(id).encode_delimited().unwrap(), Then::Hold).await;
    let out = tokio::task::spawn_blocking(move || {
        let args = ["probe", &addr.to_string(), "--network", "foo"].map(String::from);
        run(BIN.as_ref(), &args, Duration::from_secs(30))
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("\"test-chain\"") && err.contains("\"foo\""),
        "{err}"
    );
}
