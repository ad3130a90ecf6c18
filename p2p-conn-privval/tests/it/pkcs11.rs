//! The PKCS#11 key (feature `pkcs11`) in SoftHSM 2: it signs as the soft
//! key does, its public key is the token's, a key of another type, a wrong
//! PIN, a missing object and a public key the operator does not expect are
//! refused, and a session that drops (every session of the slot closed, the
//! module finalised) is reopened with no height lost or signed twice.
//!
//! SoftHSM reads its configuration (`SOFTHSM2_CONF`, the token folder) once
//! per process, so each test runs its body in a child process of this test
//! binary with its own token folder ([`in_softhsm`]).

use std::path::Path;
use std::process::Command;

use ed25519_dalek::Verifier;
use p2p_conn::Identity;
use p2p_conn_interop::softhsm::{SoftHsm, MODULE};
use p2p_conn_privval::guard::{Hrs, Step};
use p2p_conn_privval::pkcs11::{Pkcs11Key, Pkcs11Uri};
use p2p_conn_privval::{
    signed_msg_type, state_file, vote_sign_bytes, GuardedSigner, Signer, SignerError, ValidatorKey,
};

use crate::common::{temp_dir, vote};

const CHAIN: &str = "test-chain";
const TOKEN: &str = "validator";
/// Set in the child process: the token folder's configuration.
const CHILD: &str = "P2P_CONN_PKCS11_TEST_CONF";

/// Run `body` for test `name` (its path in this binary) in a child process
/// of this test binary whose `SOFTHSM2_CONF` is a token folder of its own,
/// with one token initialised. Returns in the parent once the child passed
/// (or at once, after a notice, without SoftHSM and `CI` unset).
fn in_softhsm(name: &str, body: impl FnOnce(&SoftHsm)) {
    if let Ok(conf) = std::env::var(CHILD) {
        let dir = Path::new(&conf).parent().unwrap().to_path_buf();
        let hsm = SoftHsm {
            conf: conf.into(),
            pin_file: dir.join("pin"),
            token: TOKEN.into(),
        };
        body(&hsm);
        return;
    }
    let dir = temp_dir("pkcs11");
    let Some(hsm) = SoftHsm::new(name, &dir, TOKEN) else {
        return;
    };
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, &hsm.conf)
        .env("SOFTHSM2_CONF", &hsm.conf)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(&format!("test {name} ... ok")),
        "{name} in its SoftHSM child ({}):\n{stdout}\n{stderr}",
        out.status
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn open(uri: &str) -> Result<Pkcs11Key, SignerError> {
    Pkcs11Key::open(&uri.parse::<Pkcs11Uri>()?)
}

fn verify(public: &[u8; 32], message: &[u8], signature: &[u8]) -> bool {
    let vk = ed25519_dalek::VerifyingKey::from_bytes(public).unwrap();
    ed25519_dalek::Signature::from_slice(signature).is_ok_and(|s| vk.verify(message, &s).is_ok())
}

fn ed25519(key: &impl ValidatorKey) -> [u8; 32] {
    match key.public_key().sum {
        Some(p2p_conn_privval::crypto_public_key::Key::Ed25519(k)) => k.try_into().unwrap(),
        other => panic!("not Ed25519: {other:?}"),
    }
}

#[test]
fn signs_as_the_soft_key_with_the_tokens_public_key() {
    in_softhsm(
        "pkcs11::signs_as_the_soft_key_with_the_tokens_public_key",
        |hsm| {
            let soft = Identity::from_seed(&[9; 32]);
            hsm.import_seed(&[9; 32], "validator", "01");
            let mut key = open(&hsm.uri("validator")).unwrap();
            assert_eq!(&ed25519(&key), soft.public_key().as_bytes());
            let message = b"sign bytes of a vote";
            let signature = key.sign(message).unwrap();
            assert!(verify(&ed25519(&key), message, &signature));
            // Ed25519 is deterministic: the token's signature is the soft key's.
            assert_eq!(signature, soft.sign(message).to_vec());
            // By CKA_ID, and with the public key the operator expects.
            let by_id = format!(
                "pkcs11:token={TOKEN};id=%01?module-path={MODULE}&pin-source=file:{}&x-pub-key={}",
                hsm.pin_file.display(),
                base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    soft.public_key().as_bytes()
                )
            );
            assert_eq!(ed25519(&open(&by_id).unwrap()), ed25519(&key));
        },
    );
}

#[test]
fn refuses_another_key_type_a_wrong_pin_a_missing_object_and_another_key() {
    in_softhsm(
        "pkcs11::refuses_another_key_type_a_wrong_pin_a_missing_object_and_another_key",
        |hsm| {
            hsm.import_seed(&[9; 32], "validator", "01");
            hsm.generate_p256("p256", "02");
            let err = open(&hsm.uri("p256")).expect_err("a P-256 key");
            assert!(
                matches!(&err, SignerError::KeyType { key_type, .. } if key_type == "CKK_EC"),
                "{err:?}"
            );
            assert!(err.to_string().contains("CKK_EC"), "{err}");

            let err = open(&hsm.uri("nothing-here")).expect_err("a missing object");
            assert!(err.to_string().contains("no such object"), "{err}");

            let wrong = hsm.pin_file.with_file_name("wrong-pin");
            std::fs::write(&wrong, "999999\n").unwrap();
            let uri = hsm.uri("validator").replace(
                &hsm.pin_file.display().to_string(),
                &wrong.display().to_string(),
            );
            let err = open(&uri).expect_err("a wrong PIN");
            assert!(err.to_string().contains("CKR_PIN_INCORRECT"), "{err}");
            assert!(
                !err.to_string().contains("999999"),
                "the PIN is never told: {err}"
            );

            let other =
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [5u8; 32]);
            let err = open(&format!("{}&x-pub-key={other}", hsm.uri("validator")))
                .expect_err("another public key than expected");
            assert!(
                matches!(err, SignerError::PublicKeyMismatch { .. }),
                "{err:?}"
            );
        },
    );
}

