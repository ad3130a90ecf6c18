//! A send queue for one connection: many producers, one writer task.
//!
//! A node sends to a peer from many places at once (consensus, mempool,
//! block sync). [`Sender`] is a cheap, cloneable handle; a message spawns
//! a writer task, when none runs, that owns the connection's
//! [`WriteHalf`](crate::io::tokio::WriteHalf) until the queue goes idle.
//! Producers never touch the socket.
//!
//! # Design
//! * **Batched drain.** The writer takes everything already queued, up to
//!   [`QueueConfig::max_batch_messages`] messages and one write's worth of bytes
//!   (`flush_size`), seals it as one stream into its buffer and makes one
//!   write (`FrameWriter::poll_write_backlog_with`, the sans-IO step). No
//!   timer: a lone message goes out at once; under load, messages that
//!   arrive while a write is in progress go out together in the next one.
//! * **Frames are packed.** The secret connection is a byte stream: message
//!   boundaries are not on the wire, and the application frames its own
//!   messages (as MConnection length-prefixes its packets). A batch fills
//!   frames completely: five 200-byte messages share one 1 KiB frame.
//!   Readers see the same bytes in the same order as with one write per
//!   message.
//! * **Bundles** ([`Sender::send_bundle`]) are queued as one entry, so their
//!   messages reach the wire contiguously, never interleaved with another
//!   producer's.
//! * **Byte cap.** Queued, not yet sealed message bytes are capped at
//!   [`QueueConfig::max_pending_bytes`]; [`QueueConfig::overflow`] picks what happens
//!   when a message does not fit: wait ([`Overflow::Backpressure`]), fail
//!   that send ([`Overflow::Error`]), or close the connection once
//!   ([`Overflow::Disconnect`]). Each overflow is counted and logged
//!   (`tracing` warning naming the peer's node ID, its address when given,
//!   and the setting to raise; the MConnection adapter's queue, one stage
//!   of its pipeline, logs its waits at trace level instead). A message (or bundle) at or above the cap
//!   is counted apart, one at a time, so a large message never trips the cap
//!   by itself. Memory held for queued messages is therefore at most the
//!   cap, plus one such large message, plus the batch being written.
//! * **Lazy, and a task only while there is work.** No writer task, no
//!   write buffer and no channel memory until the first message. When the
//!   writer runs out of work (everything written, flush waiters told), it
//!   puts the write half back in the queue's shared state and its task
//!   ends, taking its batch lists and its future with it; the next command
//!   spawns it again, on the runtime it first ran on. Queueing a command
//!   and learning whether a writer runs happen under one lock, as does the
//!   writer's check for work before it parks, so no command is left
//!   behind. The cost is a task spawn per idle period (see
//!   docs/performance.md); a busy queue keeps its task.
//! * **No allocation per message** beyond what the caller hands in: one
//!   message is one command, a bundle one list (`tests/memory/queue_allocations.rs`).
//! * **Shutdown.** [`Sender::shutdown`] returns at once. The writer
//!   finishes what is queued, then half-closes the transport (TCP FIN); if
//!   that takes longer than [`QueueConfig::shutdown_timeout`] it stops writing
//!   and half-closes anyway. [`Sender::close`] stops at once. Dropping the
//!   last handle acts as `shutdown` (a parked writer is started on its
//!   runtime to half-close; a queue that never sent drops its half).
//! * **One failure for everyone.** When the writer stops (write error,
//!   overflow disconnect, shutdown, close), every waiting and later call
//!   fails with the same [`SendError`], which is `Clone` and carries the
//!   cause.
//!
//! # Guarantees
//! * Messages from one producer go out in the order it queued them;
//!   messages of a bundle are contiguous.
//! * [`Sender::flush`] resolves once everything queued before it has been
//!   written to the transport (and the transport flushed).
//! * A message queued before [`Sender::shutdown`] (a disconnect reason, say)
//!   reaches the peer before the FIN whenever the queue drains within
//!   `shutdown_timeout`. It does not when the peer reads too slowly for the
//!   backlog to drain in time: at the bound the writer stops where it is,
//!   possibly inside a frame (the peer then sees an incomplete frame, never
//!   a forged one), and the FIN follows.
//!
//! # Layers
//! The batching (`engine::Backlog`, `FrameWriter::poll_write_backlog_with`)
//! and the byte accounting (`engine::budget::Budget`) are sans-IO; this
//! module adds the channel, the task, the waiting and the deadline:
//!
//! | file | what |
//! |---|---|
//! | `config.rs` | [`QueueConfig`] and [`Overflow`], validated when a queue is made |
//! | `error.rs` | [`SendError`] and [`CloseReason`] |
//! | `command.rs` | what producers queue: a message or a command |
//! | `inbox.rs` | the channel to the writer: a `VecDeque` under the shared state's lock, taken whole |
//! | `shared.rs` | the state senders and writer share (the cap's room, the inbox, the parked half, the counters, the settings), below both |
//! | `sender.rs` | [`Sender`]: the producers' side, the cap and the waiting |
//! | `writer.rs` | the writer task: batches, writes, shutdown bound; its end of the inbox |
//!
//! The counters are [`crate::stats::QueueStats`].
//!
//! # Not provided
//! * Priorities or channels (MConnection's multiplexing): one FIFO.
//! * A std::io version: the sans-IO batch and budget steps are shared, a
//!   thread-driven writer over them would be a thin second layer.
//! * Retrying after a failure: reconnect.

mod command;
mod config;
mod error;
mod inbox;
mod sender;
mod shared;
mod writer;

use std::sync::Mutex;

pub use bytes::Bytes;
pub use config::{
    Overflow, QueueConfig, DEFAULT_MAX_BATCH_MESSAGES, DEFAULT_MAX_PENDING_BYTES,
    DEFAULT_SHUTDOWN_TIMEOUT,
};
pub use error::{CloseReason, SendError};
pub use sender::Sender;

/// A lock that keeps going after a panic elsewhere (the data are plain
/// counters and assignments, consistent at every step).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
