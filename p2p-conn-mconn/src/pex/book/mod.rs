//! An address book for a seed or a crawler that keeps a network's
//! addresses fresh: which nodes are known, which answered lately, which
//! keep failing, and what to hand a peer that asks.
//!
//! # Design
//! Sans-IO, like the rest of [`pex`](super): the caller dials, and reports
//! each outcome with [`Book::tried`]; the clock (`now`) and the randomness
//! of a selection (`seed`) are passed in. One entry per node ID, with the
//! address it was first learned at and the node that reported it (its
//! source).
//!
//! # Rules
//! - **Learning** ([`Book::add_from`], [`Book::add`]): an address that
//!   passed [`NetAddress::validate`](super::NetAddress::validate) enters as
//!   [`Standing::New`] (untested). A known ID keeps its entry (and its
//!   first address, as CometBFT's book does: a report cannot move a node).
//!   A full book makes room by dropping a [`Standing::Bad`] entry, else the
//!   new entry that failed most; it never drops a [`Standing::Good`] entry
//!   for a new one, and refuses the new one instead.
//! - **One source cannot fill the book** ([`Book::add_from`]): a source
//!   (the node whose answer reported the address) may have at most
//!   [`BookConfig::with_max_new_per_source`] untested entries in the book
//!   at once (250 by default, the most one CometBFT answer holds), and all
//!   sources in one address group (IPv4 /16, IPv6 /32) together four times
//!   that; past it, its further addresses are refused
//!   ([`Added::SourceFull`]). Testing frees the room: an entry that turns
//!   good or bad no longer counts.
//! - **Checking** ([`Book::due`], [`Book::tried`], [`Book::next_retry`]):
//!   an entry never tried is due at once. An untested entry that failed is
//!   retried soon, [`BookConfig::with_retry_after`] after its first
//!   failure (10 s by default), then twice that, and so on; an entry that
//!   was reached is tried again once per recheck interval
//!   ([`BookConfig::with_recheck_after`], 10 min). The entries due come in
//!   turns by source (within one source, the oldest try first, never tried
//!   before all), so that one source's entries never hold every slot of a
//!   caller that tries a few at a time. A try that reached the node and
//!   got its ID makes it [`Standing::Good`] and clears its failures; a
//!   failed one counts, and enough failures in a row
//!   ([`BookConfig::with_max_failures`], 3) make it [`Standing::Bad`] (a
//!   good node that goes away turns bad the same way, at the recheck pace).
//!   With the defaults an unreachable untested address is bad about 30 s
//!   after its first try.
//! - **Forgetting** ([`Book::evict_bad`]): bad entries are dropped.
//! - **Answering** ([`Book::selection`]): what a seed sends a peer: good
//!   entries (shuffled, those reached on their last try first), as many as
//!   CometBFT's `GetSelection` sends for a book this size ([`answer_len`]);
//!   only if fewer good ones exist, at most one untested entry for every
//!   four good ones sent, taken in turns by source; never one that failed,
//!   never a bad one, never the asking peer's own; cut to what one
//!   `PexAddrs` carries ([`fit_answer`]). [`Book::selection_message`] is
//!   the same answer as the bytes of its `PexAddrs`, assembled from each
//!   entry's address as encoded once, when the entry was learned.
//!
//! # Guarantees
//! - At most [`BookConfig::with_max_size`] entries, and one count per
//!   source and per address group that has untested entries.
//! - Whatever one source reports, at most its cap of its addresses sit
//!   untested in the book at any time, and at most four times that for its
//!   address group.
//! - At least 80 % of every answer are entries the book has reached (good
//!   ones); a book that has reached nobody answers with nothing.
//! - An untested entry that never answers turns bad at its
//!   [`BookConfig::with_max_failures`]th try, each retry due as soon as its
//!   wait is over: with the defaults, 30 s after its first try (10 s, then
//!   20 s); it is dropped at the next [`Book::evict_bad`].
//!
//! # Not provided
//! CometBFT's bucket structure (new and old tables keyed by source group):
//! this book bounds what one source adds by its count of untested
//! entries, and hands out what it has reached itself. Addresses given
//! without a source ([`Book::add`]: the operator's, a node's own listen
//! address) count against no source. A liar with node IDs in many address
//! groups is bounded only by the book's size. A refused address is not
//! kept for later (the source is asked again at its next recheck). The
//! book does not pace the tries: it says what is due, and the caller
//! decides how many at once. Persistence is the caller's
//! ([`Book::entries`], [`Book::restore`]).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use p2p_conn::NodeId;

