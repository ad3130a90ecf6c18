//! What the commands that open connections share: the connection flags,
//! the configuration and identity they make, the address forms, the one
//! dial helper ([`connect`]) and how a failed connection is worded.

use std::fmt::Display;
use std::path::PathBuf;
use std::time::Duration;

use p2p_conn::{keyfile, Backend, Config, Error, Identity, NodeId};

use crate::error::CliError;

/// The connection settings `listen`, `dial` and `bench` share.
#[derive(clap::Args, Clone, Debug)]
pub struct WireArgs {
    /// Frame data size (1024 = CometBFT wire; others need p2p-conn on both ends)
    #[arg(long, default_value_t = p2p_conn::proto::wire::STANDARD_FRAME_SIZE)]
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

/// The flags of the commands that talk to a peer (`listen`, `dial`,
/// `probe`): identity, handshake bound, expected peer, wire settings.
#[derive(clap::Args, Clone)]
pub struct ConnArgs {
    /// node_key.json to authenticate with (default: a fresh ephemeral identity)
    #[arg(long)]
    pub key: Option<PathBuf>,
    /// Bound on the whole handshake, in seconds (and, separately, on the
    /// NodeInfo exchange, as CometBFT does)
    #[arg(long, default_value_t = 20.0)]
    pub handshake_timeout: f64,
    /// Require the peer to authenticate as this node ID (40 hex digits)
    #[arg(long)]
    pub peer_id: Option<NodeId>,
    #[command(flatten)]
    pub wire: WireArgs,
}

/// CometBFT's dial timeout: `dial` and `probe`'s `--connect-timeout`.
pub const DEFAULT_CONNECT_TIMEOUT_SECS: f64 = 3.0;

/// The same bound for the dials without a flag for it (`profile --connect`,
/// the `resources` holders).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The runtime `listen`, `dial` and `probe` run on.
pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(CliError::Runtime)
}

/// A positive, finite number of seconds from the flag `flag`.
pub fn seconds(flag: &str, secs: f64) -> Result<Duration, CliError> {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            CliError::usage(format!(
                "{flag} must be a positive number of seconds, at most about 1.8e19"
            ))
        })
}

/// The node ID expected of the peer: `--peer-id` or the one in `ID@ADDR`,
/// which must agree.
pub fn expected_id(
    peer_id: Option<NodeId>,
    dialed: Option<NodeId>,
) -> Result<Option<NodeId>, CliError> {
    match (peer_id, dialed) {
        (Some(a), Some(b)) if a != b => Err(CliError::usage(format!(
            "--peer-id {a} contradicts the ID in the address ({b})"
        ))),
        (a, b) => Ok(a.or(b)),
    }
}

/// The identity (`--key` or a fresh one) and the validated configuration
/// of `args`, expecting the peer `dialed` named (and `--peer-id`).
pub fn config(args: &ConnArgs, dialed: Option<NodeId>) -> Result<(Identity, Config), CliError> {
    let mut cfg = args
        .wire
        .config()
        .handshake_timeout(seconds("--handshake-timeout", args.handshake_timeout)?);
    cfg.validate().map_err(|e| match e {
        Error::InvalidConfig(_) => CliError::usage(e.to_string()),
        other => CliError::usage(format!("invalid configuration: {other}")),
    })?;
    if let Some(id) = expected_id(args.peer_id, dialed)? {
        cfg = cfg.expect_peer(id);
    }
    let identity = match &args.key {
        Some(path) => keyfile::load(path)?,
        None => Identity::generate(),
    };
    Ok((identity, cfg))
}

/// `ID@HOST:PORT` or `HOST:PORT`: the address and the ID, if given.
pub fn split_id(addr: &str) -> Result<(String, Option<NodeId>), CliError> {
    Ok(match addr.split_once('@') {
        Some((id, host)) => (host.to_string(), Some(id.parse::<NodeId>()?)),
        None => (addr.to_string(), None),
    })
}

/// A TCP connection to `addr` within `limit`: how every command that dials
/// (`dial`, `probe`, `profile --connect`, the `resources` holders) connects.
pub async fn connect<A>(addr: A, limit: Duration) -> Result<tokio::net::TcpStream, CliError>
where
    A: tokio::net::ToSocketAddrs + Display,
{
    let host = addr.to_string();
    match tokio::time::timeout(limit, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(tcp)) => Ok(tcp),
        Ok(Err(source)) => Err(CliError::Connect { host, source }),
        Err(_) => Err(CliError::ConnectTimeout { host, limit }),
    }
}
