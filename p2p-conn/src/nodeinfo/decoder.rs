//! The sans-IO reader of one length-prefixed NodeInfo.

use super::{NodeInfo, NodeInfoError, MAX_NODE_INFO_SIZE};
use crate::proto::varint::{Step, UvarintReader};

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
    /// Reading the varint length prefix.
    Prefix(UvarintReader),
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
            state: State::Prefix(UvarintReader::default()),
        }
    }

    /// Consumes what it needs of `input`: returns how many bytes it took and
    /// the NodeInfo once complete. Bytes after the message are never taken.
    /// After an error or a complete message, the decoder is spent.
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<NodeInfo>), NodeInfoError> {
        let mut used = 0;
        loop {
            match &mut self.state {
                State::Prefix(reader) => {
                    let Some(&b) = input.get(used) else {
                        return Ok((used, None));
                    };
                    used += 1;
                    // Go's binary.ReadUvarint, a byte at a time so that no
                    // byte past the prefix is taken before it is checked.
                    let (len, prefix) = match reader.push(b) {
                        Step::More => continue,
                        Step::Done(len, prefix) => (len, prefix),
                        Step::Overflow => {
                            self.state = State::Done;
                            return Err(NodeInfoError::BadLength);
                        }
                    };
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
            State::Prefix(reader) => NodeInfoError::Truncated {
                received: reader.taken(),
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
