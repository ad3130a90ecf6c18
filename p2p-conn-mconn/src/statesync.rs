//! State sync's snapshot messages on channel `0x60`: which state-sync
//! snapshots a node offers, as its state-sync reactor lists them to a
//! peer that asks, for a crawler to learn.
//!
//! `tendermint.statesync.Message` (v0.34 to v0.40) and
//! `cometbft.statesync.v1.Message` (v1) number their fields the same:
//! `oneof sum { SnapshotsRequest snapshots_request = 1; SnapshotsResponse
//! snapshots_response = 2; ChunkRequest chunk_request = 3; ChunkResponse
//! chunk_response = 4; }`, `SnapshotsResponse { uint64 height = 1; uint32
//! format = 2; uint32 chunks = 3; bytes hash = 4; bytes metadata = 5; }`.
//!
//! # Guarantees
//! - [`StatesyncMessage::decode`] reads the two snapshot messages and names
//!   the chunk messages [`StatesyncMessage::Other`]; it refuses a message
//!   over the limit it is given before decoding. A snapshot's metadata is
//!   not kept, only its length.
//! - What CometBFT does with them (`statesync/reactor.go`, v0.34.35 to
//!   v1.0.1): it answers each `SnapshotsRequest` with one
//!   `SnapshotsResponse` per snapshot, its 10 most recent
//!   (`recentSnapshots`), and nothing at all when its application offers
//!   none, so "no answer yet" and "no snapshots" look the same to the
//!   asker; its channel takes messages up to 4,000,000 bytes
//!   ([`MAX_SNAPSHOT_MESSAGE_SIZE`]).
//!
//! # Not provided
//! Chunks: this is a crawler's view of the channel, not state sync.

use thiserror::Error;

/// The state-sync snapshot channel.
pub const SNAPSHOT_CHANNEL: u8 = 0x60;

/// CometBFT's limit on a message of the snapshot channel
/// (`snapshotMsgSize`).
pub const MAX_SNAPSHOT_MESSAGE_SIZE: usize = 4_000_000;

/// The most snapshots a node lists (`recentSnapshots`).
pub const RECENT_SNAPSHOTS: usize = 10;

/// One snapshot a node offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The height it was taken at.
    pub height: u64,
    /// The application's format.
    pub format: u32,
    /// How many chunks.
    pub chunks: u32,
    /// The application's hash of it.
    pub hash: Vec<u8>,
    /// The length of its metadata (the bytes are not kept).
    pub metadata_len: usize,
}

/// One snapshot-channel message, as far as a crawler needs.
#[derive(Clone, Debug, PartialEq)]
pub enum StatesyncMessage {
    /// `SnapshotsRequest`: list your snapshots.
    SnapshotsRequest,
    /// `SnapshotsResponse`: one snapshot.
    SnapshotsResponse(Snapshot),
    /// A chunk request or response (not decoded).
    Other,
}

/// Why a snapshot-channel message was refused.
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum StatesyncError {
    /// Longer than the limit.
    #[error("state-sync message of {len} bytes, over the limit of {limit}")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// Not valid protobuf, or no known kind.
    #[error("malformed state-sync message: {0}")]
    Malformed(String),
}

