//! Load for a seed node: C clients at once, for S seconds, each visiting
//! the seed as a fresh node would (TCP, the secret-connection handshake
//! under a new identity, the NodeInfo exchange on the seed's network,
//! MConnection with the PEX channel, one `PexRequest`, its `PexAddrs`,
//! hang up), again and again. Prints one line: visits, visits per second,
//! latency p50/p99 of a visit, failures, and the addresses per answer.
//!
//! `cargo run --release -p p2p-conn-lab --bin pex-load -- ID@IP:PORT NETWORK C S`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use p2p_conn::io::tokio as ptokio;
use p2p_conn::nodeinfo::{self, NodeInfo};
use p2p_conn::{Config, Identity, NodeId};
use p2p_conn_mconn::pex::{PexMessage, MAX_PEX_MESSAGE_SIZE, PEX_CHANNEL};
use p2p_conn_mconn::{ChannelDescriptor, MConnConfig, MConnection, Received};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [seed, network, clients, secs] = &args[..] else {
        panic!("usage: pex-load ID@IP:PORT NETWORK CLIENTS SECONDS");
    };
    let (id, addr) = seed.split_once('@').expect("ID@IP:PORT");
    let id: NodeId = id.parse().expect("a node ID");
    let addr: std::net::SocketAddr = addr.parse().expect("IP:PORT");
    let clients: usize = clients.parse().unwrap();
    let secs: f64 = secs.parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let visits = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let addrs = Arc::new(AtomicU64::new(0));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let first_error = Arc::new(Mutex::new(None::<String>));
    let until = Instant::now() + Duration::from_secs_f64(secs);
    rt.block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let (visits, failures, addrs, latencies, first_error) = (
                visits.clone(),
                failures.clone(),
                addrs.clone(),
                latencies.clone(),
                first_error.clone(),
            );
            let network = network.clone();
            tasks.push(tokio::spawn(async move {
                while Instant::now() < until {
                    let t0 = Instant::now();
                    match tokio::time::timeout(Duration::from_secs(10), visit(addr, id, &network))
                        .await
                    {
                        Ok(Ok(n)) => {
                            visits.fetch_add(1, Ordering::Relaxed);
                            addrs.fetch_add(n as u64, Ordering::Relaxed);
                            latencies.lock().unwrap().push(t0.elapsed());
                        }
                        Ok(Err(e)) => {
                            failures.fetch_add(1, Ordering::Relaxed);
                            first_error.lock().unwrap().get_or_insert(e);
                        }
                        Err(_) => {
                            failures.fetch_add(1, Ordering::Relaxed);
                            first_error.lock().unwrap().get_or_insert("timeout".into());
                        }
                    }
                }
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
    });
    let n = visits.load(Ordering::Relaxed);
    let mut l = latencies.lock().unwrap().clone();
    l.sort();
    let q = |p: f64| {
        l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    println!(
        "visits {n} rate {:.1}/s p50 {:.2} ms p99 {:.2} ms failures {} addrs/answer {:.1}{}",
        n as f64 / secs,
        q(0.5),
        q(0.99),
        failures.load(Ordering::Relaxed),
        if n > 0 {
            addrs.load(Ordering::Relaxed) as f64 / n as f64
        } else {
            0.0
        },
        first_error
            .lock()
            .unwrap()
            .as_ref()
            .map_or(String::new(), |e| format!(" (first failure: {e})"))
    );
}

/// One visit; the number of addresses in the answer.
async fn visit(addr: std::net::SocketAddr, id: NodeId, network: &str) -> Result<usize, String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let me = Identity::generate();
    let mut sc = ptokio::handshake(tcp, &me, &Config::default())
        .await
        .map_err(|e| e.to_string())?;
    if sc.remote_node_id() != id {
        return Err("another node ID".into());
    }
    let mut ours = NodeInfo::new(me.node_id(), network.to_string());
    ours.listen_addr = "0.0.0.0:0".into();
    ours.channels = vec![PEX_CHANNEL];
    ours.moniker = "pex-load".into();
    // Ours first: both a CometBFT node and p2p-conn's seed write theirs
    // without waiting for ours.
    nodeinfo::tokio::write(&mut sc, &ours)
        .await
        .map_err(|e| e.to_string())?;
    let _theirs = nodeinfo::tokio::read(&mut sc)
        .await
        .map_err(|e| e.to_string())?;
    let pex = ChannelDescriptor::new(PEX_CHANNEL).with_recv_message_capacity(MAX_PEX_MESSAGE_SIZE);
    let (tx, mut rx) =
        MConnection::spawn(sc, &[pex], MConnConfig::default()).map_err(|e| e.to_string())?;
    tx.send(PEX_CHANNEL, PexMessage::Request.encode())
        .await
        .map_err(|e| e.to_string())?;
    let n = loop {
        match rx.recv().await {
            Some(Received::Message { data, .. }) => match PexMessage::decode(&data) {
                Ok(PexMessage::Addrs(a)) => break a.len(),
                _ => continue,
            },
            Some(Received::Closed(why)) => return Err(format!("closed before the answer: {why}")),
            Some(_) => continue,
            None => return Err("ended".into()),
        }
    };
    tx.close();
    Ok(n)
}
