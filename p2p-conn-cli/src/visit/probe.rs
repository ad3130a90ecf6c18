//! The one piece of network code of a visit: [`probe`] visits one node,
//! for `crawl`, `check` and `seed` alike.

use std::time::{Duration, Instant};

use p2p_conn::io::tokio::{self as ptokio, SecretConnection};
use p2p_conn::nodeinfo::{self, NodeInfo, NodeInfoError};
use p2p_conn::{Config, Identity, NodeId};
use p2p_conn_mconn::blocksync::{BlocksyncMessage, BLOCKSYNC_CHANNEL, MAX_STATUS_MESSAGE_SIZE};
use p2p_conn_mconn::pex::{NetAddress, PexMessage, MAX_PEX_MESSAGE_SIZE, PEX_CHANNEL};
use p2p_conn_mconn::statesync::{Snapshot, StatesyncMessage, RECENT_SNAPSHOTS, SNAPSHOT_CHANNEL};
use p2p_conn_mconn::{ChannelDescriptor, MConnCloseReason, MConnConfig, MConnection, Received};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::report::{Blocks, Report, Status, Target, Verdict};
use crate::conn;
use crate::error::describe;
use crate::error::CliError;

/// The moniker the crawler announces, so that operators see what it was.
pub const CRAWL_MONIKER: &str = "p2p-conn-crawl";

/// The listen address the crawler announces: `0.0.0.0:0`, which no one can
/// dial, so that no node adds us to its address book or passes us on.
/// CometBFT accepts it in a NodeInfo: `DefaultNodeInfo.Validate` only needs
/// `NewNetAddressString(ID@listen_addr)` to parse (an IP, a port that fits
/// 16 bits; 0 does). A node adds an inbound peer's self-reported address to
/// its book (`pex.Reactor.AddPeer`), but `addrBook.addAddress` first
/// requires `NetAddress.Valid`, which refuses an unspecified IP ("invalid
/// IP", logged at debug level only): so the address is dropped, never
/// dialed and never gossiped (v0.38.26 and v1.0.1 alike).
pub const CRAWL_LISTEN_ADDR: &str = "0.0.0.0:0";

/// How a probe goes.
#[derive(Clone, Copy, Debug)]
pub struct ProbeOptions {
    /// Bound on the connect, the handshake, and the wait for the answer.
    pub timeout: Duration,
    /// How long to keep the connection after the answer, to see whether
    /// the node hangs up (zero: not at all).
    pub watch: Duration,
    /// Also ask for the node's state-sync snapshots, when it lists the
    /// snapshot channel (`0x60`): one `SnapshotsRequest` with the PEX
    /// request (sent just before it), and up to [`SNAPSHOT_WAIT`] past the
    /// answer for the rest of the listing.
    pub snapshots: bool,
}

impl ProbeOptions {
    /// A crawl's probe: `timeout`, no watch, no snapshots.
    pub fn new(timeout: Duration) -> ProbeOptions {
        ProbeOptions {
            timeout,
            watch: Duration::ZERO,
            snapshots: false,
        }
    }
}

/// How long a probe waits, past the PEX answer, for the rest of a node's
/// snapshot listing (asked with the PEX request, so it mostly comes with
/// the answer): CometBFT sends nothing when it has no snapshot, so the
/// wait is the price of asking.
pub const SNAPSHOT_WAIT: Duration = Duration::from_millis(300);

/// The most bytes of one snapshot message taken (CometBFT allows 4 MB, for
/// large metadata; a crawler keeps none of it): past it the connection
/// ends, after the PEX answer is in.
pub const SNAPSHOT_MESSAGE_LIMIT: usize = 1 << 20;

/// Bound on the polite close (flush and FIN) after the answer.
const CLOSE_LIMIT: Duration = Duration::from_secs(1);

/// How long to wait for a node's blocksync status once its PEX answer is
/// in (it sends one on connect, and answers the `StatusRequest` sent
/// before the `PexRequest`, both before the answer, so this is rarely
/// spent).
const STATUS_WAIT: Duration = Duration::from_secs(1);

