//! The cosigners' transport (`cosign_net`) over real loopback sockets:
//! three members serving each other, a member down and back, strangers
//! and impostors refused, hostile members bounded, and the round trip of
//! a 200-byte request measured.
//!
//! The hostile peers speak the envelope from `spec/cosign-net.md`, declared
//! again here, so the spec's field numbers are checked too.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use p2p_conn::io::tokio::SecretConnection;
use p2p_conn::Identity;
use p2p_conn_privval::cosign_net::{
    Cluster, ClusterConfig, Incoming, Member, NetError, NetEvent, Requests,
};
use prost::Message as _;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const CLUSTER: [u8; 32] = [0xc5; 32];
/// A kind the test handler holds without answering.
const HOLD: u32 = 9;
/// A kind it echoes, prefixed with its own index.
const ECHO: u32 = 7;
const IN_FLIGHT: usize = 8;
/// Bounds a hang; never a speed assertion.
const LIMIT: Duration = Duration::from_secs(20);

// The envelope as spec/cosign-net.md gives it.
#[derive(Clone, PartialEq, prost::Message)]
struct Envelope {
    #[prost(oneof = "Body", tags = "1, 2")]
    body: Option<Body>,
}
#[derive(Clone, PartialEq, prost::Oneof)]
enum Body {
    #[prost(message, tag = "1")]
    Hello(Hello),
    #[prost(message, tag = "2")]
    Request(Request),
}
#[derive(Clone, PartialEq, prost::Message)]
struct Hello {
    #[prost(bytes = "vec", tag = "1")]
    cluster_id: Vec<u8>,
    #[prost(uint32, tag = "2")]
    index: u32,
    #[prost(uint32, tag = "3")]
    version: u32,
}
#[derive(Clone, PartialEq, prost::Message)]
struct Request {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint32, tag = "2")]
    kind: u32,
    #[prost(bytes = "vec", tag = "3")]
    payload: Vec<u8>,
}

fn wire(body: Body) -> Vec<u8> {
    Envelope { body: Some(body) }.encode_length_delimited_to_vec()
}

fn hello(index: u32) -> Vec<u8> {
    wire(Body::Hello(Hello {
        cluster_id: CLUSTER.to_vec(),
        index,
        version: p2p_conn_privval::cosign_net::PROTOCOL_VERSION,
    }))
}

/// What a test sees of a member's events.
#[derive(Debug)]
enum Ev {
    Connected(u16),
    Disconnected(u16, String),
    Refused(String),
}

fn key(index: u16) -> Identity {
    Identity::from_seed(&[index as u8; 32])
}

/// A member under test: its cluster, its events, and the requests its
/// handler holds.
struct Node {
    cluster: Cluster,
    events: mpsc::UnboundedReceiver<Ev>,
    held: Arc<Mutex<Vec<Incoming>>>,
}

/// Listeners for members 1..=n on loopback, and the member list.
async fn listeners(n: u16) -> (Vec<TcpListener>, Vec<Member>, Vec<String>) {
    let mut ls = Vec::new();
    let mut ms = Vec::new();
    let mut addrs = Vec::new();
    for i in 1..=n {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        ms.push(Member::new(i, key(i).node_id(), addr.clone()));
        addrs.push(addr);
        ls.push(l);
    }
    (ls, ms, addrs)
}

fn config(index: u16, members: &[Member], tx: mpsc::UnboundedSender<Ev>) -> ClusterConfig {
    ClusterConfig::new(CLUSTER, index, key(index), members.to_vec())
        .max_in_flight(IN_FLIGHT)
        .max_payload_bytes(8 * 1024)
        .ping_interval(Duration::from_millis(100))
        .ping_timeout(Duration::from_secs(1))
        .handshake_timeout(Duration::from_secs(2))
        .retry(Duration::from_millis(20), Duration::from_millis(200))
        .on_event(move |e| {
            let ev = match e {
                NetEvent::Connected { peer, .. } => Ev::Connected(*peer),
                NetEvent::Disconnected { peer, error } => {
                    Ev::Disconnected(*peer, error.to_string())
                }
                NetEvent::Refused { error, .. } => Ev::Refused(error.to_string()),
                _ => return,
            };
            let _ = tx.send(ev);
        })
}

