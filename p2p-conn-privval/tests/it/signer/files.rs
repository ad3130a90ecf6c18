//! The files' formats: FilePV state files both ways, typed load errors,
//! the validator key file, and the slot file.

use super::*;

/// A state file as CometBFT's FilePV writes it (`cmtjson.MarshalIndent`,
/// two-space indent: height a string, signature base64, signbytes
/// upper-case hex), here for a precommit at 12/0.
#[test]
fn filepv_state_file_round_trips() {
    let v = vote(signed_msg_type::PRECOMMIT, 12, 0, 1, 1_700_000_000);
    let bytes = vote_sign_bytes(CHAIN, &v);
    let sig = vec![0x5a; 64];
    let json = format!(
        "{{\n  \"height\": \"12\",\n  \"round\": 0,\n  \"step\": 3,\n  \"signature\": \"{}\",\n  \"signbytes\": \"{}\"\n}}",
        base64::engine::general_purpose::STANDARD.encode(&sig),
        hex::encode_upper(&bytes)
    );
    let state = state_file::parse(&json).unwrap();
    assert_eq!(state.hrs(), Hrs::new(12, 0, Step::Precommit));
    assert_eq!(state.sign_bytes(), bytes);
    assert_eq!(state.signature(), sig);
    assert_eq!(state_file::to_json(&state), json);
    // `cometbft init`'s initial state.
    let init = "{\n  \"height\": \"0\",\n  \"round\": 0,\n  \"step\": 0\n}";
    assert_eq!(state_file::parse(init).unwrap(), SignState::default());
    assert_eq!(state_file::to_json(&SignState::default()), init);
}

