//! Two [`MConnCore`]s wired together in memory, for tests of the core and
//! of code built on it, and the packet layer ([`Packet`], [`encode_packet`],
//! [`PacketDecoder`]) for tests, fuzz targets and peers played by hand
//! (feature `testkit`; no stability promise, never for production builds).
//!
//! ```
//! use std::time::Duration;
//! use p2p_conn_mconn::testkit::{Pair, Side, Split};
//! use p2p_conn_mconn::{ChannelDescriptor, MConnConfig};
//!
//! let channels = [ChannelDescriptor::new(0x20)];
//! let mut p = Pair::new(MConnConfig::default(), &channels).unwrap();
//! p.set_split(Side::A, Split::Fixed(7)).unwrap();
//! p.a.send(0x20, b"hello".to_vec()).unwrap();
//! p.run_until_idle().unwrap();
//! assert_eq!(p.messages(Side::B, 0x20), [b"hello".to_vec()]);
//! // 60 s of simulated time: a ping each way, each answered.
//! p.run_for(Duration::from_secs(60)).unwrap();
//! assert_eq!(p.a.stats().pongs_received, 1);
//! ```
//!
//! # Design
//! - [`Pair`] owns both cores (its public fields [`a`](Pair::a) and
//!   [`b`](Pair::b), which a test calls directly), a test clock, one link
//!   per direction and one event log per side. A direction is named by its
//!   sender: [`Side::A`]'s link carries A's bytes to B.
//! - The clock starts at the [`Instant`] the pair is made (read once, an
//!   arbitrary origin) and moves only by [`Pair::advance`] and
//!   [`Pair::run_for`]; every call the pair makes into a core passes
//!   [`Pair::now`].
//! - A [`Pair::step`] does, for A then B: run the side's timers if due
//!   ([`MConnCore::handle_timeout`]), take one batch of at most the
//!   direction's budget ([`Pair::set_budget`]) from
//!   [`MConnCore::poll_transmit`], and hand everything in flight on that
//!   direction to the peer's [`MConnCore::handle_input`], cut into pieces by
//!   the direction's [`Split`]. B thus answers a ping of A's within the same
//!   step. [`Pair::run_until_idle`] steps until a step moves no byte;
//!   [`Pair::run_for`] also moves the clock from timer to timer.
//! - [`Pair::transmit`] takes a side's bytes out instead (nothing is
//!   delivered), and [`Pair::deliver`] hands any bytes to a side through
//!   the same path as a step's delivery: together they let a test drop,
//!   tamper with, reorder or inject traffic.
//! - Random piece sizes come from `p2p_conn::testkit::Rng` (splitmix64), the
//!   generator p2p-conn's own test doubles use: a seed gives the same
//!   pieces on every run.
//!
//! # Guarantees
//! - No real time: the pair reads the clock once, when it is made, and
//!   never again.
//! - A side's log ([`Pair::events`]) holds every [`Event`] its core yielded
//!   to the pair, in order; the first error a core returned to the pair
//!   ends it ([`Pair::stopped`]): no event is logged after it, and bytes
//!   in flight to that side, or sent to it later, are dropped.
//! - Bytes the receiver's rate limit holds back stay in flight, in order,
//!   and go first at the next delivery (a later step, once the clock has
//!   moved); [`Pair::in_flight`] counts them.
//! - [`Pair::run_until_idle`] and [`Pair::run_for`] return
//!   [`PairError::Livelock`] after the step limit ([`Pair::set_step_limit`],
//!   [`DEFAULT_STEP_LIMIT`] by default) instead of looping for ever.
//! - Each batch is one `poll_transmit` call, so it is whole packets within
//!   the budget; [`Pair::traffic`] counts batches, pieces and bytes per
//!   direction.
//!
//! # Not provided
//! - No secret connection, sockets or tasks: the cores exchange plaintext
//!   (for MConnection over a real secret connection, see the crate's
//!   `tests/it/adapter.rs`; for hostile peers over sockets,
//!   `p2p_conn::testkit::evil_peer`).
//! - No loss, reordering or corruption of its own: a test that wants them
//!   uses [`Pair::transmit`] and [`Pair::deliver`].
//! - No latency: a batch reaches the peer within the step that made it.
//! - Calls a test makes on [`Pair::a`] or [`Pair::b`] directly (with a time
//!   of its choosing) bypass the log: their events and errors are the
//!   test's.

