//! `p2p_conn::privval`'s messages against each release line's own
//! generated privval `Message` (`cometbft-peer privval-reencode`,
//! `interop/cometbft-go`): CometBFT's Go code decodes what p2p-conn encodes
//! and encodes it again. Fields a line does not declare are dropped by its
//! decoder, so the re-encoding must equal p2p-conn's message with exactly
//! the fields that line lacks removed ([`as_line_reads_it`]), byte for
//! byte. That checks every field number p2p-conn uses against every line,
//! and that one `PubKeyResponse` (`PubKeyResponse::ed25519`) carries the key
//! to both the v0.x decoders (field 1) and v1.0.1's (fields 3 and 4). What
//! a real node then does with the messages is not tested here.
//!
//! Without the Go toolchain each test prints a notice and passes, unless
//! `CI=true`, where it fails.

use std::time::{Duration, Instant};

use p2p_conn::privval::{
    message::Sum, public_key, signed_msg_type, Message, PingRequest, PingResponse, Proposal,
    PubKeyRequest, PubKeyResponse, PublicKey, RemoteSignerError, SignBytesRequest,
    SignBytesResponse, SignProposalRequest, SignVoteRequest, SignedProposalResponse,
    SignedVoteResponse, Timestamp, Vote,
};
use p2p_conn_interop::cometbft_go::GoVersion;
use p2p_conn_interop::go_peer::go_peer;
use p2p_conn_interop::process::{Feed, Proc};
use prost::Message as _;

fn vote(height: i64, extension: &[u8], nil: bool) -> Vote {
    let mut v = Vote::default();
    v.msg_type = signed_msg_type::PRECOMMIT;
    v.height = height;
    v.round = -1;
    if !nil {
        v.block_id.hash = vec![0xab; 32];
        v.block_id.part_set_header.total = 3;
        v.block_id.part_set_header.hash = vec![0xcd; 32];
    }
    v.timestamp = Timestamp::new(1_700_000_000, 123_456_789);
    v.validator_address = vec![7; 20];
    v.validator_index = 2;
    v.signature = vec![9; 64];
    v.extension = extension.to_vec();
    v.extension_signature = if extension.is_empty() {
        vec![]
    } else {
        vec![8; 64]
    };
    v
}

fn proposal(pol_round: i32) -> Proposal {
    let mut p = Proposal::default();
    p.msg_type = signed_msg_type::PROPOSAL;
    p.height = i64::MAX;
    p.round = 2;
    p.pol_round = pol_round;
    p.block_id.hash = vec![0x11; 32];
    p.block_id.part_set_header.total = 1;
    p.block_id.part_set_header.hash = vec![0x22; 32];
    p.timestamp = Timestamp::new(0, 0);
    p.signature = vec![0x33; 64];
    p
}

fn error(code: i32) -> RemoteSignerError {
    let mut e = RemoteSignerError::default();
    e.code = code;
    e.description = "would double-sign".into();
    e
}

