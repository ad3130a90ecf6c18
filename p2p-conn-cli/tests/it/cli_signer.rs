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

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::process::{run, scratch, Feed, Finished, Proc};
use ed25519_consensus::{Signature, VerificationKey};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use p2p_conn::{keyfile, Identity};
use p2p_conn_interop::privval_peer::validator_key_json;
use p2p_conn_privval::endpoint::{Address, NodeEndpoint, SignerClient};
use p2p_conn_privval::guard::{Hrs, Step};
use p2p_conn_privval::testkit::message::Sum;
use p2p_conn_privval::testkit::{
    encode, Message, MessageDecoder, PingRequest, PubKeyRequest, SignVoteRequest,
};
use p2p_conn_privval::{
    crypto_public_key, signed_msg_type, state_file, vote_sign_bytes, BlockId, Timestamp, Vote,
};

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

/// Bound on a command that exits by itself, and on each wait below.
const LIMIT: Duration = Duration::from_secs(20);

const CHAIN: &str = "test-chain";

fn run_cli(args: &[&str]) -> Finished {
    run(Path::new(BIN), args, LIMIT)
}

/// A validator key file (`priv_validator_key.json`, as FilePV writes it)
/// in `dir`.
fn validator_key(dir: &Path) -> (PathBuf, Identity) {
    let path = dir.join("priv_validator_key.json");
    let mut seed = [0u8; 32];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut seed);
    let (json, id) = validator_key_json(seed);
    std::fs::write(&path, json).unwrap();
    (path, id)
}

