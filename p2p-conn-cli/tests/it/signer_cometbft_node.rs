//! `p2p-conn signer` as the remote signer of a real CometBFT validator, at
//! every line the suite proves: v0.34.35, v0.37.18, v0.38.26, v0.39.4,
//! v0.40.0 and v1.0.1 (the newest line; v0.40.0 is the newest of the v0
//! lines).
//!
//! Each chain has one validator, made by `cometbft init`, whose key and
//! state files are moved out of the node's home into a folder of the
//! signer's ([`SignedNode`]): the node has `priv_validator_laddr` set and
//! no copy of the key, so every block it commits was signed through
//! `p2p-conn signer`. Over `tcp://` (a secret connection) and over
//! `unix://` (plaintext), each test:
//! - starts the signer, then the node, and waits for 5 blocks;
//! - kills the signer (SIGKILL) and starts another on the same key and
//!   state file: the chain goes on;
//! - kills the node (SIGKILL) and starts it again on the same home: the
//!   second signer, still running, dials again by itself and the chain
//!   goes on;
//! - stops the signer with SIGTERM: it exits 0 with its final stats.
//!
//! The same runs with the validator key imported into a SoftHSM 2 token
//! and named by its PKCS#11 URI (`--key pkcs11:...`), at v0.38.26, v1.0.1
//! and v0.40.0 ([`KeyArg::softhsm`]): each kill of a signer drops its
//! token session, and the next signer logs in afresh.
//!
//! Then, from both signers' `--json` output (every request served, with
//! the signature and the sign bytes): no height, round and step was ever
//! signed with two different sign bytes or signatures across both runs,
//! every signature verifies under the validator's key, and the stats
//! count every request the events show. The state file, read every few
//! milliseconds throughout, only moved up (height, round, step) and always
//! parsed: it is replaced atomically.
//!
//! A node starts only once it has the validator's public key from its
//! signer, so these tests also prove that every line's node accepts the
//! one `PubKeyResponse` the library sends to all lines (field 1, `pub_key`,
//! which v0.34.35 to v0.40.0 read, and fields 3 and 4, `pub_key_bytes` and
//! `pub_key_type`, which v1.0.1 reads), and that its sign-vote and
//! sign-proposal responses are what the node's consensus accepts.
//!
//! [`node_exits_without_signer`] checks the premise of the harness: a node
//! whose signer never comes exits ("can't get pubkey").
//!
//! The tests of a line share its `cometbft` binary, run as `v0_38::NAME`,
//! `v1::NAME`, ... (see `p2p_conn_interop::per_release!`), in parallel
//! like any tests. Blocks come every ~200 ms (`timeout_commit`), and every
//! wait has a deadline. Without the Go toolchain (which builds `cometbft`)
//! each test prints a notice and passes, unless `CI=true`, where it fails.

#![cfg(unix)]

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::cometbft_node::{node_binary, GoVersion, SignedNode, SignerTransport};
use crate::common::process::{Feed, Finished, Proc};
use base64::Engine as _;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use p2p_conn_interop::softhsm::SoftHsm;
use p2p_conn_privval::guard::Hrs;
use p2p_conn_privval::state_file;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

/// Bound on reaching a height (a few blocks at ~200 ms each, plus a node
/// start, or a round lost while the signer was away).
const BLOCKS_LIMIT: Duration = Duration::from_secs(60);

/// Bound on a signer's exit after a signal.
const EXIT_LIMIT: Duration = Duration::from_secs(10);

/// Blocks the chain must add after each disruption.
const MORE_BLOCKS: i64 = 3;

/// How a signer is given the validator's key: the node's
/// `priv_validator_key.json`, or that key in a SoftHSM 2 token.
struct KeyArg {
    /// `--key`: the file's path or the PKCS#11 URI.
    key: OsString,
    /// The token folder the signer opens (its `SOFTHSM2_CONF`).
    hsm: Option<SoftHsm>,
}

impl KeyArg {
    fn file(node: &SignedNode) -> KeyArg {
        KeyArg {
            key: node.key_file.clone().into_os_string(),
            hsm: None,
        }
    }

