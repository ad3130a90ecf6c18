//! The double-sign guard: CometBFT's `FilePV` rules, sans-IO.
//!
//! # Design
//! A validator must never sign two different votes (or proposals) for one
//! height, round and step (HRS), and never sign below the last HRS it
//! signed. [`SignState`] is that high-water mark: the last HRS signed,
//! with the sign bytes and the signature. [`check_vote`] and
//! [`check_proposal`] compare a request with it and return a
//! [`Decision`]; nothing here signs, reads a clock or touches a file. The
//! caller signs, persists the new state ([`SignState::new`], FilePV's
//! `saveSigned`) with a durable write, and only then releases the signature
//! ([`super::GuardedSigner`] does this).
//!
//! The rules are `FilePVLastSignState.CheckHRS`, `signVote`,
//! `signProposal`, `checkVotesOnlyDifferByTimestamp` and
//! `checkProposalsOnlyDifferByTimestamp` of CometBFT's `privval/file.go`,
//! the same at v0.38.26 and v1.0.1 (`spec/privval.md`, section "Double-sign
//! guard"):
//! - Steps: propose 1, prevote 2, precommit 3 (0 is the initial state).
//!   HRS are ordered by height, then round, then step.
//! - A request below the mark is refused: [`GuardError::HeightRegression`],
//!   [`GuardError::RoundRegression`], [`GuardError::StepRegression`].
//! - A request above the mark is signed: [`Decision::Sign`].
//! - A request at the mark: identical sign bytes re-serve the earlier
//!   signature; sign bytes that differ only in the timestamp re-serve the
//!   earlier signature with the earlier timestamp ([`Decision::Reuse`]);
//!   anything else is [`GuardError::Conflict`]. A mark with no sign bytes
//!   refuses its own HRS ([`GuardError::NoSignBytes`]), unless it records
//!   the block ID signed there (below).
//! - A mark that records a block ID but no sign bytes (tmkms's, imported:
//!   [`SignState::with_block_id`]) signs a request at its own HRS for that
//!   same block ID ([`Decision::Sign`]; nil counts as a value of its own,
//!   so a nil request matches only a nil mark), as tmkms itself does there,
//!   and refuses any other block ID as a [`GuardError::Conflict`]. Two
//!   signatures for one block ID at one HRS are never evidence: CometBFT's
//!   `DuplicateVoteEvidence` needs two votes with different block IDs
//!   (`types/evidence.go` `ValidateBasic` orders them by block ID key;
//!   `evidence/verify.go` `VerifyDuplicateVote` refuses "block IDs are the
//!   same ... not a real duplicate vote"), and it has no proposal evidence
//!   at all (v0.38.26). Once signed, the mark holds that request's sign
//!   bytes and signature, and the rules above apply.
//! - Vote extensions are not guarded: FilePV signs the extension of every
//!   non-nil precommit afresh (extensions are non-deterministic) and refuses
//!   an extension on any other vote; [`check_extension`] is that rule.
//! - Before any of that, the content must be what CometBFT itself can
//!   sign: each block ID hash (`block_id.hash`,
//!   `block_id.part_set_header.hash`) empty or 32 bytes
//!   (`BlockID.ValidateBasic`, which CometBFT's `CanonicalizeBlockID` runs
//!   and panics on), and a timestamp a `google.protobuf.Timestamp` can
//!   hold (0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z, nanos
//!   0 to 999,999,999; CometBFT's decoder refuses any other).
//!   [`GuardError::BadBlockIdHash`] and [`GuardError::BadTimestamp`] name
//!   the field. Signing such a request would move the mark past a height
//!   and round at which the node could then get no valid signature.
//!
//! # Guarantees
//! - Given the state after every signature it allowed was recorded, the
//!   guard never allows two different sign bytes for one HRS, and never a
//!   new signature at or below the mark (property-tested), except at a
//!   block-ID mark's own HRS, for the block ID it records and only until
//!   that signature is recorded.
//! - No input panics: where FilePV panics (an unknown vote type, stored
//!   sign bytes that do not decode, a mark with sign bytes but no
//!   signature, a block ID hash of another length) the guard returns an
//!   error.
//! - Nothing CometBFT refuses to decode or to canonicalize is allowed
//!   (property-tested, and checked against each line's own request
//!   handler in `p2p-conn-privval/tests/it/messages_cometbft_go.rs`).
//!
//! # Not provided
//! - Checks of heights, rounds or the chain ID beyond the ordering (FilePV
//!   has none either); the chain ID is the signer's to check.
//! - Persistence: [`super::state_file`].

