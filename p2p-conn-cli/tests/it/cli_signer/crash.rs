//! Crash safety: a signer killed at any moment around a signature never
//! lets a second one sign a conflict, on either state file format, with
//! the key in a file or in a PKCS#11 token (SoftHSM 2).

use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use p2p_conn_interop::softhsm::SoftHsm;
use p2p_conn_privval::guard::{Hrs, Step};
use p2p_conn_privval::state_file;

use super::{prevote, sigterm, validator_key, ScriptedNode, BIN, CHAIN, LIMIT};
use crate::common::process::{scratch, Feed, Proc};

/// Crash safety: a signer killed (`kill -9`) at a random moment around a
/// signature (before, during or after its save, before or after the
/// response left), then a fresh signer on the same state file asked for a
/// conflicting vote at the same height, round and step. Whenever the
/// first signature reached the node, the conflict is refused and the
/// first vote re-served with its signature; when it did not, whatever the
/// second signer signs, it never signs both blocks. 100 rounds (set
/// P2P_CONN_SOAK for 2000). With `pkcs11`, the key is imported into a
/// SoftHSM 2 token and named by its URI: each kill also drops the
/// killed signer's session, and the next signer logs in afresh.
fn a_killed_signer_never_signs_a_conflict(state_name: &str, pkcs11: bool) {
    let test = format!(
        "signer-kill9-{state_name}{}",
        if pkcs11 { "-pkcs11" } else { "" }
    );
    let dir = scratch(&test);
    let (key_file, _) = validator_key(&dir);
    let (key, hsm) = if pkcs11 {
        let Some(hsm) = SoftHsm::new(&test, &dir.join("softhsm"), "validator") else {
            return;
        };
        hsm.import_validator_key(&key_file, "validator", "01");
        (hsm.uri("validator"), Some(hsm))
    } else {
        (key_file.to_str().unwrap().to_owned(), None)
    };
    let state = dir.join(state_name);
    let socket = dir.join("privval.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let node = format!("unix://{}", socket.display());
    let rounds = if std::env::var_os("P2P_CONN_SOAK").is_some() {
        2000
    } else {
        100
    };
    let mut rng = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64
        | 1;
    eprintln!("{test}: seed {rng}");
    let spawn = |create: bool| {
        let mut args = vec![
            "signer",
            "--node",
            node.as_str(),
            "--key",
            key.as_str(),
            "--state",
            state.to_str().unwrap(),
            "--chain-id",
            CHAIN,
            "--stats-every",
            "0",
        ];
        if create {
            args.push("--create-state");
        }
        let mut cmd = match &hsm {
            Some(hsm) => hsm.command(BIN),
            None => Command::new(Path::new(BIN)),
        };
        cmd.args(&args).stdin(Stdio::piped()).stdout(Stdio::piped());
        Proc::start(&mut cmd, Feed::none())
    };
    let (mut reached, mut lost, mut second_signed) = (0, 0, 0);
    for round in 0..rounds {
        let height = 1 + round as i64;
        let first = spawn(round == 0);
        let mut conn = ScriptedNode::accept(&listener);
        // xorshift: the kill comes 0 to 5 ms after the request is sent.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let delay = Duration::from_micros(rng % 5000);
        let pid = Pid::from_raw(i32::try_from(first.id()).unwrap());
        let killer = std::thread::spawn(move || {
            std::thread::sleep(delay);
            let _ = kill(pid, Signal::SIGKILL);
        });
        let got = conn.try_sign(CHAIN, &prevote(height, 1, 1_000));
        killer.join().unwrap();
        drop(first.finish_within(LIMIT));
        drop(conn);

        let second = spawn(false);
        let mut conn = ScriptedNode::accept(&listener);
        let conflict = conn
            .try_sign(CHAIN, &prevote(height, 2, 1_000))
            .expect("the second signer answers");
        let again = conn
            .try_sign(CHAIN, &prevote(height, 1, 1_000))
            .expect("the second signer answers");
        match &got {
            Some(Ok(signed)) => {
                reached += 1;
                let why = conflict.expect_err("a conflict after a signature that reached the node");
                assert!(why.contains("conflict"), "round {round}: {why}");
                let again = again.expect("the first vote is re-served");
                assert_eq!(again.signature, signed.signature, "round {round}");
            }
            _ => {
                lost += 1;
                if conflict.is_ok() {
                    second_signed += 1;
                    assert!(again.is_err(), "round {round}: both blocks signed");
                }
            }
        }
        sigterm(&second);
        second.finish_within(LIMIT).assert_ok("the second signer");
        let mark = state_file::load(&state).unwrap();
        assert_eq!(
            mark.hrs(),
            Hrs::new(height, 0, Step::Prevote),
            "round {round}"
        );
    }
    eprintln!(
        "{test}: {rounds} rounds: the signature reached the node in {reached}, \
         not in {lost} (the second signer signed the other block in {second_signed})"
    );
    assert!(
        reached > 0,
        "no round's signature reached the node: no kill came late enough"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_killed_signer_never_signs_a_conflict_slot_file() {
    a_killed_signer_never_signs_a_conflict("signer.state", false);
}

#[test]
fn a_killed_signer_never_signs_a_conflict_filepv_file() {
    a_killed_signer_never_signs_a_conflict("priv_validator_state.json", false);
}

#[test]
fn a_killed_signer_never_signs_a_conflict_pkcs11() {
    a_killed_signer_never_signs_a_conflict("signer.state", true);
}