/// Visits one node: TCP connect (within `timeout`), the secret-connection
/// handshake (within `timeout`), the NodeInfo exchange, then one
/// `PexRequest` over MConnection and the node's `PexAddrs`, then a hang-up.
///
/// - The node's NodeInfo is read first. It is checked by CometBFT's rules
///   (`Validate`, and its ID against the authenticated key); then `decide`
///   (the scheduler's [`claim`](super::scheduler::Scheduler::claim)) says
///   whether to ask. When not (another network, a node already visited, an
///   ID other than the address named, no PEX channel), we hang up before
///   sending anything more: no NodeInfo of ours, no request.
/// - Otherwise we announce the node's own network and block protocol, the
///   channels PEX (`0x00`), blocksync (`0x40`, when the node lists it)
///   and state sync (`0x60`, when it lists it and snapshots are asked
///   for), so no other reactor sends us anything, the moniker
///   [`CRAWL_MONIKER`] and the listen address [`CRAWL_LISTEN_ADDR`]; then
///   run the library's MConnection adapter ([`MConnection::spawn`], those
///   channels only), send one `StatusRequest` and one `SnapshotsRequest`
///   where those channels are open, then ONE `PexRequest` (last, because
///   a seed hangs up once it has answered it), and wait up to `timeout`
///   for `PexAddrs`: pings are answered (by the
///   adapter), any other message (a `PexRequest` of the node's own) is
///   counted and not answered, so we never send an unsolicited `PexAddrs`.
///   Then we close
///   ([`MConnSender::close`](p2p_conn_mconn::MConnSender::close)).
///
/// The crawler has no packet loop of its own: every MConnection rule
/// (framing, keepalive, caps) is the library's.
///
/// The whole visit is also bounded by the caller (the scheduler's
/// deadline). Dropping the future before the MConnection runs closes the
/// socket; after, it drops the adapter's sender and receiver, which closes
/// the connection (queued bytes sent, then the stream shut down) on the
/// adapter's own task. That close (here after the answer too, where we
/// wait for it only [`CLOSE_LIMIT`]) is not bounded in time by the adapter:
/// a node that stops reading once our pongs fill its TCP window (only a
/// flood of its pings could do that) holds the adapter's task and socket
/// until it reads again or the socket fails.
///
/// With a `watch` above zero the connection stays open that long after
/// the answer (pings answered, nothing sent), and the report says whether
/// and when the node hung up ([`Report::closed_after_answer`]): a node in
/// seed mode answers and hangs up at once.
pub async fn probe(
    target: &Target,
    identity: &Identity,
    opts: &ProbeOptions,
    decide: impl FnOnce(NodeId, &NodeInfo) -> Verdict,
) -> Report {
    let (timeout, watch) = (opts.timeout, opts.watch);
    let tcp = match conn::connect(target.addr.as_str(), timeout).await {
        Ok(tcp) => tcp,
        Err(CliError::Connect { source, .. })
            if source.kind() == std::io::ErrorKind::ConnectionRefused =>
        {
            return Report::failed(Status::Refused(source.to_string()))
        }
        Err(CliError::ConnectTimeout { .. }) => return Report::failed(Status::Timeout),
        Err(e) => return Report::failed(Status::ConnectFailed(e.to_string())),
    };
    let _ = tcp.set_nodelay(true);
    let cfg = Config::default().handshake_timeout(timeout);
    let started = Instant::now();
    let mut sc = match ptokio::handshake(tcp, identity, &cfg).await {
        Ok(sc) => sc,
        Err(p2p_conn::Error::Timeout(_)) => return Report::failed(Status::Timeout),
        Err(e) => return Report::failed(Status::HandshakeFailed(describe(&e))),
    };
    let mut report = Report::failed(Status::Ok);
    report.handshake = Some(started.elapsed());
    let node_id = sc.remote_node_id();
    report.node_id = Some(node_id);

    let theirs = match nodeinfo::tokio::read(&mut sc).await {
        Ok(info) => info,
        Err(e) => {
            report.status = Status::NodeInfoRefused(nodeinfo_error(e));
            return report;
        }
    };
    let mut broken = theirs.validate();
    broken.extend(theirs.check_id(node_id).err());
    report.info = Some(theirs.clone());
    if !broken.is_empty() {
        let why: Vec<String> = broken.iter().map(ToString::to_string).collect();
        report.status = Status::NodeInfoRefused(format!(
            "the node's NodeInfo breaks a rule: {}",
            why.join("; ")
        ));
        return report;
    }
    if let Verdict::Stop(status) = decide(node_id, &theirs) {
        report.status = status;
        let _ = tokio::time::timeout(CLOSE_LIMIT, sc.shutdown()).await;
        return report;
    }
    let mut ours = NodeInfo::new(identity.node_id(), theirs.network.clone());
    ours.protocol_version.block = theirs.protocol_version.block;
    ours.moniker = CRAWL_MONIKER.to_string();
    ours.listen_addr = CRAWL_LISTEN_ADDR.to_string();
    // Blocksync too when the node has it: it then tells us its range.
    let blocks = theirs.channels.contains(&BLOCKSYNC_CHANNEL);
    let snapshots = opts.snapshots && theirs.channels.contains(&SNAPSHOT_CHANNEL);
    ours.channels = vec![PEX_CHANNEL];
    if blocks {
        ours.channels.push(BLOCKSYNC_CHANNEL);
    }
    if snapshots {
        ours.channels.push(SNAPSHOT_CHANNEL);
    }
    if let Err(e) = nodeinfo::tokio::write(&mut sc, &ours).await {
        report.status = Status::NodeInfoRefused(nodeinfo_error(e));
        return report;
    }

    // MConnection: one request, then messages until the answer.
    let mut closed = None;
    let mut range = None;
    let mut listed = None;
    let asked = Asked {
        timeout,
        watch,
        blocks,
        snapshots,
    };
    let got = ask(
        sc,
        &asked,
        &mut report.ignored_messages,
        &mut closed,
        &mut range,
        &mut listed,
    )
    .await;
    match got {
        Ok(addrs) => {
            report.answered = Some(addrs.len());
            report.addrs = Some(addrs);
            report.closed_after_answer = closed;
            report.blocks = range;
            report.snapshots = listed;
        }
        Err(Unanswered::Timeout) => report.status = Status::Timeout,
        Err(Unanswered::Failed(why)) => report.status = Status::NoAnswer(why),
    }
    report
}

