//! The child processes `resources` measures in (the hidden
//! `resources-worker` subcommand): a peer that echoes, a holder of idle
//! connections, an acceptor of stalled handshakes, a churn of handshakes.
//! Each prints one JSON line ([`super::results`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{FutureExt, StreamExt};
use p2p_conn::io::queue::{Bytes, Sender};
use p2p_conn::io::tokio as ptokio;
use p2p_conn::{Config, Error, Identity};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::procfs::{raise_fd_limit, reset_peak, Status};
use super::results::{print_json_line, ChurnResult, HoldResult, StalledResult};
use crate::error::LabError;
use p2p_conn_cli::conn::{self, WireArgs};

type Conn = ptokio::SecretConnection<TcpStream>;
type ReadHalf = ptokio::ReadHalf<tokio::net::tcp::OwnedReadHalf>;
type WriteHalf = ptokio::WriteHalf<tokio::net::tcp::OwnedWriteHalf>;

/// Handshakes in flight while a holder connects (as a node dialing its
/// persistent peers at start-up would have a few at once).
pub const CONCURRENCY: usize = 64;

/// What each held connection is.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// The whole `SecretConnection<TcpStream>` in a `Vec`, no task: the
    /// holder writes and reads on it directly
    Bare,
    /// Split: the read half in a task parked in `fill_buf` (a node's
    /// receive routine), the write half in a `Vec`
    Reader,
    /// As `reader`, with the write half behind a send queue (`Sender`; its
    /// writer task starts with the first message): the shape
    /// docs/embedding.md recommends
    Node,
}

impl Hold {
    pub fn name(self) -> &'static str {
        match self {
            Hold::Bare => "bare",
            Hold::Reader => "reader",
            Hold::Node => "node",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Hold::Bare => "SecretConnection in a Vec, no task",
            Hold::Reader => "read half in a task parked in fill_buf, write half in a Vec",
            Hold::Node => "read half in a task parked in fill_buf, write half in a send queue",
        }
    }
}

/// How a stalled peer behaves.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stall {
    /// Connects and never sends a byte
    Silent,
    /// Sends its ephemeral key (a well-formed first message), then nothing
    Ephemeral,
}

impl Stall {
    pub fn name(self) -> &'static str {
        match self {
            Stall::Silent => "silent",
            Stall::Ephemeral => "ephemeral",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Stall::Silent => "peer sends nothing",
            Stall::Ephemeral => "peer sends only its ephemeral key",
        }
    }
}

/// The hidden worker roles `p2p-conn-lab resources` runs as child processes.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum Worker {
    /// Accept connections until stdin closes; handshake each and echo what
    /// arrives. Prints "listening ADDR" on stderr.
    Peer {
        addr: SocketAddr,
        #[command(flatten)]
        wire: WireArgs,
    },
    /// Dial and hold connections to a `peer`; print one JSON line.
    Hold {
        addr: SocketAddr,
        #[arg(long, value_enum)]
        hold: Hold,
        #[arg(long)]
        connections: u64,
        #[arg(long)]
        message_size: usize,
        #[command(flatten)]
        wire: WireArgs,
    },
    /// Accept `count` connections at once and handshake each under
    /// `timeout`; print one JSON line. Prints "listening ADDR" on stderr.
    Stalled {
        #[arg(long)]
        count: u64,
        #[arg(long)]
        timeout: f64,
        #[arg(long, value_enum)]
        stall: Stall,
        #[command(flatten)]
        wire: WireArgs,
    },
    /// `count` sequential handshakes and closes against ourselves; print
    /// one JSON line.
    Churn {
        #[arg(long)]
        count: u64,
        #[arg(long)]
        sample: u64,
        #[command(flatten)]
        wire: WireArgs,
    },
}

