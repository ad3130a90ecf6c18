//! `p2p-conn signer`: a reference remote signer. It dials one or more
//! CometBFT nodes' `priv_validator_laddr`, serves its validator key with
//! the library's [`GuardedSigner`] (FilePV's double-sign rules, the
//! high-water mark written to the state file, synced and renamed into
//! place, before a signature leaves) over one [`SignerEndpoint`] per node
//! (dial, retry, reconnect), all through one [`SharedSigner`] (one guard,
//! one state file, one request at a time across the nodes), and
//! reports what it does: a line per connection and a stats line (human
//! mode, stderr), or a JSON object per event (`--json`, stdout). A node
//! refused because another node got that step signed first (a standby)
//! is summarised once a minute, not told per request (`standby.rs`).
//!
//! A software signer for tests and testnets: the validator key is a file
//! on disk and sits in this process's memory. Nothing here is hardened
//! against an attacker on the signer's own machine.
//!
//! It fails closed on an operator's mistakes: a `node_key.json` given as
//! `--key` (the library's [`load_validator_key`] refuses it), no chain
//! named (`--chain-id`, or `--any-chain` on purpose), a state file with a
//! second name (the library's [`GuardedSigner::open`]). Every line and
//! event carries the wall-clock time (RFC 3339, UTC); a long outage is
//! told every `--disconnected-every` seconds; the stats name the last
//! height, round and step signed, and when.
//!
//! It runs until SIGINT or SIGTERM, then prints the final stats and exits
//! 0. Failures before it serves (flags, the key file, the state file, the
//! connection key) exit 1; see docs/operator-manual.md, "Remote signer".

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use p2p_conn::{keyfile, Identity, NodeId};
use p2p_conn_privval::endpoint::{Address, SignerEndpoint, StatsHandle};
use p2p_conn_privval::{load_validator_key, state_file, GuardedSigner, SharedSigner, SignerError};
use serde_json::json;

use self::metrics::{Chain, Latency, Meters, SignWatch, Sources};
use crate::conn;
use crate::error::CliError;
use crate::exporter::Exporter;
use recording::{Mark, Recording, SharedMark, Slot};
use report::{print_standby, print_stats, Out, Reporter};
use standby::{Standby, SUMMARY_EVERY};

mod metrics;
mod recording;
mod report;
mod standby;

#[derive(clap::Args)]
pub struct SignerArgs {
    /// The node's priv_validator_laddr: tcp://HOST:PORT (a secret
    /// connection), unix://PATH (plaintext) or, for CometBFT v0.40 nodes,
    /// noise://NODE_PEER_ID@IP:PORT (libp2p Noise; NODE_PEER_ID is what
    /// `cometbft show-node-id --libp2p` prints, and --identity is
    /// required). tcp://ID@HOST:PORT pins the node's ID, as --node-id does.
    /// Repeat it to serve several nodes (a validator on more than one node,
    /// any mix of transports) from one double-sign guard and one state
    /// file
    #[arg(long, required = true)]
    node: Vec<String>,
    /// The validator key: a CometBFT priv_validator_key.json (Ed25519)
    #[arg(long)]
    key: PathBuf,
    /// The high-water mark, saved before every new signature is sent: a
    /// p2p-conn slot state file (one fdatasync per signature; `p2p-conn
    /// state import` makes one from a priv_validator_state.json) or a
    /// CometBFT priv_validator_state.json (rewritten: a new file, synced,
    /// renamed into place). Must exist unless --create-state
    #[arg(long)]
    state: PathBuf,
    /// Create --state (height 0, nothing signed) if it does not exist: a
    /// priv_validator_state.json if its name ends in .json, else a slot
    /// state file. Only for a key that has never signed on any chain: a
    /// fresh state forgets what was signed before
    #[arg(long)]
    create_state: bool,
    /// Serve only this chain: requests for any other are refused. Required,
    /// unless --any-chain
    #[arg(long, required_unless_present = "any_chain")]
    chain_id: Option<String>,
    /// Serve every chain, with one high-water mark for all (a key that
    /// signs for one chain should name it with --chain-id)
    #[arg(long, conflicts_with = "chain_id")]
    any_chain: bool,
    /// Require the node to authenticate as this node ID (tcp:// only).
    /// CometBFT nodes use a fresh key for priv_validator_laddr at every
    /// start, so this suits nodes that keep theirs (p2p-conn's node side)
    #[arg(long)]
    node_id: Option<NodeId>,
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
    #[arg(long, default_value_t = 10.0)]
    stats_every: f64,
    /// While no node is connected, say so every this many seconds (after
    /// the first three failed dials, which are each told)
    #[arg(long, default_value_t = 30.0)]
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
    #[arg(long, default_value_t = 10.0)]
    slow_sign_ms: f64,
}

