//! `p2p-conn signer`: a remote signer for CometBFT validators. It dials
//! one or more CometBFT nodes' `priv_validator_laddr` and serves each
//! chain's validator key with the library's [`GuardedSigner`] (FilePV's
//! double-sign rules, the high-water mark written to the state file,
//! synced, before a signature leaves) over one [`SignerEndpoint`] per node
//! (dial, retry, reconnect), each node through its chain's
//! [`SharedSigner`] (one guard, one state file, one request at a time
//! across that chain's nodes), and reports what it does: a line per
//! connection and a stats line (human mode, stderr), or a JSON object per
//! event (`--json`, stdout). A node refused because another node got that
//! step signed first (a standby) is summarised once a minute, not told per
//! request (`standby.rs`).
//!
//! [`GuardedSigner`]: p2p_conn_privval::GuardedSigner
//! [`SignerEndpoint`]: p2p_conn_privval::endpoint::SignerEndpoint
//! [`SharedSigner`]: p2p_conn_privval::SharedSigner
//!
//! A key file (`--key FILE`) is on disk and in this process's memory, as
//! with CometBFT's FilePV: whoever can read the file, or this process's
//! memory, can sign as the validator. A key in a PKCS#11 token (`--key
//! pkcs11:...`) stays in the token, which signs. `--key` names either, one
//! syntax for the flag and a config file's `key` (`key.rs`). The start
//! refuses a key file, a PIN file or a state file others may read or write
//! (`crate::private_file`).
//!
//! It fails closed on an operator's mistakes: a `node_key.json` given as
//! `--key` (the library's [`p2p_conn_privval::load_validator_key`] refuses it), no chain
//! named (`--chain-id`, or `--any-chain` on purpose), a state file with a
//! second name (the library's
//! [`GuardedSigner::open`](p2p_conn_privval::GuardedSigner::open)). Every line and
//! event carries the wall-clock time (RFC 3339, UTC); a long outage is
//! told every `--disconnected-every` seconds; the stats name the last
//! height, round and step signed, and when.
//!
//! What it serves comes from the flags (one chain) or a config file
//! (`--config`, `config.rs`: several chains, each with its own key, guard
//! and state file); both give one [`plan::Plan`], and the start
//! (`start.rs`) and the node tasks (`fleet.rs`) take only that.
//!
//! It runs until SIGINT or SIGTERM, then prints the final stats and exits
//! 0; SIGHUP reloads the config file's node list (`fleet.rs`). Failures
//! before it serves (flags, the config, the key file, the state file, the
//! connection key) exit 1; see docs/operator-manual.md, "Remote signer".

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::conn;
use crate::error::CliError;
use crate::exporter::Exporter;
use fleet::{Fleet, Views};
use plan::Plan;
use report::{print_standby, print_stats, Out};
use signals::{Signal, Signals};
use standby::SUMMARY_EVERY;

mod config;
mod fleet;
mod key;
mod metrics;
mod plan;
mod recording;
mod report;
mod signals;
mod standby;
mod start;

/// The flags that name chains, nodes and output: a config file names
/// them instead, so `--config` refuses each.
const PLAN_FLAGS: [&str; 13] = [
    "node",
    "key",
    "state",
    "create_state",
    "chain_id",
    "any_chain",
    "node_id",
    "identity",
    "json",
    "stats_every",
    "disconnected_every",
    "metrics",
    "slow_sign_ms",
];