/// Run a worker role (`p2p-conn-lab resources-worker ROLE`).
pub fn run(w: Worker) -> Result<(), LabError> {
    raise_fd_limit()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match w {
        Worker::Peer { addr, wire } => rt.block_on(peer(addr, config(&wire)?)),
        Worker::Hold {
            addr,
            hold,
            connections,
            message_size,
            wire,
        } => {
            let r = rt.block_on(holder(
                addr,
                hold,
                connections,
                message_size,
                config(&wire)?,
            ))?;
            print_json_line("hold", &r)
        }
        Worker::Stalled {
            count,
            timeout,
            stall,
            wire,
        } => {
            let timeout = conn::seconds("--timeout", timeout)?;
            let cfg = config(&wire)?.handshake_timeout(timeout);
            let r = rt.block_on(stalled_worker(count, stall, cfg))?;
            print_json_line("stalled", &r)
        }
        Worker::Churn {
            count,
            sample,
            wire,
        } => {
            let r = rt.block_on(churn_worker(count, sample.max(1), config(&wire)?))?;
            print_json_line("churn", &r)
        }
    }
}

fn config(wire: &WireArgs) -> Result<Config, LabError> {
    let cfg = wire.config();
    cfg.validate()?;
    Ok(cfg)
}

/// Let background work (tasks parking, buffers being released, the
/// allocator) come to rest before a reading.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

async fn dial(addr: SocketAddr, identity: &Identity, cfg: &Config) -> Result<Conn, LabError> {
    let tcp = conn::connect(addr, conn::DEFAULT_CONNECT_TIMEOUT).await?;
    tcp.set_nodelay(true)?;
    Ok(ptokio::handshake(tcp, identity, cfg).await?)
}

/// Any free port on the loopback address.
const LOOPBACK: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// A listener whose accept queue takes a burst of connections: tokio's
/// `TcpListener::bind` asks for 128 places, and a burst of stalled peers
/// beyond that overflows it (their SYNs are dropped and retried a second
/// later). 4096 (the kernel caps it at `net.core.somaxconn`), as Go's
/// `net.Listen` asks for `somaxconn`.
fn listen(addr: SocketAddr) -> Result<tokio::net::TcpListener, LabError> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
    }?;
    socket.set_reuseaddr(true)?;
    socket
        .bind(addr)
        .map_err(|e| LabError::failed(format!("binding {addr}: {e}")))?;
    Ok(socket.listen(4096)?)
}

/// Accept until stdin closes: handshake each connection and echo what
/// arrives on it.
async fn peer(addr: SocketAddr, cfg: Config) -> Result<(), LabError> {
    let listener = listen(addr)?;
    eprintln!("listening {}", listener.local_addr()?);
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(0);
    });
    let identity = Arc::new(Identity::generate());
    let cfg = Arc::new(cfg);
    loop {
        let (tcp, _) = listener.accept().await?;
        let (identity, cfg) = (identity.clone(), cfg.clone());
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            let mut conn = match ptokio::handshake(tcp, &identity, &cfg).await {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("p2p-conn resources peer: handshake failed: {e}");
                    return;
                }
            };
            loop {
                let data = match conn.fill_buf().await {
                    Ok(d) if !d.is_empty() => d.to_vec(),
                    _ => return,
                };
                conn.consume(data.len());
                if conn.write_all(&data).await.is_err() || conn.flush().await.is_err() {
                    return;
                }
            }
        });
    }
}

/// What a holder keeps.
enum Held {
    Bare(Vec<Conn>),
    Reader(Vec<WriteHalf>),
    Node(Vec<Sender>),
}

/// A reader task reports (connection, read buffer bytes after the release)
/// once a whole message has arrived.
type Echoed = tokio::sync::mpsc::UnboundedSender<(usize, usize)>;

