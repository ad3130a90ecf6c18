//! `p2p-conn seed`: a seed node, with CometBFT's seed-mode behaviour: a
//! node that dials it gets a sample of good addresses for its
//! `PexRequest` and is hung up on; meanwhile the seed re-crawls its book
//! on a schedule, to keep it fresh, and saves it as a CometBFT
//! `addrbook.json`.
//!
//! # Design
//! - The book is the library's [`Book`] (sans-IO: learn, try, judge,
//!   select) and the answering rules its [`Requests`] in seed mode; the
//!   outbound visits go through the probe `crawl` visits with
//!   ([`crate::visit::probe`]), so the seed asks each node as politely as
//!   `crawl` does, at most once per recheck interval (10 min by default,
//!   far past CometBFT's 10 s).
//! - Inbound: a bounded number of connections at once, and per IP, kept
//!   by the admission every inbound listener of the CLI shares
//!   ([`crate::inbound`]): when full, the oldest connection still in its
//!   handshake (or, if none is, the oldest authenticated and not yet
//!   answered) is closed to make room, so a visitor is answered while
//!   stalled connections fill the slots; the per-IP bound
//!   refuses and never evicts; at most twice `--max-inbound` sockets are
//!   open. Each connection runs the handshake, the NodeInfo exchange (the
//!   peer must be on the seed's network), MConnection with the PEX
//!   channel only (its sans-IO [`MConnCore`] driven on the connection's
//!   own task: a visit is one request and one answer), waits for the
//!   peer's request, answers once with [`Book::selection_message`] (never the
//!   peer's own address) and closes. The peer's self-reported listen
//!   address enters the book as new (CometBFT's seed does the same), to be
//!   tried by the next round before it is handed out as good.
//! - Rounds: every `--recrawl-every` seconds, the entries due are tried
//!   (`--concurrency` at once), and the entries learned meanwhile in the
//!   same round; a node reached with its ID is good, and the addresses it
//!   reports enter the book with it as their source, at most
//!   `--max-new-per-source` of them untested at once ([`Book::add_from`]);
//!   the book is saved after each round (written beside, renamed into
//!   place).
//! - Untested entries are judged fast: one that failed is tried again
//!   `--retry-after` seconds later (10), then twice that, without waiting
//!   for a round ([`Book::next_retry`]); 3 failures in a row make an entry
//!   bad, and bad entries are dropped. A dialed port that is closed fails
//!   at once, so a flood of dead addresses is gone within about 30 s of
//!   its first try. A failed try ends before the seed's `PexRequest` (the
//!   node was not reached, or is another node or on another network), so
//!   the retries ask no node for addresses: each node is asked at most
//!   once per recheck interval.
//! - A visitor gets the good entries first, and at most one untested one
//!   for every four good ones ([`Book::selection`]).
//! - `--metrics ADDR`: Prometheus text (GET /metrics), set through the
//!   `metrics` facade into the exporter every command shares
//!   ([`crate::exporter`]).
//!
//! # Not provided
//! - No consensus, mempool or blocks: only the PEX channel is listed.
//! - No persistent peers, no outbound PEX of its own beyond the rounds.
//! - CometBFT's bucket structure, and what else the book does not do (see
//!   [`p2p_conn_mconn::pex::book`]); entries' sources are not saved in the
//!   book file, so after a restart the untested entries loaded count
//!   against no source.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use p2p_conn::io::tokio as ptokio;
use p2p_conn::nodeinfo::{self, NodeInfo};
use p2p_conn::{keyfile, Config, Identity, NodeId};
use p2p_conn_mconn::pex::book::{Added, Book, BookConfig, Entry, Standing};
use p2p_conn_mconn::pex::{
    AddrPolicy, Direction, NetAddress, PeerAddr, PexMessage, RequestVerdict, Requests,
    RequestsConfig, MAX_PEX_MESSAGE_SIZE, PEX_CHANNEL,
};
use p2p_conn_mconn::{ChannelDescriptor, Event, MConnConfig, MConnCore};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::addrbook::{self, BookEntry};
use crate::conn;
use crate::error::CliError;
use crate::exporter::Exporter;
use crate::inbound::{self, Gate, Limits, Pass};
use crate::visit::probe;
use crate::visit::report::{Report, Status, Target};

