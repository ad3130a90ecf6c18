//! What `p2p-conn signer` serves, whether the flags or a config file
//! (`config.rs`) say it: the chains (each its key, state file and chain
//! ID), the nodes (each its address, pin and chain), the connection
//! identity and the output settings. Both front-ends end in one [`Plan`],
//! checked by the rules here, and the signer starts from that alone: the
//! config and the flags give the same behaviour.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use p2p_conn::NodeId;
use p2p_conn_privval::endpoint::Address;

use super::SignerArgs;
use crate::conn;
use crate::error::CliError;

/// Everything the signer serves and how it reports.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Plan {
    pub(super) chains: Vec<ChainPlan>,
    pub(super) nodes: Vec<NodePlan>,
    /// The connection identity's `node_key.json` (`None`: a fresh key).
    pub(super) identity: Option<PathBuf>,
    pub(super) output: Output,
}

/// How the signer reports: the output flags, or the config's top level
/// and `[metrics]`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Output {
    pub(super) json: bool,
    /// `None`: only at exit.
    pub(super) stats_every: Option<Duration>,
    pub(super) disconnected_every: Duration,
    pub(super) metrics: Option<SocketAddr>,
    pub(super) slow_sign: Duration,
}

/// One chain: its own key, guard and state file.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ChainPlan {
    /// `None`: any chain (`--any-chain`; flags only).
    pub(super) id: Option<String>,
    /// The validator key, as `--key` takes it.
    pub(super) key: String,
    pub(super) state: PathBuf,
    pub(super) create_state: bool,
}

/// One node, served by its chain's signer.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct NodePlan {
    pub(super) address: Address,
    /// The node ID it must authenticate as (`tcp://` only).
    pub(super) node_id: Option<NodeId>,
    /// Its chain, an index into [`Plan::chains`].
    pub(super) chain: usize,
}

pub(super) const DEFAULT_STATS_EVERY: f64 = 10.0;
pub(super) const DEFAULT_DISCONNECTED_EVERY: f64 = 30.0;
pub(super) const DEFAULT_SLOW_SIGN_MS: f64 = 10.0;

/// A node's address and the pin it is held to, as one form: the pin
/// written into a `tcp://` address too (`tcp://ID@HOST:PORT`), so that the
/// flags and a config that say the same give the same node. `tcp://ID@`
/// and `node_id` must agree; `unix://` is not authenticated and `noise://`
/// names its peer ID itself. `flag` names where `node_id` came from.
pub(super) fn node_pin(
    address: Address,
    node_id: Option<NodeId>,
    flag: &str,
) -> Result<(Address, Option<NodeId>), String> {
    match address {
        Address::Tcp {
            host_port,
            node_id: in_address,
        } => {
            let pin = match (node_id, in_address) {
                (Some(given), Some(in_address)) if given != in_address => {
                    return Err(format!(
                        "{flag} {given} contradicts the ID in the address ({in_address})"
                    ))
                }
                (given, in_address) => given.or(in_address),
            };
            Ok((
                Address::Tcp {
                    host_port,
                    node_id: pin,
                },
                pin,
            ))
        }
        Address::Unix(_) if node_id.is_some() => Err(format!(
            "{flag} needs a tcp:// address: unix:// connections are not authenticated"
        )),
        Address::Noise { .. } if node_id.is_some() => Err(format!(
            "{flag} is for tcp://: a noise:// address names the node's peer ID itself"
        )),
        other => Ok((other, None)),
    }
}

/// `--identity` needs a node it authenticates to (not all `unix://`).
pub(super) const IDENTITY_UNUSED: &str =
    "needs a tcp:// or noise:// address: unix:// connections are plaintext";

/// `noise://` needs a stable identity.
pub(super) const NOISE_NEEDS_IDENTITY: &str =
    "noise:// needs --identity FILE (in a config: `identity = FILE`): the node's \
     priv_validator_laddr names the signer's peer ID, so the signer's key must be the same at \
     every start (`p2p-conn keygen --out FILE` makes one, `p2p-conn id --libp2p --key FILE` \
     prints its ID)";

/// The index of the first node in `nodes` that `nodes[i]` repeats: the
/// same address, pinned or not.
pub(super) fn repeats(nodes: &[NodePlan], i: usize) -> Option<usize> {
    let place = |a: &Address| match a {
        Address::Tcp { host_port, .. } => Address::tcp(host_port.clone()),
        other => other.clone(),
    };
    let here = place(&nodes[i].address);
    nodes[..i].iter().position(|n| place(&n.address) == here)
}

/// The plan the flags give.
pub(super) fn from_flags(args: &SignerArgs) -> Result<Plan, CliError> {
    let addresses: Vec<Address> = args
        .node
        .iter()
        .map(|n| {
            n.parse()
                .map_err(|e| CliError::usage(format!("--node {n}: {e}")))
        })
        .collect::<Result<_, _>>()?;
    if args.node_id.is_some() && addresses.len() > 1 {
        return Err(CliError::usage(
            "--node-id with several --node: pin each node in its own address, tcp://ID@HOST:PORT",
        ));
    }
    let mut nodes = Vec::new();
    for address in addresses {
        let (address, node_id) =
            node_pin(address, args.node_id, "--node-id").map_err(CliError::usage)?;
        nodes.push(NodePlan {
            address,
            node_id,
            chain: 0,
        });
        if repeats(&nodes, nodes.len() - 1).is_some() {
            return Err(CliError::usage(format!(
                "--node {} is given twice: one connection per node",
                nodes[nodes.len() - 1].address
            )));
        }
    }
    if args.identity.is_some() && nodes.iter().all(|n| matches!(n.address, Address::Unix(_))) {
        return Err(CliError::usage(format!("--identity {IDENTITY_UNUSED}")));
    }
    if args.identity.is_none()
        && nodes
            .iter()
            .any(|n| matches!(n.address, Address::Noise { .. }))
    {
        return Err(CliError::usage(NOISE_NEEDS_IDENTITY));
    }
    // clap requires these without --config, and run() only comes here
    // without it.
    let (Some(key), Some(state)) = (&args.key, &args.state) else {
        return Err(CliError::usage(
            "--key and --state are required without --config",
        ));
    };
    Ok(Plan {
        chains: vec![ChainPlan {
            id: args.chain_id.clone(),
            key: key.clone(),
            state: state.clone(),
            create_state: args.create_state,
        }],
        nodes,
        identity: args.identity.clone(),
        output: output(
            args.json,
            args.stats_every,
            args.disconnected_every,
            args.metrics,
            args.slow_sign_ms,
        )
        .map_err(CliError::usage)?,
    })
}

/// The output settings, checked: the flags' names in the messages (the
/// config's keys have the same names, with `_`).
pub(super) fn output(
    json: bool,
    stats_every: f64,
    disconnected_every: f64,
    metrics: Option<SocketAddr>,
    slow_sign_ms: f64,
) -> Result<Output, String> {
    let stats_every = if stats_every == 0.0 {
        None
    } else {
        Some(seconds("--stats-every", stats_every)?)
    };
    Ok(Output {
        json,
        stats_every,
        disconnected_every: seconds("--disconnected-every", disconnected_every)?,
        metrics,
        slow_sign: conn::seconds("--slow-sign-ms", slow_sign_ms / 1e3)
            .map_err(|_| "--slow-sign-ms must be a positive number of milliseconds".to_string())?,
    })
}

fn seconds(flag: &str, secs: f64) -> Result<Duration, String> {
    conn::seconds(flag, secs).map_err(|e| match e {
        CliError::Usage(m) => m,
        other => other.to_string(),
    })
}
