//! tmkms 0.15.0's own consensus state files, as the real tmkms writes them
//! while it signs our node side's requests, read by `state_file`: each
//! file's format is told from its content, its mark is tmkms's (each step
//! one up: tmkms counts proposal 0, prevote 1, precommit 2), a signer
//! refuses to run on it directly, `convert_state_file` imports it, and a
//! signer on the import refuses tmkms's own height, round and step and
//! everything below it, and signs above it. Every cut of each file, and
//! each file made to look half like FilePV's, is refused.
//!
//! Going back to tmkms (the operator manual's way): a state file written
//! by hand at the height after p2p-conn's mark, which the real tmkms
//! loads, and which lets it sign that height but nothing below it.
//!
//! Also tmkms's softsign consensus key files, as `tmkms softsign keygen`
//! and `softsign import` write them: `load_validator_key` reads them.
//!
//! Without tmkms (installed on first use) the tests print a notice and
//! pass, unless `CI=true`.

use p2p_conn::Identity;
use p2p_conn_interop::tmkms::ProtocolVersion;
use p2p_conn_privval::guard::{GuardError, Hrs, Step};
use p2p_conn_privval::state_file::{self, Format, StateFileError, StateFileProblem};
use p2p_conn_privval::{
    convert_state_file, load_validator_key, signed_msg_type, BlockId, GuardedSigner, Proposal,
    Signer, SignerError, TmkmsKeyProblem, Vote,
};

use crate::common::{block, temp_dir};
use crate::tmkms::{
    proposal, public_key_within, sign_and_check_proposal, sign_and_check_vote, start, vote,
    Transport, CHAIN, CONSENSUS_SEED,
};

/// One request of the run: what tmkms is asked to sign.
#[derive(Clone)]
enum Request {
    Proposal(Proposal),
    Vote(Vote),
}

impl Request {
    fn hrs(&self) -> Hrs {
        match self {
            Request::Proposal(p) => Hrs::new(p.height, p.round, Step::Propose),
            Request::Vote(v) => Hrs::new(
                v.height,
                v.round,
                Step::of_vote_type(v.msg_type).expect("a vote type"),
            ),
        }
    }

    /// Sign it: the signature.
    fn sign(&self, signer: &mut GuardedSigner) -> Result<Vec<u8>, SignerError> {
        match self {
            Request::Proposal(p) => signer.sign_proposal(CHAIN, p.clone()).map(|p| p.signature),
            Request::Vote(v) => signer
                .sign_vote(CHAIN, v.clone(), false)
                .map(|v| v.signature),
        }
    }

    /// The same request for block `n` instead ([`crate::common::block`]:
    /// 0 is nil).
    fn for_block(&self, n: u8) -> Request {
        let mut r = self.clone();
        match &mut r {
            Request::Proposal(p) => p.block_id = block(n),
            Request::Vote(v) => v.block_id = block(n),
        }
        r
    }

    /// The same request a second later (what a node's retry at a later
    /// moment can look like).
    fn later(&self) -> Request {
        let mut r = self.clone();
        match &mut r {
            Request::Proposal(p) => p.timestamp.seconds += 1,
            Request::Vote(v) => v.timestamp.seconds += 1,
        }
        r
    }

    /// Its block ID.
    fn block_id(&self) -> &BlockId {
        match self {
            Request::Proposal(p) => &p.block_id,
            Request::Vote(v) => &v.block_id,
        }
    }

    /// Requests at its height, round and step for other block IDs: another
    /// block, and nil (or, for a nil request, a block).
    fn others(&self) -> Vec<Request> {
        if self.block_id() == &block(0) {
            vec![self.for_block(7)]
        } else {
            vec![self.for_block(7), self.for_block(0)]
        }
    }
}

