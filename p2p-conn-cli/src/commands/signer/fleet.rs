//! The nodes being served: one [`SignerEndpoint`] task per node, served by
//! its chain's signer, and the node list's reload on `SIGHUP` (a config
//! file only). A reload dials the nodes added, stops the tasks of those
//! removed (their connection closes), and leaves the others as they are,
//! connected; the chains (their guards, state files and locks) are never
//! touched. A reload whose file has a mistake, or that changes anything
//! but the `[[node]]` list (a chain's key or state file, the identity, the
//! output), is refused and the running set kept, with a line that says so.

use std::convert::Infallible;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use p2p_conn::Identity;
use p2p_conn_privval::endpoint::{EndpointError, SignerEndpoint, StatsHandle};
use serde_json::json;
use tokio::task::{AbortHandle, JoinSet};

use super::config;
use super::metrics::{Latency, Meters, Named, Sources};
use super::plan::{NodePlan, Plan};
use super::recording::{Recording, SharedMark, Slot};
use super::report::{print_stats, Out, Reporter};
use super::standby::Standby;
use super::start::Chain;
use crate::error::CliError;
use crate::exporter::Exporter;

/// A node as the stats, the standby summaries and the metrics see it.
pub(super) struct View {
    pub(super) shown: String,
    pub(super) stats: StatsHandle,
    pub(super) standby: Arc<Standby>,
    pub(super) mark: SharedMark,
    /// Its chain (an index into the fleet's chains).
    pub(super) chain: usize,
}

/// The nodes served now, for the tasks that report on them.
pub(super) type Views = Arc<Mutex<Vec<Arc<View>>>>;

/// The nodes served now, each `(view, label)`: labelled by its address
/// when there is more than one.
pub(super) fn snapshot(views: &Views) -> Vec<(Arc<View>, Option<String>)> {
    let v = views.lock().unwrap_or_else(PoisonError::into_inner);
    let many = v.len() > 1;
    v.iter()
        .map(|x| (x.clone(), many.then(|| x.shown.clone())))
        .collect()
}

/// The metrics' view of the nodes of `chain` served now.
fn named(views: &Views, chain: usize) -> Vec<Named> {
    let v = views.lock().unwrap_or_else(PoisonError::into_inner);
    v.iter()
        .filter(|x| x.chain == chain)
        .map(|x| (x.stats.clone(), x.shown.clone(), x.standby.clone()))
        .collect()
}

struct Running {
    plan: NodePlan,
    abort: AbortHandle,
    view: Arc<View>,
}

/// The node tasks and what they need to start more.
pub(super) struct Fleet {
    out: Out,
    identity: Identity,
    /// Where each node's latencies are recorded.
    exporter: Exporter,
    chains: Vec<Chain>,
    /// The plan running now (its nodes are `running`'s).
    plan: Plan,
    running: Vec<Running>,
    pub(super) views: Views,
    /// The next node's number (never reused: a standby refusal is judged
    /// by which node moved the mark).
    next: usize,
    tasks: JoinSet<Result<Infallible, EndpointError>>,
}

impl Fleet {
    pub(super) fn new(
        out: Out,
        identity: Identity,
        exporter: Exporter,
        chains: Vec<Chain>,
        plan: Plan,
    ) -> Fleet {
        Fleet {
            out,
            identity,
            exporter,
            chains,
            plan,
            running: Vec::new(),
            views: Arc::default(),
            next: 0,
            tasks: JoinSet::new(),
        }
    }

