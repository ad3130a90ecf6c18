//! `p2p-conn probe`: ask a live CometBFT node who it is, over the real p2p
//! handshake (secret connection, then the NodeInfo exchange, the step in
//! [`crate::nodeinfo_step`]), then hang up.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use p2p_conn::io::tokio as ptokio;
use p2p_conn::nodeinfo::{self, NodeInfo, Violation};
use p2p_conn::{Config, Error, NodeId};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use crate::conn::{self, ConnArgs};
use crate::error::{CliError, NodeInfoFailure};
use crate::exit::Stage;
use crate::nodeinfo_step::{exchange, join, NodeInfoArgs};
use crate::release_line::ReleaseLine;

/// The moniker a probe announces, so that node operators see what it was.
const PROBE_MONIKER: &str = "p2p-conn-probe";

#[derive(clap::Args)]
#[command(mut_arg("moniker", |a| a.help(format!(
    "Moniker to announce [default: {PROBE_MONIKER}]"
))))]
pub struct ProbeArgs {
    /// The node's p2p address: ID@HOST:PORT or HOST:PORT (with or without
    /// --peer-id), either also after tcp:// as config.toml and net_info
    /// write it
    addr: String,
    /// Give up connecting (before the handshake) after this many seconds
    #[arg(long, default_value_t = conn::DEFAULT_CONNECT_TIMEOUT_SECS)]
    connect_timeout: f64,
    /// Print one JSON object instead of text
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    conn: ConnArgs,
    #[command(flatten)]
    info: NodeInfoArgs,
}

/// A probe that stopped early: where, why, and the node ID if it got that
/// far.
struct Stop {
    stage: Stage,
    error: String,
    node_id: Option<NodeId>,
}

impl Stop {
    fn at(stage: Stage, error: impl Into<String>) -> Stop {
        Stop {
            stage,
            error: error.into(),
            node_id: None,
        }
    }
}

impl From<CliError> for Stop {
    fn from(e: CliError) -> Stop {
        Stop::at(e.stage(), e.to_string())
    }
}

/// Everything the probe learned.
struct Report {
    address: String,
    node_id: NodeId,
    expected: Option<NodeId>,
    info: NodeInfo,
    /// Rules the node's NodeInfo broke (`Validate` and the ID check).
    violations: Vec<Violation>,
    /// `--network` given and the node is on another one: the network
    /// asked for, and the rule broken.
    network_mismatch: Option<(String, Violation)>,
    handshake: Duration,
    exchange: Duration,
}

pub fn run(args: ProbeArgs) -> ExitCode {
    let json = args.json;
    let target = target(&args);
    // For the report: what was dialed and expected, as far as it parses.
    let (addr, expected) = match &target {
        Ok((host, expected)) => (host.clone(), *expected),
        Err(_) => conn::split_id(&args.addr)
            .map(|(host, id)| (host, id.or(args.conn.peer_id)))
            .unwrap_or_else(|_| (args.addr.clone(), None)),
    };
    let outcome = target.and_then(|(host, expected)| {
        let rt = conn::runtime()?;
        let r = rt.block_on(probe(args, host, expected));
        rt.shutdown_background();
        r
    });
    match outcome {
        Ok(report) => {
            let failure = report.failure().map(CliError::from);
            if json {
                let mut v = report.json();
                if let Some(f) = &failure {
                    v["stage"] = json!(f.stage().name());
                    v["error"] = json!(f.to_string());
                }
                println!("{v}");
            } else {
                print!("{}", report.text());
                if let Some(f) = &failure {
                    eprintln!("error: {f}");
                }
            }
            ExitCode::from(failure.map_or(0, |f| f.stage().code()))
        }
        Err(stop) => {
            if json {
                println!(
                    "{}",
                    json!({
                        "address": addr,
                        "stage": stop.stage.name(),
                        "error": stop.error,
                        "node_id": stop.node_id.map(|id| id.to_string()),
                        "expected_id": expected.map(|id| id.to_string()),
                    })
                );
            } else {
                if let Some(id) = stop.node_id {
                    println!("node id      {id}");
                }
                eprintln!("error: {}", stop.error);
            }
            ExitCode::from(stop.stage.code())
        }
    }
}

/// The address to dial and the ID expected there (`ID@` or `--peer-id`,
/// which must agree).
fn target(args: &ProbeArgs) -> Result<(String, Option<NodeId>), Stop> {
    let (host, dialed) = conn::peer_address(&args.addr)?;
    Ok((host, conn::expected_id(args.conn.peer_id, dialed)?))
}

