//! The sealed-frame writer / reader contract (`engine` module docs) through
//! the tokio and std adapters, over the fault-injecting transport of
//! `common` (short writes and reads, `Pending` / `WouldBlock`, `Interrupted`,
//! hard errors, bounded capacity):
//!
//! * streams survive any mix of transport faults on both ends: the receiver
//!   gets exactly the bytes the sender's writes accepted (`Ok(n)` = the first
//!   `n` bytes of that call), and a write accepts new plaintext only after
//!   the sealed bytes of older ones are all on the wire;
//! * dropped tokio `write` / `read` / `flush` futures lose and duplicate
//!   nothing (real runtime, real wakers);
//! * a hard transport error (or a zero-byte write) poisons the writer: the
//!   failing call returns the error, every later call `Error::Poisoned`, the
//!   transport is never called again, and the peer sees only whole frames
//!   sealed with distinct counters (checked by opening the wire bytes
//!   independently), then end of stream;
//! * frame sizes at the bottom of the range `Config` accepts can handshake;
//! * `send_vectored` leaves `bufs` at exactly the unsent remainder when it
//!   has to stop (its documented resume contract).
//!
//! Nonce exhaustion is not reachable through the adapters' public handshake
//! (a connection's counters always start at 0); `proto::frame`'s unit tests
//! cover it, and `evil_peer.rs` drives the engine's writer and reader into it
//! over a loopback socket. Case counts are modest; `PROPTEST_CASES` overrides them.

use std::future::Future;
use std::io::{self, IoSlice, Read};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use crate::common::{
    block_on, check_bytes, connect, is_would_block, pair, payload, proptest_config, Conn, Control,
    End, Plan, Rates, Rng, StdConn, TokioConn,
};
use futures::poll;
use p2p_conn::io::tokio as ptokio;
use p2p_conn::proto::FrameSize;
use p2p_conn::proto::HandshakeParams;
use p2p_conn::testkit::internals::wire::sealed_len;
use p2p_conn::testkit::internals::FrameSizeHooks;
use p2p_conn::testkit::internals::{
    handshake_with_ephemeral, open_at, poll_handshake, ready, FrameReader, ReadCore, StdIo,
};
use p2p_conn::Backend;
use p2p_conn::{Config, Error, Identity};
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Consecutive rounds without any progress before a driver declares a hang.
const IDLE_LIMIT: u32 = 100_000;

fn retry_kind(e: &io::Error) -> bool {
    is_would_block(e) || e.kind() == io::ErrorKind::Interrupted
}

/// Plaintext bytes one write accepts at most (`FrameWriter::max_chunk`).
fn max_chunk(flush_size: usize, frame: usize) -> usize {
    FrameSize::new(frame).unwrap().flush_chunk(flush_size)
}

// ---------------------------------------------------------------------------
// Random faults on both ends, both directions at once

#[derive(Clone, Debug)]
struct EndCase {
    flush_size: usize,
    read_buffer: usize,
    /// Capacity of the direction this end writes.
    capacity: usize,
    write_rates: Rates,
    read_rates: Rates,
    /// Sizes of the messages this end sends.
    messages: Vec<usize>,
    /// This end's application reads ask for `1..=max_read` bytes.
    max_read: usize,
}

#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    frame_size: usize,
    ends: [EndCase; 2],
    /// Percent chance to move on to the next message after a partial accept
    /// (so the accepted stream is a concatenation of prefixes).
    abandon: u32,
    /// Percent chance a write is a `write_vectored` of the rest in 3 parts.
    vectored: u32,
}

fn rates() -> impl Strategy<Value = Rates> {
    (0u32..=30, 0u32..=20, 0u32..=70).prop_map(|(pending, interrupted, short)| Rates {
        pending,
        interrupted,
        short,
    })
}

fn end_case() -> impl Strategy<Value = EndCase> {
    (
        prop::sample::select(vec![1usize, 1044, 5000, 16 * 1024, 128 * 1024, 300_000]),
        prop::sample::select(vec![1usize, 1044, 3000, 64 * 1024]),
        prop_oneof![1usize..=64, 1usize..=5000, 1usize..=300_000],
        rates(),
        rates(),
        prop::collection::vec(
            prop_oneof![0usize..=16, 0usize..=3000, 0usize..=200_000],
            0..6,
        ),
        prop_oneof![1usize..=16, 1usize..=5000, 1usize..=100_000],
    )
        .prop_map(
            |(flush_size, read_buffer, capacity, write_rates, read_rates, messages, max_read)| {
                EndCase {
                    flush_size,
                    read_buffer,
                    capacity,
                    write_rates,
                    read_rates,
                    messages,
                    max_read,
                }
            },
        )
}

