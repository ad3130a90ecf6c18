//! `send_queue`: the real send queue under an arbitrary sequence of calls
//! and peer reads. This file decodes the setup and runs one input; the
//! driver and its model of the peer's stream are in `driver.rs`.

mod driver;

use std::cell::Cell;
use std::sync::Mutex;
use std::time::Duration;

use crate::input::Input;
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
