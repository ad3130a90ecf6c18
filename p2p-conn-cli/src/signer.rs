//! `p2p-conn signer`: a reference remote signer. It dials one or more
//! CometBFT nodes' `priv_validator_laddr`, serves its validator key with
//! the library's [`GuardedSigner`] (FilePV's double-sign rules, the
//! high-water mark written to the state file, synced and renamed into
//! place, before a signature leaves) over one [`SignerEndpoint`] per node
//! (dial, retry, reconnect), all through one [`SharedSigner`] (one guard,
//! one state file, one request at a time across the nodes), and
//! reports what it does: a line per connection and a stats line (human
//! mode, stderr), or a JSON object per event (`--json`, stdout).
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

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use p2p_conn::{keyfile, Identity, NodeId};
use p2p_conn_privval::endpoint::{
    Address, EndpointStats, KindStats, RequestKind, SignerEndpoint, SignerEvent, StatsHandle,
};
use p2p_conn_privval::guard::{Hrs, Step};
use p2p_conn_privval::{
    convert_state_file, load_validator_key, proposal_sign_bytes, state_file, vote_sign_bytes,
    CryptoPublicKey, GuardedSigner, Proposal, SharedSigner, Signer, SignerError, Vote,
};
use serde_json::{json, Value};

use crate::conn;
use crate::error::CliError;
use crate::signer_metrics::{self, Change, SignWatch};
use crate::wall_clock;

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
    /// Serve Prometheus metrics at http://ADDR/metrics: requests, errors
    /// and latency per node and request kind, connects and reconnects per
    /// node, and the median of the last 50 signatures
    #[arg(long)]
    metrics: Option<std::net::SocketAddr>,
    /// Warn (and set the p2p_conn_signer_sign_slow metric) when the median
    /// latency of the last 50 signatures, every node's, passes this many
    /// milliseconds, and say when it comes back under
    #[arg(long, default_value_t = 10.0)]
    slow_sign_ms: f64,
}

/// What the last successful signature was, for `--json`'s `served` events
/// (the endpoint's events carry the request, not the signature).
#[derive(Default)]
struct LastSigned {
    signature: Vec<u8>,
    sign_bytes: Vec<u8>,
}

type Slot = Arc<Mutex<Option<LastSigned>>>;

/// The high-water mark as this process last moved it: the HRS, and when
/// (`None`: as loaded from the state file, nothing signed since start).
#[derive(Clone, Copy)]
struct Mark {
    hrs: Hrs,
    at: Option<SystemTime>,
}

type SharedMark = Arc<Mutex<Mark>>;

/// The [`GuardedSigner`] with every call passed through, keeping the
/// signature and sign bytes of each vote or proposal it returns in `slot`
/// and the mark (with the time it moved) in `mark`.
struct Recording {
    inner: SharedSigner<GuardedSigner>,
    slot: Slot,
    mark: SharedMark,
}

impl Recording {
    fn keep(&self, signature: &[u8], sign_bytes: Vec<u8>) {
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(LastSigned {
            signature: signature.to_vec(),
            sign_bytes,
        });
        let Ok(hrs) = self.inner.lock().map(|s| s.state().hrs()) else {
            return;
        };
        let mut mark = self.mark.lock().unwrap_or_else(PoisonError::into_inner);
        if mark.hrs != hrs {
            *mark = Mark {
                hrs,
                at: Some(SystemTime::now()),
            };
        }
    }
}

impl Signer for Recording {
    fn public_key(&mut self, chain_id: &str) -> Result<CryptoPublicKey, SignerError> {
        self.inner.public_key(chain_id)
    }

    fn sign_vote(
        &mut self,
        chain_id: &str,
        vote: Vote,
        sign_extension: bool,
    ) -> Result<Vote, SignerError> {
        let signed = self.inner.sign_vote(chain_id, vote, sign_extension)?;
        self.keep(&signed.signature, vote_sign_bytes(chain_id, &signed));
        Ok(signed)
    }

