//! The double-sign guard (`privval::guard`): FilePV's rules, case by case,
//! and a property test over request sequences.

use std::collections::HashMap;

use p2p_conn_privval::guard::{
    check_extension, check_hrs, check_proposal, check_vote, Decision, GuardError, Hrs, SignState,
    Step,
};
use p2p_conn_privval::{
    proposal_sign_bytes, signed_msg_type, vote_sign_bytes, BlockId, Proposal, Timestamp, Vote,
};
use proptest::prelude::*;

use crate::common::{block, vote};

const CHAIN: &str = "test-chain";

fn proposal(height: i64, round: i32, pol_round: i32, block_n: u8, secs: i64) -> Proposal {
    let mut p = Proposal::default();
    p.msg_type = signed_msg_type::PROPOSAL;
    p.height = height;
    p.round = round;
    p.pol_round = pol_round;
    p.block_id = block(block_n);
    p.timestamp = Timestamp::new(secs, 0);
    p
}

/// The state after signing `v` (a fake signature: what matters is that it
/// is re-served).
fn signed_vote(v: &Vote) -> SignState {
    let step = Step::of_vote_type(v.msg_type).unwrap();
    let bytes = vote_sign_bytes(CHAIN, v);
    let sig = fake_sig(&bytes);
    SignState::new(Hrs::new(v.height, v.round, step), bytes, sig)
}

fn signed_proposal(p: &Proposal) -> SignState {
    let bytes = proposal_sign_bytes(CHAIN, p);
    let sig = fake_sig(&bytes);
    SignState::new(Hrs::new(p.height, p.round, Step::Propose), bytes, sig)
}

fn fake_sig(bytes: &[u8]) -> Vec<u8> {
    let mut s = vec![0xAB; 64];
    for (i, b) in bytes.iter().enumerate() {
        s[i % 64] ^= b.wrapping_add(i as u8);
    }
    s
}

#[test]
fn step_numbers_are_filepv_s() {
    assert_eq!(Step::None.as_i8(), 0);
    assert_eq!(Step::Propose.as_i8(), 1);
    assert_eq!(Step::Prevote.as_i8(), 2);
    assert_eq!(Step::Precommit.as_i8(), 3);
    for n in -1i8..=4 {
        assert_eq!(
            Step::from_i8(n).map(Step::as_i8),
            (0..=3).contains(&n).then_some(n)
        );
    }
    assert_eq!(
        Step::of_vote_type(signed_msg_type::PREVOTE),
        Some(Step::Prevote)
    );
    assert_eq!(
        Step::of_vote_type(signed_msg_type::PRECOMMIT),
        Some(Step::Precommit)
    );
    assert_eq!(Step::of_vote_type(signed_msg_type::PROPOSAL), None);
    assert!(Hrs::new(1, 0, Step::Precommit) < Hrs::new(1, 1, Step::Propose));
    assert!(Hrs::new(1, 5, Step::Precommit) < Hrs::new(2, 0, Step::None));
}

#[test]
fn initial_state_signs_and_gives_the_sign_bytes() {
    let v = vote(signed_msg_type::PREVOTE, 1, 0, 1, 10);
    assert_eq!(
        check_vote(&SignState::default(), CHAIN, &v).unwrap(),
        Decision::Sign {
            hrs: Hrs::new(1, 0, Step::Prevote),
            sign_bytes: vote_sign_bytes(CHAIN, &v),
        }
    );
    let p = proposal(1, 0, -1, 1, 10);
    assert!(matches!(
        check_proposal(&SignState::default(), CHAIN, &p).unwrap(),
        Decision::Sign { .. }
    ));
}

#[test]
fn higher_hrs_signs() {
    let state = signed_vote(&vote(signed_msg_type::PREVOTE, 5, 1, 1, 10));
    for v in [
        vote(signed_msg_type::PRECOMMIT, 5, 1, 2, 0),
        vote(signed_msg_type::PREVOTE, 5, 2, 2, 0),
        vote(signed_msg_type::PREVOTE, 6, 0, 2, 0),
    ] {
        assert!(matches!(
            check_vote(&state, CHAIN, &v),
            Ok(Decision::Sign { .. })
        ));
    }
    assert!(matches!(
        check_proposal(&state, CHAIN, &proposal(5, 2, -1, 3, 0)),
        Ok(Decision::Sign { .. })
    ));
}

