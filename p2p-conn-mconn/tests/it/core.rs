//! The MConnection core (`p2p_conn_mconn`) against itself: two cores wired
//! through random splits of the byte stream, the send selection, keepalive,
//! caps, hostile packets and the rate limits, all on a clock the test
//! drives. The wiring is `p2p_conn_mconn::testkit::Pair` (its own tests are
//! in `pair.rs`). Byte-exact checks are hand-computed protobuf (the Go
//! interop tests are separate).

use std::time::{Duration, Instant};

use crate::common::{channel, msg_packet};

use p2p_conn_mconn::pex::{NetAddress, PexMessage, PEX_CHANNEL};
use p2p_conn_mconn::testkit::{encode_packet, Packet};
use p2p_conn_mconn::testkit::{Pair, Side, Split};
use p2p_conn_mconn::{ChannelDescriptor, Event, MConnConfig, MConnCore, MConnError};
use proptest::prelude::*;

fn channels() -> Vec<ChannelDescriptor> {
    vec![
        ChannelDescriptor::new(PEX_CHANNEL),
        ChannelDescriptor::new(0x20).with_priority(6),
        ChannelDescriptor::new(0x30).with_priority(5),
        ChannelDescriptor::new(0xc0).with_priority(2),
    ]
}

fn pair(config: MConnConfig) -> Pair {
    Pair::new(config, &channels()).unwrap()
}