    fn sign_proposal(
        &mut self,
        chain_id: &str,
        proposal: Proposal,
    ) -> Result<Proposal, SignerError> {
        let signed = self.inner.sign_proposal(chain_id, proposal)?;
        self.keep(&signed.signature, proposal_sign_bytes(chain_id, &signed));
        Ok(signed)
    }

    fn sign_bytes(&mut self, bytes: &[u8]) -> Result<Vec<u8>, SignerError> {
        let signature = self.inner.sign_bytes(bytes)?;
        self.keep(&signature, bytes.to_vec());
        Ok(signature)
    }

    fn ping(&mut self) -> Result<(), SignerError> {
        self.inner.ping()
    }
}

/// Where the output goes: text on stderr, or JSON lines on stdout. Each
/// carries the wall-clock time: a text line starts with it, a JSON object
/// has it as `time` (beside `t`, the seconds since start).
#[derive(Clone)]
struct Out {
    json: bool,
    started: Instant,
}

impl Out {
    /// One JSON line (with `event`, `time` and the seconds since start) on
    /// stdout, flushed at once.
    fn json(&self, event: &str, mut v: Value) {
        v["event"] = json!(event);
        v["time"] = json!(wall_clock::now());
        v["t"] = json!(round3(self.started.elapsed().as_secs_f64()));
        let mut out = std::io::stdout().lock();
        // A closed stdout must not stop the signer: the node needs it more
        // than the log does.
        let _ = writeln!(out, "{v}");
        let _ = out.flush();
    }

    /// One text line on stderr, after the wall-clock time.
    fn text(&self, line: &str) {
        eprintln!("{} {line}", wall_clock::now());
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn ms(d: Duration) -> f64 {
    round3(d.as_secs_f64() * 1e3)
}

/// The step FilePV records for a request of `kind` and type `msg_type`
/// (`None` for requests that are not guarded).
fn step(kind: RequestKind, msg_type: i32) -> Option<Step> {
    match kind {
        RequestKind::SignVote => Step::of_vote_type(msg_type),
        RequestKind::SignProposal => Some(Step::Propose),
        _ => None,
    }
}

/// How many failed dials after each connection are told one by one; the
/// rest of an outage is told every `--disconnected-every`.
const TOLD_ATTEMPTS: u32 = 3;

/// `d` in whole seconds, as `45s`, `2m05s` or `3h07m`.
fn span(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s / 60 % 60),
    }
}

/// The time the signer has been without a node, and when it next says so.
struct Outage {
    since: Instant,
    next_tell: Duration,
}

/// Turns the endpoint's events into output, and keeps what that needs
/// across events: the signature just made ([`Slot`]) and the outage.
struct Reporter {
    out: Out,
    slot: Slot,
    address: String,
    every: Duration,
    outage: Option<Outage>,
    /// Our libp2p peer ID, on `noise://`.
    noise_self: Option<String>,
    /// The slow-signing watch, every node's.
    watch: Arc<SignWatch>,
    /// Requests served on the current connection.
    served_here: u64,
}

impl Reporter {
    fn new(
        out: Out,
        slot: Slot,
        address: String,
        every: Duration,
        noise_self: Option<String>,
        watch: Arc<SignWatch>,
    ) -> Reporter {
        Reporter {
            watch,
            out,
            slot,
            address,
            every,
            noise_self,
            served_here: 0,
            // Disconnected from the start until the first connection.
            outage: Some(Outage {
                since: Instant::now(),
                next_tell: every,
            }),
        }
    }

    fn disconnected(&mut self) {
        self.outage = Some(Outage {
            since: Instant::now(),
            next_tell: self.every,
        });
    }

