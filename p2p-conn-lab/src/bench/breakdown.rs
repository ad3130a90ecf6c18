//! The seal/write/queue breakdown `bench` and `profile` print after a run:
//! our side's per-connection counters ([`p2p_conn::stats`]) and, for queue
//! workloads, the send queue's ([`QueueStats`]), in the words field
//! engineers read off a profile: "1 s of sealing needed X s of socket
//! write".

use std::time::Duration;

use p2p_conn::stats::QueueStats;
use p2p_conn::stats::{ConnStats, ENABLED};

/// One direction of a run as our side saw it: the send side of the sending
/// connection (or write half, or send queue's writer) and the receive side
/// of the receiving connection, with who each is.
#[derive(Clone, Copy, Debug)]
pub struct Breakdown {
    /// `stats.send` from the sender, `stats.recv` from the receiver
    /// ([`ConnStats::new`] of the writer's send side and the reader's receive side).
    pub stats: ConnStats,
    /// The send queue's counters, for queue workloads.
    pub queue: Option<QueueStats>,
    /// Whose send side, e.g. "dialer" (a column's heading).
    pub sender: &'static str,
    /// Whose receive side, e.g. "listener".
    pub receiver: &'static str,
    /// How many runs are summed in.
    pub runs: usize,
    /// The receiver read a blocking socket (the std adapter): its read time
    /// is mostly waiting for the peer, and the words say so.
    pub blocking_reads: bool,
}

impl Breakdown {
    /// One run: `send` is the sending connection's stats, `recv` the
    /// receiving one's.
    pub fn new(send: &ConnStats, recv: &ConnStats) -> Self {
        Breakdown {
            stats: ConnStats::new(send.send, recv.recv),
            queue: None,
            sender: "dialer",
            receiver: "listener",
            runs: 1,
            blocking_reads: false,
        }
    }

    /// The sum of several runs' breakdowns (ratios of sums, largest batch the
    /// largest); `None` when there are none.
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a Breakdown>) -> Option<Breakdown> {
        let mut all = all.into_iter();
        let mut total = *all.next()?;
        for b in all {
            total.stats += &b.stats;
            total.queue = match (total.queue, b.queue) {
                (Some(mut q), Some(r)) => {
                    add_queue(&mut q, &r);
                    Some(q)
                }
                (q, r) => q.or(r),
            };
            total.runs += b.runs;
            total.blocking_reads |= b.blocking_reads;
        }
        Some(total)
    }

    /// The lines `bench` and `profile` print, headed by `title`.
    pub fn text(&self, title: &str) -> String {
        if !ENABLED {
            return format!(
                "{title}: per-connection stats are compiled out (build p2p-conn with the `stats` feature)\n"
            );
        }
        let (s, r) = (&self.stats.send, &self.stats.recv);
        let runs = match self.runs {
            1 => "1 run".to_string(),
            n => format!("{n} runs summed"),
        };
        let mut out = format!("{title} ({runs}):\n");
        out += &format!("  send: {}\n", write_to_seal_words(&self.stats));
        out += &format!(
            "  recv: {}\n",
            read_to_open_words(&self.stats, self.blocking_reads)
        );
        let send_col = format!("send ({})", self.sender);
        let recv_col = format!("recv ({})", self.receiver);
        let w = send_col.len().max(recv_col.len()).max(12) + 2;
        let mut row = |name: &str, a: String, b: String| {
            out += &format!("  {name:<20} {a:>w$} {b:>w$}\n");
        };
        row("", send_col.clone(), recv_col.clone());
        row(
            "frames",
            s.frames_sealed.to_string(),
            r.frames_opened.to_string(),
        );
        row(
            "plaintext bytes",
            s.bytes_sealed.to_string(),
            r.bytes_opened.to_string(),
        );
        row("seal time", secs(s.seal_time), "-".into());
        row("open time", "-".into(), secs(r.open_time));
        row("write time", secs(s.write_time), "-".into());
        row("read time", "-".into(), secs(r.read_time));
        row("writes / reads", s.writes.to_string(), r.reads.to_string());
        row("short writes", s.short_writes.to_string(), "-".into());
        row(
            "not ready (calls)",
            s.not_ready.to_string(),
            r.not_ready.to_string(),
        );
        row(
            "not-ready time",
            secs(s.not_ready_time),
            secs(r.not_ready_time),
        );
        if let Some(q) = &self.queue {
            out += &format!(
                "  {:<20} {} in all, {:.1} µs per message ({} messages)\n",
                "queue wait",
                secs(q.queue_wait_time),
                q.average_queue_wait().as_secs_f64() * 1e6,
                q.messages_sent
            );
            out += &format!(
                "  {:<20} {:.2} (largest {}; {} batches; {} overflows)\n",
                "messages per batch",
                q.messages_per_batch(),
                q.largest_batch,
                q.batches,
                q.overflows
            );
        }
        out += "  (not ready: the socket buffer was full when sending; waiting for the peer when receiving)\n";
        out
    }
}

