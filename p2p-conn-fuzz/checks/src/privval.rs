//! `privval`: the privval message stream reader, whole and chunked.

use p2p_conn::privval::{
    encode, message::Sum, proposal_sign_bytes, vote_extension_sign_bytes, vote_sign_bytes, Decoder,
    Message,
};

/// The limit the check's decoders run with: small, so that refusals are
/// reached often.
const LIMIT: usize = 512;

/// Feeds `input` to a fresh decoder in pieces of `chunk` bytes: the
/// messages it returned, the bytes up to the end of the last one, and its
/// error, if any (an error reports no byte count, so the bytes taken
/// before it are not compared).
fn run(input: &[u8], chunk: usize) -> (Vec<Message>, usize, Option<String>) {
    let mut dec = Decoder::with_limit(LIMIT);
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

/// `privval`: the privval `Decoder` on any bytes. The first byte sets the
/// chunk size the rest is fed in; fed whole and in chunks, the decoder must
/// return the same messages and the same error after taking the same bytes.
/// Every decoded message re-encodes to bytes that decode to an equal
/// message, and its sign bytes (where it carries a vote or proposal) are
/// computed without panicking.
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
        let mut dec = Decoder::with_limit(usize::MAX);
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
    }
}
