// Generated from a Rust block of docs/profiling.md; edit the document.
use std::time::Duration;

use p2p_conn::io::queue::Sender;
use p2p_conn::io::tokio::ReadHalf;
use p2p_conn::stats::ConnStats;
use p2p_conn::NodeId;
use tokio::net::tcp::OwnedReadHalf;

/// Every 10 s: what the connection to `peer` did in the last 10 s.
async fn watch(peer: NodeId, sender: Sender, reader: &ReadHalf<OwnedReadHalf>) {
    let mut last = ConnStats::default();
    let mut last_wait = Duration::ZERO;
    let mut last_sent = 0;
    loop {
        tokio::time::sleep(Duration::from_secs(10)).await;
        let q = sender.stats();
        // The queue's writer counts the send side, the read half the receive side.
        let now = ConnStats::new(q.send, reader.stats().recv);
        let d = now.since(&last);
        // "send: 1 s of sealing needed 0.62 s of socket write (…)"
        // "recv: 1 s of opening needed 0.69 s of socket read (on a blocking …)"
        println!("{peer}: {d}");
        let sent = q.messages_sent - last_sent;
        if sent > 0 {
            let wait = (q.queue_wait_time - last_wait) / sent as u32;
            println!("{peer}: {sent} messages, {wait:?} average wait in the queue, {} overflows so far", q.overflows);
        }
        (last, last_wait, last_sent) = (now, q.queue_wait_time, q.messages_sent);
    }
}
