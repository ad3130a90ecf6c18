//! The privval messages and the types inside them, declared by hand for
//! prost in the wire form every tested line reads (`tendermint.privval` at
//! v0.34.35 to v0.40.0, `cometbft.privval.v1` at v1.0.1: protobuf puts no
//! package name on the wire, only field numbers).
//!
//! Fields that gogoproto declares non-nullable (`Vote.block_id`,
//! `Vote.timestamp`, `SignedVoteResponse.vote`, ...) are `required` here:
//! prost always encodes them, as Go does, and leaves them at their default
//! when a peer omits them. Nullable ones are `Option`. Every struct is
//! `#[non_exhaustive]`: build one with `Default` and set its fields, so a
//! field a later line adds is not a breaking change.
//!
//! Field numbers, per line (checked against each line's `.proto` and
//! `.pb.go`; the same list is in the module docs and `spec/privval.md`):
//! - `Message.sum`: 1 to 8 at every line; 9 [`SignBytesRequest`] and 10
//!   [`SignBytesResponse`] at v1.0.1 only.
//! - [`PubKeyResponse`]: `pub_key` 1 and `error` 2 up to v0.40.0; v1.0.1
//!   reserves 1 and reads `pub_key_bytes` 3 and `pub_key_type` 4.
//! - [`SignVoteRequest`]: `skip_extension_signing` 3 at v1.0.1 only.
//! - [`Vote`]: `extension` 9 and `extension_signature` 10 from v0.38.26;
//!   absent at v0.34.35 and v0.37.18, whose decoders skip them.
//! - [`CryptoPublicKey`]: ed25519 1 and secp256k1 2 at every line; bls12381 3 at
//!   v0.39.4, v0.40.0 and v1.0.1; mldsa65 4 at v0.38.26 and v0.40.0;
//!   secp256k1eth 5 at v0.40.0.

/// `SignedMsgType` values (`Vote.msg_type`, `Proposal.msg_type`), sent as
/// a varint like an `int32`.
pub mod signed_msg_type {
    /// `SIGNED_MSG_TYPE_UNKNOWN`.
    pub const UNKNOWN: i32 = 0;
    /// `SIGNED_MSG_TYPE_PREVOTE`.
    pub const PREVOTE: i32 = 1;
    /// `SIGNED_MSG_TYPE_PRECOMMIT`.
    pub const PRECOMMIT: i32 = 2;
    /// `SIGNED_MSG_TYPE_PROPOSAL`.
    pub const PROPOSAL: i32 = 32;
}

/// `google.protobuf.Timestamp`: seconds since the Unix epoch and
/// nanoseconds (0 to 999,999,999 in a valid one; not checked here).
#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct Timestamp {
    /// Seconds since 1970-01-01T00:00:00Z.
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    /// Nanoseconds within the second.
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Timestamp {
    /// The timestamp `seconds` + `nanos` after the epoch.
    pub fn new(seconds: i64, nanos: i32) -> Timestamp {
        Timestamp { seconds, nanos }
    }
}

/// `PartSetHeader`.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct PartSetHeader {
    /// Number of parts.
    #[prost(uint32, tag = "1")]
    pub total: u32,
    /// Merkle root of the parts (32 bytes, or empty).
    #[prost(bytes = "vec", tag = "2")]
    pub hash: Vec<u8>,
}

/// `BlockID`. All zero for a nil vote.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct BlockId {
    /// Block hash (32 bytes, or empty).
    #[prost(bytes = "vec", tag = "1")]
    pub hash: Vec<u8>,
    /// Non-nullable: always sent.
    #[prost(message, required, tag = "2")]
    pub part_set_header: PartSetHeader,
}

impl BlockId {
    /// Whether this is the nil block ID (CometBFT's `IsZero`, `IsNil` at
    /// v1): no hash, and a part-set header with no parts and no hash.
    pub fn is_nil(&self) -> bool {
        self.hash.is_empty()
            && self.part_set_header.total == 0
            && self.part_set_header.hash.is_empty()
    }
}