/// A validator's requests over three heights: a block at 1; nil votes in
/// round 0 of height 2, then its block in round 1 (POL round 0); a block
/// at 3.
fn requests() -> Vec<Request> {
    let (pv, pc) = (signed_msg_type::PREVOTE, signed_msg_type::PRECOMMIT);
    vec![
        Request::Proposal(proposal(1, 0, -1, 1)),
        Request::Vote(vote(pv, 1, 0, 1)),
        Request::Vote(vote(pc, 1, 0, 1)),
        Request::Vote(vote(pv, 2, 0, 0)),
        Request::Vote(vote(pc, 2, 0, 0)),
        Request::Proposal(proposal(2, 1, 0, 2)),
        Request::Vote(vote(pv, 2, 1, 2)),
        Request::Vote(vote(pc, 2, 1, 2)),
        Request::Proposal(proposal(3, 0, -1, 3)),
        Request::Vote(vote(pv, 3, 0, 3)),
    ]
}

/// The problem `load` finds in `text`, written to `path`.
fn problem(path: &std::path::Path, text: &str) -> StateFileProblem {
    std::fs::write(path, text).unwrap();
    match state_file::load(path) {
        Err(StateFileError::Invalid { problem, .. }) => problem,
        other => panic!("{text:?} was read: {other:?}"),
    }
}

/// `text` (one of tmkms's files) cut anywhere is refused as cut short or
/// empty; made to look half like FilePV's, as ambiguous.
fn damaged_copies_are_refused(dir: &std::path::Path, text: &str) {
    let path = dir.join("damaged.json");
    for cut in 0..text.len() {
        let p = problem(&path, &text[..cut]);
        assert!(
            matches!(
                p,
                StateFileProblem::Empty | StateFileProblem::CutShort { .. }
            ),
            "{:?} cut at {cut}: {p:?}",
            &text[..cut]
        );
    }
    let body = text
        .strip_suffix('}')
        .expect("tmkms's file ends its object");
    let block_at = text.find(",\"block_id\"").expect("tmkms writes block_id");
    let round = text.split("\"round\":").nth(1).unwrap();
    let round_value = &round[..round.find(',').unwrap()];
    let number_round = text.replacen(
        &format!("\"round\":{round_value}"),
        &format!("\"round\":{}", round_value.trim_matches('"')),
        1,
    );
    for mixed in [
        format!("{body},\"signature\":\"\"}}"),
        format!("{body},\"signbytes\":\"0A\"}}"),
        format!("{}}}", &text[..block_at]),
        number_round,
    ] {
        let p = problem(&path, &mixed);
        assert!(
            matches!(p, StateFileProblem::Ambiguous { .. }),
            "{mixed}: {p:?}"
        );
    }
}