use super::answer::fit_count;
use super::{addrs_message, answer_len, encode_addr, fit_answer, NetAddress, PeerAddr};

/// How many times one source's cap of untested entries
/// ([`BookConfig::with_max_new_per_source`]) all sources in one address
/// group may have together.
const GROUP_SOURCES: usize = 4;

/// A selection sends at most one untested entry for this many good ones.
const UNTESTED_PER_GOOD: usize = 4;

/// How a book is bounded and how it judges.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BookConfig {
    /// The most entries (default 10,000).
    pub(crate) max_size: usize,
    /// Failed tries in a row that make an entry bad (default 3).
    pub(crate) max_failures: u32,
    /// The least time between two tries of an entry once reached (default
    /// 10 min).
    pub(crate) recheck_after: Duration,
    /// Untested entries one source may have at once (default 250).
    pub(crate) max_new_per_source: usize,
    /// The wait before an untested entry's first retry (default 10 s).
    pub(crate) retry_after: Duration,
}

impl Default for BookConfig {
    fn default() -> Self {
        BookConfig {
            max_size: 10_000,
            max_failures: 3,
            recheck_after: Duration::from_secs(600),
            max_new_per_source: super::MAX_ANSWER_ADDRS,
            retry_after: Duration::from_secs(10),
        }
    }
}

impl BookConfig {
    /// The same with another bound on the entries (at least 1; default
    /// 10,000).
    pub fn with_max_size(mut self, max_size: usize) -> Self {
        self.max_size = max_size.max(1);
        self
    }

    /// The same with another least time between two tries of an entry
    /// that was reached (default 10 min).
    pub fn with_recheck_after(mut self, recheck_after: Duration) -> Self {
        self.recheck_after = recheck_after;
        self
    }

    /// The same with another count of failed tries in a row that make an
    /// entry bad (at least 1; default 3).
    pub fn with_max_failures(mut self, max_failures: u32) -> Self {
        self.max_failures = max_failures.max(1);
        self
    }

    /// The same with another bound on the untested entries one source may
    /// have in the book at once (at least 1; default 250, CometBFT's
    /// `maxGetSelection`); an address group's sources together four times
    /// that.
    pub fn with_max_new_per_source(mut self, max: usize) -> Self {
        self.max_new_per_source = max.max(1);
        self
    }

    /// The same with another wait before an untested entry that failed is
    /// tried again (default 10 s; doubled after each further failure, at
    /// most the recheck interval).
    pub fn with_retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = retry_after;
        self
    }
}

/// What the book thinks of an entry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Standing {
    /// Learned, not reached yet (untested).
    New,
    /// Reached: a try got the node's ID, and fewer than
    /// [`BookConfig::with_max_failures`] tries failed since.
    Good,
    /// Failed too many tries in a row ([`BookConfig::with_max_failures`]).
    Bad,
}

/// One node the book knows.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Where it was first learned to be.
    pub addr: PeerAddr,
    /// The node whose answer reported it ([`Book::add_from`]); `None` when
    /// it came otherwise ([`Book::add`], [`Book::restore`] of an entry
    /// without one).
    pub source: Option<PeerAddr>,
    /// What the book thinks of it.
    pub standing: Standing,
    /// Failed tries since the last success.
    pub failures: u32,
    /// When it was last tried.
    pub last_try: Option<Instant>,
    /// When a try last reached it.
    pub last_success: Option<Instant>,
}

/// What [`Book::add`] or [`Book::add_from`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Added {
    /// A new entry.
    New,
    /// The ID was known: nothing changed.
    Known,
    /// The book is full of entries it will not drop for a new one.
    Full,
    /// The source, or its address group, has as many untested entries in
    /// the book as it may ([`BookConfig::with_max_new_per_source`]).
    SourceFull,
}

/// An address group, as CometBFT groups sources: an IPv4 /16, an IPv6
/// /32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Group {
    V4([u8; 2]),
    V6([u8; 4]),
}

