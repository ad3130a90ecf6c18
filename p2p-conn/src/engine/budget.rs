//! Byte accounting of a send queue, sans-IO: how many message bytes may be
//! queued and not yet sealed, and who gets room.
//!
//! A message (or bundle) below the cap must fit under it with everything
//! already pending. One at or above the cap cannot ever fit, so it takes the
//! single large slot instead, counted apart: it never trips the cap by
//! itself, and the small messages behind it are judged on their own size.
//! What is held is therefore at most the cap plus one large message.
//!
//! The waiting (for room) is the adapter's: `io::queue` wraps a [`Budget`]
//! in a lock and wakes waiters after every [`Budget::release`].

/// Room granted by [`Budget::try_admit`]; give it back with
/// [`Budget::release`] once the bytes are sealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Bytes under the cap.
    Small(usize),
    /// The large slot, for a message of this many bytes (at least the cap).
    Large(usize),
}

// `len`, `is_empty` and `max` serve the `queue_budget` fuzz target's checks
// (through `testkit::internals`); the queue itself needs none of them.
#[cfg_attr(not(feature = "testkit"), allow(dead_code))]
impl Admission {
    /// The message bytes this admission stands for.
    pub fn len(self) -> usize {
        match self {
            Admission::Small(n) | Admission::Large(n) => n,
        }
    }

    /// An empty message (nothing to account).
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }
}

/// Pending message bytes against a cap. See the module docs.
#[derive(Debug, Clone)]
pub struct Budget {
    max: usize,
    small: usize,
    /// The large slot's bytes; 0 when free (a large message is at least
    /// `max`, which is at least 1): 8 bytes, not an `Option`'s 16.
    large: usize,
}

impl Budget {
    /// A budget of `max` bytes (at least 1).
    pub fn new(max: usize) -> Self {
        Budget {
            max: max.max(1),
            small: 0,
            large: 0,
        }
    }

    /// The cap.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn max(&self) -> usize {
        self.max
    }

    /// Bytes admitted and not released, the large slot included.
    pub fn pending(&self) -> usize {
        self.small + self.large
    }

    /// Room for a message of `len` bytes now, or `None`.
    pub fn try_admit(&mut self, len: usize) -> Option<Admission> {
        if len >= self.max {
            if self.large != 0 {
                return None;
            }
            self.large = len;
            return Some(Admission::Large(len));
        }
        if self.small + len > self.max {
            return None;
        }
        self.small += len;
        Some(Admission::Small(len))
    }

    /// Give back what `a` admitted.
    pub fn release(&mut self, a: Admission) {
        match a {
            Admission::Small(n) => self.small = self.small.saturating_sub(n),
            Admission::Large(_) => self.large = 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_messages_fill_the_cap_and_release_makes_room() {
        let mut b = Budget::new(1000);
        let a = b.try_admit(600).unwrap();
        assert_eq!(b.try_admit(401), None);
        let c = b.try_admit(400).unwrap();
        assert_eq!((b.pending(), b.try_admit(1)), (1000, None));
        b.release(a);
        assert_eq!(b.pending(), 400);
        assert!(b.try_admit(600).is_some());
        b.release(c);
        assert_eq!(b.pending(), 600);
    }

    #[test]
    fn a_message_at_the_cap_takes_the_large_slot_one_at_a_time() {
        let mut b = Budget::new(1000);
        let small = b.try_admit(900).unwrap();
        // At the cap, with small ones pending: admitted apart.
        let large = b.try_admit(1000).unwrap();
        assert_eq!(large, Admission::Large(1000));
        assert_eq!(b.pending(), 1900);
        // A second large one waits for the first.
        assert_eq!(b.try_admit(5000), None);
        // Small ones are judged on their own: 100 more fit, 101 not.
        assert_eq!(b.try_admit(101), None);
        assert!(b.try_admit(100).is_some());
        b.release(large);
        assert_eq!(b.try_admit(5000), Some(Admission::Large(5000)));
        b.release(small);
        assert_eq!(b.pending(), 5100);
    }
}
