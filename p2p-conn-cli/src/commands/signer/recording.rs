//! The signer as the endpoints see it: the library's [`GuardedSigner`]
//! with every call passed through, keeping what the reports need (the last
//! signature and its sign bytes, the mark, when and for which node it
//! moved, and the node's standby refusals).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use p2p_conn_privval::guard::{Hrs, Step};
use p2p_conn_privval::{
    proposal_sign_bytes, vote_sign_bytes, CryptoPublicKey, GuardedSigner, Proposal, SharedSigner,
    Signer, SignerError, Vote,
};

use super::standby::{self, Standby};

/// What a successful signature was, for `--json`'s `served` events (the
/// endpoint's events carry the request, not the signature).
#[derive(Default)]
pub(super) struct LastSigned {
    pub(super) signature: Vec<u8>,
    pub(super) sign_bytes: Vec<u8>,
}

/// What the last request that reached the signer left, for its `served`
/// event.
pub(super) enum Outcome {
    /// A signature and its sign bytes.
    Signed(LastSigned),
    /// A failure of this kind ([`error_kind`]).
    Failed(&'static str),
}

pub(super) type Slot = Arc<Mutex<Option<Outcome>>>;

/// The kind of a failure, the `served` event's `error_kind`: a name an
/// alert can select on (docs/operator-manual.md, "Logs to alert on").
pub(super) fn error_kind(e: &SignerError) -> &'static str {
    match e {
        SignerError::Refused(_) => "double_sign_guard",
        SignerError::WrongChainId { .. } => "chain_id",
        SignerError::State(_)
        | SignerError::StateLocked { .. }
        | SignerError::LockFailed { .. } => "state_file",
        SignerError::Key(_)
        | SignerError::KeyMismatch { .. }
        | SignerError::NotValidatorKey { .. }
        | SignerError::Backend(_) => "key",
        SignerError::SignBytesRefused => "sign_bytes",
        _ => "other",
    }
}

/// The high-water mark as this process last moved it: the HRS, when, and
/// for which node (`None`: as loaded from the state file, nothing signed
/// since start); and the missed heights it has seen go by.
#[derive(Clone, Copy)]
pub(super) struct Mark {
    pub(super) hrs: Hrs,
    pub(super) at: Option<SystemTime>,
    /// The index (among `--node`) of the node whose request moved it.
    pub(super) by: Option<usize>,
    /// The height of the last precommit signed, by this process or (as
    /// the state file records it) before.
    last_precommit: Option<i64>,
    /// Heights with no precommit signed between two that have one, since
    /// start (the metric `p2p_conn_signer_missed_heights_total`).
    pub(super) missed: u64,
}

impl Mark {
    /// The mark `hrs` loaded from the state file: nothing signed since
    /// start. A precommit there is where the missed heights count from.
    pub(super) fn loaded(hrs: Hrs) -> Mark {
        Mark {
            hrs,
            at: None,
            by: None,
            last_precommit: (hrs.step == Step::Precommit).then_some(hrs.height),
            missed: 0,
        }
    }

    /// The guard moved the mark to `hrs`, signing for node `by`: a
    /// precommit counts the heights since the last one that have none.
    fn moved(&mut self, hrs: Hrs, by: usize) {
        if hrs.step == Step::Precommit {
            if let Some(last) = self.last_precommit {
                self.missed += missed_between(last, hrs.height);
            }
            self.last_precommit = Some(hrs.height);
        }
        self.hrs = hrs;
        self.at = Some(SystemTime::now());
        self.by = Some(by);
    }
}

/// The heights strictly between two precommits' heights.
fn missed_between(last: i64, now: i64) -> u64 {
    u64::try_from(now.saturating_sub(last).saturating_sub(1)).unwrap_or(0)
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
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        match &result {
            Ok(value) => {
                let (signature, sign_bytes) = signed(value);
                *slot = Some(Outcome::Signed(LastSigned {
                    signature,
                    sign_bytes,
                }));
                if mark.hrs != hrs {
                    mark.moved(hrs, self.node);
                }
            }
            Err(e) => {
                if standby::is_passed(e) && mark.by.is_some_and(|by| by != self.node) {
                    self.standby.refused(height);
                }
                *slot = Some(Outcome::Failed(error_kind(e)));
            }
        }
        result
    }
}

impl Signer for Recording {
    fn public_key(&mut self, chain_id: &str) -> Result<CryptoPublicKey, SignerError> {
        self.inner.public_key(chain_id).inspect_err(|e| {
            *self.slot.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(Outcome::Failed(error_kind(e)));
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn hrs(height: i64, round: i32, step: Step) -> Hrs {
        Hrs {
            height,
            round,
            step,
        }
    }

    #[test]
    fn missed_heights_are_those_with_no_precommit_between_two() {
        let mut m = Mark::loaded(hrs(0, 0, Step::None));
        for (h, r, step) in [
            (1, 0, Step::Precommit), // nothing before it to count from
            (2, 0, Step::Prevote),
            (2, 0, Step::Precommit),
            (4, 0, Step::Propose), // 3 has none
            (4, 1, Step::Precommit),
            (4, 2, Step::Precommit),  // a new round: not a gap
            (9, 0, Step::Prevote),    // a prevote alone: 5 to 9 are missed...
            (10, 0, Step::Precommit), // ...when 10's precommit comes
        ] {
            m.moved(hrs(h, r, step), 0);
        }
        assert_eq!(m.missed, 1 + 5);
        // From a state file's precommit at 10 to one at 13: 11 and 12.
        let mut m = Mark::loaded(hrs(10, 0, Step::Precommit));
        m.moved(hrs(13, 0, Step::Precommit), 0);
        assert_eq!(m.missed, 2);
        // A state file's prevote is no precommit to count from.
        let mut m = Mark::loaded(hrs(10, 0, Step::Prevote));
        m.moved(hrs(13, 0, Step::Precommit), 0);
        assert_eq!(m.missed, 0);
    }

    #[test]
    fn each_failure_has_its_kind() {
        use p2p_conn_privval::guard::GuardError;
        let locked = SignerError::StateLocked {
            path: "s".into(),
            lock: "s.lock".into(),
        };
        let wrong_chain = SignerError::WrongChainId {
            expected: "a".into(),
            got: "b".into(),
        };
        let conflict = SignerError::Refused(GuardError::Conflict {
            hrs: hrs(1, 0, Step::Prevote),
        });
        for (e, kind) in [
            (conflict, "double_sign_guard"),
            (wrong_chain, "chain_id"),
            (locked, "state_file"),
            (SignerError::Backend("token removed".into()), "key"),
            (SignerError::SignBytesRefused, "sign_bytes"),
        ] {
            assert_eq!(error_kind(&e), kind, "{e}");
        }
    }
}
