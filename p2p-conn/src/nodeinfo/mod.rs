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

use crate::NodeId;

pub mod blocking;
mod decoder;
mod rules;
#[cfg(feature = "tokio")]
pub mod tokio;
mod wire;

pub use decoder::Decoder;
pub use rules::{Rule, Violation};

/// The largest NodeInfo message CometBFT reads (`maxNodeInfoSize`), in bytes,
/// length prefix excluded.
pub const MAX_NODE_INFO_SIZE: usize = 10240;

/// The most channels a valid NodeInfo lists (`maxNumChannels`).
pub const MAX_CHANNELS: usize = 16;

/// CometBFT's p2p protocol version at v1.0.1 (`version.P2PProtocol`).
/// v0.34.35, v0.37.18, v0.38.26, v0.39.4 and v0.40.0 announce 8; no node
/// checks the peer's value.
pub const P2P_PROTOCOL: u64 = 9;

/// The block protocol version of every CometBFT release
/// (`version.BlockProtocol`). Peers must announce the same one.
pub const BLOCK_PROTOCOL: u64 = 11;

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
#[non_exhaustive]
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
}

#[cfg(test)]
mod tests {
    use super::rules::check_listen_addr;
    use super::*;
    use crate::delimited::Feed;

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
        match dec.end_of_stream() {
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
