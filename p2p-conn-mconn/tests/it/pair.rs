//! `p2p_conn_mconn::testkit::Pair` itself: its splits split, its budgets
//! bound every batch, its clock drives the keepalive, its receive hold
//! keeps bytes in flight, and its step limit fires instead of hanging.

use std::time::Duration;

use p2p_conn_mconn::testkit::{Pair, PairError, Side, Split, DEFAULT_STEP_LIMIT};
use p2p_conn_mconn::{ChannelDescriptor, Event, MConnConfig, MConnError};

fn pair(config: MConnConfig) -> Pair {
    Pair::new(config, &[ChannelDescriptor::new(0x20)]).unwrap()
}

fn message(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7) as u8).collect()
}

/// A 5000-byte message from A, run across with `split`: the pieces the
/// direction counted, the largest, and the bytes on the wire.
fn run_split(split: Split) -> (u64, usize, u64) {
    let mut p = pair(MConnConfig::default());
    p.set_split(Side::A, split).unwrap();
    p.a.send(0x20, message(5000)).unwrap();
    p.run_until_idle().unwrap();
    assert_eq!(p.messages(Side::B, 0x20), [message(5000)]);
    let wire = p.a.stats().bytes_out;
    let t = p.traffic(Side::A);
    assert_eq!(t.delivered, wire);
    (t.pieces, t.largest_piece, wire)
}

#[test]
fn whole_delivers_each_batch_in_one_piece() {
    let (pieces, largest, wire) = run_split(Split::Whole);
    assert_eq!((pieces, largest as u64), (1, wire));
}

#[test]
fn fixed_split_cuts_every_piece() {
    let (pieces, largest, wire) = run_split(Split::Fixed(7));
    assert_eq!(pieces, wire.div_ceil(7));
    assert_eq!(largest, 7);
}

#[test]
fn cycle_split_takes_its_sizes_in_turn() {
    // 1 + 2 + 3 = 6 bytes per turn of the cycle.
    let (pieces, largest, wire) = run_split(Split::Cycle(vec![1, 2, 3]));
    let turns = wire / 6;
    let rest = wire % 6;
    let tail = match rest {
        0 => 0,
        1 => 1,
        2 | 3 => 2,
        _ => 3,
    };
    assert_eq!(pieces, turns * 3 + tail);
    assert_eq!(largest, 3);
}

#[test]
fn random_split_is_seeded_and_bounded() {
    let seeded = |seed| run_split(Split::Random { seed, max: 16 });
    let (pieces, largest, wire) = seeded(42);
    assert!(largest <= 16 && largest > 1, "{largest}");
    // Pieces of 1..=16 average 8.5 bytes: well over the fewest possible.
    assert!(pieces > wire.div_ceil(16) * 3 / 2, "{pieces} for {wire}");
    assert_eq!(
        seeded(42),
        (pieces, largest, wire),
        "same seed, same pieces"
    );
}

#[test]
fn empty_pieces_are_refused() {
    let mut p = pair(MConnConfig::default());
    for split in [
        Split::Fixed(0),
        Split::Cycle(vec![]),
        Split::Cycle(vec![3, 0]),
        Split::Random { seed: 1, max: 0 },
    ] {
        assert_eq!(
            p.set_split(Side::A, split.clone()),
            Err(PairError::EmptyPiece(split))
        );
    }
    // The split stays what it was.
    p.a.send(0x20, message(100)).unwrap();
    p.run_until_idle().unwrap();
    assert_eq!(p.traffic(Side::A).pieces, 1);
}

#[test]
fn the_budget_bounds_every_batch() {
    let mut p = pair(MConnConfig::default());
    p.set_budget(Side::A, 1036);
    p.a.send(0x20, message(10_000)).unwrap();
    // Nine full pieces (1034 bytes each), then 784 bytes with eof (796):
    // two never fit 1036 bytes, so one packet per step.
    assert_eq!(p.run_until_idle(), Ok(10));
    let t = p.traffic(Side::A);
    assert_eq!((t.batches, t.largest_batch), (10, 1034));
    assert_eq!(p.messages(Side::B, 0x20), [message(10_000)]);
    // Under one packet nothing moves at all.
    p.set_budget(Side::A, 1000);
    p.a.send(0x20, message(2000)).unwrap();
    assert_eq!(p.run_until_idle(), Ok(0));
    assert!(p.transmit(Side::A).is_empty());
    assert!(p.a.wants_to_transmit());
}

