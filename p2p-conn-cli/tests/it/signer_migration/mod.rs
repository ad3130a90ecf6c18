//! Moving a live validator from tmkms 0.15.0 to `p2p-conn signer` without
//! a double sign, on a real CometBFT v0.38.26 chain (tmkms has no v1.0
//! support): one validator, its key and state moved out of the node's home
//! ([`SignedNode`]), signed by tmkms with its softsign key (the base64 of
//! the seed, as `tmkms softsign import` writes it).
//!
//! As the operator manual orders it: the chain commits blocks under tmkms;
//! tmkms is stopped (SIGTERM once a height is committed; in the second
//! test, tmkms has `max_height` set and is killed with SIGKILL once it has
//! refused the height above); `p2p-conn
//! state import --from <tmkms's state file> --to <ours>`; `p2p-conn
//! signer` starts with tmkms's own key file (`--key`) and the imported
//! state; the chain goes on. Then:
//! - from the chain (RPC `/commit` and `/block`, every height from 1 to
//!   the last): each commit holds the validator's precommit, whose
//!   signature verifies over the sign bytes rebuilt from the commit, and
//!   no block carries evidence;
//! - from tmkms's log (`signed <type>:<block ID prefix> at h/r/s H/R/S`,
//!   one line per signature): it signed no height, round and step for two
//!   blocks;
//! - from our signer's `--json` `served` events (sign bytes and
//!   signature): every signature verifies, no height, round and step was
//!   signed with two sign bytes, and every one is at or above the
//!   imported mark and tmkms's last signature; at the mark itself (a
//!   request tmkms was stopped in the middle of), only for the block
//!   tmkms's state file records. tmkms's state file at the switch is at or
//!   above the highest its log shows.
//!
//! And why the import matters: between the stop and the new start, a
//! precommit for another block at a height tmkms signed (its commit is on
//! the chain) is signed by a `p2p-conn signer --create-state` on a fresh
//! state (two valid signatures at one height, round and step: the double
//! sign), and refused by one on the imported state.
//!
//! The same from FilePV inside the node ([`v0_38_filepv_to_signer`]): the
//! node signs with its own key files for a few blocks, is stopped, its
//! key and state files are moved out and imported, `priv_validator_laddr`
//! is set, the signer starts, then the node; the same checks of the chain,
//! and every signature of ours is above FilePV's last mark.
//!
//! [`cut`]: tmkms stopped in the middle of a request (its mark written,
//! its answer never delivered), and the `state` commands on tmkms's file.
//!
//! Without Go (which builds `cometbft`) or tmkms each test prints a notice
//! and passes, unless `CI=true`.

#![cfg(unix)]

mod cut;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::cli_signer::ScriptedNode;
use crate::common::cometbft_node::{node_binary, GoVersion, SignedNode, SignerTransport};
use crate::common::process::{run, Feed, Finished, Proc};
use base64::Engine as _;
use ed25519_consensus::VerificationKey;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use p2p_conn_interop::process::scratch;
use p2p_conn_interop::tmkms::{tmkms_binary, Home, ProtocolVersion, Settings, Tmkms};
use p2p_conn_privval::guard::{Hrs, Step};
use p2p_conn_privval::{signed_msg_type, state_file, vote_sign_bytes, BlockId, Timestamp, Vote};
use serde_json::Value;

pub(super) const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

/// Bound on reaching a height (blocks every ~200 ms, a node or signer
/// start, a round lost while no signer serves).
pub(super) const BLOCKS_LIMIT: Duration = Duration::from_secs(60);

/// Bound on a process's exit after a signal, and on a command.
pub(super) const EXIT_LIMIT: Duration = Duration::from_secs(10);

/// Blocks under each signer.
pub(super) const BLOCKS: i64 = 5;

/// The validator's Ed25519 seed: the first half of `priv_key.value`.
pub(super) fn seed_of(key_file: &Path) -> [u8; 32] {
    let key: Value = serde_json::from_slice(&std::fs::read(key_file).unwrap()).unwrap();
    let raw = base64::engine::general_purpose::STANDARD
        .decode(key["priv_key"]["value"].as_str().unwrap())
        .unwrap();
    raw[..32].try_into().unwrap()
}

