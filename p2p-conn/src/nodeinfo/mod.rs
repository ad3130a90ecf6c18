//! The NodeInfo exchange: the layer right above the secret connection.
//!
//! A CometBFT node does not start talking to a peer as soon as the secret
//! connection is up. Both sides first send their `DefaultNodeInfo`, a
//! protobuf message prefixed with its length as an unsigned varint, and read
//! the other's, under the handshake timeout. The node then checks the peer's
//! NodeInfo (`Validate`), that its ID is the key the peer authenticated with,
//! and that the two are compatible (`CompatibleWith`: same block protocol,
//! same network, a channel in common). Only then does it start its reactors.
//! `spec/nodeinfo.md` gives the wire format and every rule.
//!
//! # Design
//! - [`NodeInfo`] is the message as plain Rust data. It is encoded and
//!   decoded with `prost` through private message structs declared by hand
//!   (no code generation step). String fields are read as bytes and checked
//!   for UTF-8 here, so a bad field is named in the error.
//! - [`Decoder`] is the sans-IO reader: feed it bytes, it consumes exactly
//!   the length prefix and the message, never a byte of what follows (the
//!   peer's first MConnection packet may share a frame with it). It refuses a
//!   length above its limit ([`MAX_NODE_INFO_SIZE`], CometBFT's
//!   `maxNodeInfoSize`, or less) as soon as the prefix is complete, and it
//!   allocates the message buffer only then, so a peer cannot make it
//!   allocate more than the limit.
//! - [`NodeInfo::validate`], [`NodeInfo::check_id`] and
//!   [`NodeInfo::compatible_with`] apply CometBFT's rules and return every
//!   broken rule, each named by a [`Rule`], not just the first.
//! - [`tokio`] and [`blocking`] run the exchange over a
//!   [`crate::io`] connection (or any buffered stream).
//!
//! # Not provided
//! - Host names in `listen_addr` are checked for syntax only. CometBFT also
//!   resolves them (DNS), which a validator of untrusted input should not do
//!   by default.
//! - Duplicate-peer and self-connection checks: they need the node's peer
//!   set.
//! - Timeouts: wrap the exchange in `tokio::time::timeout` or set socket
//!   timeouts (CometBFT gives it its own handshake-timeout window).

use std::fmt;

use crate::NodeId;

#[cfg(feature = "tokio")]
pub mod tokio;

pub mod blocking;

/// The largest NodeInfo message CometBFT reads (`maxNodeInfoSize`), in bytes,
/// length prefix excluded.
pub const MAX_NODE_INFO_SIZE: usize = 10240;

/// The most channels a valid NodeInfo lists (`maxNumChannels`).
pub const MAX_CHANNELS: usize = 16;

/// CometBFT's p2p protocol version in v1.x and v2.x (`version.P2PProtocol`).
/// v0.34 to v0.38 announce 8; no node checks the peer's value.
pub const P2P_PROTOCOL: u64 = 9;

/// The block protocol version of every CometBFT release
/// (`version.BlockProtocol`). Peers must announce the same one.
pub const BLOCK_PROTOCOL: u64 = 11;

/// The longest varint length prefix (a `u64`).
const MAX_VARINT_LEN: usize = 10;

/// The versions a node announces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProtocolVersion {
    /// The p2p protocol (informational).
    pub p2p: u64,
    /// The block protocol: must match between peers.
    pub block: u64,
    /// The application's version, as the application reports it.
    pub app: u64,
}

/// A node's `DefaultNodeInfo`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeInfo {
    /// The versions the node speaks.
    pub protocol_version: ProtocolVersion,
    /// The node ID it claims: 40 lowercase hex digits, which must be the ID
    /// of the key it authenticated with.
    pub id: String,
    /// Where it accepts connections (`host:port`, as the node announces it;
    /// not authenticated).
    pub listen_addr: String,
    /// The network (chain ID).
    pub network: String,
    /// The software version.
    pub version: String,
    /// The reactor channels it serves, one byte each.
    pub channels: Vec<u8>,
    /// A human-readable name.
    pub moniker: String,
    /// `"on"`, `"off"` or empty: whether the node indexes transactions.
    pub tx_index: String,
    /// Its RPC listen address, if it announces one.
    pub rpc_address: String,
}

