//! The sans-IO privval message stream: uvarint length-prefixed `Message`
//! frames, read one at a time.

use prost::Message as _;

use super::messages::Message;
use super::{PrivvalError, MAX_MESSAGE_BYTES};
use crate::proto::varint::{Step, UvarintReader};

/// Encodes `msg` with its uvarint length prefix, as CometBFT's
/// `protoio.NewDelimitedWriter` writes it.
///
/// Nothing checks the length against a limit: the reader's
/// ([`MAX_MESSAGE_BYTES`] for nodes of every line but v0.40.0) applies.
pub fn encode(msg: &Message) -> Vec<u8> {
    msg.encode_length_delimited_to_vec()
}

/// The most a decoder reserves for a body before its bytes arrive: above
/// every line's limit but v0.40.0's, so a body within those limits is
/// read into one allocation.
const INITIAL_BODY_CAPACITY: usize = 64 * 1024;

/// Sans-IO reader of privval messages.
///
/// Feed it bytes; it takes exactly one message's length prefix and body at
/// a time and never a byte of the next message, so it can be fed a stream's
/// buffer in place. It refuses a length above its limit as soon as the
/// prefix is complete, and only then allocates the body's buffer (the
/// whole body up to 64 KiB, then growing as bytes arrive), so a peer cannot
/// make it allocate more than the limit, nor more than it sent beyond
/// 64 KiB. After a message it is ready
/// for the next; after an error it is spent (the stream is out of step:
/// drop the connection).
///
/// ```
/// use p2p_conn::privval::{encode, message::Sum, Decoder, Message, PingRequest};
///
/// let wire = encode(&Message::from(Sum::PingRequest(PingRequest::default())));
/// assert_eq!(wire, [2, 0x3a, 0]);
/// let mut dec = Decoder::new();
/// let (used, got) = dec.feed(&wire).unwrap();
/// assert_eq!(used, 3);
/// assert!(matches!(got.and_then(|m| m.sum), Some(Sum::PingRequest(_))));
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
    /// Failed: feeding more is an error.
    Failed,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

impl Decoder {
    /// A decoder with the limit CometBFT nodes read signer messages with,
    /// [`MAX_MESSAGE_BYTES`].
    pub fn new() -> Decoder {
        Decoder::with_limit(MAX_MESSAGE_BYTES)
    }

    /// A decoder refusing message bodies longer than `limit` bytes (for a
    /// v0.40.0 node's limit, [`super::MAX_MESSAGE_BYTES_V040`]).
    pub fn with_limit(limit: usize) -> Decoder {
        Decoder {
            limit,
            state: State::Prefix(UvarintReader::default()),
        }
    }

    /// The limit on a message body, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Whether the decoder is between messages (no byte of a message taken).
    pub fn is_idle(&self) -> bool {
        matches!(&self.state, State::Prefix(r) if r.taken() == 0)
    }

