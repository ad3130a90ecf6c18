//! `privval`: the privval message stream reader, whole and chunked.

use crate::Seeds;
use p2p_conn_privval::guard::{check_proposal, check_vote, Decision, SignState};
use p2p_conn_privval::testkit::{encode, message::Sum, Message, MessageDecoder};
use p2p_conn_privval::{
    proposal_sign_bytes, vote_extension_sign_bytes, vote_sign_bytes, BlockId, Timestamp,
};

/// Whether CometBFT can sign a request with this block ID and timestamp,
/// by its own rules, written out apart from the guard: each block ID hash
/// empty or 32 bytes (`BlockID.ValidateBasic`), and a timestamp inside
/// 0001-01-01T00:00:00Z..=9999-12-31T23:59:59.999999999Z (what its
/// decoder takes).
fn cometbft_can_sign(id: &BlockId, t: Timestamp) -> bool {
    let hash_ok = |h: &[u8]| h.is_empty() || h.len() == 32;
    hash_ok(&id.hash)
        && hash_ok(&id.part_set_header.hash)
        && (-62_135_596_800..=253_402_300_799).contains(&t.seconds)
        && (0..1_000_000_000).contains(&t.nanos)
}

/// The double-sign guard, from the initial state, never allows a request
/// CometBFT could not sign.
fn guard_allows_only_what_cometbft_signs(msg: &Message) {
    let fresh = SignState::default();
    let (decision, id, t) = match &msg.sum {
        Some(Sum::SignVoteRequest(r)) => match &r.vote {
            Some(v) => (check_vote(&fresh, &r.chain_id, v), &v.block_id, v.timestamp),
            None => return,
        },
        Some(Sum::SignProposalRequest(r)) => match &r.proposal {
            Some(p) => (
                check_proposal(&fresh, &r.chain_id, p),
                &p.block_id,
                p.timestamp,
            ),
            None => return,
        },
        _ => return,
    };
    if let Ok(Decision::Sign { .. }) = decision {
        assert!(
            cometbft_can_sign(id, t),
            "the guard allowed what CometBFT never signs: {msg:?}"
        );
    }
}

/// The limit the check's decoders run with: small, so that refusals are
/// reached often.
const LIMIT: usize = 512;

/// Feeds `input` to a fresh decoder in pieces of `chunk` bytes: the
/// messages it returned, the bytes up to the end of the last one, and its
/// error, if any (an error reports no byte count, so the bytes taken
/// before it are not compared).
fn run(input: &[u8], chunk: usize) -> (Vec<Message>, usize, Option<String>) {
    let mut dec = MessageDecoder::with_limit(LIMIT);
    let mut msgs = Vec::new();
    let mut used = 0;
    let mut through_last = 0;
    for piece in input.chunks(chunk) {
        let mut piece = piece;
        while !piece.is_empty() {
            match dec.feed(piece) {
                Ok((n, got)) => {
                    assert!(n <= piece.len(), "took more than given");
                    assert!(n > 0 || got.is_some(), "took nothing and returned nothing");
                    used += n;
                    piece = &piece[n..];
                    if let Some(m) = got {
                        msgs.push(m);
                        through_last = used;
                    }
                }
                Err(e) => return (msgs, through_last, Some(e.to_string())),
            }
        }
    }
    (msgs, through_last, None)
}

