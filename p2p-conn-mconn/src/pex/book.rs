//! An address book for a seed or a crawler that keeps a network's
//! addresses fresh: which nodes are known, which answered lately, which
//! keep failing, and what to hand a peer that asks.
//!
//! # Design
//! Sans-IO, like the rest of [`pex`](super): the caller dials, and reports
//! each outcome with [`Book::tried`]; the clock (`now`) and the randomness
//! of a selection (`seed`) are passed in. One entry per node ID, with the
//! address it was first learned at.
//!
//! # Rules
//! - **Learning** ([`Book::add`]): an address that passed
//!   [`NetAddress::validate`](super::NetAddress::validate) enters as
//!   [`Standing::New`]. A known ID keeps its entry (and its first address,
//!   as CometBFT's book does: a report cannot move a node). A full book
//!   makes room by dropping a [`Standing::Bad`] entry, else the new entry
//!   that failed most; it never drops a
//!   [`Standing::Good`] entry for a new one, and refuses the new one
//!   instead.
//! - **Checking** ([`Book::due`], [`Book::tried`]): entries never tried
//!   come first, then those whose last try is oldest, each at most once per
//!   recheck interval ([`BookConfig::with_recheck_after`]). A try that reached the node and got its
//!   ID makes it [`Standing::Good`] and clears its failures; a failed one
//!   counts, and enough failures in a row
//!   ([`BookConfig::with_max_failures`]) make it
//!   [`Standing::Bad`] (a good node that goes away turns bad the same way).
//! - **Forgetting** ([`Book::evict_bad`]): bad entries are dropped.
//! - **Answering** ([`Book::selection`]): what a seed sends a peer, as
//!   many addresses as CometBFT's `GetSelection` sends for a book this size
//!   ([`answer_len`]), good ones first (shuffled), then
//!   new ones that have not failed, never bad ones and never the asking
//!   peer's own, cut to what one `PexAddrs` carries
//!   ([`fit_answer`]).
//!
//! # Not provided
//! CometBFT's bucket structure (new and old tables keyed by source group):
//! this book defends against a flood by its size bound and by preferring
//! addresses it has reached itself, not by source groups. Persistence is
//! the caller's ([`Book::entries`], [`Book::restore`]).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use p2p_conn::NodeId;

use super::{answer_len, fit_answer, NetAddress, PeerAddr};

/// How a book is bounded and how it judges.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BookConfig {
    /// The most entries (default 10,000).
    pub(crate) max_size: usize,
    /// Failed tries in a row that make an entry bad (default 3).
    pub(crate) max_failures: u32,
    /// The least time between two tries of one entry (default 10 min).
    pub(crate) recheck_after: Duration,
}

impl Default for BookConfig {
    fn default() -> Self {
        BookConfig {
            max_size: 10_000,
            max_failures: 3,
            recheck_after: Duration::from_secs(600),
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

    /// The same with another least time between two tries of one entry
    /// (default 10 min).
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
}

/// What the book thinks of an entry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Standing {
    /// Learned, not reached yet (or not since it was learned).
    New,
    /// Reached: its last try got the node's ID.
    Good,
    /// Failed too many tries in a row ([`BookConfig::with_max_failures`]).
    Bad,
}

/// One node the book knows.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Where it was first learned to be.
    pub addr: PeerAddr,
    /// What the book thinks of it.
    pub standing: Standing,
    /// Failed tries since the last success.
    pub failures: u32,
    /// When it was last tried.
    pub last_try: Option<Instant>,
    /// When a try last reached it.
    pub last_success: Option<Instant>,
}

/// What [`Book::add`] did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Added {
    /// A new entry.
    New,
    /// The ID was known: nothing changed.
    Known,
    /// The book is full of entries it will not drop for a new one.
    Full,
}

/// The book; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct Book {
    config: BookConfig,
    entries: HashMap<NodeId, Entry>,
}

impl Book {
    /// An empty book.
    pub fn new(config: BookConfig) -> Book {
        Book {
            config,
            entries: HashMap::new(),
        }
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many entries of each standing: (new, good, bad).
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for e in self.entries.values() {
            match e.standing {
                Standing::New => c.0 += 1,
                Standing::Good => c.1 += 1,
                Standing::Bad => c.2 += 1,
            }
        }
        c
    }

