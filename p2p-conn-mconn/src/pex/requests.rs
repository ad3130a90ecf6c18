//! The requests a node takes from its peers: how often a peer may ask, and
//! what a seed does with an inbound peer's request.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use p2p_conn::NodeId;

use super::Violation;

/// How often a CometBFT node tops up its peers and may ask one of them for
/// addresses (`defaultEnsurePeersPeriod`, 30 s).
pub const ENSURE_PEERS_PERIOD: Duration = Duration::from_secs(30);

/// The least time a peer must leave between two `PexRequest`s, past the
/// free ones (`minReceiveRequestInterval`: [`ENSURE_PEERS_PERIOD`] / 3,
/// 10 s).
pub const MIN_REQUEST_INTERVAL: Duration = Duration::from_secs(10);

/// How many `PexRequest`s a peer may send on a connection before
/// [`MIN_REQUEST_INTERVAL`] applies (CometBFT's `receiveRequest`: the
/// first two pass whenever they come).
pub const FREE_REQUESTS: u32 = 2;

/// Who dialed the connection a request came on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Direction {
    /// The peer dialed us.
    Inbound,
    /// We dialed the peer.
    Outbound,
}

/// How a node takes requests.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RequestsConfig {
    /// The least time between two requests of a peer past the free ones
    /// ([`MIN_REQUEST_INTERVAL`]).
    pub min_interval: Duration,
    /// Seed mode (CometBFT's `seed_mode`): an inbound peer's first request
    /// is answered and the peer disconnected (off by default).
    pub seed_mode: bool,
}

impl Default for RequestsConfig {
    fn default() -> Self {
        RequestsConfig {
            min_interval: MIN_REQUEST_INTERVAL,
            seed_mode: false,
        }
    }
}

impl RequestsConfig {
    /// The same with this minimum interval.
    pub fn with_min_interval(mut self, min_interval: Duration) -> Self {
        self.min_interval = min_interval;
        self
    }

    /// The same in or out of seed mode.
    pub fn with_seed_mode(mut self, seed_mode: bool) -> Self {
        self.seed_mode = seed_mode;
        self
    }
}

/// What to do with a peer's `PexRequest`.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RequestVerdict {
    /// Answer with a selection of the address book (CometBFT's
    /// `GetSelection`; at most [`MAX_ANSWER_ADDRS`](super::MAX_ANSWER_ADDRS)
    /// addresses, see [`fit_answer`](super::fit_answer)).
    Answer,
    /// Seed mode, an inbound peer's first request: answer (CometBFT picks
    /// with `GetSelectionWithBias`), then flush and disconnect the peer
    /// gracefully (no ban).
    AnswerAndDisconnect,
    /// Seed mode, an inbound peer asking again: send nothing (the
    /// disconnect is under way).
    Ignore,
    /// Stop the peer and ban it for [`Violation::ban_time`].
    Stop(Violation),
}

/// What a node remembers of one peer's requests.
#[derive(Clone, Copy, Debug)]
enum Seen {
    /// `n` requests so far, all free (`n < FREE_REQUESTS`).
    Free(u32),
    /// Past the free ones: the last request that counted.
    Limited(Instant),
    /// Seed mode: answered once, disconnecting.
    AnsweredAsSeed,
}

/// The requests a node takes from its peers, by CometBFT's PEX reactor
/// (see the [module docs](super)): keyed by peer ID, one entry per peer
/// that asked, dropped by [`remove`](Self::remove).
#[derive(Clone, Debug, Default)]
pub struct Requests {
    config: RequestsConfig,
    peers: HashMap<NodeId, Seen>,
}

impl Requests {
    /// A tracker with `config`.
    pub fn new(config: RequestsConfig) -> Requests {
        Requests {
            config,
            peers: HashMap::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &RequestsConfig {
        &self.config
    }

    /// `peer` sent a `PexRequest` at `now` on a connection of `direction`:
    /// what to do (and the request is recorded).
    pub fn on_request(
        &mut self,
        peer: NodeId,
        direction: Direction,
        now: Instant,
    ) -> RequestVerdict {
        let seen = self.peers.get(&peer).copied();
        if self.config.seed_mode && direction == Direction::Inbound {
            return match seen {
                None => {
                    self.peers.insert(peer, Seen::AnsweredAsSeed);
                    RequestVerdict::AnswerAndDisconnect
                }
                Some(_) => RequestVerdict::Ignore,
            };
        }
        let next = match seen {
            None if FREE_REQUESTS > 1 => Seen::Free(1),
            Some(Seen::Free(n)) if n + 1 < FREE_REQUESTS => Seen::Free(n + 1),
            // The last free request: from here on the interval counts, from
            // this one.
            None | Some(Seen::Free(_)) => Seen::Limited(now),
            Some(Seen::Limited(last)) => {
                let since_last = now.saturating_duration_since(last);
                if since_last < self.config.min_interval {
                    return RequestVerdict::Stop(Violation::RequestTooSoon {
                        since_last,
                        min_interval: self.config.min_interval,
                    });
                }
                Seen::Limited(now)
            }
            // Only an inbound peer of a seed gets this state, and the
            // configuration does not change.
            Some(Seen::AnsweredAsSeed) => return RequestVerdict::Ignore,
        };
        self.peers.insert(peer, next);
        RequestVerdict::Answer
    }

    /// When `peer` may ask next without being stopped, if it has asked
    /// before (`None`: it may ask now, or it is not tracked).
    pub fn next_allowed(&self, peer: &NodeId) -> Option<Instant> {
        match self.peers.get(peer)? {
            Seen::Limited(last) => Some(*last + self.config.min_interval),
            _ => None,
        }
    }

    /// `peer` disconnected: forget it (CometBFT's `RemovePeer`), so a new
    /// connection starts with the free requests again.
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