fn any_case() -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        prop::sample::select(vec![1024usize, 1024, 1024, 128, 4096]),
        end_case(),
        end_case(),
        0u32..=40,
        0u32..=50,
    )
        .prop_map(|(seed, frame_size, a, b, abandon, vectored)| {
            let mut ends = [a, b];
            // Tiny transport pieces or tiny reads mean a call per few bytes:
            // keep those directions short so a case stays fast in debug.
            for i in 0..2 {
                if ends[i].capacity <= 64 || ends[1 - i].max_read <= 16 {
                    for m in &mut ends[i].messages {
                        *m = (*m).min(4000);
                    }
                }
            }
            Case {
                seed,
                frame_size,
                ends,
                abandon,
                vectored,
            }
        })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Write,
    Flush,
    Shutdown,
    Done,
}

/// One direction's sender: writes its messages (resuming after partial
/// accepts, or abandoning the rest), then flushes and shuts down, checking
/// each call against the transport's byte count.
struct Sender {
    who: &'static str,
    msgs: Vec<Vec<u8>>,
    i: usize,
    off: usize,
    /// Every byte a write call accepted, in order.
    accepted: Vec<u8>,
    /// Sealed bytes of everything accepted.
    sealed: u64,
    frame: usize,
    max_chunk: usize,
    phase: Phase,
    rng: Rng,
    abandon: u32,
    vectored: u32,
}

impl Sender {
    fn new(who: &'static str, end: &EndCase, case: &Case, seed: u64) -> Self {
        Sender {
            who,
            msgs: end
                .messages
                .iter()
                .enumerate()
                .map(|(i, &len)| payload(len, seed.wrapping_mul(1000).wrapping_add(i as u64)))
                .collect(),
            i: 0,
            off: 0,
            accepted: Vec::new(),
            sealed: 0,
            frame: case.frame_size,
            max_chunk: max_chunk(end.flush_size, case.frame_size),
            phase: Phase::Write,
            rng: Rng::new(seed),
            abandon: case.abandon,
            vectored: case.vectored,
        }
    }

    fn step<C: Conn>(&mut self, conn: &mut C, ctl: &Control) {
        let who = self.who;
        match self.phase {
            Phase::Write => {
                if self.i == self.msgs.len() {
                    self.phase = Phase::Flush;
                    return;
                }
                let msg_len = self.msgs[self.i].len();
                let rest = &self.msgs[self.i][self.off..];
                let r = if self.rng.percent(self.vectored) {
                    let x = self.rng.range(0, rest.len());
                    let y = self.rng.range(x, rest.len());
                    conn.try_write_vectored(&[
                        IoSlice::new(&rest[..x]),
                        IoSlice::new(&rest[x..y]),
                        IoSlice::new(&rest[y..]),
                    ])
                } else {
                    conn.try_write(rest)
                };
                let (written, _) = ctl.bytes();
                let mut next = false;
                match r {
                    Ok(n) if rest.is_empty() => {
                        assert_eq!(n, 0, "{who}: an empty write returned Ok({n})");
                        next = true;
                    }
                    Ok(n) => {
                        assert!(
                            n >= 1 && n <= rest.len().min(self.max_chunk),
                            "{who}: write of {} bytes returned Ok({n}) (max_chunk {})",
                            rest.len(),
                            self.max_chunk
                        );
                        assert!(
                            written >= self.sealed,
                            "{who}: write returned Ok({n}) for new plaintext while older sealed \
                             bytes were unwritten (transport has {written} of {})",
                            self.sealed
                        );
                        self.accepted.extend_from_slice(&rest[..n]);
                        self.sealed += sealed_len(n, self.frame) as u64;
                        assert!(
                            written <= self.sealed,
                            "{who}: transport got {written} bytes, more than the {} sealed so far",
                            self.sealed
                        );
                        self.off += n;
                        next = self.off == msg_len || self.rng.percent(self.abandon);
                    }
                    Err(e) if retry_kind(&e) => assert!(
                        written <= self.sealed,
                        "{who}: a write that accepted nothing put new bytes on the wire \
                         ({written} > {})",
                        self.sealed
                    ),
                    Err(e) => panic!("{who}: write: {e}"),
                }
                if next {
                    self.i += 1;
                    self.off = 0;
                }
            }
            Phase::Flush | Phase::Shutdown => {
                let r = if self.phase == Phase::Flush {
                    conn.try_flush()
                } else {
                    conn.try_shutdown()
                };
                match r {
                    Ok(()) => {
                        assert_eq!(
                            ctl.bytes().0,
                            self.sealed,
                            "{who}: {:?} returned Ok with sealed bytes unwritten",
                            self.phase
                        );
                        self.phase = if self.phase == Phase::Flush {
                            Phase::Shutdown
                        } else {
                            Phase::Done
                        };
                    }
                    Err(e) if retry_kind(&e) => {}
                    Err(e) => panic!("{who}: {:?}: {e}", self.phase),
                }
            }
            Phase::Done => {}
        }
    }
}