    /// Report one endpoint event.
    fn report(&mut self, e: &SignerEvent) {
        let (out, address) = (&self.out, self.address.as_str());
        match e {
            SignerEvent::Connecting { attempt } => {
                if out.json {
                    out.json("connecting", json!({ "attempt": attempt, "node": address }));
                }
            }
            SignerEvent::ConnectFailed {
                attempt,
                error,
                retry_in,
            } => {
                // The library names an HTTP answer; say which port to use.
                let hint = error.contains("answered in HTTP").then_some(
                    "--node takes the address in the node's priv_validator_laddr, not its RPC",
                );
                if out.json {
                    out.json(
                        "connect_failed",
                        json!({
                            "attempt": attempt,
                            "error": error,
                            "hint": hint,
                            "retry_in_ms": ms(*retry_in),
                        }),
                    );
                } else if *attempt <= TOLD_ATTEMPTS {
                    let hint = hint.map(|h| format!(" ({h})")).unwrap_or_default();
                    out.text(&format!(
                        "cannot connect to {address} (attempt {attempt}): {error}{hint}; retrying"
                    ));
                }
                self.still_disconnected(*attempt, error);
            }
            SignerEvent::Connected { node, peer } => {
                self.outage = None;
                self.served_here = 0;
                let id = node.map(|id| id.to_string());
                let peer = peer.map(|p| p.to_string());
                if out.json {
                    out.json(
                        "connected",
                        json!({ "node": address, "node_id": id, "peer_id": peer }),
                    );
                } else {
                    match (id, peer) {
                        (Some(id), _) => out.text(&format!("connected to {address} (node {id})")),
                        (None, Some(p)) => out.text(&format!("connected to {address} (peer {p})")),
                        (None, None) => out.text(&format!("connected to {address}")),
                    }
                }
            }
            SignerEvent::Disconnected { reason } => {
                // A noise:// node closes a signer it does not allow right
                // after the handshake: say what to check.
                let hint = match &self.noise_self {
                    Some(me) if self.served_here == 0 => Some(format!(
                        "closed before any request: does the node's priv_validator_laddr \
                         name this signer's peer ID, {me}?"
                    )),
                    _ => None,
                };
                if out.json {
                    out.json("disconnected", json!({ "reason": reason, "hint": hint }));
                } else if let Some(hint) = hint {
                    out.text(&format!("disconnected: {reason} ({hint}); dialing again"));
                } else {
                    out.text(&format!("disconnected: {reason}; dialing again"));
                }
                self.disconnected();
            }
            SignerEvent::Served {
                kind,
                height,
                round,
                msg_type,
                latency,
                error,
            } => {
                self.served_here += 1;
                // Told after this request's own line.
                let change = if error.is_none()
                    && matches!(kind, RequestKind::SignVote | RequestKind::SignProposal)
                {
                    self.watch.push(*latency)
                } else {
                    None
                };
                let signed = self
                    .slot
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                let step = step(*kind, *msg_type);
                if out.json {
                    // A signature made but not sent (`error` says so) is
                    // shown too: it is on record in the state file.
                    let signature = signed.as_ref().map(|s| hex::encode(&s.signature));
                    let sign_bytes = signed.as_ref().map(|s| hex::encode_upper(&s.sign_bytes));
                    out.json(
                        "served",
                        json!({
                            "node": self.address,
                            "kind": kind.name(),
                            "height": height,
                            "round": round,
                            "type": msg_type,
                            "step": step.map(|s| s.as_i8()),
                            "latency_ms": ms(*latency),
                            "error": error,
                            "signature": signature,
                            "sign_bytes": sign_bytes,
                        }),
                    );
                } else if let Some(error) = error {
                    let what = match step {
                        Some(_) => format!("{kind} height {height} round {round} type {msg_type}"),
                        None => kind.to_string(),
                    };
                    out.text(&format!("refused or failed: {what}: {error}"));
                }
                if let Some(change) = change {
                    self.tell_slow(change);
                }
            }
            other => {
                if out.json {
                    out.json("other", json!({ "detail": format!("{other:?}") }));
                }
            }
        }
    }