// The packet layer the core runs on, for tests, fuzz targets and peers
// played by hand: whole packets encoded and decoded as CometBFT's `protoio`
// does (the core writes its own `PacketMsg`s).
pub use crate::packet::{encode_packet, max_packet_size, Packet, PacketDecoder, PacketMsg};

use std::time::{Duration, Instant};

use p2p_conn::testkit::Rng;

use crate::{ChannelDescriptor, Event, MConnConfig, MConnCore, MConnError};

/// The steps [`Pair::run_until_idle`] and [`Pair::run_for`] take before
/// they give up with [`PairError::Livelock`], unless
/// [`Pair::set_step_limit`] says otherwise.
pub const DEFAULT_STEP_LIMIT: usize = 100_000;

/// One of the two cores of a [`Pair`]; as a direction, the bytes that side
/// sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// [`Pair::a`].
    A,
    /// [`Pair::b`].
    B,
}

impl Side {
    /// The other side.
    pub fn peer(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }

    fn index(self) -> usize {
        match self {
            Side::A => 0,
            Side::B => 1,
        }
    }
}

/// How a direction cuts the bytes it delivers into the pieces each
/// [`MConnCore::handle_input`] call is given. Each delivery (what is in
/// flight at a step, or what [`Pair::deliver`] adds to it) starts a new
/// piece; the last piece of a delivery is whatever is left.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Split {
    /// Everything in flight in one piece (the default).
    Whole,
    /// Pieces of this many bytes (at least 1).
    Fixed(usize),
    /// Pieces of these sizes in turn, cycled (each at least 1; not empty).
    /// The turn carries over from one delivery to the next.
    Cycle(Vec<usize>),
    /// Pieces of `1..=max` bytes (`max` at least 1), drawn from
    /// `p2p_conn::testkit::Rng` seeded with `seed`.
    Random {
        /// The generator's seed: the same seed, the same pieces.
        seed: u64,
        /// The largest piece.
        max: usize,
    },
}

/// What [`Pair`] refuses or gives up on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PairError {
    /// The step limit passed with bytes still moving: a livelock, or a
    /// limit too low for the traffic.
    #[error("still moving bytes after {steps} steps (livelock?)")]
    Livelock {
        /// The limit that passed.
        steps: usize,
    },
    /// A [`Split`] with a piece of 0 bytes (or no pieces at all).
    #[error("a split with an empty piece: {0:?}")]
    EmptyPiece(Split),
}

/// What one direction carried. [`Pair::traffic`] gives it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Traffic {
    /// Non-empty batches the sender's `poll_transmit` handed out (by steps
    /// and by [`Pair::transmit`]).
    pub batches: u64,
    /// The largest of them, in bytes.
    pub largest_batch: usize,
    /// Pieces handed to the receiver's `handle_input` (a piece given back
    /// to it after an event counts once).
    pub pieces: u64,
    /// The largest of them, in bytes.
    pub largest_piece: usize,
    /// Bytes the receiver took.
    pub delivered: u64,
}

/// One direction: its settings, the bytes in flight and its counters.
#[derive(Debug)]
struct Link {
    budget: usize,
    split: Split,
    /// The next size of a [`Split::Cycle`].
    turn: usize,
    rng: Rng,
    /// Bytes in flight are `queue[head..]`.
    queue: Vec<u8>,
    head: usize,
    traffic: Traffic,
}

