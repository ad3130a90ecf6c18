//! The node side: listen for the signer, send it requests, ping it.

use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::serve::sum_name;
use super::stream::Conn;
use super::transport::{Listener, Setup};
use super::{Address, EndpointError, RequestKind, StatsHandle};
use crate::message::Sum;
use crate::{
    crypto_public_key, CryptoPublicKey, Message, PingRequest, Proposal, PubKeyRequest,
    SignBytesRequest, SignProposalRequest, SignVoteRequest, Vote, MAX_MESSAGE_BYTES,
};
use p2p_conn::{Identity, NodeId, PeerId};

/// Where a node listens for its signer (`priv_validator_laddr`), with the
/// timeouts a [`SignerClient`] uses. Build one with
/// [`NodeEndpoint::bind`], then hand it to [`SignerClient::new`].
pub struct NodeEndpoint {
    listener: Listener,
    identity: Identity,
    expect_signer: Option<NodeId>,
    allowed: Vec<PeerId>,
    accept_timeout: Duration,
    read_timeout: Duration,
    write_timeout: Duration,
    ping_interval: Option<Duration>,
    max_message_bytes: usize,
}

impl fmt::Debug for NodeEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeEndpoint")
            .field("local_addr", &self.local_addr())
            .field("identity", &self.identity.node_id())
            .field("expect_signer", &self.expect_signer)
            .field("allowed", &self.allowed)
            .field("accept_timeout", &self.accept_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("write_timeout", &self.write_timeout)
            .field("ping_interval", &self.ping_interval_or_default())
            .finish_non_exhaustive()
    }
}

impl NodeEndpoint {
    /// Listen at `address` (`tcp://HOST:PORT`, port 0 for any;
    /// `unix://PATH`, which must not exist yet; or `noise://PEER_ID@IP:PORT`,
    /// accepting only the signer `PEER_ID`). Over `tcp://` and `noise://`
    /// the node authenticates as `identity` (over `tcp://` CometBFT gives its
    /// privval listener a fresh key at each start, and a stable one lets a
    /// signer pin it; over `noise://` it is the node's `node_key.json`).
    pub async fn bind(
        address: &Address,
        identity: Identity,
    ) -> Result<NodeEndpoint, EndpointError> {
        let listener = Listener::bind(address).await?;
        let allowed = match address {
            Address::Noise { peer, .. } => vec![*peer],
            _ => Vec::new(),
        };
        Ok(NodeEndpoint {
            listener,
            identity,
            expect_signer: None,
            allowed,
            accept_timeout: super::NODE_ACCEPT_TIMEOUT,
            read_timeout: super::NODE_READ_WRITE_TIMEOUT,
            write_timeout: super::NODE_READ_WRITE_TIMEOUT,
            ping_interval: None,
            max_message_bytes: MAX_MESSAGE_BYTES,
        })
    }

    /// The bound TCP address (`None` for a Unix socket).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr()
    }

    /// The address to give the signer: `tcp://IP:PORT`, `unix://PATH`, or
    /// `noise://NODE_PEER_ID@IP:PORT` (this node's peer ID, which the
    /// signer requires).
    pub fn address(&self) -> Address {
        self.listener.address(&self.identity)
    }

    /// Accept the signer `peer` too, over `noise://` (the laddr's peer is
    /// accepted from the start): for a signer that moves to a new identity
    /// without a node restart, or a standby. Others are closed after the
    /// handshake ([`EndpointError::NotAllowed`]).
    pub fn allow_signer(mut self, peer: PeerId) -> Self {
        if !self.allowed.contains(&peer) {
            self.allowed.push(peer);
        }
        self
    }

    /// Accept only a signer that authenticates as `id` (`tcp://` only).
    pub fn expect_signer(mut self, id: NodeId) -> Self {
        self.expect_signer = Some(id);
        self
    }

    /// How long a request waits for a signer to connect. Default 3 s.
    pub fn accept_timeout(mut self, t: Duration) -> Self {
        self.accept_timeout = t;
        self
    }

    /// Bound on reading each response (and on the handshake). Default 5 s.
    pub fn read_timeout(mut self, t: Duration) -> Self {
        self.read_timeout = t;
        self
    }

    /// Bound on writing each request. Default 5 s.
    pub fn write_timeout(mut self, t: Duration) -> Self {
        self.write_timeout = t;
        self
    }

    /// Ping the signer after this long without a request. Default 2/3 of
    /// the read timeout (3.33 s), as CometBFT.
    pub fn ping_interval(mut self, t: Duration) -> Self {
        self.ping_interval = Some(t);
        self
    }

    /// The largest response body accepted. Default [`MAX_MESSAGE_BYTES`].
    pub fn max_message_bytes(mut self, n: usize) -> Self {
        self.max_message_bytes = n;
        self
    }

    fn ping_interval_or_default(&self) -> Duration {
        self.ping_interval.unwrap_or(self.read_timeout * 2 / 3)
    }

    async fn accept(&self) -> Result<Conn, EndpointError> {
        let setup = Setup {
            identity: &self.identity,
            expect: self.expect_signer,
            allowed: &self.allowed,
            handshake_timeout: self.read_timeout,
            limit: self.max_message_bytes,
        };
        self.listener.accept(&setup, self.accept_timeout).await
    }
}

