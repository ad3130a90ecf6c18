//! A send queue's settings: [`QueueConfig`], checked once, when
//! [`super::Sender::new`] makes the queue (a connection's own [`crate::Config`]
//! knows nothing of queues).

use std::time::Duration;

use crate::Error;

/// Default cap on bytes queued in a send queue
/// ([`QueueConfig::max_pending_bytes`]): 1 MiB. Measured with 4 producers of
/// 200 B and 1 KiB messages (`p2p-conn bench --producers 4
/// --max-pending-bytes N`): 256 KiB and 1 MiB give the highest rates;
/// 4 MiB and 16 MiB are slower and cost 10-40% more CPU per byte (a larger
/// working set), below 64 KiB the writer starves.
pub const DEFAULT_MAX_PENDING_BYTES: usize = 1 << 20;
/// Largest accepted [`QueueConfig::max_pending_bytes`] (1 GiB).
pub(crate) const MAX_PENDING_BYTES_LIMIT: usize = 1 << 30;
/// Default bound on a send queue's graceful shutdown (250 ms).
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_millis(250);
/// Default most messages one batch of a send queue takes.
pub const DEFAULT_MAX_BATCH_MESSAGES: usize = 1024;
/// Largest accepted [`QueueConfig::max_batch_messages`] (65,536).
pub(crate) const MAX_BATCH_MESSAGES_LIMIT: usize = 65536;

/// What a send queue does when a message would take its pending bytes past
/// [`QueueConfig::max_pending_bytes`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub enum Overflow {
    /// `send` waits until the writer has sealed enough to make room.
    #[default]
    Backpressure,
    /// `send` fails at once with a "queue full" error; the connection stays
    /// up and the message is not queued.
    Error,
    /// The connection is closed (once); this and every later `send` fail
    /// with the overflow as the reason.
    Disconnect,
}

/// Settings of one send queue. `#[non_exhaustive]`: build it from
/// [`QueueConfig::default()`] with the setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct QueueConfig {
    /// Most message bytes queued and not yet sealed. A message (or bundle)
    /// at or above the cap is counted apart, one at a time, so it never
    /// trips the cap by itself. 1 to 1 GiB; default 1 MiB.
    pub max_pending_bytes: usize,
    /// What happens when `max_pending_bytes` would be exceeded.
    pub overflow: Overflow,
    /// How long `shutdown` lets the writer drain what is queued before it
    /// sends the FIN anyway. Default 250 ms; must be positive.
    pub shutdown_timeout: Duration,
    /// Most messages sealed into one write. 1 to 65,536; default 1024.
    pub max_batch_messages: usize,
    /// Under [`Overflow::Backpressure`], whether a producer waiting for room
    /// is this queue's normal pace: one producer that is expected to
    /// outpace the transport, as in a pipeline (p2p-conn-mconn's adapter
    /// feeds its queue so). Its waits are then logged at trace level, not
    /// as warnings; they are counted either way. Default false.
    pub waits_are_normal: bool,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            max_pending_bytes: DEFAULT_MAX_PENDING_BYTES,
            overflow: Overflow::default(),
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            max_batch_messages: DEFAULT_MAX_BATCH_MESSAGES,
            waits_are_normal: false,
        }
    }
}

impl QueueConfig {
    /// Set the cap on pending message bytes.
    pub fn max_pending_bytes(mut self, n: usize) -> Self {
        self.max_pending_bytes = n;
        self
    }
    /// Set the overflow policy.
    pub fn overflow(mut self, o: Overflow) -> Self {
        self.overflow = o;
        self
    }
    /// Set the bound on a graceful shutdown.
    pub fn shutdown_timeout(mut self, t: Duration) -> Self {
        self.shutdown_timeout = t;
        self
    }
    /// Set the most messages per batch.
    pub fn max_batch_messages(mut self, n: usize) -> Self {
        self.max_batch_messages = n;
        self
    }

    /// Set [`QueueConfig::waits_are_normal`].
    pub fn waits_are_normal(mut self, normal: bool) -> Self {
        self.waits_are_normal = normal;
        self
    }

    /// Check every field ([`Error::InvalidConfig`] names the field and its
    /// allowed range). [`super::Sender::new`] calls this.
    pub fn validate(&self) -> Result<(), Error> {
        if !(1..=MAX_PENDING_BYTES_LIMIT).contains(&self.max_pending_bytes) {
            return Err(Error::InvalidConfig(format!(
                "max_pending_bytes is {}; it must be between 1 and {MAX_PENDING_BYTES_LIMIT} bytes",
                self.max_pending_bytes
            )));
        }
        if self.shutdown_timeout.is_zero() {
            return Err(Error::InvalidConfig(
                "shutdown_timeout must be positive".into(),
            ));
        }
        if !(1..=MAX_BATCH_MESSAGES_LIMIT).contains(&self.max_batch_messages) {
            return Err(Error::InvalidConfig(format!(
                "max_batch_messages is {}; it must be between 1 and {MAX_BATCH_MESSAGES_LIMIT}",
                self.max_batch_messages
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_checks_every_field() {
        assert!(QueueConfig::default().validate().is_ok());
        let bad = [
            QueueConfig::default().max_pending_bytes(0),
            QueueConfig::default().max_pending_bytes(MAX_PENDING_BYTES_LIMIT + 1),
            QueueConfig::default().shutdown_timeout(Duration::ZERO),
            QueueConfig::default().max_batch_messages(0),
            QueueConfig::default().max_batch_messages(MAX_BATCH_MESSAGES_LIMIT + 1),
        ];
        for c in bad {
            assert!(c.validate().is_err(), "{c:?}");
        }
        assert!(QueueConfig::default()
            .max_pending_bytes(1)
            .max_batch_messages(1)
            .validate()
            .is_ok());
    }
}
