//! `p2p-conn crawl`: map a CometBFT network over p2p alone (no RPC).
//!
//! For each node it dials: the secret-connection handshake, the NodeInfo
//! exchange, one `PexRequest` over MConnection (with a `StatusRequest`
//! and a `SnapshotsRequest` where the node lists those channels; only
//! those to a node without PEX), the node's `PexAddrs`, a hang-up; then
//! breadth first over the addresses learned.
//!
//! # Design
//! - [`scheduler`]: a sans-IO scheduler (which address next, the limits,
//!   one visit per node and address, one network), which takes CometBFT's
//!   PEX rules (address validation, the request and its answer) from the
//!   library, `p2p_conn_mconn::pex`; below the commands, in
//!   [`crate::visit`].
//! - [`probe`](mod@probe): the one piece that touches the network, one node per
//!   call (`check` and `seed` visit through it too).
//! - This module: the tokio driver (a task per probe, aborted at the
//!   scheduler's deadline; a probe past its answer, waiting only for the
//!   rest of a snapshot listing, leaves its slot to the next dial: up to
//!   [`LINGER_PER_SLOT`] such per `--concurrency`), the progress line,
//!   and the output through [`output`] (table, `--json`) and [`graph`]
//!   (`--graph`, DOT or SVG).
//!
//! # Not provided
//! - No re-crawl: one pass, one request per node (`--addrbook` writes
//!   what it found as a CometBFT address book; a seed keeping a book
//!   fresh is another command's job).
//! - Host names in the seeds are resolved by the system; reported
//!   addresses must be IP addresses.
//! - Nodes that do not accept inbound peers (full, private, behind NAT)
//!   are seen only as addresses others report.

mod graph;
mod output;

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use p2p_conn::{keyfile, Identity};
use p2p_conn_mconn::pex::AddrPolicy;
use tokio::task::JoinSet;

use crate::conn;
use crate::error::CliError;
use crate::visit::probe;
use crate::visit::report::{Report, Target};
use crate::visit::scheduler::{self, Options, ProbeId, Scheduler};

/// Probes past their answer that may wait for the rest of a snapshot
/// listing (from [`probe::LISTING_TAIL_MIN`] each), per `--concurrency`
/// slot: such a probe holds a connection (about 120 KiB) and nothing
/// else, so the wait does not hold up the dials of the slot's next nodes
/// and their answers' addresses.
pub const LINGER_PER_SLOT: usize = 1;

#[derive(clap::Args)]
pub struct CrawlArgs {
    /// Where to start: one or more p2p addresses, ID@HOST:PORT or HOST:PORT,
    /// either after tcp://
    #[arg(required = true)]
    seeds: Vec<String>,
    /// Most nodes probed at once, until their answer (a node whose answer
    /// is in and whose snapshot listing is still coming holds a
    /// connection, not a slot: up to 1 such per slot)
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Bound on one node's visit (connect to hang-up), in seconds
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// Most addresses dialed in the whole crawl
    #[arg(long, default_value_t = 1000)]
    max_nodes: usize,
    /// The network (chain ID) to follow [default: the first node's]
    #[arg(long)]
    network: Option<String>,
    /// Also follow reported addresses that are not publicly routable
    /// (private, loopback, link-local), as a CometBFT node with
    /// addr_book_strict = false does: for local and private test networks
    #[arg(long)]
    allow_unroutable: bool,
    /// Print one JSON document instead of the table: a record per node
    /// listed (the filters apply, as to the table), each with the
    /// addresses it reported, then the totals
    #[arg(long)]
    json: bool,
    /// Also write a picture of who knows whom: FILE.svg (drawn by p2p-conn)
    /// or FILE.dot (Graphviz DOT)
    #[arg(long)]
    graph: Option<PathBuf>,
    /// Do not ask nodes for their state-sync snapshots (asked by default
    /// of each node that lists the channel, with a short wait past its
    /// answer for the listing, while other nodes are dialed)
    #[arg(long)]
    no_snapshots: bool,
    /// List only the nodes whose blocks include height H (from each
    /// node's blocksync status), in the table and in --json
    #[arg(long, value_name = "H")]
    has_height: Option<i64>,
    /// Also write the nodes reached as a CometBFT addrbook.json, which a
    /// node loads at start (p2p.addr_book_file)
    #[arg(long, value_name = "FILE")]
    addrbook: Option<PathBuf>,
    /// node_key.json to authenticate with (default: a fresh ephemeral
    /// identity for this crawl)
    #[arg(long)]
    key: Option<PathBuf>,
}

