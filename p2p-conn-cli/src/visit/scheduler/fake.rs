//! A fake network for the scheduler's tests and the crawl output's: nodes
//! with IDs, networks and the addresses they report, probed in memory, and
//! [`run`], a crawl over it on a test clock.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use p2p_conn::nodeinfo::NodeInfo;
use p2p_conn::{Identity, NodeId};
use p2p_conn_mconn::pex::{AddrPolicy, NetAddress};

use super::{Crawl, Edge, Options, ProbeId, Scheduler};
use crate::visit::report::{Report, Status, Target, Verdict};

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
    /// Never answers, and its probe gives up by itself at the crawl's
    /// deadline (its connect timeout is the crawl's): the scheduler's
    /// timeout and the probe's own `Timeout` report race, the timeout
    /// handled first, as the driver may see them.
    pub late: bool,
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
                    late: false,
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
        if n.hangs || n.late {
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
            Verdict::AskState(st) | Verdict::Stop(st) => r.status = st,
        }
        Some(r)
    }
}

/// What [`run_full`] saw.
pub struct Run {
    pub crawl: Crawl,
    /// The probes each node ID got.
    pub asked: HashMap<NodeId, usize>,
    /// The most probes that ran at once.
    pub most: usize,
    /// Each visit the driver reported (wrote to `--json`), in order.
    pub reported: Vec<ProbeId>,
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
    let r = run_full(fake, seeds, opts);
    (r.crawl, r.asked, r.most)
}

/// [`run`], and each visit the driver reports, as the crawl's driver
/// reports them: what [`Scheduler::complete`] and
/// [`Scheduler::handle_timeout`] say has ended.
pub fn run_full(fake: &Fake, seeds: Vec<Target>, opts: Options) -> Run {
    let mut s = Scheduler::new(seeds, opts);
    let mut reported: Vec<ProbeId> = Vec::new();
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
                    if let Some(e) = s.complete(pid, r, now) {
                        edges.extend(e);
                        reported.push(pid);
                    }
                }
                None => hung.push(pid),
            },
            None => {
                // Only hanging probes left: jump to the deadline.
                now = s.poll_timeout().expect("a probe runs");
                let late: Vec<ProbeId> = s
                    .handle_timeout(now)
                    .into_iter()
                    .map(|(pid, e)| {
                        edges.extend(e);
                        pid
                    })
                    .collect();
                assert!(!late.is_empty());
                reported.extend(&late);
                // The probes that gave up by themselves at that instant:
                // their own reports arrive after the timeout was handled.
                for &pid in &late {
                    let t = &s.visit(pid).target;
                    if fake.find(&t.addr).is_some_and(|i| fake.nodes[i].late) {
                        let r = Report::failed(Status::Timeout);
                        if let Some(e) = s.complete(pid, r, now) {
                            edges.extend(e);
                            reported.push(pid);
                        }
                    }
                }
                hung.retain(|p| !late.contains(p));
            }
        }
    }
    assert!(s.is_done(), "the crawl did not end");
    let mut c = s.finish();
    assert_eq!(c.reported, edges.len());
    c.edges = edges;
    Run {
        crawl: c,
        asked,
        most,
        reported,
    }
}

pub(crate) fn opts() -> Options {
    Options {
        concurrency: 4,
        timeout: Duration::from_secs(5),
        max_nodes: 100,
        network: None,
        // The fake network is on loopback.
        addr_policy: AddrPolicy::AcceptUnroutable,
        linger: 4,
    }
}
