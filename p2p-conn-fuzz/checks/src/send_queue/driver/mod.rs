//! The `send_queue` driver: spawns the calls, lets the queue and the peer
//! run, and checks every outcome and every byte the peer reads against its
//! book of what was accepted.

mod checks;

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use super::{
    sq_lock, sq_message, sq_same, SqSetup, Summary, SQ_DRAIN_CAPACITY, SQ_HEADER, SQ_MAX_BYTES,
    SQ_SETTLE_ROUNDS, SQ_STUCK_STEPS,
};
use crate::drive::MAX_STEPS;
use crate::input::Input;
use p2p_conn::io::queue::{Bytes, CloseReason, Overflow, SendError, Sender};
use p2p_conn::stats::QueueStats;
use p2p_conn::testkit::internals::wire::sealed_frame_len;
use p2p_conn::testkit::{self, Conn, Control, TokioConn};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SqKind {
    Send,
    Bundle,
    Flush,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SqOutcome {
    Waiting,
    Accepted,
    Full,
    Closed,
    Cancelled,
}

/// One call the driver made.
struct SqOp {
    kind: SqKind,
    /// Message bytes (the sum of its parts).
    len: usize,
    /// Ids of its non-empty messages, in order.
    ids: Vec<u32>,
    outcome: SqOutcome,
}

/// What the tasks and the driver record, in the order it happened.
enum SqEvent {
    /// A send's first poll returned `Pending`: it waits for room.
    Waited {
        op: usize,
    },
    /// A call returned; a flush also records (accepted message bytes when
    /// it was queued, bytes on the wire when it returned).
    Done {
        op: usize,
        result: Result<(), SendError>,
        flush: Option<(usize, usize)>,
    },
    Shutdown,
    Close,
    DropAll,
}

/// Shared between the driver and the call tasks.
#[derive(Default)]
struct SqBook {
    /// Every message of every send and bundle that returned Ok, in the order
    /// they returned (which is the order they were queued: a call queues in
    /// the poll that returns): what the peer must read.
    expected: Vec<u8>,
    /// (offset in `expected`, id) of each of those messages.
    starts: Vec<(usize, u32)>,
    events: Vec<SqEvent>,
}

/// Accepted bytes, messages and the largest message at or above the cap
/// that the peer has not wholly read.
struct SqUnread {
    bytes: usize,
    messages: usize,
    large: Option<usize>,
}

type SqReadHalf = p2p_conn::io::tokio::ReadHalf<tokio::io::ReadHalf<testkit::End>>;
type SqCall = Pin<Box<dyn Future<Output = Result<(), SendError>> + Send>>;

pub(super) struct SqDriver {
    /// `None` once every handle was dropped (the end).
    sender: Option<Sender>,
    peer: TokioConn,
    /// Our read half: keeps the transport open until the end.
    our_read: Option<SqReadHalf>,
    /// Our end of the pipe (what the writer put on the wire).
    wire: Control,
    wire_base: usize,
    book: Arc<Mutex<SqBook>>,
    max: usize,
    overflow: Overflow,
    fs: usize,
    sealed: usize,
    drop_at_end: bool,
    ops: Vec<SqOp>,
    /// Per message id: (op, index among the op's messages, length).
    msgs: Vec<(usize, usize, usize)>,
    tasks: Vec<(usize, tokio::task::JoinHandle<()>)>,
    bytes: usize,
    /// Events of the book taken into account.
    seen: usize,
    /// Why the queue stopped (the first reason), as the calls saw it.
    closed: Option<CloseReason>,
    close_called: bool,
    disconnected: bool,
    overflows: u64,
    /// (end offset in `expected`, bytes, messages) of every accepted call.
    accepted: Vec<(usize, usize, usize)>,
    accepted_end: usize,
    accepted_msgs: u64,
    /// What the peer read.
    received: Vec<u8>,
    peer_end: Option<io::Result<()>>,
    buf: Vec<u8>,
    summary: Summary,
}

impl SqDriver {
    pub(super) fn new(
        setup: &SqSetup,
        sender: Sender,
        our_read: SqReadHalf,
        peer: TokioConn,
        wire: Control,
    ) -> Self {
        let fs = setup.ours.frame_size;
        SqDriver {
            sender: Some(sender),
            peer,
            our_read: Some(our_read),
            wire_base: wire.wire_len(),
            wire,
            book: Arc::default(),
            max: setup.queue.max_pending_bytes,
            overflow: setup.queue.overflow,
            fs,
            sealed: sealed_frame_len(fs),
            drop_at_end: setup.drop_at_end,
            ops: Vec::new(),
            msgs: Vec::new(),
            tasks: Vec::new(),
            bytes: 0,
            seen: 0,
            closed: None,
            close_called: false,
            disconnected: false,
            overflows: 0,
            accepted: Vec::new(),
            accepted_end: 0,
            accepted_msgs: 0,
            received: Vec::new(),
            peer_end: None,
            buf: vec![0; 16 * 1024],
            summary: Summary::default(),
        }
    }

    pub(super) async fn step(&mut self, inp: &mut Input<'_>) {
        let op = inp.u8();
        match op % 16 {
            0..=4 => {
                let len = self.length(op >> 4, inp);
                self.send(SqKind::Send, vec![len]);
            }
            5 | 6 => {
                let mut lens = Vec::new();
                for _ in 0..(op >> 4) % 6 {
                    let kind = inp.u8();
                    lens.push(self.length(kind, inp));
                }
                self.send(SqKind::Bundle, lens);
            }
            7 => self.flush(),
            11 => self.cancel(usize::from(op >> 4)),
            12 => self.shutdown(),
            13 => self.close(),
            _ => {
                let k = inp.u16();
                self.peer_read(if k == 0 { usize::MAX } else { usize::from(k) });
            }
        }
        self.settle().await;
    }

    /// A message length of the given kind (see [`super::check`]).
    fn length(&mut self, kind: u8, inp: &mut Input<'_>) -> usize {
        let max = self.max;
        let len = match kind % 8 {
            0 => 0,
            1 => SQ_HEADER + usize::from(inp.u8()),
            2 => usize::from(inp.u16()),
            3 => max,
            4 => max + 1 + usize::from(inp.u8()),
            5 => max - 1,
            6 => self.fs * (1 + usize::from(inp.u8() % 8)),
            _ => inp.u32() as usize % (4 * max + 1),
        };
        if len == 0 {
            return 0;
        }
        let len = len.max(SQ_HEADER);
        let len = if self.bytes + len > SQ_MAX_BYTES {
            SQ_HEADER
        } else {
            len
        };
        self.bytes += len;
        len
    }

    fn sender(&self) -> Sender {
        self.sender
            .clone()
            .expect("handles are dropped only at the end")
    }

    fn new_op(&mut self, kind: SqKind, lens: &[usize]) -> (usize, Vec<Bytes>) {
        let op = self.ops.len();
        let mut parts = Vec::with_capacity(lens.len());
        let mut ids = Vec::new();
        for &len in lens {
            if len == 0 {
                parts.push(Bytes::new());
                continue;
            }
            let id = self.msgs.len() as u32;
            self.msgs.push((op, ids.len(), len));
            ids.push(id);
            parts.push(sq_message(id, len));
        }
        self.ops.push(SqOp {
            kind,
            len: lens.iter().sum(),
            ids,
            outcome: SqOutcome::Waiting,
        });
        (op, parts)
    }

    /// `send` (one length) or `send_bundle`, as a task.
    fn send(&mut self, kind: SqKind, lens: Vec<usize>) {
        let (op, mut parts) = self.new_op(kind, &lens);
        let sender = self.sender();
        if self.closed.is_some() {
            let r = match kind {
                SqKind::Send => testkit::now_or_never(sender.send(parts.pop().unwrap_or_default())),
                _ => testkit::now_or_never(sender.send_bundle(parts)),
            };
            self.after_close(op, r);
            return;
        }
        let book = Arc::clone(&self.book);
        let task = tokio::spawn(async move {
            let queued: Vec<Bytes> = parts.iter().filter(|m| !m.is_empty()).cloned().collect();
            let call: SqCall = match kind {
                SqKind::Send => {
                    let m = parts.pop().unwrap_or_default();
                    Box::pin(async move { sender.send(m).await })
                }
                _ => Box::pin(async move { sender.send_bundle(parts).await }),
            };
            let result = sq_track(call, &book, op).await;
            // Still the poll that queued the messages: nothing ran since.
            let mut b = sq_lock(&book);
            if result.is_ok() {
                for m in &queued {
                    let at = b.expected.len();
                    let id = u32::from_le_bytes([m[0], m[1], m[2], m[3]]);
                    b.starts.push((at, id));
                    b.expected.extend_from_slice(m);
                }
            }
            b.events.push(SqEvent::Done {
                op,
                result,
                flush: None,
            });
        });
        self.tasks.push((op, task));
    }

    fn flush(&mut self) {
        let (op, _) = self.new_op(SqKind::Flush, &[]);
        let sender = self.sender();
        if self.closed.is_some() {
            let r = testkit::now_or_never(sender.flush());
            self.after_close(op, r);
            return;
        }
        let book = Arc::clone(&self.book);
        let wire = self.wire.clone();
        let task = tokio::spawn(async move {
            // `flush` queues its marker in this same poll, right after the
            // messages accepted so far.
            let before = sq_lock(&book).expected.len();
            let result = sender.flush().await;
            let written = wire.wire_len();
            sq_lock(&book).events.push(SqEvent::Done {
                op,
                result,
                flush: Some((before, written)),
            });
        });
        self.tasks.push((op, task));
    }

    /// A call made after the queue closed: it must fail at once with
    /// `Closed` and the first reason.
    fn after_close(&mut self, op: usize, r: Option<Result<(), SendError>>) {
        let first = self.closed.as_ref().expect("closed");
        let kind = self.ops[op].kind;
        match r {
            Some(Err(SendError::Closed { reason, .. })) => assert!(
                sq_same(first, &reason),
                "op {op} ({kind:?}) after the queue closed (`{first}`) failed with another reason: `{reason}`"
            ),
            Some(Ok(())) => {
                panic!("op {op} ({kind:?}) after the queue closed (`{first}`) returned Ok")
            }
            Some(Err(e)) => panic!(
                "op {op} ({kind:?}) after the queue closed (`{first}`) failed with `{e}`, not Closed"
            ),
            None => panic!(
                "op {op} ({kind:?}) after the queue closed (`{first}`) did not return at once"
            ),
        }
        self.ops[op].outcome = SqOutcome::Closed;
        self.summary.closed += 1;
    }

    /// Abort one call still waiting (the `which`-th, modulo).
    fn cancel(&mut self, which: usize) {
        let live: Vec<usize> = (0..self.tasks.len())
            .filter(|&i| {
                let (op, t) = &self.tasks[i];
                !t.is_finished() && self.ops[*op].outcome == SqOutcome::Waiting
            })
            .collect();
        if live.is_empty() {
            return;
        }
        let (op, task) = &self.tasks[live[which % live.len()]];
        task.abort();
        self.ops[*op].outcome = SqOutcome::Cancelled;
        self.summary.cancelled += 1;
    }

    fn shutdown(&mut self) {
        sq_lock(&self.book).events.push(SqEvent::Shutdown);
        self.sender().shutdown();
        self.absorb();
        self.check_stats();
    }

    fn close(&mut self) {
        sq_lock(&self.book).events.push(SqEvent::Close);
        self.sender().close();
        self.absorb();
        self.check_stats();
    }

    /// The peer reads up to `k` bytes, as far as it can without waiting.
    fn peer_read(&mut self, k: usize) {
        let mut left = k;
        let mut buf = std::mem::take(&mut self.buf);
        while left > 0 && self.peer_end.is_none() {
            let n = left.min(buf.len());
            match self.peer.try_read(&mut buf[..n]) {
                Ok(0) => self.peer_end = Some(Ok(())),
                Ok(got) => {
                    self.on_read(&buf[..got]);
                    left -= got;
                }
                Err(e) if testkit::is_would_block(&e) => break,
                Err(e) => self.peer_end = Some(Err(e)),
            }
        }
        self.buf = buf;
    }

    /// The peer read `chunk`: it must continue the accepted messages.
    fn on_read(&mut self, chunk: &[u8]) {
        let at = self.received.len();
        self.received.extend_from_slice(chunk);
        let book = Arc::clone(&self.book);
        let book = sq_lock(&book);
        let exp = &book.expected;
        let end = at + chunk.len();
        let bad = (at..end).find(|&i| i >= exp.len() || exp[i] != self.received[i]);
        if let Some(bad) = bad {
            panic!("{}", self.diverge(bad, &book));
        }
    }

    /// Let the writer and the call tasks run until nothing moves; check the
    /// counters at every turn.
    async fn settle(&mut self) {
        let mut last = None;
        let mut quiet = 0;
        for _ in 0..SQ_SETTLE_ROUNDS {
            tokio::task::yield_now().await;
            self.absorb();
            self.check_stats();
            let now = self.progress();
            if last.as_ref() == Some(&now) {
                quiet += 1;
                if quiet >= 2 {
                    break;
                }
            } else {
                quiet = 0;
                last = Some(now);
            }
        }
    }

    fn progress(&self) -> (usize, usize, usize, Option<QueueStats>) {
        (
            self.seen,
            self.wire.wire_len(),
            self.received.len(),
            self.sender.as_ref().map(Sender::stats),
        )
    }

    /// Take the new events of the book into account, in order.
    fn absorb(&mut self) {
        let book = Arc::clone(&self.book);
        let book = sq_lock(&book);
        while self.seen < book.events.len() {
            let i = self.seen;
            self.seen += 1;
            match &book.events[i] {
                SqEvent::Shutdown => {
                    self.closed.get_or_insert(CloseReason::Shutdown);
                }
                SqEvent::Close => {
                    self.closed.get_or_insert(CloseReason::Closed);
                    self.close_called = true;
                }
                SqEvent::DropAll => {}
                SqEvent::Waited { op } => self.waited(*op),
                SqEvent::Done { op, result, flush } => self.done(*op, result, *flush),
            }
        }
        assert_eq!(
            self.accepted_end,
            book.expected.len(),
            "driver bookkeeping: accepted bytes"
        );
    }
}

/// Run a send call, recording in the book when its first poll waits.
async fn sq_track(mut call: SqCall, book: &Mutex<SqBook>, op: usize) -> Result<(), SendError> {
    let mut first = true;
    std::future::poll_fn(|cx| {
        let p = call.as_mut().poll(cx);
        if first && p.is_pending() {
            sq_lock(book).events.push(SqEvent::Waited { op });
        }
        first = false;
        p
    })
    .await
}