    /// What the metrics read of each chain: its nodes served at each
    /// scrape, its watch and its mark.
    pub(super) fn sources(&self) -> Vec<Sources> {
        self.chains
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let views = self.views.clone();
                Sources {
                    chain: c.label.clone(),
                    nodes: Box::new(move || named(&views, i)),
                    watch: c.watch.clone(),
                    mark: c.mark.clone(),
                }
            })
            .collect()
    }

    /// Start every node of the plan (within the runtime).
    pub(super) fn start(&mut self) {
        for n in self.plan.nodes.clone() {
            self.spawn(n);
        }
    }

    fn spawn(&mut self, n: NodePlan) {
        let chain = &self.chains[n.chain];
        let shown = n.address.to_string();
        let slot: Slot = Arc::default();
        let standby: Arc<Standby> = Arc::default();
        let index = self.next;
        self.next += 1;
        let mut signer = Recording {
            inner: chain.signer.clone(),
            slot: slot.clone(),
            mark: chain.mark.clone(),
            node: index,
            standby: standby.clone(),
        };
        let noise_self = matches!(n.address, p2p_conn_privval::endpoint::Address::Noise { .. })
            .then(|| self.identity.public_key().peer_id().to_string());
        // Dial every 50 ms at first, then up to every 500 ms: well within
        // the 3 s a starting node waits for its signer (docs/operator-manual.md).
        let mut endpoint = SignerEndpoint::new(n.address.clone(), self.identity.clone())
            .retry(Duration::from_millis(50), Duration::from_millis(500));
        if let Some(id) = n.node_id {
            endpoint = endpoint.expect_node(id);
        }
        let mut reporter = Reporter::new(
            self.out.clone(),
            slot,
            shown.clone(),
            self.plan.output.disconnected_every,
            noise_self,
            Meters {
                watch: chain.watch.clone(),
                connected: chain.connected.clone(),
                latency: Latency::new(&self.exporter, &chain.label, &shown),
            },
            standby.clone(),
        );
        let endpoint = endpoint.on_event(move |e| reporter.report(e));
        let view = Arc::new(View {
            shown,
            stats: endpoint.stats(),
            standby,
            mark: chain.mark.clone(),
            chain: n.chain,
        });
        self.views
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(view.clone());
        let abort = self
            .tasks
            .spawn(async move { endpoint.run(&mut signer).await });
        self.running.push(Running {
            plan: n,
            abort,
            view,
        });
    }

    /// The first node task that fails (an invalid configuration), as the
    /// error the signer exits with; never while every task serves.
    pub(super) async fn failed(&mut self) -> CliError {
        loop {
            match self.tasks.join_next().await {
                Some(Ok(Ok(never))) => match never {},
                Some(Ok(Err(e))) => return CliError::from(e),
                // A node removed by a reload.
                Some(Err(e)) if e.is_cancelled() => continue,
                Some(Err(e)) => return CliError::Io(std::io::Error::other(e)),
                None => std::future::pending::<()>().await,
            }
        }
    }

    /// Stop every node task and wait for each to end: a task running on
    /// another worker when aborted finishes its step (a request being
    /// served prints its `served` line) before it is dropped, and the
    /// final stats must come after every event.
    pub(super) async fn stop(&mut self) {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
    }

    /// Reload the node list from the config file at `path` (`SIGHUP`),
    /// telling what changed or why nothing did.
    pub(super) fn reload(&mut self, path: &Path) {
        let kept = self.running.len();
        match config::load(path)
            .map_err(|e| e.to_string())
            .and_then(|new| self.same_but_nodes(new))
        {
            Err(why) => {
                if self.out.json {
                    self.out.json(
                        "reload_refused",
                        json!({ "config": path.display().to_string(), "error": why, "nodes": kept }),
                    );
                } else {
                    self.out.text(&format!(
                        "reload refused: {why}; still serving the {kept} node(s) running before"
                    ));
                }
            }
            Ok(nodes) => self.apply(path, nodes),
        }
    }

    /// The new plan's nodes, with their chains as numbered here, if
    /// nothing else changed.
    fn same_but_nodes(&self, new: Plan) -> Result<Vec<NodePlan>, String> {
        let restart = "only a restart applies that (a reload changes the [[node]] list only)";
        for c in &self.plan.chains {
            let id = c.id.as_deref().unwrap_or_default();
            match new.chains.iter().find(|n| n.id == c.id) {
                None => return Err(format!("chain {id:?} is gone from the file; {restart}")),
                Some(n) if n.key != c.key => {
                    return Err(format!("chain {id:?} has another key; {restart}"))
                }
                Some(n) if n.state != c.state => {
                    return Err(format!("chain {id:?} has another state file; {restart}"))
                }
                Some(_) => {}
            }
        }
        if let Some(n) = new
            .chains
            .iter()
            .find(|n| !self.plan.chains.iter().any(|c| c.id == n.id))
        {
            let id = n.id.as_deref().unwrap_or_default();
            return Err(format!("chain {id:?} is new; {restart}"));
        }
        if new.identity != self.plan.identity {
            return Err(format!("the identity changed; {restart}"));
        }
        if new.output != self.plan.output {
            return Err(format!(
                "the output settings or [metrics] changed; {restart}"
            ));
        }
        Ok(new
            .nodes
            .iter()
            .map(|n| {
                let id = &new.chains[n.chain].id;
                let chain = self
                    .plan
                    .chains
                    .iter()
                    .position(|c| &c.id == id)
                    .expect("every chain was matched above");
                NodePlan { chain, ..n.clone() }
            })
            .collect())
    }

    fn apply(&mut self, path: &Path, nodes: Vec<NodePlan>) {
        let (keep, gone): (Vec<Running>, Vec<Running>) = std::mem::take(&mut self.running)
            .into_iter()
            .partition(|r| nodes.contains(&r.plan));
        self.running = keep;
        let removed: Vec<String> = gone.iter().map(|r| r.view.shown.clone()).collect();
        for r in gone {
            r.abort.abort();
            // Its series go too: a stale `connected 1` would hide an
            // outage from the alerts.
            self.exporter.forget("node", &r.view.shown);
            self.views
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|v| !Arc::ptr_eq(v, &r.view));
            // Its last figures, as a node's at exit.
            print_stats(
                &self.out,
                &r.view.stats.snapshot(),
                &r.view.mark,
                true,
                Some(&r.view.shown),
            );
        }
        let unchanged = self.running.len();
        let mut added = Vec::new();
        for n in nodes {
            if !self.running.iter().any(|r| r.plan == n) {
                added.push(n.address.to_string());
                self.spawn(n);
            }
        }
        self.plan.nodes = self.running.iter().map(|r| r.plan.clone()).collect();
        if self.out.json {
            self.out.json(
                "reload",
                json!({
                    "config": path.display().to_string(),
                    "added": added,
                    "removed": removed,
                    "unchanged": unchanged,
                }),
            );
        } else {
            let list = |v: &[String]| {
                if v.is_empty() {
                    "none".to_string()
                } else {
                    v.join(", ")
                }
            };
            self.out.text(&format!(
                "reloaded {}: added {}; removed {}; {unchanged} unchanged, left as they were",
                path.display(),
                list(&added),
                list(&removed)
            ));
        }
    }
}
