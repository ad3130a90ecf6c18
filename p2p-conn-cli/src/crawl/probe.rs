//! The crawl's one piece of network code: [`probe`] visits one node.

use std::time::{Duration, Instant};

use p2p_conn::io::tokio as ptokio;
use p2p_conn::mconn::pex::{PexMessage, MAX_PEX_MESSAGE_SIZE, PEX_CHANNEL};
use p2p_conn::mconn::{ChannelDescriptor, Event, MConnConfig, MConnCore};
use p2p_conn::nodeinfo::{self, NodeInfo, NodeInfoError};
use p2p_conn::{Config, Identity, NodeId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::scheduler::{Report, Status, Target, Verdict};
use crate::conn::{self, describe};
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

/// Bound on the polite close (flush and FIN) after the answer.
const CLOSE_LIMIT: Duration = Duration::from_secs(1);

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
/// - Otherwise we announce the node's own network and block protocol, only
///   channel `0x00` (PEX, so no other reactor sends us anything), the
///   moniker [`CRAWL_MONIKER`] and the listen address
///   [`CRAWL_LISTEN_ADDR`]; then send ONE `PexRequest` and read packets
///   until `PexAddrs`: pings are answered (the core queues the pong), any
///   other message (a `PexRequest` of the node's own) is counted and not
///   answered, so we never send an unsolicited `PexAddrs`.
///
/// The whole visit is bounded by the caller (the scheduler's deadline);
/// dropping the future closes the socket.
///
/// It drives the sans-IO [`MConnCore`] directly over the secret
/// connection's tokio reads and writes (one write per batch from
/// `poll_transmit`). When the library's tokio MConnection adapter lands,
/// this loop is to move onto it; nothing outside this function depends on
/// how the packets are carried.
pub async fn probe(
    target: &Target,
    identity: &Identity,
    timeout: Duration,
    decide: impl FnOnce(NodeId, &NodeInfo) -> Verdict,
) -> Report {
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
    ours.channels = vec![PEX_CHANNEL];
    if let Err(e) = nodeinfo::tokio::write(&mut sc, &ours).await {
        report.status = Status::NodeInfoRefused(nodeinfo_error(e));
        return report;
    }

    // MConnection: one request, then packets until the answer.
    let pex = ChannelDescriptor::new(PEX_CHANNEL).with_recv_message_capacity(MAX_PEX_MESSAGE_SIZE);
    let mut core = match MConnCore::new(MConnConfig::default(), &[pex], Instant::now()) {
        Ok(core) => core,
        Err(e) => {
            report.status = Status::NoAnswer(e.to_string());
            return report;
        }
    };
    if let Err(e) = core.send(PEX_CHANNEL, PexMessage::Request.encode()) {
        report.status = Status::NoAnswer(e.to_string());
        return report;
    }
    let mut out = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let answer = loop {
        out.clear();
        while core.poll_transmit(Instant::now(), &mut out, 64 * 1024) > 0 {}
        if !out.is_empty() {
            if let Err(e) = sc.send(&out).await {
                break Err(format!("write: {}", describe(&e)));
            }
        }
        let wake = core
            .poll_timeout()
            .unwrap_or_else(|| Instant::now() + timeout);
        let n = tokio::select! {
            r = sc.read(&mut buf) => match r {
                Ok(0) => break Err("the node closed the connection".to_string()),
                Ok(n) => n,
                Err(e) => break Err(format!("read: {}", describe(&p2p_conn::Error::from_io(e)))),
            },
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(wake)) => {
                if let Err(e) = core.handle_timeout(Instant::now()) {
                    break Err(e.to_string());
                }
                continue;
            }
        };
        match take(&mut core, &buf[..n], &mut report.ignored_messages) {
            Ok(Some(addrs)) => break Ok(addrs),
            Ok(None) => {}
            Err(e) => break Err(e),
        }
    };
    match answer {
        Ok(addrs) => {
            report.addrs = Some(addrs);
            let _ = tokio::time::timeout(CLOSE_LIMIT, sc.shutdown()).await;
        }
        Err(why) => report.status = Status::NoAnswer(why),
    }
    report
}

/// Feeds the peer's bytes to the core: the addresses once `PexAddrs` is
/// whole, counting the other messages in `ignored`.
fn take(
    core: &mut MConnCore,
    mut input: &[u8],
    ignored: &mut u64,
) -> Result<Option<Vec<p2p_conn::mconn::pex::NetAddress>>, String> {
    while !input.is_empty() {
        let (used, event) = core
            .handle_input(Instant::now(), input)
            .map_err(|e| format!("MConnection: {e}"))?;
        input = &input[used..];
        if let Some(Event::Message { data, .. }) = event {
            match PexMessage::decode(&data) {
                Ok(PexMessage::Addrs(addrs)) => return Ok(Some(addrs)),
                Ok(PexMessage::Request) => *ignored += 1,
                Err(e) => return Err(format!("PEX: {e}")),
            }
        } else if used == 0 && event.is_none() {
            // Only a receive rate limit holds input back; none is set.
            return Err("MConnection took no input".into());
        }
    }
    Ok(None)
}

fn nodeinfo_error(e: NodeInfoError) -> String {
    match e {
        NodeInfoError::Io(io) => describe(&p2p_conn::Error::from_io(io)),
        other => other.to_string(),
    }
}
