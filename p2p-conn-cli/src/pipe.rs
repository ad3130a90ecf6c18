//! `listen` and `dial`: one connection, then stdin to it and it to stdout
//! until both directions are done.

use std::net::SocketAddr;

use p2p_conn::io::tokio as ptokio;
use p2p_conn::{Config, Error, Identity};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use crate::conn::{self, describe, ConnArgs};
use crate::error::CliError;
use crate::probe;

/// `listen` and `dial`: the connection settings, and the optional NodeInfo
/// exchange before piping.
#[derive(clap::Args, Clone)]
pub struct PipeArgs {
    #[command(flatten)]
    conn: ConnArgs,
    /// Exchange NodeInfo as CometBFT peers do before piping (the peer's is
    /// printed on stderr and must be valid and compatible)
    #[arg(long)]
    nodeinfo: bool,
    #[command(flatten)]
    info: probe::NodeInfoArgs,
}

/// Bytes of stdin read (and sent as one message) at a time.
const STDIN_CHUNK_BYTES: usize = 64 * 1024;

/// Run a connection command on its own runtime.
pub fn run_async(
    fut: impl std::future::Future<Output = Result<(), CliError>>,
) -> Result<(), CliError> {
    let rt = conn::runtime()?;
    let r = rt.block_on(fut);
    // Standard input is read on a blocking thread that may still be waiting
    // for input (after a failure); do not wait for it.
    rt.shutdown_background();
    r
}

/// `listen`: bind `addr` (port 0: any free port), print `listening ADDR`
/// (the bound address) on stderr, accept one connection and pipe it.
pub async fn listen(addr: SocketAddr, args: PipeArgs) -> Result<(), CliError> {
    let (identity, cfg) = conn::config(&args.conn, None)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| CliError::Listen { addr, source })?;
    // The bound address (port 0 picks one), so that scripts and tests can
    // dial as soon as this line appears instead of polling the port.
    let bound = listener
        .local_addr()
        .map_err(|source| CliError::Listen { addr, source })?;
    eprintln!("listening {bound}");
    let (tcp, _) = listener.accept().await.map_err(CliError::connection_io)?;
    drop(listener);
    let local = tcp.local_addr().ok();
    pipe(tcp, &identity, &cfg, &args, local).await
}

/// `dial`: connect to `addr` (`ID@ADDR` or `ADDR`) and pipe the connection.
pub async fn dial(addr: String, connect_timeout: f64, args: PipeArgs) -> Result<(), CliError> {
    let (host, id) = conn::split_id(&addr)?;
    let limit = conn::seconds("--connect-timeout", connect_timeout)?;
    let (identity, cfg) = conn::config(&args.conn, id)?;
    let tcp = conn::connect(host.as_str(), limit).await?;
    pipe(tcp, &identity, &cfg, &args, None).await
}

/// Where a copy failed: the message says which side and, for the peer, why.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("I/O error: reading stdin: {0}")]
    Stdin(std::io::Error),
    #[error("I/O error: writing stdout: {0}")]
    Stdout(std::io::Error),
    /// Sending to the peer (the p2p-conn error inside the I/O error, if any).
    #[error("{}", sending(.0))]
    Send(Error),
    /// Receiving from the peer.
    #[error("{}", receiving(.0))]
    Recv(Error),
}

impl CopyError {
    fn send(e: std::io::Error) -> Self {
        CopyError::Send(Error::from_io(e))
    }

    fn recv(e: std::io::Error) -> Self {
        CopyError::Recv(Error::from_io(e))
    }
}

fn sending(e: &Error) -> String {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    match e {
        Error::Io(io) if matches!(io.kind(), BrokenPipe | ConnectionReset | ConnectionAborted) => format!(
            "connection failed: the peer closed or reset the connection before all of stdin was sent ({io})"
        ),
        Error::Io(io) => format!("connection failed: sending to the peer: {io}"),
        other => describe(other),
    }
}

fn receiving(e: &Error) -> String {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionReset};
    match e {
        Error::Io(io) if matches!(io.kind(), ConnectionReset | ConnectionAborted) => {
            format!("connection failed: the peer reset the connection ({io})")
        }
        Error::Io(io) => format!("connection failed: receiving from the peer: {io}"),
        other => describe(other),
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
) -> Result<(), CliError> {
    if !args.nodeinfo && (args.info.network.is_some() || args.info.channels.is_some()) {
        return Err(CliError::usage("--network and --channels need --nodeinfo"));
    }
    tcp.set_nodelay(true).map_err(CliError::connection_io)?;
    let mut conn = ptokio::handshake(tcp, identity, cfg)
        .await
        .map_err(CliError::Connection)?;
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
            w.write_all(&buf[..n]).await.map_err(CopyError::send)?;
            // Hand anything the socket did not take yet to it before waiting
            // on stdin again (interactive input must not sit in a buffer).
            w.flush().await.map_err(CopyError::send)?;
        }
        w.shutdown().await.map_err(CopyError::send)
    };
    let download = async move {
        let mut stdout = tokio::io::stdout();
        loop {
            let chunk = r.fill_buf().await.map_err(CopyError::recv)?;
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