/// A node's receive routine, reduced: parked in `fill_buf` for as long as
/// the connection lives; reports each whole `message` bytes. An `async move`
/// block over its captures, as a node would spawn it: an `async fn` taking
/// the read half by value stored it twice in its future (1808 bytes instead
/// of 896 when measured).
#[allow(clippy::manual_async_fn)]
fn receive(
    mut rx: ReadHalf,
    index: usize,
    message: usize,
    echoed: Echoed,
) -> impl std::future::Future<Output = ()> + Send {
    async move {
        let mut got = 0;
        loop {
            let n = match rx.fill_buf().await {
                Ok(d) if !d.is_empty() => d.len(),
                _ => return,
            };
            rx.consume(n);
            got += n;
            if message > 0 && got >= message {
                got -= message;
                // Poll once more before reporting, as the loop's next
                // `fill_buf` would: a read that finds nothing frees the idle
                // read buffer.
                let _ = rx.fill_buf().now_or_never();
                if echoed.send((index, rx.buffer_capacity())).is_err() {
                    return;
                }
            }
        }
    }
}

async fn holder(
    addr: SocketAddr,
    hold: Hold,
    n: u64,
    message: usize,
    cfg: Config,
) -> Result<HoldResult, LabError> {
    let n = usize::try_from(n)?;
    let identity = Identity::generate();
    let msg = Bytes::from(vec![0x5a; message]);
    let (echo_tx, mut echo_rx) = tokio::sync::mpsc::unbounded_channel();

    // Warm up the runtime, the crypto code and the allocator with one
    // connection used the same way, then dropped.
    {
        let mut warm = dial(addr, &identity, &cfg).await?;
        if message > 0 {
            warm.write_all(&msg).await?;
            warm.flush().await?;
            let mut back = vec![0; message];
            tokio::io::AsyncReadExt::read_exact(&mut warm, &mut back).await?;
        }
    }
    settle().await;
    let before = Status::own()?;

    let start = Instant::now();
    let mut held = match hold {
        Hold::Bare => Held::Bare(Vec::with_capacity(n)),
        Hold::Reader => Held::Reader(Vec::with_capacity(n)),
        Hold::Node => Held::Node(Vec::with_capacity(n)),
    };
    let mut inline_bytes = 0;
    let mut read_idle = 0;
    let mut dials = futures_util::stream::iter(0..n)
        .map(|_| dial(addr, &identity, &cfg))
        .buffer_unordered(CONCURRENCY);
    let mut index = 0;
    while let Some(conn) = dials.next().await {
        let conn = conn.map_err(|e| LabError::failed(format!("connection {index}: {e}")))?;
        match &mut held {
            Held::Bare(v) => {
                inline_bytes = std::mem::size_of::<Conn>();
                v.push(conn);
            }
            Held::Reader(_) | Held::Node(_) => {
                let (rx, tx) = conn.into_split();
                read_idle += rx.buffer_capacity();
                let task = receive(rx, index, message, echo_tx.clone());
                let task_bytes = std::mem::size_of_val(&task);
                tokio::spawn(task);
                match &mut held {
                    Held::Reader(v) => {
                        inline_bytes = task_bytes + std::mem::size_of::<WriteHalf>();
                        v.push(tx);
                    }
                    Held::Node(v) => {
                        inline_bytes = task_bytes + std::mem::size_of::<Sender>();
                        v.push(Sender::new(tx, &Default::default())?);
                    }
                    Held::Bare(_) => unreachable!(),
                }
            }
        }
        index += 1;
    }
    drop(dials);
    let handshake_seconds = start.elapsed().as_secs_f64();
    settle().await;
    let idle = Status::own()?;
    let buffers_idle = match &held {
        Held::Bare(v) => Some(v.iter().map(|c| c.buffer_capacity()).sum::<usize>()),
        Held::Reader(v) => Some(read_idle + v.iter().map(|w| w.buffer_capacity()).sum::<usize>()),
        Held::Node(_) => None,
    };

    // One message each way, one connection at a time.
    let peak_reset = reset_peak();
    let start = Instant::now();
    let mut read_after = 0;
    if message > 0 {
        let limit = Duration::from_secs(10);
        for i in 0..n {
            let sent = async {
                match &mut held {
                    Held::Bare(v) => {
                        let c = &mut v[i];
                        c.write_all(&msg).await?;
                        c.flush().await?;
                        let mut got = 0;
                        while got < message {
                            let k = c.fill_buf().await?.len();
                            if k == 0 {
                                return Err(std::io::ErrorKind::UnexpectedEof.into());
                            }
                            c.consume(k);
                            got += k;
                        }
                        // As a reader task's next `fill_buf` would: a read
                        // that finds nothing frees the idle read buffer.
                        let _ = c.fill_buf().now_or_never();
                        Ok::<_, std::io::Error>(())
                    }
                    Held::Reader(v) => {
                        v[i].write_all(&msg).await?;
                        v[i].flush().await
                    }
                    Held::Node(v) => v[i].send(msg.clone()).await.map_err(std::io::Error::other),
                }
            };
            tokio::time::timeout(limit, sent)
                .await
                .map_err(|_| LabError::failed(format!("connection {i}: sending timed out")))?
                .map_err(|e| LabError::failed(format!("connection {i}: {e}")))?;
            if !matches!(held, Held::Bare(_)) {
                let (got, read_buffer) = tokio::time::timeout(limit, echo_rx.recv())
                    .await
                    .map_err(|_| {
                        LabError::failed(format!("connection {i}: no echo within {limit:?}"))
                    })?
                    .ok_or_else(|| LabError::failed("the reader tasks are gone"))?;
                if got != i {
                    return Err(LabError::failed(format!(
                        "echo on connection {got} while waiting for {i}"
                    )));
                }
                read_after += read_buffer;
            }
        }
    }
    let pass_seconds = start.elapsed().as_secs_f64();
    settle().await;
    let after = Status::own()?;
    let buffers_message = match &held {
        Held::Bare(v) => Some(v.iter().map(|c| c.buffer_capacity()).sum::<usize>()),
        Held::Reader(v) => Some(read_after + v.iter().map(|w| w.buffer_capacity()).sum::<usize>()),
        Held::Node(_) => None,
    };
    let result = HoldResult {
        implementation: "p2p-conn".into(),
        hold: format!("{}: {}", hold.name(), hold.describe()),
        connections: n as u64,
        message: message as u64,
        rss_before_kib: before.rss_kib,
        rss_idle_kib: idle.rss_kib,
        rss_message_kib: after.rss_kib,
        hwm_idle_kib: idle.hwm_kib,
        hwm_pass_kib: after.hwm_kib,
        peak_reset,
        handshake_seconds,
        pass_seconds,
        buffers_idle: buffers_idle.map(|b| b as u64),
        buffers_message: buffers_message.map(|b| b as u64),
        inline_bytes: Some(inline_bytes as u64),
        go_heap_idle_kib: None,
        go_stack_idle_kib: None,
        go_heap_message_kib: None,
        go_stack_message_kib: None,
    };
    // Everything stays held until the readings are taken.
    drop(held);
    Ok(result)
}

