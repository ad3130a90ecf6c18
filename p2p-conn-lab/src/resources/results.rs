//! What each `resources` worker measures and prints as one JSON line, and
//! `resources` reads back (the Go peer's `hold` prints a [`HoldResult`]
//! too).

use crate::error::LabError;

/// What a holder reports: `p2p-conn-lab resources-worker hold` and the Go
/// peer's `hold -role holder` print these fields.
#[derive(serde::Deserialize, serde::Serialize, Debug, Clone)]
pub struct HoldResult {
    #[serde(rename = "impl")]
    pub implementation: String,
    /// What each connection is.
    pub hold: String,
    pub connections: u64,
    /// Bytes sent each way on every connection in the pass.
    pub message: u64,
    /// RSS (KiB) before dialing, with every connection idle after its
    /// handshake, and after one message each way on every connection.
    pub rss_before_kib: u64,
    pub rss_idle_kib: u64,
    pub rss_message_kib: u64,
    /// VmHWM (KiB) at the idle reading (the process's peak so far), and at
    /// the end of the pass (the pass's own peak when `peak_reset`).
    pub hwm_idle_kib: u64,
    pub hwm_pass_kib: u64,
    pub peak_reset: bool,
    pub handshake_seconds: f64,
    pub pass_seconds: f64,
    /// p2p-conn: bytes of read and write buffers the library reports
    /// (`buffer_capacity`) over all connections, idle and after the pass.
    #[serde(default)]
    pub buffers_idle: Option<u64>,
    #[serde(default)]
    pub buffers_message: Option<u64>,
    /// p2p-conn: bytes per connection that are not heap allocations the
    /// library makes: what the holder keeps inline per connection (the
    /// `Vec` element) plus the reader task's future, when there is one.
    #[serde(default)]
    pub inline_bytes: Option<u64>,
    /// Go: heap in use and goroutine stacks (KiB), idle and after the pass.
    #[serde(default)]
    pub go_heap_idle_kib: Option<u64>,
    #[serde(default)]
    pub go_stack_idle_kib: Option<u64>,
    #[serde(default)]
    pub go_heap_message_kib: Option<u64>,
    #[serde(default)]
    pub go_stack_message_kib: Option<u64>,
}

impl HoldResult {
    fn per_conn(&self, kib: u64) -> f64 {
        (kib as f64 - self.rss_before_kib as f64) * 1024.0 / self.connections as f64
    }
    /// RSS bytes per idle connection.
    pub fn idle_per_conn(&self) -> f64 {
        self.per_conn(self.rss_idle_kib)
    }
    /// RSS bytes per connection after one message each way.
    pub fn message_per_conn(&self) -> f64 {
        self.per_conn(self.rss_message_kib)
    }
    /// Peak RSS over the pass, bytes per connection above the start.
    pub fn peak_per_conn(&self) -> f64 {
        self.per_conn(self.hwm_pass_kib)
    }
}

#[derive(serde::Deserialize, serde::Serialize, Debug, Clone)]
pub struct StalledResult {
    pub stall: String,
    pub handshakes: u64,
    pub timeout_seconds: f64,
    /// RSS (KiB) before accepting, and with every handshake stalled.
    pub rss_before_kib: u64,
    pub rss_stalled_kib: u64,
    /// Handshakes that had already ended at the stalled reading (should be 0).
    pub ended_before_reading: u64,
    /// How the handshakes ended: with `Error::Timeout`, or otherwise.
    pub timed_out: u64,
    pub other_errors: u64,
    pub succeeded: u64,
    /// The first other error, if any.
    pub first_other_error: Option<String>,
    /// Shortest and longest time from a handshake's start to its end.
    pub min_seconds: f64,
    pub max_seconds: f64,
    /// Seconds from the first accept to the stalled reading.
    pub reading_after_seconds: f64,
}

impl StalledResult {
    pub fn per_handshake(&self) -> f64 {
        (self.rss_stalled_kib as f64 - self.rss_before_kib as f64) * 1024.0 / self.handshakes as f64
    }
}

#[derive(serde::Deserialize, serde::Serialize, Debug, Clone)]
pub struct ChurnResult {
    pub handshakes: u64,
    pub rss_before_kib: u64,
    /// (handshakes done, RSS KiB) every `sample` handshakes.
    pub samples: Vec<(u64, u64)>,
    pub hwm_kib: u64,
    pub seconds: f64,
}

impl ChurnResult {
    /// RSS growth per handshake between the first and the last sample, in
    /// bytes.
    pub fn growth_per_handshake(&self) -> Option<f64> {
        let (&(n0, r0), &(n1, r1)) = (self.samples.first()?, self.samples.last()?);
        (n1 > n0).then(|| (r1 as f64 - r0 as f64) * 1024.0 / (n1 - n0) as f64)
    }
}

/// `value` as one JSON line with `"kind": kind` added.
pub fn print_json_line<T: serde::Serialize>(kind: &str, value: &T) -> Result<(), LabError> {
    let mut v = serde_json::to_value(value)?;
    if let serde_json::Value::Object(m) = &mut v {
        m.insert("kind".into(), kind.into());
    }
    println!("{v}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn churn_growth_is_per_handshake_between_first_and_last_sample() {
        let r = ChurnResult {
            handshakes: 3000,
            rss_before_kib: 1000,
            samples: vec![(1000, 2000), (2000, 2001), (3000, 2002)],
            hwm_kib: 3000,
            seconds: 1.0,
        };
        assert_eq!(r.growth_per_handshake(), Some(2.0 * 1024.0 / 2000.0));
    }
}
