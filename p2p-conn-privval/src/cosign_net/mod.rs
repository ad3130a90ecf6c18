//! The transport between a threshold cluster's cosigners (feature
//! `cosign-net`): secret connections pinned to the members' node IDs,
//! requests and responses carrying opaque payloads, keepalive with the
//! round trip measured, and per-peer stats. What the payloads mean (nonce
//! commitments, partial signatures, guard marks) is the threshold core's;
//! this module only carries them. `spec/cosign-net.md` is the wire
//! format and the rules.
//!
//! # Design
//! - One connection per pair of members: the lower index dials the
//!   higher, which listens. Both then say hello (cluster ID, index,
//!   protocol version). A connection is refused after the secret
//!   connection's handshake, and reported as [`NetEvent::Refused`], when
//!   the node ID it proved is not a member's ([`NetError::Stranger`]), is
//!   a member that does not dial us, or its hello names another index,
//!   cluster or version. A dialer requires the ID of the member it dials
//!   in the handshake itself.
//! - A second connection from the member we already have one with
//!   replaces the first: only the member's own key can open it, and the
//!   dialer only dials again when it believes the old one dead (it
//!   restarted, or a network cut left the old one half-open), so refusing
//!   it would lock a restarted member out until the keepalive noticed.
//!   Requests in flight on the old connection fail with
//!   [`NetError::Disconnected`].
//! - The dialer redials with exponential backoff; each connection pings
//!   every [`ClusterConfig::ping_interval`] and is dropped when a pong or a
//!   write is later than [`ClusterConfig::ping_timeout`].
//! - The envelope's codec, the pinning rule and the keepalive are
//!   sans-IO; the tasks (listener, one dialer per higher member, a reader
//!   and a writer per connection) are thin tokio code around them.
//!
//! # Limits
//! - An envelope longer than [`ClusterConfig::max_payload_bytes`] plus a
//!   small overhead is refused from its length prefix, before anything is
//!   allocated; the connection is dropped.
//! - Requests in flight to one peer: at most
//!   [`ClusterConfig::max_in_flight`]; past it [`Cluster::request`] fails
//!   at once with [`NetError::Busy`] (a signer needs an answer within its
//!   deadline, not a place in a queue).
//! - Requests from one peer not yet answered by the handler: at most
//!   `max_in_flight`; past it the peer gets a busy failure
//!   ([`NetError::PeerBusy`] on its side) without the handler seeing the
//!   request. The queue of [`Requests`] holds at most `max_in_flight` per
//!   peer, so one peer cannot crowd the others out.
//! - Envelopes waiting to be written to one peer: at most
//!   `2 × max_in_flight + 16`. A peer that leaves them there (it does not
//!   read) has its connection dropped.
//! - Connections between accept and the end of the hello: at most
//!   `2 × members + 4` at once, each bounded by
//!   [`ClusterConfig::handshake_timeout`]; past that the oldest is closed,
//!   so a member's handshake (milliseconds) gets through however many
//!   silent connections a stranger keeps open.
//!
//! # Not provided
//! - Retries: a failed request is the caller's to retry, on another
//!   member if it likes.
//! - Ordering between requests: each has its own ID and its own answer.
//! - Membership changes while running: start a new [`Cluster`].
//! - Any meaning for `kind` or the payloads.

mod incoming;
mod keepalive;
mod pinning;
mod run;
mod slot;
mod stats;
mod wire;

pub use incoming::{Incoming, Requests};
pub use run::Cluster;
pub use stats::PeerStats;

use std::fmt;
use std::time::Duration;

use p2p_conn::{Identity, NodeId};

/// The version a cosigner says in its hello; a peer saying another is
/// refused ([`NetError::Version`]).
pub const PROTOCOL_VERSION: u32 = 1;

/// One member of the cluster: its index (as the threshold scheme numbers
/// its shares), the node ID its secret connection key proves, and where
/// it listens (`HOST:PORT`, resolved at each dial).
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    index: u16,
    node_id: NodeId,
    addr: String,
}

