//! Streams under random faults on both ends, both directions at once, and
//! with tokio futures dropped while pending.

use super::*;

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
