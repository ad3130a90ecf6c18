//! The scheduler's rules, over the fake network ([`super::fake`]).

use super::fake::{addr_of, opts, run, run_full, Fake};
use super::*;
use p2p_conn::Identity;

use crate::visit::report::{Report, Status, Target};

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
    assert_eq!(
        s.handle_timeout(t0 + Duration::from_secs(5)),
        vec![(p, vec![])]
    );
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
    assert_eq!(s.complete(p, late, t0 + Duration::from_secs(5)), None);
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

/// A probe that gives up by itself at the crawl's deadline (a connect
/// timeout as long as the crawl's) races the scheduler's timeout: when the
/// timeout is handled first and the probe's own report comes after, the
/// visit is still reported once.
#[test]
fn a_visit_that_times_out_is_reported_once() {
    let mut f = Fake::new(4);
    for i in 1..4 {
        f.link(0, i);
    }
    f.nodes[1].late = true;
    f.nodes[2].late = true;
    f.nodes[3].hangs = true;
    let r = run_full(&f, vec![f.seed(0)], opts());
    assert_eq!(r.crawl.visits.len(), 4);
    let mut seen = r.reported.clone();
    seen.sort_unstable();
    assert_eq!(seen, vec![0, 1, 2, 3], "reported: {:?}", r.reported);
    for i in 1..4 {
        assert_eq!(status_of(&r.crawl, &addr_of(i)), Status::Timeout);
    }
}

#[test]
fn a_node_without_pex_is_not_asked_for_addresses() {
    let mut f = Fake::new(2);
    f.link(0, 1);
    f.nodes[1].pex = false;
    let (c, asked, _) = run(&f, vec![f.seed(0)], opts());
    assert_eq!(status_of(&c, &addr_of(1)), Status::NoPex);
    assert_eq!(asked.len(), 1);
}

/// A probe whose answer is in leaves its dial slot (the next dial starts
/// while it waits for the rest of a snapshot listing), its addresses are
/// followed at once, and its visit is reported once, at its end: by its
/// own report, or at its deadline with what it had at the answer. At most
/// `linger` such wait at once.
#[test]
fn an_answered_probe_leaves_its_slot() {
    let mut f = Fake::new(4);
    f.link(0, 1);
    f.link(0, 2);
    let o = Options {
        concurrency: 1,
        linger: 2,
        ..opts()
    };
    let mut s = Scheduler::new(vec![f.seed(0), f.seed(3)], o);
    let now = Instant::now();
    let (p0, t0) = s.next(now).unwrap();
    // One probe until the network is known, and one at once.
    assert!(s.next(now).is_none());
    let mut r0 = f.probe(&mut s, p0, &t0, now).unwrap();
    s.answered(p0, &mut r0, now);
    assert_eq!(r0.addrs, None, "the addresses are taken");
    assert_eq!(r0.answered, Some(2));
    // Its slot is free: the next seed is dialed; the answer's addresses
    // are queued behind it.
    let (p1, t1) = s.next(now).unwrap();
    assert_eq!(t1.addr, addr_of(3));
    assert!(s.next(now).is_none());
    assert_eq!(s.running(), 2);
    // Seed 3 answers too: two probes wait (linger 2), so no dial until
    // one ends.
    let mut r1 = f.probe(&mut s, p1, &t1, now).unwrap();
    s.answered(p1, &mut r1, now);
    assert!(s.next(now).is_none());
    // Probe 0 ends with its listing: reported once, with its edges.
    r0.snapshots = Some(vec![]);
    let edges = s.complete(p0, r0, now).expect("ends now");
    assert_eq!(edges.len(), 2);
    let (p2, t2) = s.next(now).unwrap();
    assert_eq!(t2.addr, addr_of(1));
    assert!(s.next(now).is_none());
    // Probe 1 reaches its deadline before its end: reported with what it
    // had at the answer; its own report later is dropped.
    let late = now + Duration::from_secs(5);
    let ended = s.handle_timeout(late);
    assert_eq!(ended.len(), 2, "{ended:?}");
    assert_eq!(ended[0], (p1, vec![]));
    assert_eq!(ended[1].0, p2);
    assert_eq!(s.complete(p1, r1, late), None);
    let r = s.visit(p1).report.clone().unwrap();
    assert_eq!((r.status, r.answered), (Status::Ok, Some(0)));
    assert_eq!(s.visit(p2).report.clone().unwrap().status, Status::Timeout);
    let c0 = s.visit(p0).report.clone().unwrap();
    assert_eq!((c0.answered, c0.snapshots), (Some(2), Some(vec![])));
}

/// A node without PEX is claimed (not visited again) and asked for its
/// state only.
#[test]
fn a_node_without_pex_is_asked_for_its_state() {
    let mut f = Fake::new(1);
    f.nodes[0].pex = false;
    let mut s = Scheduler::new(vec![f.seed(0), f.seed(0)], opts());
    let now = Instant::now();
    let (p, _) = s.next(now).unwrap();
    assert_eq!(
        s.claim(p, f.nodes[0].id, &f.info(0), now),
        Verdict::AskState(Status::NoPex)
    );
}
