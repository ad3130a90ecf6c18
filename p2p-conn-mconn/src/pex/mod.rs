//! PEX, CometBFT's peer exchange on channel `0x00`: the messages, and the
//! rules CometBFT's PEX reactor holds its peers to, for a crawler and a
//! seed node alike.
//!
//! `tendermint.p2p.Message` (v0.34 to v0.38) and `cometbft.p2p.v1.Message`
//! (v1) have the same fields: `oneof sum { PexRequest pex_request = 1;
//! PexAddrs pex_addrs = 2; }`, `PexAddrs { repeated NetAddress addrs = 1; }`,
//! `NetAddress { string id = 1; string ip = 2; uint32 port = 3; }`. A PEX
//! message is one MConnection message (not length-prefixed: the packets
//! carry its length).
//!
//! # Design
//! - [`PexMessage`] encodes and decodes the messages, with the size cap
//!   [`MAX_PEX_MESSAGE_SIZE`].
//! - The rules are sans-IO: plain values in, typed verdicts out, the clock
//!   passed in as `now` (`std::time::Instant`), no tasks, no sockets. The
//!   caller does what a verdict says (send, answer, hang up, ban).
//! - [`NetAddress::validate`] checks one received address under an
//!   [`AddrPolicy`] and gives a [`PeerAddr`] to dial, or an [`AddrError`];
//!   [`check_message`] checks what makes a whole `PexAddrs` refused.
//! - [`Requests`] is the answering side (a node, a seed): what to do with
//!   each peer's `PexRequest` ([`RequestVerdict`]).
//! - [`Asks`] is the asking side (a node, a crawler): whether we may send
//!   a peer a `PexRequest` now ([`AskVerdict`]), and whether a `PexAddrs`
//!   answers one ([`AddrsVerdict`]).
//! - [`answer_len`] and [`fit_answer`] size an answer.
//! - [`book::Book`] keeps a network's addresses for a seed: learned, tried,
//!   good or bad, and what to hand a peer that asks.
//! - What makes CometBFT stop and ban a peer is one [`Violation`], with the
//!   ban's length ([`BAN_TIME`]).
//!
//! Each rule below is CometBFT's, read in `p2p/netaddress.go`,
//! `p2p/pex/pex_reactor.go`, `p2p/pex/addrbook.go` and `p2p/pex/params.go`
//! at v0.34.35, v0.38.26, v0.40.0 and v1.0.1, where the rules below are the
//! same. The lines differ only in when a node itself asks and dials, which
//! is not here: v0.34.35 dials a seed's addresses as they come, v0.38.26
//! and v1.0.1 wake their dialer instead and ask a peer only on the 30 s
//! tick, v0.40.0 also asks on that wake-up.
//!
//! # Guarantees
//! - **Addresses** ([`NetAddress::validate`]). Refused as CometBFT refuses
//!   them, in its order. First what `NetAddressFromProto` cannot read, for
//!   which the reactor's `Receive` refuses the whole `PexAddrs`, stops the
//!   peer and bans it ([`AddrError::stops_peer`]): an IP that is not an IP
//!   address (as `net.ParseIP` reads: no host names, no leading zeros, no
//!   zone) and a port over 65535. Then what `NetAddress.Valid` refuses,
//!   for which the address book's `addAddress` skips the address: no ID,
//!   an ID that is not 40 hex digits (`validateID`: 20 bytes of hex, either
//!   case), an unspecified IP, the IPv4 broadcast address, an IPv6
//!   documentation address (RFC 3849). Then port 0, which CometBFT does
//!   not check (it stores the address and fails to dial it) and this crate
//!   refuses. Last, under [`AddrPolicy::Strict`] (CometBFT's default
//!   `addr_book_strict = true`, the book's `routabilityStrict`), what
//!   `NetAddress.Routable` calls unroutable: RFC 1918, RFC 3927, RFC 4862
//!   (`fe80::/64`), RFC 4193, RFC 4843, loopback and `0.0.0.0/8`.
//!   [`AddrPolicy::AcceptUnroutable`] accepts those, as
//!   `addr_book_strict = false` does (local and private test networks);
//!   [`PeerAddr::is_routable`] still tells. An IPv4-mapped IPv6 address is
//!   judged and dialed as its IPv4 address, as Go's `net.IP` does.
//! - **Requests a node takes** ([`Requests`]; `pex_reactor.go`, `Receive`
//!   and `receiveRequest`). A peer's first [`FREE_REQUESTS`] (2) requests
//!   on a connection are answered whenever they come; each later one must
//!   come at least [`MIN_REQUEST_INTERVAL`] (`minReceiveRequestInterval`,
//!   `ensurePeersPeriod / 3` = 10 s, [`ENSURE_PEERS_PERIOD`] being 30 s)
//!   after the previous one that counted, the second free one included:
//!   exactly the interval passes, less is
//!   [`Violation::RequestTooSoon`] (stop the peer, ban it for
//!   [`BAN_TIME`], 24 h: `defaultBanTime`, the book's `MarkBad`). A seed
//!   (`seed_mode`) answers an inbound peer's first request and disconnects
//!   it gracefully, without a ban, ignoring any request meanwhile; an
//!   outbound peer of a seed is held to the interval like any peer.
//!   [`Requests::remove`] forgets a peer (`RemovePeer`), so a new
//!   connection starts free again.
//! - **Requests we send** ([`Asks`]; `RequestAddrs`, `ReceiveAddrs`). At
//!   most one request out per peer, with no time-out: another waits for its
//!   answer or the disconnect ([`AskVerdict::Unanswered`]). Past the first
//!   two, a request goes at least [`MIN_REQUEST_INTERVAL`] after the
//!   previous answer arrived, so the peer's `receiveRequest`, which counts
//!   from when it received our previous request, never stops us
//!   ([`AskVerdict::TooSoon`]). A `PexAddrs` that answers no request of
//!   ours is [`Violation::Unsolicited`] (`ErrUnsolicitedList`: stop, ban);
//!   one with an address CometBFT cannot read is
//!   [`Violation::BadAddress`], checked first, as CometBFT decodes before
//!   it looks for the request.
//! - **Answers** ([`answer_len`], [`fit_answer`]; the book's `GetSelection`
//!   and `params.go`). A node sends [`ANSWER_PERCENT`] (23 %) of what it
//!   knows, at least [`MIN_ANSWER_ADDRS`] (32, or all it has) and at most
//!   [`MAX_ANSWER_ADDRS`] (250, `maxGetSelection`). [`fit_answer`] also
//!   keeps the encoded message within [`MAX_PEX_MESSAGE_SIZE`] (64000
//!   bytes, `maxMsgSize`: 256 bytes per address times 250), the PEX
//!   channel's `RecvMessageCapacity`: a longer message makes the peer's
//!   MConnection stop the connection. A received `PexAddrs` is bounded by
//!   those bytes only: CometBFT does not count the addresses it receives,
//!   and neither does [`Asks::on_addrs`].
//! - Memory: [`Requests`] and [`Asks`] hold one small entry per peer,
//!   until `remove`.
//!
//! # Not provided
//! - No address book: buckets, the ban list itself (a [`Violation`] says
//!   to ban and for how long; keeping the list and refusing banned IDs,
//!   `ErrAddressBanned`, is the caller's), our own addresses
//!   (`ErrAddrBookSelf`), private IDs (`private_peer_ids`), how addresses
//!   are picked (`GetSelection`'s shuffle, `GetSelectionWithBias`).
//! - No reactor loop: when to ask which peer (`ensurePeers`, every 30 s),
//!   dialing and its back-off (`dialPeer`), a seed's crawl of its book
//!   (`crawlPeersRoutine`, `minTimeBetweenCrawls`) and when it drops
//!   peers (`attemptDisconnects`).
//! - No I/O: nothing here sends, reads or disconnects.

