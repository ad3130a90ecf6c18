//! `p2p_conn_privval`'s messages against each release line's own
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
//! Then what a signer may sign: votes and proposals with block ID hashes of
//! every length around 32 and timestamps at and past every edge go both to
//! the double-sign guard and to each line's own signer
//! (`cometbft-peer privval-handle`: its `DefaultValidationRequestHandler`
//! over a `MockPV`). The guard must allow exactly what CometBFT signs.
//!
//! Without the Go toolchain each test prints a notice and passes, unless
//! `CI=true`, where it fails.

use std::time::{Duration, Instant};

use p2p_conn_interop::cometbft_go::GoVersion;
use p2p_conn_interop::go_peer::go_peer;
use p2p_conn_interop::process::{Feed, Proc};
use p2p_conn_privval::guard::{check_proposal, check_vote, Decision, SignState};
use p2p_conn_privval::testkit::{
    message::Sum, Message, PingRequest, PingResponse, PubKeyRequest, PubKeyResponse,
    SignBytesRequest, SignBytesResponse, SignProposalRequest, SignVoteRequest,
    SignedProposalResponse, SignedVoteResponse,
};
use p2p_conn_privval::BlockId;
use p2p_conn_privval::{
    crypto_public_key, signed_msg_type, CryptoPublicKey, Proposal, RemoteSignerError, Timestamp,
    Vote,
};
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
        let mut k = CryptoPublicKey::default();
        k.sum = Some(crypto_public_key::Key::Secp256k1(vec![2; 33]));
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
            r.pub_key.get_or_insert_with(CryptoPublicKey::default);
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

/// A block ID with hashes of `hash_len` and `psh_len` bytes.
fn block_id(hash_len: usize, psh_len: usize) -> BlockId {
    let mut id = BlockId::default();
    id.hash = vec![0x41; hash_len];
    id.part_set_header.total = u32::from(psh_len > 0);
    id.part_set_header.hash = vec![0x42; psh_len];
    id
}

/// Every combination of block ID hash lengths (0, 1, 31, 32 and 33 bytes
/// for the hash; 0, 1, 32 and 33 for the part-set hash) and timestamps (the
/// epoch, the first and last valid second and one past each, nanos of -1,
/// 1e9 and 2e9), as prevotes, precommits and proposals.
fn edge_requests(chain: &str) -> Vec<Message> {
    const FIRST: i64 = -62_135_596_800; // 0001-01-01T00:00:00Z
    const LAST: i64 = 253_402_300_799; // 9999-12-31T23:59:59Z
    let times = [
        (0, 0),
        (1_700_000_000, 5),
        (FIRST, 0),
        (FIRST - 1, 999_999_999),
        (LAST, 999_999_999),
        (LAST + 1, 0),
        (1_700_000_000, -1),
        (1_700_000_000, 1_000_000_000),
        (1_700_000_000, 2_000_000_000),
    ];
    let mut out = Vec::new();
    for hash_len in [0, 1, 31, 32, 33] {
        for psh_len in [0, 1, 32, 33] {
            for (seconds, nanos) in times {
                let ts = Timestamp::new(seconds, nanos);
                for msg_type in [signed_msg_type::PREVOTE, signed_msg_type::PRECOMMIT] {
                    let mut v = Vote::default();
                    v.msg_type = msg_type;
                    v.height = 7;
                    v.block_id = block_id(hash_len, psh_len);
                    v.timestamp = ts;
                    v.validator_address = vec![7; 20];
                    let mut r = SignVoteRequest::default();
                    r.vote = Some(v);
                    r.chain_id = chain.into();
                    out.push(Message::from(Sum::SignVoteRequest(r)));
                }
                let mut p = Proposal::default();
                p.msg_type = signed_msg_type::PROPOSAL;
                p.height = 7;
                p.pol_round = -1;
                p.block_id = block_id(hash_len, psh_len);
                p.timestamp = ts;
                let mut r = SignProposalRequest::default();
                r.proposal = Some(p);
                r.chain_id = chain.into();
                out.push(Message::from(Sum::SignProposalRequest(r)));
            }
        }
    }
    out
}

/// Whether CometBFT's signer signed: its `privval-handle` line is a
/// response holding a signature and no error.
fn go_signed(line: &str) -> bool {
    let Some(hex_body) = line.strip_prefix("response ") else {
        return false;
    };
    let msg = Message::decode(hex::decode(hex_body).unwrap().as_slice()).unwrap();
    match msg.sum {
        Some(Sum::SignedVoteResponse(r)) => r.error.is_none() && !r.vote.signature.is_empty(),
        Some(Sum::SignedProposalResponse(r)) => {
            r.error.is_none() && !r.proposal.signature.is_empty()
        }
        other => panic!("not a sign response: {other:?}"),
    }
}

fn guard_signs_exactly_what_each_line_signs(version: GoVersion, test: &str) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let chain = "test-chain";
    let reqs = edge_requests(chain);
    let input: String = reqs
        .iter()
        .map(|m| format!("{chain} {}\n", hex::encode(m.encode_to_vec())))
        .collect();
    let out = Proc::spawn(&bin, &["privval-handle"], Feed::Now(input.into_bytes()))
        .finish_ok(Instant::now() + Duration::from_secs(60));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), reqs.len(), "{test}: one answer per request");
    let fresh = SignState::default();
    let (mut signed, mut refused) = (0, 0);
    for (req, line) in reqs.iter().zip(lines) {
        let ours = match &req.sum {
            Some(Sum::SignVoteRequest(r)) => check_vote(&fresh, chain, r.vote.as_ref().unwrap()),
            Some(Sum::SignProposalRequest(r)) => {
                check_proposal(&fresh, chain, r.proposal.as_ref().unwrap())
            }
            _ => unreachable!("edge_requests makes sign requests only"),
        };
        let ours_signs = matches!(ours, Ok(Decision::Sign { .. }));
        assert_eq!(
            ours_signs,
            go_signed(line),
            "{test}: the guard says {ours:?}, CometBFT's signer says {line:?}, for {req:?}"
        );
        if ours_signs {
            signed += 1;
        } else {
            refused += 1;
        }
    }
    assert!(signed > 0 && refused > 0, "{test}: both outcomes seen");
    eprintln!("{test}: {signed} signed and {refused} refused by both");
}

p2p_conn_interop::per_release! {
    v0_34: V034, v0_37: V037, v0_38: V038, v0_39: V039, v0_40: V040, v1: V1;
    [messages_reencode_as_each_line_reads_them, guard_signs_exactly_what_each_line_signs]
}
