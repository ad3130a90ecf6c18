//! `send_queue`: the real send queue under an arbitrary sequence of calls
//! and peer reads. This file decodes the setup and runs one input; the
//! driver and its model of the peer's stream are in `driver.rs`.

mod driver;

use std::cell::Cell;
use std::sync::Mutex;
use std::time::Duration;

use crate::input::Input;
use crate::{cat, Seeds};
use driver::SqDriver;
use p2p_conn::io::queue::{Bytes, CloseReason, Sender};
use p2p_conn::io::queue::{Overflow, QueueConfig};
use p2p_conn::testkit::{self, Plan, Rates};
use p2p_conn::Backend;
use p2p_conn::{Config, Identity};

/// Every `send_queue` message starts with its id and its whole length (u32
/// LE each), then a pattern; a requested length of 1..8 is raised to 8 and 0
/// stays an empty message (which queues nothing).
const SQ_HEADER: usize = 8;
/// Most driver steps (calls and peer reads) decoded from one input.
const SQ_MAX_STEPS: usize = 256;
/// Most message bytes one input queues; a message past it shrinks to a header.
const SQ_MAX_BYTES: usize = 256 * 1024;
/// Most runtime turns one settle takes (it stops once nothing moves).
const SQ_SETTLE_ROUNDS: usize = 64;
/// Final-drain steps in a row without any progress that count as a hang.
const SQ_STUCK_STEPS: usize = 64;
/// Pipe capacity while the peer reads to the end.
const SQ_DRAIN_CAPACITY: usize = 256 * 1024;
/// The queue's shutdown bound. Never reached: the peer always drains to the
/// end within milliseconds, so no result depends on the clock.
const SQ_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3600);

/// What one `send_queue` input did (for the seed generator's own checks).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Sends and bundles of at least one byte that returned Ok.
    pub accepted: usize,
    /// Sends refused with `SendError::Full` (`Overflow::Error`).
    pub full: usize,
    /// Sends that waited for room (`Overflow::Backpressure`).
    pub waited: usize,
    /// The queue disconnected on overflow (`Overflow::Disconnect`).
    pub disconnected: bool,
    /// Calls that failed with `SendError::Closed`.
    pub closed: usize,
    /// Flushes that returned Ok.
    pub flushed: usize,
    /// Calls cancelled (their task aborted) before they returned.
    pub cancelled: usize,
    /// Bytes the peer read.
    pub delivered: usize,
    /// Bytes of every accepted message.
    pub expected: usize,
    /// The peer's stream ended cleanly (between frames).
    pub clean_end: bool,
}

/// The real send queue ([`Sender`], feature `queue`) over an in-memory
/// transport, under an arbitrary sequence of calls and peer reads, against a
/// model of what the peer must receive.
///
/// Setup: two tokio connections handshaken (`io::tokio::handshake`, fixed
/// identities) over the testkit pipe, each direction then holding at most
/// `capacity` bytes, so the writer really stalls while the peer does not
/// read; our write half goes into a [`Sender`], the peer stays a whole
/// connection the driver reads from (`testkit::Conn::try_read`). All of it
/// runs on one current-thread tokio runtime per input; calls that may
/// wait are spawned as tasks, and after every step the driver yields until
/// nothing moves, so no input can deadlock the driver and a run is
/// deterministic (the shutdown bound is an hour, never reached).
///
/// Input: `cfg` (bits 0-1: overflow policy Backpressure/Error/Disconnect/
/// Backpressure; bit 2: end by dropping every handle instead of `shutdown`;
/// bit 3: cap `1 + u8` instead of `1 + u16`; bit 4: frame size
/// `64 + u16 % 1985` instead of 1024; bit 5/6: random write/read faults;
/// bit 7: `max_batch_messages` 1024 instead of `1 + u8 % 16`), the cap,
/// [frame size u16], [batch u8], `flush_size` (u16: 0 = default, else
/// 4 * v), pipe capacity (u16: `1 + v % 8192`), the peer's read buffer (u16),
/// backends (low nibble ours, high nibble the peer's), [write faults: seed,
/// rates], [read faults: seed, rates]; then steps, by `op % 16`: 0-4 send
/// (length kind `op >> 4`), 5-6 bundle of `(op >> 4) % 6` parts (a length
/// kind byte each), 7 flush, 11 cancel a waiting call, 12 shutdown, 13
/// close, anything else: the peer reads up to `u16` bytes (0: all it can).
/// Length kinds: empty, header + u8, u16, exactly the cap, above it, one
/// below, frames, up to 4x the cap. Every message carries its id and length.
///
/// Checks: `stats().pending_bytes` never exceeds the cap plus the one
/// pending message at or above it, nor the bytes of accepted messages the
/// peer has not read; the overflow counter matches the refusals and waits
/// seen; every refusal (`Full`, the disconnect, a wait) is justified by
/// what is pending; the peer's stream is always a prefix of the accepted
/// messages in the order their calls returned (so bundles are contiguous,
/// nothing refused or cancelled appears, nothing is duplicated), checked
/// as it is read; a flush returns only once the messages accepted before it
/// are on the wire; after `shutdown` (or dropping every handle) the peer
/// reads every accepted message and a clean end; after an overflow
/// disconnect a clean end (no torn frame); after `close` at most a cut frame
/// (`UnexpectedEof`), never a frame that fails authentication; every call
/// after the queue closed fails at once with `Closed` and the first reason;
/// no call is left waiting once the peer has read to the end.
pub fn check(data: &[u8]) {
    std::hint::black_box(run(data));
}