fn message(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[test]
fn messages_cross_on_every_channel() {
    let mut p = pair(MConnConfig::default());
    let sent = [
        (0x20, message(5000, 1)),
        (0x30, message(1024, 2)),
        (0x00, message(0, 3)),
        (0xc0, message(3000, 4)),
        (0x20, message(1, 5)),
        (0x30, message(1025, 6)),
    ];
    for (ch, m) in &sent {
        p.a.send(*ch, m.clone()).unwrap();
    }
    p.set_budget(Side::A, 4096);
    p.set_split(Side::A, Split::Cycle(vec![1, 7, 1036, 3, 5000]))
        .unwrap();
    let wire = p.transmit(Side::A);
    assert_eq!(p.deliver(Side::B, &wire), Ok(wire.len()), "valid stream");
    for ch in [0x00, 0x20, 0x30, 0xc0] {
        let want: Vec<_> = sent
            .iter()
            .filter(|(c, _)| *c == ch)
            .map(|(_, m)| m.clone())
            .collect();
        assert_eq!(p.messages(Side::B, ch), want, "channel {ch:#x}");
    }
    let (a, b) = (&p.a, &p.b);
    let s = channel(&a.stats(), 0x20).unwrap();
    assert_eq!(
        (s.messages_sent, s.bytes_sent, s.packets_sent),
        (2, 5001, 6)
    );
    assert_eq!((s.queued_bytes, s.queued_messages), (0, 0));
    let r = channel(&b.stats(), 0x20).unwrap();
    assert_eq!(
        (r.messages_received, r.bytes_received, r.packets_received),
        (2, 5001, 6)
    );
    // 0xc0 takes a second varint byte: pieces of 1023.
    assert_eq!(channel(&a.stats(), 0xc0).unwrap().packets_sent, 3);
    assert_eq!(a.stats().bytes_out, wire.len() as u64);
    assert_eq!(b.stats().bytes_in, wire.len() as u64);
}

#[test]
fn batches_are_whole_packets_within_the_budget() {
    let mut p = pair(MConnConfig::default());
    let (t0, a) = (p.now(), &mut p.a);
    a.send(0x20, message(10_000, 9)).unwrap();
    let mut out = Vec::new();
    // A full piece without eof: 2 (prefix 1032) + 1a 88 08 + 08 20 + 1a 80 08 + 1024.
    assert_eq!(
        a.poll_transmit(t0, &mut out, 1033),
        0,
        "a full piece is 1034"
    );
    let n = a.poll_transmit(t0, &mut out, 3000);
    assert_eq!(n, 2 * 1034, "two whole packets fit 3000 bytes");
    assert_eq!(out.len(), n);
    // 7 more full pieces, then 784 bytes with eof: 2 + 1 + 2 + 2 + 2 + 3 + 784.
    let n = a.poll_transmit(t0, &mut out, 64 * 1024);
    assert_eq!(n, 7 * 1034 + 796, "the rest");
    assert_eq!(a.poll_transmit(t0, &mut out, 64 * 1024), 0);
}

#[test]
fn priorities_share_by_recently_sent() {
    let mut p = pair(MConnConfig::default());
    let (t0, a) = (p.now(), &mut p.a);
    // 0x20 has priority 6, 0x30 priority 5, 0x00 priority 1.
    for _ in 0..40 {
        for ch in [0x00, 0x20, 0x30] {
            a.send(ch, message(1024, ch)).unwrap();
        }
    }
    let mut out = Vec::new();
    for _ in 0..60 {
        // One packet per call: a whole 1024-byte message with eof, 1036
        // bytes (1034 on channel 0, whose ID is left out).
        assert!(a.poll_transmit(t0, &mut out, 1036) > 0);
    }
    let s = a.stats();
    let sent = |id: u8| s.channels.iter().find(|c| c.id == id).unwrap().packets_sent;
    // Least recently_sent / priority first: 6:5:1 of 60 packets, within one.
    let (p20, p30, p00) = (sent(0x20), sent(0x30), sent(0x00));
    assert_eq!(p20 + p30 + p00, 60);
    for (got, want) in [(p20, 30.0), (p30, 25.0), (p00, 5.0)] {
        assert!((got as f64 - want).abs() <= 1.0, "{p20} {p30} {p00}");
    }
    // Decay: 0.8 every 2 s, truncated as Go's int64(float64 * 0.8).
    let before = channel(&a.stats(), 0x20).unwrap().recently_sent;
    assert_eq!(before, p20 as i64 * 1036);
    a.handle_timeout(t0 + Duration::from_secs(2)).unwrap();
    assert_eq!(
        channel(&a.stats(), 0x20).unwrap().recently_sent,
        (before as f64 * 0.8) as i64
    );
    a.handle_timeout(t0 + Duration::from_secs(7)).unwrap();
    let twice = ((before as f64 * 0.8) as i64 as f64 * 0.8) as i64;
    let thrice = (twice as f64 * 0.8) as i64;
    assert_eq!(channel(&a.stats(), 0x20).unwrap().recently_sent, thrice);
}

#[test]
fn pings_and_pongs() {
    let cfg = MConnConfig::default()
        .with_keepalive(Duration::from_millis(300), Duration::from_millis(200));
    let mut p = pair(cfg);
    let ms = Duration::from_millis;
    let t0 = p.now();
    assert_eq!(p.a.poll_timeout(), Some(t0 + ms(300)));
    p.advance(ms(100));
    p.a.handle_timeout(p.now()).unwrap();
    assert!(!p.a.wants_to_transmit());
    p.advance(ms(200));
    let t1 = p.now();
    assert_eq!(t1, t0 + ms(300));
    p.a.handle_timeout(t1).unwrap();
    let mut out = Vec::new();
    p.a.poll_transmit(t1, &mut out, 1 << 16);
    assert_eq!(out, [0x02, 0x0a, 0x00]);
    assert_eq!(p.a.poll_timeout(), Some(t1 + ms(200)));
    assert_eq!(p.b.handle_input(t1, &out).unwrap(), (3, Some(Event::Ping)));
    let pong = p.transmit(Side::B);
    assert_eq!(pong, [0x02, 0x12, 0x00]);
    assert_eq!(p.a.handle_input(t1, &pong).unwrap(), (3, Some(Event::Pong)));
    assert_eq!(p.a.poll_timeout(), Some(t1 + ms(300)));
    // Past the old deadline: no error, the pong came.
    p.advance(ms(250));
    p.a.handle_timeout(p.now()).unwrap();
    // Next ping, no pong: PongTimeout at the deadline, not before.
    p.advance(ms(50));
    let t2 = p.now();
    assert_eq!(t2, t1 + ms(300));
    p.a.handle_timeout(t2).unwrap();
    p.transmit(Side::A);
    p.advance(ms(199));
    p.a.handle_timeout(p.now()).unwrap();
    p.advance(ms(1));
    assert_eq!(p.now(), t2 + ms(200));
    assert_eq!(p.a.handle_timeout(p.now()), Err(MConnError::PongTimeout));
    assert_eq!(
        p.a.send(0x20, vec![1]),
        Err(MConnError::PongTimeout),
        "stopped"
    );
    assert_eq!(p.a.poll_timeout(), None);
    let s = p.a.stats();
    assert_eq!((s.pings_sent, s.pongs_received), (2, 1));
    // Two pings before b answers: one pong.
    let mut two = Vec::new();
    encode_packet(&Packet::Ping, &mut two);
    encode_packet(&Packet::Ping, &mut two);
    p.set_split(Side::A, Split::Fixed(6)).unwrap();
    assert_eq!(p.deliver(Side::B, &two), Ok(6), "valid stream");
    assert_eq!(p.take_events(Side::B), [Event::Ping, Event::Ping]);
    assert_eq!(p.transmit(Side::B), [0x02, 0x12, 0x00]);
}

#[test]
fn pong_goes_before_queued_messages() {
    let mut p = pair(MConnConfig::default());
    p.b.send(0x30, message(5000, 0)).unwrap();
    p.advance(Duration::from_secs(60));
    p.a.handle_timeout(p.now()).unwrap();
    let ping = p.transmit(Side::A);
    p.deliver(Side::B, &ping).unwrap();
    let mut out = Vec::new();
    p.b.poll_transmit(p.now(), &mut out, 1 << 16);
    assert_eq!(&out[..3], [0x02, 0x12, 0x00]);
}

#[test]
fn send_queue_is_byte_capped() {
    let chans = [ChannelDescriptor::new(1).with_send_queue_capacity(100)];
    let mut p = Pair::new(MConnConfig::default(), &chans).unwrap();
    let a = &mut p.a;
    a.send(1, vec![0; 60]).unwrap();
    assert_eq!(a.send_room(1), Some(40));
    assert_eq!(
        a.send(1, vec![0; 41]),
        Err(MConnError::SendQueueFull {
            channel: 1,
            len: 41,
            queued: 60,
            capacity: 100
        })
    );
    a.send(1, vec![0; 39]).unwrap();
    a.send(1, vec![]).unwrap(); // counts one byte
    assert_eq!(a.send_room(1), Some(0));
    assert_eq!(a.send(2, vec![]), Err(MConnError::UnknownChannel(2)));
    assert!(a.error().is_none(), "refusals do not stop the connection");
    p.transmit(Side::A);
    assert_eq!(p.a.send_room(1), Some(100));
}

#[test]
fn bad_configs_are_refused() {
    let t0 = Instant::now();
    let cfg = MConnConfig::default();
    let dup = [ChannelDescriptor::new(1), ChannelDescriptor::new(1)];
    assert!(matches!(
        MConnCore::new(cfg.clone(), &dup, t0),
        Err(MConnError::InvalidConfig(_))
    ));
    let zero = [ChannelDescriptor::new(1).with_priority(0)];
    assert!(matches!(
        MConnCore::new(cfg.clone(), &zero, t0),
        Err(MConnError::InvalidConfig(_))
    ));
    let slow = cfg
        .clone()
        .with_keepalive(Duration::from_secs(1), Duration::from_secs(1));
    assert!(matches!(
        MConnCore::new(slow, &channels(), t0),
        Err(MConnError::InvalidConfig(_))
    ));
    let tiny = cfg.with_max_packet_msg_payload_size(1);
    assert!(matches!(
        MConnCore::new(tiny, &channels(), t0),
        Err(MConnError::InvalidConfig(_))
    ));
}

#[test]
fn unknown_channels_stop_the_connection() {
    for id in [1, 0x21, 256, -1, i32::MAX] {
        let mut p = pair(MConnConfig::default());
        let (t0, a) = (p.now(), &mut p.a);
        let wire = msg_packet(id, true, b"x".to_vec());
        assert_eq!(
            a.handle_input(t0, &wire),
            Err(MConnError::UnknownChannel(id))
        );
        assert_eq!(
            a.handle_input(t0, &[0x02, 0x0a, 0x00]),
            Err(MConnError::UnknownChannel(id))
        );
        assert_eq!(a.error(), Some(&MConnError::UnknownChannel(id)));
        assert_eq!(a.poll_transmit(t0, &mut Vec::new(), 1 << 16), 0);
    }
}

#[test]
fn receive_cap_is_checked_before_appending() {
    let chans = [ChannelDescriptor::new(7).with_recv_message_capacity(2500)];
    let mut p = Pair::new(MConnConfig::default(), &chans).unwrap();
    // Exactly the cap is fine.
    let mut wire = msg_packet(7, false, vec![1; 1024]);
    wire.extend(msg_packet(7, false, vec![1; 1024]));
    wire.extend(msg_packet(7, true, vec![1; 452]));
    p.set_split(Side::B, Split::Fixed(100)).unwrap();
    assert_eq!(p.deliver(Side::A, &wire), Ok(wire.len()), "valid stream");
    let ev = p.take_events(Side::A);
    assert!(matches!(&ev[..], [Event::Message { channel: 7, data }] if data.len() == 2500));
    // One byte more is refused when the piece arrives, before it is added.
    wire = msg_packet(7, false, vec![1; 1024]);
    wire.extend(msg_packet(7, false, vec![1; 1024]));
    p.set_split(Side::B, Split::Whole).unwrap();
    assert_eq!(p.deliver(Side::A, &wire), Ok(wire.len()), "valid stream");
    let over = msg_packet(7, true, vec![1; 453]);
    let (t0, a) = (p.now(), &mut p.a);
    assert_eq!(
        a.handle_input(t0, &over),
        Err(MConnError::RecvMessageTooLarge {
            channel: 7,
            len: 2501,
            capacity: 2500
        })
    );
    assert!(channel(&a.stats(), 7).unwrap().receiving <= 2500);
}

#[test]
fn a_message_that_never_ends_is_refused_at_the_cap_in_bounded_memory() {
    let t0 = Instant::now();
    let cap = 100_000;
    let chans = [ChannelDescriptor::new(0x30).with_recv_message_capacity(cap)];
    let mut a = MConnCore::new(MConnConfig::default(), &chans, t0).unwrap();
    let piece = msg_packet(0x30, false, vec![0xee; 1024]);
    let mut fed = 0usize;
    let err = loop {
        match a.handle_input(t0, &piece) {
            Ok((n, ev)) => {
                assert_eq!((n, ev), (piece.len(), None));
                fed += 1024;
                assert!(channel(&a.stats(), 0x30).unwrap().receiving <= cap);
            }
            Err(e) => break e,
        }
        assert!(fed <= cap, "not refused at the cap");
    };
    assert_eq!(fed, 97 * 1024);
    assert_eq!(
        err,
        MConnError::RecvMessageTooLarge {
            channel: 0x30,
            len: 98 * 1024,
            capacity: cap
        }
    );
}

#[test]
fn hostile_packets_are_typed_errors() {
    type Expect = fn(&MConnError) -> bool;
    let cases: [(&[u8], Expect); 5] = [
        (&[0x8b, 0x08], |e| {
            matches!(
                e,
                MConnError::PacketTooLarge {
                    len: 1035,
                    max: 1034
                }
            )
        }),
        (&[0xff; 11], |e| *e == MConnError::BadLength),
        (&[0x00], |e| *e == MConnError::UnknownPacket),
        (&[0x03, 0x1a, 0x05, 0x08], |e| {
            matches!(e, MConnError::Malformed(_))
        }),
        (&[0x02, 0x07, 0x00], |e| {
            matches!(e, MConnError::Malformed(_))
        }),
    ];
    for (wire, ok) in cases {
        let mut p = pair(MConnConfig::default());
        let err = p.deliver(Side::A, wire).unwrap_err();
        assert!(ok(&err), "{wire:02x?}: {err:?}");
        // No event first: the one call the whole wire made failed.
        assert!(p.events(Side::A).is_empty(), "{wire:02x?}");
    }
}

#[test]
fn send_rate_limit_holds_packets_back() {
    // 10 KB/s: a burst of one full packet (100 ms of rate is under 1036).
    let cfg = MConnConfig::default().with_rates(Some(10_000), None);
    let mut p = pair(cfg);
    let (t0, a) = (p.now(), &mut p.a);
    a.send(0x20, message(4096, 1)).unwrap();
    let mut out = Vec::new();
    assert_eq!(a.poll_transmit(t0, &mut out, 1 << 16), 1034);
    assert_eq!(a.poll_transmit(t0, &mut out, 1 << 16), 0, "held back");
    let at = a.poll_timeout().unwrap();
    assert!(
        at > t0 && at < t0 + Duration::from_millis(110),
        "{:?}",
        at - t0
    );
    assert_eq!(a.poll_transmit(at, &mut out, 1 << 16), 1034);
    // Over a simulated second: about 10 KB, never more than rate x time
    // plus the burst. B takes what went out by hand, then the pair runs
    // from timer to timer.
    a.send(0x20, message(100_000, 2)).unwrap();
    assert_eq!(p.deliver(Side::B, &out), Ok(out.len()));
    p.advance(at - t0);
    p.run_for(t0 + Duration::from_secs(1) - p.now()).unwrap();
    assert_eq!(p.now(), t0 + Duration::from_secs(1));
    assert_eq!((p.stopped(Side::A), p.stopped(Side::B)), (None, None));
    let total = p.a.stats().bytes_out;
    assert!((8000..=10_000 + 1036).contains(&total), "{total}");
}

#[test]
fn recv_rate_limit_stops_taking_bytes() {
    let cfg = MConnConfig::default().with_rates(None, Some(10_000));
    let mut p = pair(cfg);
    let t0 = p.now();
    p.a.send(0x20, message(3000, 1)).unwrap();
    let wire = p.transmit(Side::A);
    let b = &mut p.b;
    let (n, ev) = b.handle_input(t0, &wire).unwrap();
    assert_eq!((n, ev), (1034, None), "one packet, then held");
    assert_eq!(b.handle_input(t0, &wire[n..]).unwrap(), (0, None));
    let at = b.poll_timeout().unwrap();
    assert!(at > t0 && at < t0 + Duration::from_millis(110));
    let (m, _) = b.handle_input(at, &wire[n..]).unwrap();
    assert_eq!(m, 1034);
}

#[test]
fn pex_on_channel_zero() {
    let mut p = pair(MConnConfig::default());
    p.a.send(PEX_CHANNEL, PexMessage::Request.encode()).unwrap();
    let wire = p.transmit(Side::A);
    // Channel 0 is left out: Packet{msg{eof, data = 0a 00}}.
    assert_eq!(wire, [0x08, 0x1a, 0x06, 0x10, 0x01, 0x1a, 0x02, 0x0a, 0x00]);
    p.set_split(Side::A, Split::Fixed(2)).unwrap();
    assert_eq!(p.deliver(Side::B, &wire), Ok(wire.len()), "valid stream");
    let ev = p.take_events(Side::B);
    let [Event::Message { channel: 0, data }] = &ev[..] else {
        panic!("{ev:?}")
    };
    assert_eq!(PexMessage::decode(data).unwrap(), PexMessage::Request);
    let addrs: Vec<_> = (0..250)
        .map(|i| NetAddress {
            id: format!("{i:040x}"),
            ip: format!("10.0.{}.{}", i / 256, i % 256),
            port: 26656,
        })
        .collect();
    let answer = PexMessage::Addrs(addrs).encode();
    p.b.send(PEX_CHANNEL, answer.clone()).unwrap();
    let wire = p.transmit(Side::B);
    p.set_split(Side::B, Split::Fixed(999)).unwrap();
    assert_eq!(p.deliver(Side::A, &wire), Ok(wire.len()), "valid stream");
    let ev = p.take_events(Side::A);
    let [Event::Message { channel: 0, data }] = &ev[..] else {
        panic!("{ev:?}")
    };
    assert_eq!(data, &answer);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random messages on random channels, random batch budgets and random
    /// splits of the byte stream: every message arrives whole, in order
    /// per channel.
    #[test]
    fn round_trip_under_random_splits(
        msgs in proptest::collection::vec((0usize..4, 0usize..5000), 1..30),
        budget in 1036usize..20_000,
        splits in proptest::collection::vec(1usize..3000, 1..10),
    ) {
        let mut p = pair(MConnConfig::default());
        let ids = [0x00u8, 0x20, 0x30, 0xc0];
        let mut sent = Vec::new();
        for (k, (c, len)) in msgs.iter().enumerate() {
            let m = message(*len, k as u8);
            p.a.send(ids[*c], m.clone()).unwrap();
            sent.push((ids[*c], m));
        }
        p.set_budget(Side::A, budget);
        p.set_split(Side::A, Split::Cycle(splits)).unwrap();
        let wire = p.transmit(Side::A);
        prop_assert_eq!(p.deliver(Side::B, &wire), Ok(wire.len()), "valid stream");
        prop_assert_eq!(p.events(Side::B).len(), sent.len());
        for id in ids {
            let want: Vec<_> = sent.iter().filter(|(c, _)| *c == id).map(|(_, m)| m.clone()).collect();
            prop_assert_eq!(p.messages(Side::B, id), want);
        }
    }

    /// Arbitrary bytes in arbitrary pieces: no panic, a typed error or
    /// events, and every byte accounted for.
    #[test]
    fn no_panic_on_arbitrary_input(bytes in proptest::collection::vec(any::<u8>(), 0..4000),
                                   chunk in 1usize..100) {
        let mut p = pair(MConnConfig::default());
        p.set_split(Side::B, Split::Fixed(chunk)).unwrap();
        // Every call makes progress: all bytes taken, or the error.
        match p.deliver(Side::A, &bytes) {
            Ok(taken) => prop_assert_eq!(taken, bytes.len()),
            Err(e) => prop_assert_eq!(p.a.error(), Some(&e)),
        }
        for s in p.a.stats().channels {
            prop_assert!(s.receiving <= p2p_conn_mconn::DEFAULT_RECV_MESSAGE_CAPACITY);
        }
    }
}
