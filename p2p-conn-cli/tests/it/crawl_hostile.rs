//! `p2p-conn crawl` against hostile peers on loopback (no Go needed), each
//! a seed of one crawl: a stalled handshake, a node that never answers its
//! `PexRequest`, an answer over CometBFT's 64,000-byte cap, an endless
//! message, a flood of addresses where nothing listens, and a node that
//! shows a new ID on every connection. The crawl finishes within its
//! bounds, reports each for what it did, and dials no more than
//! `--max-nodes`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::common::process::run;
use p2p_conn::io::tokio as ptokio;
use p2p_conn::nodeinfo::{self, NodeInfo};
use p2p_conn::{Config, Identity};
use p2p_conn_mconn::pex::{NetAddress, PexMessage, PEX_CHANNEL};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");
const NETWORK: &str = "hostile-chain";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mischief {
    /// Accepts and sends nothing.
    Stall,
    /// Runs the handshake and NodeInfo, then never answers.
    Silent,
    /// Answers with a `PexAddrs` of about 70,000 bytes.
    OverCap,
    /// Sends pieces of one message on the PEX channel forever.
    Endless,
    /// Answers with 250 addresses of made-up nodes where nothing listens.
    Flood,
    /// Shows a fresh identity on every connection.
    NewIdEachTime,
}

/// A hostile peer on its own thread's runtime: its address and the ID it
/// shows (first).
fn spawn(m: Mischief) -> (SocketAddr, String) {
    crate::common::serve_on_thread(move |tcp, identity, addr| async move {
        let _ = serve(m, tcp, &identity, addr).await;
    })
}

