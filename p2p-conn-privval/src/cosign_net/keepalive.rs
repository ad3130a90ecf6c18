//! The keepalive, sans-IO: one ping in flight at a time, its round trip,
//! and the verdict that the peer is gone. The clock is passed in.

use std::time::{Duration, Instant};

/// What the ping interval's tick asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Tick {
    /// Send a ping with this nonce.
    Ping(u64),
    /// A ping is in flight and not late yet.
    Wait,
    /// The ping in flight is later than the timeout: drop the connection.
    Dead,
}

/// One connection's keepalive.
#[derive(Debug)]
pub(crate) struct Keepalive {
    timeout: Duration,
    last_nonce: u64,
    /// The ping in flight: nonce, sent when.
    in_flight: Option<(u64, Instant)>,
}

impl Keepalive {
    /// A keepalive that gives a pong `timeout` to come.
    pub(crate) fn new(timeout: Duration) -> Keepalive {
        Keepalive {
            timeout,
            last_nonce: 0,
            in_flight: None,
        }
    }

    /// The ping interval ticked at `now`.
    pub(crate) fn tick(&mut self, now: Instant) -> Tick {
        match self.in_flight {
            Some((_, sent)) if now.saturating_duration_since(sent) > self.timeout => Tick::Dead,
            Some(_) => Tick::Wait,
            None => {
                self.last_nonce += 1;
                self.in_flight = Some((self.last_nonce, now));
                Tick::Ping(self.last_nonce)
            }
        }
    }

    /// A pong with `nonce` came at `now`: the round trip, if it answers
    /// the ping in flight (any other pong is ignored).
    pub(crate) fn pong(&mut self, nonce: u64, now: Instant) -> Option<Duration> {
        match self.in_flight {
            Some((n, sent)) if n == nonce => {
                self.in_flight = None;
                Some(now.saturating_duration_since(sent))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn one_ping_at_a_time_and_its_round_trip() {
        let t0 = Instant::now();
        let mut k = Keepalive::new(100 * MS);
        assert_eq!(k.tick(t0), Tick::Ping(1));
        assert_eq!(k.tick(t0 + 50 * MS), Tick::Wait);
        // A pong for another nonce is not the answer.
        assert_eq!(k.pong(7, t0 + 60 * MS), None);
        assert_eq!(k.pong(1, t0 + 70 * MS), Some(70 * MS));
        // Answered twice: the second is ignored.
        assert_eq!(k.pong(1, t0 + 71 * MS), None);
        assert_eq!(k.tick(t0 + 80 * MS), Tick::Ping(2));
    }

    #[test]
    fn a_late_pong_is_death() {
        let t0 = Instant::now();
        let mut k = Keepalive::new(100 * MS);
        assert_eq!(k.tick(t0), Tick::Ping(1));
        assert_eq!(k.tick(t0 + 100 * MS), Tick::Wait);
        assert_eq!(k.tick(t0 + 101 * MS), Tick::Dead);
    }
}
