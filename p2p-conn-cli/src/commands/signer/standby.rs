//! A node on standby. With one signer for several nodes, every node runs
//! consensus and asks for each vote; the first request for a height,
//! round and step is signed, and a node that asks later with other
//! content, or for a step the signer has passed, is refused by the guard
//! (a conflict at the mark, or a regression below it). That refusal is how
//! one signer for two nodes keeps one vote per step, not a fault: it is
//! counted per node ([`Standby`], the metric
//! `p2p_conn_signer_standby_refusals_total`), told once when it starts,
//! and then summarised once a minute per node, never a line per request.
//!
//! A refusal counts as standby when the guard refused it for a conflict
//! or a regression and the mark was last moved by another node's
//! request. The same refusal against a mark the node itself moved (a node
//! asking below its own last vote) or one loaded from the state file is a
//! fault, told per request as before.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use p2p_conn_privval::guard::GuardError;
use p2p_conn_privval::SignerError;

/// How often a node's standby refusals are summarised (the text says
/// "once a minute").
pub(super) const SUMMARY_EVERY: Duration = Duration::from_secs(60);

/// Whether the guard refused `e` because the mark is at or past the
/// request (a conflict or a regression): the refusal another node's
/// signature causes.
pub(super) fn is_passed(e: &SignerError) -> bool {
    matches!(
        e,
        SignerError::Refused(
            GuardError::Conflict { .. }
                | GuardError::HeightRegression { .. }
                | GuardError::RoundRegression { .. }
                | GuardError::StepRegression { .. }
        )
    )
}

/// One node's standby refusals.
#[derive(Debug, Default)]
pub(super) struct Standby {
    inner: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    total: u64,
    /// Since the last summary, and their lowest and highest heights.
    pending: u64,
    low: i64,
    high: i64,
    /// The request being served was one (for its report).
    flagged: bool,
    /// The first was told.
    told: bool,
}

/// What a summary says.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Summary {
    /// Refused since the last summary.
    pub(super) refused: u64,
    /// Their lowest and highest heights.
    pub(super) low: i64,
    pub(super) high: i64,
    /// Refused since start.
    pub(super) total: u64,
}

impl Standby {
    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request for `height` was refused because another node's
    /// signature passed it.
    pub(super) fn refused(&self, height: i64) {
        let mut c = self.counts();
        c.total += 1;
        if c.pending == 0 {
            (c.low, c.high) = (height, height);
        }
        c.pending += 1;
        c.low = c.low.min(height);
        c.high = c.high.max(height);
        c.flagged = true;
    }

    /// Whether the request just served was a standby refusal: `None` if
    /// not, `Some(true)` for the node's first (to be told), `Some(false)`
    /// for the others.
    pub(super) fn take_flag(&self) -> Option<bool> {
        let mut c = self.counts();
        if !std::mem::take(&mut c.flagged) {
            return None;
        }
        Some(!std::mem::replace(&mut c.told, true))
    }

    /// Standby refusals since start.
    pub(super) fn total(&self) -> u64 {
        self.counts().total
    }

    /// The refusals since the last summary, if any: a summary, and the
    /// count starts again.
    pub(super) fn take_summary(&self) -> Option<Summary> {
        let mut c = self.counts();
        if c.pending == 0 {
            return None;
        }
        let s = Summary {
            refused: c.pending,
            low: c.low,
            high: c.high,
            total: c.total,
        };
        c.pending = 0;
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p2p_conn_privval::guard::{Hrs, Step};

    #[test]
    fn counted_told_once_and_summarised_since_the_last() {
        let s = Standby::default();
        assert_eq!(s.take_flag(), None);
        assert_eq!(s.take_summary(), None);
        s.refused(7);
        assert_eq!(s.take_flag(), Some(true), "the first is told");
        s.refused(9);
        s.refused(8);
        assert_eq!(s.take_flag(), Some(false));
        assert_eq!(s.take_flag(), None, "one flag per refusal");
        assert_eq!(
            s.take_summary(),
            Some(Summary {
                refused: 3,
                low: 7,
                high: 9,
                total: 3
            })
        );
        assert_eq!(s.take_summary(), None);
        s.refused(12);
        assert_eq!(s.take_flag(), Some(false), "told once per run");
        let next = s.take_summary().unwrap();
        assert_eq!((next.refused, next.low, next.total), (1, 12, 4));
        assert_eq!(s.total(), 4);
    }

    #[test]
    fn only_a_passed_mark_is_standby() {
        let hrs = Hrs::new(5, 0, Step::Prevote);
        assert!(is_passed(&SignerError::Refused(GuardError::Conflict {
            hrs
        })));
        assert!(is_passed(&SignerError::Refused(
            GuardError::HeightRegression {
                height: 4,
                last_height: 5
            }
        )));
        assert!(!is_passed(&SignerError::Refused(
            GuardError::UnexpectedExtension
        )));
        assert!(!is_passed(&SignerError::SignBytesRefused));
    }
}