/// What [`ask`] asks for and how long it waits.
struct Asked {
    /// Bound on the wait for the PEX answer.
    timeout: Duration,
    /// How long to watch the connection after the answer.
    watch: Duration,
    /// Whether to ask for the node's blocksync status too.
    blocks: bool,
    /// Whether to ask for its snapshots after the answer.
    snapshots: bool,
}

/// The verdict, for [`probe`]'s `decide`, on a node dialed as `expected`
/// that must be on `network` (when given): stop if it authenticated as
/// another ID or is on another network; else, when `ask`, ask it if it has
/// PEX (`NoPex` if not); when not asking, stop with everything checked
/// (`Ok`). `check` and `seed` decide by it; `crawl` by its scheduler.
pub fn expected(
    expected: NodeId,
    network: Option<&str>,
    ask: bool,
    id: NodeId,
    info: &NodeInfo,
) -> Verdict {
    if id != expected {
        Verdict::Stop(Status::IdMismatch { expected })
    } else if network.is_some_and(|n| n != info.network) {
        Verdict::Stop(Status::OtherNetwork)
    } else if !ask {
        Verdict::Stop(Status::Ok)
    } else if !info.channels.contains(&PEX_CHANNEL) {
        Verdict::Stop(Status::NoPex)
    } else {
        Verdict::Ask
    }
}

/// Why [`ask`] has no addresses.
enum Unanswered {
    /// No `PexAddrs` within the timeout.
    Timeout,
    /// The connection ended or failed first, or the answer was malformed.
    Failed(String),
}

