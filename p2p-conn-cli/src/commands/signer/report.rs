//! What the signer says: a line per connection and a stats line (text on
//! stderr), or a JSON object per event (`--json`, stdout), each with the
//! wall-clock time and a [`Level`]; outages told while they last. The
//! events worth an alert are `warn` or `error` under a stable `event`
//! name (docs/operator-manual.md, "Logs to alert on").

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use p2p_conn_privval::endpoint::{EndpointStats, KindStats, RequestKind, SignerEvent};
use p2p_conn_privval::guard::{Hrs, Step};
use serde_json::{json, Value};

use super::metrics::{Change, Meters, WINDOW};
use super::recording::{Outcome, SharedMark, Slot};
use super::standby::{Standby, Summary};
use crate::output::plural::count;
use crate::wall_clock;

/// Where the output goes: text on stderr, or JSON lines on stdout. Each
/// carries the wall-clock time: a text line starts with it, a JSON object
/// has it as `time` (beside `t`, the seconds since start).
#[derive(Clone)]
pub(super) struct Out {
    pub(super) json: bool,
    pub(super) started: Instant,
}

/// How much an event matters: `info` (what the signer does), `warn`
/// (worth a look: a lost connection, slow signing) or `error` (worth an
/// alert: a refusal that is not a standby node's, a state file or key
/// failure, no node connected). JSON says `level`; a text line has it
/// after the time (`INFO`, `WARN`, `ERROR`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Level {
    Info,
    Warn,
    Error,
}

impl Level {
    fn json(self) -> &'static str {
        match self {
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        }
    }
}

impl Out {
    /// One `info` JSON line: see [`Out::json_at`].
    pub(super) fn json(&self, event: &str, v: Value) {
        self.json_at(Level::Info, event, v)
    }

    /// One JSON line (with `event`, `level`, `time` and the seconds since
    /// start) on stdout, flushed at once.
    pub(super) fn json_at(&self, level: Level, event: &str, mut v: Value) {
        v["event"] = json!(event);
        v["level"] = json!(level.json());
        v["time"] = json!(wall_clock::now());
        v["t"] = json!(round3(self.started.elapsed().as_secs_f64()));
        let mut out = std::io::stdout().lock();
        // A closed stdout must not stop the signer: the node needs it more
        // than the log does.
        let _ = writeln!(out, "{v}");
        let _ = out.flush();
    }

    /// One `info` text line: see [`Out::text_at`].
    pub(super) fn text(&self, line: &str) {
        self.text_at(Level::Info, line)
    }

    /// One text line on stderr, after the wall-clock time and the level.
    pub(super) fn text_at(&self, level: Level, line: &str) {
        eprintln!("{} {} {line}", wall_clock::now(), level.text());
    }
}

pub(super) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

pub(super) fn ms(d: Duration) -> f64 {
    round3(d.as_secs_f64() * 1e3)
}

/// The step FilePV records for a request of `kind` and type `msg_type`
/// (`None` for requests that are not guarded).
pub(super) fn step(kind: RequestKind, msg_type: i32) -> Option<Step> {
    match kind {
        RequestKind::SignVote => Step::of_vote_type(msg_type),
        RequestKind::SignProposal => Some(Step::Propose),
        _ => None,
    }
}

/// How many failed dials after each connection are told one by one; the
/// rest of an outage is told every `--disconnected-every`.
pub(super) const TOLD_ATTEMPTS: u32 = 3;

/// `d` in whole seconds, as `45s`, `2m05s` or `3h07m`.
pub(super) fn span(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s / 60 % 60),
    }
}

/// The time the signer has been without a node, and when it next says so.
pub(super) struct Outage {
    since: Instant,
    next_tell: Duration,
}

/// Turns the endpoint's events into output, and keeps what that needs
/// across events: the signature just made ([`Slot`]) and the outage.
pub(super) struct Reporter {
    out: Out,
    slot: Slot,
    address: String,
    every: Duration,
    outage: Option<Outage>,
    /// Our libp2p peer ID, on `noise://`.
    noise_self: Option<String>,
    /// The slow-signing watch (every node's) and this node's latencies.
    meters: Meters,
    /// Requests served on the current connection.
    served_here: u64,
    /// This node's standby refusals (told once, then summarised).
    standby: Arc<Standby>,
    /// Connected now (counted in `meters.connected`).
    up: bool,
}

impl Drop for Reporter {
    /// A node no longer served is no longer connected.
    fn drop(&mut self) {
        self.set_up(false);
    }
}

impl Reporter {
    pub(super) fn new(
        out: Out,
        slot: Slot,
        address: String,
        every: Duration,
        noise_self: Option<String>,
        meters: Meters,
        standby: Arc<Standby>,
    ) -> Reporter {
        Reporter {
            meters,
            standby,
            out,
            slot,
            address,
            every,
            noise_self,
            served_here: 0,
            up: false,
            // Disconnected from the start until the first connection.
            outage: Some(Outage {
                since: Instant::now(),
                next_tell: every,
            }),
        }
    }