/// [`check`], returning what happened.
pub fn run(data: &[u8]) -> Summary {
    count_panics();
    let panics_before = PANICS.with(Cell::get);
    let mut inp = Input::new(data);
    let setup = SqSetup::decode(&mut inp);
    let (our_end, peer_end) = testkit::pipe();
    let (wire, peer_ctl) = (our_end.control(), peer_end.control());
    let (id_a, id_b) = SQ_IDENTITIES.with(Clone::clone);
    let summary = testkit::block_on(async move {
        // Both handshakes on this runtime (no helper thread): the per-input
        // setup is the handshake's own crypto.
        let (ours, peer) = tokio::join!(
            p2p_conn::io::tokio::handshake(our_end, &id_a, &setup.ours),
            p2p_conn::io::tokio::handshake(peer_end, &id_b, &setup.peer),
        );
        let ours = ours.expect("our handshake");
        let peer = peer.expect("the peer's handshake");
        for c in [&wire, &peer_ctl] {
            c.set_capacity(setup.capacity);
        }
        if let Some((seed, rates)) = setup.write_faults {
            wire.seed(u64::from(seed));
            wire.set_write_plan(Plan::random(rates));
        }
        if let Some((seed, rates)) = setup.read_faults {
            peer_ctl.seed(u64::from(seed) | 0x100);
            peer_ctl.set_read_plan(Plan::random(rates));
        }
        let (our_read, our_write) = ours.into_split_locked();
        let sender = Sender::new(our_write, &setup.queue).expect("a valid queue config");
        let mut d = SqDriver::new(&setup, sender, our_read, peer, wire);
        for _ in 0..SQ_MAX_STEPS {
            if inp.is_empty() {
                break;
            }
            d.step(&mut inp).await;
        }
        d.finish().await
    });
    // The writer task is spawned by the library: a panic there is caught by
    // tokio, so it is counted here (libFuzzer's own hook aborts on it).
    assert_eq!(
        PANICS.with(Cell::get),
        panics_before,
        "a task panicked (message above)"
    );
    summary
}

thread_local! {
    /// The two ends' identities (fixed: a run depends only on its input).
    static SQ_IDENTITIES: (Identity, Identity) =
        (Identity::from_seed(&[1; 32]), Identity::from_seed(&[2; 32]));
    /// Panics on this thread (tasks of the current-thread runtime included).
    static PANICS: Cell<u64> = const { Cell::new(0) };
}

/// Count panics per thread, then run the previous hook (once per process).
fn count_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.with(|p| p.set(p.get() + 1));
            previous(info);
        }));
    });
}

fn sq_lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A message: id, whole length, then a pattern of the id.
fn sq_message(id: u32, len: usize) -> Bytes {
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&id.to_le_bytes());
    m.extend_from_slice(&(len as u32).to_le_bytes());
    m.extend((SQ_HEADER..len).map(|j| (j as u8) ^ ((j >> 8) as u8) ^ (id as u8).wrapping_mul(151)));
    Bytes::from(m)
}

/// Two close reasons are the same (`CloseReason` holds an `Arc<Error>`
/// and has no `PartialEq`; its message names every field).
fn sq_same(a: &CloseReason, b: &CloseReason) -> bool {
    a.to_string() == b.to_string()
}

