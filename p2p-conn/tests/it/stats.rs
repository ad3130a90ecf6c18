//! Per-connection statistics (`p2p_conn::stats`) against what the transport
//! saw: a known workload over the counting test double yields the exact
//! frame, byte and call counts; a transport that sleeps in its writes or
//! reads moves the timers by at least the injected delay; a socket that is
//! not ready is counted apart; the ratio is the quotient of the timers.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::{connect, pair, tokio_secret_pair, End, Fault, Plan, StdConn};
use p2p_conn::io::blocking;
use p2p_conn::stats::ConnStats;
use p2p_conn::testkit::internals::wire::STANDARD_SEALED_FRAME;
use p2p_conn::{Config, Identity};

fn enabled() {
    if !p2p_conn::stats::ENABLED {
        panic!("these tests need the `stats` feature (on by default)");
    }
}

/// Write `msgs` on `a` (one `write` call each, all under one flush), read
/// everything on `b`, and return both sides' stats.
fn exchange(a: &mut StdConn, b: &mut StdConn, msgs: &[Vec<u8>]) -> (ConnStats, ConnStats) {
    for m in msgs {
        a.write_all(m).unwrap();
    }
    a.flush().unwrap();
    let total: usize = msgs.iter().map(Vec::len).sum();
    let mut got = vec![0u8; total];
    b.read_exact(&mut got).unwrap();
    assert_eq!(got, msgs.concat());
    (a.stats(), b.stats())
}

#[test]
fn exact_counts_over_a_counting_transport() {
    enabled();
    let cfg = Config::default();
    let (mut a, ca, mut b, cb) = pair::<StdConn, StdConn>(&cfg, &cfg, 1 << 20);
    for c in [&ca, &cb] {
        c.set_blocking(true);
    }
    // Three 200-byte messages (a frame each), one of 5000 (5 frames).
    let msgs = vec![
        vec![1u8; 200],
        vec![2u8; 200],
        vec![3u8; 200],
        vec![4u8; 5000],
    ];
    let (sa, sb) = exchange(&mut a, &mut b, &msgs);
    let (ta, tb) = (ca.counters(), cb.counters());

    let s = sa.send;
    assert_eq!(s.seals, 4, "one seal step per message");
    assert_eq!(s.frames_sealed, 8);
    assert_eq!(s.bytes_sealed, 5600);
    assert_eq!(s.writes, ta.writes, "write calls");
    assert_eq!(s.writes, 4, "one write per message");
    assert_eq!(s.bytes_written, ta.written);
    assert_eq!(s.bytes_written, 8 * STANDARD_SEALED_FRAME as u64);
    assert_eq!((s.short_writes, s.not_ready), (0, 0));
    assert_eq!(sa.recv, Default::default(), "a read nothing");

    let r = sb.recv;
    assert_eq!(r.frames_opened, 8);
    assert_eq!(r.bytes_opened, 5600);
    assert_eq!(r.bytes_read, tb.read_bytes);
    assert_eq!(r.reads, tb.reads + tb.eofs, "read calls");
    assert!(
        r.opens >= 1 && r.opens <= r.reads,
        "one open step per read batch: {r:?}"
    );
    assert_eq!(sb.send, Default::default(), "b wrote nothing");

    // Every step took some time, and the ratio is the quotient.
    assert!(!s.seal_time.is_zero() && !s.write_time.is_zero());
    assert!(!r.open_time.is_zero() && !r.read_time.is_zero());
    let ratio = sa.write_to_seal().unwrap();
    assert!((ratio - s.write_time.as_secs_f64() / s.seal_time.as_secs_f64()).abs() < 1e-12);

    // A short write: the message needs two write calls, one of them short.
    ca.set_write_plan(Plan::script(&[Fault::Short(1000)]));
    let before = a.stats();
    let (sa, _) = exchange(&mut a, &mut b, &[vec![5u8; 3000]]);
    let d = sa.since(&before).send;
    assert_eq!((d.seals, d.frames_sealed, d.bytes_sealed), (1, 3, 3000));
    assert_eq!((d.writes, d.short_writes), (2, 1));
    assert_eq!(d.bytes_written, 3 * STANDARD_SEALED_FRAME as u64);
}

/// A transport whose writes and reads sleep for a settable time first.
struct Slow {
    inner: End,
    write_delay: Arc<AtomicU64>,
    read_delay: Arc<AtomicU64>,
}

fn nap(d: &AtomicU64) {
    let us = d.load(Ordering::Relaxed);
    if us > 0 {
        std::thread::sleep(Duration::from_micros(us));
    }
}

impl Write for Slow {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        nap(&self.write_delay);
        self.inner.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl Read for Slow {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        nap(&self.read_delay);
        self.inner.read(buf)
    }
}

