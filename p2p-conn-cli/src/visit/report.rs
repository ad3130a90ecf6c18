//! What visiting a node yields, whoever visits: the address dialed
//! ([`Target`]), how the visit ended ([`Status`]), what it learned
//! ([`Report`], [`Blocks`]) and what a probe is told once the node's
//! NodeInfo is in ([`Verdict`]). The crawl's scheduler, `check` and `seed`
//! all read them.

use std::time::Duration;

use p2p_conn::nodeinfo::NodeInfo;
use p2p_conn::NodeId;
use p2p_conn_mconn::pex::NetAddress;

/// An address to dial.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `HOST:PORT`.
    pub addr: String,
    /// The ID it was given with (`ID@` on a seed, the ID of a reported
    /// address); `None` for a seed given without one.
    pub id: Option<NodeId>,
    /// 0 for a seed, one more than the reporting node's otherwise.
    pub depth: u32,
}

/// How a visit ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Handshake, NodeInfo, `PexRequest`, `PexAddrs`: all done.
    Ok,
    /// The TCP connection was refused.
    Refused(String),
    /// The TCP connection failed otherwise.
    ConnectFailed(String),
    /// The probe did not finish within the timeout.
    Timeout,
    /// The secret-connection handshake failed.
    HandshakeFailed(String),
    /// The NodeInfo exchange failed, or the node's NodeInfo breaks a rule
    /// (so we refused it).
    NodeInfoRefused(String),
    /// The node is on another network than the crawl's (not asked).
    OtherNetwork,
    /// The node answered under another ID than the address named (not
    /// asked).
    IdMismatch {
        /// The ID the address was given with.
        expected: NodeId,
    },
    /// A node already visited under another address (not asked again).
    Duplicate,
    /// The node does not serve PEX (no channel 0x00; not asked for
    /// addresses, asked for its blocks and snapshots).
    NoPex,
    /// Asked, but no `PexAddrs` came (the connection ended or failed).
    NoAnswer(String),
    /// The node's `PexAddrs` breaks a rule CometBFT stops a peer for (an
    /// address whose IP or port it cannot read): its addresses are
    /// recorded, not followed.
    PexViolation(String),
}

impl Status {
    /// A short name, as the table and the JSON show it.
    pub fn name(&self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Refused(_) => "refused",
            Status::ConnectFailed(_) => "connect failed",
            Status::Timeout => "timeout",
            Status::HandshakeFailed(_) => "handshake failed",
            Status::NodeInfoRefused(_) => "NodeInfo refused",
            Status::OtherNetwork => "other network",
            Status::IdMismatch { .. } => "ID mismatch",
            Status::Duplicate => "duplicate",
            Status::NoPex => "no PEX",
            Status::NoAnswer(_) => "no PEX answer",
            Status::PexViolation(_) => "PEX violation",
        }
    }

    /// The detail behind the name, if any.
    pub fn detail(&self) -> Option<String> {
        match self {
            Status::Refused(s)
            | Status::ConnectFailed(s)
            | Status::HandshakeFailed(s)
            | Status::NodeInfoRefused(s)
            | Status::NoAnswer(s)
            | Status::PexViolation(s) => Some(s.clone()),
            Status::IdMismatch { expected } => Some(format!("expected {expected}")),
            _ => None,
        }
    }

    /// Whether the node answered the handshake and its NodeInfo came.
    pub fn reachable(&self) -> bool {
        matches!(
            self,
            Status::Ok
                | Status::OtherNetwork
                | Status::IdMismatch { .. }
                | Status::Duplicate
                | Status::NoPex
                | Status::NoAnswer(_)
                | Status::PexViolation(_)
        )
    }
}

/// What one probe found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// How it ended.
    pub status: Status,
    /// The authenticated ID, once the handshake is done.
    pub node_id: Option<NodeId>,
    /// The node's NodeInfo, once it came.
    pub info: Option<NodeInfo>,
    /// How long the secret-connection handshake took.
    pub handshake: Option<Duration>,
    /// The addresses of its `PexAddrs` (`Some` once it came), until
    /// [`Scheduler::complete`](super::scheduler::Scheduler::complete) turns them into [`Edge`](super::scheduler::Edge)s and drops them.
    pub addrs: Option<Vec<NetAddress>>,
    /// How many addresses its `PexAddrs` held (`Some` once it came).
    pub answered: Option<usize>,
    /// Messages other than `PexAddrs` received (a `PexRequest` of the node's
    /// own), not answered.
    pub ignored_messages: u64,
    /// The blocks the node holds, from its blocksync status (when it lists
    /// channel `0x40` and answered).
    pub blocks: Option<Blocks>,
    /// The state-sync snapshots it listed, when asked (`crawl` without
    /// `--no-snapshots`, and the node lists channel `0x60`): `Some` once
    /// asked, empty when none came within the wait.
    pub snapshots: Option<Vec<p2p_conn_mconn::statesync::Snapshot>>,
    /// When the probe watched the connection after the answer (`check`
    /// does, for seeds): how soon the node hung up, if it did within the
    /// watch (a node in seed mode hangs up right after answering).
    pub closed_after_answer: Option<Duration>,
}

impl Report {
    /// The handshake's time in milliseconds, to 0.1 ms, as the tables and
    /// the JSON show it.
    pub fn handshake_ms(&self) -> Option<f64> {
        self.handshake
            .map(|d| (d.as_secs_f64() * 1e4).round() / 10.0)
    }

    /// A probe that stopped with `status` before anything was learned.
    pub fn failed(status: Status) -> Report {
        Report {
            status,
            node_id: None,
            info: None,
            handshake: None,
            addrs: None,
            answered: None,
            ignored_messages: 0,
            blocks: None,
            snapshots: None,
            closed_after_answer: None,
        }
    }
}

/// The blocks a node holds: `base` to `height` (its blocksync status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocks {
    /// The newest block.
    pub height: i64,
    /// The oldest block kept.
    pub base: i64,
}

impl Blocks {
    /// Whether the node can serve block `h`. A base of 0 (a store that has
    /// never pruned, as some lines report it) counts as 1.
    pub fn has(&self, h: i64) -> bool {
        self.base.max(1) <= h && h <= self.height
    }
}

/// What [`Scheduler::claim`](super::scheduler::Scheduler::claim) tells a probe that has the node's NodeInfo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Send the one `PexRequest` (and ask for the node's state: its
    /// blocksync status and snapshots, where it lists those channels).
    Ask,
    /// Do not ask for addresses, only for the node's state (its blocksync
    /// status and snapshots, where it lists those channels; hang up at once
    /// if it lists neither), and report this status: a node without PEX.
    AskState(Status),
    /// Hang up without asking, and report this.
    Stop(Status),
}