/// Seed and rates of random transport faults: up to 35 % `Pending`, 15 %
/// `Interrupted`, 98 % short transfers.
fn sq_rates(inp: &mut Input<'_>) -> (u8, Rates) {
    let seed = inp.u8();
    let r = inp.u8();
    let rates = Rates {
        pending: u32::from(r & 7) * 5,
        interrupted: u32::from((r >> 3) & 3) * 5,
        short: u32::from(r >> 5) * 14,
    };
    (seed, rates)
}

struct SqSetup {
    ours: Config,
    queue: QueueConfig,
    peer: Config,
    capacity: usize,
    drop_at_end: bool,
    write_faults: Option<(u8, Rates)>,
    read_faults: Option<(u8, Rates)>,
}

impl SqSetup {
    fn decode(inp: &mut Input<'_>) -> Self {
        let cfg = inp.u8();
        let overflow = match cfg & 3 {
            1 => Overflow::Error,
            2 => Overflow::Disconnect,
            _ => Overflow::Backpressure,
        };
        let max = if cfg & 8 != 0 {
            1 + usize::from(inp.u8())
        } else {
            1 + usize::from(inp.u16())
        };
        let fs = if cfg & 16 == 0 {
            1024
        } else {
            64 + usize::from(inp.u16()) % (2048 - 64 + 1)
        };
        let batch = if cfg & 128 != 0 {
            p2p_conn::io::queue::DEFAULT_MAX_BATCH_MESSAGES
        } else {
            1 + usize::from(inp.u8() % 16)
        };
        let flush = match inp.u16() {
            0 => p2p_conn::DEFAULT_FLUSH_SIZE,
            v => usize::from(v) * 4,
        };
        let capacity = 1 + usize::from(inp.u16()) % 8192;
        let read_buffer = 1 + usize::from(inp.u16());
        let backends = inp.u8();
        let write_faults = (cfg & 32 != 0).then(|| sq_rates(inp));
        let read_faults = (cfg & 64 != 0).then(|| sq_rates(inp));
        let backend = |b: u8| Backend::ALL[usize::from(b) % Backend::ALL.len()];
        SqSetup {
            ours: Config::default()
                .frame_size(fs)
                .backend(backend(backends & 15))
                .flush_size(flush),
            queue: QueueConfig::default()
                .max_pending_bytes(max)
                .overflow(overflow)
                .max_batch_messages(batch)
                .shutdown_timeout(SQ_SHUTDOWN_TIMEOUT),
            peer: Config::default()
                .frame_size(fs)
                .backend(backend(backends >> 4))
                .read_buffer_size(read_buffer),
            capacity,
            drop_at_end: cfg & 4 != 0,
            write_faults,
            read_faults,
        }
    }
}

/// `send_queue` input header (see `p2p_conn_fuzz_checks::send_queue`): policy
/// (0 Backpressure, 1 Error, 2 Disconnect), drop every handle at the end
/// instead of `shutdown`, cap, 64-byte frames, batch (None: 1024),
/// flush-size word, pipe capacity, peer read buffer, write and read faults
/// (seed, rates).
#[allow(clippy::too_many_arguments)]
fn sq_head(
    policy: u8,
    drop: bool,
    cap: u16,
    small_frames: bool,
    batch: Option<u8>,
    flush: u16,
    capacity: u16,
    rbuf: u16,
    write_faults: Option<(u8, u8)>,
    read_faults: Option<(u8, u8)>,
) -> Vec<u8> {
    let cfg = policy
        | (drop as u8) << 2
        | (small_frames as u8) << 4
        | (write_faults.is_some() as u8) << 5
        | (read_faults.is_some() as u8) << 6
        | (batch.is_none() as u8) << 7;
    let mut h = vec![cfg];
    h.extend_from_slice(&(cap - 1).to_le_bytes());
    if small_frames {
        h.extend_from_slice(&0u16.to_le_bytes()); // 64-byte frames
    }
    if let Some(b) = batch {
        h.push(b - 1);
    }
    h.extend_from_slice(&flush.to_le_bytes());
    h.extend_from_slice(&(capacity - 1).to_le_bytes());
    h.extend_from_slice(&(rbuf - 1).to_le_bytes());
    h.push(0x10); // our backend 0, the peer's 1
    for (seed, rates) in write_faults.into_iter().chain(read_faults) {
        h.extend_from_slice(&[seed, rates]);
    }
    h
}

