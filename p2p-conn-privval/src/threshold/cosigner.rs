//! A cosigner: one share, one double-sign guard, one state file, and a
//! pool of round-1 nonces; sans-IO (the randomness is passed in).
//!
//! # Design
//! - [`Cosigner::commit`] makes fresh nonces (`round1::commit`), keeps them
//!   in memory under new IDs, and returns their commitments for a leader.
//!   The pool holds at most [`MAX_NONCES`](super::MAX_NONCES): a new nonce
//!   past that discards the oldest (its commitment then gets
//!   [`ThresholdError::UnknownNonce`]). Nonces are never written anywhere:
//!   a restart discards them all. IDs start at a random number at each
//!   open, and a request's commitment must equal the pooled one too, so a
//!   commitment from before a restart never matches a new nonce.
//! - [`Cosigner::sign`] takes the request's nonces of this cosigner out of
//!   the pool first (a nonce named in a request is spent, whatever the
//!   answer), then checks the request as [`GuardedSigner`](crate::GuardedSigner)
//!   checks a node's: the chain, then the guard on the sign bytes it
//!   builds itself from the vote or proposal. It computes its shares over
//!   those bytes, saves the new mark (the sign bytes and its share), and
//!   only then answers.
//! - At the mark's own HRS the guard answers [`guard::Decision::Reuse`]:
//!   for the same sign bytes the cosigner signs them again with a fresh
//!   nonce (two signatures of one message are no double sign); for bytes
//!   that differ only in the timestamp it refuses with the timestamp it
//!   signed ([`ThresholdError::EarlierTimestamp`]), which the leader asks
//!   again with.
//! - Vote extensions are signed as FilePV signs them: every time, for a
//!   non-nil precommit when asked, unguarded; with their own commitments
//!   (a second signing package) in the same request.

use std::collections::BTreeMap;
use std::path::Path;

use frost_ed25519::round1::SigningNonces;
use frost_ed25519::SigningPackage;
use rand_core::{CryptoRng, RngCore};

use super::messages::{package_commitments, Commitment, SignRequest, SignResponse, Signable};
use super::share::KeyShare;
use super::{ThresholdError, MAX_NONCES};
use crate::guard::{self, Decision, Hrs, SignState};
use crate::sign_bytes::vote_extension_sign_bytes;
use crate::signer::Mark;

/// One cosigner of a threshold validator (module docs).
pub struct Cosigner {
    share: KeyShare,
    mark: Mark,
    chain_id: String,
    /// The nonces, by ID, oldest first (IDs only grow).
    pool: BTreeMap<u64, SigningNonces>,
    next_id: u64,
}

impl std::fmt::Debug for Cosigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cosigner")
            .field("share", &self.share)
            .field("mark", &self.mark)
            .field("chain_id", &self.chain_id)
            .field("nonces", &self.pool.len())
            .finish_non_exhaustive()
    }
}

