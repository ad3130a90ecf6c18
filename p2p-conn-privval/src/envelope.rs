//! The privval envelope: `Message`, its oneof of requests and responses,
//! and the request and response types, declared by hand for prost like
//! the types in [`super::messages`] (whose module docs give the field
//! numbers per line). The endpoints' own; tests, fuzz targets and peers
//! played by hand reach them through `testkit`.

use super::messages::{crypto_public_key, CryptoPublicKey, Proposal, RemoteSignerError, Vote};

/// `PubKeyRequest`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
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
#[derive(Clone, PartialEq, Eq, prost::Message)]
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
#[derive(Clone, PartialEq, Eq, prost::Message)]
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
#[derive(Clone, PartialEq, Eq, prost::Message)]
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
#[derive(Clone, PartialEq, Eq, prost::Message)]
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
#[derive(Clone, PartialEq, Eq, prost::Message)]
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
#[derive(Clone, PartialEq, Eq, prost::Message)]
#[non_exhaustive]
pub struct SignBytesRequest {
    /// The bytes to sign.
    #[prost(bytes = "vec", tag = "1")]
    pub value: Vec<u8>,
}

/// `SignBytesResponse` (v1.0.1 only).
#[derive(Clone, PartialEq, Eq, prost::Message)]
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
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
#[non_exhaustive]
pub struct PingRequest {}

/// `PingResponse`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
#[non_exhaustive]
pub struct PingResponse {}

/// `Message`: what every privval frame holds.
#[derive(Clone, PartialEq, Eq, prost::Message)]
#[non_exhaustive]
pub struct Message {
    /// The request or response; `None` if the frame held none this crate
    /// knows ([`MessageDecoder`](super::codec::MessageDecoder) reports that as
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
    #[derive(Clone, PartialEq, Eq, prost::Oneof)]
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
