//! The protobuf messages (`cometbft.p2p.v1`, `proto/cometbft/p2p/v1/types.proto`),
//! declared by hand. Strings are taken as bytes so that a bad field is named.

use super::{NodeInfo as Info, NodeInfoError, ProtocolVersion as Version};

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

impl From<&Info> for NodeInfo {
    fn from(n: &Info) -> Self {
        let v = n.protocol_version;
        NodeInfo {
            protocol_version: Some(ProtocolVersion {
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
            other: Some(Other {
                tx_index: n.tx_index.clone().into_bytes(),
                rpc_address: n.rpc_address.clone().into_bytes(),
            }),
        }
    }
}

impl TryFrom<NodeInfo> for Info {
    type Error = NodeInfoError;

    fn try_from(m: NodeInfo) -> Result<Self, Self::Error> {
        fn text(field: &'static str, bytes: Vec<u8>) -> Result<String, NodeInfoError> {
            String::from_utf8(bytes).map_err(|_| NodeInfoError::NotUtf8(field))
        }
        let v = m.protocol_version.unwrap_or_default();
        let other = m.other.unwrap_or_default();
        Ok(Info {
            protocol_version: Version {
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
