//! `listen` and `dial`: one connection, then stdin to it and it to stdout
//! until both directions are done.

use std::net::SocketAddr;

use p2p_conn::io::tokio as ptokio;
use p2p_conn::{Config, Identity};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncBufRead, AsyncWrite, AsyncWriteExt};

use crate::conn::{self, ConnArgs, WireArgs};
use crate::error::{CliError, CopyError};
use crate::inbound;
use crate::nodeinfo_step;
use stdio::{IoCounts, StdinChunks, StdoutChunks};

mod mconn;
mod stdio;

/// `listen` and `dial`: the connection and wire settings, and the optional
/// NodeInfo exchange before piping (the NodeInfo flags' help says what
/// they need here).
#[derive(clap::Args, Clone)]
#[command(
    mut_arg("network", |a| a.help(
        "Network (chain ID) to announce, and to require of the peer; needs \
         --nodeinfo. Without it, read the peer's NodeInfo first and announce its \
         network (two p2p-conn peers: give it on at least one side, or both wait)"
    )),
    mut_arg("moniker", |a| a.help(
        "Moniker to announce [default: p2p-conn]; needs --nodeinfo"
    )),
    mut_arg("channels", |a| a.help(
        "Channels to announce, and --mconn's: hex bytes (e.g. 4020), or a list \
         `0x40,0x20[:PRIORITY]` (MConnection priorities, default 1); needs --nodeinfo \
         or --mconn. None by default, so a node completes the exchange and then drops \
         us (\"no common channels\"), and no reactor traffic flows"
    )),
)]
pub struct PipeArgs {
    #[command(flatten)]
    conn: ConnArgs,
    #[command(flatten)]
    wire: WireArgs,
    /// Exchange NodeInfo as CometBFT peers do before piping (the peer's is
    /// printed on stderr and must be valid and compatible)
    #[arg(long)]
    nodeinfo: bool,
    #[command(flatten)]
    info: nodeinfo_step::NodeInfoArgs,
    /// After the handshake (and --nodeinfo), speak CometBFT's MConnection
    /// on the --channels given: each read of stdin (a line, typed; up to 64
    /// KiB from a file) goes out as one message on the first channel, the
    /// messages received go to stdout as --output says, pings are answered.
    /// At the end of stdin, what is queued is sent and the connection
    /// closed; the peer's close ends it too
    #[arg(long)]
    mconn: bool,
    /// With --mconn: ping the peer every SECS seconds instead of CometBFT's
    /// 60; the pong timeout is then 3/4 of it, at most CometBFT's 45 s
    /// (answering the peer's pings does not depend on this)
    #[arg(long, value_name = "SECS")]
    ping_interval: Option<f64>,
    /// With --mconn: how received messages go to stdout [default: lines]
    #[arg(long, value_enum, value_name = "FORMAT")]
    output: Option<mconn::Output>,
    /// At the end, print on stderr how many read(2) calls stdin took and
    /// write(2) calls stdout took, with their bytes (`io stdin-reads=N
    /// stdin-bytes=B stdout-writes=N stdout-bytes=B`)
    #[arg(long)]
    count_io: bool,
}

/// Most bytes of stdin one read takes (and sends as one message).
const STDIN_CHUNK_BYTES: usize = 64 * 1024;

/// Most bytes of the peer's stream one stdout write carries: opened frames
/// are gathered up to this while the connection has them ready.
const STDOUT_CHUNK_BYTES: usize = 256 * 1024;

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

/// Most connections `listen` runs handshakes with at once, and from one IP
/// address ([`inbound`]: when full, the oldest one still in its handshake
/// makes room).
const LISTEN_LIMITS: inbound::Limits = inbound::Limits {
    max_open: 64,
    max_per_ip: 4,
};

/// `listen`: bind `addr` (port 0: any free port), print `listening ADDR`
/// (the bound address) on stderr, and pipe the first connection to
/// complete the handshake (as `--peer-id`, if given). Connections are
/// accepted and their handshakes run at once (within [`LISTEN_LIMITS`]),
/// so one that stalls does not hold up a peer; a failed handshake (or
/// another ID) ends `listen` only if no other is in progress.
pub async fn listen(addr: SocketAddr, args: PipeArgs) -> Result<(), CliError> {
    args.check()?;
    let (identity, cfg) = conn::config(&args.conn, args.wire.config(), None)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| CliError::Listen { addr, source })?;
    // The bound address (port 0 picks one), so that scripts and tests can
    // dial as soon as this line appears instead of polling the port.
    let bound = listener
        .local_addr()
        .map_err(|source| CliError::Listen { addr, source })?;
    eprintln!("listening {bound}");
    let gate = inbound::Gate::new(LISTEN_LIMITS);
    let (conn, resetter, local) = inbound::first(&listener, &gate, |tcp, _| {
        let (identity, cfg) = (identity.clone(), cfg.clone());
        async move {
            let local = tcp.local_addr().ok();
            let (conn, resetter) = handshake(tcp, &identity, &cfg).await?;
            // Another ID than --peer-id fails this connection only (reset,
            // as after the handshake), so that it cannot take the place
            // of the peer expected.
            if let Err(e) = cfg.check_peer(&conn.remote_public_key()) {
                resetter.reset();
                return Err(CliError::Connection(e));
            }
            Ok::<_, CliError>((conn, resetter, local))
        }
    })
    .await?;
    drop(listener);
    after_handshake(conn, resetter, &identity, &cfg, &args, local).await
}

