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
//! - `Message.sum`: 1 to 8 at every line; 9 `SignBytesRequest` and 10
//!   `SignBytesResponse` at v1.0.1 only (`super::envelope`).
//! - `PubKeyResponse`: `pub_key` 1 and `error` 2 up to v0.40.0; v1.0.1
//!   reserves 1 and reads `pub_key_bytes` 3 and `pub_key_type` 4.
//! - `SignVoteRequest`: `skip_extension_signing` 3 at v1.0.1 only.
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
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
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
#[derive(Clone, PartialEq, Eq, prost::Message)]
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
#[derive(Clone, PartialEq, Eq, prost::Message)]
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
#[derive(Clone, PartialEq, Eq, prost::Message)]
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
#[derive(Clone, PartialEq, Eq, prost::Message)]
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
#[derive(Clone, PartialEq, Eq, prost::Message)]
#[non_exhaustive]
pub struct CryptoPublicKey {
    /// The key; `None` if the peer sent a type this crate does not know.
    #[prost(oneof = "crypto_public_key::Key", tags = "1, 2")]
    pub sum: Option<crypto_public_key::Key>,
}

/// The [`CryptoPublicKey`] oneof.
pub mod crypto_public_key {
    /// A public key by type.
    #[derive(Clone, PartialEq, Eq, prost::Oneof)]
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
#[derive(Clone, PartialEq, Eq, prost::Message)]
#[non_exhaustive]
pub struct RemoteSignerError {
    /// Error code (CometBFT's signers send 0 or an `Errors` value).
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// What went wrong.
    #[prost(string, tag = "2")]
    pub description: String,
}