pub fn run(args: CrawlArgs) -> Result<(), CliError> {
    if args.concurrency == 0 {
        return Err(CliError::usage("--concurrency must be at least 1"));
    }
    if args.max_nodes == 0 {
        return Err(CliError::usage("--max-nodes must be at least 1"));
    }
    let timeout = conn::seconds("--timeout", args.timeout)?;
    let graph_format = match &args.graph {
        None => None,
        Some(p) => match p.extension().and_then(|e| e.to_str()) {
            Some("svg") => Some(false),
            Some("dot") | Some("gv") => Some(true),
            _ => {
                return Err(CliError::usage(
                    "--graph takes a file ending in .svg or .dot",
                ))
            }
        },
    };
    let mut seeds = Vec::new();
    for s in &args.seeds {
        // Checked here, as `dial` and `probe` check theirs: a seed that
        // cannot be dialed is a usage error, not a row of the table.
        let (addr, id) = conn::split_id(s)?;
        if !conn::is_host_port(&addr) {
            return Err(CliError::usage(format!(
                "seed {s:?}: want {} (a port from 1 to 65535)",
                conn::ADDRESS_FORMS
            )));
        }
        seeds.push(Target { addr, id, depth: 0 });
    }
    let identity = match &args.key {
        Some(p) => keyfile::load(p)?,
        None => Identity::generate(),
    };
    let crawler_id = identity.node_id();
    eprintln!("crawler id {crawler_id}");
    let opts = Options {
        concurrency: args.concurrency,
        timeout,
        max_nodes: args.max_nodes,
        network: args.network.clone(),
        addr_policy: if args.allow_unroutable {
            AddrPolicy::AcceptUnroutable
        } else {
            AddrPolicy::Strict
        },
        linger: args.concurrency.saturating_mul(LINGER_PER_SLOT),
    };
    let filter = output::Filter {
        has_height: args.has_height,
    };
    let rt = conn::runtime()?;
    let started = Instant::now();
    let started_at = crate::wall_clock::now();
    // What each visit's end is written to: the JSON as it goes; the edges
    // the picture needs (the valid ones), only with --graph; nothing more
    // is kept per node than its visit.
    let mut json = match args.json {
        true => Some(
            output::JsonStream::start(
                std::io::BufWriter::new(std::io::stdout()),
                crawler_id,
                filter,
            )
            .map_err(stdout_failed)?,
        ),
        false => None,
    };
    let mut drawn: Vec<scheduler::Edge> = Vec::new();
    let mut failed_write = None;
    let mut sink = |pid: ProbeId, v: &scheduler::Visit, edges: Vec<scheduler::Edge>| {
        if let Some(j) = json.as_mut() {
            if let Err(e) = j.node(pid, v, &edges) {
                failed_write.get_or_insert(e);
            }
        }
        if graph_format.is_some() {
            drawn.extend(edges.into_iter().filter(|e| e.invalid.is_none()));
        }
    };
    let probing = probe::ProbeOptions {
        snapshots: !args.no_snapshots,
        ..probe::ProbeOptions::new(timeout)
    };
    let mut crawl = rt.block_on(drive(
        Scheduler::new(seeds, opts),
        identity,
        probing,
        &mut sink,
    ));
    rt.shutdown_background();
    if let Some(e) = failed_write.take() {
        return Err(stdout_failed(e));
    }
    crawl.edges = drawn;
    let n = crawl.visits.len();
    eprintln!(
        "crawled {n} address{} in {:.2} s",
        if n == 1 { "" } else { "es" },
        started.elapsed().as_secs_f64()
    );
    if let (Some(path), Some(dot)) = (&args.graph, graph_format) {
        let g = graph::Graph::of(&crawl).with_caption(format!(
            "crawl of {} · {started_at} · {} dialed · by p2p-conn crawler {crawler_id}",
            crawl.network.as_deref().unwrap_or("no network"),
            crawl.visits.len(),
        ));
        let text = if dot { g.dot() } else { g.svg() };
        std::fs::write(path, text).map_err(|source| {
            CliError::usage(format!("cannot write {}: {source}", path.display()))
        })?;
        eprintln!("graph written to {}", path.display());
    }
    if let Some(path) = &args.addrbook {
        let (entries, skipped) = output::addrbook(&crawl);
        let book = crate::addrbook::to_json(&crate::addrbook::new_key(), &entries);
        crate::addrbook::write_atomic(path, &book)
            .map_err(|e| CliError::usage(format!("cannot write {}: {e}", path.display())))?;
        let n = entries.len();
        let note = if skipped > 0 {
            format!(" ({skipped} left out: dialed by host name, not IP)")
        } else {
            String::new()
        };
        eprintln!(
            "address book of {n} node{} written to {}{note}",
            if n == 1 { "" } else { "s" },
            path.display()
        );
    }
    match json {
        Some(j) => {
            // The lines under the table, on stderr.
            let notes = [output::unroutable_note(&crawl), filter.note(j.listed())];
            j.finish(&crawl).map_err(stdout_failed)?;
            for note in notes.into_iter().flatten() {
                eprintln!("{note}");
            }
        }
        None => print!("{}", output::table(&crawl, filter)),
    }
    Ok(())
}

