//! What the commands that open connections share (and the lab's, which
//! take the same wire flags and dial the same way): the connection flags,
//! the configuration and identity they make, the address forms, the one
//! dial helper ([`connect`]) and how a failed connection is worded.

use std::fmt::Display;
use std::path::PathBuf;
use std::time::Duration;

use p2p_conn::{keyfile, Backend, Config, Error, Identity, NodeId};

use crate::error::CliError;

/// The connection settings `listen`, `dial` and the lab's `bench` share.
#[derive(clap::Args, Clone, Debug)]
pub struct WireArgs {
    /// Frame data size (1024 = CometBFT wire; others need p2p-conn on both ends)
    #[arg(long, default_value_t = p2p_conn::proto::FrameSize::STANDARD.get())]
    pub frame_size: usize,
    /// Most sealed bytes per socket write
    #[arg(long, default_value_t = p2p_conn::DEFAULT_FLUSH_SIZE)]
    pub flush_size: usize,
    /// Receive buffer filled by one read
    #[arg(long, default_value_t = p2p_conn::DEFAULT_READ_BUFFER)]
    pub read_buffer: usize,
    /// AEAD backend: avx512, avx2, ring or rustcrypto (default: the fastest
    /// this CPU runs)
    #[arg(long)]
    pub backend: Option<Backend>,
}

impl WireArgs {
    /// `Config::default()` with these settings (not validated yet).
    pub fn config(&self) -> Config {
        Config::default()
            .frame_size(self.frame_size)
            .flush_size(self.flush_size)
            .read_buffer_size(self.read_buffer)
            .backend(self.backend())
    }

    /// The backend these settings run: `--backend`, else the default.
    pub fn backend(&self) -> Backend {
        self.backend.unwrap_or_default()
    }

    /// Which backend runs and why, for headings: `avx2 (default: this CPU
    /// has AVX2 but not AVX-512 IFMA)`, `ring (--backend)`, or for a
    /// multi-frame backend this CPU cannot run, `avx512 (--backend; not on
    /// this CPU: one frame at a time)`.
    pub fn backend_choice(&self) -> String {
        let b = self.backend();
        match self.backend {
            None => format!("{b} (default: {})", Backend::default_reason()),
            Some(Backend::Avx512 | Backend::Avx2) if !b.accelerated() => {
                format!("{b} (--backend; not on this CPU: one frame at a time)")
            }
            Some(_) => format!("{b} (--backend)"),
        }
    }
}

/// The flags of the commands that talk to a peer (`listen`, `dial`,
/// `probe`): identity, handshake bound, expected peer. The wire settings
/// ([`WireArgs`]) are `listen` and `dial`'s only: a probe talks to
/// CometBFT nodes, on CometBFT's wire.
#[derive(clap::Args, Clone)]
pub(crate) struct ConnArgs {
    /// node_key.json to authenticate with (default: a fresh ephemeral identity)
    #[arg(long)]
    pub(crate) key: Option<PathBuf>,
    /// Bound on the whole handshake, in seconds (and, separately, on the
    /// NodeInfo exchange, as CometBFT does)
    #[arg(long, default_value_t = 20.0)]
    pub(crate) handshake_timeout: f64,
    /// Require the peer to authenticate as this node ID (40 hex digits)
    #[arg(long)]
    pub(crate) peer_id: Option<NodeId>,
}

/// CometBFT's dial timeout: `dial` and `probe`'s `--connect-timeout`.
pub(crate) const DEFAULT_CONNECT_TIMEOUT_SECS: f64 = 3.0;