/// Runs an MConnection with the one PEX channel over `sc` (the library's
/// adapter, [`MConnection::spawn`]: it answers pings), sends ONE
/// `PexRequest`, and waits up to `timeout` for `PexAddrs`, counting any
/// other message in `ignored` and answering none. Then it closes: the
/// adapter sends what is queued (a pong at most) and shuts the stream down,
/// waited for up to [`CLOSE_LIMIT`] (after a `watch` of the connection, if
/// asked: see [`probe`]). Dropped early (the scheduler's
/// deadline), the sender and receiver close the connection the same way.
async fn ask(
    sc: SecretConnection<TcpStream>,
    asked: &Asked,
    ignored: &mut u64,
    closed_after: &mut Option<Duration>,
    range: &mut Option<Blocks>,
    listed: &mut Option<Vec<Snapshot>>,
) -> Result<Vec<NetAddress>, Unanswered> {
    // The requests go out in this order (sent in it, and on a tie the
    // first channel listed sends first): a node handles a connection's
    // messages in the order they arrive, and a seed hangs up once it has
    // answered the `PexRequest` (after flushing what it queued), so the
    // status and snapshot requests must come before it.
    let mut channels = Vec::new();
    if asked.blocks {
        // Status messages only: a node sends nothing larger unasked.
        channels.push(
            ChannelDescriptor::new(BLOCKSYNC_CHANNEL)
                .with_recv_message_capacity(MAX_STATUS_MESSAGE_SIZE),
        );
    }
    if asked.snapshots {
        channels.push(
            ChannelDescriptor::new(SNAPSHOT_CHANNEL)
                .with_recv_message_capacity(SNAPSHOT_MESSAGE_LIMIT),
        );
    }
    channels
        .push(ChannelDescriptor::new(PEX_CHANNEL).with_recv_message_capacity(MAX_PEX_MESSAGE_SIZE));
    let (tx, mut rx) = MConnection::spawn(sc, &channels, MConnConfig::default())
        .map_err(|e| Unanswered::Failed(e.to_string()))?;
    // A blocksync status, if the message is one.
    let status = |channel: u8, data: &[u8]| match (channel, BlocksyncMessage::decode(data)) {
        (BLOCKSYNC_CHANNEL, Ok(BlocksyncMessage::StatusResponse { height, base })) => {
            Some(Blocks { height, base })
        }
        _ => None,
    };
    let mut found: Vec<Snapshot> = Vec::new();
    let answer = tokio::time::timeout(asked.timeout, async {
        if asked.blocks {
            tx.send(BLOCKSYNC_CHANNEL, BlocksyncMessage::StatusRequest.encode())
                .await
                .map_err(|e| Unanswered::Failed(e.to_string()))?;
        }
        if asked.snapshots {
            tx.send(
                SNAPSHOT_CHANNEL,
                StatesyncMessage::SnapshotsRequest.encode(),
            )
            .await
            .map_err(|e| Unanswered::Failed(e.to_string()))?;
        }
        tx.send(PEX_CHANNEL, PexMessage::Request.encode())
            .await
            .map_err(|e| Unanswered::Failed(e.to_string()))?;
        loop {
            match rx.recv().await {
                Some(Received::Message { channel, data }) if channel == BLOCKSYNC_CHANNEL => {
                    match status(channel, &data) {
                        Some(b) => *range = Some(b),
                        None => *ignored += 1,
                    }
                }
                // Its listing, or a state-syncing node's own
                // SnapshotsRequest (not answered).
                Some(Received::Message { channel, data }) if channel == SNAPSHOT_CHANNEL => {
                    match StatesyncMessage::decode(&data, SNAPSHOT_MESSAGE_LIMIT) {
                        Ok(StatesyncMessage::SnapshotsResponse(s))
                            if found.len() < RECENT_SNAPSHOTS =>
                        {
                            found.push(s)
                        }
                        _ => *ignored += 1,
                    }
                }
                Some(Received::Message { data, .. }) => match PexMessage::decode(&data) {
                    Ok(PexMessage::Addrs(addrs)) => break Ok(addrs),
                    Ok(PexMessage::Request) => *ignored += 1,
                    Err(e) => break Err(Unanswered::Failed(format!("PEX: {e}"))),
                },
                Some(Received::Closed(why)) => break Err(Unanswered::Failed(closed(&why))),
                // `Received` may grow; `None` only follows `Closed`.
                Some(_) => {}
                None => break Err(Unanswered::Failed("the connection ended".into())),
            }
        }
    })
    .await
    .unwrap_or(Err(Unanswered::Timeout));
    // The status comes on connect, before the answer; if it has not, wait
    // a little for the one our request asked for.
    if answer.is_ok() && asked.blocks && range.is_none() {
        let _ = tokio::time::timeout(STATUS_WAIT, async {
            while let Some(event) = rx.recv().await {
                match event {
                    Received::Message { channel, data } => match status(channel, &data) {
                        Some(b) => {
                            *range = Some(b);
                            break;
                        }
                        None => *ignored += 1,
                    },
                    Received::Closed(_) => break,
                    _ => {}
                }
            }
        })
        .await;
    }
    // The listing was asked with the PEX request and mostly comes with its
    // answer (one message per snapshot, or nothing when there is none):
    // what is still on its way gets [`SNAPSHOT_WAIT`].
    if answer.is_ok() && asked.snapshots {
        if found.len() < RECENT_SNAPSHOTS {
            let _ = tokio::time::timeout(SNAPSHOT_WAIT, async {
                while let Some(event) = rx.recv().await {
                    match event {
                        Received::Message { channel, data } if channel == SNAPSHOT_CHANNEL => {
                            match StatesyncMessage::decode(&data, SNAPSHOT_MESSAGE_LIMIT) {
                                Ok(StatesyncMessage::SnapshotsResponse(s)) => {
                                    found.push(s);
                                    if found.len() >= RECENT_SNAPSHOTS {
                                        break;
                                    }
                                }
                                _ => *ignored += 1,
                            }
                        }
                        Received::Message { channel, data } => match status(channel, &data) {
                            Some(b) => *range = Some(b),
                            None => *ignored += 1,
                        },
                        Received::Closed(_) => break,
                        _ => {}
                    }
                }
            })
            .await;
        }
        *listed = Some(std::mem::take(&mut found));
    }
    let watch = asked.watch;
    if answer.is_ok() && !watch.is_zero() {
        let answered = Instant::now();
        *closed_after = tokio::time::timeout(watch, async {
            loop {
                match rx.recv().await {
                    Some(Received::Closed(_)) | None => break answered.elapsed(),
                    Some(Received::Message { .. }) => *ignored += 1,
                    Some(_) => {}
                }
            }
        })
        .await
        .ok();
    }
    tx.close();
    let _ = tokio::time::timeout(CLOSE_LIMIT, async {
        while let Some(event) = rx.recv().await {
            if matches!(event, Received::Closed(_)) {
                break;
            }
        }
    })
    .await;
    answer
}

