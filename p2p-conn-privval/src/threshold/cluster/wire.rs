//! The threshold core's messages as `cosign_net` payloads: protobuf
//! (prost), as the crate's other messages (`spec/threshold.md` §3).
//! Decoding is bounded (the transport caps a payload's length, and the
//! lists here are capped by [`MAX_SIGNERS`] and [`MAX_NONCES`]) and
//! returns [`ThresholdError::BadRequest`] on anything malformed, never a
//! panic.

use bytes::Bytes;
use frost_ed25519::round1::{NonceCommitment, SigningCommitments};
use frost_ed25519::round2::SignatureShare;
use prost::Message;

use super::super::{
    Commitment, SignRequest, SignResponse, Signable, ThresholdError, MAX_NONCES, MAX_SIGNERS,
};
use crate::guard::{Hrs, Step};
use crate::messages::{Proposal, Vote};

/// `kind` of a request for fresh commitments (`spec/threshold.md` §3.1:
/// `CommitRequest` in, `CommitResponse` out).
pub const KIND_COMMITMENTS: u32 = 1;
/// `kind` of a sign request (`spec/threshold.md` §3.1: `SignRequest` in,
/// `SignResponse` out).
pub const KIND_SIGN: u32 = 2;

/// `kind` of a request for the cosigner's mark (`spec/threshold.md` §3.1:
/// an empty payload in, `MarkResponse` out).
pub const KIND_MARK: u32 = 3;

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct MarkResponse {
    #[prost(int64, tag = "1")]
    height: i64,
    #[prost(int32, tag = "2")]
    round: i32,
    #[prost(int32, tag = "3")]
    step: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WireCommitment {
    #[prost(uint32, tag = "1")]
    signer: u32,
    #[prost(uint64, tag = "2")]
    id: u64,
    #[prost(bytes = "vec", tag = "3")]
    hiding: Vec<u8>,
    #[prost(bytes = "vec", tag = "4")]
    binding: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CommitRequest {
    #[prost(uint32, tag = "1")]
    count: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CommitResponse {
    #[prost(message, repeated, tag = "1")]
    commitments: Vec<WireCommitment>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WireSignRequest {
    #[prost(string, tag = "1")]
    chain_id: String,
    #[prost(message, optional, tag = "2")]
    vote: Option<Vote>,
    #[prost(message, optional, tag = "3")]
    proposal: Option<Proposal>,
    #[prost(bool, tag = "4")]
    sign_extension: bool,
    #[prost(message, repeated, tag = "5")]
    commitments: Vec<WireCommitment>,
    #[prost(message, repeated, tag = "6")]
    extension_commitments: Vec<WireCommitment>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WireSignResponse {
    #[prost(uint32, tag = "1")]
    signer: u32,
    #[prost(bytes = "vec", tag = "2")]
    share: Vec<u8>,
    #[prost(bytes = "vec", tag = "3")]
    extension_share: Vec<u8>,
}

fn bad(what: &'static str) -> ThresholdError {
    ThresholdError::BadRequest(what)
}

fn commitment_to_wire(c: &Commitment) -> WireCommitment {
    WireCommitment {
        signer: u32::from(c.signer),
        id: c.id,
        hiding: c.commitments.hiding().serialize().unwrap_or_default(),
        binding: c.commitments.binding().serialize().unwrap_or_default(),
    }
}

fn commitment_from_wire(w: &WireCommitment) -> Result<Commitment, ThresholdError> {
    let signer = u16::try_from(w.signer).map_err(|_| bad("a commitment's signer is too large"))?;
    let hiding = NonceCommitment::deserialize(&w.hiding)
        .map_err(|_| bad("a commitment's hiding point is malformed"))?;
    let binding = NonceCommitment::deserialize(&w.binding)
        .map_err(|_| bad("a commitment's binding point is malformed"))?;
    Ok(Commitment {
        signer,
        id: w.id,
        commitments: SigningCommitments::new(hiding, binding),
    })
}

fn commitments_from_wire(
    list: &[WireCommitment],
    max: usize,
) -> Result<Vec<Commitment>, ThresholdError> {
    if list.len() > max {
        return Err(bad("more commitments than allowed"));
    }
    list.iter().map(commitment_from_wire).collect()
}

/// Ask for `count` commitments.
pub(crate) fn encode_commit_request(count: usize) -> Bytes {
    let count = u32::try_from(count.min(MAX_NONCES)).unwrap_or(0);
    CommitRequest { count }.encode_to_vec().into()
}

/// How many commitments a request asks for (at most [`MAX_NONCES`]).
pub(crate) fn decode_commit_request(payload: &[u8]) -> Result<usize, ThresholdError> {
    let r = CommitRequest::decode(payload).map_err(|_| bad("a malformed commitments request"))?;
    Ok((r.count as usize).min(MAX_NONCES))
}

pub(crate) fn encode_commitments(list: &[Commitment]) -> Bytes {
    CommitResponse {
        commitments: list.iter().map(commitment_to_wire).collect(),
    }
    .encode_to_vec()
    .into()
}

pub(crate) fn decode_commitments(payload: &[u8]) -> Result<Vec<Commitment>, ThresholdError> {
    let r = CommitResponse::decode(payload).map_err(|_| bad("a malformed commitments answer"))?;
    commitments_from_wire(&r.commitments, MAX_NONCES)
}

/// A mark's public part: its height, round and step.
pub(crate) fn encode_mark(hrs: Hrs) -> Bytes {
    MarkResponse {
        height: hrs.height,
        round: hrs.round,
        step: i32::from(hrs.step.as_i8()),
    }
    .encode_to_vec()
    .into()
}

pub(crate) fn decode_mark(payload: &[u8]) -> Result<Hrs, ThresholdError> {
    let r = MarkResponse::decode(payload).map_err(|_| bad("a malformed mark"))?;
    let step = i8::try_from(r.step)
        .ok()
        .and_then(Step::from_i8)
        .ok_or(bad("a mark's step is unknown"))?;
    if r.height < 0 || r.round < 0 {
        return Err(bad("a mark's height or round is negative"));
    }
    Ok(Hrs::new(r.height, r.round, step))
}

pub(crate) fn encode_sign_request(r: &SignRequest) -> Bytes {
    let (vote, proposal, sign_extension) = match &r.signable {
        Signable::Vote {
            vote,
            sign_extension,
        } => (Some(vote.clone()), None, *sign_extension),
        Signable::Proposal(p) => (None, Some(p.clone()), false),
    };
    WireSignRequest {
        chain_id: r.chain_id.clone(),
        vote,
        proposal,
        sign_extension,
        commitments: r.commitments.iter().map(commitment_to_wire).collect(),
        extension_commitments: r
            .extension_commitments
            .iter()
            .map(commitment_to_wire)
            .collect(),
    }
    .encode_to_vec()
    .into()
}

pub(crate) fn decode_sign_request(payload: &[u8]) -> Result<SignRequest, ThresholdError> {
    let w = WireSignRequest::decode(payload).map_err(|_| bad("a malformed sign request"))?;
    let signable = match (w.vote, w.proposal) {
        (Some(vote), None) => Signable::Vote {
            vote,
            sign_extension: w.sign_extension,
        },
        (None, Some(p)) => Signable::Proposal(p),
        _ => return Err(bad("a sign request must carry one vote or one proposal")),
    };
    let max = usize::from(MAX_SIGNERS);
    Ok(SignRequest {
        chain_id: w.chain_id,
        signable,
        commitments: commitments_from_wire(&w.commitments, max)?,
        extension_commitments: commitments_from_wire(&w.extension_commitments, max)?,
    })
}

pub(crate) fn encode_sign_response(r: &SignResponse) -> Bytes {
    WireSignResponse {
        signer: u32::from(r.signer),
        share: r.share.serialize(),
        extension_share: r
            .extension_share
            .as_ref()
            .map(SignatureShare::serialize)
            .unwrap_or_default(),
    }
    .encode_to_vec()
    .into()
}

pub(crate) fn decode_sign_response(payload: &[u8]) -> Result<SignResponse, ThresholdError> {
    let w = WireSignResponse::decode(payload).map_err(|_| bad("a malformed sign answer"))?;
    let signer = u16::try_from(w.signer).map_err(|_| bad("an answer's signer is too large"))?;
    let share =
        SignatureShare::deserialize(&w.share).map_err(|_| bad("an answer's share is malformed"))?;
    let extension_share = if w.extension_share.is_empty() {
        None
    } else {
        Some(
            SignatureShare::deserialize(&w.extension_share)
                .map_err(|_| bad("an answer's extension share is malformed"))?,
        )
    };
    Ok(SignResponse {
        signer,
        share,
        extension_share,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        for payload in [
            &b""[..],
            &[0xff; 7][..],
            &[0x0a, 0x05, 1, 2][..],
            &[0x12, 0x80, 0x80, 0x80, 0x80, 0x10][..],
        ] {
            let _ = decode_commit_request(payload);
            let _ = decode_commitments(payload);
            assert!(decode_sign_request(payload).is_err());
            assert!(decode_sign_response(payload).is_err());
            let _ = decode_mark(payload);
        }
    }

    #[test]
    fn a_malformed_point_is_refused() {
        let w = CommitResponse {
            commitments: vec![WireCommitment {
                signer: 1,
                id: 7,
                hiding: vec![0xee; 32],
                binding: vec![1; 3],
            }],
        };
        assert!(decode_commitments(&w.encode_to_vec()).is_err());
    }

    #[test]
    fn too_many_commitments_are_refused() {
        let one = WireCommitment {
            signer: 1,
            id: 7,
            hiding: vec![0; 32],
            binding: vec![0; 32],
        };
        let w = CommitResponse {
            commitments: vec![one; MAX_NONCES + 1],
        };
        assert!(matches!(
            decode_commitments(&w.encode_to_vec()),
            Err(ThresholdError::BadRequest("more commitments than allowed"))
        ));
    }
}
