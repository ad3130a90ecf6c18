//! MConnection packets: the hand-declared protobuf messages, the
//! varint-delimited encoder and the sans-IO [`PacketDecoder`].

use super::MConnError;
use p2p_conn::delimited::{DelimitedReader, PrefixError};

/// CometBFT's default `max_packet_msg_payload_size`, in bytes: the most
/// message bytes one `PacketMsg` carries (network-wide in practice: a peer
/// with a larger value sends packets the others refuse).
pub const DEFAULT_MAX_PACKET_MSG_PAYLOAD_SIZE: usize = 1024;

/// The protobuf messages (`tendermint.p2p` at v0.34 to v0.38,
/// `cometbft.p2p.v1` at v1; same field numbers on every line).
pub(super) mod wire {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Packet {
        #[prost(oneof = "Sum", tags = "1, 2, 3")]
        pub sum: Option<Sum>,
    }

    /// `packet_ping = 1`, `packet_pong = 2`, `packet_msg = 3`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Sum {
        #[prost(message, tag = "1")]
        Ping(Empty),
        #[prost(message, tag = "2")]
        Pong(Empty),
        #[prost(message, tag = "3")]
        Msg(PacketMsg),
    }

    /// `PacketPing` and `PacketPong`: no fields.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Empty {}

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PacketMsg {
        #[prost(int32, tag = "1")]
        pub channel_id: i32,
        #[prost(bool, tag = "2")]
        pub eof: bool,
        #[prost(bytes = "vec", tag = "3")]
        pub data: Vec<u8>,
    }
}

/// One MConnection packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet {
    /// `PacketPing`: the peer wants a pong.
    Ping,
    /// `PacketPong`: the answer to our ping.
    Pong,
    /// `PacketMsg`: a piece of a message on a channel.
    Msg(PacketMsg),
}

/// `PacketMsg`: a piece of a channel's message; `eof` marks the last one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PacketMsg {
    /// The channel, as on the wire (`int32`; a peer may send any value, and
    /// a channel is only valid in `0..=255` and when both sides have it).
    pub channel_id: i32,
    /// Whether this piece ends the message.
    pub eof: bool,
    /// The piece's bytes.
    pub data: Vec<u8>,
}

/// The length of a protobuf varint.
fn varint_len(v: u64) -> usize {
    prost::encoding::encoded_len_varint(v)
}

/// The largest encoded `Packet` (length prefix excluded) a connection with
/// this payload size sends and accepts, computed as CometBFT does: a
/// `PacketMsg` on channel 1 with `eof` set and a full payload. 1034 for the
/// default payload of 1024.
pub const fn max_packet_size(max_payload: usize) -> usize {
    // PacketMsg: 08 01 (channel 1), 10 01 (eof), 1a LEN data.
    let inner = 2 + 2 + 1 + const_varint_len(max_payload as u64) + max_payload;
    1 + const_varint_len(inner as u64) + inner
}

/// The most bytes a packet takes on the wire, length prefix included
/// (1036 for the default payload of 1024).
pub(crate) const fn max_packet_wire_size(max_payload: usize) -> usize {
    let body = max_packet_size(max_payload);
    const_varint_len(body as u64) + body
}

const fn const_varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Appends `packet`, varint-delimited, to `out`: the bytes CometBFT's
/// `protoio` writer sends. Returns how many bytes it appended.
pub fn encode_packet(packet: &Packet, out: &mut Vec<u8>) -> usize {
    use prost::Message;
    let start = out.len();
    let sum = match packet {
        Packet::Ping => wire::Sum::Ping(wire::Empty {}),
        Packet::Pong => wire::Sum::Pong(wire::Empty {}),
        Packet::Msg(m) => wire::Sum::Msg(wire::PacketMsg {
            channel_id: m.channel_id,
            eof: m.eof,
            data: m.data.clone(),
        }),
    };
    wire::Packet { sum: Some(sum) }
        .encode_length_delimited(out)
        .expect("a Vec grows");
    out.len() - start
}

/// The most data bytes one `PacketMsg` on `channel` carries so that the
/// packet stays within [`max_packet_size`]: `max_payload`, one less from
/// channel `0x80` on (whose ID takes a second varint byte; CometBFT's sender
/// does not shorten them, so its full pieces there exceed its own limit).
pub(super) fn piece_size(channel: u8, max_payload: usize) -> usize {
    if channel >= 0x80 {
        max_payload.saturating_sub(1)
    } else {
        max_payload
    }
}

/// The wire size of a `PacketMsg` on `channel` with `len` data bytes,
/// length prefix included.
pub(super) fn msg_wire_size(channel: u8, eof: bool, len: usize) -> usize {
    let inner = msg_body_len(channel, eof, len);
    let body = 1 + varint_len(inner as u64) + inner;
    varint_len(body as u64) + body
}

fn msg_body_len(channel: u8, eof: bool, len: usize) -> usize {
    let ch = if channel == 0 {
        0
    } else {
        1 + varint_len(u64::from(channel))
    };
    let eof = if eof { 2 } else { 0 };
    let data = if len == 0 {
        0
    } else {
        1 + varint_len(len as u64) + len
    };
    ch + eof + data
}