/// `dial`: connect to `addr` ([`conn::peer_address`]'s forms) and pipe the
/// connection.
pub async fn dial(addr: String, connect_timeout: f64, args: PipeArgs) -> Result<(), CliError> {
    args.check()?;
    let (host, id) = conn::peer_address(&addr)?;
    let limit = conn::seconds("--connect-timeout", connect_timeout)?;
    let (identity, cfg) = conn::config(&args.conn, args.wire.config(), id)?;
    let tcp = conn::connect(host.as_str(), limit).await?;
    let (conn, resetter) = handshake(tcp, &identity, &cfg).await?;
    after_handshake(conn, resetter, &identity, &cfg, &args, None).await
}

impl PipeArgs {
    /// The flags that only mean something with `--nodeinfo` need it
    /// (`--channels`: or `--mconn`, which needs `--channels`).
    fn check(&self) -> Result<(), CliError> {
        if self.mconn && self.info.channels.is_none() {
            return Err(CliError::usage(
                "--mconn needs --channels (the MConnection's channels)",
            ));
        }
        if self.ping_interval.is_some() && !self.mconn {
            return Err(CliError::usage("--ping-interval needs --mconn"));
        }
        if self.output.is_some() && !self.mconn {
            return Err(CliError::usage("--output needs --mconn"));
        }
        // A bad --ping-interval fails here, before any connection.
        mconn::config(self.ping_interval)?;
        if self.nodeinfo {
            return Ok(());
        }
        if self.info.channels.is_some() && !self.mconn {
            return Err(CliError::usage("--channels needs --nodeinfo or --mconn"));
        }
        let given: Vec<&str> = [
            ("--network", self.info.network.is_some()),
            ("--moniker", self.info.moniker.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, set)| set.then_some(flag))
        .collect();
        match &given[..] {
            [] => Ok(()),
            [one] => Err(CliError::usage(format!("{one} needs --nodeinfo"))),
            many => Err(CliError::usage(format!(
                "{} need --nodeinfo",
                many.join(" and ")
            ))),
        }
    }
}

/// A second handle on a connection's socket (a duplicate descriptor), kept
/// while the connection itself is handed to the library, so that this side
/// can still end the connection with a reset: [`Resetter::reset`] sets
/// `SO_LINGER` to zero, so the last close sends RST instead of FIN. The
/// protocol has no way to say "refused": without the reset, a peer we
/// refuse sees a clean end of our stream and can exit 0.
struct Resetter(socket2::Socket);

impl Resetter {
    fn new(tcp: &tokio::net::TcpStream) -> Result<Resetter, CliError> {
        socket2::SockRef::from(tcp)
            .try_clone()
            .map(Resetter)
            .map_err(CliError::Socket)
    }

    /// Reset the connection once its other handle is closed (now, if it
    /// is). Dropping a `Resetter` without this closes normally.
    fn reset(self) {
        // If this fails the close is a plain FIN, as before.
        let _ = self.0.set_linger(Some(std::time::Duration::ZERO));
    }
}

/// The handshake, without the ID check (which [`after_handshake`] makes,
/// so that it can reset the connection), and the connection's
/// [`Resetter`].
async fn handshake(
    tcp: tokio::net::TcpStream,
    identity: &Identity,
    cfg: &Config,
) -> Result<(ptokio::SecretConnection<tokio::net::TcpStream>, Resetter), CliError> {
    tcp.set_nodelay(true).map_err(CliError::Socket)?;
    let resetter = Resetter::new(&tcp)?;
    let mut open = cfg.clone();
    open.expected_peer_id = None;
    let conn = ptokio::handshake(tcp, identity, &open)
        .await
        .map_err(CliError::Connection)?;
    Ok((conn, resetter))
}

