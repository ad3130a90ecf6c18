//! Moving from tmkms 0.15.0 when tmkms is stopped in the middle of a
//! request, on a real one-validator CometBFT v0.38.26 chain. tmkms writes
//! its state file before it answers, so such a stop leaves a mark the node
//! got no signature for, and the node asks again. Here tmkms dials the
//! node over `unix://` (plaintext) through a proxy of the test, which
//! passes every message on until the node asks for the step the test
//! picked: it passes that request to tmkms, waits for tmkms's answer (so
//! tmkms's state file is at that step), keeps the answer from the node,
//! and hangs up on both; tmkms is then killed. `p2p-conn state import`,
//! then `p2p-conn signer` on the import: the node's retry of that very
//! request is signed (tmkms's block, the signature tmkms made), and the
//! chain goes on: every height committed with the validator's signature,
//! no evidence, nothing signed below the mark.
//!
//! Also `p2p-conn state import`, `show` and `export` on tmkms's file (no
//! Go or tmkms needed).

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{
    check_chain, events, ours_signed, seed_of, signed_block_hash, start_signer, state_import,
    stop_signer, BIN, BLOCKS, BLOCKS_LIMIT, EXIT_LIMIT,
};
use crate::common::cometbft_node::{node_binary, GoVersion, SignedNode, SignerTransport};
use crate::common::process::run;
use base64::Engine as _;
use ed25519_consensus::VerificationKey;
use p2p_conn_interop::process::scratch;
use p2p_conn_interop::tmkms::{tmkms_binary, Home, ProtocolVersion, Settings, Tmkms};
use p2p_conn_privval::guard::{Hrs, Step};
use p2p_conn_privval::testkit::message::Sum;
use p2p_conn_privval::testkit::{Message, MessageDecoder};
use p2p_conn_privval::{proposal_sign_bytes, signed_msg_type, state_file, vote_sign_bytes};

/// The height from which the proxy holds a request back: the chain has
/// [`BLOCKS`] blocks by then.
const CUT_HEIGHT: i64 = BLOCKS + 1;

/// One privval message from `stream`: its bytes as sent, and what it holds.
/// `None` when the connection ends (or fails) first.
fn read_message(
    stream: &mut UnixStream,
    pending: &mut Vec<u8>,
    decoder: &mut MessageDecoder,
) -> Option<(Vec<u8>, Sum)> {
    loop {
        if !pending.is_empty() {
            let (used, msg) = decoder.feed(pending).expect("a privval message");
            let raw: Vec<u8> = pending.drain(..used).collect();
            if let Some(Message { sum: Some(sum), .. }) = msg {
                return Some((raw, sum));
            }
        }
        let mut buf = [0u8; 4096];
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
        }
    }
}

/// One direction of the proxy: a stream and what was read of it.
struct Side {
    stream: UnixStream,
    pending: Vec<u8>,
    decoder: MessageDecoder,
}

impl Side {
    fn new(stream: UnixStream) -> Side {
        Side {
            stream,
            pending: Vec::new(),
            decoder: MessageDecoder::new(),
        }
    }

    fn read(&mut self) -> Option<(Vec<u8>, Sum)> {
        read_message(&mut self.stream, &mut self.pending, &mut self.decoder)
    }
}

