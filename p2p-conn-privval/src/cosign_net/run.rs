//! The tokio side: the listener, one dialer per higher member, and a
//! reader and a writer per connection, around the sans-IO codec and
//! pinning rule.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use p2p_conn::io::tokio::{poll_decode, SecretConnection};
use p2p_conn::{Identity, NodeId};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::{AbortHandle, JoinHandle};

use super::incoming::{Incoming, Reply, Requests};
use super::keepalive::{Keepalive, Tick};
use super::pinning::Membership;
use super::slot::{fail_pending, Link, Slot, Waiter};
use super::stats::PeerStats;
use super::wire::{self, Body, Decoder, Envelope, Failure, FailureCode, Ping, Request};
use super::{ClusterConfig, EventSink, NetError, NetEvent};

/// The largest hello read (a 32-byte cluster ID and two numbers).
const HELLO_LIMIT: usize = 128;
/// Envelopes batched into one write, up to this many bytes.
const BATCH_BYTES: usize = 64 * 1024;

type Conn = SecretConnection<TcpStream>;

struct Limits {
    max_in_flight: usize,
    max_payload: usize,
    ping_interval: Duration,
    ping_timeout: Duration,
    handshake_timeout: Duration,
    connect_timeout: Duration,
    retry: (Duration, Duration),
}

pub(super) struct Shared {
    membership: Membership,
    identity: Identity,
    limits: Limits,
    peers: Vec<Arc<Slot>>,
    incoming: mpsc::Sender<Incoming>,
    events: Option<EventSink>,
    next_id: AtomicU64,
    /// Connections between accept and the end of their hello, oldest
    /// first: an ID and the task that runs them.
    handshakes: Mutex<Handshakes>,
    shut: AtomicBool,
}

impl Shared {
    pub(super) fn emit(&self, e: NetEvent) {
        if let Some(f) = &self.events {
            f(&e);
        }
    }

    fn slot(&self, index: u16) -> Result<&Arc<Slot>, NetError> {
        self.peers
            .iter()
            .find(|s| s.index == index)
            .ok_or(NetError::UnknownPeer(index))
    }
}

/// A running member of a cluster: it listens for the lower members,
/// dials the higher ones, and sends requests to any of them
/// ([`Cluster::request`]). Dropping it ends every task and connection.
pub struct Cluster {
    shared: Arc<Shared>,
    tasks: Vec<AbortHandle>,
    local_addr: SocketAddr,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("index", &self.shared.membership.index)
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.shared.shut.store(true, Ordering::SeqCst);
        for t in &self.tasks {
            t.abort();
        }
        for slot in &self.shared.peers {
            if let Some(link) = slot.lock().link.take() {
                link.abort.abort();
            }
        }
        for (_, task) in lock(&self.shared.handshakes).tasks.drain(..) {
            task.abort();
        }
    }
}

