//! `p2p-conn signer` without a CometBFT node: its refusals to start (exit
//! 1), and a scripted node over `unix://` (plaintext privval, written with
//! the library's message codec) that asks for the key, votes, a re-sent
//! vote with a later timestamp, a conflicting vote, a vote for another
//! chain and one below the mark, drops the connection and sees the signer
//! dial again, then stops it with SIGTERM. The human-mode output must say
//! each of those things. Over `tcp://`, the library's node endpoint with
//! pins on both ends (`ID@HOST:PORT`, `--connection-key`), and a node that
//! is not the pinned one, which the signer never serves. The real-node
//! tests are in `signer_cometbft_node.rs`.

#![cfg(unix)]

mod common;

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::process::{run, scratch, Feed, Finished, Proc};
use ed25519_consensus::{Signature, VerificationKey};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use p2p_conn::privval::endpoint::{Address, NodeEndpoint, SignerClient};
use p2p_conn::privval::guard::{Hrs, Step};
use p2p_conn::privval::message::Sum;
use p2p_conn::privval::{
    encode, public_key, signed_msg_type, state_file, vote_sign_bytes, BlockId, Decoder, Message,
    PingRequest, PubKeyRequest, SignVoteRequest, Timestamp, Vote,
};
use p2p_conn::{keyfile, Identity};

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

/// Bound on a command that exits by itself, and on each wait below.
const LIMIT: Duration = Duration::from_secs(20);

const CHAIN: &str = "test-chain";

fn run_cli(args: &[&str]) -> Finished {
    run(Path::new(BIN), args, LIMIT)
}

/// A validator key file (a `node_key.json`-shaped file: `priv_key` only,
/// which `priv_validator_key.json` readers accept) in `dir`.
fn validator_key(dir: &Path) -> (PathBuf, Identity) {
    let path = dir.join("priv_validator_key.json");
    let id = Identity::generate();
    keyfile::save_new(&id, &path).unwrap();
    (path, id)
}