#[test]
fn regressions_are_refused_by_name() {
    let state = signed_vote(&vote(signed_msg_type::PREVOTE, 5, 1, 1, 10));
    assert_eq!(
        check_vote(
            &state,
            CHAIN,
            &vote(signed_msg_type::PRECOMMIT, 4, 9, 1, 10)
        ),
        Err(GuardError::HeightRegression {
            height: 4,
            last_height: 5
        })
    );
    assert_eq!(
        check_vote(
            &state,
            CHAIN,
            &vote(signed_msg_type::PRECOMMIT, 5, 0, 1, 10)
        ),
        Err(GuardError::RoundRegression {
            height: 5,
            round: 0,
            last_round: 1
        })
    );
    // A proposal after a prevote at the same height and round.
    assert_eq!(
        check_proposal(&state, CHAIN, &proposal(5, 1, -1, 1, 10)),
        Err(GuardError::StepRegression {
            height: 5,
            round: 1,
            step: Step::Propose,
            last_step: Step::Prevote
        })
    );
    let state = signed_vote(&vote(signed_msg_type::PRECOMMIT, 5, 1, 1, 10));
    assert_eq!(
        check_vote(&state, CHAIN, &vote(signed_msg_type::PREVOTE, 5, 1, 1, 10)),
        Err(GuardError::StepRegression {
            height: 5,
            round: 1,
            step: Step::Prevote,
            last_step: Step::Precommit
        })
    );
}

#[test]
fn same_hrs_identical_reserves_the_signature() {
    let v = vote(signed_msg_type::PRECOMMIT, 3, 0, 1, 10);
    let state = signed_vote(&v);
    assert_eq!(
        check_vote(&state, CHAIN, &v).unwrap(),
        Decision::Reuse {
            signature: state.signature().to_vec(),
            timestamp: v.timestamp
        }
    );
    let p = proposal(3, 0, -1, 1, 10);
    let state = signed_proposal(&p);
    assert_eq!(
        check_proposal(&state, CHAIN, &p).unwrap(),
        Decision::Reuse {
            signature: state.signature().to_vec(),
            timestamp: p.timestamp
        }
    );
}

#[test]
fn same_hrs_only_timestamp_differs_reserves_the_earlier_timestamp() {
    let v = vote(signed_msg_type::PREVOTE, 3, 0, 1, 10);
    let state = signed_vote(&v);
    let later = vote(signed_msg_type::PREVOTE, 3, 0, 1, 99);
    assert_eq!(
        check_vote(&state, CHAIN, &later).unwrap(),
        Decision::Reuse {
            signature: state.signature().to_vec(),
            timestamp: Timestamp::new(10, 0)
        }
    );
    let p = proposal(3, 0, 1, 1, 10);
    let state = signed_proposal(&p);
    assert_eq!(
        check_proposal(&state, CHAIN, &proposal(3, 0, 1, 1, 77)).unwrap(),
        Decision::Reuse {
            signature: state.signature().to_vec(),
            timestamp: Timestamp::new(10, 0)
        }
    );
}

#[test]
fn same_hrs_different_content_is_a_conflict() {
    let hrs = Hrs::new(3, 0, Step::Prevote);
    let state = signed_vote(&vote(signed_msg_type::PREVOTE, 3, 0, 1, 10));
    // Another block, nil, another chain: with or without a new timestamp.
    for (v, chain) in [
        (vote(signed_msg_type::PREVOTE, 3, 0, 2, 10), CHAIN),
        (vote(signed_msg_type::PREVOTE, 3, 0, 0, 10), CHAIN),
        (vote(signed_msg_type::PREVOTE, 3, 0, 2, 11), CHAIN),
        (vote(signed_msg_type::PREVOTE, 3, 0, 1, 10), "other-chain"),
    ] {
        assert_eq!(
            check_vote(&state, chain, &v),
            Err(GuardError::Conflict { hrs })
        );
    }
    let state = signed_proposal(&proposal(3, 0, -1, 1, 10));
    let hrs = Hrs::new(3, 0, Step::Propose);
    for p in [proposal(3, 0, 0, 1, 10), proposal(3, 0, -1, 2, 12)] {
        assert_eq!(
            check_proposal(&state, CHAIN, &p),
            Err(GuardError::Conflict { hrs })
        );
    }
}