/// The moniker the seed announces.
pub const SEED_MONIKER: &str = "p2p-conn-seed";

/// How long an inbound peer has to send its `PexRequest` after the
/// NodeInfo exchange (a CometBFT node asks a seed at once).
const REQUEST_WAIT: Duration = Duration::from_secs(10);

/// Bound on an inbound connection's handshake and NodeInfo exchange.
const INBOUND_SETUP: Duration = Duration::from_secs(10);

/// Bound on writing the answer, and on the hang-up after it.
const ANSWER_WAIT: Duration = Duration::from_secs(2);

/// An inbound connection after the handshake.
type Secret = ptokio::SecretConnection<TcpStream>;

#[derive(clap::Args)]
pub struct SeedArgs {
    /// Where to listen, e.g. 0.0.0.0:26656 or tcp://0.0.0.0:26656
    #[arg(long, value_parser = conn::listen_address)]
    listen: SocketAddr,
    /// The address to announce in NodeInfo [default: --listen's]
    #[arg(long)]
    external: Option<SocketAddr>,
    /// The network (chain ID) this seed serves
    #[arg(long)]
    network: String,
    /// The seed's node_key.json (its ID, which nodes' `seeds` name;
    /// `p2p-conn keygen` makes one)
    #[arg(long)]
    key: PathBuf,
    /// Where to start, comma-separated ID@HOST:PORT (repeatable); may be
    /// empty when --book already holds addresses
    #[arg(long, value_delimiter = ',')]
    seeds: Vec<String>,
    /// The address book, a CometBFT addrbook.json: loaded at start if it
    /// exists, saved after each round
    #[arg(long)]
    book: PathBuf,
    /// Most entries in the book
    #[arg(long, default_value_t = 10_000)]
    book_size: usize,
    /// Seconds between rounds of re-crawling
    #[arg(long, default_value_t = 30.0)]
    recrawl_every: f64,
    /// Seconds before an entry is tried again
    #[arg(long, default_value_t = 600.0)]
    recheck_after: f64,
    /// Seconds before an untested entry that failed is tried again,
    /// doubled after each further failure (3 in a row make it bad)
    #[arg(long, default_value_t = 10.0)]
    retry_after: f64,
    /// Most untested addresses one node's answers may have in the book at
    /// once (all nodes of one address group, IPv4 /16 or IPv6 /32: 4
    /// times that)
    #[arg(long, default_value_t = 250)]
    max_new_per_source: usize,
    /// Most nodes tried at once in a round
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Bound on one outbound visit, in seconds
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// Most inbound connections at once; when full, the oldest one still
    /// in its handshake (or authenticated and idle) is closed for a
    /// newcomer
    #[arg(long, default_value_t = 64)]
    max_inbound: usize,
    /// Most inbound connections at once from one IP address (past it, a
    /// newcomer is closed at once)
    #[arg(long, default_value_t = 4)]
    max_per_ip: usize,
    /// Also keep and hand out addresses that are not publicly routable
    /// (local and private test networks)
    #[arg(long)]
    allow_unroutable: bool,
    /// Serve Prometheus metrics on ADDR (GET /metrics)
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
}

/// What the seed counts, for the metrics and its log.
#[derive(Default)]
struct Counters {
    answered: AtomicU64,
    addrs_sent: AtomicU64,
    other_network: AtomicU64,
    unsolicited: AtomicU64,
    failed_inbound: AtomicU64,
    tries: AtomicU64,
    reached: AtomicU64,
    evicted: AtomicU64,
    source_capped: AtomicU64,
    rounds: AtomicU64,
}

struct Seed {
    identity: Identity,
    network: String,
    announced: SocketAddr,
    policy: AddrPolicy,
    book: Mutex<Book>,
    requests: Mutex<Requests>,
    counters: Counters,
    inbound: Arc<Gate>,
    key_hex: String,
    /// The shuffles' randomness: drawn from the OS once, stepped per
    /// answer ([`Seed::shuffle_seed`]), so an answer costs no syscall.
    shuffles: AtomicU64,
}

