//! `p2p-conn`: a netcat for CometBFT secret connections, plus key tools and a
//! loopback benchmark.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use p2p_conn::io::tokio as ptokio;
use p2p_conn::{keyfile, Backend, Config, Error, Identity, NodeId, ProtocolError};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

mod bench;
mod breakdown;
mod probe;
mod producers;
mod profile;
mod resources;

#[derive(Parser)]
#[command(
    name = "p2p-conn",
    version,
    about = "CometBFT-compatible secret connections: netcat-style client/server, keys, benchmark"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Show p2p-conn's tracing events (debug level) on stderr
    #[arg(short, long, global = true)]
    verbose: bool,
}

/// The connection settings `listen`, `dial` and `bench` share.
#[derive(clap::Args, Clone, Debug)]
pub struct WireArgs {
    /// Frame data size (1024 = CometBFT wire; others need p2p-conn on both ends)
    #[arg(long, default_value_t = p2p_conn::proto::STANDARD_FRAME_SIZE)]
    pub frame_size: usize,
    /// Most sealed bytes per socket write
    #[arg(long, default_value_t = p2p_conn::DEFAULT_FLUSH_SIZE)]
    pub flush_size: usize,
    /// Receive buffer filled by one read
    #[arg(long, default_value_t = p2p_conn::DEFAULT_READ_BUFFER)]
    pub read_buffer: usize,
    /// AEAD backend: avx512, ring or rustcrypto
    #[arg(long, default_value_t = Backend::default())]
    pub backend: Backend,
}

impl WireArgs {
    /// `Config::default()` with these settings (not validated yet).
    pub fn config(&self) -> Config {
        Config::default()
            .frame_size(self.frame_size)
            .flush_size(self.flush_size)
            .read_buffer_size(self.read_buffer)
            .backend(self.backend)
    }
}

#[derive(clap::Args, Clone)]
pub struct ConnArgs {
    /// node_key.json to authenticate with (default: a fresh ephemeral identity)
    #[arg(long)]
    key: Option<PathBuf>,
    /// Bound on the whole handshake, in seconds (and, separately, on the
    /// NodeInfo exchange, as CometBFT does)
    #[arg(long, default_value_t = 20.0)]
    handshake_timeout: f64,
    /// Require the peer to authenticate as this node ID (40 hex digits)
    #[arg(long)]
    peer_id: Option<NodeId>,
    #[command(flatten)]
    wire: WireArgs,
}

/// `listen` and `dial`: the connection settings, and the optional NodeInfo
/// exchange before piping.
#[derive(clap::Args, Clone)]
struct PipeArgs {
    #[command(flatten)]
    conn: ConnArgs,
    /// Exchange NodeInfo as CometBFT peers do before piping (the peer's is
    /// printed on stderr and must be valid and compatible)
    #[arg(long)]
    nodeinfo: bool,
    #[command(flatten)]
    info: probe::NodeInfoArgs,
}

/// CometBFT's dial timeout.
pub const DEFAULT_CONNECT_TIMEOUT_SECS: f64 = 3.0;

/// Bytes of stdin read (and sent as one message) at a time.
const STDIN_CHUNK_BYTES: usize = 64 * 1024;

#[derive(Subcommand)]
enum Cmd {
    /// Generate a CometBFT node_key.json and print its node ID
    Keygen {
        /// Where to write the key (refuses to overwrite an existing file)
        #[arg(long, default_value = "node_key.json")]
        out: PathBuf,
    },
    /// Print the node ID of a node_key.json
    Id {
        /// The node_key.json
        #[arg(long)]
        key: PathBuf,
    },
    /// Accept one connection, then copy stdin to it and it to stdout until
    /// both are done
    Listen {
        /// Address to listen on, e.g. 127.0.0.1:26656
        addr: SocketAddr,
        #[command(flatten)]
        args: PipeArgs,
    },
    /// Connect to ADDR (or ID@ADDR), then copy stdin to it and it to stdout
    /// until both are done
    Dial {
        /// Address to dial, e.g. 127.0.0.1:26656 or <node-id>@127.0.0.1:26656
        addr: String,
        /// Give up connecting (before the handshake) after this many seconds
        #[arg(long, default_value_t = DEFAULT_CONNECT_TIMEOUT_SECS)]
        connect_timeout: f64,
        #[command(flatten)]
        args: PipeArgs,
    },
    /// Ask a CometBFT node who it is: dial, handshake, exchange NodeInfo,
    /// check it by CometBFT's rules, print it, hang up. Exit code by stage:
    /// 0 ok, 3 connect, 4 handshake, 5 ID mismatch, 6 NodeInfo, 7 timeout,
    /// 8 network mismatch, 1 other (2: the command line does not parse)
    Probe(probe::ProbeArgs),
    /// Loopback benchmark: handshake, then stream messages and verify them
    Bench(bench::BenchArgs),
    /// Run the bench workload (or send to a listening peer with --connect)
    /// under a sampling profiler: flamegraph SVG and seal/write breakdown
    Profile(profile::ProfileArgs),
    /// Memory per connection: idle connections at scale, stalled
    /// handshakes, handshake churn (process RSS from /proc; Linux)
    Resources(resources::ResourcesArgs),
    /// A child process of `resources`
    #[command(hide = true)]
    ResourcesWorker {
        #[command(subcommand)]
        role: resources::Worker,
    },
}