    /// The node's validator key imported into a token of its own, as
    /// docs/operator-manual.md says (`softhsm2-util --import` of the
    /// seed as PKCS#8); `None` (after a notice) without SoftHSM, unless
    /// `CI=true`.
    fn softhsm(node: &SignedNode, test: &str) -> Option<KeyArg> {
        let hsm = SoftHsm::new(test, &node.signer_dir.join("softhsm"), "validator")?;
        hsm.import_validator_key(&node.key_file, "validator", "01");
        Some(KeyArg {
            key: hsm.uri("validator").into(),
            hsm: Some(hsm),
        })
    }
}

/// Start `p2p-conn signer --json` for `node`'s validator.
fn start_signer(node: &SignedNode, key: &KeyArg) -> Proc {
    start_signer_as(
        node,
        &[&node.signer_dials],
        node.signer_identity.as_deref(),
        key,
    )
}

/// [`start_signer`] dialing each of `dials` with `--identity identity`.
fn start_signer_as(
    node: &SignedNode,
    dials: &[&str],
    identity: Option<&Path>,
    key: &KeyArg,
) -> Proc {
    let mut args: Vec<&OsStr> = vec!["signer".as_ref()];
    for d in dials {
        args.extend([OsStr::new("--node"), OsStr::new(d)]);
    }
    args.extend::<[&OsStr; 9]>([
        "--key".as_ref(),
        key.key.as_os_str(),
        "--state".as_ref(),
        node.state_file.as_os_str(),
        "--chain-id".as_ref(),
        node.chain_id.as_ref(),
        "--json".as_ref(),
        "--stats-every".as_ref(),
        "1".as_ref(),
    ]);
    if let Some(identity) = identity {
        args.extend([OsStr::new("--identity"), identity.as_os_str()]);
    }
    let mut cmd = match &key.hsm {
        Some(hsm) => hsm.command(BIN),
        None => Command::new(BIN),
    };
    cmd.args(&args).stdin(Stdio::piped()).stdout(Stdio::piped());
    Proc::start(&mut cmd, Feed::none())
}

/// Send `signal` to the signer and collect its exit and output.
fn stop_signer(signer: Proc, signal: Signal) -> Finished {
    let pid = Pid::from_raw(i32::try_from(signer.id()).unwrap());
    kill(pid, signal).unwrap_or_else(|e| panic!("{signal} to the signer: {e}"));
    signer.finish_within(EXIT_LIMIT)
}

/// The JSON events a signer printed, one per stdout line (all must parse).
fn events(out: &Finished) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line)
                .unwrap_or_else(|e| panic!("signer stdout line is not JSON ({e}): {line:?}"))
        })
        .collect()
}

fn named<'a>(events: &'a [Value], name: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    events.iter().filter(move |e| e["event"] == name)
}

/// Read the state file every few milliseconds until stopped: every mark
/// seen, in order (a read that fails to parse fails the test).
struct StateWatch {
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<Result<Vec<Hrs>, String>>,
}

impl StateWatch {
    fn start(path: &Path) -> StateWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, path) = (stop.clone(), path.to_path_buf());
        let thread = thread::spawn(move || {
            let mut seen: Vec<Hrs> = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let hrs = state_file::load(&path)
                    .map_err(|e| format!("reading the state file while it is in use: {e}"))?
                    .hrs();
                if seen.last() != Some(&hrs) {
                    seen.push(hrs);
                }
                thread::sleep(Duration::from_millis(5));
            }
            Ok(seen)
        });
        StateWatch { stop, thread }
    }

    fn finish(self) -> Vec<Hrs> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.join().expect("the state watcher panicked") {
            Ok(seen) => seen,
            Err(e) => panic!("{e}"),
        }
    }
}

/// What one signer run signed: `(height, round, step)` to `(sign bytes,
/// signature)`, checked against the other runs' and verified.
#[derive(Default)]
struct Signed {
    by_hrs: HashMap<(i64, i64, i64), (String, String)>,
    signatures: usize,
}

