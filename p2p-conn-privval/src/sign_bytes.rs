//! The bytes a validator signs: CometBFT's `VoteSignBytes`,
//! `ProposalSignBytes` and `VoteExtensionSignBytes`. Each is a canonical
//! message, prefixed with its length as a uvarint (`protoio.MarshalDelimited`).
//! The canonical forms are the same at every tested line (v0.34.35 to
//! v1.0.1); `CanonicalVoteExtension` exists from v0.38.26.

use prost::Message as _;

use super::messages::{signed_msg_type, BlockId, PartSetHeader, Proposal, Timestamp, Vote};

#[derive(Clone, PartialEq, prost::Message)]
struct CanonicalPartSetHeader {
    #[prost(uint32, tag = "1")]
    total: u32,
    #[prost(bytes = "vec", tag = "2")]
    hash: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct CanonicalBlockId {
    #[prost(bytes = "vec", tag = "1")]
    hash: Vec<u8>,
    /// Non-nullable in gogoproto: sent even when empty.
    #[prost(message, required, tag = "2")]
    part_set_header: CanonicalPartSetHeader,
}

#[derive(Clone, PartialEq, prost::Message)]
struct CanonicalVote {
    #[prost(int32, tag = "1")]
    msg_type: i32,
    #[prost(sfixed64, tag = "2")]
    height: i64,
    #[prost(sfixed64, tag = "3")]
    round: i64,
    /// Nullable: absent for a nil vote.
    #[prost(message, optional, tag = "4")]
    block_id: Option<CanonicalBlockId>,
    /// Non-nullable: sent even at the epoch (as an empty message).
    #[prost(message, required, tag = "5")]
    timestamp: Timestamp,
    #[prost(string, tag = "6")]
    chain_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct CanonicalProposal {
    #[prost(int32, tag = "1")]
    msg_type: i32,
    #[prost(sfixed64, tag = "2")]
    height: i64,
    #[prost(sfixed64, tag = "3")]
    round: i64,
    #[prost(int64, tag = "4")]
    pol_round: i64,
    #[prost(message, optional, tag = "5")]
    block_id: Option<CanonicalBlockId>,
    #[prost(message, required, tag = "6")]
    timestamp: Timestamp,
    #[prost(string, tag = "7")]
    chain_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct CanonicalVoteExtension {
    #[prost(bytes = "vec", tag = "1")]
    extension: Vec<u8>,
    #[prost(sfixed64, tag = "2")]
    height: i64,
    #[prost(sfixed64, tag = "3")]
    round: i64,
    #[prost(string, tag = "4")]
    chain_id: String,
}

/// `CanonicalizeBlockID`: none for the nil block ID.
fn canonical_block_id(id: &BlockId) -> Option<CanonicalBlockId> {
    if id.is_nil() {
        return None;
    }
    let PartSetHeader { total, hash } = &id.part_set_header;
    Some(CanonicalBlockId {
        hash: id.hash.clone(),
        part_set_header: CanonicalPartSetHeader {
            total: *total,
            hash: hash.clone(),
        },
    })
}

/// The bytes a validator signs for `vote` on `chain_id` (CometBFT's
/// `VoteSignBytes`): the vote's type, height, round, block ID (absent when
/// nil) and timestamp, and the chain ID. The validator's address and index,
/// the signatures and the extension are not signed here.
///
/// Unlike CometBFT, which panics on a block ID whose hashes are not 32
/// bytes or empty, this encodes what it is given: check the vote first.
pub fn vote_sign_bytes(chain_id: &str, vote: &Vote) -> Vec<u8> {
    CanonicalVote {
        msg_type: vote.msg_type,
        height: vote.height,
        round: i64::from(vote.round),
        block_id: canonical_block_id(&vote.block_id),
        timestamp: vote.timestamp,
        chain_id: chain_id.to_owned(),
    }
    .encode_length_delimited_to_vec()
}

/// The bytes a proposer signs for `proposal` on `chain_id` (CometBFT's
/// `ProposalSignBytes`). The type is always
/// [`signed_msg_type::PROPOSAL`], whatever `proposal.msg_type` says, as in
/// CometBFT.
pub fn proposal_sign_bytes(chain_id: &str, proposal: &Proposal) -> Vec<u8> {
    CanonicalProposal {
        msg_type: signed_msg_type::PROPOSAL,
        height: proposal.height,
        round: i64::from(proposal.round),
        pol_round: i64::from(proposal.pol_round),
        block_id: canonical_block_id(&proposal.block_id),
        timestamp: proposal.timestamp,
        chain_id: chain_id.to_owned(),
    }
    .encode_length_delimited_to_vec()
}

/// The bytes a validator signs for the extension of `vote` on `chain_id`
/// (CometBFT's `VoteExtensionSignBytes`, v0.38.26 and later): the
/// extension, height, round and chain ID.
pub fn vote_extension_sign_bytes(chain_id: &str, vote: &Vote) -> Vec<u8> {
    CanonicalVoteExtension {
        extension: vote.extension.clone(),
        height: vote.height,
        round: i64::from(vote.round),
        chain_id: chain_id.to_owned(),
    }
    .encode_length_delimited_to_vec()
}

/// Split canonical vote sign bytes into their timestamp and the rest
/// (re-encoded with the epoch timestamp), for the guard's "only the
/// timestamp differs" check. `None` if they do not decode.
pub(crate) fn vote_timestamp_and_rest(bytes: &[u8]) -> Option<(Timestamp, Vec<u8>)> {
    let mut vote = CanonicalVote::decode_length_delimited(bytes).ok()?;
    let timestamp = std::mem::take(&mut vote.timestamp);
    Some((timestamp, vote.encode_to_vec()))
}

/// As [`vote_timestamp_and_rest`], for canonical proposal sign bytes.
pub(crate) fn proposal_timestamp_and_rest(bytes: &[u8]) -> Option<(Timestamp, Vec<u8>)> {
    let mut proposal = CanonicalProposal::decode_length_delimited(bytes).ok()?;
    let timestamp = std::mem::take(&mut proposal.timestamp);
    Some((timestamp, proposal.encode_to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked by hand from the proto definitions: a nil prevote at height 1,
    /// round 0, at the epoch, on chain "c".
    #[test]
    fn nil_prevote_by_hand() {
        let vote = Vote {
            msg_type: signed_msg_type::PREVOTE,
            height: 1,
            ..Vote::default()
        };
        let want = [
            0x10, // length 16
            0x08, 0x01, // type = 1
            0x11, 1, 0, 0, 0, 0, 0, 0, 0, // height sfixed64 = 1
            // round 0 omitted, block ID nil omitted
            0x2a, 0x00, // timestamp, empty
            0x32, 0x01, b'c', // chain_id
        ];
        assert_eq!(vote_sign_bytes("c", &vote), want);
    }
}