/// "1 s of sealing needed 0.62 s of socket write", or why there is no ratio.
pub fn write_to_seal_words(c: &ConnStats) -> String {
    match c.write_to_seal() {
        Some(x) => format!("1 s of sealing needed {x:.2} s of socket write"),
        None => "nothing sealed".into(),
    }
}

/// "1 s of opening needed 0.40 s of socket read", or why there is no ratio.
/// On a blocking socket (`blocking`) a read sleeps until the peer sends, so
/// the figure is labelled as mostly waiting, not cost.
pub fn read_to_open_words(c: &ConnStats, blocking: bool) -> String {
    match c.read_to_open() {
        Some(x) if blocking => format!(
            "1 s of opening needed {x:.2} s of socket read \
             (a blocking socket: mostly waiting for the peer, not cost)"
        ),
        Some(x) => format!("1 s of opening needed {x:.2} s of socket read"),
        None => "nothing opened".into(),
    }
}

fn secs(d: Duration) -> String {
    format!("{:.4} s", d.as_secs_f64())
}

fn add_queue(a: &mut QueueStats, b: &QueueStats) {
    a.pending_bytes += b.pending_bytes;
    a.pending_messages += b.pending_messages;
    a.batches += b.batches;
    a.messages_sent += b.messages_sent;
    a.overflows += b.overflows;
    a.largest_batch = a.largest_batch.max(b.largest_batch);
    a.queue_wait_time += b.queue_wait_time;
    a.send += &b.send;
}

/// Every figure of a breakdown as flat `--json` fields (all null for rows
/// without one: baselines, the codec adapter, handshakes).
#[derive(serde::Serialize, Default)]
pub struct StatsJson {
    /// Send side of the sending connection: seal steps, frames, plaintext
    /// bytes and seconds sealing.
    send_seals: Option<u64>,
    send_frames: Option<u64>,
    send_bytes_sealed: Option<u64>,
    send_seal_s: Option<f64>,
    /// Socket writes, sealed bytes written, seconds in writes, short writes.
    send_writes: Option<u64>,
    send_bytes_written: Option<u64>,
    send_write_s: Option<f64>,
    send_short_writes: Option<u64>,
    /// Writes that found the socket full, and the seconds until the next try.
    send_not_ready: Option<u64>,
    send_not_ready_s: Option<f64>,
    /// `send_write_s / send_seal_s`: "1 s of sealing needed X s of socket write".
    write_to_seal: Option<f64>,
    /// Receive side of the receiving connection: open steps, frames,
    /// plaintext bytes, seconds opening.
    recv_opens: Option<u64>,
    recv_frames: Option<u64>,
    recv_bytes_opened: Option<u64>,
    recv_open_s: Option<f64>,
    /// Socket reads, sealed bytes read, seconds in reads.
    recv_reads: Option<u64>,
    recv_bytes_read: Option<u64>,
    recv_read_s: Option<f64>,
    /// Reads that found nothing, and the seconds waited for the peer.
    recv_not_ready: Option<u64>,
    recv_not_ready_s: Option<f64>,
    /// `recv_read_s / recv_open_s`.
    read_to_open: Option<f64>,
    /// Queue workloads: batches written, messages sent, largest batch,
    /// overflows, seconds messages waited in the queue in all and per
    /// message (µs), messages per batch.
    queue_batches: Option<u64>,
    queue_messages: Option<u64>,
    queue_largest_batch: Option<u64>,
    queue_overflows: Option<u64>,
    queue_wait_s: Option<f64>,
    queue_wait_avg_us: Option<f64>,
    queue_messages_per_batch: Option<f64>,
}