use thiserror::Error;

mod addr;
mod answer;
mod asks;
pub mod book;
mod requests;
mod violation;

pub use self::addr::{check_message, AddrError, AddrPolicy, PeerAddr};
pub use self::answer::{
    answer_len, fit_answer, ANSWER_PERCENT, MAX_ANSWER_ADDRS, MIN_ANSWER_ADDRS,
};
pub use self::asks::{AddrsVerdict, AskVerdict, Asks};
pub use self::requests::{
    Direction, RequestVerdict, Requests, RequestsConfig, ENSURE_PEERS_PERIOD, FREE_REQUESTS,
    MIN_REQUEST_INTERVAL,
};
pub use self::violation::{Violation, BAN_TIME};

/// The PEX channel's ID.
pub const PEX_CHANNEL: u8 = 0x00;

/// The largest PEX message CometBFT accepts (`maxMsgSize`: 256-byte
/// addresses times `maxGetSelection` 250), the PEX channel's
/// `RecvMessageCapacity`.
pub const MAX_PEX_MESSAGE_SIZE: usize = 256 * 250;

/// A peer's address as PEX carries it, unchecked
/// ([`validate`](NetAddress::validate) checks it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NetAddress {
    /// The node ID (40 hex digits on a valid address).
    pub id: String,
    /// The IP address as text.
    pub ip: String,
    /// The port (`uint32` on the wire; CometBFT refuses one over 65535).
    pub port: u32,
}

