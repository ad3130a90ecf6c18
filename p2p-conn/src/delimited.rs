//! Uvarint length-delimited messages, read a byte stream at a time: the
//! framing of every protobuf exchange above the secret connection
//! (NodeInfo, privval, MConnection's packets), as Go's `protoio` delimited
//! reader frames them. This module is what the layers above the transport
//! share (`p2p-conn-privval`, `p2p-conn-mconn`, `nodeinfo`), and it is
//! public for them and for any other protobuf layer: one reader, so the
//! rules live in one place.
//!
//! # Design
//! Sans-IO: [`DelimitedReader`] takes bytes and returns whole bodies.
//! - the length prefix is read a byte at a time (Go's `binary.ReadUvarint`
//!   rules), so no byte past a message is ever taken;
//! - the length is checked against the limit as soon as the prefix is
//!   complete, before anything is allocated;
//! - a body's buffer is reserved whole up to 64 KiB and
//!   grows with the bytes that arrive past it, so a prefix alone never
//!   reserves more than that, whatever the limit.
//!
//! It knows nothing of what the bodies hold: each layer decodes them and
//! words the errors in its own enum. A layer's decoder implements [`Feed`];
//! the adapters drive any [`Feed`] from a buffered stream, consuming only
//! the bytes it took: `io::tokio::poll_decode` (feature `tokio`) and
//! [`crate::io::blocking::decode`].
//!
//! # Guarantees
//! - No input panics; nothing is allocated for a body over the limit.
//! - [`DelimitedReader::feed`] never takes a byte past the message it
//!   returns.
//!
//! # Not provided
//! - Writing: a body is its length as a uvarint, then the body
//!   (`prost::Message::encode_length_delimited`).
//! - Resynchronising after an error: the stream is out of step; drop it.

use crate::proto::varint::{Step, UvarintReader};

/// The most a reader reserves for a body before its bytes arrive (above
/// NodeInfo's limit and every privval limit but v0.40.0's, so a body within
/// those is read into one allocation).
pub(crate) const INITIAL_BODY_CAPACITY: usize = 64 * 1024;

/// Why a length prefix was refused. Complete (not `#[non_exhaustive]`): a
/// prefix is either no uvarint or too large, and each layer maps both to
/// its own error.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum PrefixError {
    /// Not a varint: more than 64 bits.
    #[error("the length prefix is not a valid uvarint")]
    BadLength,
    /// A body of `len` bytes, over `limit`.
    #[error("a {len}-byte body was announced; the limit is {limit} bytes")]
    TooLarge {
        /// The announced length.
        len: u64,
        /// The limit in force.
        limit: usize,
    },
}

/// Reads one message after another: feed it bytes, get each body whole.
/// After an error the stream is out of step, and the caller must stop
/// feeding it (each layer's decoder keeps that state).
#[derive(Debug)]
pub struct DelimitedReader {
    limit: usize,
    state: State,
}

#[derive(Debug)]
enum State {
    /// Reading the varint length prefix.
    Prefix(UvarintReader),
    /// Reading a body of `len` bytes, after a prefix of `prefix` bytes.
    Body {
        prefix: usize,
        buf: Vec<u8>,
        len: usize,
    },
}

impl DelimitedReader {
    /// A reader refusing bodies longer than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        DelimitedReader {
            limit,
            state: State::Prefix(UvarintReader::default()),
        }
    }

    /// The limit on a body, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Whether no byte of a message has been taken yet.
    pub fn is_idle(&self) -> bool {
        matches!(&self.state, State::Prefix(r) if r.taken() == 0)
    }

    /// Bytes of the current message taken so far, and how many it has in
    /// all once its prefix is known.
    pub fn progress(&self) -> (usize, Option<usize>) {
        match &self.state {
            State::Prefix(r) => (r.taken(), None),
            State::Body { prefix, buf, len } => {
                (prefix + buf.len(), Some(prefix.saturating_add(*len)))
            }
        }
    }

    /// Consumes what it needs of `input`: how many bytes it took, and the
    /// body once complete (then it is ready for the next message). Bytes
    /// after a message are never taken.
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Vec<u8>>), PrefixError> {
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
                        Step::Overflow => return Err(PrefixError::BadLength),
                    };
                    if len > self.limit as u64 {
                        return Err(PrefixError::TooLarge {
                            len,
                            limit: self.limit,
                        });
                    }
                    let len = len as usize; // at most the limit
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
                    self.state = State::Prefix(UvarintReader::default());
                    return Ok((used, Some(body)));
                }
            }
        }
    }
}

/// A decoder of delimited messages that the adapters feed from a stream's
/// buffer (module docs): each layer's decoder implements it over a
/// [`DelimitedReader`].
pub trait Feed {
    /// What one message decodes to.
    type Item;
    /// The layer's error.
    type Error: From<std::io::Error>;
    /// Take what is needed of `input` (never a byte past the message): how
    /// many bytes, and the message once complete.
    fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Self::Item>), Self::Error>;
    /// The error for the stream ending now.
    fn end_of_stream(&self) -> Self::Error;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_back_to_back_byte_at_a_time() {
        let wire = [2, b'h', b'i', 0, 1, b'x'];
        let mut r = DelimitedReader::new(10);
        let mut got = Vec::new();
        for b in wire {
            let (used, body) = r.feed(&[b]).unwrap();
            assert_eq!(used, 1);
            got.extend(body);
        }
        assert_eq!(got, [b"hi".to_vec(), vec![], b"x".to_vec()]);
        assert!(r.is_idle());
        // Whole: one message per call, never a byte of the next.
        let mut r = DelimitedReader::new(10);
        assert_eq!(r.feed(&wire).unwrap(), (3, Some(b"hi".to_vec())));
    }

    #[test]
    fn limit_before_allocation_and_reservation_capped() {
        let mut r = DelimitedReader::new(10);
        assert_eq!(
            r.feed(&[11]),
            Err(PrefixError::TooLarge { len: 11, limit: 10 })
        );
        let mut r = DelimitedReader::new(usize::MAX);
        // 2^62 announced: taken, but only INITIAL_BODY_CAPACITY reserved.
        let prefix = [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40];
        assert_eq!(r.feed(&prefix).unwrap(), (9, None));
        match &r.state {
            State::Body { buf, .. } => assert!(buf.capacity() <= INITIAL_BODY_CAPACITY),
            other => panic!("{other:?}"),
        }
        assert_eq!(r.progress(), (9, Some(9 + (1 << 62))));
        assert_eq!(
            DelimitedReader::new(10).feed(&[0xff; 11]),
            Err(PrefixError::BadLength)
        );
    }
}