impl Member {
    /// Member `index`, proving `node_id`, listening at `addr`.
    pub fn new(index: u16, node_id: NodeId, addr: impl Into<String>) -> Member {
        Member {
            index,
            node_id,
            addr: addr.into(),
        }
    }
}

type EventSink = std::sync::Arc<dyn Fn(&NetEvent) + Send + Sync>;

/// How a cosigner joins its cluster: who it is, who the others are, and
/// the bounds. Build with [`ClusterConfig::new`], then set what differs
/// from the defaults.
pub struct ClusterConfig {
    cluster_id: [u8; 32],
    index: u16,
    identity: Identity,
    members: Vec<Member>,
    max_in_flight: usize,
    max_payload_bytes: usize,
    ping_interval: Duration,
    ping_timeout: Duration,
    handshake_timeout: Duration,
    connect_timeout: Duration,
    retry: (Duration, Duration),
    events: Option<EventSink>,
}

impl fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("index", &self.index)
            .field("members", &self.members)
            .field("max_in_flight", &self.max_in_flight)
            .field("max_payload_bytes", &self.max_payload_bytes)
            .finish_non_exhaustive()
    }
}

impl ClusterConfig {
    /// Member `index` of the cluster `cluster_id` (the same 32 bytes at
    /// every member, say the group's public key), authenticating as
    /// `identity`; `members` lists every member, this one included, whose
    /// node ID must be `identity`'s.
    pub fn new(
        cluster_id: [u8; 32],
        index: u16,
        identity: Identity,
        members: Vec<Member>,
    ) -> ClusterConfig {
        ClusterConfig {
            cluster_id,
            index,
            identity,
            members,
            max_in_flight: 64,
            max_payload_bytes: 64 * 1024,
            ping_interval: Duration::from_secs(1),
            ping_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(3),
            retry: (Duration::from_millis(100), Duration::from_secs(5)),
            events: None,
        }
    }

    /// Requests in flight per peer, each way (default 64).
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n.max(1);
        self
    }

    /// The largest payload sent or read (default 64 KiB).
    pub fn max_payload_bytes(mut self, n: usize) -> Self {
        self.max_payload_bytes = n;
        self
    }

    /// How often each connection pings (default 1 s).
    pub fn ping_interval(mut self, t: Duration) -> Self {
        self.ping_interval = t;
        self
    }

    /// How late a pong or a write may be before the connection is dropped
    /// (default 5 s).
    pub fn ping_timeout(mut self, t: Duration) -> Self {
        self.ping_timeout = t;
        self
    }

    /// Bound on the secret connection's handshake and the hellos
    /// (default 5 s).
    pub fn handshake_timeout(mut self, t: Duration) -> Self {
        self.handshake_timeout = t;
        self
    }

    /// Bound on a TCP connect (default 3 s).
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t;
        self
    }

    /// The dialer's backoff: first wait `initial`, doubling up to `max`
    /// (default 100 ms to 5 s).
    pub fn retry(mut self, initial: Duration, max: Duration) -> Self {
        self.retry = (initial, max.max(initial));
        self
    }

    /// Call `f` for every [`NetEvent`], from the cluster's tasks: keep it
    /// short.
    pub fn on_event(mut self, f: impl Fn(&NetEvent) + Send + Sync + 'static) -> Self {
        self.events = Some(std::sync::Arc::new(f));
        self
    }
}

/// What a [`Cluster`] reports as it goes ([`ClusterConfig::on_event`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum NetEvent {
    /// A connection to member `peer` is up (hellos exchanged).
    Connected {
        /// The member.
        peer: u16,
        /// Whether we dialed it.
        dialed: bool,
    },
    /// The connection to member `peer` ended.
    Disconnected {
        /// The member.
        peer: u16,
        /// Why.
        error: NetError,
    },
    /// A connection was refused after its handshake (pinning) or failed
    /// before its hello.
    Refused {
        /// The remote address.
        addr: std::net::SocketAddr,
        /// Why.
        error: NetError,
    },
    /// A dial to member `peer` failed; the dialer waits `retry_in`.
    DialFailed {
        /// The member.
        peer: u16,
        /// Why.
        error: NetError,
        /// The wait before the next dial.
        retry_in: Duration,
    },
}