    /// Say that the median of the last signatures crossed the threshold.
    fn tell_slow(&self, change: Change) {
        let threshold = self.watch.threshold();
        let (event, median) = match change {
            Change::Slow(m) => ("slow_signing", m),
            Change::Recovered(m) => ("signing_recovered", m),
        };
        if self.out.json {
            self.out.json(
                event,
                json!({
                    "median_ms": ms(median),
                    "threshold_ms": ms(threshold),
                    "window": signer_metrics::WINDOW,
                }),
            );
        } else if matches!(change, Change::Slow(_)) {
            self.out.text(&format!(
                "warning: the median of the last {} signatures is {:.2} ms, above {:.2} ms \
                 (--slow-sign-ms): check the state file's disk and this host's load",
                signer_metrics::WINDOW,
                median.as_secs_f64() * 1e3,
                threshold.as_secs_f64() * 1e3
            ));
        } else {
            self.out.text(&format!(
                "the median of the last {} signatures is back to {:.2} ms, under {:.2} ms",
                signer_metrics::WINDOW,
                median.as_secs_f64() * 1e3,
                threshold.as_secs_f64() * 1e3
            ));
        }
    }

    /// After a failed dial: say how long the outage has lasted, once per
    /// `every` of it.
    fn still_disconnected(&mut self, attempts: u32, last_error: &str) {
        let Some(outage) = &mut self.outage else {
            return;
        };
        let lasted = outage.since.elapsed();
        if lasted < outage.next_tell {
            return;
        }
        while outage.next_tell <= lasted {
            outage.next_tell += self.every;
        }
        if self.out.json {
            self.out.json(
                "still_disconnected",
                json!({
                    "node": self.address,
                    "disconnected_s": round3(lasted.as_secs_f64()),
                    "attempts": attempts,
                    "last_error": last_error,
                }),
            );
        } else {
            self.out.text(&format!(
                "still disconnected from {} for {} ({attempts} attempts; last: {last_error})",
                self.address,
                span(lasted)
            ));
        }
    }
}

fn kind_json(k: &KindStats) -> Value {
    json!({
        "kind": k.kind.name(),
        "count": k.count,
        "errors": k.errors,
        "p50_ms": k.p50.map(ms),
        "p99_ms": k.p99.map(ms),
        "max_ms": k.max.map(ms),
    })
}