impl Signed {
    /// Take in one run's `served` events: every vote and proposal signature
    /// must verify over its sign bytes, and an HRS signed before must have
    /// the same sign bytes and signature. The number of signatures in this
    /// run.
    fn add(
        &mut self,
        run: &str,
        events: &[Value],
        key: &ed25519_consensus::VerificationKey,
    ) -> usize {
        let mut here = 0;
        for e in named(events, "served") {
            let kind = e["kind"].as_str().unwrap_or_default();
            if !matches!(kind, "vote" | "proposal") {
                continue;
            }
            let (Some(sig), Some(bytes)) = (e["signature"].as_str(), e["sign_bytes"].as_str())
            else {
                assert!(
                    !e["error"].is_null(),
                    "{run}: no signature and no error: {e}"
                );
                continue;
            };
            let hrs = (
                e["height"].as_i64().unwrap(),
                e["round"].as_i64().unwrap(),
                e["step"]
                    .as_i64()
                    .unwrap_or_else(|| panic!("{run}: no step: {e}")),
            );
            let sig_bytes: [u8; 64] = hex::decode(sig)
                .unwrap()
                .try_into()
                .unwrap_or_else(|_| panic!("{run}: a signature of another size: {e}"));
            key.verify(&sig_bytes.into(), &hex::decode(bytes).unwrap())
                .unwrap_or_else(|err| panic!("{run}: the signature does not verify ({err}): {e}"));
            here += 1;
            let new = (bytes.to_string(), sig.to_string());
            match self.by_hrs.get(&hrs) {
                Some(old) => assert_eq!(
                    old, &new,
                    "{run}: height/round/step {hrs:?} signed twice, differently"
                ),
                None => {
                    self.by_hrs.insert(hrs, new);
                }
            }
        }
        self.signatures += here;
        here
    }
}

/// A run's final stats event (after SIGTERM): it must count every request
/// the run's `served` events show.
fn check_final_stats(run: &str, events: &[Value]) -> Value {
    let last = named(events, "stats")
        .last()
        .unwrap_or_else(|| panic!("{run}: no stats event"));
    assert_eq!(last["final"], true, "{run}: the last stats event: {last}");
    let served = named(events, "served").count() as u64;
    assert_eq!(
        last["requests"].as_u64(),
        Some(served),
        "{run}: the final stats count every request served: {last}"
    );
    last.clone()
}

/// The whole scenario of the module docs over `transport`, the key in a
/// SoftHSM 2 token with `pkcs11`.
fn signs_blocks(version: GoVersion, test: &str, transport: SignerTransport, pkcs11: bool) {
    let Some(bin) = node_binary(version, test) else {
        return;
    };
    let node = SignedNode::init(&bin, transport);
    let key_arg = if pkcs11 {
        let Some(key) = KeyArg::softhsm(&node, test) else {
            return;
        };
        key
    } else {
        KeyArg::file(&node)
    };
    assert!(
        !node.home.join("config/priv_validator_key.json").exists(),
        "the validator key must not stay in the node's home"
    );
    let key_bytes = base64::engine::general_purpose::STANDARD
        .decode(&node.validator_pub_key)
        .unwrap();
    let key = ed25519_consensus::VerificationKey::try_from(key_bytes.as_slice()).unwrap();
    let watch = StateWatch::start(&node.state_file);

    // The signer dials first and retries until the node listens.
    let first = start_signer(&node, &key_arg);
    node.start();
    let h1 = node.wait_height(5, BLOCKS_LIMIT);
    let made = node.node_made_key();
    assert!(
        made.as_deref() != Some(node.validator_pub_key.as_str()),
        "the node's own FilePV must not be the validator's key"
    );

    // A signer that dies: another takes over the key and state file.
    let first = stop_signer(first, Signal::SIGKILL);
    assert_eq!(
        first.status.signal(),
        Some(9),
        "the first signer: {first:?}"
    );
    let second = start_signer(&node, &key_arg);
    let h2 = node.wait_height(h1 + MORE_BLOCKS, BLOCKS_LIMIT);

    // A node that dies and comes back: the signer dials again by itself.
    node.restart();
    let h3 = node.wait_height(h2 + MORE_BLOCKS, BLOCKS_LIMIT);
    let second = stop_signer(second, Signal::SIGTERM);
    second.assert_ok("the second signer, stopped by SIGTERM");
    node.kill();
    let marks = watch.finish();

    let (first, second) = (events(&first), events(&second));
    let mut signed = Signed::default();
    let before = signed.add("first signer", &first, &key);
    let after = signed.add("second signer", &second, &key);
    assert!(
        before > 0 && after > 0,
        "both signers signed: {before} and {after}"
    );

    let stats = check_final_stats("second signer", &second);
    let connected = named(&second, "connected").count();
    assert!(
        connected >= 2 && stats["reconnects"].as_u64() >= Some(1),
        "the second signer reconnected after the node restart: {connected} connects; {stats}"
    );
    let start = named(&first, "start").next().expect("a start event");
    assert_eq!(start["pub_key"], node.validator_pub_key.as_str(), "{start}");
    let backend = if pkcs11 { "pkcs11" } else { "file" };
    assert_eq!(start["key"]["backend"], backend, "{start}");

    assert!(
        marks.windows(2).all(|w| w[0] < w[1]),
        "the state file's mark only moves up: {marks:?}"
    );
    let last = *marks.last().expect("the state file was read");
    assert!(
        last.height >= h3,
        "the state file's mark ({last}) is at the height the node reached ({h3}) or above"
    );
    eprintln!(
        "{test}: heights {h1}, {h2}, {h3}; {} signatures ({before} + {after}) at {} \
         height/round/steps; {} marks; final stats of the second signer: {stats}",
        signed.signatures,
        signed.by_hrs.len(),
        marks.len()
    );
}