use super::messages::{signed_msg_type, BlockId, Proposal, Timestamp, Vote};
use super::sign_bytes::{
    proposal_sign_bytes, proposal_timestamp_and_rest, vote_sign_bytes, vote_timestamp_and_rest,
};

/// A consensus step as FilePV numbers it in its state file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[non_exhaustive]
pub enum Step {
    /// Nothing signed yet (`stepNone`, 0).
    #[default]
    None,
    /// A proposal (`stepPropose`, 1).
    Propose,
    /// A prevote (`stepPrevote`, 2).
    Prevote,
    /// A precommit (`stepPrecommit`, 3).
    Precommit,
}

impl Step {
    /// FilePV's number for the step.
    pub fn as_i8(self) -> i8 {
        match self {
            Step::None => 0,
            Step::Propose => 1,
            Step::Prevote => 2,
            Step::Precommit => 3,
        }
    }

    /// The step FilePV numbers `n`, if any.
    pub fn from_i8(n: i8) -> Option<Step> {
        match n {
            0 => Some(Step::None),
            1 => Some(Step::Propose),
            2 => Some(Step::Prevote),
            3 => Some(Step::Precommit),
            _ => None,
        }
    }

    /// The step of a vote of type `msg_type` (`voteToStep`): prevote or
    /// precommit, none for any other type.
    pub fn of_vote_type(msg_type: i32) -> Option<Step> {
        match msg_type {
            signed_msg_type::PREVOTE => Some(Step::Prevote),
            signed_msg_type::PRECOMMIT => Some(Step::Precommit),
            _ => None,
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            Step::None => "none",
            Step::Propose => "propose",
            Step::Prevote => "prevote",
            Step::Precommit => "precommit",
        };
        write!(f, "{name} ({})", self.as_i8())
    }
}

/// A height, round and step. Ordered as FilePV compares them: height, then
/// round, then step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Hrs {
    /// Block height.
    pub height: i64,
    /// Consensus round.
    pub round: i32,
    /// Step.
    pub step: Step,
}

impl Hrs {
    /// The HRS `height`/`round`/`step`.
    pub fn new(height: i64, round: i32, step: Step) -> Hrs {
        Hrs {
            height,
            round,
            step,
        }
    }
}

impl std::fmt::Display for Hrs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "height {} round {} step {}",
            self.height, self.round, self.step
        )
    }
}

/// The high-water mark: the last HRS signed, its sign bytes and signature
/// (FilePV's `FilePVLastSignState`), or, for a mark imported from tmkms,
/// the block ID signed there instead ([`SignState::with_block_id`]).
/// [`Default`] is the initial state (0/0/none, nothing signed).
#[derive(Clone, PartialEq, Default)]
pub struct SignState {
    hrs: Hrs,
    sign_bytes: Vec<u8>,
    signature: Vec<u8>,
    block_id: Option<BlockId>,
}

impl std::fmt::Debug for SignState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignState")
            .field("hrs", &self.hrs)
            .field("sign_bytes", &hex::encode_upper(&self.sign_bytes))
            .field("signature", &hex::encode(&self.signature))
            .field("block_id", &self.block_id)
            .finish()
    }
}

impl SignState {
    /// A mark at `hrs` with the sign bytes and signature made there (either
    /// may be empty, as in a FilePV state file that omits them).
    pub fn new(hrs: Hrs, sign_bytes: Vec<u8>, signature: Vec<u8>) -> SignState {
        SignState {
            hrs,
            sign_bytes,
            signature,
            block_id: None,
        }
    }

