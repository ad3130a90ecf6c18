//! What cosigners hand each other: commitments to nonces, a sign request,
//! its answer. Rust values only: the wire encoding is the next increment's
//! (`spec/threshold.md`).

use std::collections::BTreeMap;

use frost_ed25519::round1::SigningCommitments;
use frost_ed25519::round2::SignatureShare;
use frost_ed25519::Identifier;

use super::ThresholdError;
use crate::messages::{Proposal, Vote};

/// A cosigner's commitment to one of its round-1 nonces (FROST's
/// `SigningCommitments`: the hiding and binding points), handed out ahead
/// of time: a leader puts it in one sign request, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Commitment {
    /// The cosigner that holds the nonce (its share's index).
    pub signer: u16,
    /// The nonce's ID in that cosigner's pool.
    pub id: u64,
    /// The commitment itself.
    pub commitments: SigningCommitments,
}

/// What a sign request asks to have signed: a vote or a proposal, never
/// raw bytes (each cosigner builds the sign bytes itself).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Signable {
    /// A vote (`SignVoteRequest`).
    Vote {
        /// The vote.
        vote: Vote,
        /// Sign its extension too (as [`Signer::sign_vote`](crate::Signer::sign_vote)'s
        /// `sign_extension`): for a non-nil precommit the request then
        /// carries a second set of commitments.
        sign_extension: bool,
    },
    /// A proposal (`SignProposalRequest`).
    Proposal(Proposal),
}

/// A leader's request to a cosigner: what to sign on which chain, and the
/// commitments of the t cosigners chosen (the signing package's), plus a
/// second set for a vote extension.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SignRequest {
    /// The chain.
    pub chain_id: String,
    /// What to sign.
    pub signable: Signable,
    /// One commitment of each chosen cosigner, for the vote or proposal.
    pub commitments: Vec<Commitment>,
    /// One commitment of each chosen cosigner (the same ones), for the
    /// vote's extension; empty when no extension is signed.
    pub extension_commitments: Vec<Commitment>,
}

/// A cosigner's answer: its signature shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SignResponse {
    /// The cosigner (its share's index).
    pub signer: u16,
    /// Its share of the vote's or proposal's signature.
    pub share: SignatureShare,
    /// Its share of the extension's signature, when one was asked for.
    pub extension_share: Option<SignatureShare>,
}

/// The signing package's commitments from a request's list: each signer
/// once, in 1..=`signers`, at least `threshold` of them; the IDs of the
/// nonces beside.
pub(crate) fn package_commitments(
    list: &[Commitment],
    threshold: u16,
    signers: u16,
) -> Result<BTreeMap<Identifier, SigningCommitments>, ThresholdError> {
    let mut map = BTreeMap::new();
    for c in list {
        if c.signer == 0 || c.signer > signers {
            return Err(ThresholdError::BadRequest(
                "a commitment of an unknown signer",
            ));
        }
        let id = Identifier::try_from(c.signer).expect("nonzero");
        if map.insert(id, c.commitments).is_some() {
            return Err(ThresholdError::BadRequest("two commitments of one signer"));
        }
    }
    if map.len() < usize::from(threshold) {
        return Err(ThresholdError::BadRequest(
            "fewer commitments than the threshold",
        ));
    }
    Ok(map)
}
