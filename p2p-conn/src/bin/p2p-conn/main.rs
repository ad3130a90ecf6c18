//! `p2p-conn`: a netcat for CometBFT secret connections, plus key tools and a
//! loopback benchmark.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use p2p_conn::io::tokio as ptokio;
use p2p_conn::{keyfile, Config, Error, Identity, NodeId, ProtocolError};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

mod bench;

#[derive(Parser)]
#[command(
    name = "p2p-conn",
    version,
    about = "CometBFT-compatible secret connections: netcat-style client/server, keys, benchmark"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
struct ConnArgs {
    /// node_key.json to authenticate with (default: a fresh ephemeral identity)
    #[arg(long)]
    key: Option<PathBuf>,
    /// Bound on the whole handshake, in seconds
    #[arg(long, default_value_t = 20.0)]
    handshake_timeout: f64,
    /// Require the peer to authenticate as this node ID (40 hex digits)
    #[arg(long)]
    peer_id: Option<NodeId>,
}

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
        conn: ConnArgs,
    },
    /// Connect to ADDR (or ID@ADDR), then copy stdin to it and it to stdout
    /// until both are done
    Dial {
        /// Address to dial, e.g. 127.0.0.1:26656 or <node-id>@127.0.0.1:26656
        addr: String,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Loopback benchmark: handshake, then stream messages and verify them
    Bench(bench::BenchArgs),
}

/// A failure with the one line the CLI prints for it.
struct Failure(String);

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
fn describe(e: &Error) -> String {
    match e {
        Error::Protocol(
            p @ (ProtocolError::InvalidSignature
            | ProtocolError::UnsupportedKeyType(_)
            | ProtocolError::MalformedAuthMessage(_)),
        ) => format!("authentication failed: {p}"),
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
    let r = match cli.cmd {
        Cmd::Keygen { out } => keygen(out),
        Cmd::Id { key } => keyfile::load(&key)
            .map(|id| println!("{}", id.node_id()))
            .map_err(|e| Failure(e.to_string())),
        Cmd::Listen { addr, conn } => run_async(listen(addr, conn)),
        Cmd::Dial { addr, conn } => run_async(dial(addr, conn)),
        Cmd::Bench(args) => bench::run(args).map_err(Failure),
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

fn run_async(fut: impl std::future::Future<Output = Result<(), Failure>>) -> Result<(), Failure> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure(format!("I/O error: cannot start the runtime: {e}")))?;
    let r = rt.block_on(fut);
    // Standard input is read on a blocking thread that may still be waiting
    // for input (after a failure); do not wait for it.
    rt.shutdown_background();
    r
}

fn config(args: &ConnArgs, dialed: Option<NodeId>) -> Result<(Identity, Config), Failure> {
    let identity = match &args.key {
        Some(path) => keyfile::load(path).map_err(|e| Failure(e.to_string()))?,
        None => Identity::generate(),
    };
    let timeout = Duration::try_from_secs_f64(args.handshake_timeout)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            Failure(
                "--handshake-timeout must be a positive number of seconds, at most about 1.8e19"
                    .into(),
            )
        })?;
    let mut cfg = Config::default().handshake_timeout(timeout);
    if let (Some(a), Some(b)) = (args.peer_id, dialed) {
        if a != b {
            return Err(Failure(format!(
                "--peer-id {a} contradicts the ID in the address ({b})"
            )));
        }
    }
    cfg.expected_peer_id = args.peer_id.or(dialed);
    Ok((identity, cfg))
}

async fn listen(addr: SocketAddr, args: ConnArgs) -> Result<(), Failure> {
    let (identity, cfg) = config(&args, None)?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let (tcp, _) = listener.accept().await?;
    drop(listener);
    pipe(tcp, &identity, &cfg).await
}

async fn dial(addr: String, args: ConnArgs) -> Result<(), Failure> {
    let (id, host) = match addr.split_once('@') {
        Some((id, host)) => (
            Some(id.parse::<NodeId>().map_err(|e| Failure(e.to_string()))?),
            host.to_string(),
        ),
        None => (None, addr),
    };
    let (identity, cfg) = config(&args, id)?;
    let tcp = tokio::net::TcpStream::connect(&host).await?;
    pipe(tcp, &identity, &cfg).await
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

/// Handshake, announce the peer, then copy both ways until both directions
/// are done: all of stdin sent and the write side half-closed (flush, then
/// TCP shutdown of the write half, only at the end of stdin), and the peer's
/// stream ended and written to stdout. Fails as soon as either direction
/// does, so it never returns `Ok` with stdin bytes unsent.
async fn pipe(
    tcp: tokio::net::TcpStream,
    identity: &Identity,
    cfg: &Config,
) -> Result<(), Failure> {
    tcp.set_nodelay(true)?;
    let conn = ptokio::handshake(tcp, identity, cfg).await?;
    eprintln!("peer {}", conn.remote_node_id());
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