/// Accept `count` connections and handshake each under the configured
/// timeout, measuring RSS once all are stalled.
async fn stalled_worker(count: u64, stall: Stall, cfg: Config) -> Result<StalledResult, LabError> {
    let timeout = cfg.handshake_timeout;
    let listener = listen(LOOPBACK)?;
    let addr = listener.local_addr()?;
    let identity = Arc::new(Identity::generate());
    // Warm up with one whole handshake over this listener.
    {
        let other = Identity::generate();
        let (dialed, accepted) = tokio::join!(dial(addr, &other, &cfg), async {
            let (tcp, _) = listener.accept().await?;
            Ok::<_, LabError>(ptokio::handshake(tcp, &identity, &cfg).await?)
        });
        dialed?;
        accepted?;
    }
    settle().await;
    let before = Status::own()?;
    eprintln!("listening {addr}");

    let ended = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(count as usize);
    let mut first_accept = None;
    for _ in 0..count {
        let (tcp, _) = listener.accept().await?;
        first_accept.get_or_insert_with(Instant::now);
        let (identity, cfg, ended) = (identity.clone(), cfg.clone(), ended.clone());
        tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            let r = ptokio::handshake(tcp, &identity, &cfg).await;
            ended.fetch_add(1, Ordering::SeqCst);
            (r.err(), start.elapsed())
        }));
    }
    // Let every handshake take what the peer sent and wait for more, but read
    // well before the first timeout.
    tokio::time::sleep(Duration::from_millis(300).min(timeout / 4)).await;
    let stalled = Status::own()?;
    let ended_before_reading = ended.load(Ordering::SeqCst) as u64;
    let reading_after = first_accept
        .map(|t| t.elapsed().as_secs_f64())
        .unwrap_or(0.0);

    let (mut timed_out, mut other, mut ok) = (0, 0, 0);
    let mut first_other = None;
    let (mut min, mut max) = (f64::INFINITY, 0f64);
    for t in tasks {
        let (err, took) = t.await?;
        let took = took.as_secs_f64();
        (min, max) = (min.min(took), max.max(took));
        match err {
            Some(Error::Timeout(_)) => timed_out += 1,
            Some(e) => {
                other += 1;
                first_other.get_or_insert_with(|| e.to_string());
            }
            None => ok += 1,
        }
    }
    Ok(StalledResult {
        stall: stall.name().into(),
        handshakes: count,
        timeout_seconds: timeout.as_secs_f64(),
        rss_before_kib: before.rss_kib,
        rss_stalled_kib: stalled.rss_kib,
        ended_before_reading,
        timed_out,
        other_errors: other,
        succeeded: ok,
        first_other_error: first_other,
        min_seconds: if min.is_finite() { min } else { 0.0 },
        max_seconds: max,
        reading_after_seconds: reading_after,
    })
}