/// Why a NodeInfo could not be read or written. Every variant ends the
/// exchange; drop the connection.
#[derive(Debug, thiserror::Error)]
pub enum NodeInfoError {
    /// The length prefix is not a valid unsigned varint (more than 10 bytes,
    /// or a value above `u64::MAX`).
    #[error("the NodeInfo length prefix is not a valid varint")]
    BadLength,
    /// The peer announced a longer message than the limit. Nothing was
    /// allocated for it.
    #[error("the peer announced a {len}-byte NodeInfo; the limit is {limit} bytes")]
    TooLarge {
        /// The announced length.
        len: u64,
        /// The limit in force.
        limit: usize,
    },
    /// The stream ended before the whole message arrived.
    #[error("the connection ended after {received} bytes of the NodeInfo{}", expected_suffix(*.expected))]
    Truncated {
        /// Bytes received, length prefix included.
        received: usize,
        /// The whole length (prefix included), once the prefix was read.
        expected: Option<usize>,
    },
    /// The message is not a `DefaultNodeInfo` protobuf.
    #[error("the NodeInfo is not valid protobuf: {0}")]
    Malformed(String),
    /// A string field holds bytes that are not UTF-8.
    #[error("the NodeInfo field `{0}` is not UTF-8")]
    NotUtf8(&'static str),
    /// Our own NodeInfo encodes to more than [`MAX_NODE_INFO_SIZE`] bytes; a
    /// CometBFT peer would refuse it.
    #[error("our NodeInfo encodes to {0} bytes; peers accept at most {MAX_NODE_INFO_SIZE}")]
    OursTooLarge(usize),
    /// The transport failed (the secret connection's own errors arrive here,
    /// see [`crate::Error::from_io`]).
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

fn expected_suffix(expected: Option<usize>) -> String {
    match expected {
        Some(n) => format!(" (expected {n})"),
        None => " (inside its length prefix)".to_string(),
    }
}

/// A CometBFT rule a NodeInfo can break.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// `Validate`: the ID is 40 hex digits (CometBFT checks it as part of the
    /// listen address).
    IdFormat,
    /// `Validate`: `ID@listen_addr` parses as a network address.
    ListenAddr,
    /// `Validate`: the version, if present, is printable ASCII and not blank.
    Version,
    /// `Validate`: at most [`MAX_CHANNELS`] channels.
    ChannelCount,
    /// `Validate`: no channel twice.
    DuplicateChannel,
    /// `Validate`: the moniker is non-empty printable ASCII, not blank.
    Moniker,
    /// `Validate`: `tx_index` is `on`, `off` or empty.
    TxIndex,
    /// `Validate`: the RPC address, if present, is printable ASCII and not
    /// blank.
    RpcAddress,
    /// The transport: the NodeInfo's ID is the ID of the key the peer
    /// authenticated with.
    IdMatchesKey,
    /// `CompatibleWith`: the same block protocol version.
    BlockVersion,
    /// `CompatibleWith`: the same network.
    Network,
    /// `CompatibleWith`: a channel in common (unless one side lists none).
    CommonChannel,
}

impl Rule {
    /// A stable short name for logs and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Rule::IdFormat => "id_format",
            Rule::ListenAddr => "listen_addr",
            Rule::Version => "version",
            Rule::ChannelCount => "channel_count",
            Rule::DuplicateChannel => "duplicate_channel",
            Rule::Moniker => "moniker",
            Rule::TxIndex => "tx_index",
            Rule::RpcAddress => "rpc_address",
            Rule::IdMatchesKey => "id_matches_key",
            Rule::BlockVersion => "block_version",
            Rule::Network => "network",
            Rule::CommonChannel => "common_channel",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One broken rule, with what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The rule.
    pub rule: Rule,
    /// What the NodeInfo held that broke it.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.rule, self.detail)
    }
}

fn violation(rule: Rule, detail: impl Into<String>) -> Violation {
    Violation {
        rule,
        detail: detail.into(),
    }
}