impl Group {
    fn of(addr: &PeerAddr) -> Group {
        match addr.socket_addr().ip() {
            IpAddr::V4(v4) => {
                let o = v4.octets();
                Group::V4([o[0], o[1]])
            }
            IpAddr::V6(v6) => {
                let o = v6.octets();
                Group::V6([o[0], o[1], o[2], o[3]])
            }
        }
    }
}

/// When an entry is next due for a try.
enum Due {
    /// At once: never tried.
    Now,
    At(Instant),
    /// Past what an `Instant` holds.
    Never,
}

/// The untested entries of each source and each source group.
#[derive(Clone, Debug, Default)]
struct Untested {
    by_source: HashMap<NodeId, usize>,
    by_group: HashMap<Group, usize>,
}

impl Untested {
    /// The source and group `e` counts against, if it counts.
    fn key(e: &Entry) -> Option<(NodeId, Group)> {
        let s = e.source.filter(|_| e.standing == Standing::New)?;
        Some((s.id(), Group::of(&s)))
    }

    fn count(&mut self, key: Option<(NodeId, Group)>, up: bool) {
        let Some((id, group)) = key else {
            return;
        };
        fn step<K: std::hash::Hash + Eq + Copy>(m: &mut HashMap<K, usize>, k: K, up: bool) {
            let n = m.entry(k).or_default();
            if up {
                *n += 1;
            } else {
                *n = n.saturating_sub(1);
            }
            if *n == 0 {
                m.remove(&k);
            }
        }
        step(&mut self.by_source, id, up);
        step(&mut self.by_group, group, up);
    }
}

/// An entry, and its address as an answer carries it (its record in a
/// `PexAddrs`, written once when the entry is learned), so that an answer
/// is assembled without formatting.
#[derive(Clone, Debug)]
struct Slot {
    entry: Entry,
    record: Box<[u8]>,
}

impl Slot {
    fn new(entry: Entry) -> Slot {
        let record = {
            let a = entry.addr.socket_addr();
            let mut out = Vec::new();
            encode_addr(
                &NetAddress {
                    id: entry.addr.id().to_string(),
                    ip: a.ip().to_string(),
                    port: u32::from(a.port()),
                },
                &mut out,
            );
            out.into_boxed_slice()
        };
        Slot { entry, record }
    }
}

/// The book; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct Book {
    config: BookConfig,
    /// By ID, so that a selection walks them in one order without
    /// sorting.
    entries: BTreeMap<NodeId, Slot>,
    untested: Untested,
}

impl Book {
    /// An empty book.
    pub fn new(config: BookConfig) -> Book {
        Book {
            config,
            entries: BTreeMap::new(),
            untested: Untested::default(),
        }
    }