struct State {
    endpoint: NodeEndpoint,
    conn: Option<Conn>,
    last_request: Instant,
}

struct Shared {
    state: tokio::sync::Mutex<State>,
    stats: StatsHandle,
    ping_interval: Duration,
}

/// A node's client of its remote signer, as CometBFT's `SignerClient`
/// over a `SignerListenerEndpoint` (module docs): one request at a time
/// (callers queue on a lock), a signer accepted whenever there is none,
/// the connection dropped on any error, pings while idle. Clone it freely;
/// the ping task ends when the last clone is dropped.
#[derive(Clone)]
pub struct SignerClient {
    shared: Arc<Shared>,
}

impl fmt::Debug for SignerClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignerClient")
            .field("ping_interval", &self.shared.ping_interval)
            .field("stats", &self.shared.stats)
            .finish_non_exhaustive()
    }
}

impl SignerClient {
    /// A client over `endpoint`. Spawns its ping task, so it must be
    /// called inside a tokio runtime.
    pub fn new(endpoint: NodeEndpoint) -> SignerClient {
        let ping_interval = endpoint.ping_interval_or_default();
        let shared = Arc::new(Shared {
            state: tokio::sync::Mutex::new(State {
                endpoint,
                conn: None,
                last_request: Instant::now(),
            }),
            stats: StatsHandle::default(),
            ping_interval,
        });
        if !ping_interval.is_zero() {
            tokio::spawn(ping_loop(Arc::downgrade(&shared), ping_interval));
        }
        SignerClient { shared }
    }

    /// A handle on this client's stats (latency: the round trip, from the
    /// request's write to the response decoded).
    pub fn stats(&self) -> StatsHandle {
        self.shared.stats.clone()
    }

    /// Whether a signer is connected now.
    pub async fn is_connected(&self) -> bool {
        self.shared.state.lock().await.conn.is_some()
    }

    /// Wait up to the accept timeout for a signer, if none is connected.
    pub async fn wait_for_signer(&self) -> Result<(), EndpointError> {
        let mut st = self.shared.state.lock().await;
        self.ensure(&mut st).await
    }

    async fn ensure(&self, st: &mut State) -> Result<(), EndpointError> {
        if st.conn.is_none() {
            let conn = st.endpoint.accept().await?;
            self.shared.stats.connected();
            st.conn = Some(conn);
        }
        Ok(())
    }

    async fn call<T>(
        &self,
        kind: RequestKind,
        msg: Message,
        extract: impl FnOnce(Message) -> Result<T, EndpointError>,
    ) -> Result<T, EndpointError> {
        let mut st = self.shared.state.lock().await;
        self.ensure(&mut st).await?;
        let started = Instant::now();
        let (read_t, write_t) = (st.endpoint.read_timeout, st.endpoint.write_timeout);
        let conn = st.conn.as_mut().expect("ensured above");
        let reply = async {
            conn.write(&msg, write_t).await?;
            Ok::<_, EndpointError>(conn.read(read_t).await??)
        }
        .await;
        st.last_request = Instant::now();
        if reply.is_err() {
            st.conn = None;
            self.shared.stats.disconnected();
        }
        let r = reply.and_then(extract);
        self.shared
            .stats
            .request(kind, started.elapsed(), r.is_err());
        r
    }

