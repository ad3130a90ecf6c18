//! The crawl's scheduler: which address to dial next, and what a visit
//! taught us. Pure code (no sockets, no clock of its own: every call that
//! needs the time takes `now`), driven by [`super::run`] over real probes
//! and by the tests below over a fake prober.
//!
//! # Rules
//! - Breadth first: the seeds in the order given, then the addresses each
//!   node reported, in the order the answers came, a FIFO queue. Every
//!   target remembers its depth (seeds: 0).
//! - At most `concurrency` probes at once, at most `max_nodes` dials in
//!   all, and each probe ends at `now + timeout` (the driver aborts it when
//!   [`Scheduler::handle_timeout`] says so).
//! - One visit per node: a node ID is asked for addresses at most once
//!   ([`Scheduler::claim`] refuses a second probe that reaches a node
//!   already claimed, before it sends anything), and an address is dialed
//!   once per ID it is reported with, up to [`MAX_IDS_PER_ADDR`] IDs.
//!   Nothing is settled by a report alone, only by a probe that proves
//!   an ID: a lying answer that puts a node's ID at a wrong address, or a
//!   made-up ID at a node's address, does not stop a later true report of
//!   that node from being followed, and one answer counts once per ID and
//!   once per address. An address that answers under another ID than it
//!   was given with is dialed again under the ID that answered (once per
//!   address, not bounded by `MAX_IDS_PER_ADDR`). That is stricter than
//!   CometBFT's PEX rules, which live in the library, `p2p_conn_mconn::pex`,
//!   with where CometBFT states each: the one request goes through
//!   [`Asks`] (one request out per peer, the request interval), and the
//!   node's answer is taken only if `Asks` says it answers that request
//!   and holds no address CometBFT would stop the node for
//!   ([`Status::PexViolation`] otherwise: recorded, not followed). We never
//!   send addresses (CometBFT stops a peer that sends them unasked).
//! - One network: `--network`, or else the network of the first node that
//!   answers. Until that is known only one probe runs, so "first" is the
//!   first seed in command-line order that answers, not a race. A node of
//!   another network is reported with its network and not asked for
//!   addresses, so its neighbours are not followed.
//! - Only the seeds and what nodes reported are dialed; a reported address
//!   is followed only when the library's [`NetAddress::validate`] takes it
//!   under [`Options::addr_policy`]: CometBFT's checks (an ID of 40 hex
//!   digits, an IP address that is not unspecified, broadcast or
//!   documentation, a port from 1 to 65535) and, by default, a publicly
//!   routable IP, as a CometBFT node's address book wants it
//!   (`addr_book_strict`); `--allow-unroutable` also follows private and
//!   loopback addresses (local test networks). Seeds are dialed whatever
//!   their address, as CometBFT dials its seeds.
//! - An address reached under another ID than the one it was given with is
//!   reported (`IdMismatch`, with the ID that answered) and not asked on
//!   that connection; it is queued again under the ID that answered.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use p2p_conn::nodeinfo::NodeInfo;
use p2p_conn::NodeId;
use p2p_conn_mconn::pex::{AddrPolicy, AddrsVerdict, AskVerdict, Asks, NetAddress};

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

/// What the scheduler needs to know.
#[derive(Clone, Debug)]
pub struct Options {
    /// Most probes at once (at least 1).
    pub concurrency: usize,
    /// Bound on one probe, connect to hang-up.
    pub timeout: Duration,
    /// Most dials in the whole crawl.
    pub max_nodes: usize,
    /// The network to follow; `None`: the first answering node's.
    pub network: Option<String>,
    /// Which reported addresses to follow: routable ones only
    /// ([`AddrPolicy::Strict`], CometBFT's default) or also private and
    /// loopback ones.
    pub addr_policy: AddrPolicy,
}

/// Most IDs one address is queued under from reports (each node's answer
/// counts once per address). Bounds how often a lying answer can make the
/// crawl dial someone else's address; a dial that proves the ID at an
/// address is not bounded by it.
pub const MAX_IDS_PER_ADDR: usize = 3;

/// The index of a visit in [`Crawl::visits`].
pub type ProbeId = usize;

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
    /// The node does not serve PEX (no channel 0x00; not asked).
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
    /// [`Scheduler::complete`] turns them into [`Edge`]s and drops them.
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

/// What [`Scheduler::claim`] tells a probe that has the node's NodeInfo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Send the one `PexRequest`.
    Ask,
    /// Hang up without asking, and report this.
    Stop(Status),
}

/// A reported address and what became of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edge {
    /// The visit that reported it.
    pub from: ProbeId,
    /// The address as reported.
    pub addr: NetAddress,
    /// Why it was not followed, if it was refused (the library's
    /// [`AddrError`](p2p_conn_mconn::pex::AddrError), or the message's
    /// violation).
    pub invalid: Option<String>,
}

/// One dial and its outcome.
#[derive(Clone, Debug)]
pub struct Visit {
    /// What was dialed.
    pub target: Target,
    /// What the probe found; `None` while it runs.
    pub report: Option<Report>,
}

/// The whole crawl: every dial, every reported address, what was left.
#[derive(Clone, Debug)]
pub struct Crawl {
    /// The network followed (`None`: no node answered and none was given).
    pub network: Option<String>,
    /// In dial order.
    pub visits: Vec<Visit>,
    /// Reported addresses, as the driver kept them (the scheduler keeps
    /// none: [`Scheduler::complete`] hands each visit's to its caller).
    pub edges: Vec<Edge>,
    /// How many addresses were reported in all.
    pub reported: usize,
    /// Targets queued but never dialed (`max_nodes` reached).
    pub left: Vec<Target>,
    /// Reported targets not queued because the queue already held as many
    /// as `max_nodes` leaves room to dial.
    pub not_queued: usize,
}

