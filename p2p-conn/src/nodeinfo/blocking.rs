//! The NodeInfo exchange over a std stream: a
//! [`crate::io::blocking::SecretConnection`] or any `BufRead + Write`.
//!
//! Without a second thread, [`exchange`] sends first and then reads. That
//! cannot deadlock with a CometBFT node, which sends its own NodeInfo
//! without waiting, and our message (at most 10 KiB) fits any socket
//! buffer. Bound it with the socket's read and write timeouts.

use std::io::{BufRead, Write};

use super::{Decoder, NodeInfo, NodeInfoError};
use crate::io::blocking::decode;

/// Sends `ours`, then reads and returns the peer's NodeInfo, unchecked:
/// apply [`NodeInfo::validate`], [`NodeInfo::check_id`] and
/// [`NodeInfo::compatible_with`] next.
pub fn exchange<S: BufRead + Write>(
    stream: &mut S,
    ours: &NodeInfo,
) -> Result<NodeInfo, NodeInfoError> {
    write(stream, ours)?;
    read(stream)
}

/// Reads the peer's NodeInfo, taking only its bytes from the stream's
/// buffer.
pub fn read<S: BufRead>(stream: &mut S) -> Result<NodeInfo, NodeInfoError> {
    decode(stream, &mut Decoder::new())
}

/// Sends `ours` and flushes it.
pub fn write<S: Write>(stream: &mut S, ours: &NodeInfo) -> Result<(), NodeInfoError> {
    stream.write_all(&ours.encode_delimited()?)?;
    stream.flush()?;
    Ok(())
}