async fn serve(
    m: Mischief,
    mut tcp: tokio::net::TcpStream,
    identity: &Identity,
    addr: SocketAddr,
) -> Result<(), Box<dyn std::error::Error>> {
    if m == Mischief::Stall {
        let mut buf = [0u8; 1024];
        while tcp.read(&mut buf).await? > 0 {}
        return Ok(());
    }
    let fresh;
    let identity = if m == Mischief::NewIdEachTime {
        fresh = Identity::generate();
        &fresh
    } else {
        identity
    };
    let mut sc = ptokio::handshake(tcp, identity, &Config::default()).await?;
    let mut ours = NodeInfo::new(identity.node_id(), NETWORK.to_string());
    ours.listen_addr = addr.to_string();
    ours.channels = vec![PEX_CHANNEL];
    nodeinfo::tokio::write(&mut sc, &ours).await?;
    let _ = nodeinfo::tokio::read(&mut sc).await?;
    let msg = crate::common::pex_piece;
    let answer = match m {
        Mischief::OverCap => Some(addresses(1200, 30_000)),
        // Where nothing listens, whatever else runs on this machine: an
        // address of its own in 127/8, at ports above Linux's ephemeral
        // range (32768-60999), which tests listening on port 0 get.
        Mischief::Flood => Some(addresses(250, 61_000)),
        Mischief::NewIdEachTime => Some(vec![]),
        _ => None,
    };
    if m == Mischief::Endless {
        loop {
            sc.write_all(&msg(vec![0x12; 1000], false)).await?;
            sc.flush().await?;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    // Wait for the request (any bytes), then answer in 1000-byte pieces.
    let mut buf = [0u8; 4096];
    let _ = sc.read(&mut buf).await?;
    if let Some(addrs) = answer {
        let bytes = PexMessage::Addrs(addrs).encode();
        let chunks: Vec<&[u8]> = bytes.chunks(1000).collect();
        for (i, c) in chunks.iter().enumerate() {
            sc.write_all(&msg(c.to_vec(), i + 1 == chunks.len()))
                .await?;
        }
        sc.flush().await?;
    }
    // Hold the connection until the peer leaves.
    while sc.read(&mut buf).await? > 0 {}
    Ok(())
}

/// `n` made-up nodes at loopback ports from `base` where nothing listens.
fn addresses(n: usize, base: u32) -> Vec<NetAddress> {
    (0..n)
        .map(|i| NetAddress {
            id: Identity::generate().node_id().to_string(),
            ip: "127.77.0.1".into(),
            port: base + i as u32,
        })
        .collect()
}

fn crawl(seed: &str, extra: &[&str]) -> (Value, Duration) {
    let mut args = vec![
        "crawl",
        "--json",
        "--allow-unroutable",
        "--network",
        NETWORK,
        "--timeout",
        "3",
    ];
    args.extend_from_slice(extra);
    args.push(seed);
    let started = Instant::now();
    let out = run(BIN.as_ref(), &args, Duration::from_secs(120));
    assert!(out.status.success(), "crawl of {seed}: {out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    (v, started.elapsed())
}

#[test]
fn crawl_survives_hostile_peers() {
    for m in [
        Mischief::Stall,
        Mischief::Silent,
        Mischief::OverCap,
        Mischief::Endless,
        Mischief::Flood,
        Mischief::NewIdEachTime,
    ] {
        let (addr, id) = spawn(m);
        let seed = format!("{id}@{addr}");
        let (v, took) = crawl(&seed, &["--max-nodes", "40"]);
        let nodes = v["nodes"].as_array().unwrap();
        // The seed's record (records come as visits end; `probe` is the
        // dial order).
        let first = nodes
            .iter()
            .find(|n| n["probe"] == 0)
            .expect("the seed's record");
        let others = || nodes.iter().filter(|n| n["probe"] != 0);
        let status = first["status"].as_str().unwrap();
        let detail = first["detail"].as_str().unwrap_or_default();
        eprintln!(
            "{m:?}: {status} ({detail}) in {took:?}, {} dials",
            nodes.len()
        );
        // Each visit is bounded by --timeout 3, and the crawl by
        // --max-nodes: at 3 s a visit, 40 dials, 16 at once.
        assert!(took < Duration::from_secs(30), "{m:?}: took {took:?}");
        assert!(nodes.len() <= 40, "{m:?}: {} dials", nodes.len());
        match m {
            Mischief::Stall | Mischief::Silent => {
                assert_eq!(status, "timeout", "{m:?}: {first:#}")
            }
            Mischief::OverCap => {
                assert_eq!(status, "no PEX answer", "{m:?}: {first:#}");
                assert!(
                    detail.contains("capacity")
                        || detail.contains("limit")
                        || detail.contains("large"),
                    "{m:?}: {detail}"
                );
            }
            Mischief::Endless => {
                assert_eq!(status, "no PEX answer", "{m:?}: {first:#}")
            }
            Mischief::Flood => {
                assert_eq!(status, "ok", "{m:?}: {first:#}");
                assert_eq!(first["pex_addrs"], 250);
                // Every other dial found nothing: refused at once.
                assert_eq!(nodes.len(), 40, "{m:?}");
                assert!(others().all(|n| n["status"] == "refused"), "{v:#}");
                // Only what was given or learned is dialed: each address
                // is one the seed's answer held.
                let reported: std::collections::HashSet<String> = first["reported"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| format!("{}:{}", a["ip"].as_str().unwrap(), a["port"]))
                    .collect();
                for n in others() {
                    let a = n["address"].as_str().unwrap();
                    assert!(reported.contains(a), "{m:?}: dialed {a}, never reported");
                }
                assert!(v["not_queued"].as_u64().unwrap() > 0, "{m:?}: {v:#}");
            }
            Mischief::NewIdEachTime => {
                // Reached under another ID than the seed named: reported,
                // dialed once more under the ID it showed, which it
                // changes again: not dialed a third time.
                assert_eq!(status, "ID mismatch", "{m:?}: {first:#}");
                assert_eq!(nodes.len(), 2, "{m:?}: {v:#}");
                assert_eq!(nodes[1]["status"], "ID mismatch", "{m:?}: {v:#}");
            }
        }
    }
}