/// Appends a delimited `Packet{PacketMsg{channel, eof, data}}` to `out`
/// without copying `data` into a message first: the bytes prost (and Go)
/// write for it, fields at their default value left out as proto3 does.
pub(super) fn encode_msg(channel: u8, eof: bool, data: &[u8], out: &mut Vec<u8>) -> usize {
    use prost::encoding::encode_varint;
    let start = out.len();
    let inner = msg_body_len(channel, eof, data.len());
    let body = 1 + varint_len(inner as u64) + inner;
    out.reserve(varint_len(body as u64) + body);
    encode_varint(body as u64, out);
    out.push(0x1a); // field 3, length-delimited
    encode_varint(inner as u64, out);
    if channel != 0 {
        out.push(0x08); // field 1, varint
        encode_varint(u64::from(channel), out);
    }
    if eof {
        out.extend_from_slice(&[0x10, 0x01]); // field 2, true
    }
    if !data.is_empty() {
        out.push(0x1a); // field 3, length-delimited
        encode_varint(data.len() as u64, out);
        out.extend_from_slice(data);
    }
    out.len() - start
}

/// Decodes one packet body (no length prefix).
pub(crate) fn decode_packet(body: &[u8]) -> Result<Packet, MConnError> {
    use prost::Message;
    let packet = wire::Packet::decode(body).map_err(|e| MConnError::Malformed(e.to_string()))?;
    match packet.sum {
        Some(wire::Sum::Ping(_)) => Ok(Packet::Ping),
        Some(wire::Sum::Pong(_)) => Ok(Packet::Pong),
        Some(wire::Sum::Msg(m)) => Ok(Packet::Msg(PacketMsg {
            channel_id: m.channel_id,
            eof: m.eof,
            data: m.data,
        })),
        None => Err(MConnError::UnknownPacket),
    }
}

/// The sans-IO packet reader: feed it the byte stream in any pieces (a
/// packet may straddle any number of secret-connection frames, and a frame
/// may hold many packets), get one packet at a time.
///
/// A length prefix over [`max_packet_size`] is refused as soon as it is
/// complete, before anything is allocated; a body is read into one buffer of
/// at most that size. After an error the stream is out of step: every later
/// call returns the same error.
///
/// ```
/// # #[cfg(feature = "testkit")] {
/// use p2p_conn_mconn::testkit::{Packet, PacketDecoder};
/// use p2p_conn_mconn::DEFAULT_MAX_PACKET_MSG_PAYLOAD_SIZE;
///
/// let mut dec = PacketDecoder::new(DEFAULT_MAX_PACKET_MSG_PAYLOAD_SIZE);
/// let wire = [0x02, 0x0a, 0x00, 0x02, 0x12, 0x00]; // ping, pong
/// assert_eq!(dec.feed(&wire).unwrap(), (3, Some(Packet::Ping)));
/// assert_eq!(dec.feed(&wire[3..4]).unwrap(), (1, None));
/// assert_eq!(dec.feed(&wire[4..]).unwrap(), (2, Some(Packet::Pong)));
/// # }
/// ```
#[derive(Debug)]
pub struct PacketDecoder {
    reader: DelimitedReader,
    failed: Option<MConnError>,
}

impl PacketDecoder {
    /// A decoder for a connection whose `max_packet_msg_payload_size` is
    /// `max_payload` (it accepts bodies up to [`max_packet_size`]).
    pub fn new(max_payload: usize) -> PacketDecoder {
        PacketDecoder {
            reader: DelimitedReader::new(max_packet_size(max_payload)),
            failed: None,
        }
    }

    /// The largest packet body it accepts, in bytes.
    #[cfg(any(test, feature = "testkit"))]
    pub fn max_packet_size(&self) -> usize {
        self.reader.limit()
    }

    /// Whether no byte of a packet has been taken yet.
    pub(crate) fn is_idle(&self) -> bool {
        self.reader.is_idle()
    }