impl Cluster {
    /// Join the cluster `config` describes, accepting the lower members
    /// on `listener` (bound where this member's address says) and
    /// dialing the higher ones. Call within a tokio runtime with time and
    /// I/O enabled. Fails with [`NetError::Config`] if the members do not
    /// hold together (a duplicate index or node ID, this member missing,
    /// or listed with another node ID than `identity`'s).
    pub fn start(
        config: ClusterConfig,
        listener: TcpListener,
    ) -> Result<(Cluster, Requests), NetError> {
        let ClusterConfig {
            cluster_id,
            index,
            identity,
            members,
            max_in_flight,
            max_payload_bytes,
            ping_interval,
            ping_timeout,
            handshake_timeout,
            connect_timeout,
            retry,
            events,
        } = config;
        let me = members
            .iter()
            .find(|m| m.index == index)
            .ok_or_else(|| NetError::Config(format!("no member has our index {index}")))?;
        if me.node_id != identity.node_id() {
            return Err(NetError::Config(format!(
                "member {index} is listed as {}, but our key is {}",
                me.node_id,
                identity.node_id()
            )));
        }
        for (i, a) in members.iter().enumerate() {
            if members[..i]
                .iter()
                .any(|b| b.index == a.index || b.node_id == a.node_id)
            {
                return Err(NetError::Config(format!(
                    "member {} repeats an index or a node ID",
                    a.index
                )));
            }
        }
        let local_addr = listener.local_addr()?;
        let peers: Vec<Arc<Slot>> = members
            .iter()
            .filter(|m| m.index != index)
            .map(|m| {
                Arc::new(Slot {
                    index: m.index,
                    node_id: m.node_id,
                    addr: m.addr.clone(),
                    max_payload: max_payload_bytes,
                    out_permits: Arc::new(Semaphore::new(max_in_flight)),
                    in_permits: Arc::new(Semaphore::new(max_in_flight)),
                    state: Mutex::default(),
                    events: events.clone(),
                })
            })
            .collect();
        let (tx, rx) = mpsc::channel(max_in_flight * peers.len().max(1));
        let shared = Arc::new(Shared {
            membership: Membership {
                cluster_id,
                index,
                members: members.iter().map(|m| (m.index, m.node_id)).collect(),
            },
            identity,
            limits: Limits {
                max_in_flight,
                max_payload: max_payload_bytes,
                ping_interval,
                ping_timeout,
                handshake_timeout,
                connect_timeout,
                retry,
            },
            handshakes: Mutex::new(Handshakes {
                next: 0,
                cap: 2 * members.len() + 4,
                tasks: VecDeque::new(),
            }),
            peers,
            incoming: tx,
            events,
            next_id: AtomicU64::new(1),
            shut: AtomicBool::new(false),
        });
        let mut tasks = vec![tokio::spawn(listen(shared.clone(), listener)).abort_handle()];
        for slot in shared.peers.iter().filter(|s| s.index > index) {
            tasks.push(tokio::spawn(dialer(shared.clone(), slot.clone())).abort_handle());
        }
        Ok((
            Cluster {
                shared,
                tasks,
                local_addr,
            },
            Requests(rx),
        ))
    }

    /// Where this member listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Each other member's stats now, by index.
    pub fn stats(&self) -> Vec<PeerStats> {
        self.shared
            .peers
            .iter()
            .map(|s| {
                let st = s.lock();
                st.counters.snapshot(s.index, s.node_id, st.link.is_some())
            })
            .collect()
    }

