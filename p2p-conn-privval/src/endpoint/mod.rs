//! The two ends of a remote-signer connection over tokio: the signer side
//! ([`SignerEndpoint`]: dials the node, serves a [`Signer`], reconnects)
//! and the node side ([`NodeEndpoint`] and [`SignerClient`]: listens,
//! accepts a signer, sends requests, pings, times out).
//!
//! # Design
//! - One request handler for every transport: `serve::respond` turns a
//!   request into the response a CometBFT node expects (and the facts the
//!   stats and events report), calling the [`Signer`]. It is pure code;
//!   [`SignerEndpoint::serve`] is the loop around it over any
//!   `AsyncBufRead + AsyncWrite` stream, and [`SignerEndpoint::run`] the
//!   dial/reconnect loop around that.
//! - [`Address`] is what CometBFT's `priv_validator_laddr` holds:
//!   `tcp://HOST:PORT` is a secret connection (this crate's
//!   [`p2p_conn::io::tokio`]), `unix://PATH` is plaintext, as CometBFT does,
//!   and `noise://PEER_ID@IP:PORT` (feature `noise`, CometBFT v0.40) is
//!   libp2p's Noise (`p2p_conn::noise`) with stable identities on both
//!   sides: the node accepts only allowlisted signers
//!   ([`NodeEndpoint::allow_signer`]; its laddr names the first), the
//!   signer requires the node its address names.
//!   Each transport is one file of `endpoint/transport/` (parse, dial,
//!   listen, accept), ending in the one connection type both sides run
//!   over; the sides never match on the address themselves.
//! - The signer side dials with a timeout and retries with a doubling
//!   backoff, capped (default 50 ms to 500 ms, well under the 3 s a
//!   starting node waits for its signer). Its read deadline (default 10 s)
//!   is longer than the node's ping interval (3.33 s), so an idle but
//!   healthy node is never dropped; a node that restarts closes the
//!   connection, and the endpoint dials again at once.
//! - The node side matches CometBFT's `SignerListenerEndpoint` and
//!   `SignerClient`: one request at a time, each write and read bounded
//!   (default 5 s), a new signer accepted when there is none (waiting at
//!   most the accept timeout, default 3 s), a ping after 2/3 of the read
//!   timeout without a request, and the connection dropped on any error
//!   (the next request accepts again).
//! - Stats per request kind ([`EndpointStats`]): count, errors, latency
//!   p50/p99 (a fixed-size histogram, within about 3%), and connects and
//!   disconnects. The signer side times a request from its last byte read
//!   to its response written; the node side from the request's first byte
//!   written to the response decoded (the round trip).
//!
//! # Guarantees
//! - A request the signer refuses gets CometBFT's error response (a
//!   `RemoteSignerError` with the reason), never a signature; the signer
//!   keeps serving. So does a message that is well framed but not a
//!   request (an unknown oneof field, a response, bad protobuf): it gets no
//!   response, as CometBFT's own signer does, and is counted as an error.
//! - A frame that breaks the stream (a length over the limit, a bad
//!   varint, a truncated message, a secret-connection error) drops the
//!   connection; the signer side dials again.
//! - Nothing is read beyond one message's length limit
//!   ([`crate::MAX_MESSAGE_BYTES`] unless configured), and nothing
//!   is allocated for a message before its length is checked.
//!
//! # Not provided
//! - A blocking (std) adapter. [`Signer`] methods run on the endpoint's
//!   task: a signer that blocks for long (an HSM, `fsync`) delays only
//!   this connection, but on a current-thread runtime it delays the whole
//!   runtime; use a multi-thread runtime or a dedicated thread there.
//! - More than one connection per endpoint. A signer for several nodes
//!   runs one [`SignerEndpoint`] per node, each with a clone of one
//!   [`SharedSigner`](crate::SharedSigner).
//! - Retries of a failed sign request: CometBFT's consensus retries.

