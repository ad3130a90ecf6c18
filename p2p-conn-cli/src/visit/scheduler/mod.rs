//! The crawl's scheduler: which address to dial next, and what a visit
//! taught us. Pure code (no sockets, no clock of its own: every call that
//! needs the time takes `now`), driven by the `crawl` command over real
//! probes ([`super::probe`]) and by its tests over a fake network
//! (`fake.rs`).
//!
//! # Rules
//! - Breadth first: the seeds in the order given, then the addresses each
//!   node reported, in the order the answers came, a FIFO queue. Every
//!   target remembers its depth (seeds: 0).
//! - At most `concurrency` probes at once until their answer, at most
//!   `max_nodes` dials in all, and each probe ends at `now + timeout` (the
//!   driver aborts it when [`Scheduler::handle_timeout`] says so). A probe
//!   whose answer is in ([`Scheduler::answered`]: its addresses are
//!   followed from then on) and that only waits for the rest of a
//!   snapshot listing holds a connection, not a dial slot: at most
//!   `linger` such at once.
//! - Each visit ends once: [`Scheduler::complete`] or
//!   [`Scheduler::handle_timeout`] says when, whichever comes first, and a
//!   visit is reported then and only then (a probe that gives up at its
//!   deadline races the scheduler's timeout: its late report is dropped).
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
//! - A node without PEX (no channel `0x00`: `pex = false`, as validators
//!   and private sentries run) is claimed but not asked for addresses;
//!   the probe still asks its blocks and snapshots ([`Verdict::AskState`]).
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

use super::report::{Report, Status, Target, Verdict};

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
    /// Most probes at once past their answer, waiting only for the rest
    /// of a snapshot listing (at least 1): each holds a connection, and no
    /// dial starts while this many wait.
    pub linger: usize,
}

/// Most IDs one address is queued under from reports (each node's answer
/// counts once per address). Bounds how often a lying answer can make the
/// crawl dial someone else's address; a dial that proves the ID at an
/// address is not bounded by it.
pub const MAX_IDS_PER_ADDR: usize = 3;

/// The index of a visit in [`Crawl::visits`].
pub type ProbeId = usize;

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
    /// Reported addresses not followed only because their IP is not
    /// publicly routable ([`AddrPolicy::Strict`]; `--allow-unroutable`
    /// follows them).
    pub unroutable: usize,
}