    /// Send member `peer` a request of `kind` carrying `payload`, and wait
    /// for its answer until `deadline`. Fails at once when the member is
    /// not connected ([`NetError::NotConnected`]) or has
    /// `max_in_flight` of our requests already ([`NetError::Busy`]).
    pub async fn request(
        &self,
        peer: u16,
        kind: u32,
        payload: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, NetError> {
        let slot = self.shared.slot(peer)?;
        let started = Instant::now();
        let r = self.send_request(slot, kind, payload, deadline).await;
        let mut st = slot.lock();
        st.counters.requests += 1;
        match &r {
            Ok(_) => st.counters.request_latency.record(started.elapsed()),
            Err(_) => st.counters.failures += 1,
        }
        r
    }

    async fn send_request(
        &self,
        slot: &Arc<Slot>,
        kind: u32,
        payload: Bytes,
        deadline: Instant,
    ) -> Result<Bytes, NetError> {
        let limit = self.shared.limits.max_payload;
        if payload.len() > limit {
            return Err(NetError::PayloadTooLarge {
                len: payload.len(),
                limit,
            });
        }
        let _permit = slot
            .out_permits
            .clone()
            .try_acquire_owned()
            .map_err(|_| NetError::Busy {
                peer: slot.index,
                in_flight: self.shared.limits.max_in_flight,
            })?;
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let link_tx = {
            let mut st = slot.lock();
            let Some(link) = &st.link else {
                return Err(NetError::NotConnected(slot.index));
            };
            let (generation, link_tx) = (link.generation, link.tx.clone());
            st.pending.insert(id, Waiter { generation, tx });
            link_tx
        };
        let exchange = async {
            let env = Envelope::from(Body::Request(Request { id, kind, payload }));
            link_tx
                .send(env)
                .await
                .map_err(|_| NetError::Disconnected)?;
            rx.await.unwrap_or(Err(NetError::Disconnected))
        };
        let r = tokio::time::timeout_at(deadline.into(), exchange)
            .await
            .unwrap_or(Err(NetError::Deadline));
        slot.lock().pending.remove(&id);
        r
    }
}

/// The secret connection's handshake over `tcp`, requiring `expect` if
/// given.
async fn secret(tcp: TcpStream, shared: &Shared, expect: Option<NodeId>) -> Result<Conn, NetError> {
    let _ = tcp.set_nodelay(true);
    let mut config = p2p_conn::Config::default().handshake_timeout(shared.limits.handshake_timeout);
    if let Some(id) = expect {
        config = config.expect_peer(id);
    }
    p2p_conn::io::tokio::handshake(tcp, &shared.identity, &config)
        .await
        .map_err(NetError::Handshake)
}

fn io_error(e: p2p_conn::Error) -> NetError {
    NetError::Io(e.into())
}

/// Both hellos, ours first, under the handshake timeout; the peer's must
/// name member `expected`, whose node ID the handshake proved.
async fn hello_exchange(shared: &Shared, conn: &mut Conn, expected: u16) -> Result<(), NetError> {
    let t = shared.limits.handshake_timeout;
    let exchange = async {
        let hello = wire::encode(&Body::Hello(shared.membership.hello()).into());
        conn.send(&hello).await.map_err(io_error)?;
        let mut dec = Decoder::new(HELLO_LIMIT);
        let env =
            std::future::poll_fn(|cx| poll_decode(Pin::new(&mut *conn), cx, &mut dec)).await?;
        match env.body {
            Some(Body::Hello(h)) => {
                shared
                    .membership
                    .check_hello(conn.remote_node_id(), expected, &h)
            }
            _ => Err(NetError::Protocol(
                "the first envelope is not a hello".into(),
            )),
        }
    };
    tokio::time::timeout(t, exchange)
        .await
        .unwrap_or(Err(NetError::Timeout("the hello", t)))
}

/// Accept the lower members, each connection checked against the
/// membership after its handshake.
async fn listen(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        let (tcp, addr) = match listener.accept().await {
            Ok(x) => x,
            // Out of descriptors, say: let some close.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Spawned under the lock, so that it is listed before it can end
        // and take itself off the list.
        let mut hs = lock(&shared.handshakes);
        let id = hs.next;
        hs.next += 1;
        let task = {
            let shared = shared.clone();
            tokio::spawn(async move {
                match accept(&shared, tcp).await {
                    Ok((slot, conn)) => drop(install(&shared, &slot, conn, false)),
                    Err(error) => shared.emit(NetEvent::Refused { addr, error }),
                }
                lock(&shared.handshakes).tasks.retain(|(i, _)| *i != id);
            })
        };
        hs.tasks.push_back((id, task.abort_handle()));
        // Past the bound the oldest goes: a member's handshake takes
        // milliseconds, so silent connections cannot keep it out.
        while hs.tasks.len() > hs.cap {
            if let Some((_, oldest)) = hs.tasks.pop_front() {
                oldest.abort();
            }
        }
    }
}

/// The connections not yet through their hello (`Shared::handshakes`).
struct Handshakes {
    next: u64,
    cap: usize,
    tasks: VecDeque<(u64, AbortHandle)>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn accept(shared: &Arc<Shared>, tcp: TcpStream) -> Result<(Arc<Slot>, Conn), NetError> {
    let mut conn = secret(tcp, shared, None).await?;
    let index = shared.membership.check_accepted(conn.remote_node_id())?;
    hello_exchange(shared, &mut conn, index).await?;
    Ok((shared.slot(index)?.clone(), conn))
}

/// Keep a connection to the higher member `slot` up: dial, serve until it
/// ends, dial again; failures back off.
async fn dialer(shared: Arc<Shared>, slot: Arc<Slot>) {
    let (initial, max) = shared.limits.retry;
    let mut wait = initial;
    loop {
        match dial(&shared, &slot).await {
            Ok(conn) => {
                wait = initial;
                let _ = install(&shared, &slot, conn, true).await;
                tokio::time::sleep(initial).await;
            }
            Err(error) => {
                shared.emit(NetEvent::DialFailed {
                    peer: slot.index,
                    error,
                    retry_in: wait,
                });
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(max);
            }
        }
    }
}

async fn dial(shared: &Shared, slot: &Slot) -> Result<Conn, NetError> {
    let t = shared.limits.connect_timeout;
    let tcp = tokio::time::timeout(t, TcpStream::connect(&slot.addr))
        .await
        .map_err(|_| NetError::Timeout("connect", t))??;
    let mut conn = secret(tcp, shared, Some(slot.node_id)).await?;
    hello_exchange(shared, &mut conn, slot.index).await?;
    Ok(conn)
}

/// Make `conn` member `slot`'s connection, replacing any older one, and
/// run it.
fn install(shared: &Arc<Shared>, slot: &Arc<Slot>, conn: Conn, dialed: bool) -> JoinHandle<()> {
    let (tx, rx) = mpsc::channel(2 * shared.limits.max_in_flight + 16);
    let mut st = slot.lock();
    st.generation += 1;
    let generation = st.generation;
    let replaced = st.link.take().map(|old| {
        old.abort.abort();
        fail_pending(&mut st, old.generation);
    });
    let handle = tokio::spawn(session(
        shared.clone(),
        slot.clone(),
        generation,
        conn,
        tx.clone(),
        rx,
    ));
    if shared.shut.load(Ordering::SeqCst) {
        handle.abort();
        return handle;
    }
    st.link = Some(Link {
        generation,
        tx,
        abort: handle.abort_handle(),
    });
    st.counters.connects += 1;
    drop(st);
    if replaced.is_some() {
        shared.emit(NetEvent::Disconnected {
            peer: slot.index,
            error: NetError::Replaced,
        });
    }
    shared.emit(NetEvent::Connected {
        peer: slot.index,
        dialed,
    });
    handle
}

/// One connection's life; at its end its requests fail and it is
/// reported.
async fn session(
    shared: Arc<Shared>,
    slot: Arc<Slot>,
    generation: u64,
    conn: Conn,
    tx: mpsc::Sender<Envelope>,
    rx: mpsc::Receiver<Envelope>,
) {
    let error = serve(&shared, &slot, generation, conn, tx, rx).await;
    if slot.drop_link(generation) {
        shared.emit(NetEvent::Disconnected {
            peer: slot.index,
            error,
        });
    }
}

async fn serve(
    shared: &Arc<Shared>,
    slot: &Arc<Slot>,
    generation: u64,
    conn: Conn,
    tx: mpsc::Sender<Envelope>,
    rx: mpsc::Receiver<Envelope>,
) -> NetError {
    let limits = &shared.limits;
    let (mut rd, wr) = conn.into_split();
    // Its own task, so that a burst of reading never starves it.
    let mut writer = AbortOnDrop(tokio::spawn(write(wr, rx, limits.ping_timeout)));
    let reader = async {
        let mut dec = Decoder::new(limits.max_payload + wire::ENVELOPE_OVERHEAD);
        let mut link = LinkState {
            shared,
            slot,
            generation,
            tx: &tx,
            keepalive: Keepalive::new(limits.ping_timeout),
        };
        let mut ticks = tokio::time::interval(limits.ping_interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                env = std::future::poll_fn(|cx| poll_decode(Pin::new(&mut rd), cx, &mut dec)) => {
                    let handled = match env {
                        Ok(env) => link.handle(env).await,
                        Err(e) => Err(e),
                    };
                    if let Err(e) = handled {
                        return e;
                    }
                }
                _ = ticks.tick() => {
                    match link.keepalive.tick(Instant::now()) {
                        Tick::Dead => return NetError::PingTimeout(limits.ping_timeout),
                        Tick::Wait => {}
                        Tick::Ping(nonce) => {
                            if let Err(e) = link.queue(Body::Ping(Ping { nonce })).await {
                                return e;
                            }
                        }
                    }
                }
            }
        }
    };
    tokio::select! {
        e = &mut writer.0 => e.unwrap_or(NetError::Shutdown),
        e = reader => e,
    }
}

/// A task aborted when this is dropped (the session that owns it ended
/// or was aborted).
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One connection's writer: what is queued, batched up to
/// [`BATCH_BYTES`] per write; a write that takes longer than `stall`
/// means the peer does not read.
async fn write(
    mut wr: p2p_conn::io::tokio::WriteHalf<tokio::net::tcp::OwnedWriteHalf>,
    mut rx: mpsc::Receiver<Envelope>,
    stall: Duration,
) -> NetError {
    let mut buf = Vec::with_capacity(4096);
    while let Some(env) = rx.recv().await {
        buf.clear();
        wire::encode_into(&env, &mut buf);
        while buf.len() < BATCH_BYTES {
            match rx.try_recv() {
                Ok(env) => wire::encode_into(&env, &mut buf),
                Err(_) => break,
            }
        }
        match tokio::time::timeout(stall, wr.send(&buf)).await {
            Err(_) => return NetError::Stalled,
            Ok(Err(e)) => return io_error(e),
            Ok(Ok(())) => {}
        }
    }
    NetError::Shutdown
}

/// What the reader of one connection acts on.
struct LinkState<'a> {
    shared: &'a Arc<Shared>,
    slot: &'a Arc<Slot>,
    generation: u64,
    tx: &'a mpsc::Sender<Envelope>,
    keepalive: Keepalive,
}

