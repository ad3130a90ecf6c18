//! The request handler, sans-IO: one node request in, the response a
//! CometBFT node expects out, with what the stats and events report.

use super::RequestKind;
use crate::message::Sum;
use crate::{
    crypto_public_key, Message, PingResponse, Proposal, PubKeyResponse, RemoteSignerError,
    SignBytesResponse, SignedProposalResponse, SignedVoteResponse, Signer, SignerError, Vote,
};

/// The error code of every refusal: 0, as CometBFT's own signer sends
/// (the protocol's `Errors` enum names transport failures only).
pub(crate) const REFUSED_CODE: i32 = 0;

/// What one request came to.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub kind: RequestKind,
    /// The height, round and type the request names (0 for none).
    pub height: i64,
    pub round: i32,
    pub msg_type: i32,
    /// The response to send; `None` for a message that is not a request.
    pub response: Option<Message>,
    /// Why the request was refused or not answered.
    pub error: Option<String>,
}

impl Outcome {
    /// A message that is not a request, or a body that did not decode:
    /// no response, `error` says why.
    pub(crate) fn not_a_request(error: String) -> Outcome {
        Outcome {
            kind: RequestKind::Other,
            height: 0,
            round: 0,
            msg_type: 0,
            response: None,
            error: Some(error),
        }
    }
}

fn remote(err: impl std::fmt::Display) -> RemoteSignerError {
    RemoteSignerError {
        code: REFUSED_CODE,
        description: err.to_string(),
    }
}

/// Answer `request` with `signer`. `sign_extensions` false never signs a
/// vote extension (v0.34.35 and v0.37.18 nodes have none); true signs it
/// unless the request sets `skip_extension_signing` (v1.0.1).
pub(crate) fn respond<S: Signer + ?Sized>(
    signer: &mut S,
    request: Message,
    sign_extensions: bool,
) -> Outcome {
    let Some(sum) = request.sum else {
        return Outcome::not_a_request("a message with no request".into());
    };
    let mut out = Outcome {
        kind: RequestKind::of(Some(&sum)),
        height: 0,
        round: 0,
        msg_type: 0,
        response: None,
        error: None,
    };
    match sum {
        Sum::PubKeyRequest(r) => {
            let resp = match signer.public_key(&r.chain_id) {
                Ok(pk) => pub_key_response(pk),
                Err(e) => {
                    out.error = Some(e.to_string());
                    PubKeyResponse::error(remote(e))
                }
            };
            out.response = Some(Sum::PubKeyResponse(resp).into());
        }
        Sum::SignVoteRequest(r) => {
            let result = match r.vote {
                Some(vote) => {
                    out.height = vote.height;
                    out.round = vote.round;
                    out.msg_type = vote.msg_type;
                    let ext = sign_extensions && !r.skip_extension_signing;
                    signer.sign_vote(&r.chain_id, vote, ext)
                }
                None => Err(SignerError::Backend("the request carries no vote".into())),
            };
            let resp = match result {
                Ok(vote) => SignedVoteResponse { vote, error: None },
                Err(e) => {
                    out.error = Some(e.to_string());
                    SignedVoteResponse {
                        vote: Vote::default(),
                        error: Some(remote(e)),
                    }
                }
            };
            out.response = Some(Sum::SignedVoteResponse(resp).into());
        }
        Sum::SignProposalRequest(r) => {
            let result = match r.proposal {
                Some(p) => {
                    out.height = p.height;
                    out.round = p.round;
                    out.msg_type = p.msg_type;
                    signer.sign_proposal(&r.chain_id, p)
                }
                None => Err(SignerError::Backend(
                    "the request carries no proposal".into(),
                )),
            };
            let resp = match result {
                Ok(proposal) => SignedProposalResponse {
                    proposal,
                    error: None,
                },
                Err(e) => {
                    out.error = Some(e.to_string());
                    SignedProposalResponse {
                        proposal: Proposal::default(),
                        error: Some(remote(e)),
                    }
                }
            };
            out.response = Some(Sum::SignedProposalResponse(resp).into());
        }
        Sum::SignBytesRequest(r) => {
            let resp = match signer.sign_bytes(&r.value) {
                Ok(signature) => SignBytesResponse {
                    signature,
                    error: None,
                },
                Err(e) => {
                    out.error = Some(e.to_string());
                    SignBytesResponse {
                        signature: Vec::new(),
                        error: Some(remote(e)),
                    }
                }
            };
            out.response = Some(Sum::SignBytesResponse(resp).into());
        }
        Sum::PingRequest(_) => {
            if let Err(e) = signer.ping() {
                // A ping has no error field: answer anyway (the connection
                // is alive) and report the signer's complaint.
                out.error = Some(e.to_string());
            }
            out.response = Some(Sum::PingResponse(PingResponse::default()).into());
        }
        other => {
            out.error = Some(format!("not a request: {}", sum_name(&other)));
        }
    }
    out
}

/// An Ed25519 key goes out in the form every line reads
/// ([`PubKeyResponse::ed25519`]); another type in field 1 only.
fn pub_key_response(pk: crate::CryptoPublicKey) -> PubKeyResponse {
    match &pk.sum {
        Some(crypto_public_key::Key::Ed25519(bytes)) => {
            match <[u8; 32]>::try_from(bytes.as_slice()) {
                Ok(key) => PubKeyResponse::ed25519(key),
                Err(_) => PubKeyResponse::error(remote("the signer's Ed25519 key is not 32 bytes")),
            }
        }
        _ => PubKeyResponse {
            pub_key: Some(pk),
            ..PubKeyResponse::default()
        },
    }
}

/// The message's name, for errors.
pub(crate) fn sum_name(sum: &Sum) -> &'static str {
    match sum {
        Sum::PubKeyRequest(_) => "PubKeyRequest",
        Sum::PubKeyResponse(_) => "PubKeyResponse",
        Sum::SignVoteRequest(_) => "SignVoteRequest",
        Sum::SignedVoteResponse(_) => "SignedVoteResponse",
        Sum::SignProposalRequest(_) => "SignProposalRequest",
        Sum::SignedProposalResponse(_) => "SignedProposalResponse",
        Sum::PingRequest(_) => "PingRequest",
        Sum::PingResponse(_) => "PingResponse",
        Sum::SignBytesRequest(_) => "SignBytesRequest",
        Sum::SignBytesResponse(_) => "SignBytesResponse",
    }
}