    /// A mark at `hrs` that records the block ID signed there (nil for a
    /// nil vote) but no sign bytes or signature, as tmkms records its own:
    /// the guard signs a request at `hrs` for that block ID again, and
    /// refuses any other (module docs).
    pub fn with_block_id(hrs: Hrs, block_id: BlockId) -> SignState {
        SignState {
            hrs,
            block_id: Some(block_id),
            ..SignState::default()
        }
    }

    /// The last HRS signed.
    pub fn hrs(&self) -> Hrs {
        self.hrs
    }

    /// The bytes signed there (empty if none are recorded).
    pub fn sign_bytes(&self) -> &[u8] {
        &self.sign_bytes
    }

    /// The signature made there (empty if none is recorded).
    pub fn signature(&self) -> &[u8] {
        &self.signature
    }

    /// The block ID signed there, for a mark made by
    /// [`SignState::with_block_id`]; `None` for any other (one with sign
    /// bytes, or with nothing recorded).
    pub fn block_id(&self) -> Option<&BlockId> {
        self.block_id.as_ref()
    }
}

/// What the guard allows for a request.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Decision {
    /// A new HRS, above the mark (or at a block-ID mark's own HRS, for its
    /// block ID): sign `sign_bytes`, record and persist the new state, then
    /// release the signature.
    Sign {
        /// The request's HRS.
        hrs: Hrs,
        /// The bytes to sign.
        sign_bytes: Vec<u8>,
    },
    /// The mark's own HRS, already signed with the same content: return
    /// `signature` with `timestamp` (the earlier timestamp, which differs
    /// from the request's when only the timestamp changed). Nothing new is
    /// signed.
    Reuse {
        /// The earlier signature.
        signature: Vec<u8>,
        /// The earlier signed timestamp: the response carries it.
        timestamp: Timestamp,
    },
}

/// Why the guard refused a request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// The vote is neither a prevote nor a precommit (FilePV panics).
    #[error("vote type {msg_type} is neither prevote (1) nor precommit (2)")]
    UnknownVoteType {
        /// The vote's type.
        msg_type: i32,
    },
    /// The request's height is below the last height signed.
    #[error("height regression: asked to sign height {height}, last signed height {last_height}")]
    HeightRegression {
        /// The request's height.
        height: i64,
        /// The mark's height.
        last_height: i64,
    },
    /// Same height, lower round.
    #[error("round regression at height {height}: asked to sign round {round}, last signed round {last_round}")]
    RoundRegression {
        /// The height.
        height: i64,
        /// The request's round.
        round: i32,
        /// The mark's round.
        last_round: i32,
    },
    /// Same height and round, earlier step.
    #[error("step regression at height {height} round {round}: asked to sign step {step}, last signed step {last_step}")]
    StepRegression {
        /// The height.
        height: i64,
        /// The round.
        round: i32,
        /// The request's step.
        step: Step,
        /// The mark's step.
        last_step: Step,
    },
    /// The mark's own HRS, but the state holds no sign bytes (or no
    /// signature) to compare with or re-serve.
    #[error("asked to sign {hrs} again, but the state holds no sign bytes or signature for it")]
    NoSignBytes {
        /// The HRS.
        hrs: Hrs,
    },
    /// The mark's own HRS with different content (or, at a block-ID mark,
    /// another block ID): a double-sign attempt.
    #[error("conflicting data: {hrs} was already signed with different sign bytes")]
    Conflict {
        /// The HRS.
        hrs: Hrs,
    },
    /// The state's sign bytes at this HRS are not a canonical vote or
    /// proposal, so they cannot be compared (FilePV panics).
    #[error("the state's sign bytes at {hrs} do not decode as a canonical {kind}")]
    CorruptSignBytes {
        /// The HRS.
        hrs: Hrs,
        /// `"vote"` or `"proposal"`.
        kind: &'static str,
    },
    /// An extension on a prevote or a nil precommit.
    #[error("unexpected vote extension: extensions are only allowed in non-nil precommits")]
    UnexpectedExtension,
    /// A block ID hash that is neither empty nor 32 bytes: CometBFT's
    /// `BlockID.ValidateBasic` refuses it, and its signer never signs it.
    #[error("{field} is {len} bytes: CometBFT takes only 0 or 32 (BlockID.ValidateBasic) and never signs it")]
    BadBlockIdHash {
        /// `"block_id.hash"` or `"block_id.part_set_header.hash"`.
        field: &'static str,
        /// Its length.
        len: usize,
    },
    /// A timestamp that no `google.protobuf.Timestamp` holds: CometBFT
    /// cannot decode a request that carries it.
    #[error("timestamp (seconds {seconds}, nanos {nanos}) is outside what CometBFT decodes: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z, nanos 0 to 999999999")]
    BadTimestamp {
        /// Its seconds since the epoch.
        seconds: i64,
        /// Its nanoseconds.
        nanos: i32,
    },
}

