//! `noise://PEER_ID@IP:PORT`: libp2p's Noise over TCP, CometBFT v0.40's
//! (`privval/noise_listener.go`). Both sides have stable libp2p
//! identities: the node's laddr names the signer's peer ID (the one it
//! accepts), the signer's `--node` names the node's (the one it requires).
//! The host is an IP literal and the port is required, as
//! `ParseNoiseAddr` has it.

use std::net::SocketAddr;
use std::time::Duration;

use p2p_conn::noise::{self, Role};
use p2p_conn::PeerId;
use tokio::net::{TcpListener, TcpStream};

use super::{connecting, within, Setup};
use crate::endpoint::stream::Conn;
use crate::endpoint::{Address, AddressError, EndpointError};

/// The part after `noise://` of `whole`: split at the last `@`, as Go does.
pub(super) fn parse(whole: &str, rest: &str) -> Result<Address, AddressError> {
    let (peer, host_port) = rest
        .rsplit_once('@')
        .ok_or_else(|| AddressError::NoisePeer(whole.into()))?;
    let peer = peer
        .parse::<PeerId>()
        .map_err(|_| AddressError::NoisePeer(whole.into()))?;
    let addr = host_port
        .parse::<SocketAddr>()
        .map_err(|_| AddressError::NoiseHost(whole.into()))?;
    Ok(Address::Noise { peer, addr })
}

/// Dial `addr` and run the handshake as initiator, requiring `peer`.
pub(super) async fn dial(
    addr: SocketAddr,
    peer: PeerId,
    setup: &Setup<'_>,
    connect_timeout: Duration,
) -> Result<Conn, EndpointError> {
    let tcp = connecting(connect_timeout, TcpStream::connect(addr)).await?;
    secure(tcp, Role::Initiator, Some(peer), setup).await
}

/// Run the handshake over `tcp` as `role` (requiring `expect`, if given):
/// the connection both sides serve over.
async fn secure(
    tcp: TcpStream,
    role: Role,
    expect: Option<PeerId>,
    setup: &Setup<'_>,
) -> Result<Conn, EndpointError> {
    let _ = tcp.set_nodelay(true);
    let stream = noise::handshake(tcp, role, setup.identity, expect, setup.handshake_timeout)
        .await
        .map_err(EndpointError::Noise)?;
    let remote = stream.remote_peer();
    Ok(Conn::new(Box::new(stream), setup.limit, None).with_libp2p(remote))
}

pub(crate) struct Listener(TcpListener);

impl Listener {
    pub(super) async fn bind(addr: SocketAddr) -> std::io::Result<Listener> {
        Ok(Listener(TcpListener::bind(addr).await?))
    }

    /// Accept one connection and run the handshake as responder. A signer
    /// not on `setup.allowed` is dropped after the handshake, as CometBFT's
    /// `NoiseListener` drops it.
    pub(super) async fn accept(
        &self,
        setup: &Setup<'_>,
        accept_timeout: Duration,
    ) -> Result<Conn, EndpointError> {
        let (tcp, _) = within(accept_timeout, self.0.accept()).await?;
        let conn = secure(tcp, Role::Responder, None, setup).await?;
        match conn.libp2p {
            Some(remote) if !setup.allowed.contains(&remote) => {
                Err(EndpointError::NotAllowed(remote))
            }
            _ => Ok(conn),
        }
    }

    pub(super) fn local_addr(&self) -> Option<SocketAddr> {
        self.0.local_addr().ok()
    }

    /// What a signer dials: this node's peer ID at the bound address.
    pub(super) fn address(&self, node: PeerId) -> Address {
        Address::Noise {
            peer: node,
            addr: self
                .0
                .local_addr()
                .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0))),
        }
    }
}