pub(crate) mod latency;
mod node;
mod serve;
mod signer;
mod stats;
mod stream;
mod transport;

pub use node::{NodeEndpoint, SignerClient};
pub use signer::{SignerEndpoint, SignerEvent};
pub use stats::{EndpointStats, KindStats, StatsHandle};

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

#[cfg(doc)]
use super::Signer;
use super::{PrivvalError, RemoteSignerError};

/// The node's default read and write timeout (CometBFT's
/// `defaultTimeoutReadWriteSeconds`, 5 s at every tested line).
pub const NODE_READ_WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a node waits for its signer to connect (CometBFT's
/// `defaultTimeoutAcceptSeconds`, 3 s).
pub const NODE_ACCEPT_TIMEOUT: Duration = Duration::from_secs(3);

/// Where the node listens for its signer, as `priv_validator_laddr` writes
/// it: `tcp://HOST:PORT` (a secret connection), `unix://PATH` (plaintext)
/// or `noise://PEER_ID@IP:PORT` (libp2p's Noise, CometBFT v0.40). A
/// `tcp://` address may carry a node ID, `tcp://ID@HOST:PORT`, which the
/// signer side then requires of the node ([`SignerEndpoint::expect_node`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Address {
    /// `tcp://HOST:PORT`: a secret connection.
    Tcp {
        /// `HOST:PORT`, resolved at each dial.
        host_port: String,
        /// The `ID@` part, if given.
        node_id: Option<p2p_conn::NodeId>,
    },
    /// `unix://PATH`: a plaintext Unix socket.
    Unix(PathBuf),
    /// `noise://PEER_ID@IP:PORT`: libp2p's Noise over TCP (feature
    /// `noise`). `peer` is the other side's identity: in a node's laddr,
    /// the one signer it accepts; in a signer's address, the node it
    /// requires. The host is an IP literal and the port is required, as
    /// CometBFT's `ParseNoiseAddr` has it.
    Noise {
        /// The other side's libp2p peer ID.
        peer: p2p_conn::PeerId,
        /// Where the node listens.
        addr: std::net::SocketAddr,
    },
}

impl Address {
    /// `tcp://HOST:PORT`.
    pub fn tcp(host_port: impl Into<String>) -> Address {
        Address::Tcp {
            host_port: host_port.into(),
            node_id: None,
        }
    }

    /// `unix://PATH`.
    pub fn unix(path: impl Into<PathBuf>) -> Address {
        Address::Unix(path.into())
    }

    /// `noise://PEER_ID@IP:PORT`.
    pub fn noise(peer: p2p_conn::PeerId, addr: std::net::SocketAddr) -> Address {
        Address::Noise { peer, addr }
    }
}

/// Why an [`Address`] did not parse.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AddressError {
    /// Not `tcp://`, `unix://` or `noise://`.
    #[error("{0:?}: a signer address is tcp://HOST:PORT, unix://PATH or noise://PEER_ID@IP:PORT")]
    Scheme(String),
    /// `tcp://` without `HOST:PORT`, or `unix://` without a path.
    #[error("{0:?}: missing host:port or path")]
    Empty(String),
    /// The `ID@` part is not a node ID.
    #[error("{0:?}: the part before @ is not a node ID")]
    NodeId(String),
    /// A `noise://` address without a libp2p peer ID before its last `@`.
    #[error(
        "{0:?}: a noise address is noise://PEER_ID@IP:PORT, PEER_ID a libp2p peer ID (12D3KooW...)"
    )]
    NoisePeer(String),
    /// A `noise://` address whose host is not an IP literal with a port
    /// (CometBFT refuses DNS names there).
    #[error(
        "{0:?}: the host of a noise address is an IP literal with a port (IP:PORT or [IPv6]:PORT)"
    )]
    NoiseHost(String),
    /// A `noise://` address in a build without the feature `noise`.
    #[error("{0:?}: noise:// needs p2p-conn-privval's feature `noise`")]
    NoNoise(String),
}

