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
    convert_state_file, load_validator_key, signed_msg_type, GuardedSigner, Proposal, Signer,
    SignerError, TmkmsKeyProblem, Vote,
};

use crate::common::temp_dir;
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

    fn sign(&self, signer: &mut GuardedSigner) -> Result<(), SignerError> {
        match self {
            Request::Proposal(p) => signer.sign_proposal(CHAIN, p.clone()).map(drop),
            Request::Vote(v) => signer.sign_vote(CHAIN, v.clone(), false).map(drop),
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
/// (tmkms just signed `signed`): a signer on it refuses `signed` again and
/// anything below, and signs the next step up.
fn import_holds_the_mark(dir: &std::path::Path, n: usize, text: &str, signed: &Request) {
    let hrs = signed.hrs();
    let tmkms_file = dir.join(format!("tmkms-{n}.json"));
    std::fs::write(&tmkms_file, text).unwrap();
    assert_eq!(state_file::format_of(&tmkms_file).unwrap(), Format::Tmkms);
    let mark = state_file::load(&tmkms_file).unwrap();
    assert_eq!(mark.hrs(), hrs, "{text}");
    assert!(mark.sign_bytes().is_empty() && mark.signature().is_empty());
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
        convert_state_file(&tmkms_file, &ours, Format::Slots)
            .unwrap()
            .hrs(),
        hrs
    );
    assert_eq!(state_file::format_of(&ours).unwrap(), Format::Slots);
    let mut signer = GuardedSigner::open(key, &ours).unwrap();
    match signed.sign(&mut signer) {
        Err(SignerError::Refused(GuardError::NoSignBytes { hrs: at })) => assert_eq!(at, hrs),
        other => panic!("{hrs} again after the import: {other:?}"),
    }
    let pv = signed_msg_type::PREVOTE;
    let below = Request::Vote(vote(pv, hrs.height - 1, 0, 9));
    assert!(
        matches!(below.sign(&mut signer), Err(SignerError::Refused(_))),
        "a prevote at the height below {hrs} was signed"
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
        match &request {
            Request::Proposal(p) => sign_and_check_proposal(&node, &mut kms, p.clone()).await,
            Request::Vote(v) => sign_and_check_vote(&node, &mut kms, v.clone()).await,
        }
        let text = home.state().expect("tmkms's state file");
        eprintln!("tmkms 0.15.0 state file after {}: {text}", request.hrs());
        import_holds_the_mark(&dir, n, &text, &request);
        damaged_copies_are_refused(&dir, &text);
    }
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