#[derive(clap::Args)]
pub struct SignerArgs {
    /// A config file (TOML): the chains (each its chain ID, key and state
    /// file), the nodes (each its address and chain), the identity, the
    /// output and [metrics]. One process serves every chain in it, each
    /// with its own double-sign guard and state file. SIGHUP reloads its
    /// node list. Replaces every other flag (docs/operator-manual.md, "The
    /// config file")
    #[arg(long, conflicts_with_all = PLAN_FLAGS)]
    config: Option<PathBuf>,
    /// The node's priv_validator_laddr: tcp://HOST:PORT (a secret
    /// connection), unix://PATH (plaintext) or, for CometBFT v0.40 nodes,
    /// noise://NODE_PEER_ID@IP:PORT (libp2p Noise; NODE_PEER_ID is what
    /// `cometbft show-node-id --libp2p` prints, and --identity is
    /// required). tcp://ID@HOST:PORT pins the node's ID, as --node-id does.
    /// Repeat it to serve several nodes (a validator on more than one node,
    /// any mix of transports) from one double-sign guard and one state
    /// file
    #[arg(long, required_unless_present = "config")]
    node: Vec<String>,
    /// The validator key (Ed25519): the path of a CometBFT
    /// priv_validator_key.json (on disk and in this process's memory), or
    /// a key in a PKCS#11 token (an HSM, SoftHSM) as an RFC 7512 URI,
    /// 'pkcs11:token=LABEL;object=LABEL?module-path=/PATH/module.so&pin-source=file:/PATH/pin'
    /// (id=%01 for the object's CKA_ID, slot-id=N for the slot;
    /// &x-pub-key=BASE64 checks the token's public key); pin-value is
    /// refused. The key file, or the PIN file, is refused if the group or
    /// others may read or write it (chmod 600)
    #[arg(long, required_unless_present = "config")]
    key: Option<String>,
    /// The high-water mark, saved before every new signature is sent: a
    /// p2p-conn slot state file (one fdatasync per signature; `p2p-conn
    /// state import` makes one from a priv_validator_state.json) or a
    /// CometBFT priv_validator_state.json (rewritten: a new file, synced,
    /// renamed into place). Must exist unless --create-state. Refused if
    /// the group or others may read or write it (chmod 600), or write its
    /// folder (chmod go-w)
    #[arg(long, required_unless_present = "config")]
    state: Option<PathBuf>,
    /// Create --state (height 0, nothing signed) if it does not exist: a
    /// priv_validator_state.json if its name ends in .json, else a slot
    /// state file. Only for a key that has never signed on any chain: a
    /// fresh state forgets what was signed before
    #[arg(long)]
    create_state: bool,
    /// Serve only this chain: requests for any other are refused. Required,
    /// unless --any-chain
    #[arg(long, required_unless_present_any = ["any_chain", "config"])]
    chain_id: Option<String>,
    /// Serve every chain, with one high-water mark for all (a key that
    /// signs for one chain should name it with --chain-id)
    #[arg(long, conflicts_with = "chain_id")]
    any_chain: bool,
    /// Require the node to authenticate as this node ID (tcp:// only).
    /// CometBFT nodes use a fresh key for priv_validator_laddr at every
    /// start, so this suits nodes that keep theirs (p2p-conn's node side)
    #[arg(long)]
    node_id: Option<p2p_conn::NodeId>,
    /// The signer's own identity, a node_key.json (`p2p-conn keygen`
    /// makes one; never the validator key). Required on noise://: the
    /// node's laddr names its libp2p peer ID (`p2p-conn id --libp2p
    /// --key FILE`). On tcp:// it authenticates the secret connection,
    /// which CometBFT nodes do not check [default on tcp://: a fresh key]
    #[arg(long, visible_alias = "connection-key")]
    identity: Option<PathBuf>,
    /// One JSON object per line on stdout for every event (dial, connect,
    /// disconnect, each request served, stats) instead of text on stderr
    #[arg(long)]
    json: bool,
    /// Print the stats every this many seconds (0: only at exit)
    #[arg(long, default_value_t = plan::DEFAULT_STATS_EVERY)]
    stats_every: f64,
    /// While no node is connected, say so every this many seconds (after
    /// the first three failed dials, which are each told)
    #[arg(long, default_value_t = plan::DEFAULT_DISCONNECTED_EVERY)]
    disconnected_every: f64,
    /// Serve Prometheus metrics at http://ADDR/metrics, each labelled with
    /// the chain: requests, errors and latency per node and request kind,
    /// connects, reconnects and standby refusals per node, the median of
    /// the last 50 signatures, the last signature's time and height, and
    /// the missed heights (no precommit signed between two that have one)
    #[arg(long)]
    metrics: Option<std::net::SocketAddr>,
    /// Warn (and set the p2p_conn_signer_sign_slow metric) when the median
    /// latency of the last 50 signatures, every node's, passes this many
    /// milliseconds, and say when it comes back under
    #[arg(long, default_value_t = plan::DEFAULT_SLOW_SIGN_MS)]
    slow_sign_ms: f64,
}