/// Every session of the token's slot closed between two requests
/// (`C_CloseAllSessions`, as a token pulled out does), then the module
/// finalised (an HSM restarted): the next requests are signed all the same,
/// each height once, and the state file holds the last.
#[test]
fn a_dropped_session_is_reopened_without_losing_or_repeating_a_height() {
    in_softhsm(
        "pkcs11::a_dropped_session_is_reopened_without_losing_or_repeating_a_height",
        |hsm| {
            hsm.import_seed(&[9; 32], "validator", "01");
            let key = open(&hsm.uri("validator")).unwrap();
            let public = ed25519(&key);
            let dir = temp_dir("pkcs11-state");
            let state = dir.join("priv_validator_state.json");
            state_file::create_new(&state).unwrap();
            let mut signer = GuardedSigner::open(key, &state)
                .unwrap()
                .with_chain_id(CHAIN);

            let mut sign = |height: i64| {
                let v = vote(signed_msg_type::PREVOTE, height, 0, 1, 100 + height);
                signer.sign_vote(CHAIN, v.clone(), false).map(|signed| {
                    assert!(verify(
                        &public,
                        &vote_sign_bytes(CHAIN, &v),
                        &signed.signature
                    ));
                    signed.signature
                })
            };
            let first = sign(1).unwrap();

            close_all_sessions(hsm);
            // Reopened within the request, or at the next one.
            let second = sign(2)
                .or_else(|_| sign(2))
                .expect("height 2 after the sessions closed");

            let ctx = cryptoki::context::Pkcs11::new(MODULE).unwrap();
            ctx.finalize().unwrap();
            let third = sign(3)
                .or_else(|_| sign(3))
                .expect("height 3 after the module restarted");
            assert!(first != second && second != third);
            // Height 2 again is a regression: refused, never signed twice.
            assert!(sign(2).is_err());
            assert_eq!(signer.state().hrs(), Hrs::new(3, 0, Step::Prevote));
            assert_eq!(
                state_file::load(&state).unwrap().hrs(),
                Hrs::new(3, 0, Step::Prevote)
            );
            drop(signer);
            std::fs::remove_dir_all(&dir).unwrap();
        },
    );
}

/// `C_CloseAllSessions` on the slot of the test token, from this process
/// (where the key under test has its session), through the module's own
/// symbol: `cryptoki` does not expose it.
fn close_all_sessions(hsm: &SoftHsm) {
    let ctx = cryptoki::context::Pkcs11::new(MODULE).unwrap();
    let slot = ctx
        .get_slots_with_token()
        .unwrap()
        .into_iter()
        .find(|s| ctx.get_token_info(*s).unwrap().label() == hsm.token)
        .expect("the test token's slot");
    // SAFETY: the module is the one loaded and initialised in this process,
    // and `C_CloseAllSessions(CK_SLOT_ID) -> CK_RV` is its exported C
    // function of that signature (PKCS#11 v2.40, section 5.6).
    let rv = unsafe {
        let lib = libloading::Library::new(MODULE).unwrap();
        let close: libloading::Symbol<
            unsafe extern "C" fn(std::ffi::c_ulong) -> std::ffi::c_ulong,
        > = lib.get(b"C_CloseAllSessions").unwrap();
        close(slot.id() as std::ffi::c_ulong)
    };
    assert_eq!(rv, 0, "C_CloseAllSessions returned {rv:#x}");
}

/// The user PIN changed on the token while the signer ran, then its
/// session dropped: the login with the old PIN is refused, and no later
/// request tries that PIN again (a token locks a PIN after a few wrong
/// tries); the error says to restart with the right one.
#[test]
fn a_refused_pin_is_not_tried_again() {
    in_softhsm("pkcs11::a_refused_pin_is_not_tried_again", |hsm| {
        hsm.import_seed(&[9; 32], "validator", "01");
        let mut key = open(&hsm.uri("validator")).unwrap();
        key.sign(b"before").unwrap();
        let out = hsm
            .command("pkcs11-tool")
            .args(["--module", MODULE, "--token-label", &hsm.token, "--login"])
            .args(["--pin", p2p_conn_interop::softhsm::PIN, "--change-pin"])
            .args(["--new-pin", "135791"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        // The module restarted: it reads the token (and its new PIN) again.
        cryptoki::context::Pkcs11::new(MODULE)
            .unwrap()
            .finalize()
            .unwrap();
        let first = key.sign(b"after").expect_err("the old PIN");
        assert!(first.to_string().contains("CKR_PIN_INCORRECT"), "{first}");
        let second = key.sign(b"after").expect_err("no second try");
        assert!(second.to_string().contains("not tried again"), "{second}");
    });
}