impl StatsJson {
    pub fn of(b: Option<&Breakdown>) -> StatsJson {
        let Some(b) = b.filter(|_| ENABLED) else {
            return StatsJson::default();
        };
        let (s, r) = (&b.stats.send, &b.stats.recv);
        let q = b.queue.as_ref();
        StatsJson {
            send_seals: Some(s.seals),
            send_frames: Some(s.frames_sealed),
            send_bytes_sealed: Some(s.bytes_sealed),
            send_seal_s: Some(s.seal_time.as_secs_f64()),
            send_writes: Some(s.writes),
            send_bytes_written: Some(s.bytes_written),
            send_write_s: Some(s.write_time.as_secs_f64()),
            send_short_writes: Some(s.short_writes),
            send_not_ready: Some(s.not_ready),
            send_not_ready_s: Some(s.not_ready_time.as_secs_f64()),
            write_to_seal: b.stats.write_to_seal(),
            recv_opens: Some(r.opens),
            recv_frames: Some(r.frames_opened),
            recv_bytes_opened: Some(r.bytes_opened),
            recv_open_s: Some(r.open_time.as_secs_f64()),
            recv_reads: Some(r.reads),
            recv_bytes_read: Some(r.bytes_read),
            recv_read_s: Some(r.read_time.as_secs_f64()),
            recv_not_ready: Some(r.not_ready),
            recv_not_ready_s: Some(r.not_ready_time.as_secs_f64()),
            read_to_open: b.stats.read_to_open(),
            queue_batches: q.map(|q| q.batches),
            queue_messages: q.map(|q| q.messages_sent),
            queue_largest_batch: q.map(|q| q.largest_batch),
            queue_overflows: q.map(|q| q.overflows),
            queue_wait_s: q.map(|q| q.queue_wait_time.as_secs_f64()),
            queue_wait_avg_us: q.map(|q| q.average_queue_wait().as_secs_f64() * 1e6),
            queue_messages_per_batch: q.map(|q| q.messages_per_batch()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ms: u64) -> Breakdown {
        let mut send = ConnStats::default();
        send.send.seal_time = Duration::from_millis(ms);
        send.send.write_time = Duration::from_millis(2 * ms);
        send.send.frames_sealed = 10;
        send.send.writes = 2;
        let mut recv = ConnStats::default();
        recv.recv.open_time = Duration::from_millis(ms);
        recv.recv.read_time = Duration::from_millis(ms / 2);
        recv.recv.frames_opened = 10;
        Breakdown::new(&send, &recv)
    }

    #[test]
    fn sums_and_words() {
        let total = Breakdown::sum(&[sample(100), sample(300)]).unwrap();
        assert_eq!(total.runs, 2);
        assert_eq!(total.stats.send.frames_sealed, 20);
        assert_eq!(total.stats.send.seal_time, Duration::from_millis(400));
        assert_eq!(total.stats.recv.read_time, Duration::from_millis(200));
        assert!(Breakdown::sum(&[]).is_none());
        let text = total.text("breakdown");
        if ENABLED {
            assert!(
                text.contains("send: 1 s of sealing needed 2.00 s of socket write"),
                "{text}"
            );
            assert!(text.contains("recv: 1 s of opening needed 0.50 s of socket read\n"));
            assert!(text.contains("2 runs summed"));
            // The std adapter's blocking reads are labelled as waiting.
            let std = Breakdown {
                blocking_reads: true,
                ..total
            };
            assert!(
                std.text("breakdown").contains(
                    "recv: 1 s of opening needed 0.50 s of socket read \
                     (a blocking socket: mostly waiting for the peer, not cost)\n"
                ),
                "{}",
                std.text("breakdown")
            );
        }
        let json = serde_json::to_value(StatsJson::of(Some(&total))).unwrap();
        let keys = serde_json::to_value(StatsJson::of(None)).unwrap();
        // The same keys whether there is a breakdown or not.
        assert_eq!(
            json.as_object().unwrap().keys().collect::<Vec<_>>(),
            keys.as_object().unwrap().keys().collect::<Vec<_>>()
        );
        assert!(keys.as_object().unwrap().values().all(|v| v.is_null()));
        if ENABLED {
            assert_eq!(json["send_frames"], 20);
            assert!((json["write_to_seal"].as_f64().unwrap() - 2.0).abs() < 1e-9);
            assert!(json["queue_batches"].is_null());
        }
    }
}