/// `send_queue` steps.
mod sq {
    /// A send of `n` bytes (length kind 2, a u16).
    pub fn send(n: u16) -> Vec<u8> {
        let mut v = vec![2 << 4];
        v.extend_from_slice(&n.to_le_bytes());
        v
    }
    /// Sends of exactly the cap (kind 3), one above it (kind 4), one below
    /// (kind 5), and an empty one (kind 0).
    pub const AT_CAP: &[u8] = &[3 << 4];
    pub fn above_cap(extra: u8) -> Vec<u8> {
        vec![4 << 4, extra]
    }
    pub const BELOW_CAP: &[u8] = &[5 << 4];
    pub const EMPTY: &[u8] = &[0];
    /// A bundle of parts of these lengths (0: an empty part).
    pub fn bundle(lens: &[u16]) -> Vec<u8> {
        assert!(lens.len() < 6);
        let mut v = vec![(lens.len() as u8) << 4 | 5];
        for &n in lens {
            if n == 0 {
                v.push(0);
            } else {
                v.push(2);
                v.extend_from_slice(&n.to_le_bytes());
            }
        }
        v
    }
    pub const FLUSH: &[u8] = &[7];
    /// The peer reads up to `k` bytes (0: all it can).
    pub fn read(k: u16) -> Vec<u8> {
        let mut v = vec![8];
        v.extend_from_slice(&k.to_le_bytes());
        v
    }
    /// The peer reads all it can, `n` times (the writer runs in between).
    pub fn reads(n: usize) -> Vec<u8> {
        read(0).repeat(n)
    }
    pub fn cancel(which: u8) -> Vec<u8> {
        vec![which << 4 | 11]
    }
    pub const SHUTDOWN: &[u8] = &[12];
    pub const CLOSE: &[u8] = &[13];
}

fn sq_add(s: &mut Seeds, name: &str, head: Vec<u8>, steps: &[Vec<u8>], want: fn(&Summary) -> bool) {
    let data = cat(&[&head, &steps.concat()]);
    let summary = run(&data);
    assert!(
        want(&summary),
        "seed {name} does not do what it is for: {summary:?}"
    );
    s.add(name, &data);
}

