//! The sans-IO reader of one length-prefixed NodeInfo.

use super::{NodeInfo, NodeInfoError, MAX_NODE_INFO_SIZE};
use crate::delimited::{DelimitedReader, Feed, PrefixError};

/// Sans-IO reader of one length-prefixed NodeInfo.
///
/// ```
/// use p2p_conn::delimited::Feed;
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
    /// `None` once finished or failed: feeding more is an error.
    reader: Option<DelimitedReader>,
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
            reader: Some(DelimitedReader::new(limit.min(MAX_NODE_INFO_SIZE))),
        }
    }
}

impl Feed for Decoder {
    type Item = NodeInfo;
    type Error = NodeInfoError;
    /// Consumes what it needs of `input`: returns how many bytes it took and
    /// the NodeInfo once complete. Bytes after the message are never taken.
    /// After an error or a complete message, the decoder is spent.
    fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<NodeInfo>), NodeInfoError> {
        let Some(reader) = &mut self.reader else {
            return Err(NodeInfoError::Malformed(
                "the decoder was fed after it finished".into(),
            ));
        };
        match reader.feed(input) {
            Ok((used, None)) => Ok((used, None)),
            Ok((used, Some(body))) => {
                self.reader = None;
                NodeInfo::decode(&body).map(|info| (used, Some(info)))
            }
            Err(e) => {
                self.reader = None;
                Err(match e {
                    PrefixError::BadLength => NodeInfoError::BadLength,
                    PrefixError::TooLarge { len, limit } => NodeInfoError::TooLarge { len, limit },
                })
            }
        }
    }

    /// The error for an end of stream now (the message is incomplete).
    fn end_of_stream(&self) -> NodeInfoError {
        let (received, expected) = self.reader.as_ref().map_or((0, None), |r| r.progress());
        NodeInfoError::Truncated { received, expected }
    }
}