async fn probe(args: ProbeArgs, host: String, expected: Option<NodeId>) -> Result<Report, Stop> {
    // The ID is checked here, after the handshake, so that a mismatch still
    // reports who answered.
    let (identity, cfg) = conn::config(
        &ConnArgs {
            peer_id: None,
            ..args.conn.clone()
        },
        Config::default(),
        None,
    )?;
    let limit = conn::seconds("--connect-timeout", args.connect_timeout)?;
    let tcp = conn::connect(host.as_str(), limit).await?;
    tcp.set_nodelay(true).map_err(CliError::Socket)?;
    let started = Instant::now();
    let mut conn = ptokio::handshake(tcp, &identity, &cfg)
        .await
        .map_err(CliError::Connection)?;
    let handshake = started.elapsed();
    let node_id = conn.remote_node_id();
    if let Some(want) = expected.filter(|&want| want != node_id) {
        let e = CliError::Connection(Error::PeerIdMismatch {
            expected: want,
            actual: node_id,
        });
        return Err(Stop {
            node_id: Some(node_id),
            ..Stop::from(e)
        });
    }
    let mut info_args = args.info.clone();
    info_args
        .moniker
        .get_or_insert_with(|| PROBE_MONIKER.to_string());
    let started = Instant::now();
    let (ours, info) = exchange(
        &mut conn,
        &identity,
        &info_args,
        None,
        cfg.handshake_timeout,
    )
    .await
    .map_err(|f| Stop {
        node_id: Some(node_id),
        ..Stop::from(CliError::from(f))
    })?;
    let exchange = started.elapsed();
    // Polite: FIN right away (the node drops us anyway when it finds no
    // common channel).
    let _ = tokio::time::timeout(Duration::from_secs(1), conn.shutdown()).await;
    let mut violations = info.validate();
    violations.extend(info.check_id(node_id).err());
    let network_mismatch = args.info.network.as_ref().and_then(|wanted| {
        ours.compatible_with(&info)
            .into_iter()
            .find(|v| v.rule == nodeinfo::Rule::Network)
            .map(|v| (wanted.clone(), v))
    });
    Ok(Report {
        address: host,
        node_id,
        expected,
        info,
        violations,
        network_mismatch,
        handshake,
        exchange,
    })
}

/// CometBFT's reactor channels by ID.
fn channel_name(ch: u8) -> Option<&'static str> {
    Some(match ch {
        0x00 => "pex",
        0x20 => "consensus state",
        0x21 => "consensus data",
        0x22 => "consensus vote",
        0x23 => "consensus vote-set bits",
        0x30 => "evidence",
        0x38 => "mempool",
        0x40 => "blocksync",
        0x60 => "statesync snapshot",
        0x61 => "statesync chunk",
        _ => return None,
    })
}

impl Report {
    fn id_matches(&self) -> Option<bool> {
        self.expected.map(|want| want == self.node_id)
    }

    /// Why the node's answer fails the probe, if it does: a broken rule,
    /// else another network than `--network`.
    fn failure(&self) -> Option<NodeInfoFailure> {
        match (&self.violations[..], &self.network_mismatch) {
            ([], None) => None,
            ([], Some((wanted, _))) => Some(NodeInfoFailure::Network(format!(
                "the node is on network {:?}, not {wanted:?} (--network)",
                self.info.network
            ))),
            (broken, _) => Some(NodeInfoFailure::Rejected(format!(
                "the node's NodeInfo breaks a rule: {}",
                join(broken)
            ))),
        }
    }

    fn json(&self) -> Value {
        let i = &self.info;
        let release = ReleaseLine::of(&i.version);
        json!({
            "address": self.address,
            "node_id": self.node_id.to_string(),
            "expected_id": self.expected.map(|id| id.to_string()),
            "id_matches": self.id_matches(),
            "moniker": i.moniker,
            "network": i.network,
            "version": i.version,
            "release_lines": release.lines,
            "version_note": (!release.stale.is_empty()).then(|| release.stale.join(", ")),
            "protocol_version": {
                "p2p": i.protocol_version.p2p,
                "block": i.protocol_version.block,
                "app": i.protocol_version.app,
            },
            "listen_addr": i.listen_addr,
            "channels": i.channels.iter().map(|c| format!("{c:02x}")).collect::<Vec<_>>(),
            "tx_index": i.tx_index,
            "rpc_address": i.rpc_address,
            "claimed_id": i.id,
            "violations": self.violations.iter().chain(self.network_mismatch.as_ref().map(|m| &m.1)).map(|v| json!({
                "rule": v.rule.name(),
                "detail": v.detail,
            })).collect::<Vec<_>>(),
            "handshake_ms": self.handshake.as_secs_f64() * 1e3,
            "nodeinfo_ms": self.exchange.as_secs_f64() * 1e3,
        })
    }

    fn text(&self) -> String {
        let i = &self.info;
        let id_note = match self.id_matches() {
            Some(true) => "(matches the expected ID)",
            Some(false) => "(NOT the expected ID)",
            None => "(authenticated; no expected ID given)",
        };
        let channels = if i.channels.is_empty() {
            "none".to_string()
        } else {
            i.channels
                .iter()
                .map(|&c| match channel_name(c) {
                    Some(name) => format!("{c:02x} {name}"),
                    None => format!("{c:02x}"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let or_none = |s: &str| {
            if s.is_empty() {
                "(none)".to_string()
            } else {
                s.to_string()
            }
        };
        let validity = if self.violations.is_empty() {
            "valid by CometBFT's rules".to_string()
        } else {
            format!("INVALID: {}", join(&self.violations))
        };
        let v = i.protocol_version;
        format!(
            "node id      {} {id_note}\n\
             moniker      {}\n\
             network      {}\n\
             version      {} ({})\n\
             protocols    p2p {}, block {}, app {}\n\
             listen addr  {}\n\
             channels     {channels}\n\
             tx index     {}\n\
             rpc address  {}\n\
             nodeinfo     {validity}\n\
             address      {} (handshake {:.1} ms, NodeInfo {:.1} ms)\n",
            self.node_id,
            or_none(&i.moniker),
            or_none(&i.network),
            or_none(&i.version),
            ReleaseLine::of(&i.version).text(),
            v.p2p,
            v.block,
            v.app,
            or_none(&i.listen_addr),
            or_none(&i.tx_index),
            or_none(&i.rpc_address),
            self.address,
            self.handshake.as_secs_f64() * 1e3,
            self.exchange.as_secs_f64() * 1e3,
        )
    }
}