/// `p2p-conn signer` for `node`'s chain, dialing `dials`, with `extra`
/// flags.
pub(super) fn start_signer(
    node: &SignedNode,
    dials: &str,
    key: &Path,
    state: &Path,
    extra: &[&str],
) -> Proc {
    let mut args: Vec<&OsStr> = vec![
        "signer".as_ref(),
        "--node".as_ref(),
        dials.as_ref(),
        "--key".as_ref(),
        key.as_os_str(),
        "--state".as_ref(),
        state.as_os_str(),
        "--chain-id".as_ref(),
        node.chain_id.as_ref(),
    ];
    args.extend(extra.iter().map(OsStr::new));
    Proc::spawn(Path::new(BIN), &args, Feed::none())
}

/// `p2p-conn state import --from FROM --to TO`, as an operator runs it.
fn state_import(from: &Path, to: &Path) -> Finished {
    run(
        Path::new(BIN),
        &[
            OsStr::new("state"),
            "import".as_ref(),
            "--from".as_ref(),
            from.as_os_str(),
            "--to".as_ref(),
            to.as_os_str(),
        ],
        EXIT_LIMIT,
    )
}

fn signal(pid: u32, sig: Signal) {
    kill(Pid::from_raw(i32::try_from(pid).unwrap()), sig)
        .unwrap_or_else(|e| panic!("{sig} to {pid}: {e}"));
}

pub(super) fn stop_signer(signer: Proc) -> Finished {
    signal(signer.id(), Signal::SIGTERM);
    let out = signer.finish_within(EXIT_LIMIT);
    out.assert_ok("p2p-conn signer, stopped by SIGTERM");
    out
}

/// The JSON events a signer printed, one per stdout line.
pub(super) fn events(out: &Finished) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect()
}

/// An RFC 3339 UTC time as CometBFT's RPC prints it
/// (`2026-12-07T22:38:12.497632123Z`, the fraction optional and trimmed).
fn timestamp(text: &str) -> Timestamp {
    let bad = || -> ! { panic!("not an RFC 3339 UTC time: {text:?}") };
    let body = text.strip_suffix('Z').unwrap_or_else(|| bad());
    let (date, time) = body.split_once('T').unwrap_or_else(|| bad());
    let num = |s: &str| s.parse::<i64>().unwrap_or_else(|_| bad());
    let d: Vec<i64> = date.split('-').map(num).collect();
    let (clock, fraction) = time.split_once('.').unwrap_or((time, ""));
    let t: Vec<i64> = clock.split(':').map(num).collect();
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let nanos = if fraction.is_empty() {
        0
    } else {
        num(&format!("{fraction:0<9}"))
    };
    Timestamp::new(days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2], nanos as i32)
}

fn hex_bytes(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().unwrap_or_default()).unwrap()
}

/// The block ID as the RPC prints it (`hash`, `parts`).
fn block_id(v: &Value) -> BlockId {
    let mut id = BlockId::default();
    id.hash = hex_bytes(&v["hash"]);
    id.part_set_header.total = v["parts"]["total"].as_u64().unwrap() as u32;
    id.part_set_header.hash = hex_bytes(&v["parts"]["hash"]);
    id
}

/// The validator's precommit in the commit of height `h`, as signed (its
/// signature in `signature`).
fn committed_precommit(node: &SignedNode, h: i64) -> Vote {
    let commit = node
        .rpc(&format!("/commit?height={h}"))
        .unwrap_or_else(|| node.fail(&format!("no commit at {h}")));
    let commit = &commit["result"]["signed_header"]["commit"];
    let sigs = commit["signatures"].as_array().expect("signatures");
    assert_eq!(sigs.len(), 1, "one validator: {commit}");
    assert_eq!(
        sigs[0]["block_id_flag"], 2,
        "a precommit for the block at {h}: {commit}"
    );
    let mut v = Vote::default();
    v.msg_type = signed_msg_type::PRECOMMIT;
    v.height = h;
    v.round = commit["round"].as_i64().unwrap() as i32;
    v.block_id = block_id(&commit["block_id"]);
    v.timestamp = timestamp(sigs[0]["timestamp"].as_str().unwrap());
    v.validator_address = hex_bytes(&sigs[0]["validator_address"]);
    v.signature = base64::engine::general_purpose::STANDARD
        .decode(sigs[0]["signature"].as_str().unwrap())
        .unwrap();
    v
}

