//! The sans-IO privval message stream: uvarint length-prefixed `Message`
//! frames, read one at a time.

use prost::Message as _;

use super::envelope::Message;
use super::{PrivvalError, MAX_MESSAGE_BYTES};
use p2p_conn::delimited::{DelimitedReader, Feed, PrefixError};

/// Encodes `msg` with its uvarint length prefix, as CometBFT's
/// `protoio.NewDelimitedWriter` writes it.
///
/// Nothing checks the length against a limit: the reader's
/// ([`MAX_MESSAGE_BYTES`] for nodes of every line but v0.40.0) applies.
pub fn encode(msg: &Message) -> Vec<u8> {
    msg.encode_length_delimited_to_vec()
}

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
/// # #[cfg(feature = "testkit")] {
/// use p2p_conn_privval::testkit::{encode, message::Sum, Message, MessageDecoder, PingRequest};
///
/// let wire = encode(&Message::from(Sum::PingRequest(PingRequest::default())));
/// assert_eq!(wire, [2, 0x3a, 0]);
/// let mut dec = MessageDecoder::new();
/// let (used, got) = dec.feed(&wire).unwrap();
/// assert_eq!(used, 3);
/// assert!(matches!(got.and_then(|m| m.sum), Some(Sum::PingRequest(_))));
/// # }
/// ```
#[derive(Debug)]
pub struct MessageDecoder {
    reader: DelimitedReader,
    /// An error was returned: the stream is out of step.
    failed: bool,
}

impl Default for MessageDecoder {
    fn default() -> Self {
        MessageDecoder::new()
    }
}

impl MessageDecoder {
    /// A decoder with the limit CometBFT nodes read signer messages with,
    /// [`MAX_MESSAGE_BYTES`].
    pub fn new() -> MessageDecoder {
        MessageDecoder::with_limit(MAX_MESSAGE_BYTES)
    }

    /// A decoder refusing message bodies longer than `limit` bytes (for a
    /// v0.40.0 node's limit, [`super::MAX_MESSAGE_BYTES_V040`]).
    pub fn with_limit(limit: usize) -> MessageDecoder {
        MessageDecoder {
            reader: DelimitedReader::new(limit),
            failed: false,
        }
    }

    /// The limit on a message body, in bytes.
    #[cfg(any(test, feature = "testkit"))]
    pub fn limit(&self) -> usize {
        self.reader.limit()
    }

    /// Whether the decoder is between messages (no byte of a message taken).
    #[cfg(any(test, feature = "testkit"))]
    pub fn is_idle(&self) -> bool {
        !self.failed && self.reader.is_idle()
    }

    /// Consumes what it needs of `input`: returns how many bytes it took and
    /// the message once complete. Bytes after the message are never taken.
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Message>), PrivvalError> {
        if self.failed {
            return Err(PrivvalError::Spent);
        }
        let r = self.decode(input);
        self.failed = r.is_err();
        r
    }

    fn decode(&mut self, input: &[u8]) -> Result<(usize, Option<Message>), PrivvalError> {
        let (used, body) = self.frame(input)?;
        match body {
            None => Ok((used, None)),
            Some(body) => Ok((used, Some(decode_body(&body)?))),
        }
    }

    /// The framing step: a whole body once complete, not decoded.
    fn frame(&mut self, input: &[u8]) -> Result<(usize, Option<Vec<u8>>), PrivvalError> {
        self.reader.feed(input).map_err(|e| match e {
            PrefixError::BadLength => PrivvalError::BadLength,
            PrefixError::TooLarge { len, limit } => PrivvalError::TooLarge { len, limit },
        })
    }

    /// The error for an end of stream now: `None` between messages (a
    /// clean end), else [`PrivvalError::Truncated`].
    pub fn eof(&self) -> Option<PrivvalError> {
        if self.failed {
            return Some(PrivvalError::Spent);
        }
        match self.reader.progress() {
            (0, None) => None,
            (received, expected) => Some(PrivvalError::Truncated { received, expected }),
        }
    }
}

/// A clean end between messages is [`std::io::ErrorKind::UnexpectedEof`]
/// in [`PrivvalError::Io`] here: a reader that wants a message has none.
impl Feed for MessageDecoder {
    type Item = Message;
    type Error = PrivvalError;
    fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Message>), PrivvalError> {
        MessageDecoder::feed(self, input)
    }
    fn end_of_stream(&self) -> PrivvalError {
        self.eof()
            .unwrap_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into())
    }
}

/// A message body as [`MessageDecoder`] decodes it: protobuf `Message` holding a
/// request or response this crate knows.
pub(crate) fn decode_body(body: &[u8]) -> Result<Message, PrivvalError> {
    let msg = Message::decode(body).map_err(|e| PrivvalError::Malformed(e.to_string()))?;
    if msg.sum.is_none() {
        return Err(PrivvalError::UnknownMessage);
    }
    Ok(msg)
}

/// The framing alone, for the endpoints: whole bodies out, decoded by the
/// caller with [`decode_body`]. A body that does not decode then leaves
/// the stream in step (its bytes were taken), where [`MessageDecoder`], which
/// reports it from `feed`, could not say how many bytes it took.
#[cfg(feature = "tokio")]
#[derive(Debug)]
pub(crate) struct Frames(MessageDecoder);

#[cfg(feature = "tokio")]
impl Frames {
    pub(crate) fn new(limit: usize) -> Frames {
        Frames(MessageDecoder::with_limit(limit))
    }
}

#[cfg(feature = "tokio")]
impl Feed for Frames {
    type Item = Vec<u8>;
    type Error = PrivvalError;
    fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Vec<u8>>), PrivvalError> {
        if self.0.failed {
            return Err(PrivvalError::Spent);
        }
        let r = self.0.frame(input);
        self.0.failed = r.is_err();
        r
    }
    fn end_of_stream(&self) -> PrivvalError {
        Feed::end_of_stream(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::envelope::{message::Sum, PingRequest, PubKeyRequest};
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
        let mut dec = MessageDecoder::new();
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
        let mut dec = MessageDecoder::new();
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
        let mut dec = MessageDecoder::new();
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
        let mut dec = MessageDecoder::new();
        assert!(matches!(
            dec.feed(&[2, 0x5a, 0]),
            Err(PrivvalError::UnknownMessage)
        ));
        let mut dec = MessageDecoder::new();
        assert!(matches!(dec.feed(&[0]), Err(PrivvalError::UnknownMessage)));
        // A body that is not protobuf (a truncated field).
        let mut dec = MessageDecoder::new();
        assert!(matches!(
            dec.feed(&[2, 0x3a, 5]),
            Err(PrivvalError::Malformed(_))
        ));
        // A bad varint prefix.
        let mut dec = MessageDecoder::new();
        assert!(matches!(
            dec.feed(&[0xff; 11]),
            Err(PrivvalError::BadLength)
        ));
    }

    /// A limit far above any real one must not let a length prefix alone
    /// make the decoder reserve that much.
    #[test]
    fn huge_limit_reserves_only_what_arrives() {
        let mut dec = MessageDecoder::with_limit(usize::MAX);
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
        let mut dec = MessageDecoder::new();
        for (i, b) in wire.iter().enumerate() {
            let (used, got) = dec.feed(std::slice::from_ref(b)).unwrap();
            assert_eq!(used, 1);
            assert_eq!(got.is_some(), i == wire.len() - 1);
        }
    }
}
