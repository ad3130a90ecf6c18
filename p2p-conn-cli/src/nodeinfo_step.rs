//! The NodeInfo step every command that meets a peer shares: what we
//! announce (`--network`, `--moniker`, `--channels`), the exchange itself,
//! and the checks `listen --nodeinfo` and `dial --nodeinfo` make before
//! piping. `probe` runs it too and reports what it learned. Below the
//! commands: it names none of them.

use std::net::SocketAddr;
use std::time::Duration;

use p2p_conn::io::tokio as ptokio;
use p2p_conn::nodeinfo::{self, NodeInfo, NodeInfoError, Violation};
use p2p_conn::{Error, Identity};

use crate::error::{describe, CliError, NodeInfoFailure};

/// What we announce in the NodeInfo exchange. `listen` and `dial` take
/// these only with `--nodeinfo` (`probe` always exchanges); each command
/// words their help for itself (`mut_arg`), over the words here.
#[derive(clap::Args, Clone, Debug)]
pub struct NodeInfoArgs {
    /// Network (chain ID) to announce, and to require of the peer. Without
    /// it, read the peer's NodeInfo first and announce its network
    #[arg(long)]
    pub network: Option<String>,
    /// Moniker to announce
    #[arg(long)]
    pub moniker: Option<String>,
    /// Channels to announce: hex bytes (e.g. 4020), or a list `0x40,0x20`.
    /// None by default, so a node completes the exchange and then drops us
    /// ("no common channels"), and no reactor traffic flows
    #[arg(long, value_parser = parse_channels)]
    pub channels: Option<Channels>,
}

/// Channel IDs, each with its MConnection priority.
#[derive(Clone, Debug)]
pub struct Channels(pub Vec<(u8, u32)>);

impl Channels {
    /// The IDs, in order.
    pub fn ids(&self) -> Vec<u8> {
        self.0.iter().map(|c| c.0).collect()
    }
}

/// `4020` (hex bytes, priority 1 each) or `0x40,0x20:5` (IDs in hex with
/// `0x`, or decimal; an optional priority of at least 1). No ID twice.
fn parse_channels(s: &str) -> Result<Channels, String> {
    let list = if s.contains(['x', 'X', ',', ':']) {
        s.split(',')
            .map(|item| {
                let (id, prio) = match item.split_once(':') {
                    Some((id, prio)) => (id, Some(prio)),
                    None => (item, None),
                };
                let id = match id.strip_prefix("0x").or_else(|| id.strip_prefix("0X")) {
                    Some(hex) => u8::from_str_radix(hex, 16),
                    None => id.parse(),
                }
                .map_err(|e| format!("channel {item:?}: the ID must be 0x00..0xff: {e}"))?;
                let prio = match prio {
                    Some(p) => p.parse::<u32>().ok().filter(|&p| p >= 1).ok_or_else(|| {
                        format!("channel {item:?}: the priority must be 1 or more")
                    })?,
                    None => 1,
                };
                Ok((id, prio))
            })
            .collect::<Result<Vec<_>, String>>()?
    } else {
        hex::decode(s)
            .map_err(|e| {
                format!("channels must be hex bytes (e.g. 4020) or a list (0x40,0x20:5): {e}")
            })?
            .into_iter()
            .map(|id| (id, 1))
            .collect()
    };
    let mut seen = [false; 256];
    for &(id, _) in &list {
        if std::mem::replace(&mut seen[usize::from(id)], true) {
            return Err(format!("channel {id:#04x} given twice"));
        }
    }
    Ok(Channels(list))
}

/// The NodeInfo exchange on a fresh connection, bounded by `timeout`:
/// concurrent when we know our network, otherwise the peer's first and then
/// ours on its network and block protocol. We announce `listen_addr` if we
/// accept connections. Returns (ours, theirs), theirs unchecked.
pub async fn exchange<T>(
    conn: &mut ptokio::SecretConnection<T>,
    identity: &Identity,
    args: &NodeInfoArgs,
    listen_addr: Option<SocketAddr>,
    timeout: Duration,
) -> Result<(NodeInfo, NodeInfo), NodeInfoFailure>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut ours = NodeInfo::new(identity.node_id(), args.network.clone().unwrap_or_default());
    if let Some(m) = &args.moniker {
        ours.moniker = m.clone();
    }
    if let Some(addr) = listen_addr {
        ours.listen_addr = addr.to_string();
    }
    if let Some(ch) = &args.channels {
        ours.channels = ch.ids();
    }
    let adopt = args.network.is_none();
    let work = async {
        if adopt {
            let theirs = nodeinfo::tokio::read(conn).await?;
            ours.network = theirs.network.clone();
            ours.protocol_version.block = theirs.protocol_version.block;
            nodeinfo::tokio::write(conn, &ours).await?;
            Ok(theirs)
        } else {
            nodeinfo::tokio::exchange(conn, &ours).await
        }
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(Ok(theirs)) => Ok((ours, theirs)),
        Ok(Err(NodeInfoError::Io(e))) => {
            Err(NodeInfoFailure::Exchange(describe(&Error::from_io(e))))
        }
        Ok(Err(e)) => Err(NodeInfoFailure::Exchange(e.to_string())),
        Err(_) => Err(NodeInfoFailure::Timeout(if adopt {
            format!(
                "timeout: no NodeInfo from the peer within {timeout:?} (if the peer is \
                     p2p-conn too, give one side --network so that it sends first)"
            )
        } else {
            format!("timeout: the NodeInfo exchange did not finish within {timeout:?}")
        })),
    }
}

/// What `listen --nodeinfo` and `dial --nodeinfo` do before piping: the
/// exchange, the peer's NodeInfo on stderr, and a failure if it broke a rule
/// or is incompatible ([`NodeInfoFailure::Network`] when only the network
/// differs, which takes `--network`: without it we announce the peer's).
pub async fn before_pipe<T>(
    conn: &mut ptokio::SecretConnection<T>,
    identity: &Identity,
    args: &NodeInfoArgs,
    listen_addr: Option<SocketAddr>,
    timeout: Duration,
) -> Result<(), CliError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (ours, theirs) = exchange(conn, identity, args, listen_addr, timeout).await?;
    eprintln!(
        "nodeinfo moniker={:?} network={:?} version={:?} channels={}",
        theirs.moniker,
        theirs.network,
        theirs.version,
        hex::encode(&theirs.channels)
    );
    let mut broken = theirs.validate();
    broken.extend(theirs.check_id(conn.remote_node_id()).err());
    broken.extend(ours.compatible_with(&theirs));
    if broken.is_empty() {
        return Ok(());
    }
    let msg = format!("the peer's NodeInfo is not acceptable: {}", join(&broken));
    Err(CliError::NodeInfo(
        if broken.iter().all(|v| v.rule == nodeinfo::Rule::Network) {
            NodeInfoFailure::Network(msg)
        } else {
            NodeInfoFailure::Rejected(msg)
        },
    ))
}

pub fn join(v: &[Violation]) -> String {
    v.iter()
        .map(Violation::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