impl LinkState<'_> {
    /// Queue an envelope the reader owes the peer, waiting for room (the
    /// peer's reading paces ours) up to the ping timeout: past it, the
    /// peer does not read.
    async fn queue(&self, body: Body) -> Result<(), NetError> {
        let t = self.shared.limits.ping_timeout;
        match tokio::time::timeout(t, self.tx.send(body.into())).await {
            Err(_) => Err(NetError::Stalled),
            Ok(Err(_)) => Err(NetError::Shutdown),
            Ok(Ok(())) => Ok(()),
        }
    }

    fn answer(&self, id: u64, r: Result<Bytes, NetError>) {
        let mut st = self.slot.lock();
        if st
            .pending
            .get(&id)
            .is_some_and(|w| w.generation == self.generation)
        {
            if let Some(w) = st.pending.remove(&id) {
                let _ = w.tx.send(r);
            }
        }
        // Otherwise late (its requester gave up) or never asked: ignored.
    }

    async fn handle(&mut self, env: Envelope) -> Result<(), NetError> {
        let peer = self.slot.index;
        match env.body {
            None | Some(Body::Hello(_)) => {
                Err(NetError::Protocol("a hello after the hello".into()))
            }
            Some(Body::Ping(p)) => self.queue(Body::Pong(p)).await,
            Some(Body::Pong(p)) => {
                if let Some(rtt) = self.keepalive.pong(p.nonce, Instant::now()) {
                    self.slot.lock().counters.rtt(rtt);
                }
                Ok(())
            }
            Some(Body::Response(r)) => {
                self.answer(r.id, Ok(r.payload));
                Ok(())
            }
            Some(Body::Failure(f)) => {
                self.answer(f.id, Err(FailureCode::error(f.code, peer, f.message)));
                Ok(())
            }
            Some(Body::Request(r)) => self.request(r).await,
        }
    }

    /// Answer request `id` busy without the handler.
    async fn busy(&self, id: u64) -> Result<(), NetError> {
        self.slot.lock().counters.busy += 1;
        self.queue(Body::Failure(Failure {
            id,
            code: FailureCode::Busy as u32,
            message: String::new(),
        }))
        .await
    }

    /// A request from the peer: to the handler if the peer is within its
    /// bound, else answered busy here.
    async fn request(&self, r: Request) -> Result<(), NetError> {
        let Ok(permit) = self.slot.in_permits.clone().try_acquire_owned() else {
            return self.busy(r.id).await;
        };
        let incoming = Incoming {
            peer: self.slot.index,
            kind: r.kind,
            payload: r.payload,
            reply: Some(Reply {
                id: r.id,
                tx: self.tx.clone(),
                slot: self.slot.clone(),
                generation: self.generation,
                _permit: permit,
            }),
        };
        match self.shared.incoming.try_send(incoming) {
            Ok(()) => {
                self.slot.lock().counters.served += 1;
                Ok(())
            }
            Err(TrySendError::Full(mut incoming)) => {
                incoming.reply = None;
                self.busy(r.id).await
            }
            // Nobody serves: the drop answers it.
            Err(TrySendError::Closed(_)) => Ok(()),
        }
    }
}