impl NodeInfo {
    /// A NodeInfo for `id` on `network` that a CometBFT node accepts: the
    /// current protocol versions, this crate's version, moniker
    /// `p2p-conn`, `tx_index` off, no channels and no listen address of its
    /// own (`0.0.0.0:0`). Set the fields to announce more.
    ///
    /// With no channels, a node completes the exchange and then refuses to
    /// keep the peer ("no common channels"), which is what a probe wants:
    /// no reactor traffic ever flows to it.
    pub fn new(id: NodeId, network: impl Into<String>) -> NodeInfo {
        NodeInfo {
            protocol_version: ProtocolVersion {
                p2p: P2P_PROTOCOL,
                block: BLOCK_PROTOCOL,
                app: 0,
            },
            id: id.to_string(),
            listen_addr: "0.0.0.0:0".to_string(),
            network: network.into(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            channels: Vec::new(),
            moniker: "p2p-conn".to_string(),
            tx_index: "off".to_string(),
            rpc_address: String::new(),
        }
    }

    /// The claimed ID as a [`NodeId`], if it is 40 hex digits.
    pub fn node_id(&self) -> Option<NodeId> {
        self.id.parse().ok()
    }

    /// The message with its varint length prefix, as it goes on the wire.
    pub fn encode_delimited(&self) -> Result<Vec<u8>, NodeInfoError> {
        use prost::Message;
        let msg = wire::NodeInfo::from(self);
        let len = msg.encoded_len();
        if len > MAX_NODE_INFO_SIZE {
            return Err(NodeInfoError::OursTooLarge(len));
        }
        Ok(msg.encode_length_delimited_to_vec())
    }

    /// Decodes a message body (no length prefix).
    pub fn decode(body: &[u8]) -> Result<NodeInfo, NodeInfoError> {
        use prost::Message;
        let msg =
            wire::NodeInfo::decode(body).map_err(|e| NodeInfoError::Malformed(e.to_string()))?;
        NodeInfo::try_from(msg)
    }

    /// CometBFT's `DefaultNodeInfo.Validate`: every rule this NodeInfo
    /// breaks, in CometBFT's order (empty when valid). Host names in
    /// `listen_addr` are checked for syntax, not resolved.
    pub fn validate(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        if self.node_id().is_none() {
            out.push(violation(
                Rule::IdFormat,
                format!("{:?} is not 40 hex digits", self.id),
            ));
        }
        if let Err(why) = check_listen_addr(&self.listen_addr) {
            out.push(violation(
                Rule::ListenAddr,
                format!("{:?}: {why}", self.listen_addr),
            ));
        }
        check_text(&mut out, Rule::Version, &self.version, true);
        if self.channels.len() > MAX_CHANNELS {
            out.push(violation(
                Rule::ChannelCount,
                format!("{} channels; at most {MAX_CHANNELS}", self.channels.len()),
            ));
        }
        let mut seen = [false; 256];
        for &ch in &self.channels {
            if std::mem::replace(&mut seen[usize::from(ch)], true) {
                out.push(violation(
                    Rule::DuplicateChannel,
                    format!("channel {ch:#04x} is listed twice"),
                ));
                break;
            }
        }
        check_text(&mut out, Rule::Moniker, &self.moniker, false);
        if !matches!(self.tx_index.as_str(), "" | "on" | "off") {
            out.push(violation(
                Rule::TxIndex,
                format!("{:?} is not \"on\", \"off\" or empty", self.tx_index),
            ));
        }
        check_text(&mut out, Rule::RpcAddress, &self.rpc_address, true);
        out
    }

    /// The transport's check: the claimed ID is the ID of the key the peer
    /// authenticated with (compared as CometBFT does, as lowercase hex text).
    pub fn check_id(&self, authenticated: NodeId) -> Result<(), Violation> {
        let expected = authenticated.to_string();
        if self.id == expected {
            Ok(())
        } else {
            Err(violation(
                Rule::IdMatchesKey,
                format!(
                    "the NodeInfo claims {:?} but the peer authenticated as {expected}",
                    self.id
                ),
            ))
        }
    }

    /// CometBFT's `CompatibleWith`, from this node's side: every rule that
    /// makes `other` incompatible with us (empty when compatible). If we list
    /// no channels, any channels will do, as in CometBFT.
    pub fn compatible_with(&self, other: &NodeInfo) -> Vec<Violation> {
        let mut out = Vec::new();
        if self.protocol_version.block != other.protocol_version.block {
            out.push(violation(
                Rule::BlockVersion,
                format!(
                    "the peer is on block protocol {}, we are on {}",
                    other.protocol_version.block, self.protocol_version.block
                ),
            ));
        }
        if self.network != other.network {
            out.push(violation(
                Rule::Network,
                format!(
                    "the peer is on network {:?}, we are on {:?}",
                    other.network, self.network
                ),
            ));
        }
        if !self.channels.is_empty() && !self.channels.iter().any(|c| other.channels.contains(c)) {
            out.push(violation(
                Rule::CommonChannel,
                format!(
                    "no common channel: ours {}, the peer's {}",
                    hex::encode(&self.channels),
                    hex::encode(&other.channels)
                ),
            ));
        }
        out
    }
}

/// The text rules of `Validate`: `value` must be [`is_ascii_text`], or empty
/// where `may_be_empty`.
fn check_text(out: &mut Vec<Violation>, rule: Rule, value: &str, may_be_empty: bool) {
    if (may_be_empty && value.is_empty()) || is_ascii_text(value) {
        return;
    }
    let non_empty = if may_be_empty { "" } else { "non-empty " };
    out.push(violation(
        rule,
        format!("{value:?} is not {non_empty}printable ASCII with something besides spaces"),
    ));
}

/// CometBFT's `IsASCIIText` and `ASCIITrim(s) != ""`: non-empty, every byte
/// printable ASCII (32 to 126), and not only spaces.
fn is_ascii_text(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (32..=126).contains(&b)) && s.bytes().any(|b| b != b' ')
}