impl FromStr for Address {
    type Err = AddressError;
    fn from_str(s: &str) -> Result<Address, AddressError> {
        transport::parse(s)
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        transport::display(self, f)
    }
}

/// The requests a node sends.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum RequestKind {
    /// `PubKeyRequest`.
    PubKey,
    /// `SignVoteRequest`.
    SignVote,
    /// `SignProposalRequest`.
    SignProposal,
    /// `SignBytesRequest` (v1.0.1).
    SignBytes,
    /// `PingRequest`.
    Ping,
    /// A well-framed message that is not a request (a response, an unknown
    /// oneof field, bad protobuf): not answered.
    Other,
}

impl RequestKind {
    /// Every kind, in the order [`EndpointStats::kinds`] lists them.
    pub const ALL: [RequestKind; 6] = [
        RequestKind::PubKey,
        RequestKind::SignVote,
        RequestKind::SignProposal,
        RequestKind::SignBytes,
        RequestKind::Ping,
        RequestKind::Other,
    ];

    /// A short name: `pubkey`, `vote`, `proposal`, `bytes`, `ping`, `other`.
    pub fn name(self) -> &'static str {
        match self {
            RequestKind::PubKey => "pubkey",
            RequestKind::SignVote => "vote",
            RequestKind::SignProposal => "proposal",
            RequestKind::SignBytes => "bytes",
            RequestKind::Ping => "ping",
            RequestKind::Other => "other",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// The kind of request a message holding `sum` is
    /// ([`RequestKind::Other`] for anything that is not a request).
    pub(crate) fn of(sum: Option<&super::message::Sum>) -> RequestKind {
        use super::message::Sum;
        match sum {
            Some(Sum::PubKeyRequest(_)) => RequestKind::PubKey,
            Some(Sum::SignVoteRequest(_)) => RequestKind::SignVote,
            Some(Sum::SignProposalRequest(_)) => RequestKind::SignProposal,
            Some(Sum::SignBytesRequest(_)) => RequestKind::SignBytes,
            Some(Sum::PingRequest(_)) => RequestKind::Ping,
            _ => RequestKind::Other,
        }
    }
}

impl fmt::Display for RequestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Errors of the endpoints.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// The signer answered with an error (it refused or failed).
    #[error("the signer returned error {}: {}", .0.code, .0.description)]
    Remote(RemoteSignerError),
    /// No signer connected within the accept timeout.
    #[error("no signer connected within {0:?}")]
    NoSigner(Duration),
    /// A read or write took longer than its timeout; the connection was
    /// dropped.
    #[error("{what} timed out after {after:?}")]
    Timeout {
        /// `"read"`, `"write"` or `"connect"`.
        what: &'static str,
        /// The timeout.
        after: Duration,
    },
    /// The secret-connection handshake (or the node ID check) failed.
    #[error("handshake: {0}")]
    Handshake(#[source] p2p_conn::Error),
    /// The Noise handshake (or the peer ID check) failed (`noise://`).
    #[cfg(feature = "noise")]
    #[error("noise handshake: {0}")]
    Noise(#[source] p2p_conn::noise::NoiseError),
    /// A signer proved an identity the node does not allow (`noise://`);
    /// the connection was closed after the handshake.
    #[error("signer peer {0} is not allowlisted")]
    NotAllowed(p2p_conn::PeerId),
    /// The peer's stream broke the privval framing, or the transport
    /// failed.
    #[error("{0}")]
    Privval(#[from] PrivvalError),
    /// The peer answered with a message of the wrong kind.
    #[error("expected a {expected} response, got {got}")]
    UnexpectedResponse {
        /// The response the request calls for.
        expected: &'static str,
        /// What came.
        got: String,
    },
    /// Connecting or listening failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The endpoint's configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
}

impl EndpointError {
    fn timeout(what: &'static str, after: Duration) -> EndpointError {
        EndpointError::Timeout { what, after }
    }
}