/// The text a signer printed on stderr, each line without its leading
/// RFC 3339 time (checked: UTC, milliseconds).
fn untimed(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| {
            let (time, rest) = l
                .split_once(' ')
                .unwrap_or_else(|| panic!("no time: {l:?}"));
            assert!(
                is_rfc3339_utc_ms(time),
                "{l:?} does not start with an RFC 3339 time"
            );
            rest.to_string()
        })
        .collect()
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`, within a day of now.
fn is_rfc3339_utc_ms(t: &str) -> bool {
    let b = t.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let shape = b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z';
    shape && {
        // Days since the epoch from the date (the civil calendar), against
        // the system clock.
        let n = |r: std::ops::Range<usize>| t[r].parse::<i64>().unwrap();
        let (y, m, d) = (n(0..4), n(5..7), n(8..10));
        let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * m + 2) / 5 + d - 1;
        let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
            / 86_400;
        (days - now).abs() <= 1
    }
}

/// Ask a running signer to stop, as an operator's Ctrl-C or service
/// manager would.
fn sigterm(signer: &Proc) {
    let pid = Pid::from_raw(i32::try_from(signer.id()).unwrap());
    kill(pid, Signal::SIGTERM).unwrap();
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

    let out = run_cli(&[
        "signer",
        "--node",
        node,
        "--key",
        key,
        "--state",
        state_s,
        "--chain-id",
        CHAIN,
    ]);
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

    // The node's own key in place of the validator's, and no chain ID: an
    // operator's mistakes, refused before anything is created.
    let node_key = dir.join("node_key.json");
    keyfile::save_new(&Identity::generate(), &node_key).unwrap();
    let nk = node_key.to_str().unwrap();
    for (args, says) in [
        (vec!["--key", nk, "--chain-id", CHAIN], "node_key.json"),
        (vec!["--key", key], "--chain-id"),
        (
            vec!["--key", key, "--chain-id", CHAIN, "--any-chain"],
            "cannot be used with",
        ),
    ] {
        let mut all = vec![
            "signer",
            "--node",
            node,
            "--state",
            state_s,
            "--create-state",
        ];
        all.extend(args);
        let out = run_cli(&all);
        assert!(matches!(out.status.code(), Some(1 | 2)), "{all:?}: {out:?}");
        assert!(
            stderr(&out).contains(says),
            "{all:?} must say {says:?}: {out:?}"
        );
        assert!(!state.exists(), "{all:?} created the state file");
    }

    let noise = format!(
        "noise://{}@127.0.0.1:1",
        Identity::generate().public_key().peer_id()
    );
    let base = [
        "signer",
        "--state",
        state_s,
        "--create-state",
        "--chain-id",
        CHAIN,
    ];
    for (extra, says) in [
        (
            &["--key", key, "--node", "http://127.0.0.1:1"][..],
            "tcp://HOST:PORT, unix://PATH or noise://PEER_ID@IP:PORT",
        ),
        // noise:// (CometBFT v0.40): the signer's identity must be stable,
        // its own, and the address well formed.
        (
            &["--key", key, "--node", &noise][..],
            "noise:// needs --identity",
        ),
        (
            &["--key", key, "--node", &noise, "--identity", key][..],
            "is the validator key",
        ),
        (
            &[
                "--key",
                key,
                "--node",
                &noise,
                "--identity",
                nk,
                "--node-id",
                "f981ab195d664a8e2c6f7d6358628e05a8b5be8d",
            ][..],
            "names the node's peer ID itself",
        ),
        (
            &["--key", key, "--node", node, "--identity", nk][..],
            "--identity needs a tcp:// or noise:// address",
        ),
        (
            &["--key", key, "--node", "noise://127.0.0.1:1"][..],
            "PEER_ID a libp2p peer ID",
        ),
        // Several nodes: each once, and pins in the addresses.
        (
            &[
                "--key",
                key,
                "--node",
                "tcp://127.0.0.1:1",
                "--node",
                "tcp://127.0.0.1:1",
            ][..],
            "is given twice",
        ),
        (
            &[
                "--key",
                key,
                "--node",
                "tcp://127.0.0.1:1",
                "--node",
                node,
                "--node-id",
                "f981ab195d664a8e2c6f7d6358628e05a8b5be8d",
            ][..],
            "pin each node in its own address",
        ),
        (
            &[
                "--key",
                key,
                "--node",
                &noise.replace("127.0.0.1", "localhost"),
            ][..],
            "an IP literal with a port",
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
        "--chain-id",
        CHAIN,
    ];
    let mut first = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let deadline = Instant::now() + LIMIT;
    // Its first line comes once it holds the state file.
    let line = first.next_line(deadline);
    assert!(line.contains(" signer for validator "), "{line}");
    let second = run_cli(&args);
    assert_eq!(second.status.code(), Some(1), "{second:?}");
    let text = stderr(&second);
    assert!(
        text.contains("in use by another signer") && text.lines().count() == 1,
        "{second:?}"
    );
    first.check_running("a second signer was refused");
    sigterm(&first);
    first.finish_ok(deadline);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The node side of a plaintext privval connection, one request at a time.
struct ScriptedNode {
    stream: UnixStream,
    decoder: MessageDecoder,
    pending: Vec<u8>,
}

impl ScriptedNode {
    fn accept(listener: &UnixListener) -> ScriptedNode {
        let (stream, _) = listener.accept().expect("the signer connects");
        stream.set_read_timeout(Some(LIMIT)).unwrap();
        ScriptedNode {
            stream,
            decoder: MessageDecoder::new(),
            pending: Vec::new(),
        }
    }

    fn request(&mut self, sum: Sum) -> Sum {
        self.try_request(sum)
            .expect("the signer hung up instead of answering")
    }

    /// [`Self::request`], or `None` if the connection ends first.
    fn try_request(&mut self, sum: Sum) -> Option<Sum> {
        self.stream.write_all(&encode(&Message::from(sum))).ok()?;
        loop {
            if !self.pending.is_empty() {
                let (used, msg) = self.decoder.feed(&self.pending).unwrap();
                self.pending.drain(..used);
                if let Some(msg) = msg {
                    return Some(msg.sum.expect("a response"));
                }
            }
            let mut buf = [0u8; 4096];
            let n = self.stream.read(&mut buf).ok()?;
            if n == 0 {
                return None;
            }
            self.pending.extend_from_slice(&buf[..n]);
        }
    }

    /// [`Self::sign`], or `None` if the connection ends first.
    fn try_sign(&mut self, chain: &str, vote: &Vote) -> Option<Result<Vote, String>> {
        let mut req = SignVoteRequest::default();
        req.vote = Some(vote.clone());
        req.chain_id = chain.into();
        match self.try_request(Sum::SignVoteRequest(req))? {
            Sum::SignedVoteResponse(r) => Some(match r.error {
                None => Ok(r.vote),
                Some(e) => Err(e.description),
            }),
            other => panic!("expected a SignedVoteResponse, got {other:?}"),
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
    // Content CometBFT never signs, above the mark: refused by name.
    let mut short = prevote(11, 1, 1_000);
    short.block_id.hash.truncate(31);
    let short = conn.sign(CHAIN, &short).unwrap_err();
    assert!(short.contains("block_id.hash"), "{short}");
    let mut late = prevote(11, 1, 1_000);
    late.timestamp.seconds = 253_402_300_800;
    let late = conn.sign(CHAIN, &late).unwrap_err();
    assert!(late.contains("timestamp"), "{late}");
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

    sigterm(&signer);
    let out = signer.finish(Instant::now() + LIMIT);
    out.assert_ok("the signer, stopped by SIGTERM");
    let text = stderr(&out);
    let lines = untimed(&text);
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    assert_eq!(count(&format!("connected to {node}")), 2, "{text}");
    assert!(count("disconnected: ") >= 1, "{text}");
    assert_eq!(count("refused or failed: vote height"), 5, "{text}");
    assert!(count("tests and testnets") >= 1, "{text}");
    let last = lines.iter().rev().find(|l| l.starts_with("final stats: "));
    let last = last.unwrap_or_else(|| panic!("no final stats line: {text}"));
    assert!(
        last.contains("pubkey 1 (0 err")
            && last.contains("vote 7 (5 err")
            && last.contains("ping 1 (0 err")
            && last.contains("connects 2")
            && last.contains("reconnects 1")
            && last.contains("last signed height 10 round 0 step prevote (2) at 20"),
        "{last}"
    );
    assert_eq!(
        lines.last().map(String::as_str),
        Some("stopped by SIGTERM"),
        "{text}"
    );
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
    let want = crypto_public_key::Key::Ed25519(validator.public_key().as_bytes().to_vec());
    assert_eq!(pk.sum, Some(want));
    let signed = client
        .sign_vote(CHAIN, prevote(3, 1, 100), false)
        .await
        .expect("a signed vote");
    let sig: [u8; 64] = signed.signature.clone().try_into().unwrap();
    let vk = VerificationKey::try_from(validator.public_key().as_bytes().as_slice()).unwrap();
    vk.verify(&Signature::from(sig), &vote_sign_bytes(CHAIN, &signed))
        .expect("the signature verifies");
    sigterm(&signer);
    let out = signer.finish(Instant::now() + LIMIT);
    out.assert_ok("the pinned signer, stopped by SIGTERM");
    let events = json_events(&out);
    let connected: Vec<_> = events
        .iter()
        .filter(|e| e["event"] == "connected")
        .collect();
    assert_eq!(connected.len(), 1, "{events:?}");
    assert_eq!(connected[0]["node_id"], node_id.to_string().as_str());
    for e in &events {
        let time = e["time"].as_str().unwrap_or_else(|| panic!("no time: {e}"));
        assert!(is_rfc3339_utc_ms(time), "{e}");
    }
    let stats = events.last().unwrap();
    assert_eq!(stats["event"], "stats", "{stats}");
    let last = &stats["last_signed"];
    assert!(
        last["height"] == 3 && last["round"] == 0 && last["step"] == 2,
        "{stats}"
    );
    assert!(is_rfc3339_utc_ms(last["time"].as_str().unwrap()), "{stats}");
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
        "--any-chain",
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
    sigterm(&signer);
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

/// The state file under a second name (issue #28): a symbolic link and a
/// hard link from another folder are refused at start, saying why, while
/// the first signer runs; and under a mount namespace of the test's own
/// (`unshare -m`, as root), a bind mount of the file is refused as a mount
/// point and a bind mount of its folder meets the first signer's lock.
#[test]
fn a_second_name_for_the_state_file_is_refused() {
    let dir = scratch("signer-names");
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let (key, _) = validator_key(&dir);
    let key = key.to_str().unwrap().to_string();
    let state = dir.join("priv_validator_state.json");
    let node = format!("unix://{}", dir.join("absent.sock").display());
    let signer_args = |state: &str| {
        [
            "signer",
            "--node",
            &node,
            "--key",
            &key,
            "--state",
            state,
            "--chain-id",
            CHAIN,
        ]
        .map(String::from)
    };
    let first_args = {
        let mut a = signer_args(state.to_str().unwrap()).to_vec();
        a.push("--create-state".into());
        a
    };
    let first_args: Vec<&str> = first_args.iter().map(String::as_str).collect();
    let mut first = Proc::spawn(Path::new(BIN), &first_args, Feed::none());
    let deadline = Instant::now() + LIMIT;
    let line = first.next_line(deadline);
    assert!(line.contains(" signer for validator "), "{line}");

    let link = other.join("state-link.json");
    std::os::unix::fs::symlink(&state, &link).unwrap();
    let hard = other.join("state-hard.json");
    for (name, says) in [(&link, "is a symbolic link"), (&hard, "has 2 names")] {
        if name == &hard {
            std::fs::hard_link(&state, &hard).unwrap();
        }
        let args = signer_args(name.to_str().unwrap());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run_cli(&args);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(stderr(&out).contains(says), "{out:?}");
    }
    std::fs::remove_file(&hard).unwrap();

    let mounted_file = other.join("mounted.json");
    std::fs::write(&mounted_file, b"").unwrap();
    let mounted_dir = dir.join("mounted-dir");
    std::fs::create_dir_all(&mounted_dir).unwrap();
    let script = format!(
        // `timeout`: a signer that starts (the check failed) would dial
        // forever; it is stopped and the test fails on its exit code.
        "mount --bind {state} {file} && mount --bind {dir} {mdir} && \
         timeout 5 {bin} {args_file}; echo \"rc=$?\" >&2; \
         timeout 5 {bin} {args_dir}; echo \"rc=$?\" >&2",
        state = state.display(),
        file = mounted_file.display(),
        dir = dir.display(),
        mdir = mounted_dir.display(),
        bin = BIN,
        args_file = signer_args(mounted_file.to_str().unwrap())
            .map(|a| format!("'{a}'"))
            .join(" "),
        args_dir = signer_args(
            mounted_dir
                .join("priv_validator_state.json")
                .to_str()
                .unwrap()
        )
        .map(|a| format!("'{a}'"))
        .join(" "),
    );
    let ns = run(
        Path::new("unshare"),
        &["-m", "--propagation", "private", "sh", "-c", &script],
        LIMIT,
    );
    let text = stderr(&ns);
    if !text.contains("rc=") {
        let why = format!("cannot make a mount namespace (unshare -m needs root): {text}");
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{why}");
        }
        eprintln!("skipping the bind-mount half: {why}");
    } else {
        let runs: Vec<&str> = text.split("rc=").collect();
        assert!(
            runs[0].contains("is a mount point") && runs[1].starts_with('1'),
            "a bind mount of the file: {text}"
        );
        assert!(
            runs[1].contains("in use by another signer") && runs[2].starts_with('1'),
            "a bind mount of the folder: {text}"
        );
    }

    first.check_running("second names were refused");
    sigterm(&first);
    first.finish_ok(deadline);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A long outage is told on a steady schedule: the first three failed
/// dials, then one "still disconnected" line per `--disconnected-every`
/// (text), and a `still_disconnected` event (JSON) with the outage's
/// length, the attempts and the last error.
#[test]
fn a_long_outage_is_told_on_a_steady_schedule() {
    let dir = scratch("signer-outage");
    let (key, _) = validator_key(&dir);
    let state = dir.join("priv_validator_state.json");
    let node = format!("unix://{}", dir.join("absent.sock").display());
    for json in [false, true] {
        let mut args = vec![
            "signer",
            "--node",
            &node,
            "--key",
            key.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
            "--create-state",
            "--chain-id",
            CHAIN,
            "--stats-every",
            "0",
            "--disconnected-every",
            "1",
        ];
        if json {
            args.push("--json");
        }
        let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
        std::thread::sleep(Duration::from_millis(3_600));
        sigterm(&signer);
        let out = signer.finish(Instant::now() + LIMIT);
        out.assert_ok("the disconnected signer, stopped by SIGTERM");
        if json {
            let events = json_events(&out);
            let still: Vec<_> = events
                .iter()
                .filter(|e| e["event"] == "still_disconnected")
                .collect();
            assert!((2..=4).contains(&still.len()), "{events:?}");
            for (e, after) in still.iter().zip(1u64..) {
                let secs = e["disconnected_s"].as_f64().unwrap();
                assert!(secs >= after as f64 && secs < after as f64 + 1.0, "{e}");
                assert!(e["attempts"].as_u64().unwrap() >= 3, "{e}");
                assert!(
                    e["last_error"].as_str().unwrap().contains("No such file"),
                    "{e}"
                );
            }
        } else {
            let lines = untimed(&stderr(&out));
            let tries = lines
                .iter()
                .filter(|l| l.starts_with("cannot connect"))
                .count();
            assert_eq!(tries, 3, "{lines:?}");
            let still: Vec<_> = lines
                .iter()
                .filter(|l| l.starts_with("still disconnected from"))
                .collect();
            assert!((2..=4).contains(&still.len()), "{lines:?}");
            assert!(still[0].contains(" for 1s "), "{lines:?}");
            assert!(still[1].contains(" for 2s "), "{lines:?}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Pointed at an HTTP port (a node's RPC, a common mistake for
/// `priv_validator_laddr`'s), the signer says that the peer answered in
/// HTTP rather than only "length prefix 0x48".
#[test]
fn a_signer_pointed_at_an_http_port_says_so() {
    let dir = scratch("signer-http");
    let (key, _) = validator_key(&dir);
    let state = dir.join("priv_validator_state.json");
    let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = http.local_addr().unwrap();
    // Answers every connection as an HTTP server answers bytes it cannot
    // read, then hangs up.
    std::thread::spawn(move || {
        for mut c in http.incoming().flatten() {
            let mut buf = [0u8; 64];
            let _ = c.read(&mut buf);
            let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let node = format!("tcp://{addr}");
    let args = [
        "signer",
        "--node",
        &node,
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
    std::thread::sleep(Duration::from_millis(1_500));
    sigterm(&signer);
    let out = signer.finish(Instant::now() + LIMIT);
    out.assert_ok("the signer, stopped by SIGTERM");
    let text = stderr(&out);
    let line = text
        .lines()
        .find(|l| l.contains("cannot connect"))
        .unwrap_or_else(|| panic!("no failed dial told: {text}"));
    assert!(line.contains("answered in HTTP"), "{line}");
    assert!(line.contains("priv_validator_laddr"), "{line}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Crash safety: a signer killed (`kill -9`) at a random moment around a
/// signature (before, during or after its save, before or after the
/// response left), then a fresh signer on the same state file asked for a
/// conflicting vote at the same height, round and step. Whenever the
/// first signature reached the node, the conflict is refused and the
/// first vote re-served with its signature; when it did not, whatever the
/// second signer signs, it never signs both blocks. 100 rounds (set
/// P2P_CONN_SOAK for 2000).
fn a_killed_signer_never_signs_a_conflict(state_name: &str) {
    let dir = scratch(&format!("signer-kill9-{state_name}"));
    let (key, _) = validator_key(&dir);
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
    eprintln!("{state_name}: seed {rng}");
    let spawn = |create: bool| {
        let mut args = vec![
            "signer",
            "--node",
            node.as_str(),
            "--key",
            key.to_str().unwrap(),
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
        Proc::spawn(Path::new(BIN), &args, Feed::none())
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
        "{state_name}: {rounds} rounds: the signature reached the node in {reached}, \
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
    a_killed_signer_never_signs_a_conflict("signer.state");
}

#[test]
fn a_killed_signer_never_signs_a_conflict_filepv_file() {
    a_killed_signer_never_signs_a_conflict("priv_validator_state.json");
}

/// `--metrics`: Prometheus text with every request counted per node and
/// kind, the latency quantiles and the slow-signing watch; with a
/// threshold no disk meets (`--slow-sign-ms 0.001`), the 50th signature
/// brings one `slow_signing` event and the metric to 1.
#[test]
fn metrics_count_requests_and_watch_the_median_sign() {
    let dir = scratch("signer-metrics");
    let (key, _) = validator_key(&dir);
    let state = dir.join("signer.state");
    let socket = dir.join("privval.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let node = format!("unix://{}", socket.display());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metrics = format!("127.0.0.1:{port}");
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
        "--json",
        "--stats-every",
        "0",
        "--metrics",
        metrics.as_str(),
        "--slow-sign-ms",
        "0.001",
    ];
    let signer = Proc::spawn(Path::new(BIN), &args, Feed::none());
    let mut conn = ScriptedNode::accept(&listener);
    for h in 1..=55 {
        conn.sign(CHAIN, &prevote(h, 1, h)).expect("signed");
    }
    conn.sign(CHAIN, &prevote(55, 2, 55))
        .expect_err("a conflict");
    let get = |path: &str| {
        let mut tcp = std::net::TcpStream::connect(&metrics).unwrap();
        write!(tcp, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut text = String::new();
        tcp.read_to_string(&mut text).unwrap();
        text
    };
    let text = get("/metrics");
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    for line in [
        format!("p2p_conn_signer_requests_total{{node=\"{node}\",kind=\"vote\"}} 56"),
        format!("p2p_conn_signer_request_errors_total{{node=\"{node}\",kind=\"vote\"}} 1"),
        format!("p2p_conn_signer_connects_total{{node=\"{node}\"}} 1"),
        format!("p2p_conn_signer_connected{{node=\"{node}\"}} 1"),
        "p2p_conn_signer_sign_slow 1".to_string(),
        "p2p_conn_signer_sign_slow_episodes_total 1".to_string(),
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }
    assert!(
        text.contains(&format!(
            "p2p_conn_signer_request_latency_seconds{{node=\"{node}\",kind=\"vote\",quantile=\"0.99\"}}"
        )),
        "{text}"
    );
    assert!(get("/other").starts_with("HTTP/1.1 404"));
    sigterm(&signer);
    let out = signer.finish_within(LIMIT);
    out.assert_ok("the signer");
    let events = json_events(&out);
    assert_eq!(count(&events, "slow_signing"), 1);
    let slow = events
        .iter()
        .find(|e| e["event"] == "slow_signing")
        .unwrap();
    assert_eq!(slow["window"], 50, "{slow}");
    // Told at the 50th signature, not before.
    let served_before = events
        .iter()
        .take_while(|e| e["event"] != "slow_signing")
        .filter(|e| e["event"] == "served")
        .count();
    assert_eq!(served_before, 50);
    std::fs::remove_dir_all(&dir).unwrap();
}
