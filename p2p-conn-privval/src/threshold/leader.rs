//! The leader's side: the commitments peers handed out ahead of time, the
//! choice of t cosigners for a request, and the aggregation of their
//! shares into an ordinary Ed25519 signature.
//!
//! # Design
//! - [`Leader::add_commitments`] stocks a peer's commitments (at most
//!   [`MAX_NONCES`](super::MAX_NONCES) per peer, the oldest dropped).
//! - [`Leader::start`] takes fresh commitments from the leader's own
//!   cosigner and one (two with an extension) from each of the first t-1
//!   peers it is given that have stock, removing them (a commitment goes
//!   into one request only), and returns the request to send to each of
//!   them and to its own cosigner, and the [`SigningRound`] that gathers
//!   their answers.
//! - [`SigningRound::finish`] aggregates (`frost_ed25519::aggregate`, which
//!   verifies the result under the group key and names a cosigner whose
//!   share is wrong) and returns the vote or proposal with its signature.
//!   The leader signs nothing the cosigners' guards did not allow: its own
//!   share comes from its own [`Cosigner`], like any other.

use std::collections::{BTreeMap, VecDeque};

use frost_ed25519::keys::PublicKeyPackage;
use frost_ed25519::round2::SignatureShare;
use frost_ed25519::{Identifier, SigningPackage};
use rand_core::{CryptoRng, RngCore};

use super::cosigner::Cosigner;
use super::messages::{package_commitments, Commitment, SignRequest, SignResponse, Signable};
use super::{ThresholdError, MAX_NONCES};
use crate::guard;
use crate::sign_bytes::{proposal_sign_bytes, vote_extension_sign_bytes, vote_sign_bytes};

/// A leader's stock of its peers' commitments (module docs).
#[derive(Debug)]
pub struct Leader {
    index: u16,
    threshold: u16,
    signers: u16,
    public: PublicKeyPackage,
    stock: BTreeMap<u16, VecDeque<Commitment>>,
}

impl Leader {
    /// The leader beside `own`, its own cosigner, with no stock yet.
    pub fn new(own: &Cosigner) -> Leader {
        let share = own.share();
        Leader {
            index: share.index(),
            threshold: share.threshold(),
            signers: share.signers(),
            public: share.public_package().clone(),
            stock: BTreeMap::new(),
        }
    }

    /// Stock `commitments` from peer `from` (each must be that peer's:
    /// [`ThresholdError::BadRequest`] otherwise, and nothing is stocked).
    pub fn add_commitments(
        &mut self,
        from: u16,
        commitments: &[Commitment],
    ) -> Result<(), ThresholdError> {
        if from == self.index || from == 0 || from > self.signers {
            return Err(ThresholdError::BadRequest("commitments from no peer"));
        }
        if commitments.iter().any(|c| c.signer != from) {
            return Err(ThresholdError::BadRequest(
                "a peer's commitment of another signer",
            ));
        }
        let stock = self.stock.entry(from).or_default();
        stock.extend(commitments.iter().copied());
        while stock.len() > MAX_NONCES {
            stock.pop_front();
        }
        Ok(())
    }

    /// Drop every stocked commitment of peer `peer` (it reconnected: it
    /// may have restarted, and a restart discards its nonces).
    pub fn drop_stock(&mut self, peer: u16) {
        self.stock.remove(&peer);
    }

    /// How many commitments of peer `peer` are in stock.
    pub fn stock(&self, peer: u16) -> usize {
        self.stock.get(&peer).map_or(0, VecDeque::len)
    }

    /// Start signing `signable` on `chain_id`: own commitments from `own`,
    /// and the stocked ones of the first t-1 of `peers` (in that order of
    /// preference) that have enough. The request goes to each chosen peer
    /// and to `own`; their answers go to the round. Nothing is taken from
    /// the stock when there are not enough peers
    /// ([`ThresholdError::NotEnoughCommitments`]).
    pub fn start(
        &mut self,
        own: &mut Cosigner,
        chain_id: &str,
        signable: Signable,
        peers: &[u16],
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SignRequest, SigningRound), ThresholdError> {
        let extension = match &signable {
            Signable::Vote {
                vote,
                sign_extension: true,
            } => guard::check_extension(vote).map_err(|e| ThresholdError::Signer(e.into()))?,
            _ => false,
        };
        let per_peer = if extension { 2 } else { 1 };
        let need = usize::from(self.threshold) - 1;
        let mut chosen: Vec<u16> = Vec::with_capacity(need);
        for &peer in peers {
            if chosen.len() == need {
                break;
            }
            if peer != self.index && !chosen.contains(&peer) && self.stock(peer) >= per_peer {
                chosen.push(peer);
            }
        }
        if chosen.len() < need {
            return Err(ThresholdError::NotEnoughCommitments {
                have: chosen.len() + 1,
                need: self.threshold,
            });
        }
        let mut mine = own.commit(per_peer, rng).into_iter();
        let mut commitments = vec![mine.next().expect("one commitment")];
        let mut extension_commitments: Vec<Commitment> = mine.collect();
        for peer in chosen {
            let stock = self.stock.get_mut(&peer).expect("chosen with stock");
            commitments.push(stock.pop_front().expect("stock checked"));
            if extension {
                extension_commitments.push(stock.pop_front().expect("stock checked"));
            }
        }
        let request = SignRequest {
            chain_id: chain_id.to_owned(),
            signable,
            commitments,
            extension_commitments,
        };
        let round = SigningRound::new(&request, self.public.clone(), self.threshold, self.signers)?;
        Ok((request, round))
    }
}

