//! The transports a signer and its node meet over, one file each: `tcp`
//! (a secret connection), `unix` (plaintext) and `noise` (libp2p's Noise,
//! CometBFT v0.40). Each parses its part of
//! an [`Address`], dials (the signer side), and listens and accepts (the
//! node side), and every one ends in the one [`Conn`] both sides serve
//! and request over. This module is the only place that matches on the
//! address: a new transport is a file here and its arms below; the
//! signer and node sides do not change.

#[cfg(feature = "noise")]
mod noise;
mod tcp;
mod unix;

use std::net::SocketAddr;
use std::time::Duration;

use p2p_conn::{Identity, NodeId, PeerId};

use super::stream::Conn;
use super::{Address, AddressError, EndpointError};

/// What a connection needs besides its address: our identity, the peer we
/// pin (if any), and the bounds.
pub(crate) struct Setup<'a> {
    /// Our key for authenticated transports (`tcp://`, `noise://`).
    pub identity: &'a Identity,
    /// The peer's node ID we require over `tcp://`.
    pub expect: Option<NodeId>,
    /// The signers a node accepts over `noise://` (the signer side
    /// requires the peer its address names).
    #[cfg_attr(not(feature = "noise"), allow(dead_code))]
    pub allowed: &'a [PeerId],
    /// Bound on the transport's own handshake.
    pub handshake_timeout: Duration,
    /// The largest message body read.
    pub limit: usize,
}

/// Parse `priv_validator_laddr`: each scheme parses its own rest.
pub(crate) fn parse(s: &str) -> Result<Address, AddressError> {
    if let Some(rest) = s.strip_prefix("tcp://") {
        tcp::parse(s, rest)
    } else if let Some(rest) = s.strip_prefix("unix://") {
        unix::parse(s, rest)
    } else if let Some(rest) = s.strip_prefix("noise://") {
        #[cfg(feature = "noise")]
        return noise::parse(s, rest);
        #[cfg(not(feature = "noise"))]
        return {
            let _ = rest;
            Err(AddressError::NoNoise(s.into()))
        };
    } else {
        Err(AddressError::Scheme(s.into()))
    }
}

/// `priv_validator_laddr` as CometBFT writes it.
pub(crate) fn display(address: &Address, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    match address {
        Address::Tcp {
            host_port,
            node_id: Some(id),
        } => write!(f, "tcp://{id}@{host_port}"),
        Address::Tcp { host_port, .. } => write!(f, "tcp://{host_port}"),
        Address::Unix(p) => write!(f, "unix://{}", p.display()),
        Address::Noise { peer, addr } => write!(f, "noise://{peer}@{addr}"),
    }
}

/// The node ID an address pins, if its transport authenticates and it
/// names one.
pub(crate) fn pinned(address: &Address) -> Option<NodeId> {
    match address {
        Address::Tcp { node_id, .. } => *node_id,
        Address::Unix(_) | Address::Noise { .. } => None,
    }
}

/// Dial the node at `address` within `connect_timeout`, then set the
/// connection up (the transport's handshake, if any).
pub(crate) async fn dial(
    address: &Address,
    setup: &Setup<'_>,
    connect_timeout: Duration,
) -> Result<Conn, EndpointError> {
    match address {
        Address::Tcp { host_port, .. } => tcp::dial(host_port, setup, connect_timeout).await,
        Address::Unix(path) => unix::dial(path, setup, connect_timeout).await,
        #[cfg(feature = "noise")]
        Address::Noise { peer, addr } => noise::dial(*addr, *peer, setup, connect_timeout).await,
        #[cfg(not(feature = "noise"))]
        Address::Noise { .. } => Err(no_noise()),
    }
}

/// A node's listener, on whichever transport its address names.
pub(crate) enum Listener {
    Tcp(tcp::Listener),
    Unix(unix::Listener),
    #[cfg(feature = "noise")]
    Noise(noise::Listener),
}

/// A `noise://` address in a build without the feature.
#[cfg(not(feature = "noise"))]
fn no_noise() -> EndpointError {
    EndpointError::Config("noise:// needs p2p-conn-privval's feature `noise`".into())
}

impl Listener {
    /// Listen at `address`.
    pub async fn bind(address: &Address) -> Result<Listener, EndpointError> {
        Ok(match address {
            Address::Tcp { host_port, .. } => Listener::Tcp(tcp::Listener::bind(host_port).await?),
            Address::Unix(path) => Listener::Unix(unix::Listener::bind(path)?),
            #[cfg(feature = "noise")]
            Address::Noise { addr, .. } => Listener::Noise(noise::Listener::bind(*addr).await?),
            #[cfg(not(feature = "noise"))]
            Address::Noise { .. } => return Err(no_noise()),
        })
    }

    /// Accept one signer within `accept_timeout` ([`EndpointError::NoSigner`]
    /// otherwise) and set its connection up.
    pub async fn accept(
        &self,
        setup: &Setup<'_>,
        accept_timeout: Duration,
    ) -> Result<Conn, EndpointError> {
        match self {
            Listener::Tcp(l) => l.accept(setup, accept_timeout).await,
            Listener::Unix(l) => l.accept(setup, accept_timeout).await,
            #[cfg(feature = "noise")]
            Listener::Noise(l) => l.accept(setup, accept_timeout).await,
        }
    }

    /// The bound socket address, on transports that have one.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr(),
            Listener::Unix(_) => None,
            #[cfg(feature = "noise")]
            Listener::Noise(l) => l.local_addr(),
        }
    }

    /// The address a signer dials to reach this listener, whose node
    /// identity is `node`.
    pub fn address(&self, node: &Identity) -> Address {
        let _ = node;
        match self {
            Listener::Tcp(l) => l.address(),
            Listener::Unix(l) => l.address(),
            #[cfg(feature = "noise")]
            Listener::Noise(l) => l.address(node.public_key().peer_id()),
        }
    }
}

/// `accept` bounded by `t`: past it, no signer came.
async fn within<T>(
    t: Duration,
    accept: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, EndpointError> {
    match tokio::time::timeout(t, accept).await {
        Err(_) => Err(EndpointError::NoSigner(t)),
        Ok(r) => Ok(r?),
    }
}

/// `connect` bounded by `t`.
async fn connecting<T>(
    t: Duration,
    connect: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, EndpointError> {
    tokio::time::timeout(t, connect)
        .await
        .map_err(|_| EndpointError::timeout("connect", t))?
        .map_err(EndpointError::from)
}