/// The scheduler; see the module docs.
#[derive(Debug)]
pub struct Scheduler {
    opts: Options,
    network: Option<String>,
    queue: VecDeque<Target>,
    /// (address, ID) pairs queued or dialed.
    known: HashSet<(String, Option<NodeId>)>,
    /// How many IDs each address was queued or dialed under.
    ids_of_addr: HashMap<String, usize>,
    /// Addresses queued again under the ID that answered there.
    retried: HashSet<String>,
    /// IDs claimed by a probe (asked, or about to be).
    claimed: HashSet<NodeId>,
    /// Our requests, by CometBFT's rules (one entry per probe asking).
    asks: Asks,
    /// The probes that asked, and whom.
    asked: HashMap<ProbeId, NodeId>,
    /// Running probes and their deadlines.
    running: HashMap<ProbeId, Instant>,
    visits: Vec<Visit>,
    reported: usize,
    not_queued: usize,
}

/// The key an address is known by: the socket address when it parses
/// (so `127.0.0.1:1` and `127.0.0.01:1`-style spellings of one address do
/// not count twice), the text otherwise.
fn addr_key(addr: &str) -> String {
    addr.parse::<SocketAddr>()
        .map_or_else(|_| addr.to_string(), |a| a.to_string())
}

impl Scheduler {
    /// A crawl from `seeds` (duplicates dropped).
    pub fn new(seeds: Vec<Target>, opts: Options) -> Scheduler {
        let mut s = Scheduler {
            network: opts.network.clone(),
            opts,
            queue: VecDeque::new(),
            known: HashSet::new(),
            ids_of_addr: HashMap::new(),
            retried: HashSet::new(),
            claimed: HashSet::new(),
            asks: Asks::new(),
            asked: HashMap::new(),
            running: HashMap::new(),
            visits: Vec::new(),
            reported: 0,
            not_queued: 0,
        };
        for t in seeds {
            s.enqueue(t, false);
        }
        s
    }

    /// Queues `t` unless its node is claimed already, the pair was queued
    /// before, the address is queued without an ID (or `t` has none and
    /// the address is queued with one), or (unless `proven`: the ID
    /// answered at that address) the address has [`MAX_IDS_PER_ADDR`] IDs
    /// already.
    fn enqueue(&mut self, t: Target, proven: bool) -> bool {
        if t.id.is_some_and(|id| self.claimed.contains(&id)) {
            return false;
        }
        // No more queued than can still be dialed: what a crawl keeps is
        // bounded by `max_nodes`, whatever the answers hold.
        if self.visits.len() + self.queue.len() >= self.opts.max_nodes {
            self.not_queued += 1;
            return false;
        }
        let addr = addr_key(&t.addr);
        let ids = self.ids_of_addr.get(&addr).copied().unwrap_or(0);
        if !proven && ids >= MAX_IDS_PER_ADDR {
            return false;
        }
        // A dial without an ID covers every ID at that address (it proves
        // whichever answers); so it is not queued beside one with an ID.
        let bare = (addr.clone(), None);
        if (t.id.is_none() && ids > 0) || (t.id.is_some() && self.known.contains(&bare)) {
            return false;
        }
        if !self.known.insert((addr.clone(), t.id)) {
            return false;
        }
        self.ids_of_addr.insert(addr, ids + 1);
        self.queue.push_back(t);
        true
    }

    /// The network followed so far.
    pub fn network(&self) -> Option<&str> {
        self.network.as_deref()
    }

    fn limit(&self) -> usize {
        if self.network.is_none() {
            1
        } else {
            self.opts.concurrency.max(1)
        }
    }

    /// The next target to dial now, if the limits allow one: call until
    /// `None`, start a probe for each, and call again after every
    /// [`complete`](Self::complete) and [`handle_timeout`](Self::handle_timeout).
    pub fn next(&mut self, now: Instant) -> Option<(ProbeId, Target)> {
        while self.running.len() < self.limit() && self.visits.len() < self.opts.max_nodes {
            let t = self.queue.pop_front()?;
            // Claimed meanwhile through an address given without an ID.
            if t.id.is_some_and(|id| self.claimed.contains(&id)) {
                continue;
            }
            let pid = self.visits.len();
            self.visits.push(Visit {
                target: t.clone(),
                report: None,
            });
            self.running.insert(pid, now + self.opts.timeout);
            return Some((pid, t));
        }
        None
    }