/// [`signs_blocks`] over `tcp://127.0.0.1:PORT`: a secret connection.
fn signs_blocks_over_tcp(version: GoVersion, test: &str) {
    signs_blocks(version, test, SignerTransport::Tcp, false);
}

/// [`signs_blocks`] over `unix://PATH`: plaintext.
fn signs_blocks_over_unix(version: GoVersion, test: &str) {
    signs_blocks(version, test, SignerTransport::Unix, false);
}

/// A node with `priv_validator_laddr` whose signer never connects exits
/// with an error that says it could not get the public key, and commits
/// nothing: what the harness relies on to start the signer first.
fn node_exits_without_signer(version: GoVersion, test: &str) {
    let Some(bin) = node_binary(version, test) else {
        return;
    };
    let node = SignedNode::init(&bin, SignerTransport::Tcp);
    let started = Instant::now();
    node.start();
    let Some(exit) = node.wait_exit(Duration::from_secs(60)) else {
        node.fail("still running 60 s without a signer");
    };
    let waited = started.elapsed();
    assert!(!exit.status.success(), "{exit:?}");
    let said = format!("{}{}", node.log(), String::from_utf8_lossy(&exit.stderr));
    assert!(
        said.contains("can't get pubkey"),
        "the node's error names the public key: {exit:?}; log:\n{}",
        node.log_tail(10)
    );
    eprintln!("{test}: exited {} after {waited:?}", exit.status);
}

/// [`signs_blocks`] over `noise://` (v0.40.0 only): libp2p Noise, the
/// node's laddr naming the signer's `--identity`, the signer's `--node`
/// naming the node's `node_key.json`.
#[test]
fn v0_40_signs_blocks_over_noise() {
    signs_blocks(
        GoVersion::V040,
        "v0_40_signs_blocks_over_noise",
        SignerTransport::Noise,
        false,
    );
}

/// [`signs_blocks`] with the key in SoftHSM 2: v0.38.26 over `tcp://`.
#[test]
fn v0_38_signs_blocks_with_the_key_in_softhsm() {
    let test = "v0_38_signs_blocks_with_the_key_in_softhsm";
    signs_blocks(GoVersion::V038, test, SignerTransport::Tcp, true);
}

/// [`signs_blocks`] with the key in SoftHSM 2: v1.0.1 over `unix://`.
#[test]
fn v1_signs_blocks_with_the_key_in_softhsm() {
    let test = "v1_signs_blocks_with_the_key_in_softhsm";
    signs_blocks(GoVersion::V1, test, SignerTransport::Unix, true);
}

