//! CometBFT's remote-signer (privval) protocol: the node's and the
//! signer's endpoints, the signer's safety core (double-sign guard, state
//! file), and the votes, proposals and bytes a validator signs.
//!
//! A node configured with `priv_validator_laddr` listens there and the
//! signer dials it. Over `tcp://` the connection is a secret connection
//! (the `p2p-conn` crate's [`p2p_conn::io`]); over `unix://` it is
//! plaintext. Either way
//! each message is a protobuf `Message` (a oneof of requests and responses)
//! prefixed with its length as an unsigned varint. `spec/privval.md` gives
//! the wire format per release line, the limits and the node's timeouts.
//!
//! # Design
//! - The protobuf types, declared by hand for `prost` (no code generation
//!   step), in a wire form every tested line (v0.34.35, v0.37.18,
//!   v0.38.26, v0.39.4, v0.40.0, v1.0.1) reads. Public are the ones a
//!   signer and a node handle: [`Vote`], [`Proposal`] and what they hold
//!   ([`BlockId`], [`PartSetHeader`], [`Timestamp`]), [`CryptoPublicKey`]
//!   and [`RemoteSignerError`]. They implement `prost::Message`, so `prost`
//!   is a public dependency of this crate. Fields gogoproto declares
//!   non-nullable are plain fields, always encoded as Go does; nullable ones
//!   are `Option`. Every type is `#[non_exhaustive]`: build one from
//!   `Default` and set its fields.
//! - The envelope (`Message`, a oneof of requests and responses), the
//!   request and response types and the message stream (a sans-IO decoder
//!   that checks the length prefix against its limit before it allocates,
//!   and names what went wrong in a [`PrivvalError`]) are the endpoints'
//!   own: a signer implements [`Signer`] and a node calls
//!   [`endpoint::SignerClient`], and neither sees them. Tests, fuzz targets
//!   and peers played by hand reach them through feature `testkit` (no
//!   stability promise).
//! - Where the lines differ the types carry the union of the fields: a
//!   line's decoder skips fields it does not declare.
//!   - `Message.sum`: 1 to 8 at every line; 9 `SignBytesRequest` and 10
//!     `SignBytesResponse` at v1.0.1 only.
//!   - `PubKeyResponse`: `pub_key` 1 up to v0.40.0; v1.0.1 reserves 1 and
//!     reads `pub_key_bytes` 3 and `pub_key_type` 4. The signer fills all
//!     three; each line's own generated decoder keeps its fields and drops
//!     the others' (tested), and a real node of every line takes its
//!     validator key from it (`p2p-conn-cli/tests/it/signer_cometbft_node.rs`).
//!   - `SignVoteRequest.skip_extension_signing` (3): v1.0.1 only.
//!   - [`Vote::extension`] (9) and [`Vote::extension_signature`] (10): from
//!     v0.38.26; v0.34.35 and v0.37.18 skip them.
//!   - [`CryptoPublicKey`]: ed25519 (1) and secp256k1 (2), the types every line
//!     has; a key of another type decodes with `sum: None`.
//!
//!   `spec/privval.md` lists every field number per line.
//! - [`vote_sign_bytes`], [`proposal_sign_bytes`] and
//!   [`vote_extension_sign_bytes`] build CometBFT's canonical sign bytes.
//!   The test suite compares them byte for byte with CometBFT's own
//!   functions at every tested line, and has each line's generated Go code
//!   decode and re-encode every message form.
//! - The signer's safety core: [`guard`], CometBFT FilePV's double-sign
//!   rules, sans-IO; [`state_file`], the high-water mark in FilePV's
//!   `priv_validator_state.json` format, written atomically and synced
//!   (or p2p-conn's slot file; tmkms's consensus state file is read for
//!   an import);
//!   the [`Signer`] trait a signer implements, and [`GuardedSigner`], an
//!   Ed25519 signer that persists each signature's state before returning
//!   it, signing through a [`ValidatorKey`]: the soft key (a
//!   `priv_validator_key.json`, [`load_validator_key`]) or, with feature
//!   `pkcs11`, a key in a PKCS#11 token (`pkcs11`).
//! - `threshold` (feature `threshold`): t-of-n threshold signing with
//!   FROST: key shares, a cosigner (one share, one guard, one state file)
//!   and the leader's aggregation, sans-IO.
//! - `endpoint` (with `tokio`): the signer side, which dials, retries,
//!   reconnects and serves a [`Signer`]; the node side, which listens,
//!   pings and times out.
//! - `cosign_net` (feature `cosign-net`): the cosigners' transport in a
//!   threshold cluster, carrying opaque payloads between members pinned
//!   to their node IDs (`spec/cosign-net.md`).
//! - `threshold::cluster` (feature `threshold-cluster`): a threshold
//!   cosigner on the network, serving its peers and leading for its node
//!   as a [`Signer`].
//!
//! # Guarantees
//! - No input panics the message decoder, and it never allocates more than
//!   its limit for a message body.
//! - The decoder never takes a byte past the message it returns.
//!
//! # Not provided
//! - Validation in the sign-bytes functions: they encode what they are
//!   given. The [`guard`] checks block ID hash lengths and timestamps
//!   before anything is signed; heights and the chain ID beyond the
//!   ordering are the signer's ([`GuardedSigner::with_chain_id`]).
//! - A public message stream: the endpoints bound every read and write
//!   (the node gives each 5 s; `spec/privval.md`).
//! - Key types other than Ed25519. CometBFT v0.40.0's FilePV signs with
//!   whatever key its `priv_validator_key.json` holds: Ed25519 (what
//!   `cometbft init` makes), secp256k1, secp256k1eth, ML-DSA-65 and, in
//!   builds with the `bls12381` tag, BLS12-381. [`load_validator_key`]
//!   refuses every type but Ed25519, and `pkcs11::Pkcs11Key` every token
//!   key but `CKK_EC_EDWARDS` on edwards25519, with
//!   [`SignerError::KeyType`] naming the type.
//!
//! # Cargo features
//! With `default-features = false` the crate is sans-IO: the types, sign
//! bytes, guard, state file and `GuardedSigner`.
//!
//! | feature | default | what |
//! |---|---|---|
//! | `tokio` | yes | `endpoint`: the signer and node sides over `tcp://` and `unix://` |
//! | `noise` | yes | `noise://` (CometBFT v0.40) in the endpoints: p2p-conn's `noise` |
//! | `ring` | yes | p2p-conn's feature of that name: the secret connection's ring backend |
//! | `avx512` | yes | p2p-conn's feature of that name: its AVX-512 multi-frame engine |
//! | `avx2` | yes | p2p-conn's feature of that name: its AVX2 multi-frame engine |
//! | `cosign-net` | no | `cosign_net`: the transport between a threshold cluster's cosigners (secret connections pinned to the members' node IDs) |
//! | `pkcs11` | no | `pkcs11`: a validator key in a PKCS#11 token (an HSM, SoftHSM 2), via `cryptoki` |
//! | `threshold` | no | `threshold`: t-of-n threshold signing (FROST, RFC 9591, via `frost-ed25519`): key shares and a cosigner's sans-IO core |
//! | `threshold-cluster` | no | `threshold::cluster`: `threshold` and `cosign-net` joined, a cosigner that serves its peers and leads for its node |
//! | `testkit` | no | `testkit`: the wire envelope, the request and response types and the message stream; no stability promise, never in production |

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod atomic_file;
// The envelope and the message stream: run by the endpoints, reached by
// tests through `testkit`.
#[cfg(any(test, feature = "tokio", feature = "testkit"))]
mod codec;
#[cfg(feature = "cosign-net")]
#[cfg_attr(docsrs, doc(cfg(feature = "cosign-net")))]
pub mod cosign_net;
#[cfg(feature = "tokio")]
pub mod endpoint;
#[cfg(any(test, feature = "tokio", feature = "testkit"))]
mod envelope;
pub mod guard;
mod messages;
#[cfg(feature = "pkcs11")]
#[cfg_attr(docsrs, doc(cfg(feature = "pkcs11")))]
pub mod pkcs11;
mod sign_bytes;
mod signer;
pub mod state_file;
#[cfg(feature = "testkit")]
pub mod testkit;
#[cfg(feature = "threshold")]
#[cfg_attr(docsrs, doc(cfg(feature = "threshold")))]
pub mod threshold;
mod tmkms_key;
#[cfg(feature = "tokio")]
mod tokio;

