//! The state a send queue's senders and its writer task share: the cap's
//! room, the inbox and the parked write half under one lock, the writer's
//! counters, and the settings. Below both [`super::sender`] and
//! [`super::writer`], which reach each other only through it.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::inbox::Inbox;
use super::{lock, CloseReason, Overflow};
use crate::engine::budget::{Admission, Budget};
use crate::stats::clock::Ticks;
use crate::stats::SendRecorder;
use crate::NodeId;

/// The writer task's settings, in 16 bytes (a `Duration` and a `usize`
/// would take 24 in the shared state).
#[derive(Clone, Copy)]
pub(super) struct Settings {
    /// At most `MAX_BATCH_MESSAGES_LIMIT`.
    max_batch_messages: u32,
    /// The shutdown bound in nanoseconds (saturating, at 584 years).
    shutdown_nanos: u64,
}

impl Settings {
    /// From a validated config.
    pub(super) fn new(config: &super::QueueConfig) -> Settings {
        Settings {
            max_batch_messages: u32::try_from(config.max_batch_messages).unwrap_or(u32::MAX),
            shutdown_nanos: u64::try_from(config.shutdown_timeout.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    pub(super) fn max_batch_messages(&self) -> usize {
        self.max_batch_messages as usize
    }

    pub(super) fn shutdown_timeout(&self) -> Duration {
        Duration::from_nanos(self.shutdown_nanos)
    }
}

/// A parked write half, whatever its transport: started as a writer task.
pub(super) trait Park: Send {
    /// Spawn the writer task with this half on `rt`.
    fn start(self: Box<Self>, shared: Arc<Shared>, rt: &tokio::runtime::Handle);
}

#[derive(Default)]
pub(super) struct Counters {
    /// Counted by producers on overflow.
    pub(super) overflows: AtomicU64,
}

/// Bytes and messages queued and not yet sealed, behind `State`'s lock:
/// counted as a command is queued and taken back by the writer's per-batch
/// update, each under the lock it takes anyway.
#[derive(Default, Clone, Copy)]
pub(super) struct Pending {
    pub(super) bytes: usize,
    pub(super) messages: usize,
}

/// The writer's counters behind `State::written`, raw (times in stats
/// clock ticks): converted only when read.
#[derive(Default, Clone)]
pub(super) struct Written {
    pub(super) batches: u64,
    pub(super) messages_sent: u64,
    pub(super) largest_batch: u64,
    pub(super) queue_wait: Ticks,
    /// The write half's counters, published after each write.
    pub(super) send: SendRecorder,
}

pub(super) struct Shared {
    pub(super) peer: NodeId,
    /// Boxed: 8 bytes, not 32, for a queue made without one.
    pub(super) addr: Option<Box<SocketAddr>>,
    pub(super) overflow: Overflow,
    /// Waits for room under [`Overflow::Backpressure`] are the normal pace
    /// (the MConnection adapter's queue, one stage of its pipeline): logged
    /// at trace level, not as a warning (still counted).
    pub(super) quiet: bool,
    pub(super) settings: Settings,
    /// Message bytes queued and not sealed, against the cap (sans-IO), and
    /// how many producers wait for room, under one lock so that a release
    /// never misses a waiter.
    pub(super) budget: Mutex<Room>,
    pub(super) counters: Counters,
    pub(super) state: Mutex<State>,
}

pub(super) struct State {
    /// The commands for the writer.
    pub(super) inbox: Inbox,
    /// The write half while no writer task runs (before the first command,
    /// and whenever the queue is idle); the next command spawns a task with
    /// it. `None` while a task owns it, and once the writer has stopped
    /// (`Inbox::stopped`).
    pub(super) parked: Option<Box<dyn Park>>,
    /// The runtime the writer task runs on: the one current when it first
    /// started; later starts go there too, whoever sends.
    pub(super) runtime: Option<tokio::runtime::Handle>,
    /// Set once, when the queue stops; boxed: 8 bytes, not 32, until then.
    pub(super) closed: Option<Box<CloseReason>>,
    /// Counted by the writer alone, once per batch; allocated with the
    /// first batch (an unused queue does not hold them).
    pub(super) written: Option<Box<Written>>,
    pub(super) pending: Pending,
}

impl State {
    /// Update the writer's counters.
    pub(super) fn update_written(&mut self, f: impl FnOnce(&mut Written)) {
        f(self.written.get_or_insert_with(Box::default));
    }
}

/// The cap's state behind `Shared::budget`.
pub(super) struct Room {
    pub(super) budget: Budget,
    /// Producers waiting for room (releases skip the wake-up otherwise).
    pub(super) waiters: usize,
    /// Woken when room is given back while producers wait, or the queue
    /// stops. Made when a producer first has to wait (8 bytes, not 32,
    /// for a queue that never fills), then kept.
    pub(super) room: Option<Arc<Notify>>,
}

impl Shared {
    /// Update the writer's counters.
    pub(super) fn update_written(&self, f: impl FnOnce(&mut Written)) {
        lock(&self.state).update_written(f);
    }

    /// The writer's counters as last updated, and what is pending.
    pub(super) fn written(&self) -> (Written, Pending) {
        let st = lock(&self.state);
        (
            st.written.as_deref().cloned().unwrap_or_default(),
            st.pending,
        )
    }

    /// Give back room under the cap and wake producers waiting for it.
    pub(super) fn release(&self, admissions: impl IntoIterator<Item = Admission>) {
        let wake = {
            let mut r = lock(&self.budget);
            admissions.into_iter().for_each(|a| r.budget.release(a));
            if r.waiters > 0 {
                r.room.clone()
            } else {
                None
            }
        };
        if let Some(room) = wake {
            room.notify_waiters();
        }
    }

    /// Wake every producer waiting for room (the queue stopped).
    pub(super) fn wake_waiters(&self) {
        let room = lock(&self.budget).room.clone();
        if let Some(room) = room {
            room.notify_waiters();
        }
    }
}