/// The mark imported from tmkms's file `text`, whose mark is `hrs`
/// (tmkms just signed `signed`, and answered with `tmkms_signature`): the
/// mark keeps tmkms's block ID, through the slot file and a restart. A
/// signer on it refuses another block ID (nil included) at `hrs` as a
/// double sign, and anything below; it signs `signed` again (tmkms's own
/// rule), into tmkms's very signature; from then on it holds its sign
/// bytes and re-serves that signature as FilePV does; it signs the next
/// step up.
fn import_holds_the_mark(
    dir: &std::path::Path,
    n: usize,
    text: &str,
    signed: &Request,
    tmkms_signature: Option<&[u8]>,
) {
    let hrs = signed.hrs();
    let tmkms_file = dir.join(format!("tmkms-{n}.json"));
    std::fs::write(&tmkms_file, text).unwrap();
    assert_eq!(state_file::format_of(&tmkms_file).unwrap(), Format::Tmkms);
    let mark = state_file::load(&tmkms_file).unwrap();
    assert_eq!(mark.hrs(), hrs, "{text}");
    assert!(mark.sign_bytes().is_empty() && mark.signature().is_empty());
    assert_eq!(mark.block_id(), Some(signed.block_id()), "{text}");
    let key = Identity::from_seed(&CONSENSUS_SEED);
    match GuardedSigner::open(key.clone(), &tmkms_file) {
        Err(SignerError::State(StateFileError::Invalid {
            problem: StateFileProblem::TmkmsFile,
            ..
        })) => {}
        other => panic!("a signer on tmkms's own file: {other:?}"),
    }
    let ours = dir.join(format!("imported-{n}.state"));
    assert_eq!(
        convert_state_file(&tmkms_file, &ours, Format::Slots).unwrap(),
        mark
    );
    assert_eq!(state_file::format_of(&ours).unwrap(), Format::Slots);
    assert_eq!(state_file::load(&ours).unwrap(), mark, "the slot file");
    let mut signer = GuardedSigner::open(key.clone(), &ours).unwrap();
    let refused = |signer: &mut GuardedSigner, what: &str| {
        for other in signed.others() {
            match other.sign(signer) {
                Err(SignerError::Refused(GuardError::Conflict { hrs: at })) => {
                    assert_eq!(at, hrs)
                }
                got => panic!("{hrs} for block {:?} {what}: {got:?}", other.block_id()),
            }
        }
    };
    refused(&mut signer, "after the import");
    let pv = signed_msg_type::PREVOTE;
    let below = Request::Vote(vote(pv, hrs.height - 1, 0, 9));
    assert!(
        matches!(below.sign(&mut signer), Err(SignerError::Refused(_))),
        "a prevote at the height below {hrs} was signed"
    );
    assert_eq!(signer.state(), &mark, "a refusal moved the mark");
    // A restart: the block ID is read back from the slot file.
    drop(signer);
    let mut signer = GuardedSigner::open(key.clone(), &ours).unwrap();
    let signature = signed
        .sign(&mut signer)
        .unwrap_or_else(|e| panic!("{hrs} again for tmkms's block after the import: {e}"));
    if let Some(theirs) = tmkms_signature {
        assert_eq!(signature, theirs, "{hrs}: not tmkms's own signature");
    }
    assert_eq!(signer.state().hrs(), hrs);
    assert!(!signer.state().sign_bytes().is_empty());
    assert_eq!(signer.state().block_id(), None);
    assert_eq!(signed.sign(&mut signer).unwrap(), signature, "re-served");
    assert_eq!(
        signed.later().sign(&mut signer).unwrap(),
        signature,
        "re-served with the earlier timestamp"
    );
    refused(&mut signer, "once signed");
    drop(signer);
    let mut signer = GuardedSigner::open(key, &ours).unwrap();
    assert_eq!(
        signed.sign(&mut signer).unwrap(),
        signature,
        "after a restart"
    );
    let above = match hrs.step {
        Step::Propose => Request::Vote(vote(pv, hrs.height, hrs.round, 9)),
        Step::Prevote => Request::Vote(vote(signed_msg_type::PRECOMMIT, hrs.height, hrs.round, 9)),
        _ => Request::Vote(vote(pv, hrs.height, hrs.round + 1, 9)),
    };
    above
        .sign(&mut signer)
        .unwrap_or_else(|e| panic!("above {hrs}: {e}"));
    drop(signer);
    assert!(state_file::load(&ours).unwrap().hrs() > hrs);
}

