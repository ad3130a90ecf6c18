//! `queue_budget`: the send queue's byte accounting against a model.

use crate::input::Input;
use crate::internals::{Admission, Budget};
use crate::Seeds;

/// [`Budget`] under an arbitrary sequence of admissions and releases,
/// against a model of its documented rules.
///
/// Input: the cap (2 bytes), then operations: a byte with the high bit set
/// releases a held admission (the rest of the byte picks which); otherwise
/// `op % 4` admits an empty message, a small one (< cap), one exactly at the
/// cap, or a large one (cap + 0..65535).
///
/// Checks: admission happens exactly when the rules allow it (a small
/// message fits under the cap with the small ones pending; a large one takes
/// the single large slot when it is free); `pending` is what is held and
/// never above cap + the one large message; a release gives back exactly
/// what it admitted; releasing everything returns to zero.
pub fn check(data: &[u8]) {
    let mut inp = Input::new(data);
    let max = usize::from(inp.u16()).max(1);
    let mut budget = Budget::new(max);
    assert_eq!(budget.max(), max);
    let mut held: Vec<Admission> = Vec::new();
    let (mut small, mut large) = (0usize, None::<usize>);
    while !inp.is_empty() {
        let op = inp.u8();
        if op & 0x80 != 0 {
            if held.is_empty() {
                continue;
            }
            let a = held.swap_remove(usize::from(op & 0x7f) % held.len());
            let before = budget.pending();
            budget.release(a);
            assert_eq!(budget.pending(), before - a.len(), "release of {a:?}");
            match a {
                Admission::Small(n) => small -= n,
                Admission::Large(_) => large = None,
            }
        } else {
            let len = match op % 4 {
                0 => 0,
                1 => usize::from(inp.u16()) % max,
                2 => max,
                _ => max + usize::from(inp.u16()),
            };
            let before = budget.pending();
            let got = budget.try_admit(len);
            let allowed = if len >= max {
                large.is_none()
            } else {
                small + len <= max
            };
            assert_eq!(
                got.is_some(),
                allowed,
                "admit {len} (cap {max}, small {small}, large {large:?})"
            );
            match got {
                Some(a) => {
                    assert_eq!(a.len(), len);
                    assert_eq!(a.is_empty(), len == 0);
                    assert_eq!(budget.pending(), before + len);
                    match a {
                        Admission::Small(n) => {
                            assert!(len < max);
                            small += n;
                        }
                        Admission::Large(n) => {
                            assert!(len >= max);
                            large = Some(n);
                        }
                    }
                    held.push(a);
                }
                None => assert_eq!(budget.pending(), before, "a refusal changed pending"),
            }
        }
        assert_eq!(budget.pending(), small + large.unwrap_or(0));
        assert!(small <= max, "small messages above the cap");
        assert!(budget.pending() <= max + large.unwrap_or(0));
        let larges = held
            .iter()
            .filter(|a| matches!(a, Admission::Large(_)))
            .count();
        assert!(larges <= 1, "{larges} large admissions held at once");
    }
    for a in held.drain(..) {
        budget.release(a);
    }
    assert_eq!(budget.pending(), 0, "everything released");
}

/// The seeds this check owns, written to `seeds/queue_budget/` by `gen_seeds`:
/// filling and releasing the budget, the large slot, a one-byte cap.
pub fn seeds() -> Seeds {
    let mut s = Seeds::default();
    // Layout: cap u16, then ops.
    s.add(
        "fill-and-release",
        &[
            0xe8, 0x03, 1, 0x58, 0x02, 1, 0x91, 0x01, 1, 0x90, 0x01, 0x80, 1, 0x58, 0x02,
        ],
    );
    s.add(
        "large-slot",
        &[
            0x10, 0, 1, 0x0e, 0, 2, 3, 5, 0, 3, 0, 0, 0x81, 3, 7, 0, 0x80, 0x80, 0x80,
        ],
    );
    s.add(
        "cap-one-empties",
        &[1, 0, 0, 0, 1, 0, 0, 2, 2, 0x83, 0x84, 0x85],
    );
    s
}