fn stderr(out: &Finished) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A missing state file is refused with a message saying how to get one,
/// and nothing is created; bad flags exit 1 with one line.
#[test]
fn refuses_to_start_without_a_state_file_or_with_bad_flags() {
    let dir = scratch("signer-refusals");
    let (key, _) = validator_key(&dir);
    let state = dir.join("priv_validator_state.json");
    let (key, state_s) = (key.to_str().unwrap(), state.to_str().unwrap());
    let node = "unix:///nonexistent/privval.sock";

    let out = run_cli(&["signer", "--node", node, "--key", key, "--state", state_s]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = stderr(&out);
    assert!(
        text.starts_with("error: state file ")
            && text.contains("--create-state")
            && text.contains("priv_validator_state.json")
            && text.lines().count() == 1,
        "{out:?}"
    );
    assert!(
        !state.exists(),
        "no state file may be created without --create-state"
    );

    let base = ["signer", "--state", state_s, "--create-state"];
    for (extra, says) in [
        (
            &["--key", key, "--node", "http://127.0.0.1:1"][..],
            "tcp://HOST:PORT or unix://PATH",
        ),
        (&["--key", key, "--node", "tcp://"][..], "missing"),
        (
            &[
                "--key",
                key,
                "--node",
                node,
                "--node-id",
                "f981ab195d664a8e2c6f7d6358628e05a8b5be8d",
            ][..],
            "--node-id needs a tcp:// address",
        ),
        (
            &["--key", key, "--node", node, "--stats-every=-1"][..],
            "--stats-every",
        ),
        (
            &[
                "--key",
                key,
                "--node",
                "tcp://f981ab195d664a8e2c6f7d6358628e05a8b5be8d@127.0.0.1:1",
                "--node-id",
                "0000000000000000000000000000000000000001",
            ][..],
            "contradicts",
        ),
        (
            &[
                "--key",
                key,
                "--node",
                "tcp://127.0.0.1:1",
                "--connection-key",
                "/nonexistent/node_key.json",
            ][..],
            "/nonexistent/node_key.json",
        ),
        (
            &[
                "--node",
                "tcp://127.0.0.1:1",
                "--key",
                "/nonexistent/key.json",
            ][..],
            "/nonexistent/key.json",
        ),
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let out = run_cli(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let text = stderr(&out);
        assert!(
            text.starts_with("error: ") && text.contains(says) && text.lines().count() == 1,
            "{args:?}: expected one error line with {says:?}: {out:?}"
        );
    }
    assert!(
        !state.exists(),
        "flags are checked before the state file is made"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A second signer on a state file another signer is using exits 1: two
/// would each keep their own high-water mark.
#[test]
fn a_second_signer_on_one_state_file_is_refused() {
    let dir = scratch("signer-locked");
    let (key, _) = validator_key(&dir);
    let state = dir.join("priv_validator_state.json");
    // Nothing listens there: the first signer keeps dialing.
    let node = format!("unix://{}", dir.join("absent.sock").display());
    let args = [
        "signer",
        "--node",
        node.as_str(),
        "--key",
        key.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--create-state",
    ];
    let mut first = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let deadline = Instant::now() + LIMIT;
    // Its first line comes once it holds the state file.
    let line = first.next_line(deadline);
    assert!(line.starts_with("signer for validator "), "{line}");
    let second = run_cli(&args);
    assert_eq!(second.status.code(), Some(1), "{second:?}");
    let text = stderr(&second);
    assert!(
        text.contains("in use by another signer") && text.lines().count() == 1,
        "{second:?}"
    );
    first.check_running("a second signer was refused");
    let pid = Pid::from_raw(i32::try_from(first.id()).unwrap());
    kill(pid, Signal::SIGTERM).unwrap();
    first.finish_ok(deadline);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The node side of a plaintext privval connection, one request at a time.
struct ScriptedNode {
    stream: UnixStream,
    decoder: Decoder,
    pending: Vec<u8>,
}

impl ScriptedNode {
    fn accept(listener: &UnixListener) -> ScriptedNode {
        let (stream, _) = listener.accept().expect("the signer connects");
        stream.set_read_timeout(Some(LIMIT)).unwrap();
        ScriptedNode {
            stream,
            decoder: Decoder::new(),
            pending: Vec::new(),
        }
    }

    fn request(&mut self, sum: Sum) -> Sum {
        self.stream.write_all(&encode(&Message::from(sum))).unwrap();
        loop {
            if !self.pending.is_empty() {
                let (used, msg) = self.decoder.feed(&self.pending).unwrap();
                self.pending.drain(..used);
                if let Some(msg) = msg {
                    return msg.sum.expect("a response");
                }
            }
            let mut buf = [0u8; 4096];
            let n = self.stream.read(&mut buf).expect("the signer answers");
            assert!(n > 0, "the signer hung up instead of answering");
            self.pending.extend_from_slice(&buf[..n]);
        }
    }

    /// Ask to sign `vote` on `chain`: the signed vote, or the error.
    fn sign(&mut self, chain: &str, vote: &Vote) -> Result<Vote, String> {
        let mut req = SignVoteRequest::default();
        req.vote = Some(vote.clone());
        req.chain_id = chain.into();
        match self.request(Sum::SignVoteRequest(req)) {
            Sum::SignedVoteResponse(r) => match r.error {
                None => Ok(r.vote),
                Some(e) => Err(e.description),
            },
            other => panic!("expected a SignedVoteResponse, got {other:?}"),
        }
    }
}

fn prevote(height: i64, block: u8, seconds: i64) -> Vote {
    let mut id = BlockId::default();
    id.hash = vec![block; 32];
    id.part_set_header.total = 1;
    id.part_set_header.hash = vec![block ^ 0xff; 32];
    let mut ts = Timestamp::default();
    ts.seconds = seconds;
    let mut v = Vote::default();
    v.msg_type = signed_msg_type::PREVOTE;
    v.height = height;
    v.round = 0;
    v.block_id = id;
    v.timestamp = ts;
    v.validator_address = vec![7; 20];
    v
}

/// The scripted exchange of the module docs.
#[test]
fn serves_refuses_and_reconnects_over_unix() {
    let dir = scratch("signer-scripted");
    let (key, id) = validator_key(&dir);
    let state = dir.join("priv_validator_state.json");
    let socket = dir.join("privval.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let node = format!("unix://{}", socket.display());
    let args = [
        "signer",
        "--node",
        node.as_str(),
        "--key",
        key.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--create-state",
        "--chain-id",
        CHAIN,
        "--stats-every",
        "0",
    ];
    let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let vk = VerificationKey::try_from(id.public_key().as_bytes().as_slice()).unwrap();

    let mut conn = ScriptedNode::accept(&listener);
    let mut req = PubKeyRequest::default();
    req.chain_id = CHAIN.into();
    match conn.request(Sum::PubKeyRequest(req)) {
        Sum::PubKeyResponse(r) => {
            assert!(r.error.is_none(), "{r:?}");
            assert_eq!(r.pub_key_bytes, id.public_key().as_bytes(), "{r:?}");
            assert_eq!(r.pub_key_type, "ed25519");
        }
        other => panic!("expected a PubKeyResponse, got {other:?}"),
    }

    let first = conn
        .sign(CHAIN, &prevote(10, 1, 1_000))
        .expect("a new vote is signed");
    let sig: [u8; 64] = first.signature.clone().try_into().unwrap();
    vk.verify(&Signature::from(sig), &vote_sign_bytes(CHAIN, &first))
        .expect("the signature verifies");
    let mark = state_file::load(&state).unwrap();
    assert_eq!(mark.hrs(), Hrs::new(10, 0, Step::Prevote), "{mark:?}");

    // The same vote with a later timestamp: the earlier signature and
    // timestamp are re-served, as FilePV does.
    let again = conn.sign(CHAIN, &prevote(10, 1, 2_000)).expect("re-served");
    assert_eq!(again.signature, first.signature);
    assert_eq!(again.timestamp, first.timestamp);

    let conflict = conn.sign(CHAIN, &prevote(10, 2, 1_000)).unwrap_err();
    assert!(conflict.contains("conflict"), "{conflict}");
    let other_chain = conn
        .sign("other-chain", &prevote(11, 1, 1_000))
        .unwrap_err();
    assert!(other_chain.contains("other-chain"), "{other_chain}");
    let below = conn.sign(CHAIN, &prevote(9, 1, 1_000)).unwrap_err();
    assert!(below.contains("height regression"), "{below}");
    assert_eq!(
        state_file::load(&state).unwrap(),
        mark,
        "refusals leave the mark"
    );

    // Hang up: the signer dials again by itself.
    drop(conn);
    let mut conn = ScriptedNode::accept(&listener);
    assert!(matches!(
        conn.request(Sum::PingRequest(PingRequest::default())),
        Sum::PingResponse(_)
    ));

    let pid = Pid::from_raw(i32::try_from(signer.id()).unwrap());
    kill(pid, Signal::SIGTERM).unwrap();
    let out = signer.finish(Instant::now() + LIMIT);
    out.assert_ok("the signer, stopped by SIGTERM");
    let text = stderr(&out);
    let lines: Vec<&str> = text.lines().collect();
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    assert_eq!(count(&format!("connected to {node}")), 2, "{text}");
    assert!(count("disconnected: ") >= 1, "{text}");
    assert_eq!(count("refused or failed: vote height"), 3, "{text}");
    assert!(count("tests and testnets") >= 1, "{text}");
    let last = lines.iter().rev().find(|l| l.starts_with("final stats: "));
    let last = last.unwrap_or_else(|| panic!("no final stats line: {text}"));
    assert!(
        last.contains("pubkey 1 (0 err")
            && last.contains("vote 5 (3 err")
            && last.contains("ping 1 (0 err")
            && last.contains("connects 2")
            && last.contains("reconnects 1"),
        "{last}"
    );
    assert_eq!(lines.last(), Some(&"stopped by SIGTERM"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The JSON events a signer printed on stdout.
fn json_events(out: &Finished) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect()
}

fn count(events: &[serde_json::Value], name: &str) -> usize {
    events.iter().filter(|e| e["event"] == name).count()
}

/// Over `tcp://` to the library's node endpoint, each end pinning the
/// other: the node requires our `--connection-key`'s ID, we require the
/// node's (`tcp://ID@HOST:PORT`). The key and a vote signature come
/// through. A second node, not the pinned one, is never served: each
/// attempt fails on the ID, and the signer keeps dialing until SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pins_both_ends_over_tcp() {
    let dir = scratch("signer-tcp");
    let (key, validator) = validator_key(&dir);
    let connection = Identity::generate();
    let connection_key = dir.join("connection_key.json");
    keyfile::save_new(&connection, &connection_key).unwrap();
    let node_key = Identity::generate();
    let node_id = node_key.node_id();
    let endpoint = NodeEndpoint::bind(&Address::tcp("127.0.0.1:0"), node_key)
        .await
        .unwrap()
        .expect_signer(connection.node_id());
    let at = endpoint.local_addr().unwrap();
    let client = SignerClient::new(endpoint);

    let state = dir.join("priv_validator_state.json");
    let node = format!("tcp://{node_id}@{at}");
    let (key_s, state_s) = (key.to_str().unwrap(), state.to_str().unwrap());
    let ck = connection_key.to_str().unwrap();
    let args = [
        "signer",
        "--node",
        &node,
        "--key",
        key_s,
        "--state",
        state_s,
        "--create-state",
        "--chain-id",
        CHAIN,
        "--connection-key",
        ck,
        "--json",
    ];
    let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let pk = client.public_key(CHAIN).await.expect("the public key");
    let want = public_key::Sum::Ed25519(validator.public_key().as_bytes().to_vec());
    assert_eq!(pk.sum, Some(want));
    let signed = client
        .sign_vote(CHAIN, prevote(3, 1, 100), false)
        .await
        .expect("a signed vote");
    let sig: [u8; 64] = signed.signature.clone().try_into().unwrap();
    let vk = VerificationKey::try_from(validator.public_key().as_bytes().as_slice()).unwrap();
    vk.verify(&Signature::from(sig), &vote_sign_bytes(CHAIN, &signed))
        .expect("the signature verifies");
    let pid = Pid::from_raw(i32::try_from(signer.id()).unwrap());
    kill(pid, Signal::SIGTERM).unwrap();
    let out = signer.finish(Instant::now() + LIMIT);
    out.assert_ok("the pinned signer, stopped by SIGTERM");
    let events = json_events(&out);
    let connected: Vec<_> = events
        .iter()
        .filter(|e| e["event"] == "connected")
        .collect();
    assert_eq!(connected.len(), 1, "{events:?}");
    assert_eq!(connected[0]["node_id"], node_id.to_string().as_str());
    let start = &events[0];
    assert_eq!(start["event"], "start");
    assert_eq!(
        start["connection_id"],
        connection.node_id().to_string().as_str()
    );

    // Another node at another address, while the signer pins the first.
    let impostor = NodeEndpoint::bind(&Address::tcp("127.0.0.1:0"), Identity::generate())
        .await
        .unwrap();
    let at = impostor.local_addr().unwrap();
    let impostor = SignerClient::new(impostor);
    let node = format!("tcp://{at}");
    let wrong = node_id.to_string();
    let state2 = dir.join("state2.json");
    let state2_s = state2.to_str().unwrap();
    let args = [
        "signer",
        "--node",
        &node,
        "--node-id",
        &wrong,
        "--key",
        key_s,
        "--state",
        state2_s,
        "--create-state",
        "--json",
    ];
    let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    // The node side completes each handshake (it pins nobody); the signer
    // then hangs up, so every ping fails: one per dial.
    let mut refused = 0;
    let deadline = Instant::now() + LIMIT;
    while refused < 2 {
        assert!(Instant::now() < deadline, "the signer did not dial twice");
        if impostor.ping().await.is_err() {
            refused += 1;
        } else {
            panic!("the signer answered a node it does not pin");
        }
    }
    let pid = Pid::from_raw(i32::try_from(signer.id()).unwrap());
    kill(pid, Signal::SIGTERM).unwrap();
    let out = signer.finish(Instant::now() + LIMIT);
    out.assert_ok("the signer pinned to another node, stopped by SIGTERM");
    let events = json_events(&out);
    assert_eq!(count(&events, "connected"), 0, "{events:?}");
    let mismatch = events
        .iter()
        .filter(|e| e["event"] == "connect_failed")
        .filter(|e| e["error"].as_str().is_some_and(|s| s.contains("mismatch")))
        .count();
    assert!(mismatch >= 1, "{events:?}");
    let last = events.last().unwrap();
    assert!(
        last["event"] == "stats" && last["final"] == true && last["connects"] == 0,
        "{last}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