impl Cosigner {
    /// A cosigner with `share`, serving `chain_id`, its mark in the state
    /// file at `state_path` (opened, checked and locked as
    /// [`GuardedSigner::open`](crate::GuardedSigner::open) does: one
    /// cosigner per state file). The pool starts empty; `rng` picks where
    /// its IDs start.
    pub fn open(
        share: KeyShare,
        state_path: impl AsRef<Path>,
        chain_id: impl Into<String>,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<Cosigner, ThresholdError> {
        let mark = Mark::open(state_path.as_ref())?;
        Ok(Cosigner {
            share,
            mark,
            chain_id: chain_id.into(),
            pool: BTreeMap::new(),
            // Half the range: IDs never wrap in a process's life.
            next_id: rng.next_u64() >> 1,
        })
    }

    /// This cosigner's index.
    pub fn index(&self) -> u16 {
        self.share.index()
    }

    /// Its share's public parts (and its signing share).
    pub fn share(&self) -> &KeyShare {
        &self.share
    }

    /// The chain it serves.
    pub fn chain_id(&self) -> &str {
        &self.chain_id
    }

    /// The guard's high-water mark.
    pub fn state(&self) -> &SignState {
        self.mark.state()
    }

    /// Raise the guard's mark to `hrs` without sign bytes, when `hrs` is
    /// above it (`spec/threshold.md` §2, catch-up): this cosigner then
    /// refuses `hrs` and everything below it, and signs only above. Saved
    /// to the state file before it returns; whether the mark moved.
    pub fn raise_mark(&mut self, hrs: Hrs) -> Result<bool, ThresholdError> {
        if hrs <= self.mark.state().hrs() {
            return Ok(false);
        }
        self.mark
            .save(SignState::new(hrs, Vec::new(), Vec::new()))?;
        Ok(true)
    }

    /// How many nonces the pool holds.
    pub fn nonces(&self) -> usize {
        self.pool.len()
    }

    /// `count` fresh nonces into the pool (at most
    /// [`MAX_NONCES`](super::MAX_NONCES) are kept: the oldest go), and
    /// their commitments, to hand to a leader.
    pub fn commit(
        &mut self,
        count: usize,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Vec<Commitment> {
        let count = count.min(MAX_NONCES);
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let (nonces, commitments) =
                frost_ed25519::round1::commit(self.share.key_package().signing_share(), rng);
            let id = self.next_id;
            self.next_id += 1;
            self.pool.insert(id, nonces);
            out.push(Commitment {
                signer: self.index(),
                id,
                commitments,
            });
        }
        while self.pool.len() > MAX_NONCES {
            self.pool.pop_first();
        }
        out
    }

    /// Take out of the pool the nonce of this cosigner's commitment in
    /// `list`: spent from here on, whatever follows.
    fn take_nonce(&mut self, list: &[Commitment]) -> Result<SigningNonces, ThresholdError> {
        let mine = list
            .iter()
            .find(|c| c.signer == self.index())
            .ok_or(ThresholdError::NotChosen)?;
        let nonces = self
            .pool
            .remove(&mine.id)
            .ok_or(ThresholdError::UnknownNonce { id: mine.id })?;
        if nonces.commitments() != &mine.commitments {
            return Err(ThresholdError::UnknownNonce { id: mine.id });
        }
        Ok(nonces)
    }

    /// Answer a leader's sign request with this cosigner's signature
    /// shares, or refuse it (module docs). The nonces the request names
    /// for this cosigner are spent either way.
    pub fn sign(&mut self, request: &SignRequest) -> Result<SignResponse, ThresholdError> {
        let nonces = self.take_nonce(&request.commitments)?;
        let extension_nonces = if request.extension_commitments.is_empty() {
            None
        } else {
            Some(self.take_nonce(&request.extension_commitments)?)
        };
        let (t, n) = (self.share.threshold(), self.share.signers());
        let commitments = package_commitments(&request.commitments, t, n)?;
        let extension_commitments = match &extension_nonces {
            None => None,
            Some(_) => {
                let ext = package_commitments(&request.extension_commitments, t, n)?;
                if !ext.keys().eq(commitments.keys()) {
                    return Err(ThresholdError::BadRequest(
                        "the extension's signers are not the vote's",
                    ));
                }
                Some(ext)
            }
        };
        if request.chain_id != self.chain_id {
            return Err(crate::SignerError::WrongChainId {
                expected: self.chain_id.clone(),
                got: request.chain_id.clone(),
            }
            .into());
        }
        let chain_id = &self.chain_id;
        let state = self.mark.state();
        let (decision, timestamp, extension) = match &request.signable {
            Signable::Vote {
                vote,
                sign_extension,
            } => {
                let decision = guard::check_vote(state, chain_id, vote).map_err(guard_err)?;
                let extension =
                    *sign_extension && guard::check_extension(vote).map_err(guard_err)?;
                let extension = extension.then(|| vote_extension_sign_bytes(chain_id, vote));
                (decision, vote.timestamp, extension)
            }
            Signable::Proposal(proposal) => {
                let decision =
                    guard::check_proposal(state, chain_id, proposal).map_err(guard_err)?;
                (decision, proposal.timestamp, None)
            }
        };
        if extension.is_some() != extension_nonces.is_some() {
            return Err(ThresholdError::BadRequest(
                "extension commitments for no extension, or none for one",
            ));
        }
        let (new_mark, message): (Option<Hrs>, Vec<u8>) = match decision {
            Decision::Sign { hrs, sign_bytes } => (Some(hrs), sign_bytes),
            Decision::Reuse {
                timestamp: signed, ..
            } if signed == timestamp => (None, state.sign_bytes().to_vec()),
            Decision::Reuse {
                timestamp: signed, ..
            } => return Err(ThresholdError::EarlierTimestamp { timestamp: signed }),
        };
        let key = self.share.key_package();
        let package = SigningPackage::new(commitments, &message);
        let share =
            frost_ed25519::round2::sign(&package, &nonces, key).map_err(ThresholdError::Frost)?;
        drop(nonces);
        let extension_share = match (extension, extension_commitments, extension_nonces) {
            (Some(bytes), Some(commitments), Some(nonces)) => {
                let package = SigningPackage::new(commitments, &bytes);
                Some(
                    frost_ed25519::round2::sign(&package, &nonces, key)
                        .map_err(ThresholdError::Frost)?,
                )
            }
            _ => None,
        };
        match new_mark {
            Some(hrs) => self
                .mark
                .save(SignState::new(hrs, message, share.serialize()))?,
            None => self.mark.make_durable()?,
        }
        Ok(SignResponse {
            signer: self.index(),
            share,
            extension_share,
        })
    }
}

fn guard_err(e: guard::GuardError) -> ThresholdError {
    ThresholdError::Signer(e.into())
}

#[cfg(test)]
mod tests;
