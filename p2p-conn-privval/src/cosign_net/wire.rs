//! The envelope between cosigners and its sans-IO codec: uvarint
//! length-prefixed protobuf, the prefix checked against the limit before
//! anything is allocated (p2p-conn's `delimited`), every decode error
//! returned. `spec/cosign-net.md` gives the fields.

use bytes::Bytes;
use p2p_conn::delimited::{DelimitedReader, Feed, PrefixError};
use prost::Message as _;

use super::NetError;

/// What the envelope adds to a payload, at most: the oneof's tag and
/// length, a request ID, a kind and the payload's own tag and length.
pub(crate) const ENVELOPE_OVERHEAD: usize = 64;

/// One message between two cosigners.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Envelope {
    #[prost(oneof = "Body", tags = "1, 2, 3, 4, 5, 6")]
    pub body: Option<Body>,
}

/// What an envelope holds.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Body {
    /// The first message each way on a connection.
    #[prost(message, tag = "1")]
    Hello(Hello),
    #[prost(message, tag = "2")]
    Request(Request),
    #[prost(message, tag = "3")]
    Response(Response),
    /// A request that got no response payload.
    #[prost(message, tag = "4")]
    Failure(Failure),
    #[prost(message, tag = "5")]
    Ping(Ping),
    #[prost(message, tag = "6")]
    Pong(Ping),
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Hello {
    #[prost(bytes = "vec", tag = "1")]
    pub cluster_id: Vec<u8>,
    #[prost(uint32, tag = "2")]
    pub index: u32,
    #[prost(uint32, tag = "3")]
    pub version: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Request {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint32, tag = "2")]
    pub kind: u32,
    #[prost(bytes = "bytes", tag = "3")]
    pub payload: Bytes,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Response {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(bytes = "bytes", tag = "2")]
    pub payload: Bytes,
}

/// Why a request has no response: [`FailureCode`] as a number, and the
/// handler's words.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Failure {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint32, tag = "2")]
    pub code: u32,
    #[prost(string, tag = "3")]
    pub message: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Ping {
    #[prost(uint64, tag = "1")]
    pub nonce: u64,
}

/// [`Failure::code`]'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FailureCode {
    /// The peer's bound on requests in flight from us was reached.
    Busy = 1,
    /// The peer's handler answered with an error.
    Refused = 2,
    /// The peer's handler dropped the request, or the peer serves nothing.
    Dropped = 3,
}

impl FailureCode {
    /// The error a requester sees for a failure from `peer`.
    pub(crate) fn error(code: u32, peer: u16, message: String) -> NetError {
        match code {
            1 => NetError::PeerBusy(peer),
            2 => NetError::Refused { peer, message },
            _ => NetError::Unanswered(peer),
        }
    }
}

impl From<Body> for Envelope {
    fn from(body: Body) -> Self {
        Envelope { body: Some(body) }
    }
}

/// `env` with its length prefix.
pub(crate) fn encode(env: &Envelope) -> Vec<u8> {
    env.encode_length_delimited_to_vec()
}

/// Appends `env` with its length prefix to `buf`.
pub(crate) fn encode_into(env: &Envelope, buf: &mut Vec<u8>) {
    // A Vec grows as needed: encoding into it cannot fail.
    let _ = env.encode_length_delimited(buf);
}

/// Sans-IO reader of envelopes: takes exactly one envelope's prefix and
/// body at a time, refuses a length over its limit before allocating,
/// and is spent after an error (the stream is out of step).
#[derive(Debug)]
pub(crate) struct Decoder {
    reader: DelimitedReader,
    failed: bool,
}

impl Decoder {
    /// A decoder refusing bodies over `limit` bytes.
    pub(crate) fn new(limit: usize) -> Decoder {
        Decoder {
            reader: DelimitedReader::new(limit),
            failed: false,
        }
    }

    fn step(&mut self, input: &[u8]) -> Result<(usize, Option<Envelope>), NetError> {
        let (used, body) = self.reader.feed(input).map_err(|e| match e {
            PrefixError::BadLength => NetError::BadLength,
            PrefixError::TooLarge { len, limit } => NetError::TooLarge { len, limit },
        })?;
        let Some(body) = body else {
            return Ok((used, None));
        };
        let env =
            Envelope::decode(Bytes::from(body)).map_err(|e| NetError::Malformed(e.to_string()))?;
        if env.body.is_none() {
            return Err(NetError::Malformed("an empty envelope".into()));
        }
        Ok((used, Some(env)))
    }
}

impl Feed for Decoder {
    type Item = Envelope;
    type Error = NetError;

    fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Envelope>), NetError> {
        if self.failed {
            return Err(NetError::Malformed(
                "the decoder was fed after an error".into(),
            ));
        }
        let r = self.step(input);
        self.failed = r.is_err();
        r
    }

    fn end_of_stream(&self) -> NetError {
        match self.reader.progress() {
            (0, None) => NetError::Closed,
            (received, expected) => NetError::Truncated { received, expected },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(wire: &[u8], limit: usize) -> Result<Vec<Envelope>, NetError> {
        let mut dec = Decoder::new(limit);
        let mut out = Vec::new();
        let mut at = 0;
        while at < wire.len() {
            let (used, env) = dec.feed(&wire[at..])?;
            at += used;
            out.extend(env);
        }
        Ok(out)
    }

    fn body() -> impl Strategy<Value = Body> {
        let bytes = proptest::collection::vec(any::<u8>(), 0..300);
        prop_oneof![
            (bytes.clone(), any::<u32>(), any::<u32>()).prop_map(|(c, i, v)| Body::Hello(Hello {
                cluster_id: c,
                index: i,
                version: v
            })),
            (any::<u64>(), any::<u32>(), bytes.clone()).prop_map(|(id, kind, p)| {
                Body::Request(Request {
                    id,
                    kind,
                    payload: p.into(),
                })
            }),
            (any::<u64>(), bytes).prop_map(|(id, p)| Body::Response(Response {
                id,
                payload: p.into()
            })),
            (any::<u64>(), any::<u32>(), ".{0,40}")
                .prop_map(|(id, code, message)| { Body::Failure(Failure { id, code, message }) }),
            any::<u64>().prop_map(|nonce| Body::Ping(Ping { nonce })),
            any::<u64>().prop_map(|nonce| Body::Pong(Ping { nonce })),
        ]
    }

    proptest! {
        #![proptest_config(p2p_conn_interop::proptest_config(512))]

        /// Whatever the bytes, the decoder returns (never panics), and
        /// never takes more than it was given.
        #[test]
        fn arbitrary_bytes_never_panic(wire in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let mut dec = Decoder::new(1024);
            let mut at = 0;
            while at < wire.len() {
                match dec.feed(&wire[at..]) {
                    Ok((used, _)) => {
                        prop_assert!(used <= wire.len() - at);
                        if used == 0 { break; }
                        at += used;
                    }
                    Err(_) => {
                        // Spent: it says so again.
                        prop_assert!(dec.feed(&wire[at..]).is_err());
                        break;
                    }
                }
            }
        }

        /// Envelopes back to back come out as they went in, fed in any
        /// split.
        #[test]
        fn round_trip(bodies in proptest::collection::vec(body(), 1..8), split in 1usize..64) {
            let mut wire = Vec::new();
            for b in &bodies {
                encode_into(&Envelope::from(b.clone()), &mut wire);
            }
            let mut dec = Decoder::new(1024);
            let mut got = Vec::new();
            let mut at = 0;
            while at < wire.len() {
                let end = (at + split).min(wire.len());
                let (used, env) = dec.feed(&wire[at..end]).unwrap();
                at += used;
                got.extend(env.and_then(|e| e.body));
            }
            prop_assert_eq!(got, bodies);
        }
    }

    #[test]
    fn oversize_prefix_refused_before_allocation() {
        // 1 GiB announced, to a 1 KiB limit.
        let mut wire = Vec::new();
        prost::encoding::encode_varint(1 << 30, &mut wire);
        match decode_all(&wire, 1024) {
            Err(NetError::TooLarge { len, limit }) => {
                assert_eq!((len, limit), (1 << 30, 1024));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn empty_and_garbage_bodies_are_errors() {
        assert!(matches!(
            decode_all(&[0], 1024),
            Err(NetError::Malformed(_))
        ));
        assert!(matches!(
            decode_all(&[3, 0xff, 0xff, 0xff], 1024),
            Err(NetError::Malformed(_))
        ));
        assert!(matches!(
            decode_all(&[0xff; 11], 1024),
            Err(NetError::BadLength)
        ));
        let dec = Decoder::new(8);
        assert!(matches!(dec.end_of_stream(), NetError::Closed));
        let mut dec = Decoder::new(8);
        dec.feed(&[5, 1]).unwrap();
        assert!(matches!(
            dec.end_of_stream(),
            NetError::Truncated {
                received: 2,
                expected: Some(6)
            }
        ));
    }

    #[test]
    fn a_request_encodes_small() {
        let env = Envelope::from(Body::Request(Request {
            id: u64::MAX,
            kind: u32::MAX,
            payload: vec![7; 200].into(),
        }));
        let wire = encode(&env);
        assert!(wire.len() <= 200 + ENVELOPE_OVERHEAD, "{}", wire.len());
        assert_eq!(decode_all(&wire, 300).unwrap(), [env]);
    }
}
