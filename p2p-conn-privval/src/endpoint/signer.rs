//! The signer side: dial the node, serve a [`Signer`], reconnect.

use std::convert::Infallible;
use std::fmt;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufRead, AsyncWrite};

use super::serve::{respond, Outcome};
use super::stream::Conn;
use super::transport::{self, Setup};
use super::{Address, EndpointError, RequestKind, StatsHandle};
use crate::{Signer, MAX_MESSAGE_BYTES};
use p2p_conn::{Identity, NodeId, PeerId};

/// What a [`SignerEndpoint`] reports as it goes ([`SignerEndpoint::on_event`]).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum SignerEvent {
    /// Dialing the node (attempt 1 is the first since the last connection).
    Connecting {
        /// Attempts since the last connection, this one included.
        attempt: u32,
    },
    /// A dial or handshake failed; the next attempt follows after `retry_in`.
    ConnectFailed {
        /// Attempts since the last connection.
        attempt: u32,
        /// Why.
        error: String,
        /// The backoff before the next attempt.
        retry_in: Duration,
    },
    /// Connected (handshake done over `tcp://` and `noise://`).
    Connected {
        /// The node's ID (over `tcp://`).
        node: Option<NodeId>,
        /// The node's libp2p peer ID (over `noise://`).
        peer: Option<PeerId>,
    },
    /// The connection ended; the endpoint dials again.
    Disconnected {
        /// Why.
        reason: String,
    },
    /// A request was served (or refused: `error` says why).
    Served {
        /// The request.
        kind: RequestKind,
        /// The height, round and type it names (0 for requests without).
        height: i64,
        /// The round.
        round: i32,
        /// The `SignedMsgType` (1 prevote, 2 precommit, 32 proposal).
        msg_type: i32,
        /// From the request's last byte read to the response written.
        latency: Duration,
        /// Why it was refused, failed or not answered.
        error: Option<String>,
    },
}

type EventSink = Box<dyn FnMut(&SignerEvent) + Send>;

/// A remote signer's connection to its node: dials `tcp://`, `unix://` or
/// `noise://`,
/// retries with a capped doubling backoff, serves requests one at a time
/// with a [`Signer`], and dials again whenever the connection ends (module
/// docs).
pub struct SignerEndpoint {
    address: Address,
    identity: Identity,
    expect_node: Option<NodeId>,
    connect_timeout: Duration,
    retry_initial: Duration,
    retry_max: Duration,
    read_timeout: Duration,
    write_timeout: Duration,
    max_message_bytes: usize,
    sign_extensions: bool,
    stats: StatsHandle,
    /// Behind a lock only so the endpoint is `Sync` (its futures `Send`)
    /// without asking the callback to be `Sync`; only `run` calls it.
    events: Option<std::sync::Mutex<EventSink>>,
}

impl fmt::Debug for SignerEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignerEndpoint")
            .field("address", &self.address)
            .field("identity", &self.identity.node_id())
            .field("expect_node", &self.expect_node)
            .field("connect_timeout", &self.connect_timeout)
            .field("retry", &(self.retry_initial, self.retry_max))
            .field("read_timeout", &self.read_timeout)
            .field("write_timeout", &self.write_timeout)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("sign_extensions", &self.sign_extensions)
            .finish_non_exhaustive()
    }
}

impl SignerEndpoint {
    /// An endpoint for the node at `address`, authenticating the
    /// connection (`tcp://`, `noise://`) as `identity`: the signer's own
    /// connection key, not the validator key. A `tcp://ID@HOST:PORT`
    /// address pins the node's ID; a `noise://PEER_ID@IP:PORT` address
    /// requires the node's libp2p peer ID, and `identity` must be the one
    /// the node's laddr names (keep it in a file).
    pub fn new(address: Address, identity: Identity) -> SignerEndpoint {
        let expect_node = transport::pinned(&address);
        SignerEndpoint {
            address,
            identity,
            expect_node,
            connect_timeout: Duration::from_secs(1),
            retry_initial: Duration::from_millis(50),
            retry_max: Duration::from_millis(500),
            read_timeout: Duration::from_secs(10),
            write_timeout: super::NODE_READ_WRITE_TIMEOUT,
            max_message_bytes: MAX_MESSAGE_BYTES,
            sign_extensions: true,
            stats: StatsHandle::default(),
            events: None,
        }
    }

    /// Require the node to authenticate as `id` (`tcp://` only).
    pub fn expect_node(mut self, id: NodeId) -> Self {
        self.expect_node = Some(id);
        self
    }

