//! The signer as the endpoints see it: the library's [`GuardedSigner`]
//! with every call passed through, keeping what the reports need (the last
//! signature and its sign bytes, the mark, when and for which node it
//! moved, and the node's standby refusals).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use p2p_conn_privval::guard::Hrs;
use p2p_conn_privval::{
    proposal_sign_bytes, vote_sign_bytes, CryptoPublicKey, GuardedSigner, Proposal, SharedSigner,
    Signer, SignerError, Vote,
};

use super::standby::{self, Standby};

/// What the last successful signature was, for `--json`'s `served` events
/// (the endpoint's events carry the request, not the signature).
#[derive(Default)]
pub(super) struct LastSigned {
    pub(super) signature: Vec<u8>,
    pub(super) sign_bytes: Vec<u8>,
}

pub(super) type Slot = Arc<Mutex<Option<LastSigned>>>;

/// The high-water mark as this process last moved it: the HRS, when, and
/// for which node (`None`: as loaded from the state file, nothing signed
/// since start).
#[derive(Clone, Copy)]
pub(super) struct Mark {
    pub(super) hrs: Hrs,
    pub(super) at: Option<SystemTime>,
    /// The index (among `--node`) of the node whose request moved it.
    pub(super) by: Option<usize>,
}

pub(super) type SharedMark = Arc<Mutex<Mark>>;

/// The [`GuardedSigner`] with every call passed through, keeping the
/// signature and sign bytes of each vote or proposal it returns in `slot`,
/// the mark (with the time it moved and the node) in `mark`, and counting
/// this node's standby refusals in `standby`.
pub(super) struct Recording {
    pub(super) inner: SharedSigner<GuardedSigner>,
    pub(super) slot: Slot,
    pub(super) mark: SharedMark,
    /// This node's index among `--node`.
    pub(super) node: usize,
    pub(super) standby: Arc<Standby>,
}

impl Recording {
    /// Serve one request for `height` with the signer held (so the mark
    /// and the refusal are judged against the same state): keep what a
    /// signature made (`signed`: its signature and sign bytes), or count a
    /// standby refusal.
    fn serve<T>(
        &self,
        height: i64,
        request: impl FnOnce(&mut GuardedSigner) -> Result<T, SignerError>,
        signed: impl FnOnce(&T) -> (Vec<u8>, Vec<u8>),
    ) -> Result<T, SignerError> {
        let mut signer = self.inner.lock()?;
        let result = request(&mut signer);
        let hrs = signer.state().hrs();
        let mut mark = self.mark.lock().unwrap_or_else(PoisonError::into_inner);
        match &result {
            Ok(value) => {
                let (signature, sign_bytes) = signed(value);
                *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(LastSigned {
                    signature,
                    sign_bytes,
                });
                if mark.hrs != hrs {
                    *mark = Mark {
                        hrs,
                        at: Some(SystemTime::now()),
                        by: Some(self.node),
                    };
                }
            }
            Err(e) if standby::is_passed(e) && mark.by.is_some_and(|by| by != self.node) => {
                self.standby.refused(height);
            }
            Err(_) => {}
        }
        result
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
        self.serve(
            vote.height,
            |s| s.sign_vote(chain_id, vote, sign_extension),
            |v| (v.signature.clone(), vote_sign_bytes(chain_id, v)),
        )
    }

    fn sign_proposal(
        &mut self,
        chain_id: &str,
        proposal: Proposal,
    ) -> Result<Proposal, SignerError> {
        self.serve(
            proposal.height,
            |s| s.sign_proposal(chain_id, proposal),
            |p| (p.signature.clone(), proposal_sign_bytes(chain_id, p)),
        )
    }

    fn sign_bytes(&mut self, bytes: &[u8]) -> Result<Vec<u8>, SignerError> {
        self.serve(
            0,
            |s| s.sign_bytes(bytes),
            |sig| (sig.clone(), bytes.to_vec()),
        )
    }

    fn ping(&mut self) -> Result<(), SignerError> {
        self.inner.ping()
    }
}