    /// Takes what it needs of `input`, never a byte past one packet: how
    /// many bytes it took, and the packet once complete.
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Packet>), MConnError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = match self.reader.feed(input) {
            Ok((used, None)) => return Ok((used, None)),
            Ok((used, Some(body))) => decode_packet(&body).map(|p| (used, Some(p))),
            Err(PrefixError::BadLength) => Err(MConnError::BadLength),
            Err(PrefixError::TooLarge { len, limit }) => {
                Err(MConnError::PacketTooLarge { len, max: limit })
            }
        };
        if let Err(e) = &result {
            self.failed = Some(e.clone());
        }
        result
    }

    /// Bytes of the current packet taken so far (0 at a packet boundary).
    pub(crate) fn partial(&self) -> usize {
        self.reader.progress().0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wire_examples() {
        let mut out = Vec::new();
        encode_packet(&Packet::Ping, &mut out);
        assert_eq!(out, [0x02, 0x0a, 0x00]);
        out.clear();
        encode_packet(&Packet::Pong, &mut out);
        assert_eq!(out, [0x02, 0x12, 0x00]);
        // Hand-computed: channel 0x20, eof, data "hi".
        out.clear();
        encode_msg(0x20, true, b"hi", &mut out);
        assert_eq!(
            out,
            [0x0a, 0x1a, 0x08, 0x08, 0x20, 0x10, 0x01, 0x1a, 0x02, b'h', b'i']
        );
        // Channel 0 and eof false are left out (proto3 defaults).
        out.clear();
        encode_msg(0, false, b"x", &mut out);
        assert_eq!(out, [0x05, 0x1a, 0x03, 0x1a, 0x01, b'x']);
        // An empty last piece on channel 0: only eof.
        out.clear();
        encode_msg(0, true, b"", &mut out);
        assert_eq!(out, [0x04, 0x1a, 0x02, 0x10, 0x01]);
    }

    #[test]
    fn max_sizes_are_cometbft_values() {
        assert_eq!(max_packet_size(1024), 1034);
        assert_eq!(max_packet_wire_size(1024), 1036);
        let mut out = Vec::new();
        let n = encode_msg(1, true, &[7; 1024], &mut out);
        assert_eq!(n, 1036);
        assert_eq!(&out[..2], &[0x8a, 0x08]); // 1034
        for p in [1usize, 100, 127, 128, 16383, 16384, 65536] {
            let mut out = Vec::new();
            encode_msg(1, true, &vec![0; p], &mut out);
            assert_eq!(out.len(), max_packet_wire_size(p), "payload {p}");
        }
    }

    #[test]
    fn oversized_prefix_refused_before_body() {
        let mut dec = PacketDecoder::new(1024);
        // 1035 = 0x8b 0x08
        let err = dec.feed(&[0x8b, 0x08]).unwrap_err();
        assert_eq!(
            err,
            MConnError::PacketTooLarge {
                len: 1035,
                max: 1034
            }
        );
        assert_eq!(dec.feed(&[0]).unwrap_err(), err, "the error sticks");
        let mut dec = PacketDecoder::new(1024);
        assert_eq!(dec.feed(&[0xff; 11]).unwrap_err(), MConnError::BadLength);
        // Exactly the max is accepted.
        let mut dec = PacketDecoder::new(1024);
        let mut out = Vec::new();
        encode_msg(1, true, &[1; 1024], &mut out);
        let (used, p) = dec.feed(&out).unwrap();
        assert_eq!(used, 1036);
        assert!(matches!(p, Some(Packet::Msg(m)) if m.data.len() == 1024));
    }

    #[test]
    fn garbage_and_empty_are_typed() {
        let mut dec = PacketDecoder::new(1024);
        assert_eq!(dec.feed(&[0x00]).unwrap_err(), MConnError::UnknownPacket);
        let mut dec = PacketDecoder::new(1024);
        // Field 4 only: unknown, skipped, so no oneof member.
        assert_eq!(
            dec.feed(&[0x02, 0x22, 0x00]).unwrap_err(),
            MConnError::UnknownPacket
        );
        let mut dec = PacketDecoder::new(1024);
        assert!(matches!(
            dec.feed(&[0x02, 0x1a, 0x05]).unwrap_err(),
            MConnError::Malformed(_)
        ));
    }

    #[test]
    fn high_channels_stay_within_the_limit() {
        for payload in [2usize, 3, 127, 128, 1024] {
            for ch in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut out = Vec::new();
                let n = encode_msg(ch, true, &vec![0; piece_size(ch, payload)], &mut out);
                assert!(
                    n <= max_packet_wire_size(payload),
                    "ch {ch} payload {payload}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn hand_encoder_matches_prost(ch in any::<u8>(), eof in any::<bool>(),
                                      data in proptest::collection::vec(any::<u8>(), 0..2100)) {
            let mut ours = Vec::new();
            let n = encode_msg(ch, eof, &data, &mut ours);
            prop_assert_eq!(n, ours.len());
            prop_assert_eq!(n, msg_wire_size(ch, eof, data.len()));
            let mut theirs = Vec::new();
            encode_packet(&Packet::Msg(PacketMsg { channel_id: i32::from(ch), eof, data: data.clone() }), &mut theirs);
            prop_assert_eq!(&ours, &theirs);
            // Channels from 0x80 take a second varint byte.
            let mut dec = PacketDecoder::new(data.len() + usize::from(ch >= 0x80));
            let (used, p) = dec.feed(&ours).unwrap();
            prop_assert_eq!(used, ours.len());
            prop_assert_eq!(p, Some(Packet::Msg(PacketMsg { channel_id: i32::from(ch), eof, data })));
        }

        #[test]
        fn no_panic_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..3000),
                                       chunk in 1usize..64) {
            let mut dec = PacketDecoder::new(1024);
            for piece in bytes.chunks(chunk) {
                let mut rest = piece;
                while let Ok((used, _)) = dec.feed(rest) {
                    prop_assert!(used <= rest.len());
                    rest = &rest[used..];
                    if rest.is_empty() {
                        break;
                    }
                }
            }
        }
    }
}