fn verifies(key: &VerificationKey, bytes: &[u8], sig: &[u8]) -> bool {
    let Ok(sig) = <[u8; 64]>::try_from(sig) else {
        return false;
    };
    key.verify(&sig.into(), bytes).is_ok()
}

/// Every height from 1 to `last`: the commit holds the validator's
/// signature, which verifies; no block carries evidence.
pub(super) fn check_chain(node: &SignedNode, last: i64, key: &VerificationKey) {
    for h in 1..=last {
        let v = committed_precommit(node, h);
        assert!(
            verifies(key, &vote_sign_bytes(&node.chain_id, &v), &v.signature),
            "the commit at {h} is not the validator's signature: {v:?}"
        );
        let block = node
            .rpc(&format!("/block?height={h}"))
            .unwrap_or_else(|| node.fail(&format!("no block {h}")));
        let evidence = &block["result"]["block"]["evidence"]["evidence"];
        assert!(
            evidence.as_array().is_none_or(|e| e.is_empty()),
            "block {h} carries evidence: {evidence}"
        );
    }
}

/// tmkms's signatures from its log: height/round/step (FilePV's steps:
/// tmkms's one up) to the block ID prefix, one block per step.
fn tmkms_signed(log: &str) -> BTreeMap<Hrs, String> {
    let mut signed = BTreeMap::new();
    for line in log.lines().filter(|l| l.contains("] signed ")) {
        let (what, at) = line
            .split_once("] signed ")
            .and_then(|(_, rest)| rest.split_once(" at h/r/s "))
            .unwrap_or_else(|| panic!("a tmkms log line of another form: {line}"));
        let prefix = what.split_once(':').map_or("", |(_, p)| p).to_string();
        let hrs: Vec<i64> = at
            .split(' ')
            .next()
            .unwrap()
            .split('/')
            .map(|n| n.parse().unwrap())
            .collect();
        let step = match hrs[2] {
            0 => Step::Propose,
            1 => Step::Prevote,
            _ => Step::Precommit,
        };
        let hrs = Hrs::new(hrs[0], hrs[1] as i32, step);
        if let Some(old) = signed.insert(hrs, prefix.clone()) {
            assert_eq!(old, prefix, "tmkms signed {hrs} for two blocks");
        }
    }
    signed
}

/// Our signer's signatures from its `served` events: each verifies, each
/// height/round/step has one sign bytes.
pub(super) fn ours_signed(events: &[Value], key: &VerificationKey) -> BTreeMap<Hrs, String> {
    let mut signed = BTreeMap::new();
    for e in events.iter().filter(|e| e["event"] == "served") {
        let (Some(sig), Some(bytes)) = (e["signature"].as_str(), e["sign_bytes"].as_str()) else {
            continue;
        };
        let step = match e["step"].as_i64() {
            Some(1) => Step::Propose,
            Some(2) => Step::Prevote,
            Some(3) => Step::Precommit,
            _ => continue,
        };
        assert!(
            verifies(
                key,
                &hex::decode(bytes).unwrap(),
                &hex::decode(sig).unwrap()
            ),
            "a signature that does not verify: {e}"
        );
        let hrs = Hrs::new(
            e["height"].as_i64().unwrap(),
            e["round"].as_i64().unwrap() as i32,
            step,
        );
        if let Some(old) = signed.insert(hrs, bytes.to_string()) {
            assert_eq!(old, bytes, "our signer signed {hrs} with two sign bytes");
        }
    }
    signed
}

/// The block hash in canonical sign bytes (a length-delimited
/// `CanonicalVote`, block ID field 4, or `CanonicalProposal`, field 5;
/// its hash is field 1): empty for nil.
pub(super) fn signed_block_hash(sign_bytes: &[u8], step: Step) -> Vec<u8> {
    fn varint(b: &[u8], at: &mut usize) -> u64 {
        let mut v = 0;
        for shift in (0..64).step_by(7) {
            let byte = b[*at];
            *at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                break;
            }
        }
        v
    }
    /// Field `want` (length-delimited) of the message `b`, if present.
    fn field(b: &[u8], want: u64) -> Option<&[u8]> {
        let mut at = 0;
        while at < b.len() {
            let key = varint(b, &mut at);
            let len = match key & 7 {
                0 => {
                    varint(b, &mut at);
                    0
                }
                1 => 8,
                2 => varint(b, &mut at) as usize,
                5 => 4,
                w => panic!("wire type {w} in canonical sign bytes"),
            };
            if key >> 3 == want && key & 7 == 2 {
                return Some(&b[at..at + len]);
            }
            at += len;
        }
        None
    }
    let mut at = 0;
    let len = varint(sign_bytes, &mut at) as usize;
    let message = &sign_bytes[at..at + len];
    let block_field = if step == Step::Propose { 5 } else { 4 };
    field(message, block_field)
        .and_then(|id| field(id, 1))
        .unwrap_or_default()
        .to_vec()
}