/// The test handler: echo `ECHO` with our index in front, hold `HOLD`,
/// refuse anything else.
fn serve(index: u16, mut requests: Requests, held: Arc<Mutex<Vec<Incoming>>>) {
    tokio::spawn(async move {
        while let Some(req) = requests.next().await {
            match req.kind() {
                ECHO => {
                    let mut out = vec![index as u8];
                    out.extend_from_slice(req.payload());
                    req.respond(Ok(out.into()));
                }
                HOLD => held.lock().unwrap().push(req),
                k => req.respond(Err(format!("kind {k}?"))),
            }
        }
    });
}

fn start(index: u16, listener: TcpListener, members: &[Member]) -> Node {
    start_with(index, listener, members, |c| c)
}

fn start_with(
    index: u16,
    listener: TcpListener,
    members: &[Member],
    tune: impl FnOnce(ClusterConfig) -> ClusterConfig,
) -> Node {
    let (tx, events) = mpsc::unbounded_channel();
    let (cluster, requests) = Cluster::start(tune(config(index, members, tx)), listener).unwrap();
    let held = Arc::new(Mutex::new(Vec::new()));
    serve(index, requests, held.clone());
    Node {
        cluster,
        events,
        held,
    }
}

impl Node {
    /// Wait for the first event `pick` accepts, skipping others.
    async fn expect<T>(&mut self, what: &str, mut pick: impl FnMut(&Ev) -> Option<T>) -> T {
        let mut seen = Vec::new();
        let r = tokio::time::timeout(LIMIT, async {
            loop {
                let ev = self.events.recv().await.expect("events end");
                if let Some(t) = pick(&ev) {
                    return t;
                }
                if seen.len() == 20 {
                    seen.remove(0);
                }
                seen.push(ev);
            }
        })
        .await;
        match r {
            Ok(t) => t,
            Err(_) => panic!("no {what} within {LIMIT:?}; last saw {seen:?}"),
        }
    }

    async fn connected(&mut self, peer: u16) {
        self.expect(&format!("connection to {peer}"), |e| {
            matches!(e, Ev::Connected(p) if *p == peer).then_some(())
        })
        .await
    }

    async fn disconnected(&mut self, peer: u16) -> String {
        self.expect(&format!("disconnection of {peer}"), |e| match e {
            Ev::Disconnected(p, why) if *p == peer => Some(why.clone()),
            _ => None,
        })
        .await
    }

    async fn refused(&mut self) -> String {
        self.expect("a refusal", |e| match e {
            Ev::Refused(why) => Some(why.clone()),
            _ => None,
        })
        .await
    }

    async fn echo(&self, peer: u16, payload: &[u8]) -> Result<Bytes, NetError> {
        let deadline = Instant::now() + Duration::from_secs(5);
        self.cluster
            .request(peer, ECHO, Bytes::copy_from_slice(payload), deadline)
            .await
    }
}

fn echoed(peer: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![peer as u8];
    v.extend_from_slice(payload);
    v
}