/// One direction's receiver: random read sizes until end of stream.
struct Receiver {
    who: &'static str,
    got: Vec<u8>,
    done: bool,
    rng: Rng,
    max_read: usize,
    buf: Vec<u8>,
}

impl Receiver {
    fn new(who: &'static str, max_read: usize, seed: u64) -> Self {
        Receiver {
            who,
            got: Vec::new(),
            done: false,
            rng: Rng::new(seed),
            max_read,
            buf: vec![0; max_read],
        }
    }

    fn step<C: Conn>(&mut self, conn: &mut C) {
        if self.done {
            return;
        }
        let len = self.rng.range(1, self.max_read);
        match conn.try_read(&mut self.buf[..len]) {
            Ok(0) => self.done = true,
            Ok(n) => {
                assert!(n <= len, "{}: read({len}) returned {n}", self.who);
                self.got.extend_from_slice(&self.buf[..n]);
            }
            Err(e) if retry_kind(&e) => {}
            Err(e) => panic!("{}: read after {} bytes: {e}", self.who, self.got.len()),
        }
    }
}

fn config_for(case: &Case, end: &EndCase) -> Config {
    Config::default()
        .frame_size(case.frame_size)
        .flush_size(end.flush_size)
        .read_buffer_size(end.read_buffer)
}

fn install_faults(case: &Case, ctls: [&Control; 2]) {
    for (i, (ctl, end)) in ctls.iter().zip(&case.ends).enumerate() {
        ctl.seed(case.seed ^ (i as u64 + 1));
        ctl.set_capacity(end.capacity);
        ctl.set_write_plan(Plan::random(end.write_rates));
        ctl.set_read_plan(Plan::random(end.read_rates));
    }
}

/// Both ends send and receive at once, each step one non-blocking attempt.
fn run_stream<C: Conn>(case: &Case) {
    let (mut a, ca, mut b, cb) = pair::<C, C>(
        &config_for(case, &case.ends[0]),
        &config_for(case, &case.ends[1]),
        usize::MAX,
    );
    install_faults(case, [&ca, &cb]);
    let mut sa = Sender::new("a sending", &case.ends[0], case, case.seed);
    let mut sb = Sender::new("b sending", &case.ends[1], case, !case.seed);
    let mut ra = Receiver::new("a receiving", case.ends[0].max_read, case.seed ^ 7);
    let mut rb = Receiver::new("b receiving", case.ends[1].max_read, case.seed ^ 9);
    let mut idle = 0;
    while !(sa.phase == Phase::Done && sb.phase == Phase::Done && ra.done && rb.done) {
        let state = |sa: &Sender, sb: &Sender, ra: &Receiver, rb: &Receiver| {
            (
                ca.bytes(),
                cb.bytes(),
                (sa.i, sa.off, sa.phase, sb.i, sb.off, sb.phase),
                (ra.got.len(), ra.done, rb.got.len(), rb.done),
            )
        };
        let before = state(&sa, &sb, &ra, &rb);
        sa.step(&mut a, &ca);
        rb.step(&mut b);
        sb.step(&mut b, &cb);
        ra.step(&mut a);
        if state(&sa, &sb, &ra, &rb) == before {
            idle += 1;
            assert!(idle < IDLE_LIMIT, "{}: no progress: {before:?}", C::NAME);
        } else {
            idle = 0;
        }
    }
    check_bytes("b received (a's accepted bytes)", &rb.got, &sa.accepted);
    check_bytes("a received (b's accepted bytes)", &ra.got, &sb.accepted);
}

proptest! {
    #![proptest_config(proptest_config(64))]

    #[test]
    fn tokio_stream_survives_transport_faults(case in any_case()) {
        run_stream::<TokioConn>(&case);
    }

    #[test]
    fn std_stream_survives_transport_faults(case in any_case()) {
        run_stream::<StdConn>(&case);
    }
}

// ---------------------------------------------------------------------------
// Dropped tokio futures, on a real runtime with real wakers

