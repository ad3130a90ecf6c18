//! Threshold signing, t of n: FROST(Ed25519, SHA-512) (RFC 9591, the
//! `frost-ed25519` crate), whose signatures verify as ordinary Ed25519
//! signatures under the validator's key. The sans-IO core: key shares, a
//! cosigner's state machine, and the leader's aggregation. Feature
//! `threshold`. `spec/threshold.md` has the messages, the state each
//! cosigner keeps, and the safety and liveness arguments.
//!
//! # Design
//! - [`KeyShare`]: a validator's key (a `priv_validator_key.json`, loaded
//!   with [`load_validator_key`](crate::load_validator_key)) split into n
//!   shares, any t of which sign (a trusted dealer:
//!   [`KeyShare::split`]); a share file per cosigner, owner-only, loaded
//!   with every check its public parts allow ([`KeyShare::load`]); and
//!   [`check_shares`]: t shares recombine to the validator's public key,
//!   in memory only.
//! - [`Cosigner`]: one share, one double-sign guard and one state file
//!   (this crate's [`guard`](crate::guard) and
//!   [`state_file`](crate::state_file), as a
//!   [`GuardedSigner`](crate::GuardedSigner) keeps them), and a pool of
//!   round-1 nonces whose [`Commitment`]s are handed to leaders ahead of
//!   time. A [`SignRequest`] names a vote or a proposal and the chain (never
//!   raw bytes) and the chosen commitments; the cosigner spends its nonce,
//!   builds the sign bytes, asks its guard, computes its share, saves the
//!   mark, and answers a [`SignResponse`].
//! - [`Leader`] and [`SigningRound`]: any cosigner leads a signature: it
//!   picks t commitments (its own and t-1 peers'), sends the request, and
//!   aggregates the answers.
//! - A vote extension (a non-nil precommit's, v0.38 and later) is signed
//!   in the same round trip: a second set of commitments in the same
//!   request, a second share in the same answer.
//!
//! # Guarantees
//! - t ≥ 2, t ≤ n ≤ [`MAX_SIGNERS`], and 2t > n ([`ThresholdError::Parameters`]):
//!   two sets of t cosigners then share at least 2t−n ≥ 1 cosigner. Two
//!   conflicting signatures need two such sets, and every cosigner in both
//!   signs at most one sign bytes per height, round and step (its guard),
//!   so none exist while fewer than 2t−n cosigners are faulty (guard or
//!   state file lost, or the share in a thief's hands). For 2 of 3 that is
//!   every cosigner's guard intact. Stealing the key takes t shares.
//! - A cosigner's share for a new height, round and step leaves only after
//!   its mark is saved, and a nonce serves at most one request: it leaves
//!   the pool before the share is computed, and nonces are never written
//!   anywhere (a restart discards them all).
//! - A share file never holds the whole key, and no error or `Debug`
//!   output holds a signing share or a nonce.
//!
//! # Not provided
//! - The network: the messages' wire encoding, the connections between
//!   cosigners, timeouts and retries are `cluster`'s (feature
//!   `threshold-cluster`). Nothing in the core reads a clock: nonces
//!   expire by count (at most [`MAX_NONCES`] per
//!   pool), not by age, and a round's deadline is the adapter's.
//! - A distributed key generation: the split is a trusted dealer's, and
//!   the machine that splits holds the whole key meanwhile.
//! - Catching up on the other cosigners' marks after a restart, and the
//!   rotation of a share.

#[cfg(feature = "threshold-cluster")]
#[cfg_attr(docsrs, doc(cfg(feature = "threshold-cluster")))]
pub mod cluster;
mod cosigner;
mod leader;
mod messages;
mod share;

pub use cosigner::Cosigner;
pub use leader::{Leader, SigningRound};
pub use messages::{Commitment, SignRequest, SignResponse, Signable};
pub use share::{check_shares, KeyShare};

use std::path::PathBuf;

use crate::messages::Timestamp;
use crate::SignerError;

/// The most cosigners a validator's key is split among.
pub const MAX_SIGNERS: u16 = 16;

/// The most nonces a cosigner's pool holds, and the most commitments a
/// leader stocks per peer.
pub const MAX_NONCES: usize = 64;