/// `Vote` (`tendermint.types.Vote`, `cometbft.types.v1.Vote`).
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct Vote {
    /// `type`: [`signed_msg_type::PREVOTE`] or [`signed_msg_type::PRECOMMIT`].
    #[prost(int32, tag = "1")]
    pub msg_type: i32,
    /// Block height.
    #[prost(int64, tag = "2")]
    pub height: i64,
    /// Consensus round.
    #[prost(int32, tag = "3")]
    pub round: i32,
    /// The block voted for; nil ([`BlockId::is_nil`]) for a nil vote.
    /// Non-nullable: always sent.
    #[prost(message, required, tag = "4")]
    pub block_id: BlockId,
    /// Non-nullable: always sent.
    #[prost(message, required, tag = "5")]
    pub timestamp: Timestamp,
    /// The validator's address.
    #[prost(bytes = "vec", tag = "6")]
    pub validator_address: Vec<u8>,
    /// The validator's index in the validator set.
    #[prost(int32, tag = "7")]
    pub validator_index: i32,
    /// Signature over [`vote_sign_bytes`](super::vote_sign_bytes).
    #[prost(bytes = "vec", tag = "8")]
    pub signature: Vec<u8>,
    /// The application's vote extension (precommits, from v0.38).
    #[prost(bytes = "vec", tag = "9")]
    pub extension: Vec<u8>,
    /// Signature over
    /// [`vote_extension_sign_bytes`](super::vote_extension_sign_bytes).
    #[prost(bytes = "vec", tag = "10")]
    pub extension_signature: Vec<u8>,
}

/// `Proposal`.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct Proposal {
    /// `type`: [`signed_msg_type::PROPOSAL`].
    #[prost(int32, tag = "1")]
    pub msg_type: i32,
    /// Block height.
    #[prost(int64, tag = "2")]
    pub height: i64,
    /// Consensus round.
    #[prost(int32, tag = "3")]
    pub round: i32,
    /// Proof-of-lock round, -1 for none.
    #[prost(int32, tag = "4")]
    pub pol_round: i32,
    /// Non-nullable: always sent.
    #[prost(message, required, tag = "5")]
    pub block_id: BlockId,
    /// Non-nullable: always sent.
    #[prost(message, required, tag = "6")]
    pub timestamp: Timestamp,
    /// Signature over [`proposal_sign_bytes`](super::proposal_sign_bytes).
    #[prost(bytes = "vec", tag = "7")]
    pub signature: Vec<u8>,
}

/// CometBFT's `crypto.PublicKey` (named apart from `p2p_conn::PublicKey`), a
/// oneof of key types.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct CryptoPublicKey {
    /// The key; `None` if the peer sent a type this crate does not know.
    #[prost(oneof = "crypto_public_key::Key", tags = "1, 2")]
    pub sum: Option<crypto_public_key::Key>,
}

/// The [`CryptoPublicKey`] oneof.
pub mod crypto_public_key {
    /// A public key by type.
    #[derive(Clone, PartialEq, Eq, Hash, prost::Oneof)]
    #[non_exhaustive]
    pub enum Key {
        /// A 32-byte Ed25519 key.
        #[prost(bytes, tag = "1")]
        Ed25519(Vec<u8>),
        /// A 33-byte compressed secp256k1 key.
        #[prost(bytes, tag = "2")]
        Secp256k1(Vec<u8>),
    }
}

/// `RemoteSignerError`: why the signer did not sign.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct RemoteSignerError {
    /// Error code (CometBFT's signers send 0 or an `Errors` value).
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// What went wrong.
    #[prost(string, tag = "2")]
    pub description: String,
}

/// `PubKeyRequest`.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct PubKeyRequest {
    /// The node's chain ID.
    #[prost(string, tag = "1")]
    pub chain_id: String,
}

/// `PubKeyResponse`, in the form both wire lines read: up to v0.40.0 a
/// node reads `pub_key` (1); v1.0.1 reserves 1 and reads `pub_key_bytes`
/// (3) and `pub_key_type` (4). Each line skips the other's fields.
/// [`PubKeyResponse::ed25519`] fills all three.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct PubKeyResponse {
    /// The key, as v0.34.35 to v0.40.0 read it (non-nullable there).
    #[prost(message, optional, tag = "1")]
    pub pub_key: Option<CryptoPublicKey>,
    /// Set when the signer could not answer.
    #[prost(message, optional, tag = "2")]
    pub error: Option<RemoteSignerError>,
    /// The key's bytes, as v1.0.1 reads them.
    #[prost(bytes = "vec", tag = "3")]
    pub pub_key_bytes: Vec<u8>,
    /// The key's type name (`"ed25519"`), as v1.0.1 reads it.
    #[prost(string, tag = "4")]
    pub pub_key_type: String,
}

impl PubKeyResponse {
    /// An Ed25519 key in both forms: field 1 for v0.34.35 to v0.40.0,
    /// fields 3 and 4 (`"ed25519"`) for v1.0.1. Each line's generated
    /// decoder keeps its own and drops the others (tested), and real nodes
    /// of every line accept it (`p2p-conn-cli/tests/it/signer_cometbft_node.rs`).
    pub fn ed25519(key: [u8; 32]) -> PubKeyResponse {
        PubKeyResponse {
            pub_key: Some(CryptoPublicKey {
                sum: Some(crypto_public_key::Key::Ed25519(key.to_vec())),
            }),
            error: None,
            pub_key_bytes: key.to_vec(),
            pub_key_type: "ed25519".into(),
        }
    }