    /// A running probe has the node's authenticated ID and NodeInfo at
    /// `now`: may it ask for addresses? Refused (with what to report) for an
    /// ID other than the address named, a node already claimed, another
    /// network, a node without PEX, or a probe that has already timed out.
    /// The ask itself is recorded with the library's [`Asks`].
    pub fn claim(
        &mut self,
        pid: ProbeId,
        node_id: NodeId,
        info: &NodeInfo,
        now: Instant,
    ) -> Verdict {
        if !self.running.contains_key(&pid) {
            return Verdict::Stop(Status::Timeout);
        }
        if let Some(expected) = self.visits[pid].target.id.filter(|&e| e != node_id) {
            return Verdict::Stop(Status::IdMismatch { expected });
        }
        if self.claimed.contains(&node_id) {
            return Verdict::Stop(Status::Duplicate);
        }
        match &self.network {
            Some(n) if *n != info.network => return Verdict::Stop(Status::OtherNetwork),
            Some(_) => {}
            None => self.network = Some(info.network.clone()),
        }
        // Claimed: a report of it is not followed any more.
        self.claimed.insert(node_id);
        if !info.channels.contains(&p2p_conn_mconn::pex::PEX_CHANNEL) {
            return Verdict::Stop(Status::NoPex);
        }
        match self.asks.ask(node_id, now) {
            AskVerdict::Ask => {
                self.asked.insert(pid, node_id);
                Verdict::Ask
            }
            // Not reached: a node is claimed once, so this is its first
            // request. Were it not, asking again would be a duplicate.
            _ => Verdict::Stop(Status::Duplicate),
        }
    }

    /// A probe ended at `now` with `report`: record it, queue what it
    /// reported, and return what it reported as edges (the scheduler keeps
    /// the count only, and drops the report's addresses). A report for a
    /// probe that has already timed out is dropped (no edges).
    pub fn complete(&mut self, pid: ProbeId, mut report: Report, now: Instant) -> Vec<Edge> {
        let mut edges = Vec::new();
        if self.running.remove(&pid).is_none() {
            return edges;
        }
        // The node's answer, by the library's rules; the connection is over,
        // so the request is forgotten (the claim keeps the node from being
        // asked again).
        let answer = match (self.asked.remove(&pid), &report.addrs) {
            (Some(id), addrs) => {
                let verdict = addrs.as_ref().map(|a| self.asks.on_addrs(&id, a, now));
                self.asks.remove(&id);
                verdict
            }
            // Addresses without our request (a probe never reports such).
            (None, Some(_)) => Some(AddrsVerdict::Stop(
                p2p_conn_mconn::pex::Violation::Unsolicited,
            )),
            (None, None) => None,
        };
        let refused = match answer {
            Some(AddrsVerdict::Stop(v)) => {
                let why = v.to_string();
                if report.status == Status::Ok {
                    report.status = Status::PexViolation(why.clone());
                }
                Some(why)
            }
            _ => None,
        };
        // The address answered under another ID than it was given with
        // (a wrong report, or a node that changed its key): dial it again
        // under the ID that answered, which a later true report would
        // otherwise not get past the pair already known.
        // Once per address: a node that shows a new ID on every connection
        // does not get dialed again and again.
        if let (Status::IdMismatch { .. }, Some(actual)) = (&report.status, report.node_id) {
            let t = &self.visits[pid].target;
            if self.retried.insert(addr_key(&t.addr)) {
                let again = Target {
                    addr: t.addr.clone(),
                    id: Some(actual),
                    depth: t.depth,
                };
                self.enqueue(again, true);
            }
        }
        let depth = self.visits[pid].target.depth + 1;
        let follow_ok = report.status == Status::Ok;
        // One answer counts once per ID and once per address (the first
        // entry of each), so that one node's answer cannot fill an
        // address's or an ID's share alone.
        let mut ids_here: HashSet<NodeId> = HashSet::new();
        let mut addrs_here: HashSet<String> = HashSet::new();
        for a in report.addrs.iter().flatten() {
            let invalid = match a.validate(self.opts.addr_policy) {
                Ok(p) => {
                    if let Some(why) = &refused {
                        Some(format!("not followed: {why}"))
                    } else {
                        let addr = p.socket_addr().to_string();
                        let first = ids_here.insert(p.id()) & addrs_here.insert(addr.clone());
                        if follow_ok && first {
                            self.enqueue(
                                Target {
                                    addr,
                                    id: Some(p.id()),
                                    depth,
                                },
                                false,
                            );
                        }
                        None
                    }
                }
                Err(e) => Some(e.to_string()),
            };
            edges.push(Edge {
                from: pid,
                addr: a.clone(),
                invalid,
            });
        }
        self.reported += edges.len();
        report.answered = report.answered.or(report.addrs.as_ref().map(Vec::len));
        report.addrs = None;
        self.visits[pid].report = Some(report);
        edges
    }

    /// Visit `pid` (dialed, running or done).
    pub fn visit(&self, pid: ProbeId) -> &Visit {
        &self.visits[pid]
    }