#[test]
fn a_mark_without_sign_bytes_refuses_its_own_hrs() {
    let hrs = Hrs::new(3, 0, Step::Prevote);
    let state = SignState::new(hrs, Vec::new(), Vec::new());
    assert_eq!(check_hrs(&state, hrs), Err(GuardError::NoSignBytes { hrs }));
    assert_eq!(
        check_vote(&state, CHAIN, &vote(signed_msg_type::PREVOTE, 3, 0, 1, 10)),
        Err(GuardError::NoSignBytes { hrs })
    );
    // Sign bytes but no signature: FilePV panics; the guard refuses.
    let state = SignState::new(hrs, vec![1, 2, 3], Vec::new());
    assert_eq!(check_hrs(&state, hrs), Err(GuardError::NoSignBytes { hrs }));
    assert_eq!(
        check_hrs(&state, Hrs::new(3, 0, Step::Precommit)),
        Ok(false)
    );
}

/// A mark imported from tmkms (its HRS and the block ID it signed there,
/// no sign bytes): at that HRS it signs the same block ID, whatever the
/// timestamp, and refuses another, nil included (a nil mark, the reverse);
/// below it refuses, above it signs; once signed, FilePV's rules.
#[test]
fn a_block_id_mark_signs_its_own_block_id_again_and_no_other() {
    let (pv, pc) = (signed_msg_type::PREVOTE, signed_msg_type::PRECOMMIT);
    for step in [Step::Propose, Step::Prevote, Step::Precommit] {
        for (mine, others) in [(1u8, [2u8, 0]), (0, [1, 2])] {
            let hrs = Hrs::new(3, 1, step);
            let state = SignState::with_block_id(hrs, block(mine));
            assert_eq!(state.block_id(), Some(&block(mine)));
            assert!(state.sign_bytes().is_empty() && state.signature().is_empty());
            let check = |b: u8, secs: i64| match step {
                Step::Propose => {
                    let p = proposal(3, 1, -1, b, secs);
                    (
                        check_proposal(&state, CHAIN, &p),
                        proposal_sign_bytes(CHAIN, &p),
                    )
                }
                _ => {
                    let t = if step == Step::Prevote { pv } else { pc };
                    let v = vote(t, 3, 1, b, secs);
                    (check_vote(&state, CHAIN, &v), vote_sign_bytes(CHAIN, &v))
                }
            };
            for secs in [10, 11] {
                let (decision, bytes) = check(mine, secs);
                assert_eq!(
                    decision,
                    Ok(Decision::Sign {
                        hrs,
                        sign_bytes: bytes
                    }),
                    "{hrs} block {mine}"
                );
            }
            for other in others {
                assert_eq!(
                    check(other, 10).0,
                    Err(GuardError::Conflict { hrs }),
                    "{hrs} mark {mine}, request {other}"
                );
            }
            assert!(check_vote(&state, CHAIN, &vote(pc, 3, 0, mine, 10)).is_err());
            assert!(matches!(
                check_vote(&state, CHAIN, &vote(pv, 3, 2, 5, 10)),
                Ok(Decision::Sign { .. })
            ));
        }
    }
    // Once signed, the mark holds the sign bytes: the usual rules.
    let v = vote(pv, 3, 1, 1, 10);
    let signed = signed_vote(&v);
    assert_eq!(signed.block_id(), None);
    assert!(matches!(
        check_vote(&signed, CHAIN, &vote(pv, 3, 1, 1, 11)),
        Ok(Decision::Reuse { .. })
    ));
    assert_eq!(
        check_vote(&signed, CHAIN, &vote(pv, 3, 1, 2, 10)),
        Err(GuardError::Conflict {
            hrs: Hrs::new(3, 1, Step::Prevote)
        })
    );
}

#[test]
fn corrupt_stored_sign_bytes_are_an_error_not_a_panic() {
    let hrs = Hrs::new(3, 0, Step::Prevote);
    let state = SignState::new(hrs, vec![0xff; 5], vec![1; 64]);
    assert_eq!(
        check_vote(&state, CHAIN, &vote(signed_msg_type::PREVOTE, 3, 0, 1, 10)),
        Err(GuardError::CorruptSignBytes { hrs, kind: "vote" })
    );
}

#[test]
fn unknown_vote_type_is_refused() {
    for t in [0, 3, signed_msg_type::PROPOSAL, -1] {
        assert_eq!(
            check_vote(&SignState::default(), CHAIN, &vote(t, 1, 0, 1, 0)),
            Err(GuardError::UnknownVoteType { msg_type: t })
        );
    }
}