/// `p2p-conn signer`: see the module docs.
pub fn run(args: SignerArgs) -> Result<(), CliError> {
    let (plan, config) = match &args.config {
        Some(path) => (
            config::load(path).map_err(|e| CliError::usage(e.to_string()))?,
            Some(path.clone()),
        ),
        None => (plan::from_flags(&args)?, None),
    };
    serve(plan, config)
}

/// Serve `plan` until a signal stops it; `config`, the file it came from,
/// is reloaded on SIGHUP.
fn serve(plan: Plan, config: Option<PathBuf>) -> Result<(), CliError> {
    let output = plan.output.clone();
    // Taken before anything is created or served: a busy port stops the
    // start.
    let metrics =
        match output.metrics {
            Some(addr) => Some(metrics::bind(addr).map_err(|e| {
                CliError::usage(format!("--metrics {addr}: cannot listen there: {e}"))
            })?),
            None => None,
        };
    let out = Out {
        json: output.json,
        started: Instant::now(),
    };
    let (chains, identity) = start::open(&plan, &out)?;
    let exporter = Exporter::new();
    let mut fleet = Fleet::new(out.clone(), identity, exporter.clone(), chains, plan);
    let views = fleet.views.clone();

    let rt = conn::runtime()?;
    let stopped_by = rt.block_on(async {
        // Listen for the signals before the first connection: a signal
        // that comes once requests are served must stop it cleanly.
        let mut signals = Signals::listen().map_err(CliError::Io)?;
        fleet.start();
        let ticker = output
            .stats_every
            .map(|every| tokio::spawn(tick(out.clone(), views.clone(), every)));
        let summaries = tokio::spawn(summarise(out.clone(), views.clone()));
        if let Some(listener) = metrics {
            let listener = tokio::net::TcpListener::from_std(listener).map_err(CliError::Io)?;
            tokio::spawn(metrics::serve(listener, exporter, fleet.sources()));
        }
        let r = loop {
            tokio::select! {
                e = fleet.failed() => break Err(e),
                s = signals.next() => match s {
                    Signal::Stop(name) => break Ok(name),
                    Signal::Reload => match &config {
                        Some(path) => fleet.reload(path),
                        None => say(&out, "SIGHUP ignored: no --config to reload the node list from"),
                    },
                },
            }
        };
        fleet.stop().await;
        if let Some(t) = ticker {
            t.abort();
            let _ = t.await;
        }
        summaries.abort();
        let _ = summaries.await;
        r
    });
    let nodes = fleet::snapshot(&views);
    // What the last minute's summaries have not told yet.
    for (view, _) in &nodes {
        if let Some(s) = view.standby.take_summary() {
            print_standby(&out, &view.shown, &s);
        }
    }
    for (view, label) in &nodes {
        print_stats(
            &out,
            &view.stats.snapshot(),
            &view.mark,
            true,
            label.as_deref(),
        );
    }
    match stopped_by {
        Ok(signal) => {
            if !out.json {
                out.text(&format!("stopped by {signal}"));
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// A line, or a `notice` event with `--json`.
fn say(out: &Out, line: &str) {
    if out.json {
        out.json("notice", serde_json::json!({ "message": line }));
    } else {
        out.text(line);
    }
}

async fn tick(out: Out, views: Views, every: Duration) {
    let mut interval = tokio::time::interval(every);
    interval.tick().await; // the first tick is at once
    loop {
        interval.tick().await;
        for (view, label) in fleet::snapshot(&views) {
            print_stats(
                &out,
                &view.stats.snapshot(),
                &view.mark,
                false,
                label.as_deref(),
            );
        }
    }
}

/// Every [`SUMMARY_EVERY`], one line per node refused as standby since
/// the last (standby.rs).
async fn summarise(out: Out, views: Views) {
    let mut interval = tokio::time::interval(SUMMARY_EVERY);
    interval.tick().await; // the first tick is at once
    loop {
        interval.tick().await;
        for (view, _) in fleet::snapshot(&views) {
            if let Some(s) = view.standby.take_summary() {
                print_standby(&out, &view.shown, &s);
            }
        }
    }
}
