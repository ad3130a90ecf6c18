//! `tcp://[ID@]HOST:PORT`: a secret connection (p2p-conn's handshake) over
//! TCP. The `ID@` part pins the node's ID on the signer side.

use std::net::SocketAddr;
use std::time::Duration;

use p2p_conn::NodeId;
use tokio::net::{TcpListener, TcpStream};

use super::{connecting, within, Setup};
use crate::endpoint::stream::Conn;
use crate::endpoint::{Address, AddressError, EndpointError};

/// The part after `tcp://` of `whole`.
pub(super) fn parse(whole: &str, rest: &str) -> Result<Address, AddressError> {
    let (node_id, host_port) = match rest.split_once('@') {
        Some((id, hp)) => (
            Some(
                id.parse::<NodeId>()
                    .map_err(|_| AddressError::NodeId(whole.into()))?,
            ),
            hp,
        ),
        None => (None, rest),
    };
    if host_port.is_empty() || !host_port.contains(':') {
        return Err(AddressError::Empty(whole.into()));
    }
    Ok(Address::Tcp {
        host_port: host_port.into(),
        node_id,
    })
}

/// Dial `host_port` (resolved now) and run the handshake.
pub(super) async fn dial(
    host_port: &str,
    setup: &Setup<'_>,
    connect_timeout: Duration,
) -> Result<Conn, EndpointError> {
    let tcp = connecting(connect_timeout, TcpStream::connect(host_port)).await?;
    Conn::secret(
        tcp,
        setup.identity,
        setup.expect,
        setup.handshake_timeout,
        setup.limit,
    )
    .await
}

pub(crate) struct Listener(TcpListener);

impl Listener {
    pub(super) async fn bind(host_port: &str) -> std::io::Result<Listener> {
        Ok(Listener(TcpListener::bind(host_port).await?))
    }

    pub(super) async fn accept(
        &self,
        setup: &Setup<'_>,
        accept_timeout: Duration,
    ) -> Result<Conn, EndpointError> {
        let (tcp, _) = within(accept_timeout, self.0.accept()).await?;
        Conn::secret(
            tcp,
            setup.identity,
            setup.expect,
            setup.handshake_timeout,
            setup.limit,
        )
        .await
    }

    pub(super) fn local_addr(&self) -> Option<SocketAddr> {
        self.0.local_addr().ok()
    }

    pub(super) fn address(&self) -> Address {
        Address::tcp(
            self.0
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
        )
    }
}