/// tmkms signs [`requests`]; after each, its state file is read as above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tmkms_state_files_import_with_their_mark() {
    let test = "privval_tmkms_state::tmkms_state_files_import_with_their_mark";
    let Some((node, mut kms, home)) =
        start(test, ProtocolVersion::V038, Transport::Tcp, |n| n, |_| ()).await
    else {
        return;
    };
    let dir = temp_dir("tmkms-state");
    let initial = home.state().expect("tmkms writes its state file at start");
    eprintln!("tmkms 0.15.0 state file at start: {initial}");
    std::fs::write(dir.join("initial.json"), &initial).unwrap();
    assert_eq!(
        state_file::format_of(dir.join("initial.json")).unwrap(),
        Format::Tmkms
    );
    assert_eq!(
        state_file::load(dir.join("initial.json")).unwrap(),
        Default::default()
    );
    damaged_copies_are_refused(&dir, &initial);
    for (n, request) in requests().into_iter().enumerate() {
        let signature = match &request {
            Request::Proposal(p) => {
                sign_and_check_proposal(&node, &mut kms, p.clone())
                    .await
                    .signature
            }
            Request::Vote(v) => {
                sign_and_check_vote(&node, &mut kms, v.clone())
                    .await
                    .signature
            }
        };
        let text = home.state().expect("tmkms's state file");
        eprintln!("tmkms 0.15.0 state file after {}: {text}", request.hrs());
        import_holds_the_mark(&dir, n, &text, &request, Some(&signature));
        damaged_copies_are_refused(&dir, &text);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// tmkms 0.15.0's files as the test above printed them (also in
/// `state_file/tmkms.rs`): after [`requests`]' precommit for block 1 at
/// 1/0, nil prevote at 2/0 and proposal at 2/1. Checked as above without
/// tmkms (no signature of its to compare with).
#[test]
fn recorded_tmkms_files_import_with_their_mark() {
    const PRECOMMIT_1_0: &str = r#"{"height":"1","round":"0","step":2,"block_id":{"hash":"0101010101010101010101010101010101010101010101010101010101010101","parts":{"total":1,"hash":"FEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFE"}}}"#;
    const NIL_PREVOTE_2_0: &str = r#"{"height":"2","round":"0","step":1,"block_id":{"hash":"","parts":{"total":0,"hash":""}}}"#;
    const PROPOSAL_2_1: &str = r#"{"height":"2","round":"1","step":0,"block_id":{"hash":"0202020202020202020202020202020202020202020202020202020202020202","parts":{"total":1,"hash":"FDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFD"}}}"#;
    let dir = temp_dir("tmkms-recorded");
    let requests = requests();
    for (n, text) in [(2, PRECOMMIT_1_0), (3, NIL_PREVOTE_2_0), (5, PROPOSAL_2_1)] {
        import_holds_the_mark(&dir, n, text, &requests[n], None);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Slot files written before a slot could hold a block ID, by p2p-conn at
/// d4e8ac3 (`tests/data/slots-d4e8ac3/README.md`), load as they were: the
/// import of tmkms's precommit for block 1 at 1/0, with no block ID, so a
/// signer on it still refuses 1/0/precommit (it cannot know the block)
/// and signs above it; the import of FilePV's file, with its sign bytes.
#[test]
fn slot_files_without_a_block_id_still_load() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let dir = temp_dir("old-slots");
    let old = dir.join("tmkms-import.state");
    std::fs::copy(data.join("slots-d4e8ac3/tmkms-import.state"), &old).unwrap();
    let hrs = Hrs::new(1, 0, Step::Precommit);
    let mark = state_file::load(&old).unwrap();
    assert_eq!(mark.hrs(), hrs);
    assert!(mark.sign_bytes().is_empty() && mark.signature().is_empty());
    assert_eq!(mark.block_id(), None);
    let mut signer = GuardedSigner::open(Identity::from_seed(&CONSENSUS_SEED), &old).unwrap();
    match requests()[2].sign(&mut signer) {
        Err(SignerError::Refused(GuardError::NoSignBytes { hrs: at })) => assert_eq!(at, hrs),
        other => panic!("{hrs} on an old import: {other:?}"),
    }
    Request::Vote(vote(signed_msg_type::PREVOTE, 1, 1, 9))
        .sign(&mut signer)
        .unwrap();
    let filepv = data.join("slots-d4e8ac3/filepv-import.state");
    assert_eq!(state_file::format_of(&filepv).unwrap(), Format::Slots);
    assert_eq!(
        state_file::load(&filepv).unwrap(),
        state_file::load(data.join("filepv-v1.0.1/priv_validator_state.json")).unwrap()
    );
    drop(signer);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `tmkms softsign ARGS`, which must succeed.
fn softsign(bin: &std::path::Path, args: &[&std::path::Path]) {
    let out = std::process::Command::new(bin)
        .arg("softsign")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tmkms softsign {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A `priv_validator_key.json` imported by `tmkms softsign import` loads
/// as the same key as the JSON file; one from `softsign keygen` loads;
/// what tmkms reads but holds no seed, or is not base64, is refused.
#[test]
fn tmkms_softsign_keys_load() {
    let test = "privval_tmkms_state::tmkms_softsign_keys_load";
    let Some(bin) = p2p_conn_interop::tmkms::tmkms_binary(test) else {
        return;
    };
    let dir = temp_dir("tmkms-key");
    let json = dir.join("priv_validator_key.json");
    let (text, id) = p2p_conn_interop::privval_peer::validator_key_json(CONSENSUS_SEED);
    std::fs::write(&json, text).unwrap();
    let imported = dir.join("imported.key");
    softsign(
        &bin,
        &["import".as_ref(), json.as_path(), imported.as_path()],
    );
    let key = load_validator_key(&imported).unwrap();
    assert_eq!(key.public_key(), id.public_key());
    assert_eq!(
        load_validator_key(&json).unwrap().public_key(),
        id.public_key()
    );
    let generated = dir.join("generated.key");
    softsign(&bin, &["keygen".as_ref(), generated.as_path()]);
    let fresh = load_validator_key(&generated).unwrap();
    assert_ne!(fresh.public_key(), id.public_key());
    let b64 = |n: usize| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(vec![7u8; n])
    };
    for (content, want) in [
        (b64(64), TmkmsKeyProblem::NoSeed { bytes: 64 }),
        (b64(96), TmkmsKeyProblem::NoSeed { bytes: 96 }),
        (b64(31), TmkmsKeyProblem::BadLength { bytes: 31 }),
        ("not base64!".to_string(), TmkmsKeyProblem::NotBase64),
    ] {
        let path = dir.join("bad.key");
        std::fs::write(&path, &content).unwrap();
        match load_validator_key(&path) {
            Err(SignerError::TmkmsKey { problem, .. }) => assert_eq!(problem, want, "{content}"),
            other => panic!("{content}: {other:?}"),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The way back of the operator manual: p2p-conn's mark at height 3, so
/// tmkms gets `{"height":"4","round":"0","step":0,"block_id":null}`. It
/// loads it, signs the prevote and precommit of height 4, refuses a
/// proposal at 4/0 (its double-sign error) and anything at height 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tmkms_takes_a_hand_written_state_at_the_next_height() {
    let test = "privval_tmkms_state::tmkms_takes_a_hand_written_state_at_the_next_height";
    let Some((node, mut kms, home)) =
        start(test, ProtocolVersion::V038, Transport::Tcp, |n| n, |_| ()).await
    else {
        return;
    };
    kms.kill();
    std::fs::write(
        &home.state_file,
        r#"{"height":"4","round":"0","step":0,"block_id":null}"#,
    )
    .unwrap();
    kms.restart();
    public_key_within(&node, &mut kms, 3, "after the restart on the written state").await;
    let (pv, pc) = (signed_msg_type::PREVOTE, signed_msg_type::PRECOMMIT);
    match node.sign_proposal(CHAIN, proposal(4, 0, -1, 4)).await {
        Err(p2p_conn_privval::endpoint::EndpointError::Remote(e)) => {
            assert_eq!(e.code, 2, "{e:?}")
        }
        other => panic!("a proposal at 4/0 got {other:?}"),
    }
    sign_and_check_vote(&node, &mut kms, vote(pv, 4, 0, 4)).await;
    sign_and_check_vote(&node, &mut kms, vote(pc, 4, 0, 4)).await;
    assert!(
        node.sign_vote(CHAIN, vote(pc, 3, 0, 3), false)
            .await
            .is_err(),
        "tmkms signed height 3 below the written state"
    );
}
