//! The privval message stream (`p2p_conn_privval`): every message form
//! through a real secret connection and through plaintext, hostile input,
//! and properties of the sans-IO decoder on arbitrary bytes.

use std::time::Duration;

use crate::common::{proptest_config, tokio_secret_pair};
use p2p_conn::Config;
use p2p_conn_privval::testkit::{
    encode, message::Sum, Message, MessageDecoder, PingRequest, PingResponse, PubKeyRequest,
    PubKeyResponse, SignBytesRequest, SignBytesResponse, SignProposalRequest, SignVoteRequest,
    SignedProposalResponse, SignedVoteResponse,
};
use p2p_conn_privval::{
    PrivvalError, Proposal, RemoteSignerError, Timestamp, Vote, MAX_MESSAGE_BYTES,
};
use proptest::prelude::*;
use tokio::io::{AsyncWriteExt, BufReader};

const BOUND: Duration = Duration::from_secs(10);

fn vote(height: i64, extension: Vec<u8>) -> Vote {
    let mut v = Vote::default();
    v.msg_type = p2p_conn_privval::signed_msg_type::PRECOMMIT;
    v.height = height;
    v.round = 3;
    v.block_id.hash = vec![0xab; 32];
    v.block_id.part_set_header.total = 1;
    v.block_id.part_set_header.hash = vec![0xcd; 32];
    v.timestamp = Timestamp::new(1_700_000_000, 123_456_789);
    v.validator_address = vec![7; 20];
    v.validator_index = 2;
    v.signature = vec![9; 64];
    v.extension = extension;
    v.extension_signature = vec![8; 64];
    v
}

/// One message of every oneof member, with fields set.
fn every_message() -> Vec<Message> {
    let mut proposal = Proposal::default();
    proposal.msg_type = p2p_conn_privval::signed_msg_type::PROPOSAL;
    proposal.height = 10;
    proposal.pol_round = -1;
    proposal.timestamp = Timestamp::new(5, 6);
    let mut err = RemoteSignerError::default();
    err.code = 1;
    err.description = "refused".into();
    let mut sv = SignVoteRequest::default();
    sv.vote = Some(vote(5, b"ext".to_vec()));
    sv.chain_id = "chain".into();
    sv.skip_extension_signing = true;
    let mut svr = SignedVoteResponse::default();
    svr.vote = vote(5, vec![]);
    svr.error = Some(err.clone());
    let mut sp = SignProposalRequest::default();
    sp.proposal = Some(proposal.clone());
    sp.chain_id = "chain".into();
    let mut spr = SignedProposalResponse::default();
    spr.proposal = proposal;
    let mut pkr = PubKeyRequest::default();
    pkr.chain_id = "chain".into();
    let mut sb = SignBytesRequest::default();
    sb.value = b"anything".to_vec();
    let mut sbr = SignBytesResponse::default();
    sbr.signature = vec![1; 64];
    sbr.error = Some(err.clone());
    [
        Sum::PubKeyRequest(pkr),
        Sum::PubKeyResponse(PubKeyResponse::ed25519([3; 32])),
        Sum::PubKeyResponse(PubKeyResponse::error(err)),
        Sum::SignVoteRequest(sv),
        Sum::SignedVoteResponse(svr),
        Sum::SignProposalRequest(sp),
        Sum::SignedProposalResponse(spr),
        Sum::PingRequest(PingRequest::default()),
        Sum::PingResponse(PingResponse::default()),
        Sum::SignBytesRequest(sb),
        Sum::SignBytesResponse(sbr),
    ]
    .into_iter()
    .map(Message::from)
    .collect()
}

