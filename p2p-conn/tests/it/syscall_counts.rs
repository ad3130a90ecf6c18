//! Transport call counts and shapes, over the counting transport of `common`
//! (deterministic: no timing, no faults, unbounded capacity unless stated).
//!
//! Formulas asserted (standard 1024-byte frames, 1044 sealed bytes each):
//!
//! * Writes. A message of `len` bytes is `frames = ceil(len / 1024)` frames.
//!   One write call carries at most `frames_per_flush = max(1,
//!   floor(flush_size / 1044))` frames (`FrameWriter::max_chunk` =
//!   `frames_per_flush * 1024` plaintext bytes), so a message takes
//!   `ceil(frames / frames_per_flush)` write calls: all of
//!   `frames_per_flush * 1044` bytes but the last (one call when the sealed
//!   size fits `flush_size`). The same for tokio `write_all`, std
//!   `write_all`, `send` and `send_vectored` (however the message is cut into
//!   slices); `flush` adds none. Every write is a whole number of frames.
//! * Codec. `FramedWrite` writes its buffer before an item when it already
//!   holds at least the backpressure boundary, and on `flush`; each item is
//!   sealed whole into the buffer. The boundary is `flush_size` rounded down
//!   to whole frames (`frames_per_flush * 1044`), the same unit as the
//!   writers' (before the one-unit fix it was raw `flush_size`, so a flush
//!   size between two frame multiples let one more frame into each write).
//! * Reads (fresh connection, all `N` frames already queued). The receive
//!   buffer starts at one sealed frame and grows to `R' = max(R, 1044)` after
//!   a read fills it, so the first read brings 1044 bytes, the second `R'`,
//!   every later one `R' - r` (`r = R' mod 1044`, the partial frame moved to
//!   the front), the last whatever is left. With `q = floor(R' / 1044)` that
//!   is `1 + ceil((N - 1) / q)` read calls.
//! * Idle memory (tokio): once a read finds nothing to do, the reader holds no
//!   buffer, and the writer keeps at most `WRITE_BUFFER_KEEP` (16 KiB).

use std::io::{IoSlice, Write};

use crate::common::{
    block_on, connect, is_would_block, pair, payload, Conn, Control, End, Rng, StdConn, TokioConn,
};
use bytes::Bytes;
use futures::{FutureExt, SinkExt};
use p2p_conn::io::codec;
use p2p_conn::testkit::internals::wire::sealed_len;
use p2p_conn::testkit::internals::WRITE_BUFFER_KEEP;
use p2p_conn::{Config, Identity, DEFAULT_FLUSH_SIZE};
use tokio::io::AsyncWriteExt;

const SEALED: usize = 1044;
const SIZES: &[usize] = &[1, 1024, 1025, 65536, 131072, 1_000_000];
const FLUSH_SIZES: &[usize] = &[DEFAULT_FLUSH_SIZE, 16 * 1024];

/// The write calls (their sizes) of one `len`-byte message; see the module docs.
fn expected_writes(len: usize, flush_size: usize) -> Vec<usize> {
    let frames = len.div_ceil(1024);
    let per_flush = (flush_size / SEALED).max(1);
    (0..frames)
        .step_by(per_flush)
        .map(|first| (frames - first).min(per_flush) * SEALED)
        .collect()
}

/// The formula against counts worked out by hand.
#[test]
fn expected_write_counts_by_hand() {
    let counts = |flush| -> Vec<usize> {
        SIZES
            .iter()
            .map(|&l| expected_writes(l, flush).len())
            .collect()
    };
    // 128 KiB: 125 frames per write. 16 KiB: 15 frames per write.
    assert_eq!(counts(DEFAULT_FLUSH_SIZE), [1, 1, 1, 1, 2, 8]);
    assert_eq!(counts(16 * 1024), [1, 1, 1, 5, 9, 66]);
    assert_eq!(
        expected_writes(131072, DEFAULT_FLUSH_SIZE),
        [130_500, 3 * 1044]
    );
    assert_eq!(expected_writes(0, DEFAULT_FLUSH_SIZE), Vec::<usize>::new());
}

/// Send each size with `send` over a fresh connection of adapter `C` and
/// check the writer's transport calls.
fn check_writes<C: Conn>(what: &str, send: impl Fn(&mut C, &[u8])) {
    for &flush in FLUSH_SIZES {
        let cfg = Config::default().flush_size(flush);
        let (mut a, ca, _b, _) = pair::<C, StdConn>(&cfg, &cfg, usize::MAX);
        for &len in SIZES {
            ca.reset_counters();
            send(&mut a, &payload(len, len as u64));
            let c = ca.counters();
            let expected = expected_writes(len, flush);
            assert_eq!(
                c.write_sizes,
                expected,
                "{} {what}, flush_size {flush}, {len}-byte message: write calls",
                C::NAME
            );
            assert_eq!(
                c.write_calls, c.writes,
                "no call returned anything but Ok(n)"
            );
            assert!(
                c.write_sizes.iter().all(|n| n % SEALED == 0),
                "whole frames"
            );
        }
    }
}

