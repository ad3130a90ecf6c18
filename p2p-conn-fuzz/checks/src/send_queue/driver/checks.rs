//! What the driver checks once a call ends or the run is over: each
//! outcome justified by the book, the stats, the bytes the peer read; and
//! how a divergence is described.

use super::*;

impl SqDriver {
    pub(super) fn unread(&self) -> SqUnread {
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
    pub(super) fn refusal_justified(&self, op: usize, len: usize, pending: Option<usize>) {
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

    pub(super) fn waited(&mut self, op: usize) {
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

    pub(super) fn done(
        &mut self,
        op: usize,
        result: &Result<(), SendError>,
        flush: Option<(usize, usize)>,
    ) {
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
    pub(super) fn check_stats(&self) {
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
    pub(super) fn diverge(&self, at: usize, book: &SqBook) -> String {
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

    pub(super) fn describe(&self, id: u32) -> String {
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

    pub(super) fn state(&self) -> String {
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
    pub(in crate::send_queue) async fn finish(mut self) -> Summary {
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