/// After [`handshake`]: check the peer's ID, announce the peer, exchange
/// NodeInfo if asked (announcing `listening_on` as our address), then copy
/// both ways until both directions are done: all of stdin sent and the
/// write side half-closed (flush, then TCP shutdown of the write half, only
/// at the end of stdin), and the peer's stream ended and written to stdout. Fails as
/// soon as either direction does, so it never returns `Ok` with stdin bytes
/// unsent.
///
/// Once the handshake is done, giving up on the connection for any reason
/// (refusing the peer's ID or NodeInfo, a failed copy) resets it, so that
/// the peer never reads our failure as a clean end of stream.
async fn after_handshake(
    conn: ptokio::SecretConnection<tokio::net::TcpStream>,
    resetter: Resetter,
    identity: &Identity,
    cfg: &Config,
    args: &PipeArgs,
    listening_on: Option<SocketAddr>,
) -> Result<(), CliError> {
    // The ID is checked here rather than by the handshake, which would drop
    // (close) the connection itself.
    let r = established(conn, identity, cfg, args, listening_on).await;
    if r.is_err() {
        resetter.reset();
    }
    r
}

/// [`after_handshake`]'s work; `conn` is closed when this returns.
async fn established(
    mut conn: ptokio::SecretConnection<tokio::net::TcpStream>,
    identity: &Identity,
    cfg: &Config,
    args: &PipeArgs,
    listening_on: Option<SocketAddr>,
) -> Result<(), CliError> {
    cfg.check_peer(&conn.remote_public_key())
        .map_err(CliError::Connection)?;
    eprintln!("peer {}", conn.remote_node_id());
    if args.nodeinfo {
        nodeinfo_step::before_pipe(
            &mut conn,
            identity,
            &args.info,
            listening_on,
            cfg.handshake_timeout,
        )
        .await?;
    }
    let counts = Arc::new(IoCounts::default());
    let copied = match &args.info.channels {
        Some(channels) if args.mconn => {
            let config = mconn::config(args.ping_interval)?;
            let output = args.output.unwrap_or_default();
            mconn::pipe(conn, channels, config, output, &counts).await
        }
        _ => {
            let (r, w) = conn.into_split();
            copy_both_ways(r, w, &counts).await
        }
    };
    if args.count_io {
        eprintln!("{counts}");
    }
    copied
}

/// Stdin to `w` and `r` to stdout, until both are done (see [`after_handshake`]).
async fn copy_both_ways<R, W>(mut r: R, mut w: W, counts: &Arc<IoCounts>) -> Result<(), CliError>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut stdin =
        StdinChunks::start(STDIN_CHUNK_BYTES, counts.clone()).map_err(CopyError::Stdin)?;
    let mut stdout = StdoutChunks::start(counts.clone()).map_err(CopyError::Stdout)?;
    let upload = async move {
        while let Some(chunk) = stdin.next().await {
            let chunk = chunk.map_err(CopyError::Stdin)?;
            w.write_all(&chunk).await.map_err(CopyError::send)?;
            // Hand what the socket did not take yet to it before waiting on
            // stdin again (interactive input must not sit in a buffer); with
            // the next chunk already read, go on sealing instead, so a file
            // goes out in `flush_size` writes.
            if stdin.is_empty() {
                w.flush().await.map_err(CopyError::send)?;
            }
            stdin.recycle(chunk);
        }
        w.shutdown().await.map_err(CopyError::send)
    };
    let download = async move {
        loop {
            let mut chunk = stdout.buffer(STDOUT_CHUNK_BYTES);
            std::future::poll_fn(|cx| gather(&mut r, cx, &mut chunk))
                .await
                .map_err(CopyError::recv)?;
            // Empty: the peer's stream ended. `false`: stdout failed, and
            // `finish` says how.
            if chunk.is_empty() || !stdout.write(chunk).await {
                break;
            }
        }
        stdout.finish().await.map_err(CopyError::Stdout)
    };
    tokio::try_join!(upload, download)?;
    Ok(())
}

/// Move the opened plaintext `r` has ready into `out`, up to its capacity:
/// `Pending` only while `out` is empty and nothing is ready; `Ready` with
/// `out` empty at the end of the stream. Stops at the first `Pending` once
/// it has bytes, so output is never held back waiting for more. The
/// connection hands out one frame (at most 1024 bytes on the CometBFT wire)
/// per `fill_buf`; gathering makes one stdout write of many.
fn gather<R: AsyncBufRead + Unpin>(
    r: &mut R,
    cx: &mut Context<'_>,
    out: &mut Vec<u8>,
) -> Poll<std::io::Result<()>> {
    while out.len() < out.capacity() {
        let ready = match Pin::new(&mut *r).poll_fill_buf(cx) {
            Poll::Ready(Ok(ready)) => ready,
            Poll::Ready(Err(e)) if out.is_empty() => return Poll::Ready(Err(e)),
            // Deliver the bytes before the failure first: the reader keeps
            // a failure and reports it again on the next call.
            Poll::Ready(Err(_)) => break,
            Poll::Pending if out.is_empty() => return Poll::Pending,
            Poll::Pending => break,
        };
        if ready.is_empty() {
            break;
        }
        let n = ready.len().min(out.capacity() - out.len());
        out.extend_from_slice(&ready[..n]);
        Pin::new(&mut *r).consume(n);
    }
    Poll::Ready(Ok(()))
}