impl Link {
    fn new() -> Link {
        Link {
            budget: 1 << 16,
            split: Split::Whole,
            turn: 0,
            rng: Rng::new(0),
            queue: Vec::new(),
            head: 0,
            traffic: Traffic::default(),
        }
    }

    fn in_flight(&self) -> &[u8] {
        &self.queue[self.head..]
    }

    fn push(&mut self, bytes: &[u8]) {
        if self.head == self.queue.len() {
            self.queue.clear();
            self.head = 0;
        }
        self.queue.extend_from_slice(bytes);
    }

    fn drop_all(&mut self) {
        self.queue.clear();
        self.head = 0;
    }

    fn next_piece(&mut self, available: usize) -> usize {
        let n = match &self.split {
            Split::Whole => available,
            Split::Fixed(n) => *n,
            Split::Cycle(sizes) => {
                let n = sizes[self.turn % sizes.len()];
                self.turn = (self.turn + 1) % sizes.len();
                n
            }
            Split::Random { max, .. } => self.rng.range(1, *max),
        };
        n.min(available)
    }

    fn count_batch(&mut self, n: usize) {
        if n > 0 {
            self.traffic.batches += 1;
            self.traffic.largest_batch = self.traffic.largest_batch.max(n);
        }
    }
}

/// Two [`MConnCore`]s connected in memory, on a test clock. See the
/// [module docs](self).
#[derive(Debug)]
pub struct Pair {
    /// Side A's core.
    pub a: MConnCore,
    /// Side B's core.
    pub b: MConnCore,
    now: Instant,
    /// Indexed by the sending side.
    links: [Link; 2],
    /// Indexed by the receiving side.
    logs: [Vec<Event>; 2],
    stopped: [Option<MConnError>; 2],
    step_limit: usize,
}

impl Pair {
    /// Two cores with the same configuration and channels, started at the
    /// pair's clock. Both directions deliver [`Split::Whole`] with a budget
    /// of 64 KiB per step.
    pub fn new(config: MConnConfig, channels: &[ChannelDescriptor]) -> Result<Pair, MConnError> {
        Pair::asymmetric(config.clone(), channels, config, channels)
    }

    /// Two cores with a configuration and channels each (a peer without a
    /// channel the other sends on, a rate limit on one side).
    pub fn asymmetric(
        a_config: MConnConfig,
        a_channels: &[ChannelDescriptor],
        b_config: MConnConfig,
        b_channels: &[ChannelDescriptor],
    ) -> Result<Pair, MConnError> {
        let now = Instant::now();
        Ok(Pair {
            a: MConnCore::new(a_config, a_channels, now)?,
            b: MConnCore::new(b_config, b_channels, now)?,
            now,
            links: [Link::new(), Link::new()],
            logs: [Vec::new(), Vec::new()],
            stopped: [None, None],
            step_limit: DEFAULT_STEP_LIMIT,
        })
    }

    /// The pair's clock: what it passes to both cores.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Moves the clock forward by `by`. Nothing else happens: the next step
    /// runs the timers that are due.
    ///
    /// # Panics
    /// If the clock would pass what [`Instant`] can hold (`Instant + by`
    /// overflows), as `Instant`'s own addition does.
    pub fn advance(&mut self, by: Duration) {
        self.now += by;
    }

    /// A side's core.
    pub fn core(&self, side: Side) -> &MConnCore {
        match side {
            Side::A => &self.a,
            Side::B => &self.b,
        }
    }

