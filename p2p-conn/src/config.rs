//! Connection settings and the peer-ID policy.
//!
//! [`Config`] is `#[non_exhaustive]`: build it from [`Config::default()`]
//! with the setters, so new settings never break callers. Every field is
//! checked by [`Config::validate`], which every handshake calls before it
//! touches the transport or any key material.

use std::time::Duration;

use crate::identity::{NodeId, PublicKey};
use crate::proto::{Backend, FrameSize, HandshakeParams, STANDARD_FRAME_SIZE};
use crate::Error;

/// Default handshake timeout, as CometBFT's `handshake_timeout`.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(20);
/// Default flush size: the most sealed bytes handed to one socket write,
/// before rounding down to whole frames (125 standard frames, 130,500 bytes).
/// CometBFT v1's `bufio.Writer` holds 128 KiB.
pub const DEFAULT_FLUSH_SIZE: usize = 128 * 1024;
/// Default read buffer: raw bytes one read syscall may bring in. CometBFT
/// v1's `bufio.Reader` holds 65 KiB.
pub const DEFAULT_READ_BUFFER: usize = 64 * 1024;
/// Largest accepted `flush_size` and `read_buffer_size` (64 MiB): a larger
/// buffer brings no fewer syscalls worth having, only more memory per peer.
pub(crate) const MAX_BUFFER_SIZE: usize = 64 << 20;

/// Settings of one connection. `Config::default()` speaks the CometBFT wire.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Bound on the whole handshake (both messages, both directions), so a
    /// peer that stalls cannot hold a connection slot. Default 20 s, as
    /// CometBFT. Must be positive.
    pub handshake_timeout: Duration,
    /// When set, the handshake fails with [`Error::PeerIdMismatch`] unless the
    /// peer authenticates as this node. Set it when dialing a known peer, as
    /// CometBFT does for `ID@host:port` addresses.
    pub expected_peer_id: Option<NodeId>,
    /// Data bytes per frame. 1024 is the CometBFT wire; any other value (64 to
    /// 1 MiB) only works when both ends run p2p-conn with the same value.
    pub frame_size: usize,
    /// Most sealed bytes per socket write, so one syscall carries many frames.
    /// Rounded down to whole frames (at least one): a message whose sealed
    /// size fits goes out in one write; larger ones take one write per
    /// `flush_size` bytes. The codec uses it as `FramedWrite`'s backpressure
    /// boundary. 1 to 64 MiB.
    pub flush_size: usize,
    /// Most raw bytes one read syscall brings in, so one read carries many
    /// frames. Raised to one sealed frame when smaller. 1 to 64 MiB. The
    /// tokio reader's buffer can hold up to 17
    /// sealed frames more with [`Backend::Avx512`](crate::Backend) (frames
    /// held back for one more read so they open as a group).
    pub read_buffer_size: usize,
    /// ChaCha20-Poly1305 implementation (a local choice; peers need not agree).
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
    /// Set the flush size (sealed bytes per write).
    pub fn flush_size(mut self, n: usize) -> Self {
        self.flush_size = n;
        self
    }
    /// Set the read buffer size (raw bytes per read).
    pub fn read_buffer_size(mut self, n: usize) -> Self {
        self.read_buffer_size = n;
        self
    }
    /// Set the AEAD backend.
    pub fn backend(mut self, b: Backend) -> Self {
        self.backend = b;
        self
    }

    /// Check every field; the error names the field and its allowed range.
    pub fn validate(&self) -> Result<(), Error> {
        self.handshake_params().map(|_| ())
    }

    /// Validate, then give the handshake its parameters: the one place the
    /// frame size is checked.
    pub(crate) fn handshake_params(&self) -> Result<HandshakeParams, Error> {
        if self.handshake_timeout.is_zero() {
            return Err(Error::InvalidConfig(
                "handshake_timeout must be positive".into(),
            ));
        }
        for (name, v) in [
            ("flush_size", self.flush_size),
            ("read_buffer_size", self.read_buffer_size),
        ] {
            if !(1..=MAX_BUFFER_SIZE).contains(&v) {
                return Err(Error::InvalidConfig(format!(
                    "{name} is {v}; it must be between 1 and {MAX_BUFFER_SIZE} bytes"
                )));
            }
        }
        Ok(HandshakeParams {
            frame_size: FrameSize::new(self.frame_size)?,
            backend: self.backend,
        })
    }

    /// The peer-ID policy: with [`Config::expected_peer_id`] set, a peer that
    /// authenticated as any other node is refused with
    /// [`Error::PeerIdMismatch`]. Every adapter calls this right after the
    /// handshake, before any application byte is handed out.
    pub fn check_peer(&self, remote: &PublicKey) -> Result<(), Error> {
        if let Some(expected) = self.expected_peer_id {
            let actual = remote.node_id();
            if actual != expected {
                return Err(Error::PeerIdMismatch { expected, actual });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_checks_every_field() {
        assert!(Config::default().validate().is_ok());
        let bad = [
            Config::default().handshake_timeout(Duration::ZERO),
            Config::default().frame_size(63),
            Config::default().frame_size((1 << 20) + 1),
            Config::default().flush_size(0),
            Config::default().flush_size(MAX_BUFFER_SIZE + 1),
            Config::default().read_buffer_size(0),
            Config::default().read_buffer_size(usize::MAX),
        ];
        for c in bad {
            assert!(c.validate().is_err(), "{c:?}");
        }
        assert!(Config::default()
            .flush_size(1)
            .read_buffer_size(1)
            .validate()
            .is_ok());
    }
}
