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
    /// request (sent just before it), and a short wait past the answer for
    /// the rest of the listing (see [`LISTING_TAIL_MIN`]).
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

/// The least a probe waits, past the node's `PexAddrs`, for the rest of
/// its snapshot listing; it waits as long as its handshake took (two
/// round trips and more), at most [`SNAPSHOT_WAIT`]. CometBFT sends
/// nothing when it has no snapshot, so some wait is the price of asking;
/// but it handles a connection's messages one at a time in the order they
/// came (its reactors' `Receive` runs on the connection's read loop), and
/// its state-sync reactor queues the whole listing (one
/// `SnapshotsResponse` per snapshot, at most 10, which its send queue of
/// 10 holds) before it returns: so by the time the node reads our
/// `PexRequest`, sent after the `SnapshotsRequest`, the listing is
/// queued, and what of it did not come before the answer is written right
/// behind it, in the same flush. Only if the node's flush timer fires
/// between the two does the rest come with the next flush, up to
/// `flush_throttle_timeout` later (100 ms by default at v0.38, 10 ms from
/// v0.39), which this wait may miss on a near node. The crawl dials on
/// meanwhile (the probe has left its slot at the answer).
pub const LISTING_TAIL_MIN: Duration = Duration::from_millis(50);

/// How long a probe of a node without PEX waits, past its blocksync
/// status, for its snapshot listing: that status may be the one the node
/// sends on connect, before it has read our `SnapshotsRequest`, so the
/// listing is not known to be queued; and, with the snapshot channel
/// only, how long past our request.
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
///   ID other than the address named; for `check` and `seed`, no PEX
///   channel), we hang up before sending anything more: no NodeInfo of
///   ours, no request. A node without PEX that the crawl visits is asked
///   for its state only (see [`probe_with`]).
/// - Otherwise we announce the node's own network and block protocol, the
///   channels PEX (`0x00`), blocksync (`0x40`, when the node lists it)
///   and state sync (`0x60`, when it lists it and snapshots are asked
///   for), so no other reactor sends us anything, the moniker
///   [`CRAWL_MONIKER`] and the listen address [`CRAWL_LISTEN_ADDR`]; then
///   run the library's MConnection adapter ([`MConnection::spawn`], those
///   channels only), send one `SnapshotsRequest` and one `StatusRequest`
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
    probe_with(target, identity, opts, decide, |_| {}).await
}

/// [`probe`], with `answered` called on the report as soon as the node's
/// answer is in, before the waits past it (the rest of the blocksync
/// status and of the snapshot listing, a `watch`): the report then holds
/// the addresses (`addrs`, which `answered` may take), the blocks and the
/// snapshots so far. The crawl's scheduler follows the addresses then
/// ([`answered`](super::scheduler::Scheduler::answered)), so that the
/// waits past the answer do not hold a dial slot. Not called when no
/// answer comes. The report returned is the one `answered` saw, with
/// what came after.
///
/// A node asked for its state only ([`Verdict::AskState`]: a node without
/// PEX) gets the `SnapshotsRequest` and the `StatusRequest` (where it
/// lists those channels; we then announce those channels only), and its
/// answer is its blocksync status; with neither channel, we hang up as
/// for [`Verdict::Stop`].
pub async fn probe_with(
    target: &Target,
    identity: &Identity,
    opts: &ProbeOptions,
    decide: impl FnOnce(NodeId, &NodeInfo) -> Verdict,
    answered: impl FnOnce(&mut Report),
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
    let pex = match decide(node_id, &theirs) {
        Verdict::Ask => true,
        Verdict::AskState(status) => {
            report.status = status;
            false
        }
        Verdict::Stop(status) => {
            report.status = status;
            let _ = tokio::time::timeout(CLOSE_LIMIT, sc.shutdown()).await;
            return report;
        }
    };
    // Blocksync too when the node has it: it then tells us its range.
    let blocks = theirs.channels.contains(&BLOCKSYNC_CHANNEL);
    let snapshots = opts.snapshots && theirs.channels.contains(&SNAPSHOT_CHANNEL);
    if !pex && !blocks && !snapshots {
        // Nothing to ask (and no channel in common).
        let _ = tokio::time::timeout(CLOSE_LIMIT, sc.shutdown()).await;
        return report;
    }
    let mut ours = NodeInfo::new(identity.node_id(), theirs.network.clone());
    ours.protocol_version.block = theirs.protocol_version.block;
    ours.moniker = CRAWL_MONIKER.to_string();
    ours.listen_addr = CRAWL_LISTEN_ADDR.to_string();
    ours.channels = Vec::new();
    if pex {
        ours.channels.push(PEX_CHANNEL);
    }
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

    // MConnection: the requests, then messages until the answer.
    let listing_tail = match (pex, report.handshake) {
        (true, Some(hs)) => hs.clamp(LISTING_TAIL_MIN, SNAPSHOT_WAIT),
        _ => SNAPSHOT_WAIT,
    };
    let asked = Asked {
        timeout,
        watch,
        pex,
        blocks,
        snapshots,
        listing_tail,
    };
    match ask(sc, &asked, &mut report, answered).await {
        Ok(()) => {}
        // Without PEX the status is the answer: without it, the node is
        // still reported as it is (no blocks known).
        Err(_) if !pex => {}
        Err(Unanswered::Timeout) => report.status = Status::Timeout,
        Err(Unanswered::Failed(why)) => report.status = Status::NoAnswer(why),
    }
    report
}

