//! The signer as the endpoints see it: the library's [`GuardedSigner`]
//! with every call passed through, keeping what the reports need (the last
//! signature and its sign bytes, the mark and when it moved).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use p2p_conn_privval::guard::Hrs;
use p2p_conn_privval::{
    proposal_sign_bytes, vote_sign_bytes, CryptoPublicKey, GuardedSigner, Proposal, SharedSigner,
    Signer, SignerError, Vote,
};

/// What the last successful signature was, for `--json`'s `served` events
/// (the endpoint's events carry the request, not the signature).
#[derive(Default)]
pub(super) struct LastSigned {
    pub(super) signature: Vec<u8>,
    pub(super) sign_bytes: Vec<u8>,
}

pub(super) type Slot = Arc<Mutex<Option<LastSigned>>>;

/// The high-water mark as this process last moved it: the HRS, and when
/// (`None`: as loaded from the state file, nothing signed since start).
#[derive(Clone, Copy)]
pub(super) struct Mark {
    pub(super) hrs: Hrs,
    pub(super) at: Option<SystemTime>,
}

pub(super) type SharedMark = Arc<Mutex<Mark>>;

/// The [`GuardedSigner`] with every call passed through, keeping the
/// signature and sign bytes of each vote or proposal it returns in `slot`
/// and the mark (with the time it moved) in `mark`.
pub(super) struct Recording {
    pub(super) inner: SharedSigner<GuardedSigner>,
    pub(super) slot: Slot,
    pub(super) mark: SharedMark,
}

impl Recording {
    fn keep(&self, signature: &[u8], sign_bytes: Vec<u8>) {
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(LastSigned {
            signature: signature.to_vec(),
            sign_bytes,
        });
        let Ok(hrs) = self.inner.lock().map(|s| s.state().hrs()) else {
            return;
        };
        let mut mark = self.mark.lock().unwrap_or_else(PoisonError::into_inner);
        if mark.hrs != hrs {
            *mark = Mark {
                hrs,
                at: Some(SystemTime::now()),
            };
        }
    }
}

impl Signer for Recording {
    fn public_key(&mut self, chain_id: &str) -> Result<CryptoPublicKey, SignerError> {
        self.inner.public_key(chain_id)
    }

    fn sign_vote(
        &mut self,
        chain_id: &str,
        vote: Vote,
        sign_extension: bool,
    ) -> Result<Vote, SignerError> {
        let signed = self.inner.sign_vote(chain_id, vote, sign_extension)?;
        self.keep(&signed.signature, vote_sign_bytes(chain_id, &signed));
        Ok(signed)
    }

    fn sign_proposal(
        &mut self,
        chain_id: &str,
        proposal: Proposal,
    ) -> Result<Proposal, SignerError> {
        let signed = self.inner.sign_proposal(chain_id, proposal)?;
        self.keep(&signed.signature, proposal_sign_bytes(chain_id, &signed));
        Ok(signed)
    }

    fn sign_bytes(&mut self, bytes: &[u8]) -> Result<Vec<u8>, SignerError> {
        let signature = self.inner.sign_bytes(bytes)?;
        self.keep(&signature, bytes.to_vec());
        Ok(signature)
    }

    fn ping(&mut self) -> Result<(), SignerError> {
        self.inner.ping()
    }
}