/// The same bound for the dials without a flag for it (the lab's `profile
/// --connect`, its `resources` holders).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The runtime `listen`, `dial`, `probe` and `seed` run on: two worker
/// threads, or one where the process may use only one CPU (its affinity,
/// or its cgroup's quota), as Go's runtime sizes itself.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cpus.clamp(1, 2))
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
pub(crate) fn expected_id(
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
/// of `args` over `base` (the wire settings), expecting the peer `dialed`
/// named (and `--peer-id`).
pub(crate) fn config(
    args: &ConnArgs,
    base: Config,
    dialed: Option<NodeId>,
) -> Result<(Identity, Config), CliError> {
    let mut cfg = base.handshake_timeout(seconds("--handshake-timeout", args.handshake_timeout)?);
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

/// The scheme CometBFT writes before p2p addresses: config.toml's `laddr`
/// and a NodeInfo's `listen_addr` (`net_info`, `probe`) carry it.
const TCP_SCHEME: &str = "tcp://";

/// The address forms of a node, for messages.
pub(crate) const ADDRESS_FORMS: &str = "ID@HOST:PORT, HOST:PORT, or either after tcp://";

/// `[tcp://][ID@]HOST:PORT`: the address (without `tcp://`) and the ID, if
/// given. Another scheme is an error (`http://` names the RPC port); the
/// address itself is not checked (see [`peer_address`]).
pub fn split_id(addr: &str) -> Result<(String, Option<NodeId>), CliError> {
    let rest = match addr.split_once("://") {
        None => addr,
        Some(_) if addr.starts_with(TCP_SCHEME) => &addr[TCP_SCHEME.len()..],
        Some((scheme, _)) => {
            let rpc = match scheme {
                "http" | "https" | "ws" | "wss" => {
                    " (that is an RPC address; the p2p port is another, 26656 by default)"
                }
                _ => "",
            };
            return Err(CliError::usage(format!(
                "{addr:?}: {scheme}:// is not a p2p address{rpc}: want {ADDRESS_FORMS}"
            )));
        }
    };
    Ok(match rest.split_once('@') {
        Some((id, host)) => (host.to_string(), Some(id.parse::<NodeId>()?)),
        None => (rest.to_string(), None),
    })
}

/// `listen`'s address: `IP:PORT`, or `tcp://IP:PORT` as config.toml's
/// `laddr` writes it.
pub(crate) fn listen_address(addr: &str) -> Result<std::net::SocketAddr, String> {
    addr.strip_prefix(TCP_SCHEME)
        .unwrap_or(addr)
        .parse()
        .map_err(|e| format!("{e}: want IP:PORT or tcp://IP:PORT"))
}

/// Whether `addr` is `HOST:PORT` with a host and a port that can be dialed
/// (1 to 65535).
pub(crate) fn is_host_port(addr: &str) -> bool {
    addr.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty()
            && !host.contains(|c: char| c.is_whitespace() || c == '/' || c == '@')
            && port.parse::<u16>().is_ok_and(|p| p > 0)
    })
}

/// A node's address as `dial` and `probe` take it, [`split_id`]'s forms:
/// `HOST:PORT` (checked, so that a typo is a usage error rather than a
/// failed connect) and the ID, if given. Host names are resolved when
/// dialed.
pub(crate) fn peer_address(addr: &str) -> Result<(String, Option<NodeId>), CliError> {
    let (host, id) = split_id(addr)?;
    if !is_host_port(&host) {
        return Err(CliError::usage(format!(
            "{addr:?} is not a node's address: want {ADDRESS_FORMS} (a port from 1 to 65535)"
        )));
    }
    Ok((host, id))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_addresses_in_every_form() {
        let id: NodeId = "f981ab195d664a8e2c6f7d6358628e05a8b5be8d".parse().unwrap();
        for (form, host, want_id) in [
            ("127.0.0.1:26656", "127.0.0.1:26656", None),
            ("tcp://127.0.0.1:26656", "127.0.0.1:26656", None),
            (
                "f981ab195d664a8e2c6f7d6358628e05a8b5be8d@node.example:1",
                "node.example:1",
                Some(id),
            ),
            (
                "tcp://f981ab195d664a8e2c6f7d6358628e05a8b5be8d@[::1]:26656",
                "[::1]:26656",
                Some(id),
            ),
        ] {
            let (h, i) = peer_address(form).unwrap_or_else(|e| panic!("{form}: {e}"));
            assert_eq!((h.as_str(), i), (host, want_id), "{form}");
        }
        for bad in [
            "",
            "tcp://",
            "host",
            "host:",
            ":1",
            "host:0",
            "host:65536",
            "a b:1",
            "tcp://tcp://h:1",
            "TCP://h:1",
            "http://h:26657",
        ] {
            assert!(
                matches!(peer_address(bad), Err(CliError::Usage(_))),
                "{bad:?}"
            );
        }
    }
}