fn three_slices(msg: &[u8]) -> [IoSlice<'_>; 3] {
    let (x, y) = (msg.len() / 3, 2 * msg.len() / 3);
    [
        IoSlice::new(&msg[..x]),
        IoSlice::new(&msg[x..y]),
        IoSlice::new(&msg[y..]),
    ]
}

#[test]
fn tokio_write_all_calls() {
    check_writes::<TokioConn>("write_all + flush", |c, msg| {
        c.write_all(msg)
            .now_or_never()
            .expect("never waits")
            .unwrap();
        c.flush().now_or_never().expect("never waits").unwrap();
    });
}

#[test]
fn std_write_all_calls() {
    check_writes::<StdConn>("write_all + flush", |c, msg| {
        c.write_all(msg).unwrap();
        c.flush().unwrap();
    });
}

#[test]
fn send_calls() {
    check_writes::<TokioConn>("send", |c, msg| c.try_send(msg).unwrap());
    check_writes::<StdConn>("send", |c, msg| c.try_send(msg).unwrap());
}

#[test]
fn send_vectored_calls() {
    check_writes::<TokioConn>("send_vectored (3 slices)", |c, msg| {
        c.try_send_vectored(&mut three_slices(msg)).unwrap()
    });
    check_writes::<StdConn>("send_vectored (3 slices)", |c, msg| {
        c.try_send_vectored(&mut three_slices(msg)).unwrap()
    });
}

/// Random sizes and flush sizes through `write` (one call, then the rest
/// with more calls, as `write_all` does): every transport write is whole
/// frames, and the calls are exactly those of the formula.
fn random_shapes<C: Conn>() {
    let mut rng = Rng::new(7);
    for _ in 0..4 {
        let flush = rng.range(1, 300_000);
        let cfg = Config::default().flush_size(flush);
        let (mut a, ca, _b, _) = pair::<C, StdConn>(&cfg, &cfg, usize::MAX);
        for _ in 0..25 {
            let len = match rng.below(3) {
                0 => rng.range(0, 2100),
                1 => rng.range(0, 70_000),
                _ => rng.range(0, 400_000),
            };
            let msg = payload(len, len as u64);
            ca.reset_counters();
            let mut off = 0;
            while off < len {
                off += a.try_write(&msg[off..]).expect("never waits");
            }
            a.try_flush().expect("never waits");
            let c = ca.counters();
            assert!(
                c.write_sizes.iter().all(|n| n % SEALED == 0),
                "{}: flush_size {flush}, {len} bytes: {:?}",
                C::NAME,
                c.write_sizes
            );
            assert_eq!(
                c.write_sizes,
                expected_writes(len, flush),
                "flush_size {flush}, {len} bytes"
            );
        }
    }
}

#[test]
fn wire_shape_random_sizes() {
    random_shapes::<TokioConn>();
    random_shapes::<StdConn>();
}

// ---------------------------------------------------------------------------
// Codec

/// The writes `FramedWrite` makes while these items are fed (with
/// backpressure boundary `boundary`; see the module docs), and the bytes it
/// still buffers (the final flush writes them in one call).
fn codec_model(sizes: &[usize], boundary: usize) -> (Vec<usize>, usize) {
    let mut writes = Vec::new();
    let mut buffered = 0;
    for &len in sizes {
        if buffered >= boundary {
            writes.push(buffered);
            buffered = 0;
        }
        buffered += sealed_len(len, 1024);
    }
    (writes, buffered)
}

/// [`codec_model`] followed by a flush.
fn codec_model_flushed(sizes: &[usize], boundary: usize) -> Vec<usize> {
    let (mut writes, buffered) = codec_model(sizes, boundary);
    if buffered > 0 {
        writes.push(buffered);
    }
    writes
}

/// Feed `sizes` into `sink`, checking the transport after each item, then
/// flush: the calls must follow [`codec_model`].
fn check_codec<S>(what: &str, sink: &mut S, ctl: &Control, sizes: &[usize], boundary: usize)
where
    S: futures::Sink<Bytes, Error = std::io::Error> + Unpin,
{
    ctl.reset_counters();
    for (i, &len) in sizes.iter().enumerate() {
        sink.feed(Bytes::from(payload(len, i as u64)))
            .now_or_never()
            .expect("never waits")
            .unwrap();
        assert_eq!(
            ctl.counters().write_sizes,
            codec_model(&sizes[..=i], boundary).0,
            "{what}, boundary {boundary}: writes after feeding {:?}",
            &sizes[..=i]
        );
    }
    sink.flush().now_or_never().expect("never waits").unwrap();
    let c = ctl.counters();
    assert_eq!(
        c.write_sizes,
        codec_model_flushed(sizes, boundary),
        "{what}, boundary {boundary}: writes for {sizes:?} then flush"
    );
    assert!(c.write_sizes.iter().all(|n| n % SEALED == 0));
}