#[test]
fn extension_rule() {
    let mut v = vote(signed_msg_type::PRECOMMIT, 1, 0, 1, 0);
    assert_eq!(check_extension(&v), Ok(true));
    v.extension = b"ext".to_vec();
    assert_eq!(check_extension(&v), Ok(true));
    let mut nil = vote(signed_msg_type::PRECOMMIT, 1, 0, 0, 0);
    assert_eq!(check_extension(&nil), Ok(false));
    nil.extension = b"ext".to_vec();
    assert_eq!(check_extension(&nil), Err(GuardError::UnexpectedExtension));
    let mut pv = vote(signed_msg_type::PREVOTE, 1, 0, 1, 0);
    assert_eq!(check_extension(&pv), Ok(false));
    pv.extension = b"ext".to_vec();
    assert_eq!(check_extension(&pv), Err(GuardError::UnexpectedExtension));
}

#[derive(Debug, Clone)]
enum Req {
    Vote(Vote),
    Proposal(Proposal),
}

impl Req {
    fn block_id(&self) -> &BlockId {
        match self {
            Req::Vote(v) => &v.block_id,
            Req::Proposal(p) => &p.block_id,
        }
    }
}

fn req() -> impl Strategy<Value = Req> {
    (0u8..3, 0i64..4, 0i32..3, -1i32..2, 0u8..3, 0i64..3).prop_map(|(kind, h, r, pol, b, t)| {
        match kind {
            0 => Req::Vote(vote(signed_msg_type::PREVOTE, h, r, b, t)),
            1 => Req::Vote(vote(signed_msg_type::PRECOMMIT, h, r, b, t)),
            _ => Req::Proposal(proposal(h, r, pol, b, t)),
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// For any sequence of requests, with every allowed signature recorded:
    /// a new signature is only ever made strictly above the mark, never
    /// twice for one HRS, and a re-served signature is the one made for
    /// exactly the response's content (the request with the earlier
    /// timestamp). From a mark imported from tmkms (an HRS and a block ID),
    /// also at that HRS, once, for that block ID only.
    #[test]
    fn never_two_sign_bytes_per_hrs_never_below_the_mark(
        imported in proptest::option::of((0i64..4, 0i32..3, 1i8..4, 0u8..3)),
        reqs in proptest::collection::vec(req(), 1..60),
    ) {
        let imported = imported.map(|(h, r, s, b)| (Hrs::new(h, r, Step::from_i8(s).unwrap()), block(b)));
        let mut state = match &imported {
            Some((hrs, id)) => SignState::with_block_id(*hrs, id.clone()),
            None => SignState::default(),
        };
        let mut signed: HashMap<Hrs, (Vec<u8>, Vec<u8>)> = HashMap::new();
        for r in reqs {
            let (decision, hrs, bytes_with) = match &r {
                Req::Vote(v) => {
                    let hrs = Hrs::new(v.height, v.round, Step::of_vote_type(v.msg_type).unwrap());
                    let v = v.clone();
                    (check_vote(&state, CHAIN, &v), hrs, Box::new(move |t: Timestamp| {
                        let mut v = v.clone();
                        v.timestamp = t;
                        vote_sign_bytes(CHAIN, &v)
                    }) as Box<dyn Fn(Timestamp) -> Vec<u8>>)
                }
                Req::Proposal(p) => {
                    let hrs = Hrs::new(p.height, p.round, Step::Propose);
                    let p = p.clone();
                    (check_proposal(&state, CHAIN, &p), hrs, Box::new(move |t: Timestamp| {
                        let mut p = p.clone();
                        p.timestamp = t;
                        proposal_sign_bytes(CHAIN, &p)
                    }) as Box<dyn Fn(Timestamp) -> Vec<u8>>)
                }
            };
            // At the imported mark's HRS, not yet signed there: tmkms's block?
            let at_import = state.block_id().map(|id| (hrs == state.hrs(), id == r.block_id()));
            match decision {
                Ok(Decision::Sign { hrs: h, sign_bytes }) => {
                    prop_assert_eq!(h, hrs);
                    prop_assert!(
                        h > state.hrs() || at_import == Some((true, true)),
                        "signed {} at or below the mark {}", h, state.hrs()
                    );
                    prop_assert!(!signed.contains_key(&h), "signed {} twice", h);
                    let sig = fake_sig(&sign_bytes);
                    signed.insert(h, (sign_bytes.clone(), sig.clone()));
                    state = SignState::new(h, sign_bytes, sig);
                }
                Ok(Decision::Reuse { signature, timestamp }) => {
                    let (bytes, sig) = signed.get(&hrs).expect("re-served an HRS never signed");
                    prop_assert_eq!(&signature, sig);
                    prop_assert_eq!(&bytes_with(timestamp), bytes);
                }
                Ok(other) => prop_assert!(false, "unexpected decision {:?}", other),
                Err(GuardError::Conflict { hrs: h }) => {
                    prop_assert_eq!(h, hrs);
                    prop_assert!(signed.contains_key(&h) || at_import == Some((true, false)));
                }
                Err(GuardError::HeightRegression { .. })
                | Err(GuardError::RoundRegression { .. })
                | Err(GuardError::StepRegression { .. }) => {
                    prop_assert!(hrs < state.hrs());
                }
                Err(e) => prop_assert!(false, "unexpected error {}", e),
            }
        }
    }
}

/// The first and last second a protobuf `Timestamp` can hold, and so the
/// only ones CometBFT's decoder takes: 0001-01-01T00:00:00Z and
/// 9999-12-31T23:59:59Z (written here from the calendar, not taken from
/// the library).
const FIRST_SECOND: i64 = -62_135_596_800;
const LAST_SECOND: i64 = 253_402_300_799;

/// What CometBFT would take, by its own rules, written out independently of
/// the guard: `BlockID.ValidateBasic` (each hash empty or 32 bytes) and
/// `google.protobuf.Timestamp`'s range (what gogoproto's `StdTimeUnmarshal`
/// accepts).
fn cometbft_takes(block_id: &p2p_conn_privval::BlockId, t: Timestamp) -> bool {
    let hash_ok = |h: &[u8]| h.is_empty() || h.len() == 32;
    hash_ok(&block_id.hash)
        && hash_ok(&block_id.part_set_header.hash)
        && (FIRST_SECOND..=LAST_SECOND).contains(&t.seconds)
        && (0..1_000_000_000).contains(&t.nanos)
}

/// Block IDs whose hashes are not 0 or 32 bytes, and timestamps outside
/// years 1 to 9999 or with nanos outside 0..1e9, are refused before any
/// HRS check, naming the field, for votes and proposals alike: CometBFT's
/// signer never signs them (its `CanonicalizeBlockID` panics, its decoder
/// refuses the timestamp), and a signature would move the mark past a
/// height and round the node can no longer vote at.
#[test]
fn malformed_block_ids_and_timestamps_are_refused_by_name() {
    type Mutation = fn(&mut p2p_conn_privval::BlockId, &mut Timestamp);
    let cases: [(&str, Mutation, &str); 9] = [
        (
            "hash of 31 bytes",
            |b, _| b.hash.truncate(31),
            "block_id.hash",
        ),
        ("hash of 33 bytes", |b, _| b.hash.push(0), "block_id.hash"),
        (
            "part-set hash of 1 byte",
            |b, _| b.part_set_header.hash = vec![1],
            "block_id.part_set_header.hash",
        ),
        (
            "part-set hash of 33 bytes",
            |b, _| b.part_set_header.hash = vec![1; 33],
            "block_id.part_set_header.hash",
        ),
        (
            "year 10000",
            |_, t| t.seconds = LAST_SECOND + 1,
            "timestamp",
        ),
        (
            "before year 1",
            |_, t| t.seconds = FIRST_SECOND - 1,
            "timestamp",
        ),
        ("nanos of 2e9", |_, t| t.nanos = 2_000_000_000, "timestamp"),
        ("nanos of -1", |_, t| t.nanos = -1, "timestamp"),
        ("nanos of 1e9", |_, t| t.nanos = 1_000_000_000, "timestamp"),
    ];
    for (what, mutate, field) in cases {
        let mut v = vote(signed_msg_type::PREVOTE, 2, 0, 1, 10);
        mutate(&mut v.block_id, &mut v.timestamp);
        let err = check_vote(&SignState::default(), CHAIN, &v)
            .expect_err(&format!("a prevote with a {what} must be refused"));
        assert!(err.to_string().contains(field), "{what}: {err}");
        // Also at the mark's own HRS, where the guard would otherwise
        // compare sign bytes.
        let at_mark = signed_vote(&vote(signed_msg_type::PREVOTE, 2, 0, 1, 10));
        assert!(
            check_vote(&at_mark, CHAIN, &v).is_err(),
            "{what} at the mark"
        );

        let mut p = proposal(2, 0, -1, 1, 10);
        mutate(&mut p.block_id, &mut p.timestamp);
        let err = check_proposal(&SignState::default(), CHAIN, &p)
            .expect_err(&format!("a proposal with a {what} must be refused"));
        assert!(err.to_string().contains(field), "{what}: {err}");
    }
    // The edges themselves are valid.
    for (secs, nanos) in [(FIRST_SECOND, 0), (LAST_SECOND, 999_999_999)] {
        let mut v = vote(signed_msg_type::PREVOTE, 2, 0, 1, 0);
        v.timestamp = Timestamp::new(secs, nanos);
        assert!(matches!(
            check_vote(&SignState::default(), CHAIN, &v),
            Ok(Decision::Sign { .. })
        ));
    }
    // A nil block ID, and a hash with an empty part-set header (a
    // proposal's POL block ID can be so), are valid.
    let mut v = vote(signed_msg_type::PRECOMMIT, 2, 0, 0, 10);
    assert!(check_vote(&SignState::default(), CHAIN, &v).is_ok());
    v.block_id = block(3);
    v.block_id.part_set_header = Default::default();
    assert!(check_vote(&SignState::default(), CHAIN, &v).is_ok());
}

/// Hash lengths around 32 and every timestamp edge, with arbitrary bytes.
fn block_id_and_time() -> impl Strategy<Value = (p2p_conn_privval::BlockId, Timestamp)> {
    let len = prop_oneof![
        Just(0usize),
        Just(32),
        Just(31),
        Just(33),
        Just(1),
        0usize..80
    ];
    let seconds = prop_oneof![
        Just(FIRST_SECOND),
        Just(FIRST_SECOND - 1),
        Just(LAST_SECOND),
        Just(LAST_SECOND + 1),
        Just(0i64),
        Just(i64::MIN),
        Just(i64::MAX),
        any::<i64>(),
        FIRST_SECOND..=LAST_SECOND,
    ];
    let nanos = prop_oneof![
        Just(0i32),
        Just(999_999_999),
        Just(1_000_000_000),
        Just(-1),
        Just(i32::MIN),
        Just(i32::MAX),
        any::<i32>(),
        0i32..1_000_000_000,
    ];
    (len.clone(), len, any::<u32>(), any::<u8>(), seconds, nanos).prop_map(
        |(hash_len, psh_len, total, fill, seconds, nanos)| {
            let mut id = p2p_conn_privval::BlockId::default();
            id.hash = vec![fill; hash_len];
            id.part_set_header.total = total;
            id.part_set_header.hash = vec![fill ^ 0x5a; psh_len];
            (id, Timestamp::new(seconds, nanos))
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Whatever the block ID and timestamp, for a vote of either type and a
    /// proposal above the mark: the guard allows a signature exactly when
    /// CometBFT's own rules take the content (`cometbft_takes`), and
    /// refuses the rest without a signature. At the mark, nothing CometBFT
    /// refuses is re-served either.
    #[test]
    fn nothing_cometbft_refuses_is_signed(
        (id, t) in block_id_and_time(),
        kind in 0u8..3,
        at_mark in any::<bool>(),
    ) {
        let takes = cometbft_takes(&id, t);
        let decision = match kind {
            0 | 1 => {
                let msg_type = if kind == 0 { signed_msg_type::PREVOTE } else { signed_msg_type::PRECOMMIT };
                let mut v = vote(msg_type, 5, 1, 0, 0);
                v.block_id = id;
                v.timestamp = t;
                let state = if at_mark { signed_vote(&v) } else { SignState::default() };
                check_vote(&state, CHAIN, &v)
            }
            _ => {
                let mut p = proposal(5, 1, -1, 0, 0);
                p.block_id = id;
                p.timestamp = t;
                let state = if at_mark { signed_proposal(&p) } else { SignState::default() };
                check_proposal(&state, CHAIN, &p)
            }
        };
        match decision {
            Ok(Decision::Sign { .. }) => prop_assert!(takes && !at_mark, "signed what CometBFT refuses"),
            Ok(Decision::Reuse { .. }) => prop_assert!(takes && at_mark, "re-served what CometBFT refuses"),
            Ok(other) => prop_assert!(false, "unexpected decision {:?}", other),
            Err(e) => prop_assert!(!takes, "refused what CometBFT takes: {}", e),
        }
    }
}