/// [`signs_blocks`] with the key in SoftHSM 2: v0.40.0 over `noise://`.
#[test]
fn v0_40_signs_blocks_with_the_key_in_softhsm() {
    let test = "v0_40_signs_blocks_with_the_key_in_softhsm";
    signs_blocks(GoVersion::V040, test, SignerTransport::Noise, true);
}

/// Over `noise://` a v0.40.0 node takes no signer but the one its laddr
/// names, and our signer takes no node but the one its `--node` names:
/// with a signer of another identity, and with a signer that expects
/// another node, the node never gets its public key and exits, and the
/// signer says why it could not connect.
#[test]
fn v0_40_noise_identities_are_enforced() {
    let test = "v0_40_noise_identities_are_enforced";
    let Some(bin) = node_binary(GoVersion::V040, test) else {
        return;
    };
    for case in ["another signer", "another node"] {
        let node = SignedNode::init(&bin, SignerTransport::Noise);
        let other = node.signer_dir.join("other_node_key.json");
        let other_id = p2p_conn::Identity::generate();
        p2p_conn::keyfile::save_new(&other_id, &other).unwrap();
        let (dials, identity) = match case {
            "another signer" => (node.signer_dials.clone(), other.clone()),
            _ => {
                let at = node.signer_dials.rsplit_once('@').unwrap().1;
                let peer = other_id.public_key().peer_id();
                (
                    format!("noise://{peer}@{at}"),
                    node.signer_identity.clone().unwrap(),
                )
            }
        };
        let signer = start_signer_as(&node, &[&dials], Some(&identity), &KeyArg::file(&node));
        node.start();
        let Some(exit) = node.wait_exit(Duration::from_secs(60)) else {
            node.fail(&format!("{case}: still running 60 s without its signer"));
        };
        assert!(!exit.status.success(), "{case}: {exit:?}");
        let said = format!("{}{}", node.log(), String::from_utf8_lossy(&exit.stderr));
        assert!(
            said.contains("can't get pubkey"),
            "{case}: the node's error: {exit:?}; log:\n{}",
            node.log_tail(10)
        );
        let out = stop_signer(signer, Signal::SIGTERM);
        let events = events(&out);
        assert_eq!(named(&events, "served").count(), 0, "{case}: {events:?}");
        let why: Vec<String> = named(&events, "connect_failed")
            .chain(named(&events, "disconnected"))
            .map(|e| e.to_string())
            .collect();
        assert!(!why.is_empty(), "{case}: no failed connection: {events:?}");
        if case == "another node" {
            assert_eq!(named(&events, "connected").count(), 0, "{case}: {events:?}");
            // Dials before the node listens are refused; every dial that
            // reached it failed on the node's identity.
            let reached: Vec<&String> = why.iter().filter(|e| !e.contains("refused")).collect();
            assert!(
                !reached.is_empty() && reached.iter().all(|e| e.contains("expected peer")),
                "{case}: {why:?}"
            );
        }
        if case == "another signer" {
            let me = other_id.public_key().peer_id().to_string();
            assert!(
                named(&events, "disconnected")
                    .any(|e| e["hint"].as_str().is_some_and(|h| h.contains(&me))),
                "{case}: no disconnect names our peer ID {me}: {events:?}"
            );
            let made = node.log();
            assert!(
                made.contains("not allowlisted") || made.contains("rejecting"),
                "{case}: the node's log does not name the refusal:\n{}",
                node.log_tail(20)
            );
        }
    }
}

