//! Our requests to peers: when we may ask a peer (again), and whether a
//! `PexAddrs` we got answers one.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use p2p_conn::NodeId;

use super::{check_message, NetAddress, Violation, FREE_REQUESTS, MIN_REQUEST_INTERVAL};

/// Whether to send a `PexRequest` now.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum AskVerdict {
    /// Send it (recorded as unanswered by [`Asks::ask`]).
    Ask,
    /// A request to this peer is unanswered: CometBFT never has two out
    /// to one peer (`RequestAddrs`), and keeps waiting (no time-out) until
    /// the answer or the disconnect.
    Unanswered,
    /// The peer would stop and ban us for asking before `at`.
    TooSoon {
        /// The first instant we may ask.
        at: Instant,
    },
}

/// What to do with a `PexAddrs` a peer sent.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AddrsVerdict {
    /// It answers our request: take its addresses (each checked with
    /// [`NetAddress::validate`]).
    Accept,
    /// Stop the peer and ban it for [`Violation::ban_time`]: none of the
    /// addresses is taken.
    Stop(Violation),
}

/// What we remember of our requests to one peer.
#[derive(Clone, Copy, Debug, Default)]
struct Asked {
    /// Requests sent on this connection (saturating).
    sent: u32,
    /// One is out, unanswered.
    unanswered: bool,
    /// When the last answer came.
    answered: Option<Instant>,
}

/// Our requests to peers, by the rules a CometBFT peer enforces on them
/// (see the [module docs](super)): keyed by peer ID, one entry per peer
/// asked, dropped by [`remove`](Self::remove).
///
/// The interval is counted from the arrival of the previous answer, not
/// from our previous request: the peer counts from when it received that
/// request, which came before its answer, so the peer always sees at least
/// the interval, however long the requests take on the way.
#[derive(Clone, Debug)]
pub struct Asks {
    min_interval: Duration,
    peers: HashMap<NodeId, Asked>,
}

impl Default for Asks {
    fn default() -> Self {
        Asks::new()
    }
}

impl Asks {
    /// A tracker for peers that take a request every
    /// [`MIN_REQUEST_INTERVAL`] past [`FREE_REQUESTS`] (every CometBFT
    /// node: the interval is not configurable there).
    pub fn new() -> Asks {
        Asks::with_min_interval(MIN_REQUEST_INTERVAL)
    }

    /// A tracker for peers with another minimum interval.
    pub fn with_min_interval(min_interval: Duration) -> Asks {
        Asks {
            min_interval,
            peers: HashMap::new(),
        }
    }

    /// Whether we may send `peer` a `PexRequest` at `now` (nothing is
    /// recorded).
    pub fn may_ask(&self, peer: &NodeId, now: Instant) -> AskVerdict {
        let Some(a) = self.peers.get(peer) else {
            return AskVerdict::Ask;
        };
        if a.unanswered {
            return AskVerdict::Unanswered;
        }
        if a.sent < FREE_REQUESTS {
            return AskVerdict::Ask;
        }
        match a.answered {
            Some(t) if now < t + self.min_interval => AskVerdict::TooSoon {
                at: t + self.min_interval,
            },
            _ => AskVerdict::Ask,
        }
    }

    /// [`may_ask`](Self::may_ask), and when it says
    /// [`Ask`](AskVerdict::Ask), records the request as sent and
    /// unanswered: send it.
    pub fn ask(&mut self, peer: NodeId, now: Instant) -> AskVerdict {
        let verdict = self.may_ask(&peer, now);
        if verdict == AskVerdict::Ask {
            let a = self.peers.entry(peer).or_default();
            a.sent = a.sent.saturating_add(1);
            a.unanswered = true;
        }
        verdict
    }

    /// `peer` sent a `PexAddrs` of `addrs` at `now`: whether to take it. A
    /// message with an address CometBFT cannot read
    /// ([`AddrError::stops_peer`](super::AddrError::stops_peer)) is refused
    /// first, as CometBFT decodes before it looks for our request; then one
    /// with no request of ours unanswered is unsolicited. An accepted one
    /// answers the request.
    pub fn on_addrs(&mut self, peer: &NodeId, addrs: &[NetAddress], now: Instant) -> AddrsVerdict {
        if let Err(e) = check_message(addrs) {
            return AddrsVerdict::Stop(Violation::BadAddress(e));
        }
        match self.peers.get_mut(peer) {
            Some(a) if a.unanswered => {
                a.unanswered = false;
                a.answered = Some(now);
                AddrsVerdict::Accept
            }
            _ => AddrsVerdict::Stop(Violation::Unsolicited),
        }
    }

    /// `peer` disconnected: forget it (CometBFT's `RemovePeer` forgets both
    /// sides), so a new connection starts with the free requests again.
    pub fn remove(&mut self, peer: &NodeId) {
        self.peers.remove(peer);
    }

    /// How many peers are tracked.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// Whether no peer is tracked.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }
}