pub fn run(args: SeedArgs) -> Result<(), CliError> {
    let identity = keyfile::load(&args.key)?;
    let every = conn::seconds("--recrawl-every", args.recrawl_every)?;
    let recheck = conn::seconds("--recheck-after", args.recheck_after)?;
    let retry = conn::seconds("--retry-after", args.retry_after)?;
    let timeout = conn::seconds("--timeout", args.timeout)?;
    if args.concurrency == 0 || args.max_inbound == 0 || args.max_per_ip == 0 {
        return Err(CliError::usage(
            "--concurrency, --max-inbound and --max-per-ip must be at least 1",
        ));
    }
    if args.max_new_per_source == 0 {
        return Err(CliError::usage("--max-new-per-source must be at least 1"));
    }
    let policy = if args.allow_unroutable {
        AddrPolicy::AcceptUnroutable
    } else {
        AddrPolicy::Strict
    };
    let mut book = Book::new(
        BookConfig::default()
            .with_max_size(args.book_size)
            .with_recheck_after(recheck)
            .with_retry_after(retry)
            .with_max_new_per_source(args.max_new_per_source),
    );
    let mut key_hex = addrbook::new_key();
    if args.book.exists() {
        let text = std::fs::read_to_string(&args.book)
            .map_err(|e| CliError::usage(format!("cannot read {}: {e}", args.book.display())))?;
        let (key, entries, skipped) = addrbook::from_json(&text)
            .map_err(|e| CliError::usage(format!("{}: {e}", args.book.display())))?;
        if key.len() == 48 {
            key_hex = key;
        }
        let (now, wall) = (Instant::now(), SystemTime::now());
        let back = |t: Option<SystemTime>| {
            t.and_then(|t| wall.duration_since(t).ok())
                .and_then(|ago| now.checked_sub(ago))
        };
        let mut loaded = 0;
        for e in entries {
            let Some(addr) = peer_addr(e.id, e.addr, policy) else {
                continue;
            };
            book.restore(Entry {
                addr,
                source: None,
                standing: if e.good {
                    Standing::Good
                } else {
                    Standing::New
                },
                failures: e.attempts,
                last_try: back(e.last_attempt),
                last_success: back(e.last_success),
            });
            loaded += 1;
        }
        eprintln!(
            "book {}: {loaded} addresses loaded{}",
            args.book.display(),
            if skipped > 0 {
                format!(", {skipped} unreadable skipped")
            } else {
                String::new()
            }
        );
    }
    for s in &args.seeds {
        let (addr, id) = conn::peer_address(s)?;
        let id = id.ok_or_else(|| CliError::usage(format!("--seeds {s:?}: want ID@HOST:PORT")))?;
        let sock: SocketAddr = addr.parse().map_err(|_| {
            CliError::usage(format!("--seeds {s:?}: the host must be an IP address"))
        })?;
        // Seeds are given, so any address is taken, as crawl takes its seeds.
        let pa = peer_addr(id, sock, AddrPolicy::AcceptUnroutable).ok_or_else(|| {
            CliError::usage(format!("--seeds {s:?}: not an address a node dials"))
        })?;
        book.add(pa);
    }
    if book.entries().next().is_none() {
        return Err(CliError::usage(
            "nothing to start from: give --seeds, or a --book that holds addresses",
        ));
    }
    let metrics =
        match args.metrics {
            Some(addr) => Some(crate::metrics_http::bind(addr).map_err(|e| {
                CliError::usage(format!("--metrics {addr}: cannot listen there: {e}"))
            })?),
            None => None,
        };
    let rt = conn::runtime()?;
    rt.block_on(async move {
        let listener = TcpListener::bind(args.listen)
            .await
            .map_err(|e| CliError::usage(format!("--listen {}: {e}", args.listen)))?;
        let bound = listener.local_addr().map_err(CliError::Io)?;
        let announced = args.external.unwrap_or(bound);
        let seed = Arc::new(Seed {
            network: args.network.clone(),
            announced,
            policy,
            book: Mutex::new(book),
            requests: Mutex::new(Requests::new(
                RequestsConfig::default().with_seed_mode(true),
            )),
            counters: Counters::default(),
            inbound: Gate::new(Limits {
                max_open: args.max_inbound,
                max_per_ip: args.max_per_ip,
            }),
            key_hex,
            shuffles: AtomicU64::new(rand_core::RngCore::next_u64(&mut rand_core::OsRng)),
            identity,
        });
        eprintln!(
            "seed {}@{bound} for network {} (announcing {announced})",
            seed.identity.node_id(),
            seed.network
        );
        if let Some(l) = metrics {
            let l = TcpListener::from_std(l).map_err(CliError::Io)?;
            let (s, exporter) = (Arc::clone(&seed), Exporter::new());
            let render = move || {
                exporter.record(|| s.record());
                exporter.render()
            };
            tokio::spawn(crate::metrics_http::serve(l, Arc::new(render)));
        }
        let crawler = tokio::spawn(rounds(
            Arc::clone(&seed),
            every,
            timeout,
            args.concurrency,
            args.book.clone(),
        ));
        let accept = accept_loop(Arc::clone(&seed), listener);
        tokio::select! {
            _ = accept => {}
            _ = crawler => {}
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate() => {}
        }
        seed.save(&args.book);
        eprintln!(
            "stopped; answered {} requests; book saved to {}",
            seed.counters.answered.load(Ordering::Relaxed),
            args.book.display()
        );
        Ok(())
    })
}