/// CometBFT's `NewNetAddressString(ID@addr)` after the ID: an optional
/// `scheme://`, then Go's `net.SplitHostPort`, a non-empty host (an IP, or a
/// name, which CometBFT would resolve), and a decimal port below 65536.
fn check_listen_addr(addr: &str) -> Result<(), String> {
    // `removeProtocolIfDefined`: the part between the first and the second
    // "://".
    let addr = match addr.split("://").nth(1) {
        Some(rest) => rest,
        None => addr,
    };
    let (host, port) = split_host_port(addr)?;
    if host.is_empty() {
        return Err("the host is empty".into());
    }
    if host.parse::<std::net::IpAddr>().is_err()
        && !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err(format!("{host:?} is neither an IP address nor a host name"));
    }
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) || port.parse::<u16>().is_err()
    {
        return Err(format!("{port:?} is not a port number"));
    }
    Ok(())
}

/// Go's `net.SplitHostPort`: `host:port` or `[host]:port`.
fn split_host_port(s: &str) -> Result<(&str, &str), String> {
    let colon = s.rfind(':').ok_or("missing port")?;
    // After the host, no '[' and no ']' may follow (Go's `j` and `k`).
    let (host, j, k) = if let Some(inner) = s.strip_prefix('[') {
        let end = inner.find(']').ok_or("missing ']'")? + 1;
        if end + 1 != colon {
            return Err("missing port or too many colons".into());
        }
        (&s[1..end], 1, end + 1)
    } else {
        let host = &s[..colon];
        if host.contains(':') {
            return Err("too many colons".into());
        }
        (host, 0, 0)
    };
    if s[j..].contains('[') || s[k..].contains(']') {
        return Err("unexpected bracket".into());
    }
    Ok((host, &s[colon + 1..]))
}

/// Sans-IO reader of one length-prefixed NodeInfo.
///
/// ```
/// use p2p_conn::nodeinfo::{Decoder, NodeInfo};
/// use p2p_conn::Identity;
///
/// let ours = NodeInfo::new(Identity::generate().node_id(), "test-chain");
/// let wire = ours.encode_delimited().unwrap();
/// let mut dec = Decoder::new();
/// let (used, got) = dec.feed(&wire[..3]).unwrap();
/// assert_eq!((used, got), (3, None));
/// let (used, got) = dec.feed(&wire[3..]).unwrap();
/// assert_eq!(used, wire.len() - 3);
/// assert_eq!(got, Some(ours));
/// ```
#[derive(Debug)]
pub struct Decoder {
    limit: usize,
    state: State,
}