/// `count` sequential handshakes and closes against our own listener (both
/// ends in this process), sampling RSS every `sample`.
async fn churn_worker(count: u64, sample: u64, cfg: Config) -> Result<ChurnResult, LabError> {
    let listener = listen(LOOPBACK)?;
    let addr = listener.local_addr()?;
    let served = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let server = {
        let (served, failed, cfg) = (served.clone(), failed.clone(), cfg.clone());
        tokio::spawn(async move {
            let identity = Arc::new(Identity::generate());
            while let Ok((tcp, _)) = listener.accept().await {
                let (identity, cfg, served, failed) = (
                    identity.clone(),
                    cfg.clone(),
                    served.clone(),
                    failed.clone(),
                );
                tokio::spawn(async move {
                    let _ = tcp.set_nodelay(true);
                    if ptokio::handshake(tcp, &identity, &cfg).await.is_err() {
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                    served.fetch_add(1, Ordering::SeqCst);
                });
            }
        })
    };
    let identity = Identity::generate();
    // Warm up with one handshake.
    drop(dial(addr, &identity, &cfg).await?);
    while served.load(Ordering::SeqCst) < 1 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    settle().await;
    let before = Status::own()?;
    let start = Instant::now();
    let mut samples = Vec::new();
    for i in 1..=count {
        drop(dial(addr, &identity, &cfg).await?);
        if i % sample == 0 || i == count {
            // Wait for the server side of every handshake so far to end.
            let waited = Instant::now();
            while (served.load(Ordering::SeqCst) as u64) < i + 1 {
                if waited.elapsed() > Duration::from_secs(10) {
                    return Err(LabError::failed("the server side of the churn stopped"));
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            samples.push((i, Status::own()?.rss_kib));
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    server.abort();
    let failed = failed.load(Ordering::SeqCst);
    if failed > 0 {
        return Err(LabError::failed(format!(
            "{failed} server-side churn handshakes failed"
        )));
    }
    Ok(ChurnResult {
        handshakes: count,
        rss_before_kib: before.rss_kib,
        samples,
        hwm_kib: Status::own()?.hwm_kib,
        seconds,
    })
}
