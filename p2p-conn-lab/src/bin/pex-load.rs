//! Load for a seed node: C clients at once, for S seconds, each visiting
//! the seed as a fresh node would (TCP, the secret-connection handshake
//! under a new identity, the NodeInfo exchange on the seed's network,
//! MConnection with the PEX channel, one `PexRequest`, its `PexAddrs`,
//! hang up), again and again. Prints one line: visits, visits per second,
//! latency p50/p99 of a visit, failures, the addresses per answer, and
//! its own CPU time in clock ticks (`/proc/self/stat`).
//!
//! Its own cost is not the seed's, so it is kept low: one runtime thread
//! per CPU it may use (one when pinned to one core with `taskset`), and
//! MConnection driven on the visit's own task (`MConnCore`: one request,
//! one answer, no tasks or queues of its own), and the answer's addresses
//! counted, not decoded into strings.
//!
//! `cargo run --release -p p2p-conn-lab --bin pex-load -- ID@IP:PORT NETWORK C S`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use p2p_conn::io::tokio as ptokio;
use p2p_conn::nodeinfo::{self, NodeInfo};
use p2p_conn::{Config, Identity, NodeId};
use p2p_conn_mconn::pex::{PexMessage, MAX_PEX_MESSAGE_SIZE, PEX_CHANNEL};
use p2p_conn_mconn::{ChannelDescriptor, Event, MConnConfig, MConnCore};

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
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rt = if cpus == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cpus)
            .enable_all()
            .build()
    }
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
        "visits {n} rate {:.1}/s p50 {:.2} ms p99 {:.2} ms failures {} addrs/answer {:.1} ticks {}{}",
        n as f64 / secs,
        q(0.5),
        q(0.99),
        failures.load(Ordering::Relaxed),
        if n > 0 {
            addrs.load(Ordering::Relaxed) as f64 / n as f64
        } else {
            0.0
        },
        own_ticks(),
        first_error
            .lock()
            .unwrap()
            .as_ref()
            .map_or(String::new(), |e| format!(" (first failure: {e})"))
    );
}

/// This process's CPU time so far (user and system), in clock ticks.
fn own_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which may hold spaces): utime
    // and stime are the 14th and 15th of the line.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let at = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    at(11) + at(12)
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
    let mut core = MConnCore::new(MConnConfig::default(), &[pex], Instant::now())
        .map_err(|e| e.to_string())?;
    core.send(PEX_CHANNEL, PexMessage::Request.encode())
        .map_err(|e| e.to_string())?;
    transmit(&mut sc, &mut core).await?;
    loop {
        let input = sc.fill_buf().await.map_err(|e| e.to_string())?;
        if input.is_empty() {
            return Err("closed before the answer".into());
        }
        let (used, event) = core
            .handle_input(Instant::now(), input)
            .map_err(|e| e.to_string())?;
        sc.consume(used);
        match event {
            Some(Event::Message { data, .. }) => {
                // Hang up: the socket is closed when `sc` is dropped.
                return count_addrs(&data).ok_or_else(|| "an answer that is no PexAddrs".into());
            }
            Some(Event::Ping) => transmit(&mut sc, &mut core).await?,
            None if used == 0 => return Err("stalled".into()),
            _ => {}
        }
    }
}

/// How many addresses a `PexAddrs` message holds (`Message` field 2,
/// each address its field 1), walked without decoding them; `None` if the
/// bytes are not one.
fn count_addrs(msg: &[u8]) -> Option<usize> {
    fn varint(b: &mut &[u8]) -> Option<usize> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = b.split_first()?;
            *b = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return usize::try_from(v).ok();
            }
        }
        None
    }
    let mut b = msg.strip_prefix(&[0x12])?;
    if varint(&mut b)? != b.len() {
        return None;
    }
    let mut n = 0;
    while let Some(rest) = b.strip_prefix(&[0x0a]) {
        b = rest;
        let len = varint(&mut b)?;
        b = b.get(len..)?;
        n += 1;
    }
    b.is_empty().then_some(n)
}

/// What `core` has queued, written and flushed.
async fn transmit(
    sc: &mut ptokio::SecretConnection<tokio::net::TcpStream>,
    core: &mut MConnCore,
) -> Result<(), String> {
    let mut out = Vec::new();
    while core.poll_transmit(Instant::now(), &mut out, 64 * 1024) > 0 {
        sc.write_all(&out).await.map_err(|e| e.to_string())?;
        out.clear();
    }
    sc.flush().await.map_err(|e| e.to_string())
}