/// A probe past its answer ([`Scheduler::answered`]).
#[derive(Debug)]
struct Lingering {
    deadline: Instant,
    /// What it reported, until its visit ends.
    edges: Vec<Edge>,
    /// What it had found at its answer (no addresses): its record should
    /// its deadline pass first.
    report: Report,
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
    /// Running probes (before their answer) and their deadlines.
    running: HashMap<ProbeId, Instant>,
    /// Probes past their answer.
    lingering: HashMap<ProbeId, Lingering>,
    visits: Vec<Visit>,
    reported: usize,
    not_queued: usize,
    unroutable: usize,
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
            lingering: HashMap::new(),
            visits: Vec::new(),
            reported: 0,
            not_queued: 0,
            unroutable: 0,
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
        while self.running.len() < self.limit()
            && self.lingering.len() < self.opts.linger.max(1)
            && self.visits.len() < self.opts.max_nodes
        {
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
    /// network, or a probe that has already timed out; a node without PEX
    /// is claimed and asked for its state only ([`Verdict::AskState`]).
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
            return Verdict::AskState(Status::NoPex);
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
    /// the count only, and drops the report's addresses): `Some` once per
    /// visit, when this report ends it; report the visit then.
    ///
    /// `None` when the visit has already ended: its timeout was handled
    /// first ([`handle_timeout`](Self::handle_timeout) returned it, and
    /// that was its one report), which happens when the probe gives up by
    /// itself at the same moment (its connect timeout is the crawl's). The
    /// report is dropped.
    ///
    /// After [`answered`](Self::answered), the answer's outcome stands (its
    /// status and count, its edges): `report` adds what came after it.
    pub fn complete(
        &mut self,
        pid: ProbeId,
        mut report: Report,
        now: Instant,
    ) -> Option<Vec<Edge>> {
        if let Some(l) = self.lingering.remove(&pid) {
            report.status = l.report.status;
            report.answered = l.report.answered;
            report.addrs = None;
            self.visits[pid].report = Some(report);
            return Some(l.edges);
        }
        self.running.remove(&pid)?;
        let edges = self.take_answer(pid, &mut report, now);
        self.visits[pid].report = Some(report);
        Some(edges)
    }

    /// A running probe has its answer at `now` (the node's `PexAddrs`; or
    /// its blocksync status, when it was asked for its state only) and
    /// waits only for the rest of a snapshot listing: its addresses are
    /// taken from `report` and followed as [`complete`](Self::complete)
    /// would (a violation is set as its status), and it leaves its dial
    /// slot for one of the `linger` ones, keeping its deadline. Its visit
    /// ends at [`complete`](Self::complete) (or its deadline, recorded
    /// with what `report` holds now). Nothing for a probe that has timed
    /// out.
    pub fn answered(&mut self, pid: ProbeId, report: &mut Report, now: Instant) {
        let Some(deadline) = self.running.remove(&pid) else {
            return;
        };
        let edges = self.take_answer(pid, report, now);
        let l = Lingering {
            deadline,
            edges,
            report: report.clone(),
        };
        self.lingering.insert(pid, l);
    }

    /// Takes the answer out of `report` (the addresses: queued, returned
    /// as edges, counted), setting a violation as its status.
    fn take_answer(&mut self, pid: ProbeId, report: &mut Report, now: Instant) -> Vec<Edge> {
        let mut edges = Vec::new();
        // The node's answer, by the library's rules; the request is over
        // (answered, or the connection ended), so it is forgotten (the
        // claim keeps the node from being asked again).
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
                Err(e) => {
                    if matches!(e, p2p_conn_mconn::pex::AddrError::Unroutable { .. }) {
                        self.unroutable += 1;
                    }
                    Some(e.to_string())
                }
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
        edges
    }

    /// Visit `pid` (dialed, running or done).
    pub fn visit(&self, pid: ProbeId) -> &Visit {
        &self.visits[pid]
    }

    /// When [`handle_timeout`](Self::handle_timeout) must run next: the
    /// earliest deadline of a running probe.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let lingering = self.lingering.values().map(|l| l.deadline);
        self.running.values().copied().chain(lingering).min()
    }

    /// Ends every probe past its deadline: one before its answer as
    /// [`Status::Timeout`], one past it ([`answered`](Self::answered))
    /// with what it had then. Returns them with their edges, for the
    /// driver to abort and report (each visit is ended once: a report of
    /// one of them that comes later is dropped by
    /// [`complete`](Self::complete)).
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<(ProbeId, Vec<Edge>)> {
        let running = self.running.iter().map(|(&p, &d)| (p, d));
        let lingering = self.lingering.iter().map(|(&p, l)| (p, l.deadline));
        let mut late: Vec<ProbeId> = running
            .chain(lingering)
            .filter(|&(_, d)| d <= now)
            .map(|(p, _)| p)
            .collect();
        late.sort_unstable();
        late.into_iter()
            .map(|p| {
                let report = match self.lingering.get(&p) {
                    Some(l) => l.report.clone(),
                    None => Report::failed(Status::Timeout),
                };
                let edges = self.complete(p, report, now).unwrap_or_default();
                (p, edges)
            })
            .collect()
    }

    /// Probes running (before or past their answer).
    pub fn running(&self) -> usize {
        self.running.len() + self.lingering.len()
    }

    /// Dials so far and targets still queued (which `max_nodes` may cut).
    pub fn counts(&self) -> (usize, usize) {
        let room = self.opts.max_nodes.saturating_sub(self.visits.len());
        (self.visits.len(), self.queue.len().min(room))
    }

    /// Whether nothing runs and nothing more will be dialed.
    pub fn is_done(&self) -> bool {
        self.running.is_empty()
            && self.lingering.is_empty()
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
            unroutable: self.unroutable,
        }
    }
}

#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod tests;
