//! CometBFT's PEX rules (`p2p_conn_mconn::pex`): address validation, the
//! requests a node takes (`Requests`), the requests we send (`Asks`) and
//! the size of an answer, each at its boundaries, on a clock the test
//! drives. The expected verdicts for addresses are what CometBFT v0.38.26's
//! `NetAddressFromProto`, `NetAddress.Valid` and `NetAddress.Routable`
//! return for the same input.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use p2p_conn::NodeId;
use p2p_conn_mconn::pex::{
    answer_len, check_message, fit_answer, AddrError, AddrPolicy, AddrsVerdict, AskVerdict, Asks,
    Direction, NetAddress, PexMessage, RequestVerdict, Requests, RequestsConfig, Violation,
    BAN_TIME, ENSURE_PEERS_PERIOD, FREE_REQUESTS, MAX_ANSWER_ADDRS, MAX_PEX_MESSAGE_SIZE,
    MIN_ANSWER_ADDRS, MIN_REQUEST_INTERVAL,
};
use proptest::prelude::*;

const ID: &str = "0123456789abcdef0123456789abcdef01234567";
const NS: Duration = Duration::from_nanos(1);

fn addr(id: &str, ip: &str, port: u32) -> NetAddress {
    NetAddress {
        id: id.into(),
        ip: ip.into(),
        port,
    }
}

fn at(ip: &str) -> NetAddress {
    addr(ID, ip, 26656)
}

fn strict(a: &NetAddress) -> Result<SocketAddr, AddrError> {
    a.validate(AddrPolicy::Strict).map(|p| p.socket_addr())
}

fn lenient(a: &NetAddress) -> Result<SocketAddr, AddrError> {
    a.validate(AddrPolicy::AcceptUnroutable)
        .map(|p| p.socket_addr())
}

