//! The `send_queue` driver: spawns the calls, lets the queue and the peer
//! run, and checks every outcome and every byte the peer reads against its
//! book of what was accepted.

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
use p2p_conn::proto::wire::sealed_frame_len;
use p2p_conn::stats::QueueStats;
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

    fn unread(&self) -> SqUnread {
        let read = self.received.len();
        let from = self.accepted.partition_point(|&(end, _, _)| end <= read);
        let mut u = SqUnread {
            bytes: 0,
            messages: 0,
            large: None,
        };
        for &(_, len, n) in &self.accepted[from..] {
            u.bytes += len;
            u.messages += n;
            if len >= self.max {
                u.large = u.large.max(Some(len));
            }
        }
        u
    }

    /// A call of `len` bytes was refused (or made to wait) with `pending`
    /// bytes pending (`None`: not reported): the cap must explain it.
    fn refusal_justified(&self, op: usize, len: usize, pending: Option<usize>) {
        let u = self.unread();
        if let Some(p) = pending {
            assert!(
                p <= u.bytes,
                "op {op}: refused with {p} bytes pending, but the accepted messages the peer \
                 has not read hold only {} bytes",
                u.bytes
            );
        }
        if len >= self.max {
            assert!(
                u.large.is_some(),
                "op {op}: {len} bytes (at or above max_pending_bytes {}) refused or made to wait \
                 while no other message at or above the cap was pending",
                self.max
            );
        } else {
            let p = pending.unwrap_or(u.bytes);
            assert!(
                p + len > self.max,
                "op {op}: {len} bytes refused or made to wait with at most {p} bytes pending \
                 under max_pending_bytes {}",
                self.max
            );
        }
    }

    fn waited(&mut self, op: usize) {
        let len = self.ops[op].len;
        assert_eq!(
            self.overflow,
            Overflow::Backpressure,
            "op {op}: a send of {len} bytes waited for room under {:?}",
            self.overflow
        );
        if let Some(first) = &self.closed {
            panic!("op {op}: a send waited for room after the queue closed (`{first}`)");
        }
        self.refusal_justified(op, len, None);
        self.overflows += 1;
        self.summary.waited += 1;
    }

    fn done(&mut self, op: usize, result: &Result<(), SendError>, flush: Option<(usize, usize)>) {
        let (kind, len, msgs) = (self.ops[op].kind, self.ops[op].len, self.ops[op].ids.len());
        assert_ne!(
            self.ops[op].outcome,
            SqOutcome::Cancelled,
            "op {op}: a cancelled call returned"
        );
        let outcome = match (kind, result) {
            (SqKind::Flush, Ok(())) => {
                let (before, written) = flush.expect("a flush records the wire");
                let need = before.div_ceil(self.fs) * self.sealed;
                let wrote = written - self.wire_base;
                assert!(
                    wrote >= need,
                    "op {op}: flush returned before the {before} message bytes accepted ahead of \
                     it were written: they take at least {need} sealed bytes, {wrote} are on the wire"
                );
                self.summary.flushed += 1;
                SqOutcome::Accepted
            }
            (SqKind::Flush, Err(SendError::Closed { reason, .. })) => {
                let Some(first) = &self.closed else {
                    panic!("op {op}: flush failed with `{reason}` while the queue was open");
                };
                assert!(
                    sq_same(first, reason),
                    "op {op}: flush failed with `{reason}`, the queue closed with `{first}`"
                );
                assert!(
                    !matches!(first, CloseReason::Shutdown),
                    "op {op}: a flush queued before shutdown() failed (`{reason}`): shutdown \
                     finishes what is queued"
                );
                self.summary.closed += 1;
                SqOutcome::Closed
            }
            (_, Ok(())) => {
                if let Some(first) = &self.closed {
                    panic!("op {op}: a {kind:?} of {len} bytes returned Ok after the queue closed (`{first}`)");
                }
                if len > 0 {
                    self.accepted_end += len;
                    self.accepted.push((self.accepted_end, len, msgs));
                    self.accepted_msgs += msgs as u64;
                    self.summary.accepted += 1;
                }
                SqOutcome::Accepted
            }
            (
                _,
                Err(SendError::Full {
                    pending,
                    len: l,
                    max,
                    ..
                }),
            ) => {
                assert_eq!(
                    self.overflow,
                    Overflow::Error,
                    "op {op}: `Full` under {:?}",
                    self.overflow
                );
                if let Some(first) = &self.closed {
                    panic!("op {op}: `Full` after the queue closed (`{first}`)");
                }
                assert_eq!(
                    (*l, *max),
                    (len, self.max),
                    "op {op}: `Full` names wrong sizes"
                );
                self.refusal_justified(op, len, Some(*pending));
                self.overflows += 1;
                self.summary.full += 1;
                SqOutcome::Full
            }
            (_, Err(SendError::Closed { reason, .. })) => {
                match (&self.closed, reason) {
                    (Some(first), _) => assert!(
                        sq_same(first, reason),
                        "op {op}: failed with `{reason}`, the queue closed with `{first}`"
                    ),
                    (
                        None,
                        CloseReason::Overflow {
                            pending,
                            len: l,
                            max,
                        },
                    ) => {
                        assert_eq!(
                            self.overflow,
                            Overflow::Disconnect,
                            "op {op}: overflow disconnect under {:?}",
                            self.overflow
                        );
                        assert_eq!(
                            (*l, *max),
                            (len, self.max),
                            "op {op}: disconnect names wrong sizes"
                        );
                        self.refusal_justified(op, len, Some(*pending));
                        self.overflows += 1;
                        self.disconnected = true;
                        self.summary.disconnected = true;
                        self.closed = Some(reason.clone());
                    }
                    (None, _) => {
                        panic!(
                            "op {op}: a {kind:?} failed with `{reason}` while the queue was open"
                        )
                    }
                }
                self.summary.closed += 1;
                SqOutcome::Closed
            }
            (_, Err(e)) => panic!("op {op}: unexpected error `{e}`"),
        };
        self.ops[op].outcome = outcome;
    }

    /// The counters and the close reason, against what the calls saw.
    fn check_stats(&self) {
        let Some(s) = &self.sender else { return };
        let st = s.stats();
        let u = self.unread();
        assert!(
            st.pending_bytes <= self.max + u.large.unwrap_or(0),
            "byte cap broken: {} bytes pending, max_pending_bytes {} and the largest pending \
             message at or above the cap {:?} (the bound is the cap plus one such message)",
            st.pending_bytes,
            self.max,
            u.large
        );
        assert!(
            st.pending_bytes <= u.bytes && st.pending_messages <= u.messages,
            "stats count {} bytes in {} messages pending, but accepted messages the peer has \
             not read hold only {} bytes in {} messages",
            st.pending_bytes,
            st.pending_messages,
            u.bytes,
            u.messages
        );
        assert_eq!(
            st.overflows, self.overflows,
            "the overflow counter disagrees with the refusals and waits the calls saw"
        );
        match (&self.closed, s.close_reason()) {
            (None, None) => {}
            (Some(a), Some(b)) if sq_same(a, &b) => {}
            (a, b) => panic!("close_reason() is {b:?}; the calls saw {a:?}"),
        }
    }

    /// Where the peer's stream left the accepted messages, in words.
    fn diverge(&self, at: usize, book: &SqBook) -> String {
        let exp_len = book.expected.len();
        let i = book.starts.partition_point(|&(off, _)| off <= at);
        let (start, want) = if at >= exp_len || i == 0 {
            (exp_len.min(at), None)
        } else {
            let (off, id) = book.starts[i - 1];
            (off, Some(id))
        };
        let got = self
            .received
            .get(start..start + SQ_HEADER)
            .map(|h| u32::from_le_bytes([h[0], h[1], h[2], h[3]]));
        let want_s = match want {
            Some(id) => format!("message {}", self.describe(id)),
            None => format!("nothing more: every accepted message ({exp_len} bytes) was read"),
        };
        let got_s = match got {
            Some(id) if Some(id) == want => {
                format!("that message with byte {} changed", at - start)
            }
            Some(id) => format!("a message headed {}", self.describe(id)),
            None => "bytes without a whole message header".to_string(),
        };
        let mut s = format!(
            "the peer's stream diverges at byte {at}: at byte {start} it should read {want_s}; \
             it read {got_s}"
        );
        if let (Some(w), Some(g)) = (want, got) {
            let (op, part, _) = self.msgs[w as usize];
            let other = self.msgs.get(g as usize).map(|m| m.0);
            if part > 0 && other != Some(op) {
                s += &format!(" (bundle of op {op} interrupted after its part {part})");
            }
        }
        s
    }

    fn describe(&self, id: u32) -> String {
        let Some(&(op, part, len)) = self.msgs.get(id as usize) else {
            return format!("#{id}, which was never sent");
        };
        let o = &self.ops[op];
        let what = match o.kind {
            SqKind::Bundle => format!("part {} of {} of the bundle", part + 1, o.ids.len()),
            _ => "the message".to_string(),
        };
        let outcome = match o.outcome {
            SqOutcome::Waiting => "has not returned",
            SqOutcome::Accepted => "returned Ok",
            SqOutcome::Full => "was refused (Full)",
            SqOutcome::Closed => "failed (Closed)",
            SqOutcome::Cancelled => "was cancelled",
        };
        format!(
            "#{id} ({len} bytes, {what} of op {op}, {:?}, which {outcome})",
            o.kind
        )
    }

    fn state(&self) -> String {
        let waiting = self
            .ops
            .iter()
            .filter(|o| o.outcome == SqOutcome::Waiting)
            .count();
        format!(
            "{waiting} calls not returned; peer read {} of {} accepted bytes; stats {:?}; \
             close reason {:?}",
            self.received.len(),
            self.accepted_end,
            self.sender.as_ref().map(Sender::stats),
            self.closed
        )
    }

    /// Stop the queue if the input did not, let the peer read to the end,
    /// and check the outcome.
    pub(super) async fn finish(mut self) -> Summary {
        if self.closed.is_none() {
            if self.drop_at_end {
                // The waiting calls keep their handles until they return.
                sq_lock(&self.book).events.push(SqEvent::DropAll);
                self.sender = None;
            } else {
                self.shutdown();
            }
        }
        // With the writer's half gone too (close, or a queue that never
        // started), this ends the stream for the peer.
        self.our_read = None;
        // The peer now reads everything: a roomy pipe keeps that quick.
        self.wire.set_capacity(SQ_DRAIN_CAPACITY);
        let mut idle = 0;
        for _ in 0..MAX_STEPS {
            let before = self.progress();
            self.peer_read(usize::MAX);
            if self.peer_end.is_some() {
                break;
            }
            self.settle().await;
            if self.progress() == before {
                idle += 1;
                assert!(
                    idle < SQ_STUCK_STEPS,
                    "hang: nothing moves and the peer's stream does not end: {}",
                    self.state()
                );
            } else {
                idle = 0;
            }
        }
        self.settle().await;
        for (op, task) in std::mem::take(&mut self.tasks) {
            if self.ops[op].outcome == SqOutcome::Cancelled {
                continue;
            }
            assert!(
                task.is_finished(),
                "op {op} ({:?}) never returned, though the peer read to the end: {}",
                self.ops[op].kind,
                self.state()
            );
            if let Some(Err(e)) = testkit::now_or_never(task) {
                if e.is_panic() {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
        }
        if let Some((op, o)) = self
            .ops
            .iter()
            .enumerate()
            .find(|(_, o)| o.outcome == SqOutcome::Waiting)
        {
            panic!("op {op} ({:?}) has no outcome: {}", o.kind, self.state());
        }

        let end = self.peer_end.take().expect("the drain ends");
        let graceful = !self.close_called && !self.disconnected;
        if let Err(e) = &end {
            let why = if self.close_called {
                "after close() only a cut frame (UnexpectedEof) may end it"
            } else if self.disconnected {
                "an overflow disconnect must end it between frames (no torn frame)"
            } else {
                "a shutdown must end it cleanly"
            };
            assert!(
                self.close_called && e.kind() == io::ErrorKind::UnexpectedEof,
                "the peer's stream ended with `{e}` ({:?}): {why}",
                e.kind()
            );
        }
        if graceful && self.received.len() < self.accepted_end {
            let book = sq_lock(&self.book);
            let i = book
                .starts
                .partition_point(|&(off, _)| off <= self.received.len());
            let (_, id) = book.starts[i.max(1) - 1];
            panic!(
                "lost messages: the stream ended cleanly after {} of {} accepted bytes; the first \
                 missing is {} (no close(), no overflow disconnect: everything accepted must arrive)",
                self.received.len(),
                self.accepted_end,
                self.describe(id)
            );
        }
        if let Some(s) = &self.sender {
            let st = s.stats();
            assert_eq!(
                (st.pending_bytes, st.pending_messages),
                (0, 0),
                "the queue stopped with {st:?}"
            );
            if graceful {
                assert_eq!(
                    st.messages_sent, self.accepted_msgs,
                    "messages_sent after the peer read every accepted message"
                );
            }
        }
        self.check_stats();
        self.summary.delivered = self.received.len();
        self.summary.expected = self.accepted_end;
        self.summary.clean_end = end.is_ok();
        self.summary
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
