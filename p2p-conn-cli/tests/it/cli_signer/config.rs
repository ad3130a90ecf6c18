//! `p2p-conn signer --config FILE`: two chains, each with its own key,
//! guard and state file, served to two scripted nodes from one process;
//! a config with a mistake refused at start with its file and line; the
//! config and the chain flags refused together; a chain whose key is in a
//! PKCS#11 token beside one whose key is a file.

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use ed25519_consensus::{Signature, VerificationKey};
use p2p_conn::Identity;
use p2p_conn_interop::softhsm::SoftHsm;
use p2p_conn_privval::guard::{Hrs, Step};
use p2p_conn_privval::{state_file, vote_sign_bytes};

use super::alerts::{metrics_addr, scrape, value};
use super::{prevote, run_cli, sigterm, stderr, validator_key, ScriptedNode, BIN, LIMIT};
use crate::common::process::{scratch, Feed, Proc};

/// One chain of a test config: its folder, key, state file and node
/// socket.
pub(super) struct TestChain {
    pub(super) id: String,
    pub(super) key: PathBuf,
    pub(super) identity: Identity,
    pub(super) state: PathBuf,
    pub(super) socket: PathBuf,
}

impl TestChain {
    pub(super) fn new(dir: &Path, id: &str) -> TestChain {
        let folder = dir.join(id);
        std::fs::create_dir(&folder).unwrap();
        // Whatever the umask: the signer refuses a state folder others
        // may write.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700)).unwrap();
        let (key, identity) = validator_key(&folder);
        TestChain {
            id: id.into(),
            key,
            identity,
            state: folder.join("state"),
            socket: folder.join("privval.sock"),
        }
    }

    /// Its `[[chain]]` table, with `create_state`.
    pub(super) fn table(&self) -> String {
        format!(
            "[[chain]]\nid = \"{}\"\nkey = \"{}\"\nstate = \"{}\"\ncreate_state = true\n\n",
            self.id,
            self.key.display(),
            self.state.display()
        )
    }

    /// A `[[node]]` table for its node at `socket`.
    pub(super) fn node(&self, socket: &Path) -> String {
        format!(
            "[[node]]\naddress = \"unix://{}\"\nchain = \"{}\"\n\n",
            socket.display(),
            self.id
        )
    }

    fn verifies(&self, chain: &str, vote: &p2p_conn_privval::Vote) -> bool {
        let vk =
            VerificationKey::try_from(self.identity.public_key().as_bytes().as_slice()).unwrap();
        let sig: [u8; 64] = vote.signature.clone().try_into().unwrap();
        vk.verify(&Signature::from(sig), &vote_sign_bytes(chain, vote))
            .is_ok()
    }
}

/// Write `text` as the config `name` in `dir` (mode 0600).
pub(super) fn write_config(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    super::write_private(&path, text.as_bytes());
    path
}