/// SIGTERM.
async fn terminate() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut s) => {
            s.recv().await;
        }
        Err(_) => std::future::pending::<()>().await,
    }
}

/// A node's address as the book keeps it, if the rules take it.
fn peer_addr(
    id: NodeId,
    addr: SocketAddr,
    policy: AddrPolicy,
) -> Option<p2p_conn_mconn::pex::PeerAddr> {
    NetAddress {
        id: id.to_string(),
        ip: addr.ip().to_string(),
        port: u32::from(addr.port()),
    }
    .validate(policy)
    .ok()
}

impl Seed {
    /// A fresh seed for one answer's shuffle: a counter started from the
    /// OS's randomness. The book's shuffle mixes its seed (SplitMix64), so
    /// two answers' shuffles are unrelated.
    fn shuffle_seed(&self) -> u64 {
        self.shuffles.fetch_add(1, Ordering::Relaxed)
    }

    fn save(&self, path: &std::path::Path) {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let at = |t: Option<Instant>| t.map(|t| wall - now.saturating_duration_since(t));
        let entries: Vec<BookEntry> = {
            let book = self.book.lock().expect("book");
            book.entries()
                .map(|e| BookEntry {
                    id: e.addr.id(),
                    addr: e.addr.socket_addr(),
                    good: e.standing == Standing::Good,
                    attempts: e.failures,
                    last_attempt: at(e.last_try),
                    last_success: at(e.last_success),
                })
                .collect()
        };
        if let Err(e) = addrbook::write_atomic(path, &addrbook::to_json(&self.key_hex, &entries)) {
            eprintln!("cannot save the book to {}: {e}", path.display());
        }
    }

