//! What `p2p-conn crawl` prints, against a small well-behaved node on
//! loopback (no Go needed): it holds blocks 1 to 5, answers a
//! `StatusRequest` and a `PexRequest` (with two loopback addresses, which a
//! crawl follows only with `--allow-unroutable`), and lists no snapshot.
//! The filters apply to `--json` as to the table, the summary says why
//! reported addresses were not followed, and a node without PEX is still
//! asked for its blocks.

use std::net::SocketAddr;
use std::time::Duration;

use crate::common::process::run;
use p2p_conn::io::tokio as ptokio;
use p2p_conn::nodeinfo::{self, NodeInfo};
use p2p_conn::{Config, Identity};
use p2p_conn_mconn::blocksync::{BlocksyncMessage, BLOCKSYNC_CHANNEL};
use p2p_conn_mconn::pex::{NetAddress, PexMessage, MAX_PEX_MESSAGE_SIZE, PEX_CHANNEL};
use p2p_conn_mconn::statesync::SNAPSHOT_CHANNEL;
use p2p_conn_mconn::{ChannelDescriptor, MConnConfig, MConnection, Received};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");
const NETWORK: &str = "output-chain";

/// Bound on one crawl process (one node).
const CRAWL_LIMIT: Duration = Duration::from_secs(60);

/// The blocks the node holds.
const BASE: i64 = 1;
const HEIGHT: i64 = 5;

/// A node on its own thread's runtime, with the PEX channel or not: its
/// `ID@ADDRESS`.
fn spawn(pex: bool) -> String {
    let (addr, id) = crate::common::serve_on_thread(move |tcp, identity, addr| async move {
        let _ = serve(tcp, &identity, addr, pex).await;
    });
    format!("{id}@{addr}")
}

async fn serve(
    tcp: tokio::net::TcpStream,
    identity: &Identity,
    addr: SocketAddr,
    pex: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut sc = ptokio::handshake(tcp, identity, &Config::default()).await?;
    let mut ours = NodeInfo::new(identity.node_id(), NETWORK.to_string());
    ours.listen_addr = addr.to_string();
    ours.moniker = if pex { "with-pex" } else { "without-pex" }.into();
    ours.channels = vec![BLOCKSYNC_CHANNEL, SNAPSHOT_CHANNEL];
    if pex {
        ours.channels.insert(0, PEX_CHANNEL);
    }
    nodeinfo::tokio::write(&mut sc, &ours).await?;
    let _ = nodeinfo::tokio::read(&mut sc).await?;
    let mut channels = vec![
        ChannelDescriptor::new(BLOCKSYNC_CHANNEL),
        ChannelDescriptor::new(SNAPSHOT_CHANNEL),
    ];
    if pex {
        channels.push(
            ChannelDescriptor::new(PEX_CHANNEL).with_recv_message_capacity(MAX_PEX_MESSAGE_SIZE),
        );
    }
    let (tx, mut rx) = MConnection::spawn(sc, &channels, MConnConfig::default())?;
    while let Some(event) = rx.recv().await {
        let Received::Message { channel, data } = event else {
            break;
        };
        if channel == BLOCKSYNC_CHANNEL {
            if let Ok(BlocksyncMessage::StatusRequest) = BlocksyncMessage::decode(&data) {
                let status = BlocksyncMessage::StatusResponse {
                    height: HEIGHT,
                    base: BASE,
                };
                tx.send(BLOCKSYNC_CHANNEL, status.encode()).await?;
            }
        } else if channel == PEX_CHANNEL {
            if let Ok(PexMessage::Request) = PexMessage::decode(&data) {
                // Two nodes on loopback (nothing listens there).
                let addrs = (1..=2)
                    .map(|i| NetAddress {
                        id: Identity::generate().node_id().to_string(),
                        ip: "127.0.0.1".into(),
                        port: 9 + i,
                    })
                    .collect();
                tx.send(PEX_CHANNEL, PexMessage::Addrs(addrs).encode())
                    .await?;
            }
        }
        // A SnapshotsRequest: no snapshot to list, nothing sent.
    }
    Ok(())
}

/// Runs `crawl ARGS SEED`; its stdout and stderr.
fn crawl(seed: &str, args: &[&str]) -> (String, String) {
    let mut all = vec!["crawl", "--timeout", "5"];
    all.extend_from_slice(args);
    all.push(seed);
    let out = run(BIN.as_ref(), &all, CRAWL_LIMIT);
    assert!(out.status.success(), "crawl {all:?}: {out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("no JSON ({e}): {text}"))
}

/// `--has-height` filters `--json` as it filters the table: a height the
/// node holds lists it, one beyond lists nobody, and the document says
/// which filter it applied and how many nodes it left.
#[test]
fn has_height_filters_the_json_too() {
    let seed = spawn(true);
    let (out, err) = crawl(&seed, &["--json", "--has-height", "999999"]);
    let v = json(&out);
    assert_eq!(v["nodes"], serde_json::json!([]), "{v:#}");
    assert_eq!(v["has_height"], 999999, "{v:#}");
    assert_eq!(v["dialed"], 1, "{v:#}");
    assert!(
        err.contains("0 nodes can serve height 999999 (--has-height)"),
        "{err}"
    );

    let (out, _) = crawl(&seed, &["--json", "--has-height", "3"]);
    let v = json(&out);
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{v:#}");
    assert_eq!(nodes[0]["height"], HEIGHT, "{v:#}");
    assert_eq!(v["has_height"], 3, "{v:#}");
    assert_eq!(v["dialed"], 1, "{v:#}");
}

/// Without `--allow-unroutable` the loopback addresses the node reported
/// are not followed, and the summary says so and names the flag; the JSON
/// counts them too.
#[test]
fn the_summary_counts_unroutable_addresses() {
    let seed = spawn(true);
    let (table, _) = crawl(&seed, &[]);
    let summary = table
        .lines()
        .find(|l| l.contains(" dialed, "))
        .unwrap_or_else(|| panic!("no summary: {table}"));
    assert!(summary.contains("2 reported addresses"), "{summary}");
    assert!(
        table.contains(
            "2 reported addresses not followed: not publicly routable (--allow-unroutable follows them)"
        ),
        "{table}"
    );
    let (out, _) = crawl(&seed, &["--json"]);
    assert_eq!(json(&out)["unroutable"], 2, "{out}");
    // With the flag, they are followed (and refused: nothing listens).
    let (table, _) = crawl(&seed, &["--allow-unroutable"]);
    assert!(!table.contains("--allow-unroutable follows"), "{table}");
}

/// A node without PEX (`pex = false`, as validators and private sentries
/// run) is still asked for its blocks and snapshots: `--has-height` lists
/// it.
#[test]
fn a_node_without_pex_is_asked_for_its_blocks() {
    let seed = spawn(false);
    let (out, _) = crawl(&seed, &["--json", "--has-height", "1"]);
    let v = json(&out);
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{v:#}");
    let n = &nodes[0];
    assert_eq!(n["status"], "no PEX", "{n:#}");
    assert_eq!(
        (n["base"].clone(), n["height"].clone()),
        (BASE.into(), HEIGHT.into()),
        "{n:#}"
    );
    assert_eq!(n["snapshots"], serde_json::json!([]), "{n:#}");
    assert_eq!(n["pex_addrs"], Value::Null, "{n:#}");
    let (table, _) = crawl(&seed, &["--has-height", "1"]);
    assert!(table.contains("1 node can serve height 1"), "{table}");
}
