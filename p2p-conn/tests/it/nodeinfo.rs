//! The NodeInfo exchange (`p2p_conn::nodeinfo`) over real loopback sockets:
//! both adapters and hostile peers (`p2p-conn probe` against the same
//! scripted peers is tested with the CLI, in p2p-conn-cli/tests/it/probe.rs).
//!
//! A scripted peer ([`crate::common::scripted`]) is a real p2p-conn connection
//! that, after the handshake, writes exactly the bytes a test gives it
//! through the secret connection, then holds the connection open (or closes
//! it) as the test says.

use std::io::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use crate::common::scripted::{scripted_peer, Then};
use crate::common::tokio_secret_pair;
use p2p_conn::io::{blocking, tokio as ptokio};
use p2p_conn::nodeinfo::{self, NodeInfo, NodeInfoError, Rule, MAX_NODE_INFO_SIZE};
use p2p_conn::{Config, Identity, NodeId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bound on any one exchange in these tests: far above what loopback needs,
/// far below the 20 s handshake timeout a stalled read would otherwise take.
const BOUND: Duration = Duration::from_secs(10);

fn info_for(id: NodeId) -> NodeInfo {
    let mut n = NodeInfo::new(id, "test-chain");
    n.channels = vec![0x40, 0x20, 0x38];
    n.moniker = "scripted".into();
    n
}

/// The varint length prefix of `body`, then `body`.
fn delimited(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::encode_varint(body.len() as u64, &mut out);
    out.extend_from_slice(body);
    out
}

#[tokio::test]
async fn both_sides_exchange_at_once_and_later_bytes_stay_in_the_stream() {
    let (mut a, mut b) = tokio_secret_pair(&Config::default()).await;
    // Each side's own ID is what the other authenticated.
    let (ia, ib) = (info_for(b.remote_node_id()), info_for(a.remote_node_id()));
    // Each side sends its first application bytes right behind its NodeInfo,
    // so they share a frame: the reader must leave them in the stream.
    let (ra, rb) = tokio::join!(
        async {
            let got = nodeinfo::tokio::exchange(&mut a, &ia).await?;
            a.write_all(b"after-a").await?;
            a.flush().await?;
            Ok::<_, NodeInfoError>(got)
        },
        async {
            let got = nodeinfo::tokio::exchange(&mut b, &ib).await?;
            b.write_all(b"after-b").await?;
            b.flush().await?;
            Ok::<_, NodeInfoError>(got)
        }
    );
    let (ga, gb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(ga, ib);
    assert_eq!(gb, ia);
    assert!(ga.validate().is_empty() && gb.validate().is_empty());
    assert!(ga.check_id(a.remote_node_id()).is_ok());
    assert!(ia.compatible_with(&ga).is_empty());
    let mut buf = [0u8; 7];
    a.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"after-b");
    b.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"after-a");
}

#[tokio::test]
async fn a_client_may_read_first_then_answer() {
    let (mut node, mut client) = tokio_secret_pair(&Config::default()).await;
    let node_info = info_for(client.remote_node_id());
    let client_id = node.remote_node_id();
    let (from_client, told) =
        tokio::join!(nodeinfo::tokio::exchange(&mut node, &node_info), async {
            let theirs = nodeinfo::tokio::read(&mut client).await?;
            let ours = NodeInfo::new(client_id, theirs.network.clone());
            nodeinfo::tokio::write(&mut client, &ours).await?;
            Ok::<_, NodeInfoError>(theirs)
        });
    assert_eq!(told.unwrap(), node_info);
    let from_client = from_client.unwrap();
    assert_eq!(from_client.network, "test-chain");
    // The node has channels and the client none: the node refuses to keep
    // it, by name, exactly as CometBFT does.
    let rules: Vec<Rule> = node_info
        .compatible_with(&from_client)
        .iter()
        .map(|v| v.rule)
        .collect();
    assert_eq!(rules, [Rule::CommonChannel]);
}