    /// Set every series of the seed in the exporter the facade records
    /// into ([`crate::exporter`]), from the book and the counters.
    fn record(&self) {
        let (new, good, bad) = self.book.lock().expect("book").counts();
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let gate = self.inbound.counts();
        let (gauge, counter) = (true, false);
        for (name, is_gauge, help, v) in [
            (
                "book_new",
                gauge,
                "Book entries not reached yet.",
                new as u64,
            ),
            (
                "book_good",
                gauge,
                "Book entries reached on their last try.",
                good as u64,
            ),
            (
                "book_bad",
                gauge,
                "Book entries that failed their last tries.",
                bad as u64,
            ),
            (
                "inbound_total",
                counter,
                "Inbound connections accepted.",
                get(&gate.admitted),
            ),
            (
                "inbound_open",
                gauge,
                "Inbound connections open now.",
                self.inbound.open() as u64,
            ),
            (
                "inbound_evicted_total",
                counter,
                "Inbound connections closed unanswered to make room: --max-inbound reached.",
                get(&gate.evicted),
            ),
            (
                "refused_full_total",
                counter,
                "Inbound connections refused: --max-inbound reached, all being answered.",
                get(&gate.refused_full),
            ),
            (
                "refused_per_ip_total",
                counter,
                "Inbound connections refused: --max-per-ip reached.",
                get(&gate.refused_per_ip),
            ),
            (
                "answered_total",
                counter,
                "PexRequests answered.",
                get(&c.answered),
            ),
            (
                "addrs_sent_total",
                counter,
                "Addresses sent in answers.",
                get(&c.addrs_sent),
            ),
            (
                "other_network_total",
                counter,
                "Inbound peers of another network, hung up on.",
                get(&c.other_network),
            ),
            (
                "inbound_failed_total",
                counter,
                "Inbound connections that failed before an answer.",
                get(&c.failed_inbound),
            ),
            (
                "tries_total",
                counter,
                "Outbound visits of book entries.",
                get(&c.tries),
            ),
            (
                "reached_total",
                counter,
                "Outbound visits that reached the node.",
                get(&c.reached),
            ),
            (
                "evicted_total",
                counter,
                "Bad entries dropped from the book.",
                get(&c.evicted),
            ),
            (
                "source_cap_refused_total",
                counter,
                "Reported addresses not taken: their source had its cap of untested entries.",
                get(&c.source_capped),
            ),
            ("rounds_total", counter, "Re-crawl rounds.", get(&c.rounds)),
        ] {
            let name = format!("p2p_conn_seed_{name}");
            if is_gauge {
                metrics::describe_gauge!(name.clone(), help);
                metrics::gauge!(name).set(v as f64);
            } else {
                metrics::describe_counter!(name.clone(), help);
                metrics::counter!(name).absolute(v);
            }
        }
    }
}