#[cfg(feature = "tokio")]
pub(crate) use codec::{decode_body, encode, Frames};
#[cfg(feature = "tokio")]
pub(crate) use envelope::{
    message, Message, PingRequest, PingResponse, PubKeyRequest, PubKeyResponse, SignBytesRequest,
    SignBytesResponse, SignProposalRequest, SignVoteRequest, SignedProposalResponse,
    SignedVoteResponse,
};
pub use messages::{
    crypto_public_key, signed_msg_type, BlockId, CryptoPublicKey, PartSetHeader, Proposal,
    RemoteSignerError, Timestamp, Vote,
};
pub use sign_bytes::{proposal_sign_bytes, vote_extension_sign_bytes, vote_sign_bytes};
pub use signer::{
    convert_state_file, load_validator_key, GuardedSigner, SharedSigner, Signer, SignerError,
    ValidatorKey,
};
pub use tmkms_key::TmkmsKeyProblem;

/// The largest message body a CometBFT node reads from its signer, in bytes,
/// length prefix excluded: `maxRemoteSignerMsgSize`, 10 KiB at v0.34.35,
/// v0.37.18, v0.38.26, v0.39.4 and v1.0.1. It is also the limit CometBFT's
/// own signer reads the node's requests with.
pub const MAX_MESSAGE_BYTES: usize = 10 * 1024;