    /// The signer's public key for `chain_id`. Either wire form is read:
    /// `pub_key` (up to v0.40.0) or `pub_key_bytes` and `pub_key_type`
    /// (v1.0.1).
    pub async fn public_key(&self, chain_id: &str) -> Result<CryptoPublicKey, EndpointError> {
        let req = PubKeyRequest {
            chain_id: chain_id.into(),
        };
        self.call(
            RequestKind::PubKey,
            Sum::PubKeyRequest(req).into(),
            |m| match m.sum {
                Some(Sum::PubKeyResponse(r)) => {
                    if let Some(e) = r.error {
                        return Err(EndpointError::Remote(e));
                    }
                    if let Some(pk) = r.pub_key.filter(|pk| pk.sum.is_some()) {
                        return Ok(pk);
                    }
                    match r.pub_key_type.as_str() {
                        "ed25519" | "tendermint/PubKeyEd25519" => Ok(CryptoPublicKey {
                            sum: Some(crypto_public_key::Key::Ed25519(r.pub_key_bytes)),
                        }),
                        "secp256k1" | "tendermint/PubKeySecp256k1" => Ok(CryptoPublicKey {
                            sum: Some(crypto_public_key::Key::Secp256k1(r.pub_key_bytes)),
                        }),
                        other => Err(EndpointError::UnexpectedResponse {
                            expected: "PubKeyResponse with a key",
                            got: format!("PubKeyResponse with key type {other:?}"),
                        }),
                    }
                }
                other => Err(unexpected("PubKeyResponse", other)),
            },
        )
        .await
    }

    /// Have the signer sign `vote`; returns it signed (the signer may have
    /// replaced the timestamp with the one it signed before).
    /// `skip_extension_signing` is v1.0.1's flag.
    pub async fn sign_vote(
        &self,
        chain_id: &str,
        vote: Vote,
        skip_extension_signing: bool,
    ) -> Result<Vote, EndpointError> {
        let req = SignVoteRequest {
            vote: Some(vote),
            chain_id: chain_id.into(),
            skip_extension_signing,
        };
        self.call(
            RequestKind::SignVote,
            Sum::SignVoteRequest(req).into(),
            |m| match m.sum {
                Some(Sum::SignedVoteResponse(r)) => match r.error {
                    Some(e) => Err(EndpointError::Remote(e)),
                    None => Ok(r.vote),
                },
                other => Err(unexpected("SignedVoteResponse", other)),
            },
        )
        .await
    }

    /// Have the signer sign `proposal`.
    pub async fn sign_proposal(
        &self,
        chain_id: &str,
        proposal: Proposal,
    ) -> Result<Proposal, EndpointError> {
        let req = SignProposalRequest {
            proposal: Some(proposal),
            chain_id: chain_id.into(),
        };
        self.call(
            RequestKind::SignProposal,
            Sum::SignProposalRequest(req).into(),
            |m| match m.sum {
                Some(Sum::SignedProposalResponse(r)) => match r.error {
                    Some(e) => Err(EndpointError::Remote(e)),
                    None => Ok(r.proposal),
                },
                other => Err(unexpected("SignedProposalResponse", other)),
            },
        )
        .await
    }

    /// Have the signer sign raw bytes (v1.0.1's `SignBytesRequest`).
    pub async fn sign_bytes(&self, bytes: &[u8]) -> Result<Vec<u8>, EndpointError> {
        let req = SignBytesRequest {
            value: bytes.to_vec(),
        };
        self.call(
            RequestKind::SignBytes,
            Sum::SignBytesRequest(req).into(),
            |m| match m.sum {
                Some(Sum::SignBytesResponse(r)) => match r.error {
                    Some(e) => Err(EndpointError::Remote(e)),
                    None => Ok(r.signature),
                },
                other => Err(unexpected("SignBytesResponse", other)),
            },
        )
        .await
    }

    /// Ping the signer (accepting one first if none is connected).
    pub async fn ping(&self) -> Result<(), EndpointError> {
        let req = Sum::PingRequest(PingRequest::default()).into();
        self.call(RequestKind::Ping, req, |m| match m.sum {
            Some(Sum::PingResponse(_)) => Ok(()),
            other => Err(unexpected("PingResponse", other)),
        })
        .await
    }
}

fn unexpected(expected: &'static str, got: Option<Sum>) -> EndpointError {
    EndpointError::UnexpectedResponse {
        expected,
        got: got.as_ref().map_or("an empty message", sum_name).into(),
    }
}

/// Pings after `interval` without a request, as CometBFT's `pingLoop`;
/// a failed ping has already dropped the connection, and the next request
/// (or ping) accepts a new one.
async fn ping_loop(shared: Weak<Shared>, interval: Duration) {
    let mut wait = interval;
    loop {
        tokio::time::sleep(wait).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let idle = shared.state.lock().await.last_request.elapsed();
        if idle >= interval {
            let client = SignerClient { shared };
            let _ = client.ping().await;
            wait = interval;
        } else {
            wait = interval - idle;
        }
    }
}