/// Accepts inbound connections as [`crate::inbound`] admits them, each
/// on its own task.
async fn accept_loop(seed: Arc<Seed>, listener: TcpListener) {
    let gate = Arc::clone(&seed.inbound);
    inbound::serve(listener, gate, move |tcp, _, pass| {
        let s = Arc::clone(&seed);
        async move {
            // The whole visit is bounded: setup, the wait for a request,
            // the answer.
            let limit = INBOUND_SETUP + REQUEST_WAIT + Duration::from_secs(5);
            let done = tokio::time::timeout(limit, serve_inbound(&s, tcp, &pass)).await;
            if !matches!(done, Ok(true)) {
                s.counters.failed_inbound.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await
}

/// One inbound peer: handshake, NodeInfo, its request, our answer, close.
/// Whether it was answered. `pass` is marked authenticated after the
/// handshake and served once the answer is decided (from then on it is
/// not evicted).
async fn serve_inbound(seed: &Seed, tcp: TcpStream, pass: &Pass) -> bool {
    let _ = tcp.set_nodelay(true);
    let cfg = Config::default().handshake_timeout(INBOUND_SETUP);
    let Ok(mut sc) = ptokio::handshake(tcp, &seed.identity, &cfg).await else {
        return false;
    };
    pass.authenticated();
    let peer = sc.remote_node_id();
    let mut ours = NodeInfo::new(seed.identity.node_id(), seed.network.clone());
    ours.moniker = SEED_MONIKER.to_string();
    ours.listen_addr = seed.announced.to_string();
    ours.channels = vec![PEX_CHANNEL];
    // Ours first: a CometBFT node writes and reads at once, so either
    // order works with it.
    if nodeinfo::tokio::write(&mut sc, &ours).await.is_err() {
        return false;
    }
    let Ok(theirs) = nodeinfo::tokio::read(&mut sc).await else {
        return false;
    };
    if !theirs.validate().is_empty() || theirs.check_id(peer).is_err() {
        return false;
    }
    if theirs.network != seed.network {
        seed.counters.other_network.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    // Its own listen address, as its own source (CometBFT's AddPeer for
    // an inbound peer): new, until a round reaches it.
    if let Some(sock) = theirs
        .listen_addr
        .trim_start_matches("tcp://")
        .parse::<SocketAddr>()
        .ok()
        .and_then(|a| peer_addr(peer, a, seed.policy))
    {
        seed.book.lock().expect("book").add(sock);
    }
    let pex = ChannelDescriptor::new(PEX_CHANNEL).with_recv_message_capacity(MAX_PEX_MESSAGE_SIZE);
    let Ok(mut core) = MConnCore::new(MConnConfig::default(), &[pex], Instant::now()) else {
        return false;
    };
    // The peer's first message must be its request; anything else (its
    // addresses unasked, something that does not decode, the end) ends
    // the visit.
    let first = tokio::time::timeout(REQUEST_WAIT, first_message(&mut sc, &mut core)).await;
    let request = match first {
        Ok(Some(data)) => match PexMessage::decode(&data) {
            Ok(PexMessage::Request) => true,
            // Addresses unasked: CometBFT stops such a peer
            // (`Violation::Unsolicited`); none is taken.
            Ok(PexMessage::Addrs(_)) => {
                seed.counters.unsolicited.fetch_add(1, Ordering::Relaxed);
                false
            }
            Err(_) => false,
        },
        _ => false,
    };
    let verdict = request.then(|| {
        seed.requests
            .lock()
            .expect("requests")
            .on_request(peer, Direction::Inbound, Instant::now())
    });
    let mut answered = false;
    if let Some(RequestVerdict::AnswerAndDisconnect | RequestVerdict::Answer) = verdict {
        pass.serving();
        let seed_bits = seed.shuffle_seed();
        let (answer, n) = seed
            .book
            .lock()
            .expect("book")
            .selection_message(Some(&peer), seed_bits);
        let n = n as u64;
        let sent = core.send(PEX_CHANNEL, answer);
        let written = tokio::time::timeout(ANSWER_WAIT, transmit(&mut sc, &mut core)).await;
        if sent.is_ok() && matches!(written, Ok(Ok(()))) {
            answered = true;
            seed.counters.answered.fetch_add(1, Ordering::Relaxed);
            seed.counters.addrs_sent.fetch_add(n, Ordering::Relaxed);
        }
    }
    // Hang up after the answer: our end of the stream (CometBFT's
    // FlushStop), then the socket is closed.
    let _ = tokio::time::timeout(ANSWER_WAIT, sc.shutdown()).await;
    seed.requests.lock().expect("requests").remove(&peer);
    answered
}

/// The peer's first whole message over MConnection, driven here over the
/// secret connection (a visit is one request and one answer: no tasks of
/// its own, no send queue); its pings are answered meanwhile. `None` when
/// the stream ends or breaks a rule first.
async fn first_message(sc: &mut Secret, core: &mut MConnCore) -> Option<Vec<u8>> {
    loop {
        let input = sc.fill_buf().await.ok()?;
        if input.is_empty() {
            return None;
        }
        let (used, event) = core.handle_input(Instant::now(), input).ok()?;
        sc.consume(used);
        match event {
            Some(Event::Message { data, .. }) => return Some(data),
            Some(Event::Ping) => transmit(sc, core).await.ok()?,
            // No receive limit is set, so the core takes input until an
            // event; taking none would be a stall.
            None if used == 0 => return None,
            _ => {}
        }
    }
}

/// What `core` has queued (the answer, a pong), written and flushed.
async fn transmit(sc: &mut Secret, core: &mut MConnCore) -> std::io::Result<()> {
    let mut out = Vec::new();
    while core.poll_transmit(Instant::now(), &mut out, 64 * 1024) > 0 {
        sc.write_all(&out).await?;
        out.clear();
    }
    sc.flush().await
}

/// The book's upkeep. A round every `every`: the entries due are tried
/// (`concurrency` at once), then bad entries are dropped and the book is
/// saved. Between rounds, as soon as an untested entry falls due for a
/// retry ([`Book::next_retry`]), the entries due are tried the same way,
/// without a save.
async fn rounds(
    seed: Arc<Seed>,
    every: Duration,
    timeout: Duration,
    concurrency: usize,
    path: PathBuf,
) {
    let mut next_round = tokio::time::Instant::now();
    let mut dropped = 0;
    loop {
        let retry = seed
            .book
            .lock()
            .expect("book")
            .next_retry(Instant::now())
            .map(tokio::time::Instant::from_std);
        tokio::time::sleep_until(retry.map_or(next_round, |r| r.min(next_round))).await;
        let round = tokio::time::Instant::now() >= next_round;
        try_due(&seed, timeout, concurrency).await;
        let evicted = seed.book.lock().expect("book").evict_bad();
        seed.counters
            .evicted
            .fetch_add(evicted as u64, Ordering::Relaxed);
        dropped += evicted;
        if !round {
            continue;
        }
        next_round = (next_round + every).max(tokio::time::Instant::now());
        seed.counters.rounds.fetch_add(1, Ordering::Relaxed);
        seed.save(&path);
        let (new, good, bad) = seed.book.lock().expect("book").counts();
        eprintln!(
            "{} round: book {good} good, {new} new, {bad} bad ({dropped} dropped); answered {} requests so far",
            crate::wall_clock::now(),
            seed.counters.answered.load(Ordering::Relaxed)
        );
        dropped = 0;
    }
}

/// Tries the entries due, `concurrency` at once, and those that fall due
/// meanwhile (learned from the answers), each at most once, until none is
/// due and none is out; each outcome goes into the book as it comes.
async fn try_due(seed: &Arc<Seed>, timeout: Duration, concurrency: usize) {
    let mut out: HashMap<tokio::task::Id, PeerAddr> = HashMap::new();
    let mut done: HashSet<NodeId> = HashSet::new();
    let mut queue: VecDeque<PeerAddr> = VecDeque::new();
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        if queue.is_empty() {
            let due = seed
                .book
                .lock()
                .expect("book")
                .due(Instant::now(), usize::MAX);
            queue.extend(due.into_iter().filter(|a| !done.contains(&a.id())));
        }
        while tasks.len() < concurrency {
            let Some(pa) = queue.pop_front() else {
                break;
            };
            if !done.insert(pa.id()) {
                continue;
            }
            let task = tasks.spawn(visit(Arc::clone(seed), pa, timeout));
            out.insert(task.id(), pa);
        }
        let Some(ended) = tasks.join_next_with_id().await else {
            break;
        };
        // A visit that panicked counts as a failed try.
        let (id, report) = match ended {
            Ok((id, report)) => (id, report),
            Err(e) => (e.id(), None),
        };
        if let Some(pa) = out.remove(&id) {
            judge(seed, pa, report);
        }
    }
}

/// One visit of a book entry, bounded; `None` when it overran.
async fn visit(seed: Arc<Seed>, pa: PeerAddr, timeout: Duration) -> Option<Report> {
    let target = Target {
        addr: pa.socket_addr().to_string(),
        id: Some(pa.id()),
        depth: 0,
    };
    let opts = probe::ProbeOptions::new(timeout);
    let visit = probe::probe(&target, &seed.identity, &opts, |id, info| {
        probe::expected(pa.id(), Some(&seed.network), true, id, info)
    });
    let limit = 2 * timeout + Duration::from_secs(3);
    tokio::time::timeout(limit, visit).await.ok()
}

/// A visit's outcome into the book: reached or failed, and the addresses
/// the node reported, learned from it as their source.
fn judge(seed: &Seed, pa: PeerAddr, report: Option<Report>) {
    seed.counters.tries.fetch_add(1, Ordering::Relaxed);
    // Reached: the node proved the ID and is on the network.
    let reached = report.as_ref().is_some_and(|r| {
        r.node_id == Some(pa.id())
            && r.status.reachable()
            && !matches!(r.status, Status::OtherNetwork | Status::IdMismatch { .. })
    });
    if reached {
        seed.counters.reached.fetch_add(1, Ordering::Relaxed);
    }
    let mut book = seed.book.lock().expect("book");
    book.tried(&pa.id(), reached, Instant::now());
    let mut capped = 0;
    if let Some(r) = report.filter(|r| r.status == Status::Ok) {
        for a in r.addrs.iter().flatten() {
            if let Ok(p) = a.validate(seed.policy) {
                if book.add_from(p, &pa) == Added::SourceFull {
                    capped += 1;
                }
            }
        }
    }
    seed.counters
        .source_capped
        .fetch_add(capped, Ordering::Relaxed);
}