/// 0001-01-01T00:00:00Z in seconds since the epoch: the first second a
/// `google.protobuf.Timestamp` holds.
const FIRST_TIMESTAMP_SECOND: i64 = -62_135_596_800;
/// 9999-12-31T23:59:59Z: the last.
const LAST_TIMESTAMP_SECOND: i64 = 253_402_300_799;
/// CometBFT's `tmhash.Size`: a block ID hash is this long, or empty.
const HASH_BYTES: usize = 32;

/// The content checks CometBFT's own signer makes before it signs
/// (module docs): the block ID's hashes and the timestamp.
fn check_content(block_id: &BlockId, timestamp: Timestamp) -> Result<(), GuardError> {
    for (field, hash) in [
        ("block_id.hash", &block_id.hash),
        (
            "block_id.part_set_header.hash",
            &block_id.part_set_header.hash,
        ),
    ] {
        if !hash.is_empty() && hash.len() != HASH_BYTES {
            return Err(GuardError::BadBlockIdHash {
                field,
                len: hash.len(),
            });
        }
    }
    let Timestamp { seconds, nanos } = timestamp;
    if !(FIRST_TIMESTAMP_SECOND..=LAST_TIMESTAMP_SECOND).contains(&seconds)
        || !(0..1_000_000_000).contains(&nanos)
    {
        return Err(GuardError::BadTimestamp { seconds, nanos });
    }
    Ok(())
}

/// `CheckHRS`: `Ok(false)` above the mark, `Ok(true)` at it (with sign
/// bytes and signature recorded), an error below it.
pub fn check_hrs(state: &SignState, hrs: Hrs) -> Result<bool, GuardError> {
    let last = state.hrs;
    if last.height > hrs.height {
        return Err(GuardError::HeightRegression {
            height: hrs.height,
            last_height: last.height,
        });
    }
    if last.height != hrs.height {
        return Ok(false);
    }
    if last.round > hrs.round {
        return Err(GuardError::RoundRegression {
            height: hrs.height,
            round: hrs.round,
            last_round: last.round,
        });
    }
    if last.round != hrs.round {
        return Ok(false);
    }
    if last.step > hrs.step {
        return Err(GuardError::StepRegression {
            height: hrs.height,
            round: hrs.round,
            step: hrs.step,
            last_step: last.step,
        });
    }
    if last.step < hrs.step {
        return Ok(false);
    }
    if state.sign_bytes.is_empty() || state.signature.is_empty() {
        return Err(GuardError::NoSignBytes { hrs });
    }
    Ok(true)
}