/// One PEX message.
#[derive(Clone, Debug, PartialEq)]
pub enum PexMessage {
    /// `PexRequest`: send me addresses.
    Request,
    /// `PexAddrs`: addresses, the answer to a request.
    Addrs(Vec<NetAddress>),
}

/// Why a PEX message was refused.
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum PexError {
    /// Longer than the limit.
    #[error("PEX message of {len} bytes, over the limit of {limit}")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// Not valid protobuf.
    #[error("malformed PEX message: {0}")]
    Malformed(String),
    /// Neither a request nor addresses (CometBFT: "unknown message").
    #[error("PEX message of no known kind")]
    Unknown,
    /// A string field that is not UTF-8.
    #[error("PEX field {0} is not UTF-8")]
    NotUtf8(&'static str),
}

mod wire {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Message {
        #[prost(oneof = "Sum", tags = "1, 2")]
        pub sum: Option<Sum>,
    }

    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Sum {
        #[prost(message, tag = "1")]
        PexRequest(PexRequest),
        #[prost(message, tag = "2")]
        PexAddrs(PexAddrs),
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PexRequest {}

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PexAddrs {
        #[prost(message, repeated, tag = "1")]
        pub addrs: Vec<NetAddress>,
    }

    /// Strings as bytes, so a bad field is named.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NetAddress {
        #[prost(bytes = "vec", tag = "1")]
        pub id: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        pub ip: Vec<u8>,
        #[prost(uint32, tag = "3")]
        pub port: u32,
    }
}

/// Appends `a` as one address of a `PexAddrs` (its field 1: the tag, the
/// length, then the `NetAddress`'s id (1), ip (2) and port (3); empty
/// strings and a zero port left out), as prost writes it.
pub(crate) fn encode_addr(a: &NetAddress, out: &mut Vec<u8>) {
    use prost::encoding::encode_varint;
    let text = |out: &mut Vec<u8>, tag: u8, s: &str| {
        if !s.is_empty() {
            out.push(tag);
            encode_varint(s.len() as u64, out);
            out.extend_from_slice(s.as_bytes());
        }
    };
    out.push(0x0a);
    encode_varint(answer::encoded_len(a) as u64, out);
    text(out, 0x0a, &a.id);
    text(out, 0x12, &a.ip);
    if a.port != 0 {
        out.push(0x18);
        encode_varint(u64::from(a.port), out);
    }
}

/// The bytes of a `PexAddrs` message (Message field 2) whose addresses are
/// `records`, each written by [`encode_addr`], one after another.
pub(crate) fn addrs_message(records: &[&[u8]]) -> Vec<u8> {
    let body: usize = records.iter().map(|r| r.len()).sum();
    let mut out = Vec::with_capacity(1 + prost::length_delimiter_len(body) + body);
    out.push(0x12);
    prost::encoding::encode_varint(body as u64, &mut out);
    for r in records {
        out.extend_from_slice(r);
    }
    out
}

impl PexMessage {
    /// The message's bytes (one MConnection message on [`PEX_CHANNEL`]).
    pub fn encode(&self) -> Vec<u8> {
        use prost::Message;
        let addrs = match self {
            PexMessage::Request => {
                return wire::Message {
                    sum: Some(wire::Sum::PexRequest(wire::PexRequest {})),
                }
                .encode_to_vec()
            }
            PexMessage::Addrs(addrs) => addrs,
        };
        // Written field by field, as prost writes `wire::Message`, without
        // copying each address's strings first.
        let mut records = Vec::new();
        for a in addrs {
            encode_addr(a, &mut records);
        }
        addrs_message(&[&records])
    }

    /// Decodes a message of at most [`MAX_PEX_MESSAGE_SIZE`] bytes.
    pub fn decode(bytes: &[u8]) -> Result<PexMessage, PexError> {
        PexMessage::decode_with_limit(bytes, MAX_PEX_MESSAGE_SIZE)
    }

    /// Decodes a message of at most `limit` bytes (checked before
    /// decoding).
    fn decode_with_limit(bytes: &[u8], limit: usize) -> Result<PexMessage, PexError> {
        use prost::Message;
        if bytes.len() > limit {
            return Err(PexError::TooLarge {
                len: bytes.len(),
                limit,
            });
        }
        let msg = wire::Message::decode(bytes).map_err(|e| PexError::Malformed(e.to_string()))?;
        match msg.sum {
            Some(wire::Sum::PexRequest(_)) => Ok(PexMessage::Request),
            Some(wire::Sum::PexAddrs(a)) => {
                let text =
                    |field, b: Vec<u8>| String::from_utf8(b).map_err(|_| PexError::NotUtf8(field));
                a.addrs
                    .into_iter()
                    .map(|a| {
                        Ok(NetAddress {
                            id: text("addrs.id", a.id)?,
                            ip: text("addrs.ip", a.ip)?,
                            port: a.port,
                        })
                    })
                    .collect::<Result<_, _>>()
                    .map(PexMessage::Addrs)
            }
            None => Err(PexError::Unknown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hand_computed_bytes() {
        // Message{pex_request = 1: {}}.
        assert_eq!(PexMessage::Request.encode(), [0x0a, 0x00]);
        let one = NetAddress {
            id: "ab".into(),
            ip: "1.2.3.4".into(),
            port: 26656,
        };
        // 26656 = 0xa0 0xd0 0x01.
        let addr = [
            0x0a, 0x02, b'a', b'b', 0x12, 0x07, b'1', b'.', b'2', b'.', b'3', b'.', b'4', 0x18,
            0xa0, 0xd0, 0x01,
        ];
        let mut want = vec![0x12, 2 + addr.len() as u8, 0x0a, addr.len() as u8];
        want.extend_from_slice(&addr);
        let msg = PexMessage::Addrs(vec![one]);
        assert_eq!(msg.encode(), want);
        assert_eq!(PexMessage::decode(&want).unwrap(), msg);
        // No addresses: an empty PexAddrs, still field 2.
        assert_eq!(PexMessage::Addrs(vec![]).encode(), [0x12, 0x00]);
    }

    #[test]
    fn refusals_are_typed() {
        assert_eq!(PexMessage::decode(&[]), Err(PexError::Unknown));
        assert!(matches!(
            PexMessage::decode(&[0x12, 0x05]),
            Err(PexError::Malformed(_))
        ));
        assert_eq!(
            PexMessage::decode(&[0x12, 0x04, 0x0a, 0x02, 0x0a, 0x00]).map(|_| ()),
            Ok(())
        );
        assert_eq!(
            PexMessage::decode(&[0x12, 0x05, 0x0a, 0x03, 0x0a, 0x01, 0xff]),
            Err(PexError::NotUtf8("addrs.id"))
        );
        let big = vec![0; MAX_PEX_MESSAGE_SIZE + 1];
        assert_eq!(
            PexMessage::decode(&big),
            Err(PexError::TooLarge {
                len: MAX_PEX_MESSAGE_SIZE + 1,
                limit: MAX_PEX_MESSAGE_SIZE
            })
        );
    }

    proptest! {
        #[test]
        fn round_trip(addrs in proptest::collection::vec(("[0-9a-f]{0,40}", "[0-9.:a-f]{0,20}", any::<u32>()), 0..30)) {
            let msg = PexMessage::Addrs(addrs.into_iter().map(|(id, ip, port)| NetAddress { id, ip, port }).collect());
            prop_assert_eq!(PexMessage::decode(&msg.encode()).unwrap(), msg);
        }

        /// The bytes are prost's for the same message.
        #[test]
        fn encoded_as_prost_encodes(addrs in proptest::collection::vec(("[0-9a-f]{0,40}", "[0-9.:a-f]{0,20}", any::<u32>()), 0..30)) {
            use prost::Message;
            let by_prost = wire::Message {
                sum: Some(wire::Sum::PexAddrs(wire::PexAddrs {
                    addrs: addrs
                        .iter()
                        .map(|(id, ip, port)| wire::NetAddress {
                            id: id.clone().into_bytes(),
                            ip: ip.clone().into_bytes(),
                            port: *port,
                        })
                        .collect(),
                })),
            }
            .encode_to_vec();
            let msg = PexMessage::Addrs(addrs.into_iter().map(|(id, ip, port)| NetAddress { id, ip, port }).collect());
            prop_assert_eq!(msg.encode(), by_prost);
        }

        #[test]
        fn no_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = PexMessage::decode(&bytes);
        }
    }
}