/// The negative check of the module docs, while no signer serves the
/// node: a precommit for another block at height `h` (tmkms's is in the
/// chain's commit) is signed from a fresh state and refused from the
/// imported one. The fresh signature's sign bytes.
fn fresh_state_signs_below_tmkms(
    node: &SignedNode,
    dir: &Path,
    kms_key: &Path,
    imported: &Path,
    h: i64,
    key: &VerificationKey,
) {
    let committed = committed_precommit(node, h);
    let mut conflict = committed.clone();
    conflict.signature = Vec::new();
    conflict.block_id = BlockId::default(); // nil: another block ID
    let mut answers = Vec::new();
    for (name, state, create) in [
        ("fresh", dir.join("fresh.json"), true),
        ("imported", dir.join("imported-copy.state"), false),
    ] {
        if !create {
            // A copy of the import, so that the real one stays untouched.
            let out = state_import(imported, &state);
            out.assert_ok("state import of the import");
        }
        let socket = dir.join(format!("{name}.sock"));
        let listener = UnixListener::bind(&socket).unwrap();
        let dials = format!("unix://{}", socket.display());
        let extra: &[&str] = if create { &["--create-state"] } else { &[] };
        let mut signer = start_signer(node, &dials, kms_key, &state, extra);
        // It says so on stderr once it has connected: the connection waits
        // in the listener's backlog, so the accept returns at once.
        let deadline = Instant::now() + EXIT_LIMIT;
        while !signer.next_line(deadline).contains("connected to") {}
        let mut scripted = ScriptedNode::accept(&listener);
        answers.push(scripted.sign(&node.chain_id, &conflict));
        drop(scripted);
        stop_signer(signer);
    }
    let bytes = vote_sign_bytes(&node.chain_id, &conflict);
    match &answers[0] {
        Ok(v) => assert!(
            verifies(key, &bytes, &v.signature),
            "the fresh state's signature does not verify"
        ),
        Err(e) => panic!("a fresh state refused a precommit at {h}: {e}"),
    }
    assert_ne!(bytes, vote_sign_bytes(&node.chain_id, &committed));
    match &answers[1] {
        Err(e) => assert!(e.contains("height"), "refused, but why? {e}"),
        Ok(v) => panic!("the imported state signed below tmkms's mark: {v:?}"),
    }
    eprintln!(
        "height {h}: a fresh state signed a nil precommit at round {} beside tmkms's \
         committed one (a double sign); the imported state refused it: {}",
        committed.round,
        answers[1].as_ref().unwrap_err()
    );
}