/// One validator on two nodes (a chain whose one validator key is served to
/// both by one `p2p-conn signer` with two `--node`s, over `first` and
/// `second`): the chain commits, each node in turn is killed and started
/// again, and no block carries evidence. From the signer's events: both
/// nodes were served, every height/round/step was signed with one sign
/// bytes and one signature whichever node asked, and every signature
/// verifies.
fn two_nodes_one_signer(
    version: GoVersion,
    test: &str,
    first: SignerTransport,
    second: SignerTransport,
) {
    let Some(bin) = node_binary(version, test) else {
        return;
    };
    let a = SignedNode::init(&bin, first);
    let b = a.twin(&bin, second);
    let key_bytes = base64::engine::general_purpose::STANDARD
        .decode(&a.validator_pub_key)
        .unwrap();
    let key = ed25519_consensus::VerificationKey::try_from(key_bytes.as_slice()).unwrap();
    let identity = a.signer_identity.clone().or(b.signer_identity.clone());
    let signer = start_signer_as(
        &a,
        &[&a.signer_dials, &b.signer_dials],
        identity.as_deref(),
        &KeyArg::file(&a),
    );
    a.start();
    b.start();
    let h1 = a.wait_height(5, BLOCKS_LIMIT);
    b.wait_height(h1, BLOCKS_LIMIT);
    b.restart();
    let h2 = b.wait_height(h1 + MORE_BLOCKS, BLOCKS_LIMIT);
    a.restart();
    let h3 = a.wait_height(h2 + MORE_BLOCKS, BLOCKS_LIMIT);
    b.wait_height(h3, BLOCKS_LIMIT);
    let out = stop_signer(signer, Signal::SIGTERM);
    out.assert_ok("the signer of both nodes, stopped by SIGTERM");

    for node in [&a, &b] {
        for h in 1..=h3 {
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
    let events = events(&out);
    let mut signed = Signed::default();
    let n = signed.add("the signer", &events, &key);
    for node in [&a, &b] {
        let here = named(&events, "served")
            .filter(|e| e["node"] == node.signer_dials.as_str() && e["error"].is_null())
            .count();
        assert!(here > 0, "{} was not served: {events:?}", node.signer_dials);
    }
    let finals = named(&events, "stats")
        .filter(|e| e["final"] == true)
        .count();
    assert_eq!(finals, 2, "one final stats event per node");
    let refused = named(&events, "served")
        .filter(|e| !e["error"].is_null())
        .count();
    // A standby node's refusals (another node got that step first) are
    // flagged and summarised: every one counted in a summary, by node.
    let standby = named(&events, "served")
        .filter(|e| e["standby"] == true)
        .count();
    let summarised: u64 = named(&events, "standby_summary")
        .map(|e| e["refused"].as_u64().unwrap())
        .sum();
    assert_eq!(summarised, standby as u64, "{events:?}");
    // What each node logged of the refusals: one line per refused vote or
    // proposal, and no retry (the refusal is the protocol's error
    // response, which CometBFT does not retry).
    let logged: Vec<String> = [&a, &b]
        .iter()
        .map(|node| {
            // v1.0.1 says "Failed signing vote", the others "failed ...".
            let log = node.log().to_ascii_lowercase();
            let count = |s: &str| log.lines().filter(|l| l.contains(s)).count();
            format!(
                "{} 'failed signing', {} 'exhausted all attempts'",
                count("failed signing"),
                count("exhausted all attempts")
            )
        })
        .collect();
    eprintln!(
        "{test}: heights {h1}, {h2}, {h3}; {n} signatures at {} height/round/steps; \
         {refused} requests refused, {standby} of them as standby; node logs: {}; \
         no evidence in {h3} blocks of either node",
        signed.by_hrs.len(),
        logged.join(" / ")
    );
}

/// [`two_nodes_one_signer`] at v0.40.0 over `tcp://` and `noise://`.
#[test]
fn v0_40_two_nodes_one_signer_tcp_and_noise() {
    two_nodes_one_signer(
        GoVersion::V040,
        "v0_40_two_nodes_one_signer_tcp_and_noise",
        SignerTransport::Tcp,
        SignerTransport::Noise,
    );
}

/// [`two_nodes_one_signer`] at v1.0.1 over `tcp://` and `unix://`.
#[test]
fn v1_two_nodes_one_signer_tcp_and_unix() {
    two_nodes_one_signer(
        GoVersion::V1,
        "v1_two_nodes_one_signer_tcp_and_unix",
        SignerTransport::Tcp,
        SignerTransport::Unix,
    );
}

p2p_conn_interop::per_release! {
    v0_34: V034, v0_37: V037, v0_38: V038, v0_39: V039, v0_40: V040, v1: V1;
    [signs_blocks_over_tcp, signs_blocks_over_unix, node_exits_without_signer]
}