/// One request's answers, gathered and aggregated (module docs).
#[derive(Debug)]
pub struct SigningRound {
    signable: Signable,
    package: SigningPackage,
    extension: Option<SigningPackage>,
    public: PublicKeyPackage,
    shares: BTreeMap<Identifier, SignatureShare>,
    extension_shares: BTreeMap<Identifier, SignatureShare>,
}

impl SigningRound {
    fn new(
        request: &SignRequest,
        public: PublicKeyPackage,
        threshold: u16,
        signers: u16,
    ) -> Result<SigningRound, ThresholdError> {
        let chain_id = &request.chain_id;
        let (message, extension) = match &request.signable {
            Signable::Vote { vote, .. } => (
                vote_sign_bytes(chain_id, vote),
                (!request.extension_commitments.is_empty())
                    .then(|| vote_extension_sign_bytes(chain_id, vote)),
            ),
            Signable::Proposal(p) => (proposal_sign_bytes(chain_id, p), None),
        };
        let package = SigningPackage::new(
            package_commitments(&request.commitments, threshold, signers)?,
            &message,
        );
        let extension = match extension {
            Some(bytes) => Some(SigningPackage::new(
                package_commitments(&request.extension_commitments, threshold, signers)?,
                &bytes,
            )),
            None => None,
        };
        Ok(SigningRound {
            signable: request.signable.clone(),
            package,
            extension,
            public,
            shares: BTreeMap::new(),
            extension_shares: BTreeMap::new(),
        })
    }

    /// Add a cosigner's answer; `Ok(true)` once every chosen cosigner has
    /// answered. An answer from a cosigner not chosen, a second one, or
    /// one without the extension share asked for is refused
    /// ([`ThresholdError::BadRequest`]).
    pub fn add(&mut self, response: SignResponse) -> Result<bool, ThresholdError> {
        let id = Identifier::try_from(response.signer)
            .map_err(|_| ThresholdError::BadRequest("an answer of no signer"))?;
        if self.package.signing_commitment(&id).is_none() || self.shares.contains_key(&id) {
            return Err(ThresholdError::BadRequest("an answer not asked for"));
        }
        if self.extension.is_some() != response.extension_share.is_some() {
            return Err(ThresholdError::BadRequest(
                "an answer without its extension share",
            ));
        }
        self.shares.insert(id, response.share);
        if let Some(share) = response.extension_share {
            self.extension_shares.insert(id, share);
        }
        Ok(self.is_complete())
    }

    /// Every chosen cosigner has answered.
    pub fn is_complete(&self) -> bool {
        self.shares.len() == self.package.signing_commitments().len()
    }

    /// Aggregate the shares: the vote (with its signature, and its
    /// extension's when asked) or the proposal, signed. A wrong share is
    /// [`ThresholdError::Frost`] naming its cosigner.
    pub fn finish(self) -> Result<Signable, ThresholdError> {
        let signature = aggregate(&self.package, &self.shares, &self.public)?;
        Ok(match self.signable {
            Signable::Vote {
                mut vote,
                sign_extension,
            } => {
                vote.signature = signature;
                vote.extension_signature = match &self.extension {
                    Some(package) => aggregate(package, &self.extension_shares, &self.public)?,
                    None => Vec::new(),
                };
                Signable::Vote {
                    vote,
                    sign_extension,
                }
            }
            Signable::Proposal(mut proposal) => {
                proposal.signature = signature;
                Signable::Proposal(proposal)
            }
        })
    }
}

fn aggregate(
    package: &SigningPackage,
    shares: &BTreeMap<Identifier, SignatureShare>,
    public: &PublicKeyPackage,
) -> Result<Vec<u8>, ThresholdError> {
    frost_ed25519::aggregate(package, shares, public)
        .and_then(|s| s.serialize())
        .map_err(ThresholdError::Frost)
}