#[test]
fn timers_move_with_an_injected_delay() {
    enabled();
    let cfg = Config::default();
    let (wd, rd) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (ia, ib) = (Identity::generate(), Identity::generate());
    let slow = |e| Slow {
        inner: e,
        write_delay: wd.clone(),
        read_delay: rd.clone(),
    };
    let (a, ca, b, cb) = connect(
        1 << 20,
        |e| blocking::handshake(slow(e), &ia, &cfg),
        |e| blocking::handshake(e, &ib, &cfg),
    );
    let (mut a, mut b) = (a.unwrap(), b.unwrap());
    for c in [&ca, &cb] {
        c.set_blocking(true);
    }
    let before = a.stats();
    // 20 ms: the unoptimized pure-Rust build sealed these ten frames in
    // 6.2 ms in one CI run, which failed the tenth-of-write-time check
    // below at a 5 ms delay.
    const DELAY: Duration = Duration::from_millis(20);
    wd.store(DELAY.as_micros() as u64, Ordering::Relaxed);
    let wall = std::time::Instant::now();
    for i in 0..10u8 {
        a.write_all(&[i; 100]).unwrap();
    }
    let wall = wall.elapsed();
    wd.store(0, Ordering::Relaxed);
    let mut got = [0u8; 1000];
    b.read_exact(&mut got).unwrap();
    let d = a.stats().since(&before);
    assert_eq!(d.send.writes, 10);
    assert!(
        d.send.write_time >= 10 * DELAY,
        "write time {:?} for 10 writes delayed {DELAY:?}",
        d.send.write_time
    );
    // And no more than the wall clock saw around them: the stats clock
    // (the TSC where it is usable) converts to real time (1% for its
    // calibration).
    assert!(
        d.send.write_time + d.send.seal_time <= wall.mul_f64(1.01),
        "write {:?} + seal {:?} within {wall:?} of wall time",
        d.send.write_time,
        d.send.seal_time
    );
    assert!(
        d.send.seal_time < d.send.write_time / 10,
        "seal {:?} vs write {:?}",
        d.send.seal_time,
        d.send.write_time
    );
    let ratio = d.write_to_seal().unwrap();
    assert!(ratio > 10.0, "write/seal {ratio}");
    assert!(
        (ratio - d.send.write_time.as_secs_f64() / d.send.seal_time.as_secs_f64()).abs()
            < 1e-9 * ratio
    );

    // The same on the receive side.
    let before = a.stats();
    rd.store(DELAY.as_micros() as u64, Ordering::Relaxed);
    for i in 0..4u8 {
        b.write_all(&[i; 100]).unwrap();
        let mut one = [0u8; 100];
        a.read_exact(&mut one).unwrap();
        assert_eq!(one, [i; 100]);
    }
    let d = a.stats().since(&before);
    assert!(d.recv.reads >= 4);
    assert!(
        d.recv.read_time >= 4 * DELAY,
        "read time {:?}",
        d.recv.read_time
    );
    assert_eq!(d.recv.bytes_opened, 400);
    assert!(d.read_to_open().unwrap() > 4.0);
}

/// A tokio writer facing a full transport counts the not-ready calls apart,
/// with the time until the transport had room again; the write time does
/// not include that wait.
#[test]
fn not_ready_time_is_counted_apart() {
    enabled();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let cfg = Config::default();
        let (a, b) = tokio_secret_pair(&cfg).await;
        let (mut a, mut b) = (a, b);
        const STALL: Duration = Duration::from_millis(100);
        let data = vec![7u8; 16 << 20];
        let reader = async {
            // Let the socket buffers fill before reading anything.
            tokio::time::sleep(STALL).await;
            let mut got = vec![0u8; data.len()];
            b.read_exact(&mut got).await.unwrap();
            got
        };
        let writer = async {
            a.write_all(&data).await.unwrap();
            a.flush().await.unwrap();
        };
        let (got, ()) = tokio::join!(reader, writer);
        assert!(got == data);
        let s = a.stats().send;
        assert!(s.not_ready > 0, "{s:?}");
        assert!(
            s.not_ready_time >= STALL / 2,
            "not-ready time {:?} with a reader that slept {STALL:?}",
            s.not_ready_time
        );
        assert_eq!(s.bytes_sealed, data.len() as u64);
    });
}

/// The send queue reports how long messages waited and the writer's
/// counters.
#[test]
fn send_queue_reports_wait_and_writer_counters() {
    enabled();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use tokio::io::AsyncReadExt;
        let cfg = Config::default();
        let (a, b) = tokio_secret_pair(&cfg).await;
        let mut b = b;
        let (_read, write) = a.into_split();
        let q = p2p_conn::io::queue::Sender::new(write, &Default::default()).unwrap();
        for i in 0..50u8 {
            q.send(vec![i; 300]).await.unwrap();
        }
        q.flush().await.unwrap();
        let mut got = vec![0u8; 50 * 300];
        b.read_exact(&mut got).await.unwrap();
        let st = q.stats();
        assert_eq!(st.messages_sent, 50);
        assert_eq!(st.send.bytes_sealed, 50 * 300);
        assert_eq!(st.send.seals, st.batches, "one seal step per batch");
        assert!(st.largest_batch >= 1 && st.largest_batch <= 50);
        assert!(!st.queue_wait_time.is_zero());
        assert!(st.average_queue_wait() <= st.queue_wait_time);
        assert_eq!(
            st.send.frames_sealed,
            st.send.bytes_written / STANDARD_SEALED_FRAME as u64
        );
    });
}
