//! Blocksync's status messages on channel `0x40`: which blocks a node
//! holds (`base` to `height`), as its blocksync reactor tells every peer
//! that lists the channel, for a crawler or a seed to learn.
//!
//! `tendermint.blockchain.Message` (v0.34), `tendermint.blocksync.Message`
//! (v0.37 to v0.40) and `cometbft.blocksync.v1.Message` (v1) number their
//! fields the same: `oneof sum { BlockRequest block_request = 1;
//! NoBlockResponse no_block_response = 2; BlockResponse block_response =
//! 3; StatusRequest status_request = 4; StatusResponse status_response = 5;
//! }`, `StatusResponse { int64 height = 1; int64 base = 2; }`.
//!
//! # Guarantees
//! - [`BlocksyncMessage::decode`] reads the two status messages and names
//!   every other kind [`BlocksyncMessage::Other`] (block requests and
//!   responses are not decoded); it refuses a message over
//!   [`MAX_STATUS_MESSAGE_SIZE`] before decoding.
//! - What CometBFT does with them (read at v0.34.35, v0.38.26, v0.40.0 and
//!   v1.0.1, `blocksync/reactor.go`): on `AddPeer` the reactor sends the
//!   peer a `StatusResponse` with its store's base and height, if the peer
//!   lists channel `0x40`; it answers each `StatusRequest` with one, at no
//!   rate limit; it asks a peer for blocks only once that peer has sent it
//!   a `StatusResponse` of its own. So a peer that lists the channel and
//!   never sends one is told the node's range and is never asked for
//!   blocks.
//!
//! # Not provided
//! Block requests and responses: this is a crawler's and a seed's view of
//! the channel, not a block-sync implementation.

use thiserror::Error;

/// The blocksync channel.
pub const BLOCKSYNC_CHANNEL: u8 = 0x40;

/// The largest status message accepted: two varint fields and the framing
/// (a `StatusResponse` is at most 24 bytes). Use it as the channel's
/// receive capacity when only status messages are expected.
pub const MAX_STATUS_MESSAGE_SIZE: usize = 64;

/// One blocksync message, as far as a status needs.
#[derive(Clone, Debug, PartialEq)]
pub enum BlocksyncMessage {
    /// `StatusRequest`: tell me your range.
    StatusRequest,
    /// `StatusResponse`: the blocks the node holds, `base` to `height`.
    StatusResponse {
        /// The store's height (the newest block).
        height: i64,
        /// The store's base (the oldest block kept; 0 or 1 when nothing is
        /// pruned, depending on the store's age).
        base: i64,
    },
    /// A block request or response (not decoded).
    Other,
}

/// Why a blocksync message was refused.
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum BlocksyncError {
    /// Longer than the limit.
    #[error("blocksync message of {len} bytes, over the limit of {limit}")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// Not valid protobuf, or no known kind.
    #[error("malformed blocksync message: {0}")]
    Malformed(String),
}

mod wire {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Message {
        #[prost(oneof = "Sum", tags = "1, 2, 3, 4, 5")]
        pub sum: Option<Sum>,
    }

    /// Block messages are read as raw bytes: only their kind matters here.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Sum {
        #[prost(bytes = "vec", tag = "1")]
        BlockRequest(Vec<u8>),
        #[prost(bytes = "vec", tag = "2")]
        NoBlockResponse(Vec<u8>),
        #[prost(bytes = "vec", tag = "3")]
        BlockResponse(Vec<u8>),
        #[prost(message, tag = "4")]
        StatusRequest(StatusRequest),
        #[prost(message, tag = "5")]
        StatusResponse(StatusResponse),
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct StatusRequest {}

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct StatusResponse {
        #[prost(int64, tag = "1")]
        pub height: i64,
        #[prost(int64, tag = "2")]
        pub base: i64,
    }
}

impl BlocksyncMessage {
    /// The message's bytes (one MConnection message on
    /// [`BLOCKSYNC_CHANNEL`]). [`Other`](Self::Other) encodes as an empty
    /// block request, which no caller should send.
    pub fn encode(&self) -> Vec<u8> {
        use prost::Message;
        let sum = match self {
            BlocksyncMessage::StatusRequest => wire::Sum::StatusRequest(wire::StatusRequest {}),
            BlocksyncMessage::StatusResponse { height, base } => {
                wire::Sum::StatusResponse(wire::StatusResponse {
                    height: *height,
                    base: *base,
                })
            }
            BlocksyncMessage::Other => wire::Sum::BlockRequest(Vec::new()),
        };
        wire::Message { sum: Some(sum) }.encode_to_vec()
    }

    /// Decodes a message of at most [`MAX_STATUS_MESSAGE_SIZE`] bytes.
    pub fn decode(bytes: &[u8]) -> Result<BlocksyncMessage, BlocksyncError> {
        use prost::Message;
        if bytes.len() > MAX_STATUS_MESSAGE_SIZE {
            return Err(BlocksyncError::TooLarge {
                len: bytes.len(),
                limit: MAX_STATUS_MESSAGE_SIZE,
            });
        }
        let msg =
            wire::Message::decode(bytes).map_err(|e| BlocksyncError::Malformed(e.to_string()))?;
        Ok(match msg.sum {
            Some(wire::Sum::StatusRequest(_)) => BlocksyncMessage::StatusRequest,
            Some(wire::Sum::StatusResponse(s)) => BlocksyncMessage::StatusResponse {
                height: s.height,
                base: s.base,
            },
            Some(_) => BlocksyncMessage::Other,
            None => return Err(BlocksyncError::Malformed("no known kind".into())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The protobuf encoding, worked out by hand from the .proto: field 5,
    /// length 5, then height 1234 (field 1, varint d2 09) and base 7. (Real
    /// nodes of each line send these in the CLI's crawl tests.)
    #[test]
    fn status_messages_match_the_wire() {
        let resp = BlocksyncMessage::StatusResponse {
            height: 1234,
            base: 7,
        };
        let bytes = resp.encode();
        assert_eq!(bytes, [0x2a, 0x05, 0x08, 0xd2, 0x09, 0x10, 0x07]);
        assert_eq!(BlocksyncMessage::decode(&bytes), Ok(resp));
        assert_eq!(BlocksyncMessage::StatusRequest.encode(), [0x22, 0x00]);
        assert_eq!(
            BlocksyncMessage::decode(&[0x22, 0x00]),
            Ok(BlocksyncMessage::StatusRequest)
        );
        // A block request (field 1): only its kind.
        assert_eq!(
            BlocksyncMessage::decode(&[0x0a, 0x02, 0x08, 0x05]),
            Ok(BlocksyncMessage::Other)
        );
        assert!(BlocksyncMessage::decode(&[]).is_err());
        assert!(BlocksyncMessage::decode(&[0xff; 3]).is_err());
        assert!(matches!(
            BlocksyncMessage::decode(&[0u8; 65]),
            Err(BlocksyncError::TooLarge { len: 65, .. })
        ));
    }
}