fn stdout_failed(e: std::io::Error) -> CliError {
    CliError::usage(format!("cannot write to stdout: {e}"))
}

/// Runs the crawl: probes as tasks, as many as the scheduler allows, each
/// aborted at its deadline.
///
/// Each visit's end goes to `sink` with what it reported, as it happens,
/// once: when the scheduler says it has ended
/// ([`Scheduler::complete`], [`Scheduler::handle_timeout`]).
async fn drive(
    s: Scheduler,
    identity: Identity,
    opts: probe::ProbeOptions,
    sink: &mut dyn FnMut(ProbeId, &scheduler::Visit, Vec<scheduler::Edge>),
) -> scheduler::Crawl {
    let s = Arc::new(Mutex::new(s));
    let identity = Arc::new(identity);
    let bar = progress();
    // A probe's answer frees its slot: the loop then dials the next.
    let slot_freed = Arc::new(tokio::sync::Notify::new());
    let mut tasks: JoinSet<(ProbeId, Report)> = JoinSet::new();
    let mut aborts = HashMap::new();
    let mut done = 0u64;
    loop {
        let deadline = {
            let mut g = s.lock().expect("scheduler lock");
            while let Some((pid, target)) = g.next(Instant::now()) {
                let s = Arc::clone(&s);
                let identity = Arc::clone(&identity);
                let slot_freed = Arc::clone(&slot_freed);
                let h = tasks.spawn(async move {
                    let decide = |id, info: &_| {
                        s.lock()
                            .expect("scheduler lock")
                            .claim(pid, id, info, Instant::now())
                    };
                    let answered = |r: &mut Report| {
                        s.lock()
                            .expect("scheduler lock")
                            .answered(pid, r, Instant::now());
                        slot_freed.notify_one();
                    };
                    let r = probe::probe_with(&target, &identity, &opts, decide, answered).await;
                    (pid, r)
                });
                aborts.insert(pid, h);
            }
            if let Some(b) = &bar {
                let (dialed, queued) = g.counts();
                b.set_length((dialed + queued) as u64);
                b.set_position(done);
                b.set_message(format!(
                    "{} running, network {}",
                    g.running(),
                    g.network().unwrap_or("not known yet")
                ));
            }
            if g.is_done() {
                break;
            }
            g.poll_timeout()
        };
        let wake = deadline.map_or_else(
            || tokio::time::Instant::now() + opts.timeout,
            tokio::time::Instant::from_std,
        );
        tokio::select! {
            joined = tasks.join_next() => match joined {
                Some(Ok((pid, report))) => {
                    aborts.remove(&pid);
                    let mut g = s.lock().expect("scheduler lock");
                    // `None`: its timeout was handled first (and reported).
                    if let Some(edges) = g.complete(pid, report, Instant::now()) {
                        done += 1;
                        sink(pid, g.visit(pid), edges);
                    }
                }
                // Aborted at its deadline (already recorded), or a panic.
                Some(Err(e)) if e.is_cancelled() => {}
                Some(Err(e)) => std::panic::resume_unwind(e.into_panic()),
                None => {}
            },
            _ = slot_freed.notified() => {}
            _ = tokio::time::sleep_until(wake) => {
                let mut g = s.lock().expect("scheduler lock");
                let late = g.handle_timeout(Instant::now());
                let late: Vec<ProbeId> = late
                    .into_iter()
                    .map(|(pid, edges)| {
                        sink(pid, g.visit(pid), edges);
                        pid
                    })
                    .collect();
                drop(g);
                for pid in late {
                    done += 1;
                    if let Some(h) = aborts.remove(&pid) {
                        h.abort();
                    }
                }
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    // Aborted tasks still hold the scheduler until they are reaped.
    tasks.shutdown().await;
    let s = Arc::try_unwrap(s).expect("every probe has ended");
    s.into_inner().expect("scheduler lock").finish()
}

/// A progress bar on stderr when stderr is a terminal; nothing otherwise.
fn progress() -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let b =
        indicatif::ProgressBar::with_draw_target(Some(0), indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "crawl [{bar:30}] {pos}/{len} nodes, {msg} {elapsed}",
    ) {
        b.set_style(style.progress_chars("=> "));
    }
    Some(b)
}
