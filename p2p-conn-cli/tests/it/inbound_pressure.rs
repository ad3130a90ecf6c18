//! Inbound listeners under a slowloris: many connections that connect and
//! then stall (sending nothing, or part of the handshake), from many
//! loopback addresses. `p2p-conn seed` still answers every visitor, long
//! before the stalled handshakes would time out, with its descriptors
//! bounded; its per-IP bound still refuses; its `/metrics` still answers
//! a scrape; `p2p-conn listen` still takes the peer that completes a
//! handshake. No Go needed.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use p2p_conn::io::tokio as ptokio;
use p2p_conn::nodeinfo::{self, NodeInfo};
use p2p_conn::{keyfile, Identity};
use p2p_conn_mconn::pex::{PexMessage, PEX_CHANNEL};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::process::{scratch, Feed, Proc};
use crate::seed::seed_with;

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

/// Bound on one honest visit: generous for a loaded machine, and well
/// under the 10 s a stalled handshake is held by its own timeout, so a
/// visit that had to wait for a slot to time out fails.
const VISIT_LIMIT: Duration = Duration::from_secs(5);

/// 127.0.0.N, N from 2: the attackers' source addresses.
fn attacker_ip(n: usize) -> IpAddr {
    let n = n + 2;
    IpAddr::V4(Ipv4Addr::new(127, 0, (n / 256) as u8, (n % 256) as u8))
}

/// Raise this process's soft limit on open files to its hard limit (the
/// attackers' sockets are ours).
fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
}

/// Open files of process `pid`.
fn fds_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// A connection to `to` from `from` (port any).
async fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpSocket::new_v4()?;
    s.bind(SocketAddr::new(from, 0))?;
    s.connect(to).await
}

/// How an attacking connection stalls: `i % 3` says.
/// 0: sends nothing; 1: the first 10 bytes of an ephemeral key message;
/// 2: a whole ephemeral key message, then nothing (no signature).
async fn stall(tcp: &mut TcpStream, i: usize) {
    let mut eph = vec![34u8, 0x0a, 0x20];
    eph.extend((0..32u8).map(|b| b.wrapping_mul(7).wrapping_add(i as u8) | 1));
    match i % 3 {
        0 => {}
        1 => {
            let _ = tcp.write_all(&eph[..10]).await;
        }
        _ => {
            let _ = tcp.write_all(&eph).await;
        }
    }
}

/// `count` stalled connections to `to`, `per_ip` from each address; a
/// connection refused fails the test unless `refused_ok`.
async fn stalled(to: SocketAddr, count: usize, per_ip: usize, refused_ok: bool) -> Vec<TcpStream> {
    let mut held = Vec::with_capacity(count);
    for i in 0..count {
        let mut tcp = match connect_from(attacker_ip(i / per_ip), to).await {
            Ok(tcp) => tcp,
            Err(e) if refused_ok && e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
            Err(e) => panic!("attacker {i}: {e}"),
        };
        stall(&mut tcp, i).await;
        held.push(tcp);
    }
    held
}