/// Poll `fut` once or twice (yielding in between); if it is still pending,
/// drop it (`None`) with probability `drop_pct`, else await it.
async fn attempt<F: Future>(fut: F, rng: &mut Rng, drop_pct: u32) -> Option<F::Output> {
    let mut fut = pin!(fut);
    for _ in 0..rng.range(1, 2) {
        if let Poll::Ready(out) = poll!(fut.as_mut()) {
            return Some(out);
        }
        tokio::task::yield_now().await;
    }
    if rng.percent(drop_pct) {
        None
    } else {
        Some(fut.await)
    }
}

/// Send with `write` futures that may be dropped while pending; returns the
/// accepted bytes and how many futures were dropped.
async fn send_dropping(
    mut w: ptokio::WriteHalf<tokio::io::WriteHalf<End>>,
    msgs: Vec<Vec<u8>>,
    max_chunk: usize,
    mut rng: Rng,
    drop_pct: u32,
    abandon: u32,
) -> (Vec<u8>, u32) {
    let mut accepted = Vec::new();
    let mut drops = 0;
    for msg in &msgs {
        let mut off = 0;
        loop {
            let rest = &msg[off..];
            match attempt(w.write(rest), &mut rng, drop_pct).await {
                None => drops += 1,
                Some(Ok(n)) => {
                    assert!(
                        n <= rest.len().min(max_chunk) && (n == 0) == rest.is_empty(),
                        "write of {} returned Ok({n})",
                        rest.len()
                    );
                    accepted.extend_from_slice(&rest[..n]);
                    off += n;
                    if off == msg.len() || rng.percent(abandon) {
                        break;
                    }
                }
                Some(Err(e)) => panic!("write: {e}"),
            }
        }
    }
    loop {
        match attempt(w.flush(), &mut rng, drop_pct).await {
            None => drops += 1,
            Some(Ok(())) => break,
            Some(Err(e)) => panic!("flush: {e}"),
        }
    }
    loop {
        match attempt(w.shutdown(), &mut rng, drop_pct).await {
            None => drops += 1,
            Some(Ok(())) => break,
            Some(Err(e)) => panic!("shutdown: {e}"),
        }
    }
    (accepted, drops)
}