#[test]
fn state_file_load_errors_are_typed() {
    use state_file::StateFileProblem as P;
    let cases: [(&str, P); 6] = [
        ("{", P::NotJson { line: 1, column: 1 }),
        ("[]", P::NotObject),
        (
            r#"{"height":"x","round":0,"step":0}"#,
            P::BadField {
                field: "height",
                expected: "an int64 (a decimal string)",
            },
        ),
        (
            r#"{"height":"1","round":0,"step":4}"#,
            P::BadStep { step: 4 },
        ),
        (
            r#"{"height":"1","round":0,"step":1,"signbytes":"zz"}"#,
            P::BadField {
                field: "signbytes",
                expected: "hex",
            },
        ),
        (
            r#"{"height":"1","round":0,"step":1,"signbytes":"0A"}"#,
            P::SignBytesWithoutSignature,
        ),
    ];
    for (json, want) in cases {
        assert_eq!(state_file::parse(json), Err(want), "{json}");
    }
    let dir = temp_dir("loaderr");
    let path = dir.join("s.json");
    match state_file::load(&path) {
        Err(StateFileError::Read { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound)
        }
        other => panic!("expected StateRead, got {other:?}"),
    }
    std::fs::write(&path, "not json").unwrap();
    assert!(matches!(
        GuardedSigner::open(key(), &path),
        Err(SignerError::State(StateFileError::Invalid { .. }))
    ));
    std::fs::write(&path, vec![b' '; state_file::MAX_STATE_FILE_BYTES + 1]).unwrap();
    assert!(matches!(
        state_file::load(&path),
        Err(StateFileError::TooLarge { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `priv_validator_key.json` as `cometbft init` writes it.
#[test]
fn validator_key_file_loads_and_checks_its_public_parts() {
    let dir = temp_dir("key");
    let id = key();
    let mut raw = [7u8; 32].to_vec();
    raw.extend_from_slice(id.public_key().as_bytes());
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let file = |address: &str, pub_key: &str| {
        format!(
            "{{\n  \"address\": \"{address}\",\n  \"pub_key\": {{\n    \"type\": \"tendermint/PubKeyEd25519\",\n    \"value\": \"{pub_key}\"\n  }},\n  \"priv_key\": {{\n    \"type\": \"tendermint/PrivKeyEd25519\",\n    \"value\": \"{}\"\n  }}\n}}",
            b64(&raw)
        )
    };
    let address = hex::encode_upper(id.node_id().as_bytes());
    let path = dir.join("priv_validator_key.json");
    std::fs::write(&path, file(&address, &b64(id.public_key().as_bytes()))).unwrap();
    let loaded = load_validator_key(&path).unwrap();
    assert_eq!(loaded.public_key(), id.public_key());

    std::fs::write(&path, file(&address, &b64(&[1; 32]))).unwrap();
    assert!(matches!(
        load_validator_key(&path),
        Err(SignerError::KeyMismatch {
            field: "pub_key.value",
            ..
        })
    ));
    std::fs::write(
        &path,
        file(&"AB".repeat(20), &b64(id.public_key().as_bytes())),
    )
    .unwrap();
    assert!(matches!(
        load_validator_key(&path),
        Err(SignerError::KeyMismatch {
            field: "address",
            ..
        })
    ));

    // A node_key.json (priv_key only) is a node's p2p identity, not its
    // validator key: refused, naming it.
    std::fs::write(
        &path,
        format!(
            "{{\"priv_key\":{{\"type\":\"tendermint/PrivKeyEd25519\",\"value\":\"{}\"}}}}",
            b64(&raw)
        ),
    )
    .unwrap();
    let err = load_validator_key(&path).expect_err("a node_key.json is not a validator key");
    assert!(err.to_string().contains("node_key.json"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A `priv_validator_key.json` of another key type than Ed25519 (CometBFT
/// v0.40.0's FilePV signs with secp256k1, secp256k1eth, ML-DSA-65 and
/// BLS12-381 keys too) is refused with an error that names the type.
#[test]
fn a_validator_key_of_another_type_is_refused_by_name() {
    let dir = temp_dir("key-type");
    let path = dir.join("priv_validator_key.json");
    for (pub_type, priv_type) in [
        ("tendermint/PubKeySecp256k1", "tendermint/PrivKeySecp256k1"),
        ("cometbft/PubKeyBls12_381", "cometbft/PrivKeyBls12_381"),
        ("cometbft/PubKeyMlDsa65", "cometbft/PrivKeyMlDsa65"),
    ] {
        std::fs::write(
            &path,
            format!(
                "{{\"address\":\"{}\",\"pub_key\":{{\"type\":\"{pub_type}\",\"value\":\"{}\"}},\
                 \"priv_key\":{{\"type\":\"{priv_type}\",\"value\":\"{}\"}}}}",
                "AB".repeat(20),
                base64::engine::general_purpose::STANDARD.encode([2u8; 33]),
                base64::engine::general_purpose::STANDARD.encode([3u8; 32]),
            ),
        )
        .unwrap();
        let err = load_validator_key(&path).expect_err(priv_type);
        assert!(
            matches!(&err, SignerError::KeyType { key_type, .. } if key_type == priv_type),
            "{priv_type}: {err:?}"
        );
        assert!(err.to_string().contains(priv_type), "{err}");
        assert!(
            !err.to_string().contains("AwMDAwMD"),
            "no key material: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

const FILEPV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/filepv-v1.0.1");
const FILEPV_VOTE_SIG: &str = "7c87114e6bd1bc6f32d7ce38d3b5df9bfd9b925b901e4743920436e696ec0d3e9c88c98205908f2f8e444fe23620a5ea712cc214d521ddf0d2d40ad210b36e0d";
const FILEPV_EXT_SIG: &str = "0431d6f5ec89b3df9f3ea738e0b6424da45f3ee2dde06bb97d2b55a7c57688c4c11b5ea23413440d749eac43afbffeaa1386fcc8ec1ba7b7203c0f547e81350d";

/// The vote FilePV signed for `tests/data/filepv-v1.0.1` (its README).
fn filepv_vote() -> Vote {
    let mut v = Vote::default();
    v.msg_type = signed_msg_type::PRECOMMIT;
    v.height = 12;
    v.block_id.hash = vec![1; 32];
    v.block_id.part_set_header.total = 1;
    v.block_id.part_set_header.hash = vec![0xfe; 32];
    v.timestamp = Timestamp::new(1_700_000_000, 0);
    v.extension = b"vote extension".to_vec();
    v
}

/// Files CometBFT v1.0.1's FilePV wrote: they load, re-serialise byte for
/// byte, and a GuardedSigner started from FilePV's initial state signs
/// FilePV's vote into the same signatures and the same state file.
#[test]
fn filepv_files_move_to_us_and_back() {
    let key_path = Path::new(FILEPV).join("priv_validator_key.json");
    let key = load_validator_key(&key_path).unwrap();
    assert_eq!(key.public_key(), self::key().public_key());

    let filepv_state =
        std::fs::read_to_string(Path::new(FILEPV).join("priv_validator_state.json")).unwrap();
    let parsed = state_file::parse(&filepv_state).unwrap();
    assert_eq!(state_file::to_json(&parsed), filepv_state);
    assert_eq!(parsed.hrs(), Hrs::new(12, 0, Step::Precommit));
    assert_eq!(parsed.sign_bytes(), vote_sign_bytes(CHAIN, &filepv_vote()));
    assert_eq!(hex::encode(parsed.signature()), FILEPV_VOTE_SIG);
    let init =
        std::fs::read_to_string(Path::new(FILEPV).join("priv_validator_state_init.json")).unwrap();
    assert_eq!(state_file::parse(&init).unwrap(), SignState::default());
    assert_eq!(state_file::to_json(&SignState::default()), init);

    // From FilePV's initial state to FilePV's state after the vote.
    let dir = temp_dir("filepv");
    let path = dir.join("priv_validator_state.json");
    std::fs::write(&path, &init).unwrap();
    let mut s = GuardedSigner::open(key.clone(), &path).unwrap();
    let signed = s.sign_vote(CHAIN, filepv_vote(), true).unwrap();
    assert_eq!(hex::encode(&signed.signature), FILEPV_VOTE_SIG);
    assert_eq!(hex::encode(&signed.extension_signature), FILEPV_EXT_SIG);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), filepv_state);

    // From FilePV's state: the same HRS re-served, lower refused.
    drop(s); // one signer per state file
    std::fs::write(&path, &filepv_state).unwrap();
    let mut s = GuardedSigner::open(key, &path).unwrap();
    let mut later = filepv_vote();
    later.timestamp = Timestamp::new(1_700_000_009, 0);
    let again = s.sign_vote(CHAIN, later, true).unwrap();
    assert_eq!(hex::encode(&again.signature), FILEPV_VOTE_SIG);
    assert_eq!(again.timestamp, Timestamp::new(1_700_000_000, 0));
    let mut lower = filepv_vote();
    lower.height = 11;
    assert!(matches!(
        s.sign_vote(CHAIN, lower, true),
        Err(SignerError::Refused(GuardError::HeightRegression { .. }))
    ));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), filepv_state);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// FilePV's own state file (v1.0.1) imported into a slot file and exported
/// back is byte for byte FilePV's, and a signer on the slot file keeps the
/// mark across restarts; a running signer's state file cannot be copied.
#[test]
fn a_mark_moves_between_filepv_and_a_slot_file_unchanged() {
    use p2p_conn_privval::convert_state_file;
    use p2p_conn_privval::state_file::Format;
    let dir = temp_dir("slots");
    let filepv = PathBuf::from(FILEPV).join("priv_validator_state.json");
    let slots = dir.join("signer.state");
    let back = dir.join("priv_validator_state.json");
    let imported = convert_state_file(&filepv, &slots, Format::Slots).unwrap();
    assert_eq!(state_file::format_of(&slots).unwrap(), Format::Slots);
    assert_eq!(std::fs::metadata(&slots).unwrap().len(), 8192);
    assert_eq!(state_file::load(&slots).unwrap(), imported);
    convert_state_file(&slots, &back, Format::FilePv).unwrap();
    assert_eq!(
        std::fs::read(&back).unwrap(),
        std::fs::read(&filepv).unwrap()
    );
    // Never over an existing file.
    assert!(convert_state_file(&filepv, &slots, Format::Slots).is_err());

    // A signer on the slot file: the mark survives a restart, and the file
    // keeps its size and identity (saved in place).
    let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let before = inode(&slots);
    let above = imported.hrs().height + 1;
    {
        let mut s = GuardedSigner::open(key(), &slots).unwrap();
        for h in above..above + 5 {
            s.sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, h, 0, 1, h), false)
                .unwrap();
        }
        // Locked while it runs.
        let copy = dir.join("copy.state");
        assert!(matches!(
            convert_state_file(&slots, &copy, Format::Slots),
            Err(SignerError::StateLocked { .. })
        ));
        assert!(!copy.exists());
    }
    assert_eq!(inode(&slots), before);
    assert_eq!(std::fs::metadata(&slots).unwrap().len(), 8192);
    let mut s = GuardedSigner::open(key(), &slots).unwrap();
    assert_eq!(s.state().hrs(), Hrs::new(above + 4, 0, Step::Prevote));
    assert!(matches!(
        s.sign_vote(
            CHAIN,
            vote(signed_msg_type::PREVOTE, above + 4, 0, 2, 1),
            false
        ),
        Err(SignerError::Refused(GuardError::Conflict { .. }))
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A slot file damaged in both slots is refused at open, naming the
/// problem; one damaged slot falls back to the other.
#[test]
fn a_damaged_slot_file_falls_back_or_is_refused() {
    let dir = temp_dir("slots-damaged");
    let path = dir.join("signer.state");
    state_file::write_new(&path, &Default::default(), state_file::Format::Slots).unwrap();
    {
        let mut s = GuardedSigner::open(key(), &path).unwrap();
        s.sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 3, 0, 1, 3), false)
            .unwrap();
        s.sign_vote(CHAIN, vote(signed_msg_type::PREVOTE, 4, 0, 1, 4), false)
            .unwrap();
    }
    let mut bytes = std::fs::read(&path).unwrap();
    // Save 3 (height 4) is in slot 1: damage it, and height 3 is the mark.
    bytes[4096 + 20] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        GuardedSigner::open(key(), &path).unwrap().state().hrs(),
        Hrs::new(3, 0, Step::Prevote)
    );
    bytes[20] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    match GuardedSigner::open(key(), &path) {
        Err(SignerError::State(StateFileError::Invalid { problem, .. })) => {
            assert!(
                problem.to_string().contains("neither of its two slots"),
                "{problem}"
            )
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