#[test]
fn blocking_adapter_exchanges_over_std_sockets() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = Config::default();
    let server = std::thread::spawn(move || {
        let id = Identity::generate();
        let (tcp, _) = listener.accept().unwrap();
        let mut conn = blocking::handshake(tcp, &id, &Config::default()).unwrap();
        let got = nodeinfo::blocking::exchange(&mut conn, &info_for(id.node_id())).unwrap();
        conn.write_all(b"tail").unwrap();
        conn.flush().unwrap();
        got
    });
    let id = Identity::generate();
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    let mut conn = blocking::handshake_tcp(tcp, &id, &cfg).unwrap();
    let got = nodeinfo::blocking::exchange(&mut conn, &info_for(id.node_id())).unwrap();
    assert!(got.check_id(conn.remote_node_id()).is_ok());
    let mut tail = [0u8; 4];
    std::io::Read::read_exact(&mut conn, &mut tail).unwrap();
    assert_eq!(&tail, b"tail");
    assert_eq!(server.join().unwrap(), info_for(id.node_id()));
}

/// Dials `addr` and reads the peer's NodeInfo with the library, bounded.
async fn read_from(addr: SocketAddr) -> Result<NodeInfo, NodeInfoError> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut conn = ptokio::handshake(tcp, &Identity::generate(), &Config::default())
        .await
        .unwrap();
    tokio::time::timeout(BOUND, nodeinfo::tokio::read(&mut conn))
        .await
        .expect("the read must end by itself, not wait for a timeout")
}

#[tokio::test]
async fn an_oversized_length_is_refused_at_the_prefix() {
    // 10241 bytes announced, none sent, connection held: the read must fail
    // on the prefix alone.
    let (addr, _) = scripted_peer(|_| vec![0x81, 0x50], Then::Hold).await;
    match read_from(addr).await {
        Err(NodeInfoError::TooLarge { len: 10241, limit }) => {
            assert_eq!(limit, MAX_NODE_INFO_SIZE)
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    // The largest u64.
    let (addr, _) = scripted_peer(
        |_| vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
        Then::Hold,
    )
    .await;
    assert!(matches!(
        read_from(addr).await,
        Err(NodeInfoError::TooLarge { len: u64::MAX, .. })
    ));
    // Not a varint at all.
    let (addr, _) = scripted_peer(|_| vec![0x80; 11], Then::Hold).await;
    assert!(matches!(
        read_from(addr).await,
        Err(NodeInfoError::BadLength)
    ));
}

#[tokio::test]
async fn a_truncated_nodeinfo_says_how_much_arrived() {
    let (addr, _) = scripted_peer(
        |_| {
            let mut v = vec![100];
            v.extend_from_slice(&[0x2a; 50]);
            v
        },
        Then::Close,
    )
    .await;
    match read_from(addr).await {
        Err(NodeInfoError::Truncated {
            received: 51,
            expected: Some(101),
        }) => {}
        other => panic!("expected Truncated 51 of 101, got {other:?}"),
    }
    // The end of stream inside the prefix.
    let (addr, _) = scripted_peer(|_| vec![0x81], Then::Close).await;
    assert!(matches!(
        read_from(addr).await,
        Err(NodeInfoError::Truncated {
            received: 1,
            expected: None
        })
    ));
}

#[tokio::test]
async fn garbage_protobuf_is_refused() {
    // Field 1 claims 200 bytes inside a 3-byte message.
    let (addr, _) = scripted_peer(|_| delimited(&[0x0a, 0xc8, 0x01]), Then::Hold).await;
    assert!(matches!(
        read_from(addr).await,
        Err(NodeInfoError::Malformed(_))
    ));
    // A string field that is not UTF-8, named.
    let (addr, _) = scripted_peer(
        |_| delimited(&[0x3a, 0x02, 0xc3, 0x28]), // moniker = c3 28
        Then::Hold,
    )
    .await;
    assert!(matches!(
        read_from(addr).await,
        Err(NodeInfoError::NotUtf8("moniker"))
    ));
}

#[tokio::test]
async fn broken_rules_are_named() {
    // A well-formed NodeInfo claiming another node's ID, with a moniker of
    // control characters and a channel listed twice.
    let other = Identity::generate().node_id();
    let (addr, real) = scripted_peer(
        move |_| {
            let mut n = info_for(other);
            n.moniker = "\x07\x07".into();
            n.channels = vec![0x40, 0x40];
            n.encode_delimited().unwrap()
        },
        Then::Hold,
    )
    .await;
    let got = read_from(addr).await.unwrap();
    let rules: Vec<Rule> = got.validate().iter().map(|v| v.rule).collect();
    assert_eq!(rules, [Rule::DuplicateChannel, Rule::Moniker]);
    assert_eq!(got.check_id(real).unwrap_err().rule, Rule::IdMatchesKey);
}