/// v0.40.0's `maxRemoteSignerMsgSize`: a vote with a maximum-size extension
/// (`MaxVoteExtensionSize`, 1 MiB) and two maximum-size signatures
/// (`MaxSignatureSize`, ML-DSA-65's 3309 bytes), plus 1 KiB.
pub const MAX_MESSAGE_BYTES_V040: usize = 1024 * 1024 + 2 * 3309 + 1024;

/// Why a privval message could not be read or written. Every variant but
/// [`PrivvalError::Io`] means the stream is out of step or the peer is
/// not speaking privval: drop the connection.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrivvalError {
    /// The length prefix is not a valid unsigned varint (more than 10 bytes,
    /// or a value above `u64::MAX`).
    #[error("the privval length prefix is not a valid varint")]
    BadLength,
    /// The peer announced a longer message than the limit. Nothing was
    /// allocated for it.
    #[error("the peer announced a {len}-byte privval message; the limit is {limit} bytes")]
    TooLarge {
        /// The announced length.
        len: u64,
        /// The limit in force.
        limit: usize,
    },
    /// The stream ended inside a message.
    #[error("the connection ended after {received} bytes of a privval message{}", expected_suffix(*.expected))]
    Truncated {
        /// Bytes received, length prefix included.
        received: usize,
        /// The whole length (prefix included), once the prefix was read.
        expected: Option<usize>,
    },
    /// The message is protobuf but holds no request or response this crate
    /// knows (an empty message, or a oneof field above 10).
    #[error("the privval message holds no known request or response")]
    UnknownMessage,
    /// The message is not valid protobuf for `Message`.
    #[error("the privval message is not valid protobuf: {0}")]
    Malformed(String),
    /// The decoder was fed after an error.
    #[error("the privval decoder was fed after an error")]
    Spent,
    /// The transport failed (the secret connection's own errors arrive here,
    /// see [`p2p_conn::Error::from_io`]).
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

fn expected_suffix(expected: Option<usize>) -> String {
    match expected {
        Some(n) => format!(" (expected {n})"),
        None => String::new(),
    }
}