    /// When [`handle_timeout`](Self::handle_timeout) must run next: the
    /// earliest deadline of a running probe.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.running.values().min().copied()
    }

    /// Ends every probe past its deadline as [`Status::Timeout`] (keeping
    /// what was known when the ID was claimed); returns them, for the
    /// driver to abort.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<ProbeId> {
        let mut late: Vec<ProbeId> = self
            .running
            .iter()
            .filter(|(_, &d)| d <= now)
            .map(|(&p, _)| p)
            .collect();
        late.sort_unstable();
        for &p in &late {
            self.complete(p, Report::failed(Status::Timeout), now);
        }
        late
    }

    /// Probes running.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Dials so far and targets still queued (which `max_nodes` may cut).
    pub fn counts(&self) -> (usize, usize) {
        let room = self.opts.max_nodes.saturating_sub(self.visits.len());
        (self.visits.len(), self.queue.len().min(room))
    }

    /// Whether nothing runs and nothing more will be dialed.
    pub fn is_done(&self) -> bool {
        self.running.is_empty()
            && (self.queue.is_empty() || self.visits.len() >= self.opts.max_nodes)
    }

    /// The result (call once [`is_done`](Self::is_done)).
    pub fn finish(self) -> Crawl {
        Crawl {
            network: self.network,
            visits: self.visits,
            edges: Vec::new(),
            reported: self.reported,
            left: self.queue.into_iter().collect(),
            not_queued: self.not_queued,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use p2p_conn::Identity;

    /// A node of the fake network.
    #[derive(Clone)]
    pub struct FakeNode {
        pub id: NodeId,
        pub network: String,
        pub moniker: String,
        /// Indexes of the nodes it reports.
        pub knows: Vec<usize>,
        /// Never answers (the probe runs into its timeout).
        pub hangs: bool,
        pub pex: bool,
    }

    pub struct Fake {
        pub nodes: Vec<FakeNode>,
        /// Extra addresses a node reports, verbatim.
        pub extra: HashMap<usize, Vec<NetAddress>>,
    }

    pub fn addr_of(i: usize) -> String {
        format!("127.0.0.1:{}", 20000 + i)
    }

    impl Fake {
        pub fn new(n: usize) -> Fake {
            Fake {
                nodes: (0..n)
                    .map(|i| FakeNode {
                        id: Identity::generate().node_id(),
                        network: "chain-a".into(),
                        moniker: format!("n{i}"),
                        knows: Vec::new(),
                        hangs: false,
                        pex: true,
                    })
                    .collect(),
                extra: HashMap::new(),
            }
        }

        pub fn link(&mut self, a: usize, b: usize) {
            self.nodes[a].knows.push(b);
            self.nodes[b].knows.push(a);
        }

        pub fn seed(&self, i: usize) -> Target {
            Target {
                addr: addr_of(i),
                id: Some(self.nodes[i].id),
                depth: 0,
            }
        }

        fn find(&self, addr: &str) -> Option<usize> {
            (0..self.nodes.len()).find(|&i| addr_of(i) == addr)
        }

        pub fn info(&self, i: usize) -> NodeInfo {
            let n = &self.nodes[i];
            let mut info = NodeInfo::new(n.id, n.network.clone());
            info.moniker = n.moniker.clone();
            info.listen_addr = addr_of(i);
            info.channels = if n.pex { vec![0x00, 0x20] } else { vec![0x20] };
            info
        }

        fn pex(&self, i: usize) -> Vec<NetAddress> {
            let mut v: Vec<NetAddress> = self.nodes[i]
                .knows
                .iter()
                .map(|&j| NetAddress {
                    id: self.nodes[j].id.to_string(),
                    ip: "127.0.0.1".into(),
                    port: 20000 + j as u32,
                })
                .collect();
            v.extend(self.extra.get(&i).cloned().unwrap_or_default());
            v
        }

        /// One probe against the fake network at `now`; `None` for a node
        /// that hangs.
        pub fn probe(
            &self,
            s: &mut Scheduler,
            pid: ProbeId,
            t: &Target,
            now: Instant,
        ) -> Option<Report> {
            let Some(i) = self.find(&t.addr) else {
                return Some(Report::failed(Status::Refused("connection refused".into())));
            };
            let n = &self.nodes[i];
            if n.hangs {
                return None;
            }
            let info = self.info(i);
            let mut r = Report {
                status: Status::Ok,
                node_id: Some(n.id),
                info: Some(info.clone()),
                handshake: Some(Duration::from_millis(1)),
                addrs: None,
                answered: None,
                ignored_messages: 0,
                blocks: None,
                snapshots: None,
                closed_after_answer: None,
            };
            match s.claim(pid, n.id, &info, now) {
                Verdict::Ask => {
                    let a = self.pex(i);
                    r.answered = Some(a.len());
                    r.addrs = Some(a);
                }
                Verdict::Stop(st) => r.status = st,
            }
            Some(r)
        }
    }

    /// Runs a crawl over the fake network: probes complete in start order
    /// (one at a time), hanging ones at their deadline. Returns the crawl,
    /// the probe count each node ID got, and the most probes that ran at
    /// once.
    pub fn run(
        fake: &Fake,
        seeds: Vec<Target>,
        opts: Options,
    ) -> (Crawl, HashMap<NodeId, usize>, usize) {
        let mut s = Scheduler::new(seeds, opts);
        let mut now = Instant::now();
        let mut running: VecDeque<(ProbeId, Target)> = VecDeque::new();
        let mut asked: HashMap<NodeId, usize> = HashMap::new();
        let mut most = 0;
        let mut hung: Vec<ProbeId> = Vec::new();
        let mut edges: Vec<Edge> = Vec::new();
        for _ in 0..10_000 {
            while let Some(p) = s.next(now) {
                running.push_back(p);
            }
            most = most.max(s.running());
            if s.is_done() {
                break;
            }
            match running.pop_front() {
                Some((pid, t)) => match fake.probe(&mut s, pid, &t, now) {
                    Some(r) => {
                        if r.addrs.is_some() {
                            *asked.entry(r.node_id.unwrap()).or_default() += 1;
                        }
                        edges.extend(s.complete(pid, r, now));
                    }
                    None => hung.push(pid),
                },
                None => {
                    // Only hanging probes left: jump to the deadline.
                    now = s.poll_timeout().expect("a probe runs");
                    let late = s.handle_timeout(now);
                    assert!(!late.is_empty());
                    hung.retain(|p| !late.contains(p));
                }
            }
        }
        assert!(s.is_done(), "the crawl did not end");
        let mut c = s.finish();
        assert_eq!(c.reported, edges.len());
        c.edges = edges;
        (c, asked, most)
    }

    pub(crate) fn opts() -> Options {
        Options {
            concurrency: 4,
            timeout: Duration::from_secs(5),
            max_nodes: 100,
            network: None,
            // The fake network is on loopback.
            addr_policy: AddrPolicy::AcceptUnroutable,
        }
    }

    fn status_of(c: &Crawl, addr: &str) -> Status {
        c.visits
            .iter()
            .find(|v| v.target.addr == addr)
            .unwrap_or_else(|| panic!("{addr} not visited"))
            .report
            .clone()
            .expect("done")
            .status
    }

    #[test]
    fn each_node_is_asked_once_breadth_first() {
        // A ring of 6 with chords: every node is reported by several.
        let mut f = Fake::new(6);
        for i in 0..6 {
            f.link(i, (i + 1) % 6);
        }
        f.link(0, 3);
        f.link(1, 4);
        let (c, asked, _) = run(&f, vec![f.seed(0)], opts());
        assert_eq!(c.visits.len(), 6);
        assert_eq!(asked.len(), 6);
        assert!(asked.values().all(|&n| n == 1), "{asked:?}");
        // One dial per address.
        let addrs: HashSet<_> = c.visits.iter().map(|v| &v.target.addr).collect();
        assert_eq!(addrs.len(), 6);
        // Breadth first: depths never decrease in dial order, and node 0's
        // reports (1, 5, 3) come before anything at depth 2.
        let depths: Vec<u32> = c.visits.iter().map(|v| v.target.depth).collect();
        assert!(depths.windows(2).all(|w| w[0] <= w[1]), "{depths:?}");
        let order: Vec<String> = c.visits.iter().map(|v| v.target.addr.clone()).collect();
        let want: Vec<String> = [0, 1, 5, 3].into_iter().map(addr_of).collect();
        assert_eq!(order[..4], want[..]);
        assert_eq!(depths, [0, 1, 1, 1, 2, 2]);
        // Every report is an edge.
        let reported: usize = f.nodes.iter().map(|n| n.knows.len()).sum();
        assert_eq!(c.edges.len(), reported);
        assert_eq!(c.network.as_deref(), Some("chain-a"));
        assert!(c.left.is_empty());
    }

    #[test]
    fn a_node_reached_twice_is_asked_once() {
        // Seed 0 given twice (with and without its ID) and node 1 given
        // without an ID, which node 0 also reports (with it).
        let mut f = Fake::new(2);
        f.link(0, 1);
        let bare = |i| Target {
            addr: addr_of(i),
            id: None,
            depth: 0,
        };
        let seeds = vec![f.seed(0), bare(0), bare(1)];
        let (c, asked, _) = run(&f, seeds, opts());
        assert!(asked.values().all(|&n| n == 1), "{asked:?}");
        assert_eq!(asked.len(), 2);
        assert_eq!(c.visits.len(), 2, "{:?}", c.visits);

        // The same node behind a second address: the second probe is a
        // duplicate and does not ask.
        let mut f = Fake::new(3);
        f.nodes[2].id = f.nodes[0].id;
        let seeds = vec![f.seed(0), bare(2)];
        let (c, asked, _) = run(&f, seeds, opts());
        assert_eq!(asked[&f.nodes[0].id], 1);
        assert_eq!(status_of(&c, &addr_of(2)), Status::Duplicate);
    }

    #[test]
    fn concurrency_and_max_nodes_are_limits() {
        // A star: node 0 knows 20 others.
        let mut f = Fake::new(21);
        for i in 1..21 {
            f.link(0, i);
        }
        for conc in [1, 3, 8] {
            let o = Options {
                concurrency: conc,
                ..opts()
            };
            let (c, _, most) = run(&f, vec![f.seed(0)], o);
            assert_eq!(most, conc, "concurrency {conc}");
            assert_eq!(c.visits.len(), 21);
        }
        let o = Options {
            max_nodes: 5,
            ..opts()
        };
        let (c, asked, _) = run(&f, vec![f.seed(0)], o);
        assert_eq!(c.visits.len(), 5);
        assert_eq!(asked.len(), 5);
        // No more is queued than can be dialed: the 16 others reported
        // are counted, not kept.
        assert_eq!(c.left.len(), 0);
        assert_eq!(c.not_queued, 16);
        assert_eq!(c.reported, 20 + 4);
    }

    #[test]
    fn one_probe_until_the_network_is_known() {
        let mut f = Fake::new(10);
        for i in 2..10 {
            f.link(1, i);
        }
        // Three seeds; the first refuses, so the second sets the network.
        let seeds = vec![
            Target {
                addr: "127.0.0.1:1".into(),
                id: None,
                depth: 0,
            },
            f.seed(1),
            f.seed(2),
        ];
        let mut s = Scheduler::new(seeds, opts());
        let now = Instant::now();
        let (p0, _) = s.next(now).unwrap();
        assert_eq!(
            s.next(now),
            None,
            "a second probe before the network is known"
        );
        s.complete(p0, Report::failed(Status::Refused("refused".into())), now);
        let (p1, t1) = s.next(now).unwrap();
        assert_eq!(t1, f.seed(1));
        assert_eq!(s.next(now), None);
        let r = f.probe(&mut s, p1, &t1, now).unwrap();
        assert_eq!(s.network(), Some("chain-a"));
        s.complete(p1, r, now);
        // Now up to 4 at once (of seed 2 and the 7 more node 1 reported).
        assert_eq!(s.counts(), (2, 8));
        let mut n = 0;
        while s.next(now).is_some() {
            n += 1;
        }
        assert_eq!(n, 4);
    }

    #[test]
    fn other_networks_are_reported_not_followed() {
        // 0 - 1 - 2 - 3, with 1 and 2 on another chain: 3 is never reached.
        let mut f = Fake::new(4);
        f.link(0, 1);
        f.link(1, 2);
        f.link(2, 3);
        f.nodes[1].network = "chain-b".into();
        f.nodes[2].network = "chain-b".into();
        let (c, asked, _) = run(&f, vec![f.seed(0)], opts());
        assert_eq!(c.visits.len(), 2);
        assert_eq!(status_of(&c, &addr_of(1)), Status::OtherNetwork);
        let r1 = c.visits[1].report.as_ref().unwrap();
        assert_eq!(r1.info.as_ref().unwrap().network, "chain-b");
        assert!(r1.addrs.is_none());
        assert_eq!(asked.len(), 1);

        // --network chain-b from node 0: node 0 is the other network.
        let o = Options {
            network: Some("chain-b".into()),
            ..opts()
        };
        let (c, _, _) = run(&f, vec![f.seed(0)], o);
        assert_eq!(c.visits.len(), 1);
        assert_eq!(status_of(&c, &addr_of(0)), Status::OtherNetwork);
        assert_eq!(c.network.as_deref(), Some("chain-b"));
    }

    #[test]
    fn an_id_mismatch_is_reported_not_asked() {
        let mut f = Fake::new(3);
        f.link(0, 1);
        f.link(1, 2);
        // Node 0 reports node 2's address under a made-up ID.
        let wrong = Identity::generate().node_id();
        f.nodes[0].knows.clear();
        f.extra.insert(
            0,
            vec![
                NetAddress {
                    id: wrong.to_string(),
                    ip: "127.0.0.1".into(),
                    port: 20002,
                },
                NetAddress {
                    id: f.nodes[1].id.to_string(),
                    ip: "127.0.0.1".into(),
                    port: 20001,
                },
            ],
        );
        let (c, asked, _) = run(&f, vec![f.seed(0)], opts());
        let v = c
            .visits
            .iter()
            .find(|v| v.target.addr == addr_of(2))
            .unwrap();
        let r = v.report.as_ref().unwrap();
        assert_eq!(r.status, Status::IdMismatch { expected: wrong });
        assert_eq!(r.node_id, Some(f.nodes[2].id));
        assert!(r.addrs.is_none());
        // The address is dialed again under the ID that answered there
        // (node 1's true report of it is then the same pair): node 2 is
        // found and asked once.
        assert_eq!(asked.get(&f.nodes[2].id), Some(&1), "{asked:?}");
        let dials: Vec<_> = c
            .visits
            .iter()
            .filter(|v| v.target.addr == addr_of(2))
            .map(|v| v.target.id)
            .collect();
        assert_eq!(dials, vec![Some(wrong), Some(f.nodes[2].id)]);
        assert_eq!(c.visits.len(), 4);
    }

    /// The hole found by a hostile-peer trial (issue #32): one lying node
    /// next to the seed answers first, with honest nodes' IDs at wrong
    /// addresses and honest addresses under made-up IDs. Every honest node
    /// is still found and asked once, and the lies cost a bounded number
    /// of dials.
    #[test]
    fn a_lying_answer_does_not_hide_honest_nodes() {
        // Node 0 the seed, which knows the liar (node 1) and one honest
        // node (2); nodes 2..14 honest, in a ring. The liar is the seed's
        // first neighbour, so its answer comes before any honest report of
        // nodes 3..14.
        let mut f = Fake::new(14);
        f.link(0, 1);
        f.link(0, 2);
        for i in 2..14 {
            f.link(i, if i == 13 { 2 } else { i + 1 });
        }
        let liar_says: Vec<NetAddress> = (2..14)
            .flat_map(|i| {
                let honest = f.nodes[i].id.to_string();
                [
                    // Node i's ID at node i+1's address.
                    NetAddress {
                        id: honest.clone(),
                        ip: "127.0.0.1".into(),
                        port: 20000 + (i as u32 % 13) + 1,
                    },
                    // Node i's address under made-up IDs, three of them.
                    NetAddress {
                        id: Identity::generate().node_id().to_string(),
                        ip: "127.0.0.1".into(),
                        port: 20000 + i as u32,
                    },
                    NetAddress {
                        id: Identity::generate().node_id().to_string(),
                        ip: "127.0.0.1".into(),
                        port: 20000 + i as u32,
                    },
                    // Node i's ID at an address where nothing listens.
                    NetAddress {
                        id: honest,
                        ip: "127.0.0.1".into(),
                        port: 30000 + i as u32,
                    },
                ]
            })
            .collect();
        f.nodes[1].knows.clear();
        f.extra.insert(1, liar_says);
        let (c, asked, _) = run(&f, vec![f.seed(0)], opts());
        for i in 2..14 {
            assert_eq!(
                asked.get(&f.nodes[i].id),
                Some(&1),
                "honest node {i} not asked once: {:#?}",
                c.visits
                    .iter()
                    .map(|v| (&v.target, v.report.as_ref().map(|r| &r.status)))
                    .collect::<Vec<_>>()
            );
        }
        // Each honest address: at most MAX_IDS_PER_ADDR reported IDs and one
        // proven retry.
        for i in 2..14 {
            let n = c
                .visits
                .iter()
                .filter(|v| v.target.addr == addr_of(i))
                .count();
            assert!(
                n <= MAX_IDS_PER_ADDR + 1,
                "node {i}'s address dialed {n} times"
            );
        }
    }

    /// A node that shows a new ID on every connection is dialed again under
    /// the ID it showed once, not again and again.
    #[test]
    fn a_retry_under_the_answering_id_happens_once() {
        let mut f = Fake::new(2);
        f.link(0, 1);
        // Node 0 reports node 1 under a made-up ID; node 1 answers as
        // itself the first time. Then make it answer as a third ID: the
        // fake has one ID per node, so model it with node 1 hanging up as
        // another node would: here, its reported ID never matches.
        let wrong = Identity::generate().node_id();
        f.nodes[0].knows.clear();
        f.extra.insert(
            0,
            vec![NetAddress {
                id: wrong.to_string(),
                ip: "127.0.0.1".into(),
                port: 20001,
            }],
        );
        let mut s = Scheduler::new(vec![f.seed(0)], opts());
        let now = Instant::now();
        let (p0, t0) = s.next(now).unwrap();
        let r0 = f.probe(&mut s, p0, &t0, now).unwrap();
        s.complete(p0, r0, now);
        // The made-up ID's dial: answered by node 1.
        let (p1, t1) = s.next(now).unwrap();
        assert_eq!(t1.id, Some(wrong));
        let r1 = f.probe(&mut s, p1, &t1, now).unwrap();
        assert_eq!(r1.status, Status::IdMismatch { expected: wrong });
        s.complete(p1, r1, now);
        // Queued again under node 1's ID. Suppose it now shows yet another
        // ID: that is not retried.
        let (p2, t2) = s.next(now).unwrap();
        assert_eq!(t2.id, Some(f.nodes[1].id));
        let other = Identity::generate().node_id();
        let mut r2 = Report::failed(Status::IdMismatch {
            expected: f.nodes[1].id,
        });
        r2.node_id = Some(other);
        s.complete(p2, r2, now);
        assert!(s.next(now).is_none());
        assert!(s.is_done());
    }

    #[test]
    fn timeouts_end_a_probe_and_the_crawl_goes_on() {
        let mut f = Fake::new(4);
        f.link(0, 1);
        f.link(0, 2);
        f.link(2, 3);
        f.nodes[1].hangs = true;
        let (c, asked, _) = run(&f, vec![f.seed(0)], opts());
        assert_eq!(status_of(&c, &addr_of(1)), Status::Timeout);
        assert_eq!(status_of(&c, &addr_of(3)), Status::Ok);
        assert_eq!(asked.len(), 3);

        // A late claim and a late report after the timeout are dropped.
        let mut s = Scheduler::new(vec![f.seed(0)], opts());
        let t0 = Instant::now();
        let (p, _) = s.next(t0).unwrap();
        assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(5)));
        assert!(s.handle_timeout(t0 + Duration::from_secs(4)).is_empty());
        assert_eq!(s.handle_timeout(t0 + Duration::from_secs(5)), vec![p]);
        assert_eq!(
            s.claim(p, f.nodes[0].id, &f.info(0), t0),
            Verdict::Stop(Status::Timeout)
        );
        let mut late = Report::failed(Status::Ok);
        late.addrs = Some(vec![NetAddress {
            id: f.nodes[1].id.to_string(),
            ip: "127.0.0.1".into(),
            port: 20001,
        }]);
        s.complete(p, late, t0 + Duration::from_secs(5));
        assert!(s.is_done());
        let c = s.finish();
        assert_eq!(c.visits[0].report.as_ref().unwrap().status, Status::Timeout);
        assert!(c.edges.is_empty());
    }

    #[test]
    fn invalid_addresses_are_recorded_not_followed() {
        let mut f = Fake::new(1);
        let id = Identity::generate().node_id().to_string();
        let bad = |id: &str, ip: &str, port| NetAddress {
            id: id.into(),
            ip: ip.into(),
            port,
        };
        f.extra.insert(
            0,
            vec![
                bad("xyz", "127.0.0.1", 1),
                bad(&id, "not-an-ip", 1),
                bad(&id, "0.0.0.0", 1),
                bad(&id, "127.0.0.1", 0),
                bad(&id, "127.0.0.1", 70000),
            ],
        );
        let (c, _, _) = run(&f, vec![f.seed(0)], opts());
        assert_eq!(c.visits.len(), 1);
        assert_eq!(c.edges.len(), 5);
        assert!(c.edges.iter().all(|e| e.invalid.is_some()), "{:?}", c.edges);
        // Each with the library's reason.
        let why: Vec<&str> = c
            .edges
            .iter()
            .filter_map(|e| e.invalid.as_deref())
            .collect();
        let want = [
            "not 40 hex digits",
            "not an IP address",
            "unspecified",
            "port 0",
            "over 65535",
        ];
        for (w, want) in why.iter().zip(want) {
            assert!(w.contains(want), "{w:?} lacks {want:?}");
        }

        // Addresses CometBFT merely skips, beside a good one: the good one
        // is followed, the others recorded.
        let mut f = Fake::new(2);
        f.link(0, 1);
        f.extra.insert(
            0,
            vec![
                bad("xyz", "127.0.0.1", 1),
                bad(&id, "0.0.0.0", 1),
                bad(&id, "127.0.0.1", 0),
                bad(&id, "255.255.255.255", 1),
            ],
        );
        let (c, asked, _) = run(&f, vec![f.seed(0)], opts());
        assert_eq!(status_of(&c, &addr_of(0)), Status::Ok);
        assert_eq!(asked.len(), 2);
        let from0: Vec<&Edge> = c.edges.iter().filter(|e| e.from == 0).collect();
        assert_eq!(from0.len(), 5);
        assert!(from0[0].invalid.is_none());
        let want = ["not 40 hex digits", "unspecified", "port 0", "broadcast"];
        for (e, want) in from0[1..].iter().zip(want) {
            let w = e.invalid.as_deref().unwrap_or_default();
            assert!(w.contains(want), "{w:?} lacks {want:?}");
        }
    }

    #[test]
    fn only_routable_addresses_are_followed_by_default() {
        // Node 0 knows node 1 (on loopback, as every fake node) and reports
        // a public address too.
        let mut f = Fake::new(2);
        f.link(0, 1);
        let public = Identity::generate().node_id();
        f.extra.insert(
            0,
            vec![NetAddress {
                id: public.to_string(),
                ip: "8.8.8.8".into(),
                port: 26656,
            }],
        );
        let o = Options {
            addr_policy: AddrPolicy::Strict,
            ..opts()
        };
        let (c, asked, _) = run(&f, vec![f.seed(0)], o);
        // The seed is dialed (loopback or not), the public address is
        // followed (the fake refuses it), node 1 is not.
        let dialed: Vec<&str> = c.visits.iter().map(|v| v.target.addr.as_str()).collect();
        assert_eq!(dialed, [addr_of(0).as_str(), "8.8.8.8:26656"]);
        assert_eq!(asked.len(), 1);
        let loopback = c.edges.iter().find(|e| e.addr.port == 20001).unwrap();
        let why = loopback.invalid.as_deref().unwrap();
        assert!(
            why.contains("not routable") && why.contains("loopback"),
            "{why}"
        );
        assert!(c
            .edges
            .iter()
            .any(|e| e.addr.ip == "8.8.8.8" && e.invalid.is_none()));
        // With --allow-unroutable both are followed.
        let (c, asked, _) = run(&f, vec![f.seed(0)], opts());
        assert_eq!(c.visits.len(), 3);
        assert_eq!(asked.len(), 2);
        assert!(c.edges.iter().all(|e| e.invalid.is_none()), "{:?}", c.edges);
    }

    #[test]
    fn an_answer_cometbft_would_stop_a_peer_for_is_not_followed() {
        // Node 0 reports node 1 and an address whose IP CometBFT cannot
        // read: CometBFT refuses the whole message, so we follow none of it.
        let mut f = Fake::new(2);
        f.link(0, 1);
        f.extra.insert(
            0,
            vec![NetAddress {
                id: f.nodes[1].id.to_string(),
                ip: "127.0.0.01".into(),
                port: 20001,
            }],
        );
        let (c, asked, _) = run(&f, vec![f.seed(0)], opts());
        assert_eq!(c.visits.len(), 1);
        assert_eq!(asked.len(), 1);
        let st = status_of(&c, &addr_of(0));
        assert!(
            matches!(&st, Status::PexViolation(why) if why.contains("127.0.0.01")),
            "{st:?}"
        );
        assert_eq!(st.name(), "PEX violation");
        assert!(st.reachable());
        assert_eq!(c.edges.len(), 2);
        assert!(c.edges[0]
            .invalid
            .as_deref()
            .unwrap()
            .starts_with("not followed: "));
        assert!(c.edges[1]
            .invalid
            .as_deref()
            .unwrap()
            .contains("not an IP address"));
    }

    #[test]
    fn asks_are_recorded_and_forgotten_with_each_visit() {
        let mut f = Fake::new(2);
        f.link(0, 1);
        let mut s = Scheduler::new(vec![f.seed(0)], opts());
        let now = Instant::now();
        let (p, t) = s.next(now).unwrap();
        let r = f.probe(&mut s, p, &t, now).unwrap();
        // Asked: one request out to node 0.
        assert_eq!(s.asks.may_ask(&f.nodes[0].id, now), AskVerdict::Unanswered);
        s.complete(p, r, now);
        assert!(s.asks.is_empty() && s.asked.is_empty());
        // A report with addresses from a probe that did not ask is
        // unsolicited: not followed.
        let (p, _) = s.next(now).unwrap();
        let mut r = Report::failed(Status::Ok);
        r.node_id = Some(f.nodes[1].id);
        r.addrs = Some(vec![NetAddress {
            id: Identity::generate().node_id().to_string(),
            ip: "127.0.0.1".into(),
            port: 20009,
        }]);
        s.complete(p, r, now);
        assert!(s.is_done());
        let c = s.finish();
        assert!(
            matches!(&c.visits[1].report.as_ref().unwrap().status, Status::PexViolation(w) if w.contains("unsolicited"))
        );
        assert!(c.left.is_empty());
    }

    #[test]
    fn a_node_without_pex_is_not_asked() {
        let mut f = Fake::new(2);
        f.link(0, 1);
        f.nodes[1].pex = false;
        let (c, asked, _) = run(&f, vec![f.seed(0)], opts());
        assert_eq!(status_of(&c, &addr_of(1)), Status::NoPex);
        assert_eq!(asked.len(), 1);
    }
}