    /// How many entries of each standing: (new, good, bad); their sum is
    /// the book's size.
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for s in self.entries.values() {
            match s.entry.standing {
                Standing::New => c.0 += 1,
                Standing::Good => c.1 += 1,
                Standing::Bad => c.2 += 1,
            }
        }
        c
    }

    /// The entry of `id`.
    pub fn get(&self, id: &NodeId) -> Option<&Entry> {
        self.entries.get(id).map(|s| &s.entry)
    }

    /// Every entry, in no order (to save the book).
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values().map(|s| &s.entry)
    }

    /// Puts back a saved entry (loading a book), by the rules of
    /// [`add`](Self::add) for a full book; the source caps do not apply.
    pub fn restore(&mut self, entry: Entry) -> Added {
        let id = entry.addr.id();
        if self.entries.contains_key(&id) {
            return Added::Known;
        }
        if self.entries.len() >= self.config.max_size && !self.make_room() {
            return Added::Full;
        }
        self.untested.count(Untested::key(&entry), true);
        self.entries.insert(id, Slot::new(entry));
        Added::New
    }

    /// Learns `addr` from no node's answer: the operator's, or a node's
    /// own listen address (see the module docs).
    pub fn add(&mut self, addr: PeerAddr) -> Added {
        self.restore(Entry {
            addr,
            source: None,
            standing: Standing::New,
            failures: 0,
            last_try: None,
            last_success: None,
        })
    }

    /// Learns `addr` from `source`'s answer, within the source's cap of
    /// untested entries (see the module docs).
    pub fn add_from(&mut self, addr: PeerAddr, source: &PeerAddr) -> Added {
        if self.entries.contains_key(&addr.id()) {
            return Added::Known;
        }
        let cap = self.config.max_new_per_source;
        let of = |n: Option<&usize>| n.copied().unwrap_or(0);
        if of(self.untested.by_source.get(&source.id())) >= cap
            || of(self.untested.by_group.get(&Group::of(source)))
                >= cap.saturating_mul(GROUP_SOURCES)
        {
            return Added::SourceFull;
        }
        self.restore(Entry {
            addr,
            source: Some(*source),
            standing: Standing::New,
            failures: 0,
            last_try: None,
            last_success: None,
        })
    }

    /// Drops one entry a new one may replace: a bad one, else the new one
    /// that failed most; among equals the lowest ID, so that the choice is
    /// deterministic.
    fn make_room(&mut self) -> bool {
        let victim = self
            .entries
            .values()
            .map(|s| &s.entry)
            .filter(|e| e.standing != Standing::Good)
            .max_by(|a, b| {
                (
                    a.standing == Standing::Bad,
                    a.failures,
                    std::cmp::Reverse(a.addr.id()),
                )
                    .cmp(&(
                        b.standing == Standing::Bad,
                        b.failures,
                        std::cmp::Reverse(b.addr.id()),
                    ))
            })
            .map(|e| e.addr.id());
        match victim.and_then(|id| self.entries.remove(&id)) {
            Some(s) => {
                self.untested.count(Untested::key(&s.entry), false);
                true
            }
            None => false,
        }
    }

    /// When `e` is next due.
    fn next_try(&self, e: &Entry) -> Due {
        let Some(last) = e.last_try else {
            return Due::Now;
        };
        let wait = if e.standing == Standing::New && e.failures > 0 {
            let doubled = 1u32 << (e.failures - 1).min(20);
            self.config
                .retry_after
                .saturating_mul(doubled)
                .min(self.config.recheck_after)
        } else {
            self.config.recheck_after
        };
        last.checked_add(wait).map_or(Due::Never, Due::At)
    }

    fn is_due(&self, e: &Entry, now: Instant) -> bool {
        e.standing != Standing::Bad
            && match self.next_try(e) {
                Due::Now => true,
                Due::At(t) => t <= now,
                Due::Never => false,
            }
    }

    /// Up to `max` entries to try now (see the module docs): in turns by
    /// source, within a source never tried first, then the oldest tries.
    pub fn due(&self, now: Instant, max: usize) -> Vec<PeerAddr> {
        let mut due: Vec<&Entry> = self
            .entries
            .values()
            .map(|s| &s.entry)
            .filter(|e| self.is_due(e, now))
            .collect();
        due.sort_by_key(|e| (e.last_try, e.addr.id()));
        in_turns(&mut due, |e| e);
        due.into_iter().take(max).map(|e| e.addr).collect()
    }

    /// When an untested entry is next due (`now` if one is due already),
    /// so that a caller that tries entries on a schedule can retry those
    /// sooner; `None` if there is none.
    pub fn next_retry(&self, now: Instant) -> Option<Instant> {
        self.entries
            .values()
            .map(|s| &s.entry)
            .filter(|e| e.standing == Standing::New)
            .filter_map(|e| match self.next_try(e) {
                Due::Now => Some(now),
                Due::At(t) => Some(t.max(now)),
                Due::Never => None,
            })
            .min()
    }

    /// A try of `id` ended at `now`: `reached` when the node answered with
    /// its ID (the handshake and its NodeInfo), whatever came after.
    /// Unknown IDs are ignored.
    pub fn tried(&mut self, id: &NodeId, reached: bool, now: Instant) {
        let max_failures = self.config.max_failures;
        let Some(e) = self.entries.get_mut(id).map(|s| &mut s.entry) else {
            return;
        };
        let before = Untested::key(e);
        e.last_try = Some(now);
        if reached {
            e.standing = Standing::Good;
            e.failures = 0;
            e.last_success = Some(now);
        } else {
            e.failures = e.failures.saturating_add(1);
            if e.failures >= max_failures {
                e.standing = Standing::Bad;
            }
        }
        let after = Untested::key(e);
        if before != after {
            self.untested.count(before, false);
            self.untested.count(after, true);
        }
    }

    /// Drops the bad entries; how many.
    pub fn evict_bad(&mut self) -> usize {
        // Bad entries count against no source: the tally stands.
        let before = self.entries.len();
        self.entries
            .retain(|_, s| s.entry.standing != Standing::Bad);
        before - self.entries.len()
    }

    /// What to send a peer that asks (see the module docs), shuffled by
    /// `seed` (the caller's randomness), without `exclude` (the peer).
    pub fn selection(&self, exclude: Option<&NodeId>, seed: u64) -> Vec<NetAddress> {
        let chosen: Vec<NetAddress> = self
            .pick(exclude, seed)
            .into_iter()
            .map(|s| {
                let a = s.entry.addr.socket_addr();
                NetAddress {
                    id: s.entry.addr.id().to_string(),
                    ip: a.ip().to_string(),
                    port: u32::from(a.port()),
                }
            })
            .collect();
        let fits = fit_answer(&chosen).len();
        let mut chosen = chosen;
        chosen.truncate(fits);
        chosen
    }

    /// The same [`selection`](Self::selection) for the same `exclude` and
    /// `seed`, as the bytes [`PexMessage::encode`](super::PexMessage::encode)
    /// writes for its `PexAddrs`, and how many addresses it holds: what a
    /// seed sends, assembled from each entry's address encoded once.
    pub fn selection_message(&self, exclude: Option<&NodeId>, seed: u64) -> (Vec<u8>, usize) {
        let chosen = self.pick(exclude, seed);
        let fits = fit_count(chosen.iter().map(|s| s.record.len()));
        let records: Vec<&[u8]> = chosen[..fits].iter().map(|s| &*s.record).collect();
        (addrs_message(&records), fits)
    }

    /// The entries of a selection, before the cut to what one `PexAddrs`
    /// carries: good ones in random order (those reached on their last
    /// try first), then the untested share in turns by source. Only as
    /// many are shuffled as are sent.
    fn pick(&self, exclude: Option<&NodeId>, seed: u64) -> Vec<&Slot> {
        let (mut reached, mut failing) = (Vec::new(), Vec::new());
        for s in self.entries.values() {
            let e = &s.entry;
            if e.standing == Standing::Good && Some(&e.addr.id()) != exclude {
                if e.failures == 0 {
                    reached.push(s);
                } else {
                    failing.push(s);
                }
            }
        }
        let n = answer_len(self.entries.len());
        let good_n = (reached.len() + failing.len()).min(n);
        let mut rng = SplitMix(seed);
        let from_reached = reached.len().min(good_n);
        rng.shuffle_first(&mut reached, from_reached);
        reached.truncate(from_reached);
        let from_failing = good_n - from_reached;
        rng.shuffle_first(&mut failing, from_failing);
        let mut chosen = reached;
        chosen.extend_from_slice(&failing[..from_failing]);
        let new_n = (n - good_n).min(good_n / UNTESTED_PER_GOOD);
        if new_n > 0 {
            let mut new: Vec<&Slot> = self
                .entries
                .values()
                .filter(|s| {
                    let e = &s.entry;
                    e.standing == Standing::New && e.failures == 0 && Some(&e.addr.id()) != exclude
                })
                .collect();
            rng.shuffle(&mut new);
            in_turns(&mut new, |s| &s.entry);
            chosen.extend(new.into_iter().take(new_n));
        }
        chosen
    }
}

/// Reorders `v` in turns by source: every source's first entry, then
/// every source's second, and so on, each source's in the order given (an
/// entry without a source is a source of its own).
fn in_turns<T>(v: &mut Vec<T>, entry: impl Fn(&T) -> &Entry) {
    let mut seen: HashMap<NodeId, usize> = HashMap::new();
    let mut ranked: Vec<(usize, T)> = v
        .drain(..)
        .map(|x| {
            let e = entry(&x);
            let n = seen
                .entry(e.source.map_or(e.addr.id(), |s| s.id()))
                .or_default();
            *n += 1;
            (*n, x)
        })
        .collect();
    ranked.sort_by_key(|(turn, _)| *turn);
    v.extend(ranked.into_iter().map(|(_, x)| x));
}

/// A small deterministic generator for the shuffle (SplitMix64): the
/// randomness is the caller's seed.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Fisher-Yates.
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }

    /// Fisher-Yates stopped after the first `k` places: those hold `k`
    /// of `v` drawn at random, in random order (`k` at most `v.len()`).
    fn shuffle_first<T>(&mut self, v: &mut [T], k: usize) {
        for i in 0..k.min(v.len()) {
            let j = i + (self.next() % (v.len() - i) as u64) as usize;
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests;