/// A failure with the one line the CLI prints for it.
pub struct Failure(pub String);

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure(describe(&e))
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure(describe(&Error::from_io(e)))
    }
}

/// One line naming the cause: handshake, authentication, peer-ID mismatch,
/// timeout, or I/O.
pub fn describe(e: &Error) -> String {
    match e {
        Error::Protocol(
            p @ (ProtocolError::InvalidSignature
            | ProtocolError::UnsupportedKeyType(_)
            | ProtocolError::MalformedAuthMessage(_)),
        ) => format!("authentication failed: {p}"),
        // Frame #0 carries the peer's authentication: still the handshake.
        Error::Protocol(p @ ProtocolError::FrameAuthentication { counter: 0 }) => {
            format!("handshake failed: {p}")
        }
        Error::Protocol(
            p @ (ProtocolError::FrameAuthentication { .. } | ProtocolError::FrameTooLarge { .. }),
        ) => {
            format!("connection failed: {p}")
        }
        Error::Protocol(p) => format!("handshake failed: {p}"),
        Error::HandshakeEof { .. } => e.to_string(),
        Error::Timeout(d) => format!("timeout: handshake did not finish within {d:?}"),
        Error::PeerIdMismatch { .. } => e.to_string(),
        Error::Io(io) => format!("I/O error: {io}"),
        other => other.to_string(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.verbose {
        profile::show_tracing();
    }
    let r = match cli.cmd {
        Cmd::Keygen { out } => keygen(out),
        Cmd::Id { key } => keyfile::load(&key)
            .map(|id| println!("{}", id.node_id()))
            .map_err(|e| Failure(e.to_string())),
        Cmd::Listen { addr, args } => run_async(listen(addr, args)),
        Cmd::Dial {
            addr,
            connect_timeout,
            args,
        } => run_async(dial(addr, connect_timeout, args)),
        Cmd::Probe(args) => return probe::run(args),
        Cmd::Bench(args) => bench::run(args).map_err(Failure),
        Cmd::Profile(args) => profile::run(args).map_err(Failure),
        Cmd::Resources(args) => resources::run(args).map_err(Failure),
        Cmd::ResourcesWorker { role } => resources::run_worker(role).map_err(Failure),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn keygen(out: PathBuf) -> Result<(), Failure> {
    let id = Identity::generate();
    keyfile::save_new(&id, &out).map_err(|e| Failure(e.to_string()))?;
    println!("{}", id.node_id());
    Ok(())
}

/// The runtime `listen`, `dial` and `probe` run on.
pub fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure(format!("I/O error: cannot start the runtime: {e}")))
}

fn run_async(fut: impl std::future::Future<Output = Result<(), Failure>>) -> Result<(), Failure> {
    let rt = runtime()?;
    let r = rt.block_on(fut);
    // Standard input is read on a blocking thread that may still be waiting
    // for input (after a failure); do not wait for it.
    rt.shutdown_background();
    r
}

/// A positive, finite number of seconds from the flag `flag`.
pub fn seconds(flag: &str, secs: f64) -> Result<Duration, Failure> {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            Failure(format!(
                "{flag} must be a positive number of seconds, at most about 1.8e19"
            ))
        })
}

/// The node ID expected of the peer: `--peer-id` or the one in `ID@ADDR`,
/// which must agree.
pub fn expected_id(
    peer_id: Option<NodeId>,
    dialed: Option<NodeId>,
) -> Result<Option<NodeId>, Failure> {
    match (peer_id, dialed) {
        (Some(a), Some(b)) if a != b => Err(Failure(format!(
            "--peer-id {a} contradicts the ID in the address ({b})"
        ))),
        (a, b) => Ok(a.or(b)),
    }
}

pub fn config(args: &ConnArgs, dialed: Option<NodeId>) -> Result<(Identity, Config), Failure> {
    let mut cfg = args
        .wire
        .config()
        .handshake_timeout(seconds("--handshake-timeout", args.handshake_timeout)?);
    cfg.validate().map_err(|e| match e {
        Error::InvalidConfig(_) => Failure(e.to_string()),
        other => Failure(format!("invalid configuration: {other}")),
    })?;
    if let Some(id) = expected_id(args.peer_id, dialed)? {
        cfg = cfg.expect_peer(id);
    }
    let identity = match &args.key {
        Some(path) => keyfile::load(path).map_err(|e| Failure(e.to_string()))?,
        None => Identity::generate(),
    };
    Ok((identity, cfg))
}

async fn listen(addr: SocketAddr, args: PipeArgs) -> Result<(), Failure> {
    let (identity, cfg) = config(&args.conn, None)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Failure(format!("I/O error: cannot listen on {addr}: {e}")))?;
    let (tcp, _) = listener.accept().await?;
    drop(listener);
    let local = tcp.local_addr().ok();
    pipe(tcp, &identity, &cfg, &args, local).await
}