fn peer(n: u8) -> NodeId {
    format!("{n:02x}{}", &ID[2..]).parse().unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

// ---- addresses -----------------------------------------------------------

#[test]
fn valid_addresses_pass_with_their_id_and_socket_address() {
    let p = at("8.8.8.8").validate(AddrPolicy::Strict).unwrap();
    assert_eq!(p.id(), ID.parse::<NodeId>().unwrap());
    assert_eq!(p.socket_addr(), "8.8.8.8:26656".parse().unwrap());
    assert!(p.is_routable());
    assert_eq!(p.to_string(), format!("{ID}@8.8.8.8:26656"));
    let v6 = addr(ID, "2a00::1", 1).validate(AddrPolicy::Strict).unwrap();
    assert_eq!(v6.to_string(), format!("{ID}@[2a00::1]:1"));
    // Go's hex.DecodeString takes either case.
    let upper = ID.to_uppercase();
    assert_eq!(
        strict(&addr(&upper, "8.8.8.8", 1)),
        Ok("8.8.8.8:1".parse().unwrap())
    );
    // An IPv4-mapped address is its IPv4 address.
    assert_eq!(
        strict(&at("::ffff:8.8.4.4")),
        Ok("8.8.4.4:26656".parse().unwrap())
    );
}

#[test]
fn net_address_displays_as_cometbft_prints_it() {
    // p2p/netaddress.go, NetAddress.String: IDAddressString(ID, DialString).
    assert_eq!(
        addr(ID, "1.2.3.4", 26656).to_string(),
        format!("{ID}@1.2.3.4:26656")
    );
    assert_eq!(
        addr(ID, "2001:db8::1", 26656).to_string(),
        format!("{ID}@[2001:db8::1]:26656")
    );
    assert_eq!(
        addr(ID, "::ffff:1.2.3.4", 26656).to_string(),
        format!("{ID}@1.2.3.4:26656")
    );
    assert_eq!(addr("", "1.2.3.4", 80).to_string(), "1.2.3.4:80");
    // Unchecked fields print as they came.
    assert_eq!(
        addr(ID, "example.com", 70000).to_string(),
        format!("{ID}@example.com:70000")
    );
    assert_eq!(addr("x", "1::g", 1).to_string(), "x@[1::g]:1");
}

#[test]
fn ports_from_1_to_65535() {
    assert!(strict(&addr(ID, "8.8.8.8", 1)).is_ok());
    assert!(strict(&addr(ID, "8.8.8.8", 65535)).is_ok());
    assert_eq!(
        strict(&addr(ID, "8.8.8.8", 65536)),
        Err(AddrError::PortOutOfRange(65536))
    );
    assert_eq!(
        strict(&addr(ID, "8.8.8.8", u32::MAX)),
        Err(AddrError::PortOutOfRange(u32::MAX))
    );
    assert!(AddrError::PortOutOfRange(65536).stops_peer());
    // Go's Valid takes port 0; it cannot be dialed, so it is refused here,
    // an address skipped, not a peer stopped.
    assert_eq!(strict(&addr(ID, "8.8.8.8", 0)), Err(AddrError::ZeroPort));
    assert_eq!(lenient(&addr(ID, "8.8.8.8", 0)), Err(AddrError::ZeroPort));
    assert!(!AddrError::ZeroPort.stops_peer());
}

#[test]
fn ids_must_be_40_hex_digits() {
    let cases = [
        ("", AddrError::NoId),
        (&ID[..39], AddrError::BadId(ID[..39].into())),
        (&ID[..38], AddrError::BadId(ID[..38].into())),
    ];
    for (id, want) in cases {
        assert_eq!(strict(&addr(id, "8.8.8.8", 1)), Err(want), "{id:?}");
    }
    assert!(!AddrError::NoId.stops_peer());
    assert!(!AddrError::BadId(String::new()).stops_peer());
    for id in [
        format!("{ID}0"),
        format!("{ID}01"),
        format!("zz{}", &ID[2..]),
        format!(" {}", &ID[1..]),
        format!("{}g", &ID[..39]),
    ] {
        assert_eq!(
            strict(&addr(&id, "8.8.8.8", 1)),
            Err(AddrError::BadId(id.clone())),
            "{id:?}"
        );
    }
}

#[test]
fn ips_go_cannot_read_are_refused() {
    for text in [
        "",
        "not-an-ip",
        "example.com",
        "127.0.0.01",
        "01.2.3.4",
        "1.2.3",
        " 1.2.3.4",
        "1.2.3.4 ",
        "[::1]",
        "fe80::1%eth0",
        "1.2.3.4:26656",
    ] {
        let e = strict(&at(text)).unwrap_err();
        assert_eq!(e, AddrError::NotAnIp(text.into()), "{text:?}");
        assert!(e.stops_peer());
    }
}

#[test]
fn ips_go_calls_invalid_are_refused_under_any_policy() {
    let cases = [
        ("0.0.0.0", AddrError::Unspecified(ip("0.0.0.0"))),
        ("::", AddrError::Unspecified(ip("::"))),
        ("::ffff:0.0.0.0", AddrError::Unspecified(ip("0.0.0.0"))),
        (
            "255.255.255.255",
            AddrError::Broadcast(ip("255.255.255.255")),
        ),
        (
            "::ffff:255.255.255.255",
            AddrError::Broadcast(ip("255.255.255.255")),
        ),
        ("2001:db8::1", AddrError::Documentation(ip("2001:db8::1"))),
        (
            "2001:db8:ffff:ffff::",
            AddrError::Documentation(ip("2001:db8:ffff:ffff::")),
        ),
    ];
    for (text, want) in cases {
        assert_eq!(strict(&at(text)), Err(want.clone()), "{text}");
        assert_eq!(lenient(&at(text)), Err(want.clone()), "{text}");
        assert!(!want.stops_peer());
    }
    // Just outside those.
    for text in [
        "255.255.255.254",
        "2001:db7:ffff::1",
        "2001:db9::1",
        "0.0.0.1",
    ] {
        assert!(lenient(&at(text)).is_ok(), "{text}");
    }
}

/// Unroutable by CometBFT's `Routable` (v0.38.26 says false for each).
const UNROUTABLE: [&str; 18] = [
    "127.0.0.1",
    "127.255.0.1",
    "::1",
    "::ffff:127.0.0.1",
    "0.1.2.3",
    "10.0.0.0",
    "10.255.255.255",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.1.1",
    "fe80::1",
    "fe80::ffff:ffff:ffff:ffff",
    "fc00::1",
    "fdff::1",
    "2001:10::1",
    "2001:1f::1",
    "::ffff:10.0.0.1",
];

/// Routable by CometBFT's `Routable` (v0.38.26 says true for each), some
/// right outside an unroutable range.
const ROUTABLE: [&str; 14] = [
    "8.8.8.8",
    "9.255.255.255",
    "11.0.0.0",
    "172.15.255.255",
    "172.32.0.1",
    "192.169.0.0",
    "100.64.0.1",
    "224.0.0.1",
    "128.0.0.1",
    "fe80:0:0:1::1",
    "2001:20::1",
    "2a00::1",
    "::127.0.0.1",
    "64:ff9b::1.2.3.4",
];

#[test]
fn unroutable_addresses_are_refused_when_strict_and_flagged_otherwise() {
    for text in UNROUTABLE {
        let e = strict(&at(text)).unwrap_err();
        assert!(
            matches!(e, AddrError::Unroutable { ip: got, .. } if got == lenient(&at(text)).unwrap().ip()),
            "{text}: {e:?}"
        );
        assert!(!e.stops_peer());
        let p = at(text).validate(AddrPolicy::AcceptUnroutable).unwrap();
        assert!(!p.is_routable(), "{text}");
    }
    for text in ROUTABLE {
        assert!(strict(&at(text)).is_ok(), "{text}");
        let p = at(text).validate(AddrPolicy::AcceptUnroutable).unwrap();
        assert!(p.is_routable(), "{text}");
    }
    assert_eq!(AddrPolicy::default(), AddrPolicy::Strict);
    assert_eq!(
        strict(&at("127.0.0.1")).unwrap_err().to_string(),
        "IP 127.0.0.1 is not routable (127.0.0.0/8, loopback)"
    );
}

#[test]
fn checks_run_in_go_order() {
    // The IP and port first (what stops the peer), then the ID.
    assert_eq!(
        strict(&addr("xyz", "nope", 1)),
        Err(AddrError::NotAnIp("nope".into()))
    );
    assert_eq!(
        strict(&addr("xyz", "8.8.8.8", 70000)),
        Err(AddrError::PortOutOfRange(70000))
    );
    assert_eq!(
        strict(&addr("xyz", "0.0.0.0", 0)),
        Err(AddrError::BadId("xyz".into()))
    );
    // Then the IP's kind, then port 0, then routability.
    assert_eq!(
        strict(&addr(ID, "0.0.0.0", 0)),
        Err(AddrError::Unspecified(ip("0.0.0.0")))
    );
    assert_eq!(strict(&addr(ID, "127.0.0.1", 0)), Err(AddrError::ZeroPort));
}

#[test]
fn a_message_is_refused_whole_only_for_what_go_cannot_read() {
    let good = at("8.8.8.8");
    let skip = [
        addr("", "8.8.8.8", 1),
        at("0.0.0.0"),
        at("127.0.0.1"),
        addr(ID, "8.8.8.8", 0),
    ];
    let mut msg = vec![good.clone()];
    msg.extend(skip.iter().cloned());
    assert_eq!(check_message(&msg), Ok(()));
    assert_eq!(check_message(&[]), Ok(()));
    let mut bad = msg.clone();
    bad.push(at("nope"));
    bad.push(addr(ID, "8.8.8.8", 65536));
    assert_eq!(check_message(&bad), Err(AddrError::NotAnIp("nope".into())));
    assert_eq!(
        check_message(&[good, addr("", "1.1.1.1", 65536)]),
        Err(AddrError::PortOutOfRange(65536))
    );
}

// ---- requests a node takes -------------------------------------------------

#[test]
fn the_first_two_requests_are_free() {
    assert_eq!(FREE_REQUESTS, 2);
    assert_eq!(MIN_REQUEST_INTERVAL, ENSURE_PEERS_PERIOD / 3);
    assert_eq!(MIN_REQUEST_INTERVAL, Duration::from_secs(10));
    let t = Instant::now();
    let mut r = Requests::default();
    for dir in [Direction::Inbound, Direction::Outbound] {
        let p = peer(dir as u8);
        assert_eq!(r.on_request(p, dir, t), RequestVerdict::Answer);
        assert_eq!(r.next_allowed(&p), None, "the second is free too");
        assert_eq!(r.on_request(p, dir, t), RequestVerdict::Answer);
        assert_eq!(r.next_allowed(&p), Some(t + MIN_REQUEST_INTERVAL));
        // The third at the same instant is too soon.
        assert_eq!(
            r.on_request(p, dir, t),
            RequestVerdict::Stop(Violation::RequestTooSoon {
                since_last: Duration::ZERO,
                min_interval: MIN_REQUEST_INTERVAL
            })
        );
    }
    assert_eq!(r.len(), 2);
}

#[test]
fn exactly_the_interval_passes_and_a_nanosecond_less_does_not() {
    let t0 = Instant::now();
    let ten = MIN_REQUEST_INTERVAL;
    let mut r = Requests::new(RequestsConfig::default());
    let p = peer(1);
    r.on_request(p, Direction::Inbound, t0);
    r.on_request(p, Direction::Inbound, t0);
    let mut early = r.clone();
    assert_eq!(
        r.on_request(p, Direction::Inbound, t0 + ten),
        RequestVerdict::Answer
    );
    let v = early.on_request(p, Direction::Inbound, t0 + ten - NS);
    assert_eq!(
        v,
        RequestVerdict::Stop(Violation::RequestTooSoon {
            since_last: ten - NS,
            min_interval: ten
        })
    );
    let RequestVerdict::Stop(violation) = v else {
        unreachable!()
    };
    assert_eq!(violation.ban_time(), BAN_TIME);
    assert_eq!(BAN_TIME, Duration::from_secs(24 * 3600));
    // The interval counts from the last request answered.
    let t1 = t0 + ten;
    assert_eq!(
        r.on_request(p, Direction::Inbound, t1 + ten - NS),
        RequestVerdict::Stop(Violation::RequestTooSoon {
            since_last: ten - NS,
            min_interval: ten
        })
    );
    assert_eq!(
        r.on_request(p, Direction::Inbound, t1 + ten),
        RequestVerdict::Answer
    );
}

#[test]
fn the_clock_starts_at_the_second_request() {
    // Go's receiveRequest stores the time of the second request, not the
    // first: a third 5 s after the second is too soon even 105 s after the
    // first.
    let t0 = Instant::now();
    let mut r = Requests::default();
    let p = peer(1);
    r.on_request(p, Direction::Outbound, t0);
    r.on_request(p, Direction::Outbound, t0 + Duration::from_secs(100));
    assert_eq!(
        r.on_request(p, Direction::Outbound, t0 + Duration::from_secs(105)),
        RequestVerdict::Stop(Violation::RequestTooSoon {
            since_last: Duration::from_secs(5),
            min_interval: MIN_REQUEST_INTERVAL
        })
    );
}

#[test]
fn peers_are_counted_apart_and_a_removed_peer_starts_free() {
    let t = Instant::now();
    let mut r = Requests::default();
    let (a, b) = (peer(1), peer(2));
    r.on_request(a, Direction::Inbound, t);
    r.on_request(a, Direction::Inbound, t);
    assert_eq!(
        r.on_request(b, Direction::Inbound, t),
        RequestVerdict::Answer
    );
    assert_eq!(
        r.on_request(b, Direction::Inbound, t),
        RequestVerdict::Answer
    );
    assert!(matches!(
        r.on_request(a, Direction::Inbound, t),
        RequestVerdict::Stop(_)
    ));
    r.remove(&a);
    assert_eq!(r.len(), 1);
    assert_eq!(
        r.on_request(a, Direction::Inbound, t),
        RequestVerdict::Answer
    );
    assert_eq!(
        r.on_request(a, Direction::Inbound, t),
        RequestVerdict::Answer
    );
    r.remove(&a);
    r.remove(&b);
    assert!(r.is_empty());
}

#[test]
fn another_minimum_interval() {
    let t = Instant::now();
    let cfg = RequestsConfig::default().with_min_interval(Duration::from_secs(1));
    let mut r = Requests::new(cfg);
    let p = peer(1);
    r.on_request(p, Direction::Inbound, t);
    r.on_request(p, Direction::Inbound, t);
    assert_eq!(
        r.on_request(p, Direction::Inbound, t + Duration::from_secs(1)),
        RequestVerdict::Answer
    );
    assert_eq!(r.config().min_interval, Duration::from_secs(1));
}

#[test]
fn a_seed_answers_an_inbound_peer_once_then_disconnects_it() {
    let t = Instant::now();
    let mut r = Requests::new(RequestsConfig::default().with_seed_mode(true));
    let p = peer(1);
    assert_eq!(
        r.on_request(p, Direction::Inbound, t),
        RequestVerdict::AnswerAndDisconnect
    );
    // Meanwhile: nothing, however late, and no ban.
    for later in [Duration::ZERO, Duration::from_secs(3600)] {
        assert_eq!(
            r.on_request(p, Direction::Inbound, t + later),
            RequestVerdict::Ignore
        );
    }
    // Reconnected: answered once more.
    r.remove(&p);
    assert_eq!(
        r.on_request(p, Direction::Inbound, t),
        RequestVerdict::AnswerAndDisconnect
    );
    // An outbound peer of a seed is held to the interval.
    let q = peer(2);
    assert_eq!(
        r.on_request(q, Direction::Outbound, t),
        RequestVerdict::Answer
    );
    assert_eq!(
        r.on_request(q, Direction::Outbound, t),
        RequestVerdict::Answer
    );
    assert!(matches!(
        r.on_request(q, Direction::Outbound, t + MIN_REQUEST_INTERVAL - NS),
        RequestVerdict::Stop(Violation::RequestTooSoon { .. })
    ));
    // Not a seed: an inbound peer is answered and kept.
    let mut r = Requests::default();
    assert_eq!(
        r.on_request(p, Direction::Inbound, t),
        RequestVerdict::Answer
    );
    assert!(!r.config().seed_mode);
}

// ---- requests we send -------------------------------------------------------

#[test]
fn one_ask_out_per_peer_and_no_time_out() {
    let t = Instant::now();
    let mut a = Asks::new();
    let p = peer(1);
    assert_eq!(a.may_ask(&p, t), AskVerdict::Ask);
    assert_eq!(a.may_ask(&p, t), AskVerdict::Ask, "may_ask records nothing");
    assert!(a.is_empty());
    assert_eq!(a.ask(p, t), AskVerdict::Ask);
    assert_eq!(a.ask(p, t), AskVerdict::Unanswered);
    assert_eq!(
        a.ask(p, t + Duration::from_secs(3600)),
        AskVerdict::Unanswered
    );
    // Another peer is its own.
    assert_eq!(a.ask(peer(2), t), AskVerdict::Ask);
    assert_eq!(a.len(), 2);
}

#[test]
fn two_free_asks_then_the_interval_from_the_answer() {
    let t0 = Instant::now();
    let ten = MIN_REQUEST_INTERVAL;
    let mut a = Asks::default();
    let p = peer(1);
    assert_eq!(a.ask(p, t0), AskVerdict::Ask);
    assert_eq!(a.on_addrs(&p, &[], t0), AddrsVerdict::Accept);
    // The second is free.
    assert_eq!(a.ask(p, t0), AskVerdict::Ask);
    // Its answer comes 8 s later: the interval counts from there.
    let answered = t0 + Duration::from_secs(8);
    assert_eq!(a.on_addrs(&p, &[], answered), AddrsVerdict::Accept);
    assert_eq!(
        a.ask(p, t0 + ten),
        AskVerdict::TooSoon { at: answered + ten }
    );
    assert_eq!(
        a.ask(p, answered + ten - NS),
        AskVerdict::TooSoon { at: answered + ten }
    );
    assert_eq!(a.ask(p, answered + ten), AskVerdict::Ask);
    let third = answered + ten;
    assert_eq!(a.on_addrs(&p, &[], third), AddrsVerdict::Accept);
    assert_eq!(
        a.may_ask(&p, third + ten - NS),
        AskVerdict::TooSoon { at: third + ten }
    );
    assert_eq!(a.may_ask(&p, third + ten), AskVerdict::Ask);
    // Disconnected: the next connection starts free.
    a.remove(&p);
    assert!(a.is_empty());
    assert_eq!(a.ask(p, third), AskVerdict::Ask);
}

#[test]
fn addresses_we_did_not_ask_for_are_a_violation() {
    let t = Instant::now();
    let mut a = Asks::with_min_interval(MIN_REQUEST_INTERVAL);
    let p = peer(1);
    let v = a.on_addrs(&p, &[at("8.8.8.8")], t);
    assert_eq!(v, AddrsVerdict::Stop(Violation::Unsolicited));
    let AddrsVerdict::Stop(violation) = v else {
        unreachable!()
    };
    assert_eq!(violation.ban_time(), BAN_TIME);
    // One answer per request: a second PexAddrs is unsolicited.
    a.ask(p, t);
    assert_eq!(a.on_addrs(&p, &[at("8.8.8.8")], t), AddrsVerdict::Accept);
    assert_eq!(
        a.on_addrs(&p, &[at("8.8.8.8")], t),
        AddrsVerdict::Stop(Violation::Unsolicited)
    );
    // Asked another peer, not this one.
    let q = peer(2);
    a.ask(q, t);
    assert_eq!(
        a.on_addrs(&peer(3), &[], t),
        AddrsVerdict::Stop(Violation::Unsolicited)
    );
    assert_eq!(a.on_addrs(&q, &[], t), AddrsVerdict::Accept);
}

#[test]
fn an_unreadable_address_stops_the_peer_before_the_request_is_looked_for() {
    let t = Instant::now();
    let mut a = Asks::new();
    let p = peer(1);
    let bad = [at("8.8.8.8"), at("nope")];
    // Unasked: the decode error comes first, as in Go.
    assert_eq!(
        a.on_addrs(&p, &bad, t),
        AddrsVerdict::Stop(Violation::BadAddress(AddrError::NotAnIp("nope".into())))
    );
    a.ask(p, t);
    assert_eq!(
        a.on_addrs(&p, &[addr(ID, "8.8.8.8", 65536)], t),
        AddrsVerdict::Stop(Violation::BadAddress(AddrError::PortOutOfRange(65536)))
    );
    // Addresses Go merely skips do not stop the peer.
    let skipped = [addr("", "8.8.8.8", 1), at("0.0.0.0"), at("10.0.0.1")];
    assert_eq!(a.on_addrs(&p, &skipped, t), AddrsVerdict::Accept);
}

#[test]
fn a_received_answer_is_not_counted() {
    // Go counts no addresses it receives: only the message's bytes are
    // capped (by the channel).
    let t = Instant::now();
    let mut a = Asks::new();
    let p = peer(1);
    a.ask(p, t);
    let many: Vec<NetAddress> = (0..MAX_ANSWER_ADDRS + 1)
        .map(|i| addr(ID, &format!("8.8.{}.{}", i / 256, i % 256), 1))
        .collect();
    assert_eq!(a.on_addrs(&p, &many, t), AddrsVerdict::Accept);
}

proptest! {
    #![proptest_config(p2p_conn_interop::proptest_config(256))]

    /// An asker that sends whenever `Asks` allows is never stopped by a
    /// node that enforces `Requests`, whatever the delays on the way.
    #[test]
    fn asks_never_break_requests(delays in proptest::collection::vec((0u64..20_000, 0u64..20_000, 0u64..20_000), 1..40)) {
        let mut now = Instant::now();
        let p = peer(1);
        let mut asks = Asks::new();
        let mut node = Requests::default();
        for (think, up, down) in delays {
            now += Duration::from_millis(think);
            let sent = match asks.ask(p, now) {
                AskVerdict::Ask => now,
                AskVerdict::TooSoon { at } => {
                    prop_assert!(at > now);
                    prop_assert_eq!(asks.ask(p, at), AskVerdict::Ask);
                    at
                }
                other => panic!("every ask was answered: {other:?}"),
            };
            let received = sent + Duration::from_millis(up);
            prop_assert_eq!(node.on_request(p, Direction::Outbound, received), RequestVerdict::Answer);
            now = received + Duration::from_millis(down);
            prop_assert_eq!(asks.on_addrs(&p, &[], now), AddrsVerdict::Accept);
        }
    }
}

// ---- answers ---------------------------------------------------------------

#[test]
fn answer_len_is_go_get_selection() {
    let cases = [
        (0, 0),
        (1, 1),
        (31, 31),
        (32, 32),
        (100, 32),
        (139, 32),
        (140, 32),
        (200, 46),
        (1086, 249),
        (1087, 250),
        (1100, 250),
        (100_000, 250),
        (usize::MAX, 250),
    ];
    for (known, want) in cases {
        assert_eq!(answer_len(known), want, "{known} known");
    }
    assert_eq!(MIN_ANSWER_ADDRS, 32);
}

fn many(n: usize) -> Vec<NetAddress> {
    (0..n)
        .map(|i| addr(ID, &format!("8.8.{}.{}", i / 256, i % 256), 26656))
        .collect()
}

#[test]
fn an_answer_holds_at_most_250_addresses() {
    assert_eq!(MAX_ANSWER_ADDRS, 250);
    assert_eq!(fit_answer(&many(249)).len(), 249);
    assert_eq!(fit_answer(&many(250)).len(), 250);
    let a = many(251);
    let fit = fit_answer(&a);
    assert_eq!(fit.len(), 250);
    assert_eq!(fit, &a[..250]);
    assert!(fit_answer(&[]).is_empty());
    // 250 valid addresses are far under the byte cap.
    assert!(PexMessage::Addrs(fit.to_vec()).encode().len() < MAX_PEX_MESSAGE_SIZE / 2);
}

#[test]
fn an_answer_fits_the_64000_bytes_exactly() {
    assert_eq!(MAX_PEX_MESSAGE_SIZE, 64000);
    // 200 addresses with 300-byte IDs, then one whose ID makes the message
    // exactly 64000 bytes.
    let long = "a".repeat(300);
    let mut addrs: Vec<NetAddress> = (0..200).map(|_| addr(&long, "1.2.3.4", 26656)).collect();
    let size = |a: &[NetAddress]| PexMessage::Addrs(a.to_vec()).encode().len();
    assert!(size(&addrs) < MAX_PEX_MESSAGE_SIZE);
    let id_len = (0..400)
        .find(|&n| {
            let mut a = addrs.clone();
            a.push(addr(&"b".repeat(n), "1.2.3.4", 26656));
            size(&a) == MAX_PEX_MESSAGE_SIZE
        })
        .expect("an ID length that makes 64000 bytes");
    let mut exact = addrs.clone();
    exact.push(addr(&"b".repeat(id_len), "1.2.3.4", 26656));
    assert_eq!(size(&exact), 64000);
    assert_eq!(fit_answer(&exact).len(), 201, "exactly 64000 bytes fit");
    // The receiving side takes it too.
    let bytes = PexMessage::Addrs(exact.clone()).encode();
    assert_eq!(PexMessage::decode(&bytes), Ok(PexMessage::Addrs(exact)));

    // One byte more: the last address is left out.
    addrs.push(addr(&"b".repeat(id_len + 1), "1.2.3.4", 26656));
    assert_eq!(size(&addrs), 64001);
    let fit = fit_answer(&addrs);
    assert_eq!(fit.len(), 200);
    assert!(size(fit) <= MAX_PEX_MESSAGE_SIZE);
    assert!(PexMessage::decode(&PexMessage::Addrs(addrs).encode()).is_err());
}

proptest! {
    #![proptest_config(p2p_conn_interop::proptest_config(64))]

    /// `fit_answer` keeps the longest prefix under both caps.
    #[test]
    fn fit_answer_is_the_longest_prefix_under_both_caps(
        lens in proptest::collection::vec((0usize..2000, 0usize..60, any::<u32>()), 0..300)
    ) {
        let addrs: Vec<NetAddress> = lens
            .iter()
            .map(|&(id, ip, port)| addr(&"c".repeat(id), &"1".repeat(ip), port))
            .collect();
        let size = |a: &[NetAddress]| PexMessage::Addrs(a.to_vec()).encode().len();
        let fit = fit_answer(&addrs);
        prop_assert!(fit.len() <= MAX_ANSWER_ADDRS);
        prop_assert!(size(fit) <= MAX_PEX_MESSAGE_SIZE);
        if fit.len() < addrs.len() && fit.len() < MAX_ANSWER_ADDRS {
            prop_assert!(size(&addrs[..fit.len() + 1]) > MAX_PEX_MESSAGE_SIZE);
        }
    }
}
