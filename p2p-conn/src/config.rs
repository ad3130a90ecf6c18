//! Connection settings.

use std::time::Duration;

use crate::identity::NodeId;
use crate::proto::{validate_frame_size, Backend, HandshakeParams, STANDARD_FRAME_SIZE};
use crate::Error;

/// Default handshake timeout, as CometBFT's `handshake_timeout`.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(20);
/// Default flush size: the most sealed bytes handed to one socket write.
pub const DEFAULT_FLUSH_SIZE: usize = 128 * 1024;
/// Default read buffer: raw bytes one read syscall may bring in.
pub const DEFAULT_READ_BUFFER: usize = 64 * 1024;

/// Settings of one connection. `Config::default()` speaks the CometBFT wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Bound on the whole handshake (both messages, both directions). Default
    /// 20 s, as CometBFT.
    pub handshake_timeout: Duration,
    /// When set, the handshake fails with [`Error::PeerIdMismatch`] unless the
    /// peer authenticates as this node. Set it when dialing a known peer.
    pub expected_peer_id: Option<NodeId>,
    /// Data bytes per frame. 1024 is the CometBFT wire; any other value only
    /// works when both ends run p2p-conn with the same value.
    pub frame_size: usize,
    /// Most sealed bytes per socket write. A message whose sealed size fits is
    /// sent with one write; larger ones take one write per `flush_size` bytes.
    /// Rounded down to whole frames (at least one frame).
    pub flush_size: usize,
    /// Size of the receive buffer one read syscall fills (at least one frame).
    pub read_buffer_size: usize,
    /// ChaCha20-Poly1305 implementation.
    pub backend: Backend,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            expected_peer_id: None,
            frame_size: STANDARD_FRAME_SIZE,
            flush_size: DEFAULT_FLUSH_SIZE,
            read_buffer_size: DEFAULT_READ_BUFFER,
            backend: Backend::default(),
        }
    }
}

impl Config {
    /// Set the handshake timeout.
    pub fn handshake_timeout(mut self, t: Duration) -> Self {
        self.handshake_timeout = t;
        self
    }
    /// Require the peer to authenticate as `id`.
    pub fn expect_peer(mut self, id: NodeId) -> Self {
        self.expected_peer_id = Some(id);
        self
    }
    /// Set the frame data size (non-standard unless 1024).
    pub fn frame_size(mut self, n: usize) -> Self {
        self.frame_size = n;
        self
    }
    /// Set the flush size.
    pub fn flush_size(mut self, n: usize) -> Self {
        self.flush_size = n;
        self
    }
    /// Set the read buffer size.
    pub fn read_buffer_size(mut self, n: usize) -> Self {
        self.read_buffer_size = n;
        self
    }
    /// Set the AEAD backend.
    pub fn backend(mut self, b: Backend) -> Self {
        self.backend = b;
        self
    }

    /// Check ranges.
    pub fn validate(&self) -> Result<(), Error> {
        validate_frame_size(self.frame_size)?;
        if self.handshake_timeout.is_zero() {
            return Err(Error::InvalidConfig(
                "handshake_timeout must be positive".into(),
            ));
        }
        Ok(())
    }

    pub(crate) fn handshake_params(&self) -> HandshakeParams {
        HandshakeParams {
            frame_size: self.frame_size,
            backend: self.backend,
        }
    }
}