mod wire {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Message {
        #[prost(oneof = "Sum", tags = "1, 2, 3, 4")]
        pub sum: Option<Sum>,
    }

    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Sum {
        #[prost(message, tag = "1")]
        SnapshotsRequest(SnapshotsRequest),
        #[prost(message, tag = "2")]
        SnapshotsResponse(SnapshotsResponse),
        #[prost(bytes = "vec", tag = "3")]
        ChunkRequest(Vec<u8>),
        #[prost(bytes = "vec", tag = "4")]
        ChunkResponse(Vec<u8>),
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SnapshotsRequest {}

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SnapshotsResponse {
        #[prost(uint64, tag = "1")]
        pub height: u64,
        #[prost(uint32, tag = "2")]
        pub format: u32,
        #[prost(uint32, tag = "3")]
        pub chunks: u32,
        #[prost(bytes = "vec", tag = "4")]
        pub hash: Vec<u8>,
        #[prost(bytes = "vec", tag = "5")]
        pub metadata: Vec<u8>,
    }
}

impl StatesyncMessage {
    /// The message's bytes (one MConnection message on
    /// [`SNAPSHOT_CHANNEL`]); a response's metadata is sent as
    /// `metadata_len` zero bytes, and [`Other`](Self::Other) as an empty
    /// chunk request, which no caller should send.
    pub fn encode(&self) -> Vec<u8> {
        use prost::Message;
        let sum = match self {
            StatesyncMessage::SnapshotsRequest => {
                wire::Sum::SnapshotsRequest(wire::SnapshotsRequest {})
            }
            StatesyncMessage::SnapshotsResponse(s) => {
                wire::Sum::SnapshotsResponse(wire::SnapshotsResponse {
                    height: s.height,
                    format: s.format,
                    chunks: s.chunks,
                    hash: s.hash.clone(),
                    metadata: vec![0; s.metadata_len],
                })
            }
            StatesyncMessage::Other => wire::Sum::ChunkRequest(Vec::new()),
        };
        wire::Message { sum: Some(sum) }.encode_to_vec()
    }

    /// Decodes a message of at most `limit` bytes (checked first).
    pub fn decode(bytes: &[u8], limit: usize) -> Result<StatesyncMessage, StatesyncError> {
        use prost::Message;
        if bytes.len() > limit {
            return Err(StatesyncError::TooLarge {
                len: bytes.len(),
                limit,
            });
        }
        let msg =
            wire::Message::decode(bytes).map_err(|e| StatesyncError::Malformed(e.to_string()))?;
        Ok(match msg.sum {
            Some(wire::Sum::SnapshotsRequest(_)) => StatesyncMessage::SnapshotsRequest,
            Some(wire::Sum::SnapshotsResponse(s)) => {
                StatesyncMessage::SnapshotsResponse(Snapshot {
                    height: s.height,
                    format: s.format,
                    chunks: s.chunks,
                    hash: s.hash,
                    metadata_len: s.metadata.len(),
                })
            }
            Some(_) => StatesyncMessage::Other,
            None => return Err(StatesyncError::Malformed("no known kind".into())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The protobuf encoding, worked out by hand from the .proto.
    #[test]
    fn snapshot_messages_match_the_wire() {
        assert_eq!(StatesyncMessage::SnapshotsRequest.encode(), [0x0a, 0x00]);
        let s = Snapshot {
            height: 300,
            format: 1,
            chunks: 2,
            hash: vec![0xab; 2],
            metadata_len: 1,
        };
        let bytes = StatesyncMessage::SnapshotsResponse(s.clone()).encode();
        // Field 2, length 14: height 300 (08 ac 02), format 1 (10 01),
        // chunks 2 (18 02), hash (22 02 ab ab), metadata (2a 01 00).
        let want: [u8; 16] = [
            0x12, 0x0e, 0x08, 0xac, 0x02, 0x10, 0x01, 0x18, 0x02, 0x22, 0x02, 0xab, 0xab, 0x2a,
            0x01, 0x00,
        ];
        assert_eq!(bytes, want);
        assert_eq!(
            StatesyncMessage::decode(&bytes, MAX_SNAPSHOT_MESSAGE_SIZE),
            Ok(StatesyncMessage::SnapshotsResponse(s))
        );
        assert_eq!(
            StatesyncMessage::decode(&[0x1a, 0x00], 100),
            Ok(StatesyncMessage::Other)
        );
        assert!(StatesyncMessage::decode(&[], 100).is_err());
        assert!(matches!(
            StatesyncMessage::decode(&[0u8; 101], 100),
            Err(StatesyncError::TooLarge {
                len: 101,
                limit: 100
            })
        ));
    }
}