#[derive(Debug)]
enum State {
    /// Reading the varint: its value so far and how many bytes it had.
    Prefix { value: u64, bytes: usize },
    /// Reading the body into a buffer of exactly its length.
    Body {
        prefix: usize,
        buf: Vec<u8>,
        len: usize,
    },
    /// Finished or failed: feeding more is an error.
    Done,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

impl Decoder {
    /// A decoder with CometBFT's limit, [`MAX_NODE_INFO_SIZE`].
    pub fn new() -> Decoder {
        Decoder::with_limit(MAX_NODE_INFO_SIZE)
    }

    /// A decoder refusing messages longer than `limit` bytes (capped at
    /// [`MAX_NODE_INFO_SIZE`]).
    pub fn with_limit(limit: usize) -> Decoder {
        Decoder {
            limit: limit.min(MAX_NODE_INFO_SIZE),
            state: State::Prefix { value: 0, bytes: 0 },
        }
    }

    /// Consumes what it needs of `input`: returns how many bytes it took and
    /// the NodeInfo once complete. Bytes after the message are never taken.
    /// After an error or a complete message, the decoder is spent.
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<NodeInfo>), NodeInfoError> {
        let mut used = 0;
        loop {
            match &mut self.state {
                State::Prefix { value, bytes } => {
                    let Some(&b) = input.get(used) else {
                        return Ok((used, None));
                    };
                    used += 1;
                    // Go's binary.ReadUvarint: at most 10 bytes, and the
                    // tenth may only carry the top bit of the u64.
                    if *bytes == MAX_VARINT_LEN - 1 && b > 1 {
                        self.state = State::Done;
                        return Err(NodeInfoError::BadLength);
                    }
                    *value |= u64::from(b & 0x7f) << (7 * *bytes);
                    *bytes += 1;
                    if b & 0x80 != 0 {
                        // At most nine bytes so far: the tenth, checked
                        // above, cannot continue.
                        continue;
                    }
                    let (len, prefix) = (*value, *bytes);
                    if len > self.limit as u64 {
                        self.state = State::Done;
                        return Err(NodeInfoError::TooLarge {
                            len,
                            limit: self.limit,
                        });
                    }
                    let len = len as usize; // at most the limit
                    self.state = State::Body {
                        prefix,
                        buf: Vec::with_capacity(len),
                        len,
                    };
                }
                State::Body { buf, len, .. } => {
                    let take = (*len - buf.len()).min(input.len() - used);
                    buf.extend_from_slice(&input[used..used + take]);
                    used += take;
                    if buf.len() < *len {
                        return Ok((used, None));
                    }
                    let body = std::mem::take(buf);
                    self.state = State::Done;
                    return NodeInfo::decode(&body).map(|info| (used, Some(info)));
                }
                State::Done => {
                    return Err(NodeInfoError::Malformed(
                        "the decoder was fed after it finished".into(),
                    ))
                }
            }
        }
    }

    /// The error for an end of stream now (the message is incomplete).
    pub fn eof(&self) -> NodeInfoError {
        match &self.state {
            State::Prefix { bytes, .. } => NodeInfoError::Truncated {
                received: *bytes,
                expected: None,
            },
            State::Body { prefix, buf, len } => NodeInfoError::Truncated {
                received: prefix + buf.len(),
                expected: Some(prefix + len),
            },
            State::Done => NodeInfoError::Truncated {
                received: 0,
                expected: None,
            },
        }
    }
}