/// `privval`: the privval `MessageDecoder` on any bytes. The first byte sets the
/// chunk size the rest is fed in; fed whole and in chunks, the decoder must
/// return the same messages and the same error after taking the same bytes.
/// Every decoded message re-encodes to bytes that decode to an equal
/// message, and its sign bytes (where it carries a vote or proposal) are
/// computed without panicking; the double-sign guard allows no vote or
/// proposal that CometBFT could not sign (a block ID hash of another length
/// than 0 or 32, a timestamp outside years 1 to 9999).
pub fn check(data: &[u8]) {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(split).max(1);
    let whole = run(rest, rest.len().max(1));
    let chunked = run(rest, chunk);
    assert_eq!(whole, chunked, "whole and chunked disagree");
    let (msgs, used, _) = whole;
    assert!(used <= rest.len());
    for msg in msgs {
        let wire = encode(&msg);
        let mut dec = MessageDecoder::with_limit(usize::MAX);
        let (n, back) = dec.feed(&wire).expect("our own encoding");
        assert_eq!(n, wire.len());
        assert_eq!(
            back.as_ref(),
            Some(&msg),
            "re-encoded message decodes differently"
        );
        let sizes = match &msg.sum {
            Some(Sum::SignVoteRequest(r)) => r.vote.as_ref().map(|v| {
                vote_sign_bytes(&r.chain_id, v).len()
                    + vote_extension_sign_bytes(&r.chain_id, v).len()
            }),
            Some(Sum::SignProposalRequest(r)) => r
                .proposal
                .as_ref()
                .map(|p| proposal_sign_bytes(&r.chain_id, p).len()),
            _ => None,
        };
        std::hint::black_box(sizes);
        guard_allows_only_what_cometbft_signs(&msg);
    }
}

/// The seeds this check owns, written to `seeds/privval/` by `gen_seeds`: a
/// ping then a public-key request, a sign-vote request then a ping, the
/// three requests CometBFT never signs (a 31-byte block hash, 2e9 nanos, the
/// year 10000), a length over the limit, a truncated message and an unknown
/// oneof field. The first byte of each is the chunk size.
pub fn seeds() -> Seeds {
    use crate::cat;
    use p2p_conn_privval::testkit::{PingRequest, PubKeyRequest, SignVoteRequest};
    use p2p_conn_privval::Vote;

    let msg = |sum: Sum| encode(&Message::from(sum));
    let ping = msg(Sum::PingRequest(PingRequest::default()));
    // The message structs are `#[non_exhaustive]`: built from their defaults.
    let sign = |block_id: BlockId, timestamp: Timestamp| {
        let mut vote = Vote::default();
        vote.msg_type = 1;
        vote.height = 1;
        vote.block_id = block_id;
        vote.timestamp = timestamp;
        let mut req = SignVoteRequest::default();
        req.vote = Some(vote);
        req.chain_id = "c".into();
        msg(Sum::SignVoteRequest(req))
    };
    let block_id = |hash_len: usize, parts_hash_len: usize| {
        let mut id = BlockId::default();
        id.hash = vec![1; hash_len];
        id.part_set_header.total = 1;
        id.part_set_header.hash = vec![2; parts_hash_len];
        id
    };
    let at = |seconds: i64, nanos: i32| {
        let mut t = Timestamp::default();
        t.seconds = seconds;
        t.nanos = nanos;
        t
    };
    let mut pubkey = PubKeyRequest::default();
    pubkey.chain_id = "c".into();

    let mut s = Seeds::default();
    s.add(
        "ping-then-pubkey-request",
        &cat(&[&[3], &ping, &msg(Sum::PubKeyRequest(pubkey))]),
    );
    s.add(
        "sign-vote-request",
        &cat(&[&[1], &sign(BlockId::default(), at(0, 0)), &ping]),
    );
    s.add(
        "sign-vote-request-31-byte-hash",
        &cat(&[&[5], &sign(block_id(31, 32), at(1, 0))]),
    );
    s.add(
        "sign-vote-request-nanos-2e9",
        &cat(&[&[7], &sign(block_id(32, 32), at(1, 2_000_000_000))]),
    );
    // 10000-01-01T00:00:00Z: one second past the last time CometBFT takes.
    s.add(
        "sign-vote-request-year-10000",
        &cat(&[&[3], &sign(block_id(32, 0), at(253_402_300_800, 0))]),
    );
    // A length of 10,241 bytes (the check's limit is 512), then junk.
    s.add("oversized-prefix", &[1, 0x81, 0x50, 1, 2, 3]);
    // A 10-byte message cut after its first field's header.
    s.add("truncated", &[2, 10, 0x3a, 0]);
    // Field 11, in no CometBFT line.
    s.add("unknown-oneof", &[2, 2, 0x5a, 0]);
    s
}
