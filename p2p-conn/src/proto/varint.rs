//! Unsigned LEB128 varints, read by Go's `binary.ReadUvarint` rules: at
//! most [`MAX_VARINT_LEN`] bytes, and the tenth may only carry the top bit
//! of a `u64`. One reader for every length prefix and protobuf tag the
//! layers decode (the handshake's AuthSigMessage, NodeInfo), incremental
//! ([`UvarintReader`], a byte at a time, for decoders that must never take
//! a byte past the prefix) or one-shot ([`read_uvarint`]).

/// The longest varint (a `u64`).
pub const MAX_VARINT_LEN: usize = 10;

/// What one more byte did to a [`UvarintReader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The varint goes on.
    More,
    /// The varint is complete: its value and length in bytes.
    Done(u64, usize),
    /// Not a varint: more than 64 bits.
    Overflow,
}

/// A varint read a byte at a time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UvarintReader {
    value: u64,
    bytes: usize,
}

impl UvarintReader {
    /// Bytes taken so far.
    pub fn taken(&self) -> usize {
        self.bytes
    }

    /// Take the next byte. After `Done` or `Overflow` the reader is spent:
    /// start a new one.
    pub fn push(&mut self, b: u8) -> Step {
        if self.bytes == MAX_VARINT_LEN - 1 && b > 1 {
            return Step::Overflow;
        }
        self.value |= u64::from(b & 0x7f) << (7 * self.bytes);
        self.bytes += 1;
        if b & 0x80 == 0 {
            Step::Done(self.value, self.bytes)
        } else if self.bytes == MAX_VARINT_LEN {
            // Unreachable by the check above (a tenth byte above 1 is
            // refused), kept so the reader never shifts past 63 bits.
            Step::Overflow
        } else {
            Step::More
        }
    }
}

/// Result of reading a varint from the front of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Varint {
    /// Decoded value and the number of bytes it used.
    Value(u64, usize),
    /// The buffer ends inside the varint.
    Incomplete,
    /// More than 64 bits.
    Overflow,
}

/// Decode an unsigned varint from the front of `buf`.
pub fn read_uvarint(buf: &[u8]) -> Varint {
    let mut r = UvarintReader::default();
    for &b in buf {
        match r.push(b) {
            Step::More => {}
            Step::Done(v, n) => return Varint::Value(v, n),
            Step::Overflow => return Varint::Overflow,
        }
    }
    Varint::Incomplete
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_rules() {
        assert_eq!(read_uvarint(&[0]), Varint::Value(0, 1));
        assert_eq!(read_uvarint(&[0x81, 0x50]), Varint::Value(10241, 2));
        assert_eq!(read_uvarint(&[0x80, 0x80]), Varint::Incomplete);
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(read_uvarint(&max), Varint::Value(u64::MAX, 10));
        let mut over = max;
        over[9] = 0x02;
        assert_eq!(read_uvarint(&over), Varint::Overflow);
        assert_eq!(read_uvarint(&[0x80; 11]), Varint::Overflow);
    }
}