    /// Bound on each dial. Default 1 s. (The secret-connection handshake
    /// that follows gets 5 s, the node's own read/write timeout.)
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t;
        self
    }

    /// The backoff between failed dials: `initial`, doubling up to `max`.
    /// Default 50 ms to 500 ms. Keep `max` well under 3 s: a starting node
    /// exits when no signer connects within that.
    pub fn retry(mut self, initial: Duration, max: Duration) -> Self {
        self.retry_initial = initial;
        self.retry_max = max;
        self
    }

    /// How long to wait for the node's next request before dropping the
    /// connection and dialing again. Default 10 s: the node pings after
    /// 3.33 s without a request.
    pub fn read_timeout(mut self, t: Duration) -> Self {
        self.read_timeout = t;
        self
    }

    /// Bound on writing each response. Default 5 s.
    pub fn write_timeout(mut self, t: Duration) -> Self {
        self.write_timeout = t;
        self
    }

    /// The largest request body accepted. Default
    /// [`MAX_MESSAGE_BYTES`]; a v0.40.0 chain with large vote extensions
    /// needs [`MAX_MESSAGE_BYTES_V040`](crate::MAX_MESSAGE_BYTES_V040).
    pub fn max_message_bytes(mut self, n: usize) -> Self {
        self.max_message_bytes = n;
        self
    }

    /// Sign vote extensions (of non-nil precommits) unless the request
    /// says `skip_extension_signing`. Default true, as FilePV at v0.38.26
    /// and v1.0.1; v0.34.35 and v0.37.18 nodes ignore the extra signature.
    pub fn sign_extensions(mut self, on: bool) -> Self {
        self.sign_extensions = on;
        self
    }

    /// Call `f` for every [`SignerEvent`]. It runs on the endpoint's task:
    /// keep it short.
    pub fn on_event(mut self, f: impl FnMut(&SignerEvent) + Send + 'static) -> Self {
        self.events = Some(std::sync::Mutex::new(Box::new(f)));
        self
    }

    /// A handle on this endpoint's stats.
    pub fn stats(&self) -> StatsHandle {
        self.stats.clone()
    }

    fn emit(&mut self, e: SignerEvent) {
        if let Some(f) = &mut self.events {
            let f = f
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            f(&e);
        }
    }

    fn validate(&self) -> Result<(), EndpointError> {
        let zero = |d: Duration, what: &str| {
            if d.is_zero() {
                Err(EndpointError::Config(format!("{what} must be positive")))
            } else {
                Ok(())
            }
        };
        zero(self.connect_timeout, "connect timeout")?;
        zero(self.read_timeout, "read timeout")?;
        zero(self.write_timeout, "write timeout")?;
        zero(self.retry_initial, "retry interval")?;
        if self.retry_max < self.retry_initial {
            return Err(EndpointError::Config(
                "the retry cap is below the first retry interval".into(),
            ));
        }
        if self.max_message_bytes == 0 {
            return Err(EndpointError::Config(
                "max message bytes must be positive".into(),
            ));
        }
        Ok(())
    }

    /// Dial, serve, and dial again, forever. Returns only for an invalid
    /// configuration; drop the future to stop. Cancel-safe between
    /// requests; dropped while a request is being served, the signature
    /// may be persisted and not sent (the node asks again and gets it
    /// re-served).
    pub async fn run<S: Signer + ?Sized>(
        mut self,
        signer: &mut S,
    ) -> Result<Infallible, EndpointError> {
        self.validate()?;
        let mut attempt = 0u32;
        let mut backoff = self.retry_initial;
        loop {
            attempt = attempt.saturating_add(1);
            self.emit(SignerEvent::Connecting { attempt });
            match self.connect().await {
                Ok(conn) => {
                    attempt = 0;
                    backoff = self.retry_initial;
                    self.stats.connected();
                    self.emit(SignerEvent::Connected {
                        node: conn.peer,
                        peer: conn.libp2p,
                    });
                    let reason = self.serve_conn(conn, signer).await;
                    self.stats.disconnected();
                    self.emit(SignerEvent::Disconnected {
                        reason: reason.to_string(),
                    });
                    // A node that accepts and drops at once must not make
                    // this a busy loop.
                    tokio::time::sleep(self.retry_initial).await;
                }
                Err(e) => {
                    self.emit(SignerEvent::ConnectFailed {
                        attempt,
                        error: e.to_string(),
                        retry_in: backoff,
                    });
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(self.retry_max);
                }
            }
        }
    }

    async fn connect(&self) -> Result<Conn, EndpointError> {
        let setup = Setup {
            identity: &self.identity,
            expect: self.expect_node,
            allowed: &[],
            // The handshake gets the node's read/write timeout: a node that
            // is busy may take a moment to call accept.
            handshake_timeout: super::NODE_READ_WRITE_TIMEOUT,
            limit: self.max_message_bytes,
        };
        transport::dial(&self.address, &setup, self.connect_timeout).await
    }

    /// Serve requests on an established stream until it fails: a secret
    /// connection, a buffered Unix socket, or any transport of the
    /// application's. Returns why it ended (an end of stream is
    /// [`PrivvalError::Io`](crate::PrivvalError::Io) with
    /// `UnexpectedEof`). Counts into this endpoint's stats and events.
    pub async fn serve<S, T>(&mut self, io: T, signer: &mut S) -> EndpointError
    where
        S: Signer + ?Sized,
        T: AsyncBufRead + AsyncWrite + Unpin + Send + 'static,
    {
        let conn = Conn::new(Box::new(io), self.max_message_bytes, None);
        self.serve_conn(conn, signer).await
    }

    async fn serve_conn<S: Signer + ?Sized>(
        &mut self,
        mut conn: Conn,
        signer: &mut S,
    ) -> EndpointError {
        loop {
            let request = match conn.read(self.read_timeout).await {
                Err(e) => return e,
                Ok(r) => r,
            };
            let started = Instant::now();
            let outcome = match request {
                Ok(msg) => respond(signer, msg, self.sign_extensions),
                Err(e) => Outcome::not_a_request(e.to_string()),
            };
            let written = match &outcome.response {
                Some(resp) => conn.write(resp, self.write_timeout).await,
                None => Ok(()),
            };
            let latency = started.elapsed();
            let failed = outcome.error.is_some() || written.is_err();
            self.stats.request(outcome.kind, latency, failed);
            let error = match (&written, outcome.error) {
                (Err(e), Some(why)) => Some(format!("{why}; the response was not sent: {e}")),
                (Err(e), None) => Some(format!("the response was not sent: {e}")),
                (Ok(()), why) => why,
            };
            self.emit(SignerEvent::Served {
                kind: outcome.kind,
                height: outcome.height,
                round: outcome.round,
                msg_type: outcome.msg_type,
                latency,
                error,
            });
            if let Err(e) = written {
                return e;
            }
        }
    }
}