/// The end of the connection, worded as before the adapter.
fn closed(why: &MConnCloseReason) -> String {
    match why {
        MConnCloseReason::PeerClosed { .. } => "the node closed the connection".into(),
        MConnCloseReason::Transport(e) => describe(e),
        MConnCloseReason::Protocol(e) => format!("MConnection: {e}"),
        other => other.to_string(),
    }
}

fn nodeinfo_error(e: NodeInfoError) -> String {
    match e {
        NodeInfoError::Io(io) => describe(&p2p_conn::Error::from_io(io)),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A node in seed mode, as CometBFT runs one: it handles the messages
    /// of a connection one at a time in the order they arrived (its
    /// reactors' `Receive` is called on the connection's read loop), and on
    /// a `PexRequest` it answers, flushes what it has queued and hangs up
    /// (`FlushStop`). The status its blocksync reactor sends on connect is
    /// lost here, as it is when the PEX answer's hang-up wins the race with
    /// the reactor's `AddPeer`.
    async fn seed(l: TcpListener, identity: Identity) {
        let (tcp, _) = l.accept().await.unwrap();
        let mut sc = ptokio::handshake(tcp, &identity, &Config::default())
            .await
            .unwrap();
        let mut info = NodeInfo::new(identity.node_id(), "seed-chain".to_string());
        info.listen_addr = "127.0.0.1:26656".into();
        info.channels = vec![BLOCKSYNC_CHANNEL, PEX_CHANNEL];
        nodeinfo::tokio::write(&mut sc, &info).await.unwrap();
        nodeinfo::tokio::read(&mut sc).await.unwrap();
        let channels = [
            ChannelDescriptor::new(BLOCKSYNC_CHANNEL),
            ChannelDescriptor::new(PEX_CHANNEL),
        ];
        let (tx, mut rx) = MConnection::spawn(sc, &channels, MConnConfig::default()).unwrap();
        while let Some(Received::Message { channel, data }) = rx.recv().await {
            if channel == BLOCKSYNC_CHANNEL {
                if let Ok(BlocksyncMessage::StatusRequest) = BlocksyncMessage::decode(&data) {
                    let status = BlocksyncMessage::StatusResponse { height: 7, base: 1 };
                    tx.send(BLOCKSYNC_CHANNEL, status.encode()).await.unwrap();
                }
            } else if let Ok(PexMessage::Request) = PexMessage::decode(&data) {
                tx.send(PEX_CHANNEL, PexMessage::Addrs(vec![]).encode())
                    .await
                    .unwrap();
                break;
            }
        }
        tx.close();
        while rx.recv().await.is_some() {}
    }

    /// The blocksync status of a seed, which hangs up once it has answered
    /// the `PexRequest`: the status request goes first, so its answer is
    /// queued before the seed's hang-up.
    #[tokio::test]
    async fn a_seed_that_hangs_up_at_once_still_reports_its_blocks() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let node = Identity::generate();
        let id = node.node_id();
        let served = tokio::spawn(seed(l, node));
        let target = Target {
            addr,
            id: Some(id),
            depth: 0,
        };
        let opts = ProbeOptions::new(Duration::from_secs(5));
        let report = probe(&target, &Identity::generate(), &opts, |id, info| {
            expected(target.id.unwrap(), None, true, id, info)
        })
        .await;
        served.await.unwrap();
        assert_eq!(report.status, Status::Ok, "{report:?}");
        assert_eq!(report.answered, Some(0), "{report:?}");
        assert_eq!(report.blocks, Some(Blocks { height: 7, base: 1 }));
    }
}
