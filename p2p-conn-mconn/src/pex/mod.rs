//! The PEX messages: what a node asks and answers on channel `0x00`.
//!
//! `tendermint.p2p.Message` (v0.34 to v0.38) and `cometbft.p2p.v1.Message`
//! (v1) have the same fields: `oneof sum { PexRequest pex_request = 1;
//! PexAddrs pex_addrs = 2; }`, `PexAddrs { repeated NetAddress addrs = 1; }`,
//! `NetAddress { string id = 1; string ip = 2; uint32 port = 3; }`. A PEX
//! message is one MConnection message (not length-prefixed: the packets
//! carry its length).
//!
//! Only the messages: no reactor rules (one request per peer per interval,
//! at most 250 addresses per answer, address validation) and no address
//! book.

use thiserror::Error;

/// The PEX channel's ID.
pub const PEX_CHANNEL: u8 = 0x00;

/// The largest PEX message CometBFT accepts (`maxMsgSize`: 256-byte
/// addresses times `maxGetSelection` 250), the PEX channel's
/// `RecvMessageCapacity`.
pub const MAX_PEX_MESSAGE_SIZE: usize = 256 * 250;

/// A peer's address as PEX carries it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NetAddress {
    /// The node ID (40 hex digits on a valid address; not checked here).
    pub id: String,
    /// The IP address as text (not checked here).
    pub ip: String,
    /// The port (`uint32` on the wire; CometBFT refuses one over 65535).
    pub port: u32,
}

/// One PEX message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PexMessage {
    /// `PexRequest`: send me addresses.
    Request,
    /// `PexAddrs`: addresses, the answer to a request.
    Addrs(Vec<NetAddress>),
}

/// Why a PEX message was refused.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
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

impl PexMessage {
    /// The message's bytes (one MConnection message on [`PEX_CHANNEL`]).
    pub fn encode(&self) -> Vec<u8> {
        use prost::Message;
        let sum = match self {
            PexMessage::Request => wire::Sum::PexRequest(wire::PexRequest {}),
            PexMessage::Addrs(addrs) => wire::Sum::PexAddrs(wire::PexAddrs {
                addrs: addrs
                    .iter()
                    .map(|a| wire::NetAddress {
                        id: a.id.clone().into_bytes(),
                        ip: a.ip.clone().into_bytes(),
                        port: a.port,
                    })
                    .collect(),
            }),
        };
        wire::Message { sum: Some(sum) }.encode_to_vec()
    }

    /// Decodes a message of at most [`MAX_PEX_MESSAGE_SIZE`] bytes.
    pub fn decode(bytes: &[u8]) -> Result<PexMessage, PexError> {
        PexMessage::decode_with_limit(bytes, MAX_PEX_MESSAGE_SIZE)
    }

    /// Decodes a message of at most `limit` bytes (checked before
    /// decoding).
    pub fn decode_with_limit(bytes: &[u8], limit: usize) -> Result<PexMessage, PexError> {
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

        #[test]
        fn no_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = PexMessage::decode(&bytes);
        }
    }
}