    /// A side's core, to call directly.
    pub fn core_mut(&mut self, side: Side) -> &mut MConnCore {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    /// The most bytes one `poll_transmit` call of `from` may produce: per
    /// step, and per batch of [`transmit`](Self::transmit). Under
    /// [`MConnCore::max_packet_wire_size`] a large packet never fits and
    /// the direction can stall (0 mutes it).
    pub fn set_budget(&mut self, from: Side, bytes: usize) {
        self.links[from.index()].budget = bytes;
    }

    /// How `from`'s bytes are cut into pieces for the peer (restarts a
    /// cycle or a seeded sequence). A piece of 0 bytes is
    /// [`PairError::EmptyPiece`], and the split stays as it was.
    pub fn set_split(&mut self, from: Side, split: Split) -> Result<(), PairError> {
        let empty = match &split {
            Split::Whole => false,
            Split::Fixed(n) => *n == 0,
            Split::Cycle(sizes) => sizes.is_empty() || sizes.contains(&0),
            Split::Random { max, .. } => *max == 0,
        };
        if empty {
            return Err(PairError::EmptyPiece(split));
        }
        let link = &mut self.links[from.index()];
        if let Split::Random { seed, .. } = split {
            link.rng = Rng::new(seed);
        }
        link.turn = 0;
        link.split = split;
        Ok(())
    }

    /// How many steps [`run_until_idle`](Self::run_until_idle) and
    /// [`run_for`](Self::run_for) take before [`PairError::Livelock`].
    pub fn set_step_limit(&mut self, steps: usize) {
        self.step_limit = steps;
    }

    /// Every event `side`'s core yielded to the pair, in order.
    pub fn events(&self, side: Side) -> &[Event] {
        &self.logs[side.index()]
    }

    /// The events logged so far for `side`, leaving its log empty.
    pub fn take_events(&mut self, side: Side) -> Vec<Event> {
        std::mem::take(&mut self.logs[side.index()])
    }

    /// The messages `side` received on `channel`, in order (the log keeps
    /// them).
    pub fn messages(&self, side: Side, channel: u8) -> Vec<Vec<u8>> {
        self.events(side)
            .iter()
            .filter_map(|e| match e {
                Event::Message { channel: c, data } if *c == channel => Some(data.clone()),
                _ => None,
            })
            .collect()
    }

    /// The error that stopped `side`'s core, once the pair has seen it (a
    /// timer or a delivery); the end of its log.
    pub fn stopped(&self, side: Side) -> Option<&MConnError> {
        self.stopped[side.index()].as_ref()
    }

    /// Bytes in flight to `to` that it has not taken (its receive limit
    /// held them back).
    pub fn in_flight(&self, to: Side) -> usize {
        self.links[to.peer().index()].in_flight().len()
    }

    /// What the direction from `from` carried.
    pub fn traffic(&self, from: Side) -> &Traffic {
        &self.links[from.index()].traffic
    }

    /// Everything `side` would send now, taken out of the pair: batches of
    /// its budget until it has nothing more (or nothing more fits, or its
    /// rate limit holds the rest). No timer runs (a ping falls due only in
    /// a step, or when the test calls [`MConnCore::handle_timeout`]), nothing
    /// is delivered, and bytes already in flight stay where they are.
    pub fn transmit(&mut self, side: Side) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let n = self.poll(side, &mut out);
            if n == 0 {
                return out;
            }
        }
    }

    /// Hands `bytes` to `to`, after what is already in flight to it, cut by
    /// the direction's [`Split`]; the events go to its log. Returns the
    /// bytes `to` took in this call (all of those in flight unless its
    /// receive limit held some back, which stay in flight), or the error
    /// that stopped it (now or before; the bytes are then dropped).
    pub fn deliver(&mut self, to: Side, bytes: &[u8]) -> Result<usize, MConnError> {
        if let Some(e) = self.stopped(to) {
            return Err(e.clone());
        }
        self.links[to.peer().index()].push(bytes);
        let taken = self.deliver_in_flight(to);
        match self.stopped(to) {
            Some(e) => Err(e.clone()),
            None => Ok(taken),
        }
    }

    /// One step: for A, then B, run the due timers, take one batch of the
    /// budget, and deliver what is in flight to the peer. Returns the bytes
    /// that moved (handed out plus taken, both directions); 0 is idle.
    pub fn step(&mut self) -> usize {
        let mut moved = 0;
        for side in [Side::A, Side::B] {
            self.run_timers(side);
            let mut batch = Vec::new();
            moved += self.poll(side, &mut batch);
            let to = side.peer();
            if self.stopped(to).is_some() {
                continue;
            }
            self.links[side.index()].push(&batch);
            moved += self.deliver_in_flight(to);
        }
        moved
    }

    /// Steps until a step moves nothing, at the same time: every message
    /// queued is across, every ping answered. Returns the steps that moved
    /// bytes; [`PairError::Livelock`] if bytes still move after the step
    /// limit.
    pub fn run_until_idle(&mut self) -> Result<usize, PairError> {
        for steps in 0..self.step_limit {
            if self.step() == 0 {
                return Ok(steps);
            }
        }
        Err(PairError::Livelock {
            steps: self.step_limit,
        })
    }

    /// Runs the pair for `by` of its clock: until idle, then the clock
    /// jumps to the next timer of either core (a ping due, a pong deadline,
    /// a rate limit's release) within `by`, and again; at the end the clock
    /// is `by` later and the pair idle. [`PairError::Livelock`] when the
    /// steps (moving or not) pass the step limit.
    ///
    /// # Panics
    /// As [`advance`](Self::advance), if the clock would overflow.
    pub fn run_for(&mut self, by: Duration) -> Result<(), PairError> {
        let end = self.now + by;
        let mut steps = 0usize;
        loop {
            steps += self.run_until_idle()? + 1;
            if steps > self.step_limit {
                return Err(PairError::Livelock {
                    steps: self.step_limit,
                });
            }
            let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= end => self.now = self.now.max(t),
                _ => break,
            }
        }
        self.now = end;
        self.run_until_idle().map(|_| ())
    }

    fn run_timers(&mut self, side: Side) {
        let now = self.now;
        let core = self.core_mut(side);
        if core.poll_timeout().is_some_and(|t| t <= now) {
            if let Err(e) = core.handle_timeout(now) {
                self.stop(side, e);
            }
        }
    }

    /// One `poll_transmit` of `side` within its budget, counted.
    fn poll(&mut self, side: Side, out: &mut Vec<u8>) -> usize {
        let now = self.now;
        let budget = self.links[side.index()].budget;
        let n = self.core_mut(side).poll_transmit(now, out, budget);
        self.links[side.index()].count_batch(n);
        n
    }

    fn stop(&mut self, side: Side, e: MConnError) {
        self.stopped[side.index()].get_or_insert(e);
        self.links[side.peer().index()].drop_all();
    }

    /// Feeds what is in flight to `to`, piece by piece, until it is all
    /// taken, the receive limit holds the rest, or `to` stops. Returns the
    /// bytes taken.
    fn deliver_in_flight(&mut self, to: Side) -> usize {
        let now = self.now;
        let core = match to {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        };
        let link = &mut self.links[to.peer().index()];
        let log = &mut self.logs[to.index()];
        let mut taken = 0;
        let mut failed = None;
        'pieces: while !link.in_flight().is_empty() {
            let n = link.next_piece(link.in_flight().len());
            link.traffic.pieces += 1;
            link.traffic.largest_piece = link.traffic.largest_piece.max(n);
            let mut done = 0;
            while done < n {
                let piece = &link.queue[link.head + done..link.head + n];
                match core.handle_input(now, piece) {
                    Ok((used, event)) => {
                        done += used;
                        let held = used == 0 && event.is_none();
                        log.extend(event);
                        if held {
                            break;
                        }
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            link.head += done;
            taken += done;
            link.traffic.delivered += done as u64;
            if failed.is_some() || done < n {
                break 'pieces;
            }
        }
        if let Some(e) = failed {
            self.stop(to, e);
        }
        taken
    }
}