    /// Count this node in or out of the nodes connected now.
    fn set_up(&mut self, up: bool) {
        if up != self.up {
            self.up = up;
            if up {
                self.meters.connected.fetch_add(1, Ordering::Relaxed);
            } else {
                self.meters.connected.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    fn disconnected(&mut self) {
        self.outage = Some(Outage {
            since: Instant::now(),
            next_tell: self.every,
        });
    }

    /// Report one endpoint event.
    pub(super) fn report(&mut self, e: &SignerEvent) {
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
                    out.json_at(
                        Level::Warn,
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
                    out.text_at(
                        Level::Warn,
                        &format!(
                            "cannot connect to {address} (attempt {attempt}): {error}{hint}; retrying"
                        ),
                    );
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
                self.set_up(true);
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
                let warn = Level::Warn;
                if out.json {
                    out.json_at(
                        warn,
                        "disconnected",
                        json!({ "reason": reason, "hint": hint }),
                    );
                } else if let Some(hint) = hint {
                    out.text_at(
                        warn,
                        &format!("disconnected: {reason} ({hint}); dialing again"),
                    );
                } else {
                    out.text_at(warn, &format!("disconnected: {reason}; dialing again"));
                }
                self.disconnected();
                self.set_up(false);
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
                self.meters.latency.record(*kind, *latency);
                // Told after this request's own line.
                let change = if error.is_none()
                    && matches!(kind, RequestKind::SignVote | RequestKind::SignProposal)
                {
                    self.meters.watch.push(*latency)
                } else {
                    None
                };
                let outcome = self
                    .slot
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                let (signed, failed) = match outcome {
                    Some(Outcome::Signed(s)) => (Some(s), None),
                    Some(Outcome::Failed(kind)) => (None, Some(kind)),
                    None => (None, None),
                };
                let step = step(*kind, *msg_type);
                // Refused because another node's signature passed it:
                // counted and summarised, told only the first time.
                let standby = self.standby.take_flag();
                let error_kind = error.as_deref().map(|e| match failed {
                    Some(kind) => kind,
                    None if signed.is_some() || e.contains("response was not sent") => "not_sent",
                    None if *kind == RequestKind::Other => "not_a_request",
                    None => "other",
                });
                let level = match (error_kind, standby) {
                    (None, _) | (_, Some(_)) => Level::Info,
                    (Some("not_sent"), _) => Level::Warn,
                    _ => Level::Error,
                };
                if out.json {
                    // A signature made but not sent (`error` says so) is
                    // shown too: it is on record in the state file.
                    let signature = signed.as_ref().map(|s| hex::encode(&s.signature));
                    let sign_bytes = signed.as_ref().map(|s| hex::encode_upper(&s.sign_bytes));
                    out.json_at(
                        level,
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
                            "error_kind": error_kind,
                            "standby": standby.is_some(),
                            "signature": signature,
                            "sign_bytes": sign_bytes,
                        }),
                    );
                } else if let Some(first) = standby {
                    if first {
                        out.text(&format!(
                            "{address} is on standby: its {kind} for height {height} was \
                             refused, as another node of this validator signed that step \
                             first; such refusals are counted \
                             (p2p_conn_signer_standby_refusals_total) and summarised once \
                             a minute, not told one by one"
                        ));
                    }
                } else if let Some(error) = error {
                    let what = match step {
                        Some(_) => format!("{kind} height {height} round {round} type {msg_type}"),
                        None => kind.to_string(),
                    };
                    out.text_at(level, &format!("refused or failed: {what}: {error}"));
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
        let threshold = self.meters.watch.threshold();
        let (event, median) = match change {
            Change::Slow(m) => ("slow_signing", m),
            Change::Recovered(m) => ("signing_recovered", m),
        };
        let level = match change {
            Change::Slow(_) => Level::Warn,
            Change::Recovered(_) => Level::Info,
        };
        if self.out.json {
            self.out.json_at(
                level,
                event,
                json!({
                    "median_ms": ms(median),
                    "threshold_ms": ms(threshold),
                    "window": WINDOW,
                }),
            );
        } else if matches!(change, Change::Slow(_)) {
            self.out.text_at(
                level,
                &format!(
                    "the median of the last {} signatures is {:.2} ms, above {:.2} ms \
                     (--slow-sign-ms): check the state file's disk and this host's load",
                    WINDOW,
                    median.as_secs_f64() * 1e3,
                    threshold.as_secs_f64() * 1e3
                ),
            );
        } else {
            self.out.text(&format!(
                "the median of the last {} signatures is back to {:.2} ms, under {:.2} ms",
                WINDOW,
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
        // No node of the validator connected: nothing can be signed.
        let connected = self.meters.connected.load(Ordering::Relaxed);
        let level = if connected == 0 {
            Level::Error
        } else {
            Level::Warn
        };
        if self.out.json {
            self.out.json_at(
                level,
                "still_disconnected",
                json!({
                    "node": self.address,
                    "disconnected_s": round3(lasted.as_secs_f64()),
                    "attempts": attempts,
                    "last_error": last_error,
                    "connected_nodes": connected,
                }),
            );
        } else {
            let none = if connected == 0 {
                "; no node is connected: nothing can be signed"
            } else {
                ""
            };
            self.out.text_at(
                level,
                &format!(
                    "still disconnected from {} for {} ({}; last: {last_error}){none}",
                    self.address,
                    span(lasted),
                    count(attempts, "attempt", "attempts")
                ),
            );
        }
    }
}

pub(super) fn kind_json(k: &KindStats) -> Value {
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
pub(super) fn print_stats(
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

/// Say how many of `node`'s requests were refused as standby since the
/// last summary.
pub(super) fn print_standby(out: &Out, node: &str, s: &Summary) {
    if out.json {
        out.json(
            "standby_summary",
            json!({
                "node": node,
                "refused": s.refused,
                "low_height": s.low,
                "high_height": s.high,
                "refused_total": s.total,
            }),
        );
    } else {
        out.text(&format!(
            "standby: {node}: {} (heights {} to {}), as another node of this validator \
             signed those steps first; {} since start",
            count(s.refused, "request refused", "requests refused"),
            s.low,
            s.high,
            s.total
        ));
    }
}