#[tokio::test]
async fn every_message_through_a_secret_connection_then_an_oversized_one() {
    let (mut a, mut b) = tokio_secret_pair(&Config::default()).await;
    let sent = every_message();
    let writer = async {
        for m in &sent {
            p2p_conn_privval::testkit::write(&mut a, m).await?;
        }
        // A length one above the limit, then bytes the reader must not need.
        a.write_all(&[0x81, 0x50, 1, 2, 3]).await?;
        a.flush().await?;
        Ok::<_, PrivvalError>(a)
    };
    let reader = async {
        let mut dec = MessageDecoder::new();
        let mut got = Vec::new();
        for _ in 0..sent.len() {
            got.push(p2p_conn_privval::testkit::read(&mut b, &mut dec).await?);
        }
        let err = p2p_conn_privval::testkit::read(&mut b, &mut dec)
            .await
            .unwrap_err();
        Ok::<_, PrivvalError>((got, err))
    };
    let (w, r) = tokio::time::timeout(BOUND, async { tokio::join!(writer, reader) })
        .await
        .expect("bounded");
    let _a = w.unwrap();
    let (got, err) = r.unwrap();
    assert_eq!(got, sent);
    assert!(
        matches!(
            err,
            PrivvalError::TooLarge {
                len: 10241,
                limit: MAX_MESSAGE_BYTES
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn plaintext_stream_and_its_end() {
    let (mut client, server) = tokio::io::duplex(64);
    let sent = every_message();
    let writer = async {
        for m in &sent {
            p2p_conn_privval::testkit::write(&mut client, m)
                .await
                .unwrap();
        }
        // Half a message, then the end of the stream.
        let half = encode(&sent[3]);
        client.write_all(&half[..half.len() / 2]).await.unwrap();
        drop(client);
    };
    let reader = async {
        let mut server = BufReader::new(server);
        let mut dec = MessageDecoder::new();
        let mut got = Vec::new();
        for _ in 0..sent.len() {
            got.push(
                p2p_conn_privval::testkit::read(&mut server, &mut dec)
                    .await
                    .unwrap(),
            );
        }
        (
            got,
            p2p_conn_privval::testkit::read(&mut server, &mut dec)
                .await
                .unwrap_err(),
        )
    };
    let ((), (got, err)) = tokio::time::timeout(BOUND, async { tokio::join!(writer, reader) })
        .await
        .expect("bounded");
    assert_eq!(got, sent);
    let half = encode(&sent[3]).len() / 2;
    match err {
        PrivvalError::Truncated { received, expected } => {
            assert_eq!(received, half);
            assert_eq!(expected, Some(encode(&sent[3]).len()));
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn clean_end_between_messages_is_eof() {
    let (client, server) = tokio::io::duplex(64);
    drop(client);
    let mut server = BufReader::new(server);
    let err = p2p_conn_privval::testkit::read(&mut server, &mut MessageDecoder::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, PrivvalError::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof),
        "{err}"
    );
}

/// The v0.x key field and the v1 fields side by side, as protobuf puts them:
/// field 1 (CryptoPublicKey{ed25519}), then 3 (bytes) and 4 ("ed25519").
#[test]
fn pub_key_response_carries_both_forms() {
    let key = [0x11; 32];
    let msg = Message::from(Sum::PubKeyResponse(PubKeyResponse::ed25519(key)));
    let mut want = vec![0x12, 79]; // Message field 2, 79 bytes
    want.extend([0x0a, 34, 0x0a, 32]); // pub_key: CryptoPublicKey{ed25519 = 1}
    want.extend(key);
    want.extend([0x1a, 32]); // pub_key_bytes = 3
    want.extend(key);
    want.extend([0x22, 7]); // pub_key_type = 4
    want.extend(b"ed25519");
    let mut framed = vec![want.len() as u8];
    framed.extend(&want);
    assert_eq!(encode(&msg), framed);
}

fn arb_message() -> impl Strategy<Value = Message> {
    (
        0..11usize,
        any::<i64>(),
        any::<i32>(),
        proptest::collection::vec(any::<u8>(), 0..80),
        ".{0,20}",
    )
        .prop_map(|(which, height, round, bytes, text)| {
            let mut msgs = every_message();
            let mut m = msgs.swap_remove(which);
            match &mut m.sum {
                Some(Sum::SignVoteRequest(r)) => {
                    let v = r.vote.as_mut().unwrap();
                    v.height = height;
                    v.round = round;
                    v.extension = bytes;
                    r.chain_id = text;
                }
                Some(Sum::SignBytesRequest(r)) => r.value = bytes,
                Some(Sum::PubKeyRequest(r)) => r.chain_id = text,
                Some(Sum::SignedProposalResponse(r)) => {
                    r.proposal.height = height;
                    r.proposal.pol_round = round;
                }
                _ => {}
            }
            m
        })
}

proptest! {
    #![proptest_config(proptest_config(256))]

    /// Arbitrary bytes never panic the decoder; it never takes more than
    /// it is given, and after an error it stays spent.
    #[test]
    fn arbitrary_bytes_never_panic(input in proptest::collection::vec(any::<u8>(), 0..200), cut in 1..200usize) {
        let mut dec = MessageDecoder::with_limit(64);
        let mut rest = &input[..];
        let mut failed = false;
        while !rest.is_empty() {
            match dec.feed(&rest[..rest.len().min(cut)]) {
                Ok((used, got)) => {
                    prop_assert!(used <= rest.len());
                    if used == 0 && got.is_none() { break; }
                    rest = &rest[used..];
                }
                Err(_) => { failed = true; break; }
            }
        }
        if failed {
            prop_assert!(matches!(dec.feed(&[0]), Err(PrivvalError::Spent)));
        }
    }

    /// Messages written back to back come out the same, however the
    /// stream is cut.
    #[test]
    fn any_chunking_gives_the_same_messages(
        msgs in proptest::collection::vec(arb_message(), 1..6),
        chunk in 1..50usize,
    ) {
        let wire: Vec<u8> = msgs.iter().flat_map(encode).collect();
        let mut dec = MessageDecoder::new();
        let mut got = Vec::new();
        for piece in wire.chunks(chunk) {
            let mut piece = piece;
            while !piece.is_empty() {
                let (used, m) = dec.feed(piece).unwrap();
                got.extend(m);
                piece = &piece[used..];
            }
        }
        prop_assert!(dec.eof().is_none());
        prop_assert_eq!(got, msgs);
    }
}