    /// A response carrying only an error.
    pub fn error(error: RemoteSignerError) -> PubKeyResponse {
        PubKeyResponse {
            error: Some(error),
            ..PubKeyResponse::default()
        }
    }
}

/// `SignVoteRequest`.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct SignVoteRequest {
    /// The vote to sign.
    #[prost(message, optional, tag = "1")]
    pub vote: Option<Vote>,
    /// The node's chain ID.
    #[prost(string, tag = "2")]
    pub chain_id: String,
    /// v1.0.1: the signer may leave the extension unsigned.
    #[prost(bool, tag = "3")]
    pub skip_extension_signing: bool,
}

/// `SignedVoteResponse`.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct SignedVoteResponse {
    /// The signed vote. Non-nullable: always sent.
    #[prost(message, required, tag = "1")]
    pub vote: Vote,
    /// Set when the signer refused or failed.
    #[prost(message, optional, tag = "2")]
    pub error: Option<RemoteSignerError>,
}

/// `SignProposalRequest`.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct SignProposalRequest {
    /// The proposal to sign.
    #[prost(message, optional, tag = "1")]
    pub proposal: Option<Proposal>,
    /// The node's chain ID.
    #[prost(string, tag = "2")]
    pub chain_id: String,
}

/// `SignedProposalResponse`.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct SignedProposalResponse {
    /// The signed proposal. Non-nullable: always sent.
    #[prost(message, required, tag = "1")]
    pub proposal: Proposal,
    /// Set when the signer refused or failed.
    #[prost(message, optional, tag = "2")]
    pub error: Option<RemoteSignerError>,
}

/// `SignBytesRequest` (v1.0.1 only): sign arbitrary bytes.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct SignBytesRequest {
    /// The bytes to sign.
    #[prost(bytes = "vec", tag = "1")]
    pub value: Vec<u8>,
}

/// `SignBytesResponse` (v1.0.1 only).
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct SignBytesResponse {
    /// The signature.
    #[prost(bytes = "vec", tag = "1")]
    pub signature: Vec<u8>,
    /// Set when the signer refused or failed.
    #[prost(message, optional, tag = "2")]
    pub error: Option<RemoteSignerError>,
}

/// `PingRequest`: the node's keep-alive.
#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct PingRequest {}

/// `PingResponse`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct PingResponse {}

/// `Message`: what every privval frame holds.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
#[non_exhaustive]
pub struct Message {
    /// The request or response; `None` if the frame held none this crate
    /// knows ([`MessageDecoder`](super::MessageDecoder) reports that as
    /// [`PrivvalError::UnknownMessage`](super::PrivvalError::UnknownMessage)).
    #[prost(oneof = "message::Sum", tags = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10")]
    pub sum: Option<message::Sum>,
}

impl From<message::Sum> for Message {
    fn from(sum: message::Sum) -> Message {
        Message { sum: Some(sum) }
    }
}

/// The [`Message`] oneof.
pub mod message {
    use super::*;

    /// One privval request or response.
    #[derive(Clone, PartialEq, Eq, Hash, prost::Oneof)]
    #[non_exhaustive]
    pub enum Sum {
        /// Node to signer.
        #[prost(message, tag = "1")]
        PubKeyRequest(PubKeyRequest),
        /// Signer to node.
        #[prost(message, tag = "2")]
        PubKeyResponse(PubKeyResponse),
        /// Node to signer.
        #[prost(message, tag = "3")]
        SignVoteRequest(SignVoteRequest),
        /// Signer to node.
        #[prost(message, tag = "4")]
        SignedVoteResponse(SignedVoteResponse),
        /// Node to signer.
        #[prost(message, tag = "5")]
        SignProposalRequest(SignProposalRequest),
        /// Signer to node.
        #[prost(message, tag = "6")]
        SignedProposalResponse(SignedProposalResponse),
        /// Node to signer.
        #[prost(message, tag = "7")]
        PingRequest(PingRequest),
        /// Signer to node.
        #[prost(message, tag = "8")]
        PingResponse(PingResponse),
        /// Node to signer, v1.0.1 only.
        #[prost(message, tag = "9")]
        SignBytesRequest(SignBytesRequest),
        /// Signer to node, v1.0.1 only.
        #[prost(message, tag = "10")]
        SignBytesResponse(SignBytesResponse),
    }
}