/// The scenario of the module docs; tmkms is stopped with `stop`, once the
/// chain has [`BLOCKS`] blocks, or with `max_height` once it has refused
/// the height above.
fn migrate(test: &str, stop: Signal, max_height: Option<u64>) {
    let (Some(bin), Some(kms_bin)) = (node_binary(GoVersion::V038, test), tmkms_binary(test))
    else {
        return;
    };
    let node = SignedNode::init(&bin, SignerTransport::Tcp);
    let seed = seed_of(&node.key_file);
    let pub_key = base64::engine::general_purpose::STANDARD
        .decode(&node.validator_pub_key)
        .unwrap();
    let key = VerificationKey::try_from(pub_key.as_slice()).unwrap();
    let kms_dir = scratch(&format!("{test}-tmkms"));
    let mut settings = Settings::new(&node.chain_id, &node.laddr, seed, [0x6b; 32]);
    settings.protocol_version = Some(ProtocolVersion::V038);
    settings.max_height = max_height;
    let home = Home::write(&kms_dir, &settings);
    let mut kms = Tmkms::start(&kms_bin, &home);
    node.start();

    // 1. Stop tmkms. With a max_height, once it has refused the next
    // height (which leaves its state file as it was): nothing is in flight.
    if max_height.is_some() {
        let refused = format!("greater than {BLOCKS}");
        if !kms.wait_for_log(&refused, 1, BLOCKS_LIMIT) {
            kms.fail("it never refused the height above its max_height");
        }
    } else {
        node.wait_height(BLOCKS, BLOCKS_LIMIT);
    }
    match stop {
        Signal::SIGKILL => kms.kill(),
        _ => {
            signal(kms.pid().expect("tmkms runs"), stop);
            if kms.wait_exit(EXIT_LIMIT).is_none() {
                kms.fail("still running after SIGTERM");
            }
        }
    }
    let tmkms = tmkms_signed(&kms.log_text());
    let tmkms_last = *tmkms.keys().last().expect("tmkms signed");
    let under_tmkms = node.height().expect("the node's height");
    if let Some(max) = max_height {
        assert_eq!(
            tmkms_last.height, max as i64,
            "tmkms signed up to its max_height"
        );
    }

    // 2. Import its state file.
    let ours = node.signer_dir.join("signer.state");
    let out = state_import(&home.state_file, &ours);
    out.assert_ok("state import from tmkms");
    let said = out.stdout_text();
    assert!(
        said.contains("tmkms consensus state file") && said.contains("signs that block again"),
        "{said}"
    );
    let shown = run(
        Path::new(BIN),
        &[
            OsStr::new("state"),
            "show".as_ref(),
            home.state_file.as_os_str(),
        ],
        EXIT_LIMIT,
    );
    shown.assert_ok("state show of tmkms's file");
    assert!(
        shown.stdout_text().contains("tmkms consensus state file"),
        "{}",
        shown.stdout_text()
    );
    let imported = state_file::load(&ours).unwrap();
    let mark = imported.hrs();
    assert!(
        mark >= tmkms_last,
        "the imported mark {mark} is below the last signature in tmkms's log, {tmkms_last}"
    );

    // Why the import, not a fresh state.
    let check_dir = scratch(&format!("{test}-negative"));
    let signed_height = tmkms_last.height - 1;
    fresh_state_signs_below_tmkms(
        &node,
        &check_dir,
        &home.consensus_key,
        &ours,
        signed_height,
        &key,
    );

    // 3. Our signer, on tmkms's key file and the imported state.
    let signer = start_signer(
        &node,
        &node.signer_dials,
        &home.consensus_key,
        &ours,
        &["--json"],
    );
    let end = node.wait_height(under_tmkms.max(mark.height) + BLOCKS, BLOCKS_LIMIT);
    let out = stop_signer(signer);
    check_chain(&node, end, &key);
    node.kill();
    let ours_signed = ours_signed(&events(&out), &key);
    let first = *ours_signed.keys().next().expect("our signer signed");
    assert!(
        first >= tmkms_last && first >= mark,
        "our first signature {first} is below tmkms's last {tmkms_last} or the mark {mark}"
    );
    // At the mark itself (a request tmkms was stopped in the middle of,
    // whose answer never reached the node; tmkms's last signature is at
    // or below its mark): only the block tmkms's state file records.
    if let Some(bytes) = ours_signed.get(&mark) {
        let recorded = imported.block_id().expect("tmkms's mark records its block");
        assert_eq!(
            signed_block_hash(&hex::decode(bytes).unwrap(), mark.step),
            recorded.hash,
            "{test}: at tmkms's mark {mark}, another block than tmkms's"
        );
        eprintln!("{test}: signed at tmkms's own mark {mark}, for tmkms's block");
    }
    let _ = std::fs::remove_dir_all(&check_dir);
    eprintln!(
        "{test}: {} signatures by tmkms up to {tmkms_last} (height {under_tmkms} reached), \
         imported mark {mark}, {} by p2p-conn signer from {first}; heights 1 to {end} each \
         committed with the validator's verified signature, no evidence",
        tmkms.len(),
        ours_signed.len()
    );
}

/// tmkms stopped by SIGTERM, as a service manager stops it (tmkms 0.15.0
/// has no handler: it ends at once), once a height is committed: between
/// heights, with nothing in flight.
#[test]
fn v0_38_tmkms_to_signer_after_sigterm() {
    migrate("v0_38_tmkms_to_signer_after_sigterm", Signal::SIGTERM, None);
}

