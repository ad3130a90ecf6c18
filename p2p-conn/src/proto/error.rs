//! The sans-IO core's error type.

/// Everything the handshake state machine and the frame sealer/opener can
/// reject. No I/O errors here: those belong to the adapters' [`crate::Error`].
///
/// Every variant is fatal for the connection it came from: drop the
/// connection; a new TCP connection and handshake is the only recovery.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The peer's first (plaintext) message is not `0x22 0x0a 0x20 || 32 bytes`.
    #[error("malformed ephemeral-key message from peer: {0}")]
    MalformedEphemeralMessage(String),
    /// The X25519 exchange produced the all-zero secret: the peer sent a
    /// low-order point. A misbehaving or malicious peer; do not retry it.
    #[error("peer's ephemeral key is a low-order point (all-zero shared secret)")]
    LowOrderEphemeralKey,
    /// The peer sent back our own ephemeral public key (a reflection attack).
    #[error("peer reflected our own ephemeral public key")]
    ReflectedEphemeralKey,
    /// The authentication message is not a well-formed AuthSigMessage.
    #[error("malformed authentication message from peer: {0}")]
    MalformedAuthMessage(String),
    /// The peer authenticated with a key type other than Ed25519.
    #[error("peer's identity key type is not supported: {0} (only Ed25519 is accepted)")]
    UnsupportedKeyType(String),
    /// The peer's signature over the handshake challenge does not verify: it does
    /// not hold the private key it claims, or it derived a different challenge.
    #[error("peer's signature over the handshake challenge is invalid")]
    InvalidSignature,
    /// A frame's tag did not verify. During the handshake (frame #0) this is
    /// most often a `frame_size` mismatch between the peers, or a peer that does
    /// not speak this protocol; later it means tampering or a desynced stream.
    #[error("{}", frame_auth_message(*.counter))]
    FrameAuthentication {
        /// The frame counter (nonce) the frame was expected to use.
        counter: u64,
    },
    /// A frame declared more data bytes than the frame size allows.
    #[error("frame declares {len} data bytes, more than the frame size of {max}")]
    FrameTooLarge {
        /// Declared length.
        len: u64,
        /// The configured frame data size.
        max: usize,
    },
    /// More data was handed to a one-frame seal than one frame carries (a
    /// caller bug; only `testkit`'s `SealerHooks::seal_frame` seals one
    /// frame at a time).
    #[error("a frame carries at most {max} data bytes, not {len}")]
    ChunkTooLarge {
        /// Bytes handed over.
        len: usize,
        /// The frame data size.
        max: usize,
    },
    /// A sealed frame handed to the opener is not one sealed frame long
    /// (a caller bug: the frame size both peers use is fixed).
    #[error("a sealed frame is {expected} bytes, not {len}")]
    WrongFrameLength {
        /// Bytes handed over.
        len: usize,
        /// [`crate::proto::FrameSize::sealed_len`] of the frame size.
        expected: usize,
    },
    /// This direction used every one of its 2^64 nonces; the connection must be
    /// re-established. Nothing was sealed or opened with a reused nonce.
    #[error("nonce counter exhausted: the connection must be re-established")]
    NonceExhausted,
    /// A frame size outside the supported range was configured.
    #[error("invalid frame size {0}: must be between 64 and 1048576 bytes")]
    InvalidFrameSize(usize),
    /// The state machine was driven out of order (a caller bug).
    #[error("handshake state machine misuse: {0}")]
    Misuse(&'static str),
}

fn frame_auth_message(counter: u64) -> String {
    if counter == 0 {
        "frame #0 (the authentication frame) failed to decrypt: the peers' frame_size \
         settings probably differ, or the peer does not speak this protocol"
            .to_string()
    } else {
        format!(
            "frame #{counter} failed authentication: tampered, truncated or desynchronised stream"
        )
    }
}