/// The protobuf messages (`cometbft.p2p.v1`, `proto/cometbft/p2p/v1/types.proto`),
/// declared by hand. Strings are taken as bytes so that a bad field is named.
mod wire {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ProtocolVersion {
        #[prost(uint64, tag = "1")]
        pub p2p: u64,
        #[prost(uint64, tag = "2")]
        pub block: u64,
        #[prost(uint64, tag = "3")]
        pub app: u64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NodeInfo {
        /// Non-nullable in gogoproto: always sent, as prost sends `Some`.
        #[prost(message, optional, tag = "1")]
        pub protocol_version: Option<ProtocolVersion>,
        #[prost(bytes = "vec", tag = "2")]
        pub default_node_id: Vec<u8>,
        #[prost(bytes = "vec", tag = "3")]
        pub listen_addr: Vec<u8>,
        #[prost(bytes = "vec", tag = "4")]
        pub network: Vec<u8>,
        #[prost(bytes = "vec", tag = "5")]
        pub version: Vec<u8>,
        #[prost(bytes = "vec", tag = "6")]
        pub channels: Vec<u8>,
        #[prost(bytes = "vec", tag = "7")]
        pub moniker: Vec<u8>,
        #[prost(message, optional, tag = "8")]
        pub other: Option<Other>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Other {
        #[prost(bytes = "vec", tag = "1")]
        pub tx_index: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        pub rpc_address: Vec<u8>,
    }
}

impl From<&NodeInfo> for wire::NodeInfo {
    fn from(n: &NodeInfo) -> Self {
        let v = n.protocol_version;
        wire::NodeInfo {
            protocol_version: Some(wire::ProtocolVersion {
                p2p: v.p2p,
                block: v.block,
                app: v.app,
            }),
            default_node_id: n.id.clone().into_bytes(),
            listen_addr: n.listen_addr.clone().into_bytes(),
            network: n.network.clone().into_bytes(),
            version: n.version.clone().into_bytes(),
            channels: n.channels.clone(),
            moniker: n.moniker.clone().into_bytes(),
            other: Some(wire::Other {
                tx_index: n.tx_index.clone().into_bytes(),
                rpc_address: n.rpc_address.clone().into_bytes(),
            }),
        }
    }
}

impl TryFrom<wire::NodeInfo> for NodeInfo {
    type Error = NodeInfoError;