/// Everything that goes wrong in the cosigners' transport.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// The configuration does not hold together.
    #[error("cluster configuration: {0}")]
    Config(String),
    /// No member has this index (or it is our own).
    #[error("no other member has index {0}")]
    UnknownPeer(u16),
    /// No connection to the member now.
    #[error("member {0} is not connected")]
    NotConnected(u16),
    /// Our bound on requests in flight to the member was reached.
    #[error("{in_flight} requests in flight to member {peer} already")]
    Busy {
        /// The member.
        peer: u16,
        /// The bound.
        in_flight: usize,
    },
    /// The member's bound on our requests in flight was reached.
    #[error("member {0} is busy")]
    PeerBusy(u16),
    /// The member's handler answered with an error.
    #[error("member {peer} refused: {message}")]
    Refused {
        /// The member.
        peer: u16,
        /// Its handler's words.
        message: String,
    },
    /// The member's handler dropped the request unanswered.
    #[error("member {0} left the request unanswered")]
    Unanswered(u16),
    /// The deadline passed before the answer.
    #[error("no answer within the deadline")]
    Deadline,
    /// The connection ended with the request in flight.
    #[error("the connection ended before the answer")]
    Disconnected,
    /// A payload over the limit, not sent.
    #[error("a {len}-byte payload; the limit is {limit} bytes")]
    PayloadTooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// The peer announced a longer envelope than the limit; nothing was
    /// allocated for it.
    #[error("the peer announced a {len}-byte envelope; the limit is {limit} bytes")]
    TooLarge {
        /// The announced length.
        len: u64,
        /// The limit.
        limit: usize,
    },
    /// The length prefix is no valid uvarint.
    #[error("the envelope's length prefix is not a valid uvarint")]
    BadLength,
    /// The envelope is not valid protobuf, or holds nothing.
    #[error("malformed envelope: {0}")]
    Malformed(String),
    /// The peer sent something out of turn (a second hello, a request
    /// before its hello).
    #[error("protocol: {0}")]
    Protocol(String),
    /// The stream ended inside an envelope.
    #[error("the connection ended after {received} bytes of an envelope")]
    Truncated {
        /// Bytes received, prefix included.
        received: usize,
        /// The whole length, once known.
        expected: Option<usize>,
    },
    /// The connection ended between envelopes.
    #[error("the connection closed")]
    Closed,
    /// The node ID proved in the handshake is no member's.
    #[error("node {0} is not a member of the cluster")]
    Stranger(NodeId),
    /// A member's node ID with an index that is not its own, or a member
    /// that should not dial us.
    #[error("node {node_id} presented index {claimed}, which is not its own to present here")]
    WrongIndex {
        /// The ID proved.
        node_id: NodeId,
        /// The index claimed.
        claimed: u32,
    },
    /// The peer's hello names another cluster.
    #[error("node {0} belongs to another cluster")]
    WrongCluster(NodeId),
    /// The peer's hello names another protocol version.
    #[error("protocol version {0}; this cosigner speaks {PROTOCOL_VERSION}")]
    Version(u32),
    /// The peer left envelopes unread past the write queue's bound or the
    /// ping timeout.
    #[error("the peer does not read")]
    Stalled,
    /// A newer connection from the same member took this one's place.
    #[error("replaced by a newer connection from the same member")]
    Replaced,
    /// No pong within the ping timeout.
    #[error("no pong within {0:?}")]
    PingTimeout(Duration),
    /// The secret connection's handshake failed (an unexpected ID
    /// included).
    #[error("handshake: {0}")]
    Handshake(p2p_conn::Error),
    /// A step took longer than its bound.
    #[error("{0} took longer than {1:?}")]
    Timeout(&'static str, Duration),
    /// The cluster was shut down.
    #[error("the cluster is shut down")]
    Shutdown,
    /// The transport failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