/// One visit as a node pays a seed: handshake, NodeInfo, `PexRequest`,
/// then the answer (`PexAddrs`) and the seed's hang-up. The number of
/// addresses in the answer, or what went wrong.
async fn visit(seed: SocketAddr, network: &str) -> Result<usize, String> {
    let tcp = TcpStream::connect(seed)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let me = Identity::generate();
    let mut sc = ptokio::handshake(tcp, &me, &p2p_conn::Config::default())
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let mut ours = NodeInfo::new(me.node_id(), network.to_string());
    ours.listen_addr = "0.0.0.0:0".into();
    ours.channels = vec![PEX_CHANNEL];
    nodeinfo::tokio::write(&mut sc, &ours)
        .await
        .map_err(|e| format!("nodeinfo write: {e}"))?;
    nodeinfo::tokio::read(&mut sc)
        .await
        .map_err(|e| format!("nodeinfo read: {e}"))?;
    let pex = p2p_conn_mconn::ChannelDescriptor::new(PEX_CHANNEL);
    let (tx, mut rx) =
        p2p_conn_mconn::MConnection::spawn(sc, &[pex], p2p_conn_mconn::MConnConfig::default())
            .map_err(|e| format!("mconnection: {e}"))?;
    tx.send(PEX_CHANNEL, PexMessage::Request.encode())
        .await
        .map_err(|e| format!("request: {e:?}"))?;
    let n = loop {
        match rx.recv().await {
            Some(p2p_conn_mconn::Received::Message { data, .. }) => {
                if let Ok(PexMessage::Addrs(a)) = PexMessage::decode(&data) {
                    break a.len();
                }
            }
            other => return Err(format!("no answer: {other:?}")),
        }
    };
    // The seed hangs up after answering.
    while let Some(event) = rx.recv().await {
        if matches!(event, p2p_conn_mconn::Received::Closed(_)) {
            break;
        }
    }
    Ok(n)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// 1,000 stalled connections from 250 addresses (4 each, the default
/// `--max-per-ip`) against the default 64 slots; 20 honest visits in a
/// row are each answered within [`VISIT_LIMIT`], and the seed's open
/// files stay near its slots.
#[test]
fn the_seed_answers_visitors_while_stalled_connections_fill_it() {
    raise_fd_limit();
    let (seed, addr, dir) = seed_with("seed-slowloris", &[]);
    let pid = seed.id();
    let rt = runtime();
    rt.block_on(async {
        let held = stalled(addr, 1_000, 4, false).await;
        let mut most_fds = fds_of(pid);
        let mut slowest = Duration::ZERO;
        for v in 0..20 {
            let t = Instant::now();
            let answered = tokio::time::timeout(VISIT_LIMIT, visit(addr, "test-chain")).await;
            match answered {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => panic!("visit {v}: not answered: {e}"),
                Err(_) => panic!("visit {v}: not answered within {VISIT_LIMIT:?}"),
            }
            slowest = slowest.max(t.elapsed());
            most_fds = most_fds.max(fds_of(pid));
        }
        eprintln!("20 visits answered, the slowest in {slowest:?}; the seed had at most {most_fds} files open");
        // At most twice the 64 slots (those that count, and evicted ones
        // not closed yet), beside the listener, stdio and the runtime's.
        assert!(most_fds <= 2 * 64 + 20, "the seed had {most_fds} files open");
        drop(held);
    });
    kill(Pid::from_raw(pid as i32), Signal::SIGTERM).unwrap();
    seed.finish(Instant::now() + Duration::from_secs(20))
        .assert_ok("the seed, stopped by SIGTERM");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether the seed closes `tcp` within `limit` (end of stream or reset).
async fn closed_within(tcp: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 256];
    tokio::time::timeout(limit, async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// The per-IP bound keeps its meaning under pressure: with the slots full
/// of stalled connections, a connection from an address at its limit is
/// closed at once and evicts nobody; one from another address evicts the
/// oldest stalled connection (the first address's), after which the first
/// address has room again, up to its bound and no more.
#[test]
fn the_seed_per_ip_bound_holds_under_pressure() {
    let (seed, addr, dir) = seed_with(
        "seed-per-ip-pressure",
        &["--max-inbound", "6", "--max-per-ip", "2"],
    );
    let rt = runtime();
    rt.block_on(async {
        // Three addresses, two each: full.
        let mut held = stalled(addr, 6, 2, false).await;
        // A third from the first address: closed at once.
        let mut third = connect_from(attacker_ip(0), addr).await.unwrap();
        assert!(
            closed_within(&mut third, Duration::from_secs(3)).await,
            "a third connection from one address was kept"
        );
        // Nobody was evicted for it: the oldest is still open.
        assert!(
            !closed_within(&mut held[0], Duration::from_millis(300)).await,
            "a refused connection evicted another"
        );
        // A fourth address: the oldest (the first address's first) makes
        // room.
        let _fourth = connect_from(attacker_ip(3), addr).await.unwrap();
        assert!(
            closed_within(&mut held[0], Duration::from_secs(3)).await,
            "the oldest stalled connection was not evicted"
        );
        // The first address has room again: its next two connections are
        // admitted, each evicting the oldest (its own held[1], then
        // held[2]); a third is refused at once, as it holds 2.
        let mut again = connect_from(attacker_ip(0), addr).await.unwrap();
        assert!(closed_within(&mut held[1], Duration::from_secs(3)).await);
        let mut again2 = connect_from(attacker_ip(0), addr).await.unwrap();
        assert!(closed_within(&mut held[2], Duration::from_secs(3)).await);
        let mut over = connect_from(attacker_ip(0), addr).await.unwrap();
        assert!(
            closed_within(&mut over, Duration::from_secs(3)).await,
            "the first address holds more than 2"
        );
        assert!(!closed_within(&mut again, Duration::from_millis(300)).await);
        assert!(!closed_within(&mut again2, Duration::from_millis(100)).await);
        assert!(!closed_within(&mut held[3], Duration::from_millis(100)).await);
        drop(held);
    });
    kill(Pid::from_raw(seed.id() as i32), Signal::SIGTERM).unwrap();
    seed.finish(Instant::now() + Duration::from_secs(20))
        .assert_ok("the seed, stopped by SIGTERM");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `p2p-conn listen` with 100 stalled connections waiting (from 25
/// addresses) still takes the dialer that completes the handshake, and
/// pipes its line, well before the stalled handshakes time out.
#[test]
fn listen_takes_the_peer_that_completes_its_handshake_past_stalled_ones() {
    raise_fd_limit();
    let mut listener = Proc::spawn(
        Path::new(BIN),
        &["listen", "127.0.0.1:0", "--handshake-timeout", "60"],
        Feed::none(),
    );
    let line = listener.next_line(Instant::now() + Duration::from_secs(10));
    let addr: SocketAddr = line
        .strip_prefix("listening ")
        .unwrap_or_else(|| listener.fail(&format!("first line {line:?}")))
        .parse()
        .unwrap();
    let rt = runtime();
    let held = rt.block_on(stalled(addr, 100, 4, true));
    let dial = Proc::spawn(
        Path::new(BIN),
        &["dial", &addr.to_string()],
        Feed::Now(b"past the stallers\n".to_vec()),
    );
    let out = listener.finish_within(Duration::from_secs(30));
    out.assert_ok("listen");
    assert_eq!(out.stdout_text(), "past the stallers");
    dial.finish_within(Duration::from_secs(10))
        .assert_ok("dial");
    drop(held);
}

/// `seed --metrics` under 300 stalled connections (from 75 addresses):
/// a scrape is still answered, and the seed holds a bounded number of
/// them open (32 that count, as many being closed), not all 300.
#[test]
fn the_seed_metrics_answer_past_stalled_connections_with_bounded_files() {
    raise_fd_limit();
    let metrics = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let metrics_addr = metrics.local_addr().unwrap();
    drop(metrics);
    let m = metrics_addr.to_string();
    let (seed, _, dir) = seed_with("seed-metrics-pressure", &["--metrics", &m]);
    let pid = seed.id();
    let idle = fds_of(pid);
    let rt = runtime();
    rt.block_on(async {
        let held = stalled(metrics_addr, 300, 4, false).await;
        let scrape = async {
            let mut c = TcpStream::connect(metrics_addr).await.unwrap();
            c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            let mut text = String::new();
            c.read_to_string(&mut text).await.unwrap();
            text
        };
        let text = tokio::time::timeout(VISIT_LIMIT, scrape)
            .await
            .expect("a scrape answered past the stalled connections");
        assert!(text.contains("p2p_conn_seed_inbound_open"), "{text}");
        let open = fds_of(pid);
        assert!(
            open <= idle + 2 * 32,
            "the seed had {open} files open ({idle} idle) with 300 stalled scrapers"
        );
        drop(held);
    });
    kill(Pid::from_raw(pid as i32), Signal::SIGTERM).unwrap();
    seed.finish(Instant::now() + Duration::from_secs(20))
        .assert_ok("the seed, stopped by SIGTERM");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `p2p-conn listen --peer-id ID` with stalled connections in progress: a
/// dialer with another ID is refused (reset) without ending `listen`,
/// which then pipes the dialer with the ID it expects.
#[test]
fn listen_with_peer_id_refuses_another_id_and_keeps_waiting() {
    raise_fd_limit();
    let dir = scratch("listen-peer-id-pressure");
    let key = dir.join("right_key.json");
    let right = Identity::generate();
    keyfile::save_new(&right, &key).unwrap();
    let right_id = right.node_id().to_string();
    let mut listener = Proc::spawn(
        Path::new(BIN),
        &[
            "listen",
            "127.0.0.1:0",
            "--handshake-timeout",
            "60",
            "--peer-id",
            &right_id,
        ],
        Feed::none(),
    );
    let line = listener.next_line(Instant::now() + Duration::from_secs(10));
    let addr: SocketAddr = line
        .strip_prefix("listening ")
        .unwrap_or_else(|| listener.fail(&format!("first line {line:?}")))
        .parse()
        .unwrap();
    let rt = runtime();
    let held = rt.block_on(stalled(addr, 8, 4, true));
    // Another ID (a fresh one): refused with a reset, listen goes on.
    let wrong = Proc::spawn(
        Path::new(BIN),
        &["dial", &addr.to_string()],
        Feed::Now(b"not for you\n".to_vec()),
    )
    .finish_within(Duration::from_secs(20));
    assert!(!wrong.status.success(), "the wrong dialer was served");
    listener.check_running("after refusing another ID");
    let right_dial = Proc::spawn(
        Path::new(BIN),
        &["dial", &addr.to_string(), "--key", key.to_str().unwrap()],
        Feed::Now(b"for you\n".to_vec()),
    );
    let out = listener.finish_within(Duration::from_secs(30));
    out.assert_ok("listen");
    assert_eq!(out.stdout_text(), "for you");
    right_dial
        .finish_within(Duration::from_secs(10))
        .assert_ok("dial");
    drop(held);
    let _ = std::fs::remove_dir_all(&dir);
}