/// Print the stats and the mark: one line, or one JSON object (`final`
/// at exit); with several nodes, one per node, named by `node`.
fn print_stats(
    out: &Out,
    stats: &EndpointStats,
    mark: &SharedMark,
    last: bool,
    node: Option<&str>,
) {
    let reconnects = stats.connects.saturating_sub(1);
    let mark = *mark.lock().unwrap_or_else(PoisonError::into_inner);
    if out.json {
        let hrs = |h: Hrs| json!({ "height": h.height, "round": h.round, "step": h.step.as_i8() });
        let last_signed = mark.at.map(|at| {
            let mut v = hrs(mark.hrs);
            v["time"] = json!(wall_clock::rfc3339_ms(at));
            v
        });
        out.json(
            "stats",
            json!({
                "final": last,
                "node": node,
                "connects": stats.connects,
                "disconnects": stats.disconnects,
                "reconnects": reconnects,
                "requests": stats.requests(),
                "kinds": stats.kinds.iter().filter(|k| k.count > 0).map(kind_json).collect::<Vec<_>>(),
                "mark": hrs(mark.hrs),
                "last_signed": last_signed,
            }),
        );
    } else {
        let label = if last { "final stats" } else { "stats" };
        let signed = match mark.at {
            Some(at) => format!("last signed {} at {}", mark.hrs, wall_clock::rfc3339_ms(at)),
            None => format!(
                "nothing signed since start; mark {} (from the state file)",
                mark.hrs
            ),
        };
        let node = node.map(|n| format!(" for {n}")).unwrap_or_default();
        out.text(&format!(
            "{label}{node}: {stats}; reconnects {reconnects}; {signed}"
        ));
    }
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

/// `p2p-conn state`: move a high-water mark between FilePV's
/// `priv_validator_state.json` and p2p-conn's slot file, or show one.
#[derive(clap::Subcommand)]
pub enum StateCmd {
    /// Copy a state file into a new p2p-conn slot state file
    ///
    /// From a FilePV priv_validator_state.json (or any state file) to a new
    /// p2p-conn slot state file (one fdatasync per signature instead of
    /// FilePV's new file, sync and rename). Stop the node (or signer) that
    /// uses FROM first, and never start one on FROM again
    Import {
        /// The state file to copy (a running p2p-conn signer on it is
        /// refused: its lock is taken)
        #[arg(long)]
        from: PathBuf,
        /// The slot state file to make (must not exist)
        #[arg(long)]
        to: PathBuf,
    },
    /// Copy a state file into a new FilePV priv_validator_state.json
    ///
    /// From a slot file or JSON state file, for FilePV, tmkms or another
    /// signer.
    /// Stop the signer on FROM first
    Export {
        /// The state file to copy
        #[arg(long)]
        from: PathBuf,
        /// The priv_validator_state.json to make (must not exist)
        #[arg(long)]
        to: PathBuf,
    },
    /// Print a state file's format and mark
    Show {
        /// The state file
        file: PathBuf,
    },
}

/// `p2p-conn state ...`.
pub fn run_state(cmd: StateCmd) -> Result<(), CliError> {
    let (from, to, format) = match cmd {
        StateCmd::Show { file } => {
            let format = state_file::format_of(&file).map_err(SignerError::from)?;
            let state = state_file::load(&file).map_err(SignerError::from)?;
            let name = match format {
                state_file::Format::Slots => "p2p-conn slot state file",
                _ => "FilePV priv_validator_state.json",
            };
            println!("{}: {name}; mark {}", file.display(), state.hrs());
            return Ok(());
        }
        StateCmd::Import { from, to } => (from, to, state_file::Format::Slots),
        StateCmd::Export { from, to } => (from, to, state_file::Format::FilePv),
    };
    let state = convert_state_file(&from, &to, format)?;
    println!(
        "{} -> {}: mark {}",
        from.display(),
        to.display(),
        state.hrs()
    );
    Ok(())
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
            Some(addr) => Some(signer_metrics::bind(addr).map_err(|e| {
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

    let shared_mark: SharedMark = Arc::new(Mutex::new(Mark {
        hrs: mark,
        at: None,
    }));
    // One guard and one state file for every node: each endpoint serves
    // through its own clone, one request at a time across all.
    let shared = SharedSigner::new(signer);
    let watch = SignWatch::new(slow_sign);
    let many = addresses.len() > 1;
    let mut nodes = Vec::new();
    for ((address, node_id), shown) in addresses.into_iter().zip(node_ids).zip(&shown) {
        let slot: Slot = Arc::default();
        let signer = Recording {
            inner: shared.clone(),
            slot: slot.clone(),
            mark: shared_mark.clone(),
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
            watch.clone(),
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
        // Listen for the signals before the first connection: a signal
        // that comes once requests are served must stop it cleanly.
        let mut stop = match Shutdown::listen() {
            Ok(stop) => stop,
            Err(e) => return Err(CliError::Io(e)),
        };
        let mut serving = tokio::task::JoinSet::new();
        if let Some(listener) = metrics {
            let listener = tokio::net::TcpListener::from_std(listener).map_err(CliError::Io)?;
            let named = shown
                .iter()
                .zip(&views)
                .map(|(name, (stats, _))| (stats.clone(), name.clone()))
                .collect();
            tokio::spawn(signer_metrics::serve(listener, named, watch.clone()));
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
        r
    });
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