/// What [`ask`] asks for and how long it waits.
struct Asked {
    /// Bound on the wait for the answer.
    timeout: Duration,
    /// How long to watch the connection after the answer.
    watch: Duration,
    /// Whether to ask for addresses (the answer is then the node's
    /// `PexAddrs`, else its blocksync status).
    pex: bool,
    /// Whether to ask for the node's blocksync status.
    blocks: bool,
    /// Whether to ask for its snapshots.
    snapshots: bool,
    /// How long to wait past the answer for the rest of the listing.
    listing_tail: Duration,
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

/// Why [`ask`] has no answer.
enum Unanswered {
    /// No answer within the timeout.
    Timeout,
    /// The connection ended or failed first, or the answer was malformed.
    Failed(String),
}

/// A message of the node's, by channel.
enum Incoming {
    /// Its blocksync status.
    Status(Blocks),
    /// One snapshot of its listing.
    Snapshot(Snapshot),
    /// Its PEX answer.
    Addrs(Vec<NetAddress>),
    /// A malformed PEX message.
    BadPex(String),
    /// Anything else (its own `PexRequest`, `SnapshotsRequest`, ...): not
    /// answered.
    Other,
}

fn incoming(channel: u8, data: &[u8]) -> Incoming {
    match channel {
        BLOCKSYNC_CHANNEL => match BlocksyncMessage::decode(data) {
            Ok(BlocksyncMessage::StatusResponse { height, base }) => {
                Incoming::Status(Blocks { height, base })
            }
            _ => Incoming::Other,
        },
        SNAPSHOT_CHANNEL => match StatesyncMessage::decode(data, SNAPSHOT_MESSAGE_LIMIT) {
            Ok(StatesyncMessage::SnapshotsResponse(s)) => Incoming::Snapshot(s),
            _ => Incoming::Other,
        },
        _ => match PexMessage::decode(data) {
            Ok(PexMessage::Addrs(addrs)) => Incoming::Addrs(addrs),
            Ok(PexMessage::Request) => Incoming::Other,
            Err(e) => Incoming::BadPex(format!("PEX: {e}")),
        },
    }
}

/// Runs an MConnection with the channels asked over `sc` (the library's
/// adapter, [`MConnection::spawn`]: it answers pings), sends the requests
/// (a `SnapshotsRequest`, a `StatusRequest`, then ONE `PexRequest`, each
/// where asked), and waits up to `timeout` for the answer: the node's
/// `PexAddrs`, or without PEX its blocksync status. Any other message is
/// counted in the report's `ignored_messages` and not answered.
///
/// At the answer, the report gets the addresses, the blocks and the
/// snapshots so far, and goes to `answered` (the crawl follows the
/// addresses from then on, and frees the probe's slot); then the rest is
/// awaited at once, each within its own bound: the status, if it has not
/// come ([`STATUS_WAIT`]), and the rest of the snapshot listing
/// (past a PEX answer, as long as the handshake took, from
/// [`LISTING_TAIL_MIN`] to [`SNAPSHOT_WAIT`]; past a status,
/// [`SNAPSHOT_WAIT`]). Then it closes: the adapter sends what is queued
/// (a pong at most) and shuts the stream down, waited for up to
/// [`CLOSE_LIMIT`] (after a `watch` of the connection, if asked: see
/// [`probe`]). Dropped early (the scheduler's deadline), the sender and
/// receiver close the connection the same way.
async fn ask(
    sc: SecretConnection<TcpStream>,
    asked: &Asked,
    report: &mut Report,
    answered: impl FnOnce(&mut Report),
) -> Result<(), Unanswered> {
    // The requests go out in this order (sent in it, and on a tie the
    // first channel listed sends first): a node handles a connection's
    // messages in the order they arrived, and a seed hangs up once it has
    // answered the `PexRequest` (after flushing what it queued), so the
    // status and snapshot requests must come before it; and the snapshot
    // listing is queued before the status that answers a node without PEX.
    let mut channels = Vec::new();
    if asked.snapshots {
        channels.push(
            ChannelDescriptor::new(SNAPSHOT_CHANNEL)
                .with_recv_message_capacity(SNAPSHOT_MESSAGE_LIMIT),
        );
    }
    if asked.blocks {
        // Status messages only: a node sends nothing larger unasked.
        channels.push(
            ChannelDescriptor::new(BLOCKSYNC_CHANNEL)
                .with_recv_message_capacity(MAX_STATUS_MESSAGE_SIZE),
        );
    }
    if asked.pex {
        channels.push(
            ChannelDescriptor::new(PEX_CHANNEL).with_recv_message_capacity(MAX_PEX_MESSAGE_SIZE),
        );
    }
    let (tx, mut rx) = MConnection::spawn(sc, &channels, MConnConfig::default())
        .map_err(|e| Unanswered::Failed(e.to_string()))?;
    let mut range = None;
    let mut found: Vec<Snapshot> = Vec::new();
    let ignored = &mut report.ignored_messages;
    let answer = tokio::time::timeout(asked.timeout, async {
        let send = |channel, msg| {
            let tx = &tx;
            async move {
                tx.send(channel, msg)
                    .await
                    .map_err(|e| Unanswered::Failed(e.to_string()))
            }
        };
        if asked.snapshots {
            let request = StatesyncMessage::SnapshotsRequest.encode();
            send(SNAPSHOT_CHANNEL, request).await?;
        }
        if asked.blocks {
            send(BLOCKSYNC_CHANNEL, BlocksyncMessage::StatusRequest.encode()).await?;
        }
        if asked.pex {
            send(PEX_CHANNEL, PexMessage::Request.encode()).await?;
        } else if !asked.blocks {
            // Snapshots only: nothing marks an answer.
            return Ok(None);
        }
        loop {
            match rx.recv().await {
                Some(Received::Message { channel, data }) => match incoming(channel, &data) {
                    Incoming::Status(b) => {
                        range = Some(b);
                        if !asked.pex {
                            break Ok(None);
                        }
                    }
                    Incoming::Snapshot(s) if found.len() < RECENT_SNAPSHOTS => found.push(s),
                    Incoming::Addrs(addrs) => break Ok(Some(addrs)),
                    Incoming::BadPex(why) => break Err(Unanswered::Failed(why)),
                    Incoming::Snapshot(_) | Incoming::Other => *ignored += 1,
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
    let addrs = match answer {
        Ok(addrs) => addrs,
        Err(e) => {
            close(tx, rx).await;
            return Err(e);
        }
    };
    report.answered = addrs.as_ref().map(Vec::len);
    report.addrs = addrs;
    report.blocks = range;
    if asked.snapshots {
        report.snapshots = Some(found.clone());
    }
    answered(report);

    // The rest, at once. The status comes on connect, before the answer;
    // if it has not, the one our request asked for gets [`STATUS_WAIT`].
    // The listing was asked before the answer and mostly comes with it
    // (one message per snapshot, or nothing when there is none): what is
    // still on its way gets `listing_tail`: short past a PEX answer (it
    // was queued before it), [`SNAPSHOT_WAIT`] otherwise.
    let now = tokio::time::Instant::now();
    let mut status_until = (asked.blocks && range.is_none()).then_some(now + STATUS_WAIT);
    let mut listing_until =
        (asked.snapshots && found.len() < RECENT_SNAPSHOTS).then_some(now + asked.listing_tail);
    let ignored = &mut report.ignored_messages;
    loop {
        let now = tokio::time::Instant::now();
        status_until = status_until.filter(|&t| t > now);
        listing_until = listing_until.filter(|&t| t > now);
        let Some(until) = status_until.into_iter().chain(listing_until).min() else {
            break;
        };
        match tokio::time::timeout_at(until, rx.recv()).await {
            // One wait is over: see which.
            Err(_) => {}
            Ok(Some(Received::Message { channel, data })) => match incoming(channel, &data) {
                Incoming::Status(b) => {
                    range = Some(b);
                    status_until = None;
                }
                Incoming::Snapshot(s) if listing_until.is_some() => {
                    found.push(s);
                    if found.len() >= RECENT_SNAPSHOTS {
                        listing_until = None;
                    }
                }
                _ => *ignored += 1,
            },
            Ok(Some(Received::Closed(_)) | None) => break,
            Ok(Some(_)) => {}
        }
    }
    report.blocks = range;
    if asked.snapshots {
        report.snapshots = Some(found);
    }
    let watch = asked.watch;
    if !watch.is_zero() {
        let answered = Instant::now();
        report.closed_after_answer = tokio::time::timeout(watch, async {
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
    close(tx, rx).await;
    Ok(())
}

/// Closes the connection ([`MConnSender::close`](p2p_conn_mconn::MConnSender::close)):
/// what is queued is sent, then the stream is shut down, waited for up to
/// [`CLOSE_LIMIT`].
async fn close(tx: p2p_conn_mconn::MConnSender, mut rx: p2p_conn_mconn::MConnReceiver) {
    tx.close();
    let _ = tokio::time::timeout(CLOSE_LIMIT, async {
        while let Some(event) = rx.recv().await {
            if matches!(event, Received::Closed(_)) {
                break;
            }
        }
    })
    .await;
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