/// Read to end of stream with `read` futures that may be dropped.
async fn recv_dropping(
    mut r: ptokio::ReadHalf<tokio::io::ReadHalf<End>>,
    max_read: usize,
    mut rng: Rng,
    drop_pct: u32,
) -> (Vec<u8>, u32) {
    let mut got = Vec::new();
    let mut drops = 0;
    let mut buf = vec![0u8; max_read];
    loop {
        let len = rng.range(1, max_read);
        match attempt(r.read(&mut buf[..len]), &mut rng, drop_pct).await {
            None => drops += 1,
            Some(Ok(0)) => return (got, drops),
            Some(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Some(Err(e)) => panic!("read after {} bytes: {e}", got.len()),
        }
    }
}

fn run_dropping(case: &Case, drop_pct: u32) -> u32 {
    let (a, ca, b, cb) = pair::<TokioConn, TokioConn>(
        &config_for(case, &case.ends[0]),
        &config_for(case, &case.ends[1]),
        usize::MAX,
    );
    install_faults(case, [&ca, &cb]);
    let msgs =
        |i: usize, seed: u64| -> Vec<Vec<u8>> { Sender::new("", &case.ends[i], case, seed).msgs };
    let chunk = |i: usize| max_chunk(case.ends[i].flush_size, case.frame_size);
    let (ar, aw) = a.into_split_locked();
    let (br, bw) = b.into_split_locked();
    let rng = |k: u64| Rng::new(case.seed ^ k);
    let ((acc_a, d1), (got_b, d2), (acc_b, d3), (got_a, d4)) = block_on(async {
        let all = async {
            tokio::join!(
                send_dropping(aw, msgs(0, 1), chunk(0), rng(1), drop_pct, case.abandon),
                recv_dropping(br, case.ends[1].max_read, rng(2), drop_pct),
                send_dropping(bw, msgs(1, 2), chunk(1), rng(3), drop_pct, case.abandon),
                recv_dropping(ar, case.ends[0].max_read, rng(4), drop_pct),
            )
        };
        tokio::time::timeout(Duration::from_secs(60), all)
            .await
            .expect("no progress for 60 s: a lost wakeup?")
    });
    check_bytes("b received (a's accepted bytes)", &got_b, &acc_a);
    check_bytes("a received (b's accepted bytes)", &got_a, &acc_b);
    d1 + d2 + d3 + d4
}

proptest! {
    #![proptest_config(proptest_config(64))]

    #[test]
    fn tokio_dropped_futures_lose_and_duplicate_nothing(case in any_case(), drop_pct in 10u32..=90) {
        run_dropping(&case, drop_pct);
    }
}

/// The premise of the property above: futures really are dropped while
/// pending (a transport that is always `Pending` first forces it).
#[test]
fn tokio_dropped_futures_do_happen() {
    let rates = Rates {
        pending: 50,
        interrupted: 0,
        short: 50,
    };
    let end = EndCase {
        flush_size: 16 * 1024,
        read_buffer: 3000,
        capacity: 5000,
        write_rates: rates,
        read_rates: rates,
        messages: vec![100_000, 1, 0, 5000],
        max_read: 4000,
    };
    let case = Case {
        seed: 42,
        frame_size: 1024,
        ends: [end.clone(), end],
        abandon: 10,
        vectored: 0,
    };
    let drops = run_dropping(&case, 50);
    assert!(drops > 10, "only {drops} futures were dropped");
}

// ---------------------------------------------------------------------------
// Ok(n) belongs to the current call

/// After a short write leaves sealed bytes of message 1 buffered, a write of
/// message 2 is `WouldBlock` / `Pending` until every one of them is on the
/// wire, and then accepts only bytes of message 2.
fn current_call_only<C: Conn>() {
    let cfg = Config::default();
    let (mut a, ca, mut b, _cb) = pair::<C, StdConn>(&cfg, &cfg, 500);
    let m1 = payload(3000, 1);
    let m2 = payload(10, 2);
    let old = sealed_len(3000, 1024) as u64;
    assert_eq!(a.try_write(&m1).expect("write of message 1"), 3000);
    assert_eq!(ca.bytes().0, 500, "the transport took what fit");
    for _ in 0..3 {
        let e = a
            .try_write(&m2)
            .expect_err("transport full: nothing new may be accepted");
        assert!(is_would_block(&e), "{}: {e}", C::NAME);
        assert_eq!(ca.bytes().0, 500);
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 300];
    let n2 = loop {
        match b.try_read(&mut buf) {
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => assert!(is_would_block(&e), "{e}"),
        }
        let r = a.try_write(&m2);
        let written = ca.bytes().0;
        match r {
            Ok(n) => {
                assert!(
                    (1..=10).contains(&n),
                    "{}: Ok({n}) for a 10-byte write",
                    C::NAME
                );
                assert!(
                    written >= old,
                    "{}: Ok({n}) with message 1's sealed bytes still pending ({written} of {old})",
                    C::NAME
                );
                break n;
            }
            Err(e) => {
                assert!(is_would_block(&e), "{}: {e}", C::NAME);
                assert!(
                    written <= old,
                    "{}: message 2 sealed while waiting",
                    C::NAME
                );
            }
        }
    };
    loop {
        match a.try_shutdown() {
            Ok(()) => break,
            Err(e) => assert!(is_would_block(&e), "{e}"),
        }
        if let Ok(n) = b.try_read(&mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
    }
    loop {
        match b.try_read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("after shutdown: {e}"),
        }
    }
    let mut expected = m1.clone();
    expected.extend_from_slice(&m2[..n2]);
    check_bytes("receiver", &got, &expected);
}

#[test]
fn tokio_write_accepts_only_the_current_call() {
    current_call_only::<TokioConn>();
}

#[test]
fn std_write_accepts_only_the_current_call() {
    current_call_only::<StdConn>();
}

// ---------------------------------------------------------------------------
// send_vectored: bufs end at exactly the unsent remainder

/// `send_vectored` over a transport that takes 100 bytes, then blocks: the
/// call (std: returns `WouldBlock`; tokio: its future is dropped while
/// pending) must leave `bufs` holding exactly what it did not accept, so that
/// resuming with the same `bufs` (as the docs promise) sends every byte once.
fn send_vectored_resumes<C: Conn>(cuts: &[usize], total: usize) {
    let cfg = Config::default();
    let (mut a, ca, mut b, _cb) = pair::<C, StdConn>(&cfg, &cfg, 100);
    let msg = payload(total, 5);
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(total);
    let mut slices: Vec<IoSlice<'_>> = bounds
        .windows(2)
        .map(|w| IoSlice::new(&msg[w[0]..w[1]]))
        .collect();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let mut first_remaining = None;
    let mut rounds = 0;
    // Resume until done, or until the receiver has more than the message
    // (a duplicate is on its way; the assertion below reports it).
    while got.len() <= total {
        match a.try_send_vectored(&mut slices) {
            Ok(()) => break,
            Err(Error::Io(e)) if is_would_block(&e) => {}
            Err(e) => panic!("{}: send_vectored: {e}", C::NAME),
        }
        let remaining: usize = slices.iter().map(|s| s.len()).sum();
        first_remaining.get_or_insert(remaining);
        while let Ok(n) = b.try_read(&mut buf) {
            assert!(n > 0, "end of stream before close");
            got.extend_from_slice(&buf[..n]);
        }
        rounds += 1;
        assert!(rounds < 1_000_000, "no progress");
    }
    ca.close_write();
    // (After a duplicate the stream may end inside a frame: stop there.)
    while let Ok(n @ 1..) = b.try_read(&mut buf) {
        got.extend_from_slice(&buf[..n]);
    }
    let accepted_first = total.min(max_chunk(cfg.flush_size, 1024));
    assert!(
        got == msg && first_remaining == Some(total - accepted_first),
        "{}: send_vectored of {total} bytes in slices cut at {cuts:?}: after the first call \
         stopped (it had accepted {accepted_first} bytes), bufs held {first_remaining:?} bytes; \
         resuming with them delivered {} bytes (expected exactly the {total}-byte message once)",
        C::NAME,
        got.len(),
    );
}

#[test]
fn tokio_send_vectored_one_slice_resumes_exactly() {
    send_vectored_resumes::<TokioConn>(&[], 3000);
}

#[test]
fn std_send_vectored_one_slice_resumes_exactly() {
    send_vectored_resumes::<StdConn>(&[], 3000);
}

#[test]
fn tokio_send_vectored_three_slices_resume_exactly() {
    send_vectored_resumes::<TokioConn>(&[50_000, 100_000], 300_000);
}

#[test]
fn std_send_vectored_three_slices_resume_exactly() {
    send_vectored_resumes::<StdConn>(&[50_000, 100_000], 300_000);
}

// ---------------------------------------------------------------------------
// Poisoning

/// The receiving peer: the library's own handshake state machine with a
/// known ephemeral secret (so the test can derive the frame keys itself) and
/// the engine's `FrameReader`, the read path both adapters use.
struct Peer {
    end: End,
    reader: FrameReader,
}

impl Peer {
    fn handshake(mut end: End, secret: [u8; 32], config: &Config) -> Peer {
        let params = HandshakeParams {
            frame_size: FrameSize::new(config.frame_size).expect("valid frame size"),
            backend: config.backend,
        };
        let mut hs = handshake_with_ephemeral(&Identity::generate(), params, secret);
        match poll_handshake(&mut hs, &mut StdIo(&mut end)) {
            Poll::Ready(r) => r.expect("peer handshake"),
            Poll::Pending => unreachable!("the pipe blocks during the handshake"),
        }
        let est = hs.into_established().expect("peer handshake");
        Peer {
            end,
            reader: FrameReader::new(ReadCore::new(
                est.opener,
                est.initial_plaintext,
                config.read_buffer_size,
            )),
        }
    }

    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let end = &mut self.end;
        match self
            .reader
            .poll_read_with(buf, |b| ready(Read::read(end, b)))
        {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

/// Open every whole frame of `wire` (everything one side wrote, handshake
/// included) with keys derived here from the peer's ephemeral secret, with a
/// fresh `Opener` (counters 0, 1, 2, ... in order). Returns the data of the
/// frames after frame #0 (the AuthSigMessage). A frame the opener refuses
/// fails the test, naming the counter that does open it if any (a reused
/// nonce shows up as an earlier frame's counter).
fn open_wire(wire: &[u8], peer_secret: [u8; 32], frame: usize) -> Vec<u8> {
    assert_eq!(&wire[..3], &[0x22, 0x0a, 0x20], "ephemeral key message");
    let eph: [u8; 32] = wire[3..35].try_into().unwrap();
    let keys = p2p_conn::testkit::PeerKeys::derive(peer_secret, &eph);
    let mut opener = p2p_conn::testkit::internals::opener(
        p2p_conn::testkit::internals::cipher(Backend::default(), &keys.recv),
        FrameSize::new(frame).unwrap(),
    );
    let sealed = frame + 20;
    let frames = (wire.len() - 35) / sealed;
    let mut data = Vec::new();
    for (i, f) in wire[35..].chunks_exact(sealed).enumerate() {
        let mut b = f.to_vec();
        match opener.open_in_place(&mut b) {
            Ok(r) if i > 0 => data.extend_from_slice(&b[r]),
            Ok(_) => {}
            Err(e) => {
                let cipher = p2p_conn::testkit::internals::cipher(Backend::default(), &keys.recv);
                let opens_with = (0..frames as u64 + 2).find(|&c| {
                    let mut b = f.to_vec();
                    open_at(&cipher, c, &mut b)
                });
                panic!(
                    "frame {i} of {frames} on the wire does not open with counter {i} ({e}); \
                     counter that opens it: {opens_with:?}"
                );
            }
        }
    }
    data
}

#[derive(Clone, Debug)]
struct PoisonCase {
    seed: u64,
    flush_size: usize,
    read_buffer: usize,
    capacity: usize,
    rates: Rates,
    messages: Vec<usize>,
    /// Where the transport fails, as a fraction of all sealed bytes.
    fail_at: prop::sample::Index,
    /// Round the failure point down to a frame boundary.
    at_boundary: bool,
    /// The transport fails with a zero-byte write instead of `ConnectionReset`.
    zero_write: bool,
    vectored: bool,
}

fn poison_case() -> impl Strategy<Value = PoisonCase> {
    (
        any::<u64>(),
        prop::sample::select(vec![1usize, 5000, 16 * 1024, 128 * 1024]),
        prop::sample::select(vec![1usize, 3000, 64 * 1024]),
        prop_oneof![1usize..=5000, 1usize..=300_000],
        rates(),
        prop::collection::vec(prop_oneof![1usize..=3000, 1usize..=200_000], 1..5),
        any::<prop::sample::Index>(),
        prop::bool::weighted(0.25),
        prop::bool::weighted(0.25),
        any::<bool>(),
    )
        .prop_map(
            |(
                seed,
                flush_size,
                read_buffer,
                capacity,
                rates,
                messages,
                fail_at,
                at_boundary,
                zero_write,
                vectored,
            )| {
                PoisonCase {
                    seed,
                    flush_size,
                    read_buffer,
                    capacity,
                    rates,
                    messages,
                    fail_at,
                    at_boundary,
                    zero_write,
                    vectored,
                }
            },
        )
}

fn expect_poisoned(what: &str, r: Result<(), Error>) {
    match r {
        Err(Error::Poisoned) => {}
        other => panic!("{what} after the failed write: expected Error::Poisoned, got {other:?}"),
    }
}

fn io_poisoned<T: std::fmt::Debug>(r: io::Result<T>) -> Result<(), Error> {
    match r {
        Ok(v) => panic!("succeeded with {v:?}"),
        Err(e) => Err(Error::from_io(e)),
    }
}

fn run_poison<C: Conn>(case: &PoisonCase) {
    const SEALED: u64 = 1044;
    let cfg = Config::default()
        .flush_size(case.flush_size)
        .read_buffer_size(case.read_buffer);
    let mut secret = [0x33u8; 32];
    secret[..8].copy_from_slice(&case.seed.to_le_bytes());
    let (a, ca, peer, _cb) = connect(
        usize::MAX,
        |e| C::handshake(e, &Identity::generate(), &cfg).expect("handshake"),
        |e| Peer::handshake(e, secret, &cfg),
    );
    let (mut a, mut peer) = (a, peer);
    let msgs: Vec<Vec<u8>> = case
        .messages
        .iter()
        .enumerate()
        .map(|(i, &len)| payload(len, case.seed.wrapping_add(i as u64)))
        .collect();
    let total: u64 = msgs.iter().map(|m| sealed_len(m.len(), 1024) as u64).sum();
    let mut fail_at = case.fail_at.index(total as usize) as u64;
    if case.at_boundary {
        fail_at -= fail_at % SEALED;
    }
    ca.set_capacity(case.capacity);
    ca.seed(case.seed);
    let kind = if case.zero_write {
        io::ErrorKind::WriteZero
    } else {
        io::ErrorKind::ConnectionReset
    };
    ca.set_write_plan(Plan::random(case.rates).fail_after_bytes(fail_at, kind));

    let mut accepted = Vec::new();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 70_000];
    let (mut i, mut off) = (0, 0);
    let mut idle = 0;
    let (err, offered) = loop {
        let before = (ca.bytes(), i, off, got.len());
        if i < msgs.len() {
            let rest = &msgs[i][off..];
            let r = if case.vectored {
                let h = rest.len() / 2;
                a.try_write_vectored(&[IoSlice::new(&rest[..h]), IoSlice::new(&rest[h..])])
            } else {
                a.try_write(rest)
            };
            match r {
                Ok(n) => {
                    assert!(
                        n > 0 && n <= rest.len(),
                        "write of {} returned {n}",
                        rest.len()
                    );
                    accepted.extend_from_slice(&rest[..n]);
                    off += n;
                    if off == msgs[i].len() {
                        i += 1;
                        off = 0;
                    }
                }
                Err(e) if retry_kind(&e) => {}
                Err(e) => break (e, rest.to_vec()),
            }
        } else {
            match a.try_flush() {
                Ok(()) => panic!(
                    "{}: flush succeeded although the transport fails after {fail_at} of \
                     {total} sealed bytes",
                    C::NAME
                ),
                Err(e) if retry_kind(&e) => {}
                Err(e) => break (e, Vec::new()),
            }
        }
        match peer.try_read(&mut buf) {
            Ok(0) => panic!("peer: end of stream before the failure"),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if is_would_block(&e) => {}
            Err(e) => panic!("peer: {e}"),
        }
        if before == (ca.bytes(), i, off, got.len()) {
            idle += 1;
            assert!(idle < IDLE_LIMIT, "no progress before the failure");
        } else {
            idle = 0;
        }
    };

    // The failing call returns the transport's own error (a zero-byte write
    // is reported as `WriteZero`).
    assert_eq!(err.kind(), kind, "{}: {err}", C::NAME);
    match Error::from_io(err) {
        Error::Io(e) if e.kind() == kind => {}
        other => panic!("{}: failing call maps to {other:?}", C::NAME),
    }
    assert_eq!(ca.bytes().0, fail_at, "bytes the transport accepted");

    // Every later call is Poisoned, and none reaches the transport.
    let calls = ca.counters().write_calls;
    expect_poisoned("write", io_poisoned(a.try_write(b"more")));
    expect_poisoned("empty write", io_poisoned(a.try_write(b"")));
    expect_poisoned(
        "write_vectored",
        io_poisoned(a.try_write_vectored(&[IoSlice::new(b"x"), IoSlice::new(&[7; 5000])])),
    );
    expect_poisoned("flush", io_poisoned(a.try_flush()));
    expect_poisoned("send", a.try_send(b"more"));
    expect_poisoned("empty send", a.try_send(b""));
    expect_poisoned(
        "send_vectored",
        a.try_send_vectored(&mut [IoSlice::new(b"a"), IoSlice::new(b"b")]),
    );
    expect_poisoned("write again", io_poisoned(a.try_write(&[1; 100_000])));
    expect_poisoned("shutdown", io_poisoned(a.try_shutdown()));
    assert_eq!(
        ca.counters().write_calls,
        calls,
        "{}: the poisoned writer called the transport",
        C::NAME
    );

    // The connection dies; the peer reads what reached it.
    ca.close_write();
    let end = loop {
        match peer.try_read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => break Err(e),
        }
    };
    match &end {
        Ok(()) => assert_eq!(
            fail_at % SEALED,
            0,
            "clean end of stream although the wire ends inside a frame"
        ),
        Err(e) => {
            assert_eq!(
                e.kind(),
                io::ErrorKind::UnexpectedEof,
                "{}: peer's read ended with {e} (fail_at {fail_at})",
                C::NAME
            );
            assert_ne!(
                fail_at % SEALED,
                0,
                "end of stream inside a frame at a boundary"
            );
        }
    }

    // The wire: handshake, then exactly `fail_at` bytes; every whole frame
    // opens with the next counter, and their data is what the peer read.
    let wire = ca.wire();
    assert_eq!(wire.len() as u64, 35 + SEALED + fail_at);
    let on_wire = open_wire(&wire, secret, 1024);
    check_bytes("peer's data vs the frames on the wire", &got, &on_wire);
    accepted.extend_from_slice(&offered);
    assert!(
        accepted.starts_with(&got),
        "{}: the peer's {} bytes are not a prefix of the accepted bytes and the failing call's",
        C::NAME,
        got.len()
    );
}

proptest! {
    #![proptest_config(proptest_config(64))]

    #[test]
    fn tokio_failed_write_poisons(case in poison_case()) {
        run_poison::<TokioConn>(&case);
    }

    #[test]
    fn std_failed_write_poisons(case in poison_case()) {
        run_poison::<StdConn>(&case);
    }
}

// ---------------------------------------------------------------------------
// Frame sizes at the bottom of the accepted range

/// `Config` accepts any frame size from 64 bytes (`validate` passes) and the
/// guide promises any such value works between two p2p-conn peers with the
/// same setting. Frame #0 carries the 103-byte AuthSigMessage, so a frame
/// size below that must still hand it over (the reader accepts it split
/// across frames).
#[test]
fn smallest_valid_frame_sizes_handshake() {
    let mut failures = Vec::new();
    for frame_size in [64, 100, 102, 103, 128] {
        let cfg = Config::default().frame_size(frame_size);
        cfg.validate().expect("a frame size the config accepts");
        let (a, _, b, _) = connect(
            usize::MAX,
            |e| StdConn::handshake(e, &Identity::generate(), &cfg),
            |e| StdConn::handshake(e, &Identity::generate(), &cfg),
        );
        if let (Err(e), _) | (_, Err(e)) = (&a, &b) {
            failures.push(format!("frame_size {frame_size}: {e}"));
        }
    }
    assert!(failures.is_empty(), "handshakes failed: {failures:#?}");
}
