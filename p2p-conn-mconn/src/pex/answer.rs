//! The size of an answer: how many addresses a node sends, and the most
//! that fit.

use super::{NetAddress, MAX_PEX_MESSAGE_SIZE};

/// The most addresses in one `PexAddrs` a node sends (`maxGetSelection`).
pub const MAX_ANSWER_ADDRS: usize = 250;

/// The fewest addresses a node sends when it knows that many
/// (`minGetSelection`).
pub const MIN_ANSWER_ADDRS: usize = 32;

/// The share of its book a node sends, in percent (`getSelectionPercent`).
pub const ANSWER_PERCENT: usize = 23;

/// How many addresses a node that knows `known` sends in an answer, as
/// CometBFT's `GetSelection` counts them: [`ANSWER_PERCENT`] of the book,
/// at least [`MIN_ANSWER_ADDRS`] (or all it knows, if fewer), at most
/// [`MAX_ANSWER_ADDRS`].
pub fn answer_len(known: usize) -> usize {
    let share = known.saturating_mul(ANSWER_PERCENT) / 100;
    share.max(known.min(MIN_ANSWER_ADDRS)).min(MAX_ANSWER_ADDRS)
}

/// The longest prefix of `addrs` that a `PexAddrs` may carry: at most
/// [`MAX_ANSWER_ADDRS`] addresses, encoded in at most
/// [`MAX_PEX_MESSAGE_SIZE`] bytes (the PEX channel's receive capacity, past
/// which the peer's MConnection stops the connection).
pub fn fit_answer(addrs: &[NetAddress]) -> &[NetAddress] {
    let n = fit_count(addrs.iter().map(|a| {
        let entry = encoded_len(a);
        // Field 1 of PexAddrs: a one-byte tag, the length, the entry.
        1 + prost::length_delimiter_len(entry) + entry
    }));
    &addrs[..n]
}

/// How many of the addresses whose records (field 1 of `PexAddrs`: tag,
/// length, entry) take `records` bytes fit one answer ([`fit_answer`]).
pub(super) fn fit_count(records: impl Iterator<Item = usize>) -> usize {
    let mut body = 0usize;
    let mut n = 0;
    for record in records.take(MAX_ANSWER_ADDRS) {
        let with = body + record;
        // Field 2 of Message: a one-byte tag, the length, PexAddrs.
        if 1 + prost::length_delimiter_len(with) + with > MAX_PEX_MESSAGE_SIZE {
            break;
        }
        body = with;
        n += 1;
    }
    n
}

/// The bytes of `a` as a protobuf `NetAddress` (proto3: empty strings and
/// a zero port are not written).
pub(super) fn encoded_len(a: &NetAddress) -> usize {
    let text = |len: usize| {
        if len == 0 {
            0
        } else {
            1 + prost::length_delimiter_len(len) + len
        }
    };
    let port = if a.port == 0 {
        0
    } else {
        1 + prost::encoding::encoded_len_varint(u64::from(a.port))
    };
    text(a.id.len()) + text(a.ip.len()) + port
}
