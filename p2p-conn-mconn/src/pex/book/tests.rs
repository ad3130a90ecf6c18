//! The book's rules, one test each.

use super::*;
use crate::pex::AddrPolicy;
use p2p_conn::Identity;

fn addr(port: u16) -> PeerAddr {
    addr_at("1.2.3.4", port)
}

fn addr_at(ip: &str, port: u16) -> PeerAddr {
    NetAddress {
        id: Identity::generate().node_id().to_string(),
        ip: ip.into(),
        port: u32::from(port),
    }
    .validate(AddrPolicy::Strict)
    .unwrap()
}

/// `n` fresh addresses learned from `source`, and what the book said.
fn report(b: &mut Book, source: &PeerAddr, n: u16) -> Vec<(PeerAddr, Added)> {
    (0..n)
        .map(|i| {
            let a = addr_at("9.9.9.9", 1000 + i);
            (a, b.add_from(a, source))
        })
        .collect()
}

fn ids(s: &[NetAddress]) -> Vec<String> {
    s.iter().map(|a| a.id.clone()).collect()
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
    assert_eq!(b.entries().count(), 0);
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
    assert_eq!(b.entries().count(), 2);
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
    // 40 known: 32 would be sent, but 9 good may bring only 2 new.
    assert_eq!(s.len(), 11);
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

#[test]
fn one_source_adds_at_most_its_cap_of_untested_entries() {
    let cfg = BookConfig::default()
        .with_max_new_per_source(3)
        .with_max_failures(1);
    let mut b = Book::new(cfg);
    let (liar, other) = (addr_at("5.5.5.5", 1), addr_at("6.6.6.6", 1));
    let got = report(&mut b, &liar, 5);
    let verdicts: Vec<Added> = got.iter().map(|(_, v)| *v).collect();
    assert_eq!(
        verdicts,
        [
            Added::New,
            Added::New,
            Added::New,
            Added::SourceFull,
            Added::SourceFull
        ]
    );
    assert_eq!(b.entries().count(), 3);
    // A known ID is known, whoever reports it; another source is not
    // held back by the first.
    assert_eq!(b.add_from(got[0].0, &liar), Added::Known);
    assert_eq!(report(&mut b, &other, 1)[0].1, Added::New);
    // Testing frees the room: one turns good, one bad (and dropped).
    let t0 = Instant::now();
    b.tried(&got[0].0.id(), true, t0);
    b.tried(&got[1].0.id(), false, t0);
    assert_eq!(b.evict_bad(), 1);
    let more = report(&mut b, &liar, 3);
    assert_eq!(more[0].1, Added::New);
    assert_eq!(more[1].1, Added::New);
    assert_eq!(more[2].1, Added::SourceFull);
    // Without a source (the operator's, a node's own address): no cap.
    for i in 1..=5 {
        assert_eq!(b.add(addr(i)), Added::New);
    }
}

#[test]
fn sources_in_one_address_group_share_four_times_the_cap() {
    let mut b = Book::new(BookConfig::default().with_max_new_per_source(2));
    // Four IDs in 7.7.0.0/16 fill the group's 8; a fifth ID there gets
    // nothing, one in 7.8.0.0/16 gets its own 2.
    for i in 0..4 {
        let src = addr_at(&format!("7.7.{i}.1"), 1);
        assert!(report(&mut b, &src, 3).iter().map(|(_, v)| *v).eq([
            Added::New,
            Added::New,
            Added::SourceFull
        ]));
    }
    let fifth = addr_at("7.7.200.1", 1);
    assert_eq!(report(&mut b, &fifth, 1)[0].1, Added::SourceFull);
    let next_group = addr_at("7.8.0.1", 1);
    assert_eq!(report(&mut b, &next_group, 1)[0].1, Added::New);
    assert_eq!(b.entries().count(), 9);
}

#[test]
fn a_restored_entry_counts_against_its_source() {
    let mut b = Book::new(BookConfig::default().with_max_new_per_source(1));
    let src = addr_at("5.5.5.5", 1);
    let entry = Entry {
        addr: addr(1),
        source: Some(src),
        standing: Standing::New,
        failures: 0,
        last_try: None,
        last_success: None,
    };
    assert_eq!(b.restore(entry), Added::New);
    assert_eq!(report(&mut b, &src, 1)[0].1, Added::SourceFull);
}

#[test]
fn an_untested_entry_that_fails_is_retried_soon_then_dropped() {
    // The defaults: retry after 10 s, doubling; bad at 3 failures.
    let mut b = Book::new(BookConfig::default());
    let (src, good) = (addr_at("5.5.5.5", 1), addr(2));
    let dead = report(&mut b, &src, 1)[0].0;
    b.add(good);
    let t0 = Instant::now();
    let s = Duration::from_secs;
    assert_eq!(b.next_retry(t0), Some(t0), "never tried: due at once");
    b.tried(&good.id(), true, t0);
    b.tried(&dead.id(), false, t0);
    assert_eq!(b.next_retry(t0), Some(t0 + s(10)));
    assert!(b.due(t0 + s(9), 10).is_empty());
    assert_eq!(b.due(t0 + s(10), 10), vec![dead]);
    b.tried(&dead.id(), false, t0 + s(10));
    assert!(b.due(t0 + s(29), 10).is_empty());
    assert_eq!(b.next_retry(t0 + s(11)), Some(t0 + s(30)));
    b.tried(&dead.id(), false, t0 + s(30));
    assert_eq!(b.get(&dead.id()).unwrap().standing, Standing::Bad);
    // Bad: never due, no retry; dropped.
    assert!(b.due(t0 + s(599), 10).is_empty());
    assert_eq!(b.next_retry(t0 + s(30)), None);
    assert_eq!(b.evict_bad(), 1);
    // A good entry that fails keeps the recheck pace: 10 min.
    b.tried(&good.id(), false, t0 + s(600));
    assert!(b.due(t0 + s(610), 10).is_empty());
    assert_eq!(b.next_retry(t0 + s(610)), None);
    assert_eq!(b.due(t0 + s(1200), 10), vec![good]);
}

#[test]
fn the_retry_wait_doubles_up_to_the_recheck_interval() {
    let cfg = BookConfig::default()
        .with_max_failures(10)
        .with_retry_after(Duration::from_secs(10))
        .with_recheck_after(Duration::from_secs(60));
    let mut b = Book::new(cfg);
    let a = addr(1);
    b.add(a);
    let mut t = Instant::now();
    let mut waits = Vec::new();
    for _ in 0..5 {
        b.tried(&a.id(), false, t);
        let next = b.next_retry(t).unwrap();
        waits.push((next - t).as_secs());
        t = next;
    }
    assert_eq!(waits, [10, 20, 40, 60, 60]);
}

#[test]
fn due_takes_sources_in_turns() {
    let mut b = Book::new(BookConfig::default());
    let (flood, honest) = (addr_at("5.5.5.5", 1), addr_at("6.6.6.6", 1));
    report(&mut b, &flood, 50);
    let one = report(&mut b, &honest, 1)[0].0;
    let now = Instant::now();
    for max in [2, 3] {
        let due = b.due(now, max);
        assert_eq!(due.len(), max);
        assert!(due.contains(&one), "one source took all {max} slots");
    }
    assert_eq!(b.due(now, usize::MAX).len(), 51);
}

#[test]
fn a_selection_sends_one_untested_per_four_good_at_most() {
    let mut b = Book::new(BookConfig::default());
    let t0 = Instant::now();
    let src = addr_at("5.5.5.5", 1);
    let untested: Vec<PeerAddr> = report(&mut b, &src, 30).into_iter().map(|x| x.0).collect();
    // Nothing reached yet: nothing sent.
    assert!(b.selection(None, 1).is_empty());
    let good: Vec<PeerAddr> = (1..=9).map(addr).collect();
    for a in &good {
        b.add(*a);
        b.tried(&a.id(), true, t0);
    }
    // 39 known: 32 would be sent; 9 good bring 2 untested.
    for seed in 0..20 {
        let s = ids(&b.selection(None, seed));
        assert_eq!(s.len(), 11);
        for (i, id) in s.iter().enumerate() {
            let is_good = good.iter().any(|g| g.id().to_string() == *id);
            assert_eq!(is_good, i < 9, "good ones first: {s:?}");
            assert!(is_good || untested.iter().any(|u| u.id().to_string() == *id));
        }
    }
    // Enough good ones to fill an answer: no untested one at all.
    let more: Vec<PeerAddr> = (10..=40).map(addr).collect();
    for a in &more {
        b.add(*a);
        b.tried(&a.id(), true, t0);
    }
    let s = ids(&b.selection(None, 3));
    assert_eq!(s.len(), answer_len(b.entries().count()));
    assert!(s
        .iter()
        .all(|id| !untested.iter().any(|u| u.id().to_string() == *id)));
}

#[test]
fn the_untested_share_of_a_selection_comes_in_turns_by_source() {
    let mut b = Book::new(BookConfig::default());
    let t0 = Instant::now();
    for a in (1..=8).map(addr) {
        b.add(a);
        b.tried(&a.id(), true, t0);
    }
    let (flood, honest) = (addr_at("5.5.5.5", 1), addr_at("6.6.6.6", 1));
    report(&mut b, &flood, 100);
    let one = report(&mut b, &honest, 1)[0].0.id().to_string();
    // 8 good bring 2 untested: one per source, whatever the shuffle.
    for seed in 0..20 {
        let s = ids(&b.selection(None, seed));
        assert_eq!(s.len(), 10);
        assert!(s.contains(&one), "seed {seed}: {s:?}");
    }
}

/// A book with every kind of entry: good ones reached on their last try,
/// good ones that failed since, untested ones of two sources, bad ones,
/// IPv4 and IPv6.
fn mixed_book() -> (Book, Vec<PeerAddr>) {
    let mut b = Book::new(BookConfig::default().with_max_failures(2));
    let t0 = Instant::now();
    let good: Vec<PeerAddr> = (1..=12)
        .map(addr)
        .chain((1..=6).map(|p| addr_at("2a01:4f8::1", p)))
        .chain((1..=3).map(|p| addr_at("::ffff:8.8.8.8", p)))
        .collect();
    for a in &good {
        b.add(*a);
        b.tried(&a.id(), true, t0);
    }
    for a in &good[..4] {
        b.tried(&a.id(), false, t0);
    }
    for a in (100..110).map(addr) {
        b.add(a);
        b.tried(&a.id(), false, t0);
        b.tried(&a.id(), false, t0);
    }
    report(&mut b, &addr_at("5.5.5.5", 1), 40);
    report(&mut b, &addr_at("6.6.6.6", 1), 3);
    (b, good)
}

#[test]
fn a_selection_message_is_the_selection_encoded() {
    let (b, good) = mixed_book();
    for seed in 0..20 {
        for exclude in [None, Some(good[5].id())] {
            let s = b.selection(exclude.as_ref(), seed);
            let (bytes, n) = b.selection_message(exclude.as_ref(), seed);
            assert_eq!(n, s.len());
            assert_eq!(bytes, crate::pex::PexMessage::Addrs(s).encode());
        }
    }
}

#[test]
fn an_entry_record_is_its_address_as_prost_encodes_it() {
    use prost::Message;
    let (b, _) = mixed_book();
    for s in b.entries.values() {
        let a = s.entry.addr.socket_addr();
        let by_prost = crate::pex::wire::PexAddrs {
            addrs: vec![crate::pex::wire::NetAddress {
                id: s.entry.addr.id().to_string().into_bytes(),
                ip: a.ip().to_string().into_bytes(),
                port: u32::from(a.port()),
            }],
        }
        .encode_to_vec();
        assert_eq!(&*s.record, &by_prost[..], "{}", s.entry.addr);
    }
}

#[test]
fn a_selection_sends_those_reached_last_before_those_failing_since() {
    let (b, good) = mixed_book();
    let failing: Vec<String> = good[..4].iter().map(|a| a.id().to_string()).collect();
    let mut seen = std::collections::HashSet::new();
    for seed in 0..40 {
        let s = ids(&b.selection(None, seed));
        // 21 good of 74 known: 21 sent, then 5 untested.
        assert_eq!(s.len(), 26, "{s:?}");
        let good_ids: Vec<String> = good.iter().map(|a| a.id().to_string()).collect();
        assert!(s[..17]
            .iter()
            .all(|id| good_ids.contains(id) && !failing.contains(id)));
        assert!(s[17..21].iter().all(|id| failing.contains(id)));
        assert!(s[21..].iter().all(|id| !good_ids.contains(id)));
        seen.insert(s[0].clone());
    }
    // Shuffled: the first place is not always the same entry.
    assert!(seen.len() > 5, "{seen:?}");
}