/// [`check_hrs`], and at a block-ID mark's own HRS (module docs): sign
/// (`Ok(false)`) a request for the recorded block ID, refuse any other
/// ([`GuardError::Conflict`]). A block ID equals another when its hash, its
/// part-set header's total and its hash are equal, as tmkms compares them
/// (`update_consensus_state`); nil is all three empty.
fn at_mark(state: &SignState, hrs: Hrs, block_id: &BlockId) -> Result<bool, GuardError> {
    match (check_hrs(state, hrs), &state.block_id) {
        (Err(GuardError::NoSignBytes { .. }), Some(recorded)) => {
            if recorded == block_id {
                Ok(false)
            } else {
                Err(GuardError::Conflict { hrs })
            }
        }
        (result, _) => result,
    }
}

/// The guard's decision on signing `vote` on `chain_id` (FilePV's
/// `signVote`, the vote itself; see [`check_extension`] for its
/// extension).
pub fn check_vote(state: &SignState, chain_id: &str, vote: &Vote) -> Result<Decision, GuardError> {
    let step = Step::of_vote_type(vote.msg_type).ok_or(GuardError::UnknownVoteType {
        msg_type: vote.msg_type,
    })?;
    check_content(&vote.block_id, vote.timestamp)?;
    let hrs = Hrs::new(vote.height, vote.round, step);
    let same = at_mark(state, hrs, &vote.block_id)?;
    let sign_bytes = vote_sign_bytes(chain_id, vote);
    if !same {
        return Ok(Decision::Sign { hrs, sign_bytes });
    }
    reuse(
        state,
        hrs,
        &sign_bytes,
        vote.timestamp,
        "vote",
        vote_timestamp_and_rest,
    )
}

/// The guard's decision on signing `proposal` on `chain_id` (FilePV's
/// `signProposal`).
pub fn check_proposal(
    state: &SignState,
    chain_id: &str,
    proposal: &Proposal,
) -> Result<Decision, GuardError> {
    check_content(&proposal.block_id, proposal.timestamp)?;
    let hrs = Hrs::new(proposal.height, proposal.round, Step::Propose);
    let same = at_mark(state, hrs, &proposal.block_id)?;
    let sign_bytes = proposal_sign_bytes(chain_id, proposal);
    if !same {
        return Ok(Decision::Sign { hrs, sign_bytes });
    }
    reuse(
        state,
        hrs,
        &sign_bytes,
        proposal.timestamp,
        "proposal",
        proposal_timestamp_and_rest,
    )
}

/// At the mark's HRS: identical bytes, or bytes that differ only in the
/// timestamp, re-serve the earlier signature; anything else conflicts.
fn reuse(
    state: &SignState,
    hrs: Hrs,
    sign_bytes: &[u8],
    timestamp: Timestamp,
    kind: &'static str,
    split: impl Fn(&[u8]) -> Option<(Timestamp, Vec<u8>)>,
) -> Result<Decision, GuardError> {
    if sign_bytes == state.sign_bytes.as_slice() {
        return Ok(Decision::Reuse {
            signature: state.signature.clone(),
            timestamp,
        });
    }
    let (last_time, last_rest) =
        split(&state.sign_bytes).ok_or(GuardError::CorruptSignBytes { hrs, kind })?;
    // Our own encoding always decodes; a failure would be a bug, and is
    // refused like a conflict rather than allowed.
    let (_, new_rest) = split(sign_bytes).ok_or(GuardError::Conflict { hrs })?;
    if last_rest == new_rest {
        Ok(Decision::Reuse {
            signature: state.signature.clone(),
            timestamp: last_time,
        })
    } else {
        Err(GuardError::Conflict { hrs })
    }
}

/// FilePV's extension rule, when the node asks for the extension to be
/// signed: `Ok(true)` for a non-nil precommit (sign its extension, even an
/// empty one, every time: it is not guarded), `Ok(false)` for a prevote or
/// nil precommit without an extension, and
/// [`GuardError::UnexpectedExtension`] for one with an extension.
pub fn check_extension(vote: &Vote) -> Result<bool, GuardError> {
    if vote.msg_type == signed_msg_type::PRECOMMIT && !vote.block_id.is_nil() {
        Ok(true)
    } else if !vote.extension.is_empty() {
        Err(GuardError::UnexpectedExtension)
    } else {
        Ok(false)
    }
}