    /// The entry of `id`.
    pub fn get(&self, id: &NodeId) -> Option<&Entry> {
        self.entries.get(id)
    }

    /// Every entry, in no order (to save the book).
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values()
    }

    /// Puts back a saved entry (loading a book), by the rules of
    /// [`add`](Self::add) for a full book.
    pub fn restore(&mut self, entry: Entry) -> Added {
        let id = entry.addr.id();
        if self.entries.contains_key(&id) {
            return Added::Known;
        }
        if self.entries.len() >= self.config.max_size && !self.make_room() {
            return Added::Full;
        }
        self.entries.insert(id, entry);
        Added::New
    }

    /// Learns `addr` (see the module docs).
    pub fn add(&mut self, addr: PeerAddr) -> Added {
        self.restore(Entry {
            addr,
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
        match victim {
            Some(id) => {
                self.entries.remove(&id);
                true
            }
            None => false,
        }
    }

    /// Up to `max` entries to try now: never tried first, then the oldest
    /// tries, none tried within [`BookConfig::with_recheck_after`].
    pub fn due(&self, now: Instant, max: usize) -> Vec<PeerAddr> {
        let mut due: Vec<&Entry> = self
            .entries
            .values()
            .filter(|e| {
                e.last_try
                    .is_none_or(|t| now.saturating_duration_since(t) >= self.config.recheck_after)
            })
            .collect();
        due.sort_by_key(|e| (e.last_try, e.addr.id()));
        due.into_iter().take(max).map(|e| e.addr).collect()
    }

    /// A try of `id` ended at `now`: `reached` when the node answered with
    /// its ID (the handshake and its NodeInfo), whatever came after.
    /// Unknown IDs are ignored.
    pub fn tried(&mut self, id: &NodeId, reached: bool, now: Instant) {
        let max_failures = self.config.max_failures;
        let Some(e) = self.entries.get_mut(id) else {
            return;
        };
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
    }

    /// Drops the bad entries; how many.
    pub fn evict_bad(&mut self) -> usize {
        let before = self.entries.len();
        self.entries.retain(|_, e| e.standing != Standing::Bad);
        before - self.entries.len()
    }

    /// What to send a peer that asks (see the module docs), shuffled by
    /// `seed` (the caller's randomness), without `exclude` (the peer).
    pub fn selection(&self, exclude: Option<&NodeId>, seed: u64) -> Vec<NetAddress> {
        let pick = |standing: Standing| {
            let mut v: Vec<&Entry> = self
                .entries
                .values()
                .filter(|e| e.standing == standing && Some(&e.addr.id()) != exclude)
                .filter(|e| standing != Standing::New || e.failures == 0)
                .collect();
            v.sort_by_key(|e| e.addr.id());
            v
        };
        let mut good = pick(Standing::Good);
        let mut new = pick(Standing::New);
        let mut rng = SplitMix(seed);
        rng.shuffle(&mut good);
        rng.shuffle(&mut new);
        let n = answer_len(self.entries.len());
        let chosen: Vec<NetAddress> = good
            .into_iter()
            .chain(new)
            .take(n)
            .map(|e| {
                let a = e.addr.socket_addr();
                NetAddress {
                    id: e.addr.id().to_string(),
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pex::AddrPolicy;
    use p2p_conn::Identity;

    fn addr(port: u16) -> PeerAddr {
        NetAddress {
            id: Identity::generate().node_id().to_string(),
            ip: "1.2.3.4".into(),
            port: u32::from(port),
        }
        .validate(AddrPolicy::Strict)
        .unwrap()
    }

    #[test]
    fn a_node_keeps_its_first_address() {
        let mut b = Book::new(BookConfig::default());
        let a = addr(1);
        assert_eq!(b.add(a), Added::New);
        let moved = NetAddress {
            id: a.id().to_string(),
            ip: "5.6.7.8".into(),
            port: 2,
        }
        .validate(AddrPolicy::Strict)
        .unwrap();
        assert_eq!(b.add(moved), Added::Known);
        assert_eq!(b.get(&a.id()).unwrap().addr, a);
    }

    #[test]
    fn failures_make_an_entry_bad_and_a_success_good() {
        let mut b = Book::new(BookConfig::default().with_max_failures(2));
        let (a, c) = (addr(1), addr(2));
        b.add(a);
        b.add(c);
        let t0 = Instant::now();
        b.tried(&a.id(), true, t0);
        assert_eq!(b.get(&a.id()).unwrap().standing, Standing::Good);
        b.tried(&c.id(), false, t0);
        assert_eq!(b.get(&c.id()).unwrap().standing, Standing::New);
        b.tried(&c.id(), false, t0);
        assert_eq!(b.get(&c.id()).unwrap().standing, Standing::Bad);
        // A good node that goes away turns bad too.
        b.tried(&a.id(), false, t0);
        b.tried(&a.id(), false, t0);
        assert_eq!(b.counts(), (0, 0, 2));
        assert_eq!(b.evict_bad(), 2);
        assert!(b.is_empty());
    }

    #[test]
    fn due_puts_the_untried_first_and_waits_the_recheck_interval() {
        let cfg = BookConfig::default().with_recheck_after(Duration::from_secs(60));
        let mut b = Book::new(cfg);
        let (a, c) = (addr(1), addr(2));
        b.add(a);
        b.add(c);
        let t0 = Instant::now();
        b.tried(&a.id(), true, t0);
        assert_eq!(b.due(t0, 10), vec![c]);
        b.tried(&c.id(), true, t0 + Duration::from_secs(30));
        assert!(b.due(t0 + Duration::from_secs(59), 10).is_empty());
        assert_eq!(b.due(t0 + Duration::from_secs(60), 10), vec![a]);
        assert_eq!(b.due(t0 + Duration::from_secs(90), 1), vec![a]);
        assert_eq!(b.due(t0 + Duration::from_secs(90), 10).len(), 2);
    }

    #[test]
    fn a_full_book_drops_bad_then_failing_new_never_good() {
        let mut b = Book::new(BookConfig::default().with_max_size(2));
        let (a, c, d) = (addr(1), addr(2), addr(3));
        b.add(a);
        b.add(c);
        let t0 = Instant::now();
        b.tried(&a.id(), true, t0);
        b.tried(&c.id(), false, t0);
        // c (new, one failure) makes room for d.
        assert_eq!(b.add(d), Added::New);
        assert!(b.get(&c.id()).is_none());
        b.tried(&d.id(), true, t0);
        // Both good: a new address is refused.
        assert_eq!(b.add(addr(4)), Added::Full);
        assert_eq!(b.len(), 2);
    }

    #[test]
    fn a_selection_prefers_good_skips_bad_and_the_asker() {
        let mut b = Book::new(BookConfig::default().with_max_failures(1));
        let all: Vec<PeerAddr> = (1..=40).map(addr).collect();
        for a in &all {
            b.add(*a);
        }
        let t0 = Instant::now();
        for a in &all[..10] {
            b.tried(&a.id(), true, t0);
        }
        for a in &all[10..15] {
            b.tried(&a.id(), false, t0);
        }
        let asker = all[0].id();
        let s = b.selection(Some(&asker), 7);
        // 40 known: at least 32 sent, or all that may be: 9 good + 25 new.
        assert_eq!(s.len(), 32);
        let ids: Vec<String> = s.iter().map(|a| a.id.clone()).collect();
        assert!(!ids.contains(&asker.to_string()));
        for a in &all[1..10] {
            assert!(ids.contains(&a.id().to_string()), "a good one is missing");
        }
        for a in &all[10..15] {
            assert!(!ids.contains(&a.id().to_string()), "a bad one is sent");
        }
        // The good ones come first; another seed, another order.
        assert!(s[..9]
            .iter()
            .all(|a| all[1..10].iter().any(|g| g.id().to_string() == a.id)));
        assert_ne!(b.selection(Some(&asker), 8), s);
        assert_eq!(b.selection(Some(&asker), 7), s);
    }
}