fn codec_cases() -> Vec<Vec<usize>> {
    vec![
        // Fits in one flush: nothing is written until the flush, which is
        // one write.
        vec![1, 1024, 1025, 3000],
        vec![1000; 15],
        SIZES.to_vec(),
        vec![65536, 65536, 65536, 1, 1],
        vec![0, 10, 0, 20_000, 20_000, 20_000],
    ]
}

/// Flush sizes for the codec: the shared ones, plus one that is not a whole
/// number of frames (2 frames and 500 bytes), where "sealed bytes rounded
/// down to whole frames" and raw bytes disagree.
const CODEC_FLUSH_SIZES: &[usize] = &[DEFAULT_FLUSH_SIZE, 16 * 1024, 2 * SEALED + 500];

/// `flush_size` in the one unit every adapter uses.
fn whole_frames(flush: usize) -> usize {
    (flush / SEALED).max(1) * SEALED
}

#[test]
fn codec_framed_feed_then_flush_calls() {
    for &flush in CODEC_FLUSH_SIZES {
        let cfg = Config::default().flush_size(flush);
        let id = Identity::generate();
        let (mut framed, ca, _b, _) = connect(
            usize::MAX,
            |e: End| block_on(codec::handshake(e, &id, &cfg)).unwrap(),
            |e| StdConn::handshake(e, &Identity::generate(), &cfg).unwrap(),
        );
        for sizes in codec_cases() {
            check_codec("Framed", &mut framed, &ca, &sizes, whole_frames(flush));
        }
        if flush >= 7 * SEALED {
            // The first case really is one write, at the flush.
            assert_eq!(codec_model_flushed(&codec_cases()[0], flush), [7 * SEALED]);
        }
    }
}

#[test]
fn codec_split_feed_then_flush_calls() {
    for &flush in CODEC_FLUSH_SIZES {
        let cfg = Config::default().flush_size(flush);
        let id = Identity::generate();
        let (((_read, mut write), _), ca, _b, _) = connect(
            usize::MAX,
            |e: End| block_on(codec::handshake_split_locked(e, &id, &cfg)).unwrap(),
            |e| StdConn::handshake(e, &Identity::generate(), &cfg).unwrap(),
        );
        for sizes in codec_cases() {
            check_codec("FramedWrite", &mut write, &ca, &sizes, whole_frames(flush));
        }
    }
}

// ---------------------------------------------------------------------------
// Reads

/// The read calls (their sizes) that bring in `n` queued frames on a fresh
/// connection with read buffer `r`; see the module docs.
fn expected_reads(n: usize, r: usize) -> Vec<usize> {
    let big = r.max(SEALED);
    let partial = big % SEALED;
    let mut left = n * SEALED;
    let mut sizes = Vec::new();
    while left > 0 {
        let want = match sizes.len() {
            0 => SEALED,
            1 => big,
            _ => big - partial,
        };
        sizes.push(want.min(left));
        left -= want.min(left);
    }
    sizes
}

#[test]
fn expected_read_counts_by_hand() {
    let q = |r: usize| (r.max(SEALED) / SEALED).max(1);
    for r in [1, 1044, 4096, 10_000, 65536, 100_000, 1 << 20] {
        for n in [1usize, 2, 3, 61, 62, 63, 64, 100, 200, 977] {
            assert_eq!(
                expected_reads(n, r).len(),
                1 + (n - 1).div_ceil(q(r)),
                "{n} frames, {r}-byte buffer"
            );
        }
    }
    // 64 KiB buffer (62 frames + 808 bytes): 1044, then 65536, then 64728...
    assert_eq!(expected_reads(100, 65536), [1044, 65536, 37820]);
    assert_eq!(expected_reads(3, 1), [1044, 1044, 1044]);
}

