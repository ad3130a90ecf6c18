//! Uvarint length-delimited messages, read a byte stream at a time: the
//! framing of every protobuf exchange above the secret connection (NodeInfo,
//! privval; later MConnection's packets), as Go's `protoio` delimited reader
//! frames them. One reader, so the rules live in one place:
//!
//! - the length prefix is read a byte at a time ([`UvarintReader`], Go's
//!   `binary.ReadUvarint` rules), so no byte past a message is ever taken;
//! - the length is checked against the limit as soon as the prefix is
//!   complete, before anything is allocated;
//! - a body's buffer is reserved whole up to [`INITIAL_BODY_CAPACITY`] and
//!   grows with the bytes that arrive past it, so a prefix alone never
//!   reserves more than that, whatever the limit.
//!
//! It knows nothing of what the bodies hold: each layer decodes them and
//! words the errors in its own enum. Each layer's decoder implements
//! [`Feed`], and one loop per I/O model ([`poll_feed`] for tokio,
//! [`feed_blocking`] for std) feeds it from a stream's buffer, consuming
//! only the bytes it took.

use super::varint::{Step, UvarintReader};

/// The most a reader reserves for a body before its bytes arrive (above
/// NodeInfo's limit and every privval limit but v0.40.0's, so a body within
/// those is read into one allocation).
pub(crate) const INITIAL_BODY_CAPACITY: usize = 64 * 1024;

/// Why a length prefix was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PrefixError {
    /// Not a varint: more than 64 bits.
    BadLength,
    /// A body of `len` bytes, over `limit`.
    TooLarge { len: u64, limit: usize },
}

/// Reads one message after another: feed it bytes, get each body whole.
/// After an error the stream is out of step, and the caller must stop
/// feeding it (each layer's decoder keeps that state).
#[derive(Debug)]
pub(crate) struct DelimitedReader {
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
    pub(crate) fn new(limit: usize) -> Self {
        DelimitedReader {
            limit,
            state: State::Prefix(UvarintReader::default()),
        }
    }

    /// The limit on a body, in bytes.
    #[cfg_attr(not(feature = "privval"), allow(dead_code))]
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Whether no byte of a message has been taken yet.
    #[cfg_attr(not(feature = "privval"), allow(dead_code))]
    pub(crate) fn is_idle(&self) -> bool {
        matches!(&self.state, State::Prefix(r) if r.taken() == 0)
    }

    /// Bytes of the current message taken so far, and how many it has in
    /// all once its prefix is known.
    pub(crate) fn progress(&self) -> (usize, Option<usize>) {
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
    pub(crate) fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Vec<u8>>), PrefixError> {
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
/// buffer.
pub(crate) trait Feed {
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

/// Feed what `stream` has buffered to `decoder` until a message is
/// complete, consuming only its bytes. Cancel-safe: the partial message is
/// in `decoder`.
#[cfg(all(feature = "tokio", any(feature = "nodeinfo", feature = "privval")))]
pub(crate) fn poll_feed<S, D>(
    mut stream: std::pin::Pin<&mut S>,
    cx: &mut std::task::Context<'_>,
    decoder: &mut D,
) -> std::task::Poll<Result<D::Item, D::Error>>
where
    S: tokio::io::AsyncBufRead + ?Sized,
    D: Feed,
{
    use std::task::Poll;
    loop {
        let buf = match stream.as_mut().poll_fill_buf(cx) {
            Poll::Ready(Ok(buf)) => buf,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e.into())),
            Poll::Pending => return Poll::Pending,
        };
        if buf.is_empty() {
            return Poll::Ready(Err(decoder.end_of_stream()));
        }
        let (used, done) = decoder.feed(buf)?;
        stream.as_mut().consume(used);
        if let Some(item) = done {
            return Poll::Ready(Ok(item));
        }
    }
}

/// [`poll_feed`] over a blocking `BufRead` (an interrupted read is retried).
#[cfg_attr(not(feature = "nodeinfo"), allow(dead_code))]
pub(crate) fn feed_blocking<S, D>(stream: &mut S, decoder: &mut D) -> Result<D::Item, D::Error>
where
    S: std::io::BufRead + ?Sized,
    D: Feed,
{
    loop {
        let buf = match stream.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        if buf.is_empty() {
            return Err(decoder.end_of_stream());
        }
        let (used, done) = decoder.feed(buf)?;
        stream.consume(used);
        if let Some(item) = done {
            return Ok(item);
        }
    }
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
