//! `p2p-conn seed` at its default settings against one source that
//! poisons: the seed's only `--seeds` entry knows 12 honest nodes and a
//! liar, which answers every `PexRequest` with 900 addresses where
//! nothing listens (closed ports on loopback). From the moment the seed
//! has reached its first node, every visitor gets at least 80 % addresses
//! of nodes that answer; and within 2 minutes none of the 900 is left in
//! the book: each was refused as past its source's cap, or tried, marked
//! bad and dropped. No Go needed.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::pex_peers;
use crate::common::process::{scratch, Feed, Proc};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use p2p_conn::io::tokio as ptokio;
use p2p_conn::nodeinfo::{self, NodeInfo};
use p2p_conn::{keyfile, Identity};
use p2p_conn_mconn::pex::{NetAddress, PexMessage, PEX_CHANNEL};
use p2p_conn_mconn::{ChannelDescriptor, MConnConfig, MConnection, Received};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");
const NETWORK: &str = "poison-chain";
const HONEST: usize = 12;
const DEAD: usize = 900;
/// The bound the seed has to test and drop what the liar sent.
const LIMIT: Duration = Duration::from_secs(120);

/// The seed's metric `name` (0 when absent).
fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(&format!("p2p_conn_seed_{name} "))?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut m = std::net::TcpStream::connect(addr).unwrap();
    m.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    m.read_to_string(&mut text).unwrap();
    text
}

/// A node's visit to the seed: handshake, NodeInfo, one `PexRequest`; the
/// answer.
async fn visit(seed: SocketAddr) -> Vec<NetAddress> {
    let tcp = tokio::net::TcpStream::connect(seed).await.unwrap();
    let me = Identity::generate();
    let mut sc = ptokio::handshake(tcp, &me, &p2p_conn::Config::default())
        .await
        .unwrap();
    let mut ours = NodeInfo::new(me.node_id(), NETWORK.to_string());
    ours.listen_addr = "0.0.0.0:0".into();
    ours.channels = vec![PEX_CHANNEL];
    nodeinfo::tokio::write(&mut sc, &ours).await.unwrap();
    let _ = nodeinfo::tokio::read(&mut sc).await.unwrap();
    let pex = ChannelDescriptor::new(PEX_CHANNEL);
    let (tx, mut rx) = MConnection::spawn(sc, &[pex], MConnConfig::default()).unwrap();
    tx.send(PEX_CHANNEL, PexMessage::Request.encode())
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match rx.recv().await {
                Some(Received::Message { data, .. }) => {
                    if let Ok(PexMessage::Addrs(a)) = PexMessage::decode(&data) {
                        break a;
                    }
                }
                other => panic!("no answer from the seed: {other:?}"),
            }
        }
    })
    .await
    .expect("an answer within 10 s")
}

#[test]
fn one_source_cannot_poison_the_seeds_book() {
    // Peer 0 is the seed's entry: it reports the honest peers 1..=12 and
    // the liar, 13; the honest ones report each other; the liar reports
    // 900 made-up nodes at 127.45.x.y:26656, where nothing listens.
    let liar = HONEST + 1;
    let dead: Vec<NetAddress> = (0..DEAD)
        .map(|i| NetAddress {
            id: Identity::generate().node_id().to_string(),
            ip: format!("127.45.{}.{}", i / 250, i % 250 + 1),
            port: 26656,
        })
        .collect();
    let peers = pex_peers::spawn(NETWORK, HONEST + 2, |i, all| match i {
        0 => all[1..].to_vec(),
        i if i == liar => dead.clone(),
        i => all[..=HONEST]
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, a)| a.clone())
            .collect(),
    });
    // Every fake peer answers: all of them are reachable, the liar too.
    let live: Vec<&str> = peers.iter().map(|a| a.id.as_str()).collect();

    let dir = scratch("seed-book-poison");
    let key = dir.join("seed_key.json");
    keyfile::save_new(&Identity::generate(), &key).unwrap();
    let book = dir.join("book.json");
    let metrics = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let metrics_addr = metrics.local_addr().unwrap().to_string();
    drop(metrics);
    let entry = format!("{}@{}:{}", peers[0].id, peers[0].ip, peers[0].port);
    // Default settings but for loopback addresses and the metrics.
    let args = [
        "seed",
        "--listen",
        "127.0.0.1:0",
        "--network",
        NETWORK,
        "--key",
        key.to_str().unwrap(),
        "--seeds",
        &entry,
        "--book",
        book.to_str().unwrap(),
        "--allow-unroutable",
        "--metrics",
        &metrics_addr,
    ];
    let mut seed = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let started = Instant::now();
    let line = seed.next_line(started + Duration::from_secs(20));
    let seed_addr: SocketAddr = line
        .strip_prefix("seed ")
        .and_then(|l| l.split(' ').next())
        .and_then(|a| a.split('@').nth(1))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| seed.fail(&format!("first line {line:?}")));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let mut visits = 0;
    loop {
        seed.check_running("testing the liar's addresses");
        let m = scrape(&metrics_addr);
        let (good, new, bad) = (
            metric(&m, "book_good"),
            metric(&m, "book_new"),
            metric(&m, "book_bad"),
        );
        let (dropped, refused) = (
            metric(&m, "evicted_total"),
            metric(&m, "source_cap_refused_total"),
        );
        // The book only gains good entries here: one counted before the
        // visit is there during it.
        if good > 0 {
            let answer = rt.block_on(visit(seed_addr));
            visits += 1;
            let reachable = answer
                .iter()
                .filter(|a| live.contains(&a.id.as_str()))
                .count();
            assert!(
                !answer.is_empty() && reachable * 5 >= answer.len() * 4,
                "visit {visits} at {:?} (book: {good} good, {new} new, {bad} bad): \
                 {reachable} of {} addresses reachable",
                started.elapsed(),
                answer.len()
            );
        }
        // Done: every peer good, nothing untested or bad left, and each of
        // the 900 either dropped after its tries or refused.
        if good == live.len() as u64 && new == 0 && bad == 0 && dropped + refused == DEAD as u64 {
            eprintln!(
                "all {DEAD} judged in {:?}: {dropped} tried and dropped, {refused} refused \
                 at the source's cap; {visits} visits, {} tries",
                started.elapsed(),
                metric(&m, "tries_total")
            );
            break;
        }
        assert!(
            started.elapsed() < LIMIT,
            "after {LIMIT:?}: {good} good, {new} untested, {bad} bad, {dropped} dropped, \
             {refused} refused; {visits} visits"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(visits > 0, "no visit after the first good entry");
    // A last visitor gets every peer, and nothing else.
    let answer = rt.block_on(visit(seed_addr));
    let mut got: Vec<&str> = answer.iter().map(|a| a.id.as_str()).collect();
    got.sort_unstable();
    let mut want = live.clone();
    want.sort_unstable();
    assert_eq!(got, want);

    kill(Pid::from_raw(seed.id() as i32), Signal::SIGTERM).unwrap();
    seed.finish(Instant::now() + Duration::from_secs(20))
        .assert_ok("the seed, stopped by SIGTERM");
    // The saved book: the peers, all good (the old table); none of the
    // liar's addresses.
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&book).unwrap()).unwrap();
    let addrs = v["addrs"].as_array().unwrap();
    assert_eq!(addrs.len(), live.len(), "{v:#}");
    assert!(addrs.iter().all(|e| e["bucket_type"] == 2), "{v:#}");
    let _ = std::fs::remove_dir_all(&dir);
}