fn check_reads<C: Conn>() {
    for r in [1, 1044, 4096, 10_000, 65536, 100_000, 1 << 20] {
        for n in [1usize, 2, 3, 61, 62, 63, 64, 100, 200, 977] {
            let writer = Config::default().flush_size(1 << 21);
            let reader = Config::default().read_buffer_size(r);
            let (mut a, _, mut b, cb) = pair::<StdConn, C>(&writer, &reader, usize::MAX);
            let msg = payload(n * 1024, n as u64);
            a.try_send(&msg).unwrap();
            let mut got = Vec::new();
            let mut buf = vec![0u8; 64 * 1024];
            while got.len() < msg.len() {
                let k = b.try_read(&mut buf).expect("all frames are queued");
                assert!(k > 0);
                got.extend_from_slice(&buf[..k]);
            }
            assert!(got == msg, "{}: data", C::NAME);
            let c = cb.counters();
            let expected = expected_reads(n, r);
            // A tokio reader with the multi-frame engine may hold frames back
            // for one more read (see below): then its reads are fuller, never
            // more numerous, and never above the read buffer size.
            let may_hold_back = C::NAME == "tokio"
                && p2p_conn::Backend::default().accelerated()
                && r >= 2 * 17 * SEALED;
            if may_hold_back {
                assert!(
                    c.read_sizes.len() <= expected.len()
                        && c.read_sizes.iter().all(|&k| k <= r.max(SEALED))
                        && c.read_sizes.iter().sum::<usize>() == n * SEALED,
                    "{}: {n} frames, read_buffer_size {r}: read calls {:?}, without holding back {expected:?}",
                    C::NAME,
                    c.read_sizes
                );
            } else {
                assert_eq!(
                    c.read_sizes,
                    expected,
                    "{}: {n} frames, read_buffer_size {r}: read calls",
                    C::NAME
                );
            }
            // A tokio reader with the multi-frame engine, whose last read
            // filled its buffer, tries one more read before it opens the
            // frames short of a group one at a time: that read may find
            // nothing (one `Pending`). Real tokio then knows the socket is
            // not readable, so the closing read below costs no syscall
            // there; this double counts it anyway.
            let early = c.read_pending;
            assert!(
                early == 0 || (may_hold_back && early == 1),
                "{}: {n} frames, read_buffer_size {r}: {early} reads found nothing",
                C::NAME
            );
            assert_eq!(c.read_calls, c.reads + early, "no other read results");
            // Nothing more: one read finds nothing.
            let e = b.try_read(&mut buf).expect_err("nothing left");
            assert!(is_would_block(&e), "{e}");
            let c = cb.counters();
            assert_eq!(
                (c.read_calls, c.read_pending),
                (c.reads + early + 1, early + 1)
            );
        }
    }
}

#[test]
fn tokio_reads_per_frames() {
    check_reads::<TokioConn>();
}

#[test]
fn std_reads_per_frames() {
    check_reads::<StdConn>();
}

// ---------------------------------------------------------------------------
// Idle memory

/// Read until the transport has nothing more (the read returns `Pending`).
fn drain<C: Conn>(c: &mut C) -> usize {
    let mut buf = vec![0u8; 10_000];
    let mut total = 0;
    loop {
        match c.try_read(&mut buf) {
            Ok(0) => panic!("unexpected end of stream"),
            Ok(n) => total += n,
            Err(e) if is_would_block(&e) => return total,
            Err(e) => panic!("{e}"),
        }
    }
}

fn burst<C: Conn>(c: &mut C, sizes: &[usize]) -> usize {
    for (i, &len) in sizes.iter().enumerate() {
        c.try_send(&payload(len, i as u64)).unwrap();
    }
    sizes.iter().sum()
}

#[test]
fn tokio_idle_connection_buffers() {
    let cfg = Config::default();
    let bursts: [&[usize]; 3] = [&[1_000_000], &[1_000_000, 10], &[5000, 3, 200_000, 70_000]];
    for sizes in bursts {
        // One direction: `a` only writes, `b` only reads, so each
        // connection's `buffer_capacity` is one engine's.
        let (mut a, _, mut b, _) = pair::<TokioConn, TokioConn>(&cfg, &cfg, usize::MAX);
        assert_eq!(
            (a.buffer_capacity(), b.buffer_capacity()),
            (0, 0),
            "after the handshake"
        );
        let sent = burst(&mut a, sizes);
        assert_eq!(drain(&mut b), sent);
        let (writer, reader) = (a.buffer_capacity(), b.buffer_capacity());
        eprintln!("after {sizes:?} one way: writer holds {writer} bytes, idle reader {reader}");
        assert_eq!(
            reader, 0,
            "idle reader after {sizes:?} holds {reader} bytes"
        );
        assert!(
            writer <= WRITE_BUFFER_KEEP,
            "idle writer holds {writer} bytes"
        );

        // Both directions, then both idle.
        let (mut a, _, mut b, _) = pair::<TokioConn, TokioConn>(&cfg, &cfg, usize::MAX);
        let to_b = burst(&mut a, sizes);
        let to_a = burst(&mut b, &[300_000, 1]);
        assert_eq!((drain(&mut a), drain(&mut b)), (to_a, to_b));
        let (ha, hb) = (a.buffer_capacity(), b.buffer_capacity());
        eprintln!("after {sizes:?} / [300000, 1] both ways: idle connections hold {ha} and {hb}");
        assert!(
            ha <= WRITE_BUFFER_KEEP && hb <= WRITE_BUFFER_KEEP,
            "{ha}, {hb}"
        );
    }
}