/// `ID@HOST:PORT` or `HOST:PORT`: the address and the ID, if given.
pub fn split_id(addr: &str) -> Result<(String, Option<NodeId>), Failure> {
    Ok(match addr.split_once('@') {
        Some((id, host)) => (
            host.to_string(),
            Some(id.parse::<NodeId>().map_err(|e| Failure(e.to_string()))?),
        ),
        None => (addr.to_string(), None),
    })
}

async fn dial(addr: String, connect_timeout: f64, args: PipeArgs) -> Result<(), Failure> {
    let (host, id) = split_id(&addr)?;
    let limit = seconds("--connect-timeout", connect_timeout)?;
    let (identity, cfg) = config(&args.conn, id)?;
    let tcp = connect(&host, limit).await?;
    pipe(tcp, &identity, &cfg, &args, None).await
}

/// TCP connection to `host`, within `limit`.
pub async fn connect(host: &str, limit: Duration) -> Result<tokio::net::TcpStream, Failure> {
    match tokio::time::timeout(limit, tokio::net::TcpStream::connect(host)).await {
        Ok(Ok(tcp)) => Ok(tcp),
        Ok(Err(e)) => Err(Failure(format!(
            "I/O error: could not connect to {host}: {e}"
        ))),
        Err(_) => Err(Failure(format!(
            "timeout: could not connect to {host} within {limit:?}"
        ))),
    }
}

/// Where a copy failed: the message says which side and, for the peer, why.
enum CopyError {
    Stdin(std::io::Error),
    Stdout(std::io::Error),
    Send(std::io::Error),
    Recv(std::io::Error),
}

impl From<CopyError> for Failure {
    fn from(e: CopyError) -> Self {
        use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
        Failure(match e {
            CopyError::Stdin(e) => format!("I/O error: reading stdin: {e}"),
            CopyError::Stdout(e) => format!("I/O error: writing stdout: {e}"),
            CopyError::Send(e) => match Error::from_io(e) {
                Error::Io(io) if matches!(io.kind(), BrokenPipe | ConnectionReset | ConnectionAborted) => format!(
                    "connection failed: the peer closed or reset the connection before all of stdin was sent ({io})"
                ),
                Error::Io(io) => format!("connection failed: sending to the peer: {io}"),
                other => describe(&other),
            },
            CopyError::Recv(e) => match Error::from_io(e) {
                Error::Io(io) if matches!(io.kind(), ConnectionReset | ConnectionAborted) => {
                    format!("connection failed: the peer reset the connection ({io})")
                }
                Error::Io(io) => format!("connection failed: receiving from the peer: {io}"),
                other => describe(&other),
            },
        })
    }
}

/// Handshake, announce the peer, exchange NodeInfo if asked (announcing
/// `listening_on` as our address), then copy both ways until both directions
/// are done: all of stdin sent and the write side half-closed (flush, then
/// TCP shutdown of the write half, only at the end of stdin), and the peer's
/// stream ended and written to stdout. Fails as soon as either direction
/// does, so it never returns `Ok` with stdin bytes unsent.
async fn pipe(
    tcp: tokio::net::TcpStream,
    identity: &Identity,
    cfg: &Config,
    args: &PipeArgs,
    listening_on: Option<SocketAddr>,
) -> Result<(), Failure> {
    if !args.nodeinfo && (args.info.network.is_some() || args.info.channels.is_some()) {
        return Err(Failure("--network and --channels need --nodeinfo".into()));
    }
    tcp.set_nodelay(true)?;
    let mut conn = ptokio::handshake(tcp, identity, cfg).await?;
    eprintln!("peer {}", conn.remote_node_id());
    if args.nodeinfo {
        probe::before_pipe(
            &mut conn,
            identity,
            &args.info,
            listening_on,
            cfg.handshake_timeout,
        )
        .await?;
    }
    let (mut r, mut w) = conn.into_split();
    let upload = async move {
        let mut stdin = tokio::io::stdin();
        let mut buf = vec![0u8; STDIN_CHUNK_BYTES];
        loop {
            let n = stdin.read(&mut buf).await.map_err(CopyError::Stdin)?;
            if n == 0 {
                break;
            }
            w.write_all(&buf[..n]).await.map_err(CopyError::Send)?;
            // Hand anything the socket did not take yet to it before waiting
            // on stdin again (interactive input must not sit in a buffer).
            w.flush().await.map_err(CopyError::Send)?;
        }
        w.shutdown().await.map_err(CopyError::Send)
    };
    let download = async move {
        let mut stdout = tokio::io::stdout();
        loop {
            let chunk = r.fill_buf().await.map_err(CopyError::Recv)?;
            if chunk.is_empty() {
                break;
            }
            let n = chunk.len();
            stdout.write_all(chunk).await.map_err(CopyError::Stdout)?;
            r.consume(n);
            stdout.flush().await.map_err(CopyError::Stdout)?;
        }
        stdout.flush().await.map_err(CopyError::Stdout)
    };
    tokio::try_join!(upload, download)?;
    Ok(())
}