/// tmkms with `max_height` set, killed (SIGKILL) once it has refused the
/// height above: the handover at a height chosen in advance. The node's
/// requests at that height fail until `p2p-conn signer` serves them (the
/// node retries a failed request for about 5 s, then its round's timeouts
/// go on).
#[test]
fn v0_38_tmkms_to_signer_at_max_height_after_sigkill() {
    migrate(
        "v0_38_tmkms_to_signer_at_max_height_after_sigkill",
        Signal::SIGKILL,
        Some(BLOCKS as u64),
    );
}

/// `config.toml`'s `priv_validator_laddr` line set to `value` (quoted).
fn set_laddr(node: &SignedNode, value: &str) {
    let path = node.home.join("config/config.toml");
    let toml = std::fs::read_to_string(&path).unwrap();
    let mut found = false;
    let toml: Vec<String> = toml
        .lines()
        .map(|l| {
            if l.starts_with("priv_validator_laddr") {
                found = true;
                format!("priv_validator_laddr = {value:?}")
            } else {
                l.to_string()
            }
        })
        .collect();
    assert!(found, "no priv_validator_laddr line in {path:?}");
    std::fs::write(&path, toml.join("\n") + "\n").unwrap();
}

/// The operator manual's move from FilePV inside the node: the node signs
/// with its own `config/priv_validator_key.json` and
/// `data/priv_validator_state.json` (no `priv_validator_laddr`), is
/// stopped, the two files are moved out, the state imported,
/// `priv_validator_laddr` set, `p2p-conn signer` started, then the node.
#[test]
fn v0_38_filepv_to_signer() {
    let test = "v0_38_filepv_to_signer";
    let Some(bin) = node_binary(GoVersion::V038, test) else {
        return;
    };
    let node = SignedNode::init(&bin, SignerTransport::Tcp);
    let pub_key = base64::engine::general_purpose::STANDARD
        .decode(&node.validator_pub_key)
        .unwrap();
    let key = VerificationKey::try_from(pub_key.as_slice()).unwrap();
    // The validator as `cometbft init` leaves it: its key files in the home.
    let in_home = [
        (
            node.home.join("config/priv_validator_key.json"),
            &node.key_file,
        ),
        (
            node.home.join("data/priv_validator_state.json"),
            &node.state_file,
        ),
    ];
    for (home, signer) in &in_home {
        std::fs::rename(signer, home).unwrap();
    }
    set_laddr(&node, "");
    node.start();
    let under_filepv = node.wait_height(BLOCKS, BLOCKS_LIMIT);

    // 1. Stop the node; 2. move its key and state out; 3. import.
    node.kill();
    for (home, signer) in &in_home {
        std::fs::rename(home, signer).unwrap();
    }
    let filepv_mark = state_file::load(&node.state_file).unwrap();
    assert!(filepv_mark.hrs().height >= under_filepv && !filepv_mark.signature().is_empty());
    let ours = node.signer_dir.join("signer.state");
    state_import(&node.state_file, &ours).assert_ok("state import from FilePV");
    assert_eq!(state_file::load(&ours).unwrap(), filepv_mark);

    // 4. Set priv_validator_laddr; 5. the signer, then the node.
    set_laddr(&node, &node.laddr);
    let signer = start_signer(
        &node,
        &node.signer_dials,
        &node.key_file,
        &ours,
        &["--json"],
    );
    node.start();
    let end = node.wait_height(filepv_mark.hrs().height + BLOCKS, BLOCKS_LIMIT);
    let out = stop_signer(signer);
    check_chain(&node, end, &key);
    node.kill();
    let ours_signed = ours_signed(&events(&out), &key);
    let first = *ours_signed.keys().next().expect("our signer signed");
    assert!(
        first > filepv_mark.hrs(),
        "our first signature {first} is not above FilePV's mark {}",
        filepv_mark.hrs()
    );
    assert_ne!(
        node.node_made_key().as_deref(),
        Some(node.validator_pub_key.as_str()),
        "the node made itself a key of its own, not the validator's"
    );
    eprintln!(
        "{test}: FilePV signed up to {} (height {under_filepv} reached), {} signatures by \
         p2p-conn signer from {first}; heights 1 to {end} each committed with the \
         validator's verified signature, no evidence",
        filepv_mark.hrs(),
        ours_signed.len()
    );
}