/// Every oneof member, most in more than one shape.
fn messages() -> Vec<Message> {
    let mut out = Vec::new();
    let mut push = |sum: Sum| out.push(Message::from(sum));
    for chain in ["", "test-chain"] {
        let mut r = PubKeyRequest::default();
        r.chain_id = chain.into();
        push(Sum::PubKeyRequest(r));
    }
    push(Sum::PubKeyResponse(PubKeyResponse::ed25519([0x5a; 32])));
    push(Sum::PubKeyResponse(PubKeyResponse::error(error(3))));
    let mut secp = PubKeyResponse::default();
    secp.pub_key = Some({
        let mut k = PublicKey::default();
        k.sum = Some(public_key::Sum::Secp256k1(vec![2; 33]));
        k
    });
    push(Sum::PubKeyResponse(secp));
    for (v, skip) in [
        (vote(1, b"", true), false),
        (vote(1 << 40, b"an extension", false), true),
        (vote(-5, &[0xee; 300], false), false),
    ] {
        let mut r = SignVoteRequest::default();
        r.vote = Some(v);
        r.chain_id = "test-chain".into();
        r.skip_extension_signing = skip;
        push(Sum::SignVoteRequest(r));
    }
    let mut r = SignedVoteResponse::default();
    r.vote = vote(9, b"ext", false);
    push(Sum::SignedVoteResponse(r));
    let mut r = SignedVoteResponse::default();
    r.error = Some(error(1));
    push(Sum::SignedVoteResponse(r));
    for pol in [-1, 0, 7] {
        let mut r = SignProposalRequest::default();
        r.proposal = Some(proposal(pol));
        r.chain_id = "test-chain".into();
        push(Sum::SignProposalRequest(r));
    }
    let mut r = SignedProposalResponse::default();
    r.proposal = proposal(-1);
    push(Sum::SignedProposalResponse(r));
    let mut r = SignedProposalResponse::default();
    r.error = Some(error(0));
    push(Sum::SignedProposalResponse(r));
    push(Sum::PingRequest(PingRequest::default()));
    push(Sum::PingResponse(PingResponse::default()));
    let mut r = SignBytesRequest::default();
    r.value = b"bytes to sign".to_vec();
    push(Sum::SignBytesRequest(r));
    let mut r = SignBytesResponse::default();
    r.signature = vec![4; 64];
    r.error = Some(error(2));
    push(Sum::SignBytesResponse(r));
    out
}

/// `msg` as `version`'s generated code holds it after decoding: the fields
/// that line does not declare are gone, and gogoproto's non-nullable
/// `PubKeyResponse.pub_key` (up to v0.40.0) is there even when we left it
/// out.
fn as_line_reads_it(version: GoVersion, msg: &Message) -> Message {
    let v1 = version == GoVersion::V1;
    let extensions = !matches!(version, GoVersion::V034 | GoVersion::V037);
    let strip_vote = |v: &mut Vote| {
        if !extensions {
            v.extension.clear();
            v.extension_signature.clear();
        }
    };
    let mut m = msg.clone();
    match &mut m.sum {
        Some(Sum::PubKeyResponse(r)) if v1 => r.pub_key = None,
        Some(Sum::PubKeyResponse(r)) => {
            r.pub_key_bytes.clear();
            r.pub_key_type.clear();
            r.pub_key.get_or_insert_with(PublicKey::default);
        }
        Some(Sum::SignVoteRequest(r)) => {
            if !v1 {
                r.skip_extension_signing = false;
            }
            r.vote.as_mut().map(strip_vote);
        }
        Some(Sum::SignedVoteResponse(r)) => strip_vote(&mut r.vote),
        Some(Sum::SignBytesRequest(_) | Sum::SignBytesResponse(_)) if !v1 => m.sum = None,
        _ => {}
    }
    m
}

fn messages_reencode_as_each_line_reads_them(version: GoVersion, test: &str) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let msgs = messages();
    let input: String = msgs
        .iter()
        .map(|m| hex::encode(m.encode_to_vec()) + "\n")
        .collect();
    let out = Proc::spawn(&bin, &["privval-reencode"], Feed::Now(input.into_bytes()))
        .finish_ok(Instant::now() + Duration::from_secs(60));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), msgs.len(), "{test}: one answer per message");
    for (msg, line) in msgs.iter().zip(lines) {
        let want = as_line_reads_it(version, msg);
        assert_eq!(
            line,
            hex::encode(want.encode_to_vec()),
            "{test}: CometBFT re-encoded (left) differs from what we expect it to read (right) for {msg:?}"
        );
    }
    eprintln!("{test}: {} messages re-encoded as expected", msgs.len());
}

p2p_conn_interop::per_release! {
    v0_34: V034, v0_37: V037, v0_38: V038, v0_39: V039, v0_40: V040, v1: V1;
    [messages_reencode_as_each_line_reads_them]
}