/// The seeds this check owns, written to `seeds/send_queue/` by `gen_seeds`:
/// each overflow policy at and above the cap, stalls and drains, bundles with
/// faults, shutdown, close, cancel and dropped handles. Each is run once
/// here and must do what it is named for (its `Summary`).
pub fn seeds() -> Seeds {
    use sq::*;
    let mut s = Seeds::default();
    let k1 = || send(1000);
    // Backpressure: the peer does not read, sends wait, a flush waits; then
    // the peer reads and everything arrives after the shutdown.
    sq_add(
        &mut s,
        "backpressure-stall-and-drain",
        sq_head(0, false, 4096, false, Some(4), 0, 512, 1024, None, None),
        &[
            k1(),
            k1(),
            k1(),
            k1(),
            k1(),
            k1(),
            FLUSH.to_vec(),
            k1(),
            read(3000),
            k1(),
            read(0),
        ],
        |s| s.waited >= 2 && s.flushed == 1 && s.clean_end && s.delivered == s.expected,
    );
    // Error: sends past the cap fail with Full; once the peer reads, sending
    // works again.
    sq_add(
        &mut s,
        "error-full-then-room",
        sq_head(1, false, 2048, false, Some(2), 0, 256, 2048, None, None),
        &[
            k1(),
            k1(),
            k1(),
            k1(),
            k1(),
            read(0),
            read(0),
            k1(),
            FLUSH.to_vec(),
            read(0),
        ],
        |s| s.full >= 1 && s.accepted >= 3 && s.clean_end && s.delivered == s.expected,
    );
    // Disconnect: the overflow closes the queue once; later calls fail;
    // the peer reads whole frames and a clean end.
    sq_add(
        &mut s,
        "disconnect-on-overflow",
        sq_head(2, false, 2048, false, Some(2), 0, 256, 2048, None, None),
        &[
            k1(),
            k1(),
            k1(),
            k1(),
            k1(),
            k1(),
            FLUSH.to_vec(),
            read(100),
        ],
        |s| s.disconnected && s.closed >= 2 && s.clean_end,
    );
    // Bundles of up to 5 parts (one empty) with 64-byte frames, one message
    // per batch, 400-byte writes, a 100-byte pipe, faults both ways.
    sq_add(
        &mut s,
        "bundles-small-frames-faults",
        sq_head(
            0,
            false,
            8192,
            true,
            Some(1),
            100,
            100,
            50,
            Some((7, 0xab)),
            Some((9, 0x6d)),
        ),
        &[
            bundle(&[300, 40, 0, 900]),
            send(77),
            bundle(&[8, 8, 8, 8, 8]),
            read(500),
            bundle(&[2000, 1]),
            send(3000),
            bundle(&[130, 64, 65]),
            read(0),
            bundle(&[5000, 5000]),
            FLUSH.to_vec(),
        ],
        |s| s.accepted == 7 && s.clean_end && s.delivered == s.expected,
    );
    // shutdown() with a backlog the peer has not read: later calls fail,
    // and the peer still reads everything before the end.
    sq_add(
        &mut s,
        "shutdown-with-pending",
        sq_head(0, false, 65535, false, None, 0, 64, 4096, None, None),
        &[
            send(4000),
            send(4000),
            bundle(&[4000, 4000]),
            send(4000),
            SHUTDOWN.to_vec(),
            send(10),
            FLUSH.to_vec(),
            bundle(&[1, 2]),
            read(10),
        ],
        |s| s.closed == 3 && s.clean_end && s.delivered == s.expected && s.expected >= 20000,
    );
    // close() mid-stream: queued messages are dropped, later calls fail,
    // the peer reads a prefix (a cut frame at most).
    sq_add(
        &mut s,
        "close-mid-stream",
        sq_head(0, false, 65535, false, Some(3), 0, 700, 4096, None, None),
        &[
            send(5000),
            send(5000),
            read(1500),
            send(5000),
            CLOSE.to_vec(),
            send(9),
            FLUSH.to_vec(),
        ],
        |s| s.closed >= 2 && s.delivered < s.expected,
    );
    // Under Error: messages at and above the cap are large, counted one at
    // a time. The first is sealed at once (the pipe is full after it), the
    // second holds the large slot, the third is refused; one just below the
    // cap still fits, and once the peer reads a large one fits again.
    sq_add(
        &mut s,
        "at-and-above-cap-error",
        sq_head(1, false, 1000, false, Some(4), 0, 128, 4096, None, None),
        &[
            AT_CAP.to_vec(),
            above_cap(9),
            above_cap(20),
            BELOW_CAP.to_vec(),
            reads(40),
            above_cap(200),
            EMPTY.to_vec(),
            bundle(&[600, 600]),
        ],
        |s| s.full == 1 && s.accepted == 5 && s.clean_end && s.delivered == s.expected,
    );
    // Under Backpressure the same: the third large message waits until the
    // second is sealed.
    sq_add(
        &mut s,
        "at-and-above-cap-backpressure",
        sq_head(0, false, 1000, false, Some(4), 0, 128, 4096, None, None),
        &[
            AT_CAP.to_vec(),
            above_cap(9),
            above_cap(20),
            BELOW_CAP.to_vec(),
            read(300),
            reads(40),
        ],
        |s| s.waited == 1 && s.accepted == 4 && s.clean_end && s.delivered == s.expected,
    );
    // Every handle dropped while sends wait: they finish as the peer reads,
    // then the queue drains and ends the stream.
    sq_add(
        &mut s,
        "drop-handles-while-waiting",
        sq_head(0, true, 3000, false, Some(2), 0, 300, 4096, None, None),
        &[k1(), k1(), k1(), k1(), k1(), k1(), FLUSH.to_vec()],
        |s| s.waited >= 2 && s.clean_end && s.delivered == s.expected,
    );
    // A waiting send is cancelled: it never reaches the peer.
    sq_add(
        &mut s,
        "cancel-waiting-send",
        sq_head(0, false, 2500, false, Some(2), 0, 200, 4096, None, None),
        &[
            k1(),
            k1(),
            k1(),
            k1(),
            k1(),
            cancel(0),
            cancel(1),
            reads(30),
            k1(),
            reads(30),
        ],
        |s| s.cancelled == 2 && s.accepted == 4 && s.clean_end && s.delivered == s.expected,
    );
    // A one-byte cap: every message is large and waits for the previous;
    // empty messages and an empty bundle queue nothing.
    sq_add(
        &mut s,
        "cap-one-empties",
        sq_head(0, false, 1, false, Some(1), 0, 50, 64, None, None),
        &[
            EMPTY.to_vec(),
            send(20),
            bundle(&[0, 0]),
            send(30),
            send(40),
            reads(20),
            EMPTY.to_vec(),
        ],
        |s| s.waited >= 1 && s.accepted == 3 && s.clean_end && s.delivered == s.expected,
    );
    s
}