#[tokio::test]
async fn three_cosigners_request_each_other_both_ways() {
    let (ls, ms, _) = listeners(3).await;
    let mut nodes: Vec<Node> = ls
        .into_iter()
        .zip(1..)
        .map(|(l, i)| start(i, l, &ms))
        .collect();
    for (i, node) in nodes.iter_mut().enumerate() {
        for peer in (1..=3).filter(|p| *p != i as u16 + 1) {
            node.connected(peer).await;
        }
    }
    for a in 1..=3u16 {
        for b in (1..=3u16).filter(|b| *b != a) {
            let payload = format!("from {a} to {b}");
            let got = nodes[a as usize - 1]
                .echo(b, payload.as_bytes())
                .await
                .unwrap();
            assert_eq!(got[..], echoed(b, payload.as_bytes())[..]);
        }
    }
    // A refusal by the handler, a request to nobody, one over the limit.
    let n1 = &nodes[0].cluster;
    let soon = || Instant::now() + Duration::from_secs(5);
    match n1.request(2, 42, Bytes::new(), soon()).await {
        Err(NetError::Refused { peer: 2, message }) => assert_eq!(message, "kind 42?"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        n1.request(4, ECHO, Bytes::new(), soon()).await,
        Err(NetError::UnknownPeer(4))
    ));
    assert!(matches!(
        n1.request(2, ECHO, vec![0; 8 * 1024 + 1].into(), soon())
            .await,
        Err(NetError::PayloadTooLarge { .. })
    ));
    // Held requests: the deadline ends the wait, and past the bound a
    // request fails at once.
    let short = Instant::now() + Duration::from_millis(300);
    let holds: Vec<_> = (0..IN_FLIGHT)
        .map(|_| n1.request(3, HOLD, Bytes::new(), short))
        .collect();
    let (results, over) = tokio::join!(futures_join(holds), async {
        tokio::task::yield_now().await;
        n1.request(3, HOLD, Bytes::new(), short).await
    });
    assert!(
        matches!(
            over,
            Err(NetError::Busy {
                peer: 3,
                in_flight: IN_FLIGHT
            })
        ),
        "{over:?}"
    );
    for r in results {
        assert!(matches!(r, Err(NetError::Deadline)), "{r:?}");
    }
    let stats = n1.stats();
    let s2 = stats.iter().find(|s| s.index == 2).unwrap();
    assert!(s2.connected);
    assert_eq!((s2.requests, s2.failures), (3, 2));
    assert!(s2.request_p50.is_some());
    let s3 = stats.iter().find(|s| s.index == 3).unwrap();
    assert_eq!(
        (s3.requests, s3.failures),
        (1 + IN_FLIGHT as u64 + 1, IN_FLIGHT as u64 + 1)
    );
    // The keepalive measures the round trip.
    let rtt = tokio::time::timeout(LIMIT, async {
        loop {
            if let Some(s) = n1.stats().into_iter().find(|s| s.rtt_last.is_some()) {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("no keepalive round trip measured");
    assert!(rtt.rtt_p50.is_some() && rtt.rtt_p99.is_some());
}

/// Polls every future to its end, all at once.
async fn futures_join<F: std::future::Future>(fs: Vec<F>) -> Vec<F::Output> {
    let handles: Vec<_> = fs.into_iter().map(Box::pin).collect();
    let mut out = Vec::new();
    // Each is polled concurrently through a JoinSet-free join.
    let mut pending: Vec<_> = handles.into_iter().map(Some).collect();
    let mut results: Vec<Option<F::Output>> = (0..pending.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut all = true;
        for (i, f) in pending.iter_mut().enumerate() {
            if let Some(fut) = f {
                match fut.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        results[i] = Some(v);
                        *f = None;
                    }
                    std::task::Poll::Pending => all = false,
                }
            }
        }
        if all {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    out.extend(results.into_iter().flatten());
    out
}

#[tokio::test]
async fn a_member_down_fails_within_the_deadline_and_is_redialed() {
    let (mut ls, ms, _) = listeners(2).await;
    let addr2 = ls[1].local_addr().unwrap();
    drop(ls.pop()); // member 2 is down
    let mut n1 = start(1, ls.pop().unwrap(), &ms);
    let deadline = Instant::now() + Duration::from_millis(500);
    let r = n1
        .cluster
        .request(2, ECHO, Bytes::from_static(b"x"), deadline)
        .await;
    assert!(matches!(r, Err(NetError::NotConnected(2))), "{r:?}");
    assert!(Instant::now() <= deadline + Duration::from_millis(100));
    for round in 0..2 {
        let n2 = start(2, TcpListener::bind(addr2).await.unwrap(), &ms);
        n1.connected(2).await;
        let payload = format!("round {round}");
        assert_eq!(
            n1.echo(2, payload.as_bytes()).await.unwrap()[..],
            echoed(2, payload.as_bytes())[..]
        );
        assert_eq!(
            n2.echo(1, payload.as_bytes()).await.unwrap()[..],
            echoed(1, payload.as_bytes())[..]
        );
        // A request held by member 2 when it goes down fails then, not
        // at its deadline.
        let held = n1
            .cluster
            .request(2, HOLD, Bytes::new(), Instant::now() + 2 * LIMIT);
        let stop = async {
            while n2.held.lock().unwrap().is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            drop(n2);
        };
        let (r, ()) = tokio::time::timeout(LIMIT, async { tokio::join!(held, stop) })
            .await
            .expect("the held request outlived its connection");
        assert!(matches!(r, Err(NetError::Disconnected)), "{r:?}");
        n1.disconnected(2).await;
        assert!(matches!(
            n1.echo(2, b"y").await,
            Err(NetError::NotConnected(2))
        ));
    }
    let s = n1.cluster.stats();
    assert_eq!(s[0].connects, 2);
    assert!(!s[0].connected);
}

/// A secret connection to the listener at `addr`, as `identity`.
async fn connect_as(addr: &str, identity: &Identity) -> SecretConnection<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    p2p_conn::io::tokio::handshake(tcp, identity, &Default::default())
        .await
        .unwrap()
}

/// The connection ends (the member closed it) within the limit.
async fn ends(conn: &mut (impl tokio::io::AsyncRead + Unpin)) {
    let mut buf = [0u8; 256];
    let r = tokio::time::timeout(LIMIT, async {
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(r.is_ok(), "the connection was not closed");
}

#[tokio::test]
async fn a_stranger_is_refused_after_the_handshake() {
    let (mut ls, ms, addrs) = listeners(2).await;
    let mut n2 = start(2, ls.pop().unwrap(), &ms);
    let stranger = Identity::from_seed(&[0x55; 32]);
    let mut conn = connect_as(&addrs[1], &stranger).await;
    assert_eq!(conn.remote_node_id(), key(2).node_id());
    let _ = conn.send(&hello(1)).await;
    let why = n2.refused().await;
    assert!(why.contains(&stranger.node_id().to_string()), "{why}");
    ends(&mut conn).await;
    // The real member 1 still gets in.
    let mut n1 = start(1, ls.pop().unwrap(), &ms);
    n2.connected(1).await;
    n1.connected(2).await;
    assert!(n1.echo(2, b"ok").await.is_ok());
}

#[tokio::test]
async fn a_member_presenting_another_index_is_refused() {
    let (mut ls, ms, addrs) = listeners(3).await;
    let mut n3 = start(3, ls.pop().unwrap(), &ms);
    let addr3 = addrs[2].clone();
    // Member 2's own key, saying it is member 1.
    let mut conn = connect_as(&addr3, &key(2)).await;
    conn.send(&hello(1)).await.unwrap();
    let why = n3.refused().await;
    assert!(why.contains("index 1"), "{why}");
    ends(&mut conn).await;
    // Member 2's key with the right index but another cluster.
    let mut conn = connect_as(&addr3, &key(2)).await;
    let other = wire(Body::Hello(Hello {
        cluster_id: vec![1; 32],
        index: 2,
        version: p2p_conn_privval::cosign_net::PROTOCOL_VERSION,
    }));
    conn.send(&other).await.unwrap();
    let why = n3.refused().await;
    assert!(why.contains("another cluster"), "{why}");
    ends(&mut conn).await;
    // Member 3's own key back at it: a member that never dials us.
    let mut conn = connect_as(&addr3, &key(3)).await;
    let why = n3.refused().await;
    assert!(why.contains("index 3"), "{why}");
    ends(&mut conn).await;
    // A dialer pins the ID: member 2 dialing a listener that is not 3.
    let impostor = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut ms2 = ms.clone();
    ms2[2] = Member::new(
        3,
        key(3).node_id(),
        impostor.local_addr().unwrap().to_string(),
    );
    let (tx, _rx) = mpsc::unbounded_channel();
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
    let cfg = config(2, &ms2, tx).on_event(move |e| {
        if let NetEvent::DialFailed { error, .. } = e {
            let _ = ev_tx.send(error.to_string());
        }
    });
    let (_n2, _reqs) = Cluster::start(cfg, ls.pop().unwrap()).unwrap();
    let (tcp, _) = impostor.accept().await.unwrap();
    let _ =
        p2p_conn::io::tokio::handshake(tcp, &Identity::from_seed(&[0x66; 32]), &Default::default())
            .await;
    let why = tokio::time::timeout(LIMIT, ev_rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(why.contains("handshake"), "{why}");
}

#[tokio::test]
async fn hostile_members_are_bounded_and_the_others_served() {
    let (mut ls, ms, addrs) = listeners(3).await;
    // Hostile peers never pong: a long ping timeout keeps that out of the
    // way of what is tested.
    let slow_pings = |c: ClusterConfig| c.ping_timeout(Duration::from_secs(30));
    let mut n3 = start_with(3, ls.pop().unwrap(), &ms, slow_pings);
    let mut n2 = start(2, ls.pop().unwrap(), &ms);
    n3.connected(2).await;
    n2.connected(3).await;
    let addr3 = &addrs[2];
    let member1 = || async {
        let mut conn = connect_as(addr3, &key(1)).await;
        conn.send(&hello(1)).await.unwrap();
        conn
    };

    // An oversize length prefix after the hello: refused from the prefix.
    let mut conn = member1().await;
    n3.connected(1).await;
    let mut huge = Vec::new();
    prost::encoding::encode_varint(1 << 40, &mut huge);
    conn.send(&huge).await.unwrap();
    let why = n3.disconnected(1).await;
    assert!(why.contains("1099511627776-byte envelope"), "{why}");
    ends(&mut conn).await;
    assert_eq!(n2.echo(3, b"a").await.unwrap()[..], echoed(3, b"a")[..]);

    // Garbage after the hello.
    let mut conn = member1().await;
    n3.connected(1).await;
    conn.send(&[5, 0xff, 0xff, 0xff, 0xff, 0xff]).await.unwrap();
    let why = n3.disconnected(1).await;
    assert!(why.contains("malformed"), "{why}");
    ends(&mut conn).await;

    // A second connection from member 1 replaces the first.
    let mut old = member1().await;
    n3.connected(1).await;
    let conn = member1().await;
    let why = n3.disconnected(1).await;
    assert!(why.contains("replaced"), "{why}");
    n3.connected(1).await;
    ends(&mut old).await;

    // 10,000 held requests, never reading: the handler sees at most the
    // bound, the rest are answered busy (or, once the unread answers fill
    // the queue, the connection is dropped), and member 2 is served.
    let (_rd, mut wr) = conn.into_split();
    let flood = |kind, payload: usize| {
        let mut all = Vec::new();
        for id in 1..=10_000u64 {
            all.extend(wire(Body::Request(Request {
                id,
                kind,
                payload: vec![0xab; payload],
            })));
        }
        all
    };
    let _ = wr.send(&flood(HOLD, 16)).await;
    let s = tokio::time::timeout(LIMIT, async {
        loop {
            let s = n3
                .cluster
                .stats()
                .into_iter()
                .find(|s| s.index == 1)
                .unwrap();
            if s.served + s.busy == 10_000 || !s.connected {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the flood was neither answered nor dropped");
    println!("10,000 held requests from one member: {s:?}");
    assert!(s.served <= IN_FLIGHT as u64, "{s:?}");
    assert!(n3.held.lock().unwrap().len() <= IN_FLIGHT);
    assert_eq!(n2.echo(3, b"b").await.unwrap()[..], echoed(3, b"b")[..]);
    n3.held.lock().unwrap().clear();

    // 10,000 echo requests of 4 KiB whose answers are never read: the
    // member drops the connection.
    let conn = member1().await;
    n3.expect("member 1 reconnected", |e| {
        matches!(e, Ev::Connected(1)).then_some(())
    })
    .await;
    let (mut rd, mut wr) = conn.into_split();
    let flood = flood(ECHO, 4096);
    let writer = tokio::spawn(async move {
        let _ = wr.send(&flood).await;
    });
    n3.expect("member 1 dropped as a non-reader", |e| match e {
        Ev::Disconnected(1, why) if why.contains("does not read") => Some(()),
        _ => None,
    })
    .await;
    assert_eq!(n2.echo(3, b"c").await.unwrap()[..], echoed(3, b"c")[..]);
    // The member closed its end: the hostile side reads to the end.
    ends(&mut rd).await;
    tokio::time::timeout(LIMIT, writer).await.unwrap().unwrap();
    let s = n3.cluster.stats();
    assert!(!s.iter().find(|s| s.index == 1).unwrap().connected);
    assert!(s.iter().find(|s| s.index == 2).unwrap().connected);
}

/// A member that says hello and then nothing (no pong) is dropped by
/// the keepalive.
#[tokio::test]
async fn a_silent_member_is_dropped_by_the_keepalive() {
    let (mut ls, ms, addrs) = listeners(3).await;
    let mut n3 = start(3, ls.pop().unwrap(), &ms);
    let mut conn = connect_as(&addrs[2], &key(1)).await;
    conn.send(&hello(1)).await.unwrap();
    n3.connected(1).await;
    let why = n3.disconnected(1).await;
    assert!(why.contains("no pong"), "{why}");
    ends(&mut conn).await;
}

/// Connections that never handshake cannot lock the members out: past
/// the bound on connections not yet through their hello, the oldest is
/// closed, so a member's handshake (milliseconds) gets through however
/// many silent ones a stranger keeps open, long before their timeout.
#[tokio::test]
async fn silent_connections_do_not_lock_members_out() {
    let (mut ls, ms, addrs) = listeners(3).await;
    let patient = |c: ClusterConfig| c.handshake_timeout(Duration::from_secs(60));
    let mut n3 = start_with(3, ls.pop().unwrap(), &ms, patient);
    let mut silent = Vec::new();
    for _ in 0..40 {
        silent.push(TcpStream::connect(&addrs[2]).await.unwrap());
    }
    // The oldest were closed as the newer came in.
    for s in &mut silent[..20] {
        ends(s).await;
    }
    let mut n2 = start(2, ls.pop().unwrap(), &ms);
    n3.connected(2).await;
    n2.connected(3).await;
    assert_eq!(n2.echo(3, b"in").await.unwrap()[..], echoed(3, b"in")[..]);
}

/// The round trip of a 200-byte request between two members over one
/// connection, each member on a runtime and a thread of its own as two
/// processes would be (`--nocapture` prints it; nothing about speed is
/// asserted). `COSIGN_RTT_REQUESTS` sets the count (default 2,000).
#[test]
fn round_trip_of_a_200_byte_request() {
    let bind = || {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        l
    };
    let (l1, l2) = (bind(), bind());
    let ms: Vec<Member> = [(1, &l1), (2, &l2)]
        .iter()
        .map(|(i, l)| Member::new(*i, key(*i).node_id(), l.local_addr().unwrap().to_string()))
        .collect();
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let ms2 = ms.clone();
    let other = std::thread::spawn(move || {
        runtime().block_on(async move {
            let _n2 = start(2, TcpListener::from_std(l2).unwrap(), &ms2);
            let _ = stopped.await;
        })
    });
    runtime().block_on(async move {
        let mut n1 = start(1, TcpListener::from_std(l1).unwrap(), &ms);
        n1.connected(2).await;
        let payload = [0x5a; 200];
        let want = echoed(2, &payload);
        let n: usize = std::env::var("COSIGN_RTT_REQUESTS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2_000);
        let mut times = Vec::with_capacity(n);
        for i in 0..n + n / 10 {
            let t = Instant::now();
            let got = n1.echo(2, &payload).await.unwrap();
            if i >= n / 10 {
                times.push(t.elapsed());
            }
            assert_eq!(got[..], want[..]);
        }
        times.sort();
        let q = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
        println!(
            "cosign_net round trip, 200-byte payload, {n} requests: p50 {:?} p99 {:?} max {:?}",
            q(0.5),
            q(0.99),
            times[times.len() - 1]
        );
    });
    let _ = stop.send(());
    other.join().unwrap();
}