/// Check t and n: 2 ≤ t ≤ n ≤ [`MAX_SIGNERS`], 2t > n.
fn check_parameters(threshold: u16, signers: u16) -> Result<(), ThresholdError> {
    let (t, n) = (u32::from(threshold), u32::from(signers));
    if t < 2 || t > n || n > u32::from(MAX_SIGNERS) || 2 * t <= n {
        return Err(ThresholdError::Parameters { threshold, signers });
    }
    Ok(())
}

/// Why a share could not be made, read or used, or a request could not be
/// signed. Never holds a signing share, a nonce or a recombined key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ThresholdError {
    /// t and n out of bounds (module docs: 2 ≤ t ≤ n ≤ 16, 2t > n).
    #[error("threshold {threshold} of {signers}: the threshold must be at least 2 and more than half the signers, and there may be at most {MAX_SIGNERS} signers")]
    Parameters {
        /// t.
        threshold: u16,
        /// n.
        signers: u16,
    },
    /// A share file that is not one, or does not hold together.
    #[error("share file{}: {problem}", .path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    ShareFile {
        /// The file, when read from one.
        path: Option<PathBuf>,
        /// What is wrong.
        problem: ShareFileProblem,
    },
    /// The share file could not be read.
    #[error("cannot read share file {}: {source}", .path.display())]
    ShareRead {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The share file could not be written (or exists already).
    #[error("cannot write share file {}: {source}", .path.display())]
    ShareWrite {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The shares' group key is not the validator's public key.
    #[error("the shares' public key is {got}, not the validator's {expected}")]
    GroupKeyMismatch {
        /// The validator's public key, hex.
        expected: String,
        /// The shares', hex.
        got: String,
    },
    /// Fewer distinct shares than the threshold.
    #[error("{have} distinct shares given; {need} are needed")]
    NotEnoughShares {
        /// Distinct shares given.
        have: usize,
        /// The threshold.
        need: u16,
    },
    /// Shares of different splits (or the same share twice).
    #[error("the shares are not of one split, or one is given twice")]
    DifferentSplits,
    /// The request chose no commitment of this cosigner.
    #[error("the request chose no commitment of this cosigner")]
    NotChosen,
    /// The request names a nonce this cosigner does not hold: spent,
    /// discarded (a restart, a full pool), or never made.
    #[error("nonce {id} is not in this cosigner's pool (spent, discarded or never made)")]
    UnknownNonce {
        /// Its ID.
        id: u64,
    },
    /// The request does not hold together; the text says how.
    #[error("bad request: {0}")]
    BadRequest(&'static str),
    /// The cosigner signed this height, round and step with the same
    /// content at an earlier timestamp: ask again with it.
    #[error("already signed at this height, round and step with timestamp {}.{:09}: ask again with it", .timestamp.seconds, .timestamp.nanos)]
    EarlierTimestamp {
        /// The timestamp signed.
        timestamp: Timestamp,
    },
    /// The leader holds commitments of too few peers for t signers.
    #[error("commitments of {have} cosigners at hand (this one included); {need} are needed")]
    NotEnoughCommitments {
        /// Cosigners with commitments, the leader included.
        have: usize,
        /// The threshold.
        need: u16,
    },
    /// The guard refused, the chain is another, or the state file failed
    /// (nothing was released).
    #[error(transparent)]
    Signer(#[from] SignerError),
    /// FROST refused: a share that does not verify (naming its cosigner),
    /// a malformed commitment.
    #[error("FROST: {0}")]
    Frost(frost_ed25519::Error),
}

/// What is wrong with a share file's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShareFileProblem {
    /// Larger than any share file.
    #[error("it is larger than a share file")]
    TooLarge,
    /// Not JSON of a share file's shape.
    #[error("it is not a share file's JSON")]
    NotJson,
    /// Another `type`.
    #[error("its type is not p2p-conn/FrostEd25519Share")]
    WrongType,
    /// t and n out of bounds.
    #[error("its threshold and signers are out of bounds")]
    Parameters,
    /// A field of the wrong size or encoding.
    #[error("{field} is malformed")]
    BadField {
        /// The field.
        field: &'static str,
    },
    /// Its verifying shares or group key are not the commitment's.
    #[error("its verifying shares or group key do not follow from its commitment")]
    Inconsistent,
    /// Its signing share is not on the committed polynomial.
    #[error("its signing share does not match its verifying share")]
    NotOnPolynomial,
}