/// Two chains, two keys, two nodes, one process: each node's votes are
/// signed with its chain's key and move its chain's state file only; a
/// vote for the other chain is refused on each; `/metrics` tells each
/// chain's series apart.
#[test]
fn one_config_serves_two_chains_each_with_its_key_and_state() {
    let dir = scratch("signer-config-two");
    let a = TestChain::new(&dir, "chain-a");
    let b = TestChain::new(&dir, "chain-b");
    let (la, lb) = (
        UnixListener::bind(&a.socket).unwrap(),
        UnixListener::bind(&b.socket).unwrap(),
    );
    let metrics = metrics_addr();
    let text = format!(
        "stats_every = 0\n\n[metrics]\nlisten = \"{metrics}\"\n\n{}{}{}{}",
        a.table(),
        b.table(),
        a.node(&a.socket),
        b.node(&b.socket)
    );
    let config = write_config(&dir, "signer.toml", &text);
    let signer = Proc::spawn(
        Path::new(BIN),
        &["signer", "--config", config.to_str().unwrap()],
        Feed::none(),
    );
    let mut na = ScriptedNode::accept(&la);
    let mut nb = ScriptedNode::accept(&lb);

    let va = na
        .sign(&a.id, &prevote(5, 1, 1_000))
        .expect("chain a signs");
    let vb = nb
        .sign(&b.id, &prevote(9, 2, 1_000))
        .expect("chain b signs");
    assert!(a.verifies(&a.id, &va), "chain a's vote under chain a's key");
    assert!(b.verifies(&b.id, &vb), "chain b's vote under chain b's key");
    assert!(!b.verifies(&a.id, &va), "two keys, not one");
    assert_eq!(
        state_file::load(&a.state).unwrap().hrs(),
        Hrs::new(5, 0, Step::Prevote)
    );
    assert_eq!(
        state_file::load(&b.state).unwrap().hrs(),
        Hrs::new(9, 0, Step::Prevote)
    );
    // Each node is served by its own chain's signer only.
    let cross = na.sign(&b.id, &prevote(20, 1, 1_000)).unwrap_err();
    assert!(cross.contains(&b.id), "{cross}");
    let cross = nb.sign(&a.id, &prevote(20, 1, 1_000)).unwrap_err();
    assert!(cross.contains(&a.id), "{cross}");
    // Chain a's mark does not hold chain b back: each has its own guard.
    nb.sign(&b.id, &prevote(10, 1, 1_000))
        .expect("chain b goes on");
    na.sign(&a.id, &prevote(6, 1, 1_000))
        .expect("chain a goes on");

    // Answered requests are counted once their response is written.
    na.settle();
    nb.settle();
    let scraped = scrape(&metrics);
    for (c, height, node) in [(&a, 6.0, &a.socket), (&b, 10.0, &b.socket)] {
        let chain = format!("chain_id=\"{}\"", c.id);
        assert_eq!(
            value(
                &scraped,
                &format!("p2p_conn_signer_last_signed_height{{{chain}}}")
            ),
            height,
            "{scraped}"
        );
        let votes = format!(
            "p2p_conn_signer_requests_total{{{chain},node=\"unix://{}\",kind=\"vote\"}}",
            node.display()
        );
        // Two signed and one refused (the other chain's) on each node.
        assert_eq!(value(&scraped, &votes), 3.0, "{scraped}");
        let other = if node == &a.socket {
            &b.socket
        } else {
            &a.socket
        };
        let crossed = format!("{{{chain},node=\"unix://{}\"", other.display());
        assert!(
            !scraped.contains(&crossed),
            "the other chain's node under {chain}:\n{scraped}"
        );
    }

    sigterm(&signer);
    let out = signer.finish(Instant::now() + LIMIT);
    out.assert_ok("the signer, stopped by SIGTERM");
    let text = stderr(&out);
    for c in [&a, &b] {
        assert!(
            text.contains(&format!("({}); state {}", c.id, c.state.display())),
            "a start line per chain: {text}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A config with a mistake stops the start: exit 1, one line naming the
/// file and the line; nothing is created. `--config` with a chain flag is
/// refused by the command line.
#[test]
fn a_malformed_config_is_refused_with_its_line() {
    let dir = scratch("signer-config-bad");
    let a = TestChain::new(&dir, "chain-a");
    let good = format!("{}{}", a.table(), a.node(&a.socket));
    for (mistake, line, says) in [
        (
            good.replace("\nstate = ", "\nstat = "),
            4,
            "unknown field `stat`",
        ),
        (
            good.replace("chain = \"chain-a\"", "chain = \"chain-x\""),
            9,
            "chain \"chain-x\"",
        ),
        (good.replace("unix://", "udp://"), 8, "tcp://HOST:PORT"),
        (
            good.replace("create_state = true", "create_state = yes"),
            5,
            "string values must be quoted",
        ),
    ] {
        let config = write_config(&dir, "bad.toml", &mistake);
        let out = run_cli(&["signer", "--config", config.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{mistake}: {out:?}");
        let text = stderr(&out);
        let want = format!("error: {}, line {line}: ", config.display());
        assert!(
            text.starts_with(&want) && text.contains(says) && text.lines().count() == 1,
            "expected {want:?} and {says:?}: {text}\n{mistake}"
        );
        assert!(!a.state.exists(), "nothing is created: {mistake}");
    }
    let config = write_config(&dir, "good.toml", &good);
    let out = run_cli(&[
        "signer",
        "--config",
        config.to_str().unwrap(),
        "--state",
        a.state.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("cannot be used with"), "{out:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A config's `key` takes what `--key` takes: one chain with its key in a
/// file, the other with its key imported into a SoftHSM 2 token and named
/// by its PKCS#11 URI; each node's vote is signed with its chain's key,
/// and the start event names each key's backend.
#[test]
fn a_config_chain_may_keep_its_key_in_a_pkcs11_token() {
    let test = "a_config_chain_may_keep_its_key_in_a_pkcs11_token";
    let dir = scratch("signer-config-pkcs11");
    let a = TestChain::new(&dir, "chain-a");
    let b = TestChain::new(&dir, "chain-b");
    let Some(hsm) = SoftHsm::new(test, &dir.join("softhsm"), "validator") else {
        return;
    };
    hsm.import_validator_key(&b.key, "chain-b", "02");
    std::fs::remove_file(&b.key).unwrap();
    let (la, lb) = (
        UnixListener::bind(&a.socket).unwrap(),
        UnixListener::bind(&b.socket).unwrap(),
    );
    let b_table = b.table().replace(
        &format!("key = \"{}\"", b.key.display()),
        &format!("key = \"{}\"", hsm.uri("chain-b")),
    );
    let text = format!(
        "stats_every = 0\njson = true\n\n{}{b_table}{}{}",
        a.table(),
        a.node(&a.socket),
        b.node(&b.socket)
    );
    let config = write_config(&dir, "signer.toml", &text);
    let mut cmd = hsm.command(BIN);
    cmd.args(["signer", "--config", config.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let signer = Proc::start(&mut cmd, Feed::none());
    let mut na = ScriptedNode::accept(&la);
    let mut nb = ScriptedNode::accept(&lb);
    let va = na
        .sign(&a.id, &prevote(5, 1, 1_000))
        .expect("chain a signs");
    let vb = nb
        .sign(&b.id, &prevote(9, 2, 1_000))
        .expect("chain b signs");
    assert!(a.verifies(&a.id, &va), "chain a's vote under its file key");
    assert!(b.verifies(&b.id, &vb), "chain b's vote under its token key");

    sigterm(&signer);
    let out = signer.finish(Instant::now() + LIMIT);
    out.assert_ok("the signer, stopped by SIGTERM");
    let backends: Vec<(String, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "start")
        .map(|e| {
            (
                e["chain_id"].as_str().unwrap_or_default().to_owned(),
                e["key"]["backend"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        backends,
        [
            ("chain-a".to_owned(), "file".to_owned()),
            ("chain-b".to_owned(), "pkcs11".to_owned())
        ],
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