    fn try_from(m: wire::NodeInfo) -> Result<Self, Self::Error> {
        fn text(field: &'static str, bytes: Vec<u8>) -> Result<String, NodeInfoError> {
            String::from_utf8(bytes).map_err(|_| NodeInfoError::NotUtf8(field))
        }
        let v = m.protocol_version.unwrap_or_default();
        let other = m.other.unwrap_or_default();
        Ok(NodeInfo {
            protocol_version: ProtocolVersion {
                p2p: v.p2p,
                block: v.block,
                app: v.app,
            },
            id: text("default_node_id", m.default_node_id)?,
            listen_addr: text("listen_addr", m.listen_addr)?,
            network: text("network", m.network)?,
            version: text("version", m.version)?,
            channels: m.channels,
            moniker: text("moniker", m.moniker)?,
            tx_index: text("other.tx_index", other.tx_index)?,
            rpc_address: text("other.rpc_address", other.rpc_address)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> NodeInfo {
        NodeInfo::new(NodeId::from_public_key(&[7; 32]), "chain-1")
    }

    #[test]
    fn round_trip_and_prefix() {
        let ours = valid();
        let wire = ours.encode_delimited().unwrap();
        assert_eq!(usize::from(wire[0]), wire.len() - 1);
        assert_eq!(NodeInfo::decode(&wire[1..]).unwrap(), ours);
        assert!(ours.validate().is_empty(), "{:?}", ours.validate());
    }

    #[test]
    fn decoder_stops_at_the_message_end() {
        let wire = valid().encode_delimited().unwrap();
        let mut input = wire.clone();
        input.extend_from_slice(b"next packet");
        let mut dec = Decoder::new();
        let (used, got) = dec.feed(&input).unwrap();
        assert_eq!(used, wire.len());
        assert_eq!(got, Some(valid()));
    }

    #[test]
    fn length_checks() {
        // 10241 = 0x2801: varint 0x81 0x50.
        let mut dec = Decoder::new();
        match dec.feed(&[0x81, 0x50]) {
            Err(NodeInfoError::TooLarge { len: 10241, limit }) => assert_eq!(limit, 10240),
            other => panic!("{other:?}"),
        }
        // 10240 itself is allowed: the decoder waits for the body.
        let mut dec = Decoder::new();
        assert_eq!(dec.feed(&[0x80, 0x50]).unwrap(), (2, None));
        // Eleven continuation bytes: not a varint.
        let mut dec = Decoder::new();
        assert!(matches!(
            dec.feed(&[0xff; 11]),
            Err(NodeInfoError::BadLength)
        ));
        // A tenth byte above 1 overflows a u64.
        let mut dec = Decoder::new();
        let mut over = [0xff; 10];
        over[9] = 0x02;
        assert!(matches!(dec.feed(&over), Err(NodeInfoError::BadLength)));
        // The smaller limit applies.
        let mut dec = Decoder::with_limit(100);
        assert!(matches!(
            dec.feed(&[101]),
            Err(NodeInfoError::TooLarge { len: 101, .. })
        ));
    }

    #[test]
    fn eof_reports_how_far_it_got() {
        let wire = valid().encode_delimited().unwrap();
        let mut dec = Decoder::new();
        dec.feed(&wire[..10]).unwrap();
        match dec.eof() {
            NodeInfoError::Truncated {
                received: 10,
                expected: Some(n),
            } => assert_eq!(n, wire.len()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn each_rule_is_named() {
        let mut n = valid();
        n.id = "xyz".into();
        n.listen_addr = "nohost".into();
        n.version = "  ".into();
        n.channels = (0..17).collect();
        n.moniker = "tab\there".into();
        n.tx_index = "maybe".into();
        n.rpc_address = "\u{e9}".into();
        let rules: Vec<Rule> = n.validate().iter().map(|v| v.rule).collect();
        assert_eq!(
            rules,
            [
                Rule::IdFormat,
                Rule::ListenAddr,
                Rule::Version,
                Rule::ChannelCount,
                Rule::Moniker,
                Rule::TxIndex,
                Rule::RpcAddress
            ]
        );
        let mut n = valid();
        n.channels = vec![0x40, 0x20, 0x40];
        assert_eq!(n.validate()[0].rule, Rule::DuplicateChannel);
        n.moniker = String::new();
        assert_eq!(n.validate()[1].rule, Rule::Moniker);
    }

    #[test]
    fn listen_addresses_as_go_parses_them() {
        for ok in [
            "127.0.0.1:26656",
            "tcp://0.0.0.0:26656",
            "[::1]:26656",
            "node.example-1.net:0",
            "h:65535",
        ] {
            assert_eq!(check_listen_addr(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "127.0.0.1",
            ":26656",
            "::1:26656",
            "[::1]26656",
            "h:65536",
            "h:+1",
            "h:",
            "a b:1",
            "[::1]:1]",
        ] {
            assert!(check_listen_addr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn compatibility_rules() {
        let node = NodeInfo {
            channels: vec![0x40, 0x20],
            ..valid()
        };
        let probe = valid();
        // The node, which has channels, finds none in common with the probe.
        let v = node.compatible_with(&probe);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].rule, Rule::CommonChannel);
        // The probe, with none, accepts the node.
        assert!(probe.compatible_with(&node).is_empty());
        let other = NodeInfo {
            network: "chain-2".into(),
            protocol_version: ProtocolVersion {
                block: 10,
                ..probe.protocol_version
            },
            ..probe.clone()
        };
        let rules: Vec<Rule> = probe
            .compatible_with(&other)
            .iter()
            .map(|v| v.rule)
            .collect();
        assert_eq!(rules, [Rule::BlockVersion, Rule::Network]);
    }

    #[test]
    fn id_must_match_the_key() {
        let n = valid();
        assert!(n.check_id(NodeId::from_public_key(&[7; 32])).is_ok());
        let upper = NodeInfo {
            id: n.id.to_uppercase(),
            ..n.clone()
        };
        // Valid hex, but CometBFT compares the text: uppercase does not match.
        assert!(upper.validate().is_empty());
        assert_eq!(
            upper
                .check_id(NodeId::from_public_key(&[7; 32]))
                .unwrap_err()
                .rule,
            Rule::IdMatchesKey
        );
    }

    #[test]
    fn not_utf8_is_named() {
        let mut m = wire::NodeInfo::from(&valid());
        m.network = vec![0xff];
        use prost::Message;
        let body = m.encode_to_vec();
        assert!(matches!(
            NodeInfo::decode(&body),
            Err(NodeInfoError::NotUtf8("network"))
        ));
        assert!(matches!(
            NodeInfo::decode(&[0x0a, 0x05, 0x01]),
            Err(NodeInfoError::Malformed(_))
        ));
    }
}