    /// Consumes what it needs of `input`: returns how many bytes it took and
    /// the message once complete. Bytes after the message are never taken.
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Message>), PrivvalError> {
        let mut used = 0;
        loop {
            match &mut self.state {
                State::Prefix(reader) => {
                    let Some(&b) = input.get(used) else {
                        return Ok((used, None));
                    };
                    used += 1;
                    let (len, prefix) = match reader.push(b) {
                        Step::More => continue,
                        Step::Done(len, prefix) => (len, prefix),
                        Step::Overflow => {
                            self.state = State::Failed;
                            return Err(PrivvalError::BadLength);
                        }
                    };
                    if len > self.limit as u64 {
                        self.state = State::Failed;
                        return Err(PrivvalError::TooLarge {
                            len,
                            limit: self.limit,
                        });
                    }
                    // At most the limit, so it fits. Reserve the whole body
                    // up to INITIAL_BODY_CAPACITY; past that the buffer
                    // grows with the bytes that arrive, so a large limit
                    // never lets a prefix alone reserve memory.
                    let len = len as usize;
                    self.state = State::Body {
                        prefix,
                        buf: Vec::with_capacity(len.min(INITIAL_BODY_CAPACITY)),
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
                    self.state = State::Failed;
                    let msg = Message::decode(body.as_slice())
                        .map_err(|e| PrivvalError::Malformed(e.to_string()))?;
                    if msg.sum.is_none() {
                        return Err(PrivvalError::UnknownMessage);
                    }
                    self.state = State::Prefix(UvarintReader::default());
                    return Ok((used, Some(msg)));
                }
                State::Failed => return Err(PrivvalError::Spent),
            }
        }
    }

    /// The error for an end of stream now: `None` between messages (a
    /// clean end), else [`PrivvalError::Truncated`].
    pub fn eof(&self) -> Option<PrivvalError> {
        match &self.state {
            State::Prefix(reader) if reader.taken() == 0 => None,
            State::Prefix(reader) => Some(PrivvalError::Truncated {
                received: reader.taken(),
                expected: None,
            }),
            State::Body { prefix, buf, len } => Some(PrivvalError::Truncated {
                received: prefix + buf.len(),
                expected: Some(prefix.saturating_add(*len)),
            }),
            State::Failed => Some(PrivvalError::Spent),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::messages::{message::Sum, PingRequest, PubKeyRequest};
    use super::*;

    fn ping() -> Vec<u8> {
        encode(&Message::from(Sum::PingRequest(PingRequest::default())))
    }

    #[test]
    fn messages_back_to_back() {
        let second = encode(&Message::from(Sum::PubKeyRequest(PubKeyRequest {
            chain_id: "chain".into(),
        })));
        let mut input = ping();
        input.extend_from_slice(&second);
        let mut dec = Decoder::new();
        let (used, got) = dec.feed(&input).unwrap();
        assert_eq!(used, ping().len());
        assert!(matches!(got.unwrap().sum, Some(Sum::PingRequest(_))));
        assert!(dec.is_idle());
        let (used, got) = dec.feed(&input[used..]).unwrap();
        assert_eq!(used, second.len());
        match got.unwrap().sum {
            Some(Sum::PubKeyRequest(r)) => assert_eq!(r.chain_id, "chain"),
            other => panic!("{other:?}"),
        }
        assert!(dec.eof().is_none());
    }

    #[test]
    fn limit_is_checked_on_the_prefix() {
        // 10241 = 0x2801: varint 0x81 0x50, one above the limit.
        let mut dec = Decoder::new();
        let err = dec.feed(&[0x81, 0x50]).unwrap_err();
        assert!(
            matches!(
                err,
                PrivvalError::TooLarge {
                    len: 10241,
                    limit: 10240
                }
            ),
            "{err}"
        );
        assert!(matches!(dec.feed(&[0]), Err(PrivvalError::Spent)));
        // Exactly the limit is allowed: the prefix is taken, the body awaited.
        let mut dec = Decoder::new();
        assert_eq!(dec.feed(&[0x80, 0x50]).unwrap(), (2, None));
        assert!(matches!(
            dec.eof(),
            Some(PrivvalError::Truncated {
                received: 2,
                expected: Some(10242)
            })
        ));
    }

    #[test]
    fn unknown_and_empty_messages_are_refused() {
        // Field 11, length-delimited, empty: not a oneof member at any line.
        let mut dec = Decoder::new();
        assert!(matches!(
            dec.feed(&[2, 0x5a, 0]),
            Err(PrivvalError::UnknownMessage)
        ));
        let mut dec = Decoder::new();
        assert!(matches!(dec.feed(&[0]), Err(PrivvalError::UnknownMessage)));
        // A body that is not protobuf (a truncated field).
        let mut dec = Decoder::new();
        assert!(matches!(
            dec.feed(&[2, 0x3a, 5]),
            Err(PrivvalError::Malformed(_))
        ));
        // A bad varint prefix.
        let mut dec = Decoder::new();
        assert!(matches!(
            dec.feed(&[0xff; 11]),
            Err(PrivvalError::BadLength)
        ));
    }

    /// A limit far above any real one must not let a length prefix alone
    /// make the decoder reserve that much.
    #[test]
    fn huge_limit_reserves_only_what_arrives() {
        let mut dec = Decoder::with_limit(usize::MAX);
        // 2^62, announced; three body bytes follow.
        let prefix = [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40];
        assert_eq!(dec.feed(&prefix).unwrap(), (9, None));
        assert_eq!(dec.feed(&[1, 2, 3]).unwrap(), (3, None));
        assert!(matches!(
            dec.eof(),
            Some(PrivvalError::Truncated {
                received: 12,
                expected: Some(_)
            })
        ));
    }

    #[test]
    fn byte_at_a_time() {
        let wire = ping();
        let mut dec = Decoder::new();
        for (i, b) in wire.iter().enumerate() {
            let (used, got) = dec.feed(std::slice::from_ref(b)).unwrap();
            assert_eq!(used, 1);
            assert_eq!(got.is_some(), i == wire.len() - 1);
        }
    }
}