#[test]
fn the_step_limit_fires_instead_of_hanging() {
    let mut p = pair(MConnConfig::default());
    p.set_budget(Side::A, 1036);
    p.a.send(0x20, message(10_000)).unwrap();
    p.set_step_limit(3);
    assert_eq!(p.run_until_idle(), Err(PairError::Livelock { steps: 3 }));
    assert_eq!(
        p.run_for(Duration::from_secs(1)),
        Err(PairError::Livelock { steps: 3 })
    );
    p.set_step_limit(DEFAULT_STEP_LIMIT);
    p.run_until_idle().unwrap();
    assert_eq!(p.messages(Side::B, 0x20), [message(10_000)]);
}

#[test]
fn the_clock_drives_pings_and_the_pong_timeout() {
    let ms = Duration::from_millis;
    let cfg = MConnConfig::default().with_keepalive(ms(300), ms(200));
    let mut p = pair(cfg);
    let t0 = p.now();
    // Nothing happens before the first ping is due, however many steps.
    p.run_for(ms(299)).unwrap();
    assert_eq!(p.now(), t0 + ms(299));
    assert!(p.events(Side::A).is_empty() && p.events(Side::B).is_empty());
    // At 300 ms each side pings and the other answers. A goes first in a
    // step, so B's pong to A's ping reaches A before B's own ping.
    p.run_for(ms(1)).unwrap();
    assert_eq!(p.events(Side::A), [Event::Pong, Event::Ping]);
    assert_eq!(p.events(Side::B), [Event::Ping, Event::Pong]);
    for side in [Side::A, Side::B] {
        let s = p.core(side).stats();
        assert_eq!((s.pings_sent, s.pongs_received), (1, 1));
    }
    // B goes mute: A's next ping (600 ms) times out at 800 ms, not before.
    p.set_budget(Side::B, 0);
    p.run_for(ms(499)).unwrap();
    assert_eq!(p.stopped(Side::A), None);
    assert_eq!(p.a.stats().pings_sent, 2);
    p.run_for(ms(1)).unwrap();
    assert_eq!(p.now(), t0 + ms(800));
    assert_eq!(p.stopped(Side::A), Some(&MConnError::PongTimeout));
    assert_eq!(p.a.error(), Some(&MConnError::PongTimeout));
    // B owes A's second ping a pong it cannot send.
    assert_eq!(p.b.stats().pings_received, 2);
    assert!(p.b.wants_to_transmit());
}

#[test]
fn held_bytes_stay_in_flight_until_the_clock_moves() {
    let cfg = MConnConfig::default().with_rates(None, Some(10_000));
    let channels = [ChannelDescriptor::new(0x20)];
    let mut p = Pair::asymmetric(MConnConfig::default(), &channels, cfg, &channels).unwrap();
    p.set_split(Side::A, Split::Random { seed: 7, max: 300 })
        .unwrap();
    p.a.send(0x20, message(3000)).unwrap();
    p.run_until_idle().unwrap();
    let wire = p.a.stats().bytes_out as usize;
    assert_eq!(p.in_flight(Side::B), wire - 1034, "one packet, then held");
    assert!(p.events(Side::B).is_empty());
    p.run_for(Duration::from_secs(1)).unwrap();
    assert_eq!(p.in_flight(Side::B), 0);
    assert_eq!(p.messages(Side::B, 0x20), [message(3000)]);
}

#[test]
fn transmit_and_deliver_let_a_test_tamper() {
    let mut p = pair(MConnConfig::default());
    p.a.send(0x20, b"hi".to_vec()).unwrap();
    let mut wire = p.transmit(Side::A);
    // Packet{msg{channel_id = 0x20, eof, data}}: the channel is byte 4.
    assert_eq!(wire[3..5], [0x08, 0x20]);
    wire[4] = 0x21;
    assert_eq!(
        p.deliver(Side::B, &wire),
        Err(MConnError::UnknownChannel(0x21))
    );
    assert_eq!(p.stopped(Side::B), Some(&MConnError::UnknownChannel(0x21)));
    assert!(p.events(Side::B).is_empty());
    // Stopped for good: more bytes are dropped, the same error comes back.
    assert_eq!(
        p.deliver(Side::B, &[0x02, 0x0a, 0x00]),
        Err(MConnError::UnknownChannel(0x21))
    );
    assert_eq!(p.in_flight(Side::B), 0);
    // A never sent what was taken out, and B's stop does not reach A.
    assert_eq!(p.run_until_idle(), Ok(0));
    assert_eq!(p.stopped(Side::A), None);
}