/// Open the state file, creating it first with `--create-state`.
fn open_state(args: &SignerArgs, key: Identity) -> Result<GuardedSigner, CliError> {
    let path = &args.state;
    let exists = std::fs::symlink_metadata(path).is_ok();
    if !exists {
        if !args.create_state {
            return Err(CliError::usage(format!(
                "state file {} does not exist. Bring the validator's own \
                 priv_validator_state.json (from the node's data/ folder, with the node \
                 stopped), or, for a key that has never signed, pass --create-state to \
                 start one at height 0",
                path.display()
            )));
        }
        state_file::write_new(path, &Default::default(), format_for_name(path))
            .map_err(SignerError::from)?;
    }
    let signer = GuardedSigner::open(key, path)?;
    Ok(match &args.chain_id {
        Some(id) => signer.with_chain_id(id.clone()),
        // clap makes --any-chain the only way here.
        None => signer,
    })
}

/// The format `--create-state` (and `state import`) makes for `path`: a
/// name ending in `.json` is FilePV's `priv_validator_state.json`, any
/// other p2p-conn's slot file (one sync per signature).
fn format_for_name(path: &std::path::Path) -> state_file::Format {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
    {
        state_file::Format::FilePv
    } else {
        state_file::Format::Slots
    }
}

/// `p2p-conn signer`: see the module docs.
pub fn run(args: SignerArgs) -> Result<(), CliError> {
    let addresses: Vec<Address> = args
        .node
        .iter()
        .map(|n| {
            n.parse()
                .map_err(|e| CliError::usage(format!("--node {n}: {e}")))
        })
        .collect::<Result<_, _>>()?;
    for (i, a) in addresses.iter().enumerate() {
        if addresses[..i].contains(a) {
            return Err(CliError::usage(format!(
                "--node {a} is given twice: one connection per node"
            )));
        }
    }
    let stats_every = if args.stats_every == 0.0 {
        None
    } else {
        Some(conn::seconds("--stats-every", args.stats_every)?)
    };
    let disconnected_every = conn::seconds("--disconnected-every", args.disconnected_every)?;
    let slow_sign = conn::seconds("--slow-sign-ms", args.slow_sign_ms / 1e3)
        .map_err(|_| CliError::usage("--slow-sign-ms must be a positive number of milliseconds"))?;
    if args.node_id.is_some() && addresses.len() > 1 {
        return Err(CliError::usage(
            "--node-id with several --node: pin each node in its own address, tcp://ID@HOST:PORT",
        ));
    }
    let mut node_ids = Vec::new();
    for address in &addresses {
        node_ids.push(match address {
            // `tcp://ID@HOST:PORT` and `--node-id` must agree.
            Address::Tcp { node_id, .. } => conn::expected_id(args.node_id, *node_id)?,
            Address::Unix(_) if args.node_id.is_some() => {
                return Err(CliError::usage(
                    "--node-id needs a tcp:// address: unix:// connections are not authenticated",
                ))
            }
            Address::Noise { .. } if args.node_id.is_some() => {
                return Err(CliError::usage(
                    "--node-id is for tcp://: a noise:// address names the node's peer ID itself",
                ))
            }
            _ => None,
        });
    }
    let all_unix = addresses.iter().all(|a| matches!(a, Address::Unix(_)));
    let any_noise = addresses.iter().any(|a| matches!(a, Address::Noise { .. }));
    if args.identity.is_some() && all_unix {
        return Err(CliError::usage(
            "--identity needs a tcp:// or noise:// address: unix:// connections are plaintext",
        ));
    }
    if args.identity.is_none() && any_noise {
        return Err(CliError::usage(
            "noise:// needs --identity FILE: the node's priv_validator_laddr names the \
             signer's peer ID, so the signer's key must be the same at every start \
             (`p2p-conn keygen --out FILE` makes one, `p2p-conn id --libp2p --key FILE` prints its ID)",
        ));
    }
    // Taken before anything is created or served: a busy port stops the
    // start.
    let metrics =
        match args.metrics {
            Some(addr) => Some(metrics::bind(addr).map_err(|e| {
                CliError::usage(format!("--metrics {addr}: cannot listen there: {e}"))
            })?),
            None => None,
        };
    // Every file is read before `--create-state` may write one.
    let key = load_validator_key(&args.key)?;
    let identity = match &args.identity {
        Some(path) => keyfile::load(path)?,
        None => Identity::generate(),
    };
    if identity.public_key().as_bytes() == key.public_key().as_bytes() {
        return Err(CliError::usage(
            "--identity is the validator key: the connection identity must be a key of its own \
             (`p2p-conn keygen --out FILE`)",
        ));
    }
    let validator = key.public_key();
    let address_hex = hex::encode_upper(validator.node_id().as_bytes());
    let pub_key = base64::engine::general_purpose::STANDARD.encode(validator.as_bytes());
    let signer = open_state(&args, key)?;
    let mark = signer.state().hrs();

    let out = Out {
        json: args.json,
        started: Instant::now(),
    };
    let shown: Vec<String> = addresses.iter().map(ToString::to_string).collect();
    if out.json {
        out.json(
            "start",
            json!({
                "node": shown[0],
                "nodes": shown,
                "validator_address": address_hex,
                "pub_key": pub_key,
                "chain_id": args.chain_id,
                "state_file": args.state.display().to_string(),
                "state": { "height": mark.height, "round": mark.round, "step": mark.step.as_i8() },
                "connection_id": identity.node_id().to_string(),
                "peer_id": identity.public_key().peer_id().to_string(),
            }),
        );
    } else {
        let chain = args.chain_id.as_deref().unwrap_or("any chain: --any-chain");
        out.text(&format!(
            "signer for validator {address_hex} ({chain}); state {}: {mark}; dialing {}",
            args.state.display(),
            shown.join(", ")
        ));
        out.text("a software signer for tests and testnets: the key is in memory and on disk");
    }

    let shared_mark: SharedMark = Arc::new(Mutex::new(Mark::loaded(mark)));
    // One guard and one state file for every node: each endpoint serves
    // through its own clone, one request at a time across all.
    let shared = SharedSigner::new(signer);
    let watch = SignWatch::new(slow_sign);
    let exporter = Exporter::new();
    let chain = Chain::new(args.chain_id.as_deref());
    let connected: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
    let many = addresses.len() > 1;
    let mut nodes = Vec::new();
    let mut standbys = Vec::new();
    for (index, ((address, node_id), shown)) in
        addresses.into_iter().zip(node_ids).zip(&shown).enumerate()
    {
        let slot: Slot = Arc::default();
        let standby: Arc<Standby> = Arc::default();
        standbys.push((shown.clone(), standby.clone()));
        let signer = Recording {
            inner: shared.clone(),
            slot: slot.clone(),
            mark: shared_mark.clone(),
            node: index,
            standby: standby.clone(),
        };
        let noise_self = matches!(address, Address::Noise { .. })
            .then(|| identity.public_key().peer_id().to_string());
        // Dial every 50 ms at first, then up to every 500 ms: well within
        // the 3 s a starting node waits for its signer (docs/operator-manual.md).
        let mut endpoint = SignerEndpoint::new(address, identity.clone())
            .retry(Duration::from_millis(50), Duration::from_millis(500));
        if let Some(id) = node_id {
            endpoint = endpoint.expect_node(id);
        }
        let mut reporter = Reporter::new(
            out.clone(),
            slot,
            shown.clone(),
            disconnected_every,
            noise_self,
            Meters {
                watch: watch.clone(),
                connected: connected.clone(),
                latency: Latency::new(&exporter, &chain, shown),
            },
            standby,
        );
        let endpoint = endpoint.on_event(move |e| reporter.report(e));
        let stats = endpoint.stats();
        let label = many.then(|| shown.clone());
        nodes.push((endpoint, signer, stats, label));
    }
    let views: Vec<(StatsHandle, Option<String>)> = nodes
        .iter()
        .map(|(_, _, stats, label)| (stats.clone(), label.clone()))
        .collect();

    let rt = conn::runtime()?;
    let stopped_by = rt.block_on(async {
        let ticker = stats_every.map(|every| {
            tokio::spawn(tick(out.clone(), views.clone(), shared_mark.clone(), every))
        });
        let summaries = tokio::spawn(summarise(out.clone(), standbys.clone()));
        // Listen for the signals before the first connection: a signal
        // that comes once requests are served must stop it cleanly.
        let mut stop = match Shutdown::listen() {
            Ok(stop) => stop,
            Err(e) => return Err(CliError::Io(e)),
        };
        let mut serving = tokio::task::JoinSet::new();
        if let Some(listener) = metrics {
            let listener = tokio::net::TcpListener::from_std(listener).map_err(CliError::Io)?;
            let named: Vec<_> = standbys
                .iter()
                .zip(&views)
                .map(|((name, standby), (stats, _))| (stats.clone(), name.clone(), standby.clone()))
                .collect();
            let sources = Sources {
                chain,
                nodes: Box::new(move || named.clone()),
                watch: watch.clone(),
                mark: shared_mark.clone(),
            };
            tokio::spawn(metrics::serve(listener, exporter, vec![sources]));
        }
        for (endpoint, mut signer, _, _) in nodes {
            serving.spawn(async move { endpoint.run(&mut signer).await });
        }
        let r = tokio::select! {
            r = serving.join_next() => match r {
                Some(Ok(Ok(never))) => match never {},
                Some(Ok(Err(e))) => Err(CliError::from(e)),
                Some(Err(e)) => Err(CliError::Io(std::io::Error::other(e))),
                None => unreachable!("at least one --node"),
            },
            s = stop.wait() => Ok(s),
        };
        // Wait for the aborted tasks to end: a task running on another
        // worker when aborted finishes its step (a request being served
        // prints its `served` line) before it is dropped, and the final
        // stats must come after every event.
        serving.abort_all();
        while serving.join_next().await.is_some() {}
        if let Some(t) = ticker {
            t.abort();
            let _ = t.await;
        }
        summaries.abort();
        let _ = summaries.await;
        r
    });
    // What the last minute's summaries have not told yet.
    for (node, standby) in &standbys {
        if let Some(s) = standby.take_summary() {
            print_standby(&out, node, &s);
        }
    }
    for (stats, label) in &views {
        print_stats(
            &out,
            &stats.snapshot(),
            &shared_mark,
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

async fn tick(
    out: Out,
    nodes: Vec<(StatsHandle, Option<String>)>,
    mark: SharedMark,
    every: Duration,
) {
    let mut interval = tokio::time::interval(every);
    interval.tick().await; // the first tick is at once
    loop {
        interval.tick().await;
        for (stats, label) in &nodes {
            print_stats(&out, &stats.snapshot(), &mark, false, label.as_deref());
        }
    }
}

/// Every [`SUMMARY_EVERY`], one line per node refused as standby since
/// the last (standby.rs).
async fn summarise(out: Out, nodes: Vec<(String, Arc<Standby>)>) {
    let mut interval = tokio::time::interval(SUMMARY_EVERY);
    interval.tick().await; // the first tick is at once
    loop {
        interval.tick().await;
        for (node, standby) in &nodes {
            if let Some(s) = standby.take_summary() {
                print_standby(&out, node, &s);
            }
        }
    }
}

/// SIGINT and SIGTERM (Ctrl-C elsewhere), listened for from
/// [`Shutdown::listen`] on.
#[cfg(unix)]
struct Shutdown {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Shutdown {
    fn listen() -> std::io::Result<Shutdown> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Shutdown {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    /// The name of the first signal that came.
    async fn wait(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "SIGINT",
            _ = self.term.recv() => "SIGTERM",
        }
    }
}

#[cfg(not(unix))]
struct Shutdown;

#[cfg(not(unix))]
impl Shutdown {
    fn listen() -> std::io::Result<Shutdown> {
        Ok(Shutdown)
    }

    async fn wait(&mut self) -> &'static str {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}