/// The proxy: tmkms dials `listener`, and each of its connections is
/// joined to a new one to the node's socket (retried until the node
/// listens, within [`BLOCKS_LIMIT`]). The node asks, tmkms answers, one
/// message at a time; the first request `hold` picks is passed to tmkms,
/// and its answer kept from the node and sent to `held` with the request,
/// and both connections end.
fn proxy(
    listener: UnixListener,
    node_socket: &Path,
    hold: fn(&Sum) -> bool,
    held: mpsc::Sender<(Sum, Sum)>,
) {
    loop {
        let Ok((kms, _)) = listener.accept() else {
            return;
        };
        let deadline = Instant::now() + BLOCKS_LIMIT;
        let node = loop {
            match UnixStream::connect(node_socket) {
                Ok(s) => break s,
                Err(e) if Instant::now() > deadline => panic!("the node never listened: {e}"),
                // The node was just spawned: its socket comes within a
                // second or two; polled, as nothing tells when.
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        let (mut kms, mut node) = (Side::new(kms), Side::new(node));
        while let Some((raw, request)) = node.read() {
            if kms.stream.write_all(&raw).is_err() {
                break;
            }
            let Some((raw, answer)) = kms.read() else {
                break;
            };
            if hold(&request) {
                let _ = held.send((request, answer));
                return;
            }
            if node.stream.write_all(&raw).is_err() {
                break;
            }
        }
    }
}

/// The height, round and step of a sign request, and its sign bytes on
/// `chain`.
fn asked(request: &Sum, chain: &str) -> (Hrs, Vec<u8>) {
    match request {
        Sum::SignVoteRequest(r) => {
            let v = r.vote.as_ref().expect("a vote");
            let step = Step::of_vote_type(v.msg_type).expect("a vote type");
            (Hrs::new(v.height, v.round, step), vote_sign_bytes(chain, v))
        }
        Sum::SignProposalRequest(r) => {
            let p = r.proposal.as_ref().expect("a proposal");
            (
                Hrs::new(p.height, p.round, Step::Propose),
                proposal_sign_bytes(chain, p),
            )
        }
        other => panic!("held something else than a sign request: {other:?}"),
    }
}

/// The signature in tmkms's answer, which must be one.
fn answered(answer: &Sum) -> Vec<u8> {
    match answer {
        Sum::SignedVoteResponse(r) if r.error.is_none() => r.vote.signature.clone(),
        Sum::SignedProposalResponse(r) if r.error.is_none() => r.proposal.signature.clone(),
        other => panic!("tmkms did not sign the held request: {other:?}"),
    }
}

/// The scenario of the module docs, the proxy holding back the request
/// `hold` picks.
fn stopped_mid_request(test: &str, hold: fn(&Sum) -> bool) {
    let (Some(bin), Some(kms_bin)) = (node_binary(GoVersion::V038, test), tmkms_binary(test))
    else {
        return;
    };
    let node = SignedNode::init(&bin, SignerTransport::Unix);
    let seed = seed_of(&node.key_file);
    let pub_key = base64::engine::general_purpose::STANDARD
        .decode(&node.validator_pub_key)
        .unwrap();
    let key = VerificationKey::try_from(pub_key.as_slice()).unwrap();
    let kms_dir = scratch(&format!("{test}-tmkms"));
    // In the signer folder: a Unix socket path must stay short.
    let proxy_socket = node.signer_dir.join("kms.sock");
    let listener = UnixListener::bind(&proxy_socket).unwrap();
    let node_socket = node
        .laddr
        .strip_prefix("unix://")
        .expect("a unix:// laddr")
        .to_owned();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || proxy(listener, Path::new(&node_socket), hold, tx));
    let kms_addr = format!("unix://{}", proxy_socket.display());
    let mut settings = Settings::new(&node.chain_id, &kms_addr, seed, [0x6b; 32]);
    settings.protocol_version = Some(ProtocolVersion::V038);
    let home = Home::write(&kms_dir, &settings);
    node.start();
    let mut kms = Tmkms::start(&kms_bin, &home);

    // tmkms signs up to the held request, whose answer never reaches the
    // node; then it is killed.
    let Ok((request, answer)) = rx.recv_timeout(BLOCKS_LIMIT) else {
        kms.fail("the node never asked for the step to hold back");
    };
    kms.kill();
    let (held, sign_bytes) = asked(&request, &node.chain_id);
    let tmkms_signature = answered(&answer);
    assert!(held.height >= CUT_HEIGHT);

    let ours = node.signer_dir.join("signer.state");
    let out = state_import(&home.state_file, &ours);
    out.assert_ok("state import from tmkms");
    let imported = state_file::load(&ours).unwrap();
    assert_eq!(imported.hrs(), held, "tmkms's mark is the held request's");
    assert_eq!(
        imported.block_id().map(|id| id.hash.clone()),
        Some(signed_block_hash(&sign_bytes, held.step)),
        "tmkms's mark records the held request's block"
    );

    let signer = start_signer(
        &node,
        &node.signer_dials,
        &home.consensus_key,
        &ours,
        &["--json"],
    );
    let end = node.wait_height(held.height + BLOCKS, BLOCKS_LIMIT);
    let out = stop_signer(signer);
    check_chain(&node, end, &key);
    node.kill();
    let ours_signed = ours_signed(&events(&out), &key);
    let (&first, first_bytes) = ours_signed.iter().next().expect("our signer signed");
    assert_eq!(first, held, "our first signature is not the held request's");
    assert_eq!(
        first_bytes,
        &hex::encode_upper(&sign_bytes),
        "at {held}, other sign bytes than the node's first request"
    );
    let served = events(&out)
        .into_iter()
        .find(|e| e["event"] == "served" && e["signature"].is_string())
        .expect("a served signature");
    assert_eq!(
        served["signature"].as_str().unwrap(),
        hex::encode(&tmkms_signature),
        "at {held}: not the signature tmkms made"
    );
    eprintln!(
        "{test}: tmkms answered {held} but the node never got it; p2p-conn signer signed the \
         node's retry with tmkms's very signature, then {} more; heights 1 to {end} each \
         committed with the validator's verified signature, no evidence",
        ours_signed.len() - 1
    );
}

/// A prevote: the vote a one-validator chain cannot go on without.
#[test]
fn v0_38_tmkms_stopped_mid_prevote() {
    stopped_mid_request("v0_38_tmkms_stopped_mid_prevote", |r| {
        matches!(r, Sum::SignVoteRequest(r) if r.vote.as_ref().is_some_and(|v| {
            v.height >= CUT_HEIGHT && v.msg_type == signed_msg_type::PREVOTE
        }))
    });
}

/// A proposal: the validator proposes every height of its chain.
#[test]
fn v0_38_tmkms_stopped_mid_proposal() {
    stopped_mid_request("v0_38_tmkms_stopped_mid_proposal", |r| {
        matches!(r, Sum::SignProposalRequest(r) if r.proposal.as_ref().is_some_and(|p| {
            p.height >= CUT_HEIGHT
        }))
    });
}

/// `p2p-conn state ARGS` (paths), which must succeed: its stdout.
fn state_cmd(args: &[&OsStr]) -> String {
    let mut all = vec![OsStr::new("state")];
    all.extend_from_slice(args);
    let out = run(Path::new(BIN), &all, EXIT_LIMIT);
    out.assert_ok(&format!("state {args:?}"));
    out.stdout_text()
}

/// What `state import`, `show` and `export` say of the block a tmkms mark
/// records (tmkms 0.15.0's file after a precommit for a block at 5/0):
/// the import keeps it and says the signer signs that block again at
/// exactly 5/0/precommit; `show` prints it; the export to FilePV's format
/// leaves it out and says FilePV refuses that step.
#[test]
fn state_commands_tell_what_becomes_of_tmkms_s_block() {
    let dir = scratch("state-tmkms-block");
    let hash = "3F9A0C4D6E2B81F57A09C3D4E5F60718293A4B5C6D7E8F901A2B3C4D5E6F7081";
    let tmkms = dir.join("tmkms.json");
    std::fs::write(
        &tmkms,
        format!(
            r#"{{"height":"5","round":"0","step":2,"block_id":{{"hash":"{hash}","parts":{{"total":1,"hash":"{hash}"}}}}}}"#
        ),
    )
    .unwrap();
    let ours = dir.join("signer.state");
    let (from, to) = (OsStr::new("--from"), OsStr::new("--to"));
    let said = state_cmd(&[
        "import".as_ref(),
        from,
        tmkms.as_os_str(),
        to,
        ours.as_os_str(),
    ]);
    let hrs = "height 5 round 0 step precommit (3)";
    assert!(
        said.contains(&format!("mark {hrs}, tmkms's block {hash}")),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "at exactly {hrs} the signer signs that block again"
        )),
        "{said}"
    );
    let shown = state_cmd(&["show".as_ref(), ours.as_os_str()]);
    assert!(shown.contains(&format!("tmkms's block {hash}")), "{shown}");
    let filepv = dir.join("priv_validator_state.json");
    let said = state_cmd(&[
        "export".as_ref(),
        from,
        ours.as_os_str(),
        to,
        filepv.as_os_str(),
    ]);
    assert!(
        said.contains(&format!("FilePV will refuse {hrs} itself")),
        "{said}"
    );
    let exported = state_file::load(&filepv).unwrap();
    assert_eq!(exported.hrs(), Hrs::new(5, 0, Step::Precommit));
    assert_eq!(exported.block_id(), None);
    assert!(!std::fs::read_to_string(&filepv).unwrap().contains("block"));
    let _ = std::fs::remove_dir_all(&dir);
}
