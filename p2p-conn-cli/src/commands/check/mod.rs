//! `p2p-conn check`: check a list of seeds and peers, as a chain registry
//! (`chain.json`), a node's `config.toml` or the command line gives them.
//!
//! For each entry: can it be reached, is the node the ID the entry names,
//! is it on the expected network, what version (and release line) it
//! runs, how long the handshake took, and for a seed, whether it answers a
//! `PexRequest`, with how many addresses, and whether it hangs up after
//! answering as a node in seed mode does. Exit 0 when every entry passes,
//! 10 when any fails, 1 for a usage error (a file that does not exist or
//! does not parse).
//!
//! # Design
//! Each distinct (address, ID) is visited once, by the probe `crawl` visits with
//! ([`crate::visit::probe::probe`]): the same handshake, NodeInfo rules,
//! announced NodeInfo (listen address `0.0.0.0:0`, which no node adds to
//! its book) and single `PexRequest`, so `check` is as polite as `crawl`:
//! one connection per entry, a seed asked once, a peer never asked
//! (hung up after its NodeInfo, before ours is sent), nothing
//! unsolicited. A seed's connection is watched for [`SEED_WATCH`] after
//! its answer to see whether it hangs up.
//!
//! # Not provided
//! - Host names are resolved by the system; one address per entry is
//!   dialed (the first the resolver gives).
//! - No RPC checks (`rpc`, `rest`, `grpc` in chain.json are not read).
//! - `config.toml` has no chain ID: give `--network` to check it.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use p2p_conn::{keyfile, Identity, NodeId};
use serde_json::{json, Value};
use tokio::task::JoinSet;

use crate::conn;
use crate::error::CliError;
use crate::output::plural::count;
use crate::release_line::ReleaseLine;
use crate::visit::probe;
use crate::visit::report::{Report, Status, Target};
use inputs::read_input;
pub use inputs::{Entry, Role};

mod inputs;

/// How long a seed's connection is watched after its answer: a node in
/// seed mode hangs up at once (CometBFT's `pex.Reactor.Receive`: it sends
/// the addresses, then `FlushStop` and `StopPeerGracefully`).
pub const SEED_WATCH: Duration = Duration::from_secs(2);

/// Exit code when an entry fails.
pub const FAILED: u8 = 10;

#[derive(clap::Args)]
pub struct CheckArgs {
    /// What to check: chain.json files (chain registry: peers.seeds,
    /// peers.persistent_peers), config.toml files (seeds,
    /// persistent_peers) and peer addresses (ID@HOST:PORT). An argument
    /// that exists, contains `/` or ends in .json or .toml is a file,
    /// which must exist and parse
    #[arg(required_unless_present = "seed")]
    inputs: Vec<String>,
    /// A seed to check (ID@HOST:PORT; repeatable): asked for addresses
    #[arg(long, value_name = "ID@HOST:PORT")]
    seed: Vec<String>,
    /// The chain ID every node must be on [default: chain.json's chain_id]
    #[arg(long)]
    network: Option<String>,
    /// Bound on one entry's visit (connect to hang-up), in seconds
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// Most entries checked at once
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// One JSON document instead of the table
    #[arg(long)]
    json: bool,
    /// node_key.json to authenticate with (default: a fresh identity)
    #[arg(long)]
    key: Option<std::path::PathBuf>,
}

/// What was learned of one entry.
#[derive(Debug)]
pub struct Outcome {
    pub entry: Entry,
    /// The probe's report (`None`: the entry did not parse; not dialed).
    pub report: Option<Report>,
    /// Why the entry fails; empty when it passes.
    pub problems: Vec<String>,
}

/// The problems of `entry` given what the probe found (`None`: not
/// dialed, `parse` says why) and the network it must be on.
pub fn judge(entry: &Entry, report: Option<&Report>, network: Option<&str>) -> Vec<String> {
    let mut p = Vec::new();
    let Some(r) = report else {
        return p;
    };
    // Worded by stage, as the exit codes of `probe` name them
    // (docs/operator-manual.md, "Exit codes"): connect, handshake, timeout.
    match &r.status {
        Status::Refused(d) => p.push(format!("unreachable: connect failed: {d}")),
        // Their details are the connect's and the handshake's own errors,
        // most of which name the stage already (`connect failed: ...`,
        // `handshake failed: ...`, `authentication failed: ...`); the
        // others (`I/O error: the peer reset ...`) get it in front.
        Status::ConnectFailed(d) => p.push(staged("connect failed", &["connect failed"], d)),
        Status::HandshakeFailed(d) => p.push(staged(
            "handshake failed",
            &["handshake failed", "authentication failed"],
            d,
        )),
        Status::Timeout if r.node_id.is_none() => p.push("unreachable: timeout".into()),
        Status::Timeout => p.push("timeout after the handshake".into()),
        Status::NodeInfoRefused(d) => p.push(format!("NodeInfo refused: {d}")),
        Status::IdMismatch { .. } => p.push(format!(
            "wrong node ID: the entry names {}, but the node at {} is {}",
            entry.id,
            entry.address,
            r.node_id.map_or("?".into(), |i| i.to_string())
        )),
        Status::OtherNetwork => p.push(format!(
            "wrong network: the node is on {}, not {}",
            r.info.as_ref().map_or("?", |i| i.network.as_str()),
            network.unwrap_or("?")
        )),
        Status::NoPex => p.push("not a seed: the node has no PEX channel".into()),
        Status::NoAnswer(d) => p.push(format!("not a seed: no PEX answer ({d})")),
        Status::PexViolation(d) => p.push(format!("bad PEX answer: {d}")),
        Status::Ok | Status::Duplicate => {}
    }
    if entry.role == Role::Seed && r.status == Status::Ok {
        match r.answered {
            Some(0) => p.push("seed answered with no addresses".into()),
            Some(_) if r.closed_after_answer.is_none() => p.push(format!(
                "not a seed: answered PEX but stayed connected {} s after (a node in seed mode hangs up)",
                SEED_WATCH.as_secs()
            )),
            _ => {}
        }
    }
    p
}

/// `unreachable: DETAIL`, with `stage` in front of a detail that does not
/// start with one of `named` already.
fn staged(stage: &str, named: &[&str], detail: &str) -> String {
    if named.iter().any(|n| detail.starts_with(n)) {
        format!("unreachable: {detail}")
    } else {
        format!("unreachable: {stage}: {detail}")
    }
}

/// Why an entry cannot be dialed as written, if it cannot.
fn parse(entry: &Entry) -> Result<(NodeId, String), String> {
    if entry.id.is_empty() {
        return Err("no node ID: an entry needs ID@HOST:PORT".into());
    }
    let id = entry
        .id
        .parse::<NodeId>()
        .map_err(|e| format!("bad node ID {:?}: {e}", entry.id))?;
    if !conn::is_host_port(&entry.address) {
        return Err(format!(
            "bad address {:?}: want HOST:PORT (a port from 1 to 65535)",
            entry.address
        ));
    }
    Ok((id, entry.address.clone()))
}

pub fn run(args: CheckArgs) -> ExitCode {
    match check(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(FAILED),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.stage().code())
        }
    }
}

/// Runs the check; `Ok(false)` when an entry failed.
fn check(args: CheckArgs) -> Result<bool, CliError> {
    if args.concurrency == 0 {
        return Err(CliError::usage("--concurrency must be at least 1"));
    }
    let timeout = conn::seconds("--timeout", args.timeout)?;
    let mut entries = Vec::new();
    let mut chain_id = None;
    for input in &args.inputs {
        let list = read_input(input, Role::Peer)?;
        if let (Some(a), Some(b)) = (&chain_id, &list.chain_id) {
            if a != b && args.network.is_none() {
                return Err(CliError::usage(format!(
                    "the files name two chain IDs, {a} and {b}: give --network"
                )));
            }
        }
        chain_id = chain_id.or(list.chain_id);
        entries.extend(list.entries);
    }
    for s in &args.seed {
        entries.extend(read_input(s, Role::Seed)?.entries);
    }
    if entries.is_empty() {
        return Err(CliError::usage("nothing to check: the lists are empty"));
    }
    let network = args.network.clone().or(chain_id);
    let identity = match &args.key {
        Some(p) => keyfile::load(p)?,
        None => Identity::generate(),
    };
    eprintln!("checker id {}", identity.node_id());
    let rt = conn::runtime()?;
    let outcomes = rt.block_on(visit_all(
        entries,
        identity,
        network.clone(),
        timeout,
        args.concurrency,
    ));
    rt.shutdown_background();
    let passed = outcomes.iter().all(|o| o.problems.is_empty());
    if args.json {
        println!("{}", json_of(&outcomes, network.as_deref()));
    } else {
        print!("{}", table(&outcomes, network.as_deref()));
    }
    Ok(passed)
}

/// Visits every distinct (address, ID) once, at most `concurrency` at a
/// time, a seed's visit serving a peer entry of the same node too.
async fn visit_all(
    entries: Vec<Entry>,
    identity: Identity,
    network: Option<String>,
    timeout: Duration,
    concurrency: usize,
) -> Vec<Outcome> {
    let identity = Arc::new(identity);
    // (address, ID) -> the role it is visited as (seed if any entry is).
    let mut visits: HashMap<(String, NodeId), Role> = HashMap::new();
    let parsed: Vec<Result<(NodeId, String), String>> = entries.iter().map(parse).collect();
    let mut order = Vec::new();
    for (e, p) in entries.iter().zip(&parsed) {
        if let Ok((id, addr)) = p {
            let key = (addr.clone(), *id);
            match visits.get_mut(&key) {
                Some(role) => {
                    if e.role == Role::Seed {
                        *role = Role::Seed;
                    }
                }
                None => {
                    visits.insert(key.clone(), e.role);
                    order.push(key);
                }
            }
        }
    }
    let mut reports: HashMap<(String, NodeId), Report> = HashMap::new();
    let mut tasks: JoinSet<((String, NodeId), Report)> = JoinSet::new();
    let mut queue = order.into_iter();
    loop {
        while tasks.len() < concurrency {
            let Some(key) = queue.next() else {
                break;
            };
            let role = visits[&key];
            let identity = Arc::clone(&identity);
            let network = network.clone();
            tasks.spawn(async move {
                let target = Target {
                    addr: key.0.clone(),
                    id: Some(key.1),
                    depth: 0,
                };
                let watch = if role == Role::Seed {
                    SEED_WATCH
                } else {
                    Duration::ZERO
                };
                // The probe's own bound covers connect, handshake and the
                // answer; this one the whole visit.
                let limit = 2 * timeout + watch + Duration::from_secs(2);
                let opts = probe::ProbeOptions {
                    watch,
                    ..probe::ProbeOptions::new(timeout)
                };
                // A seed is asked; a peer, once checked, is not.
                let visit = probe::probe(&target, &identity, &opts, |id, info| {
                    probe::expected(key.1, network.as_deref(), role == Role::Seed, id, info)
                });
                let report = tokio::time::timeout(limit, visit)
                    .await
                    .unwrap_or_else(|_| Report::failed(Status::Timeout));
                (key, report)
            });
        }
        match tasks.join_next().await {
            Some(Ok((key, report))) => {
                reports.insert(key, report);
            }
            Some(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Some(Err(_)) => {}
            None => break,
        }
    }
    entries
        .into_iter()
        .zip(parsed)
        .map(|(entry, p)| match p {
            Err(why) => Outcome {
                entry,
                report: None,
                problems: vec![why],
            },
            Ok((id, addr)) => {
                let report = reports.get(&(addr, id)).cloned();
                let problems = match &report {
                    Some(r) => judge(&entry, Some(r), network.as_deref()),
                    None => vec!["not checked".into()],
                };
                Outcome {
                    entry,
                    report,
                    problems,
                }
            }
        })
        .collect()
}

const NONE: &str = "-";

/// A report's version and release line, as probe names lines.
fn version(r: Option<&Report>) -> (Option<String>, Option<String>) {
    let Some(v) = r.and_then(|r| r.info.as_ref()).map(|i| i.version.clone()) else {
        return (None, None);
    };
    let line = ReleaseLine::of(&v);
    let line = (!line.lines.is_empty()).then(|| line.lines.join(" or "));
    (Some(v), line)
}

fn ms(r: Option<&Report>) -> Option<f64> {
    r?.handshake_ms()
}

/// The table: one row per entry, its verdict first, the reasons last.
pub fn table(outcomes: &[Outcome], network: Option<&str>) -> String {
    let head = [
        "VERDICT", "ROLE", "ADDRESS", "NODE ID", "NETWORK", "VERSION", "LINE", "HS MS", "PEX",
        "WHY",
    ];
    let mut rows: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for o in outcomes {
        let r = o.report.as_ref();
        let info = r.and_then(|r| r.info.as_ref());
        let (ver, line) = version(r);
        let pex = match (o.entry.role, r.and_then(|r| r.answered)) {
            (Role::Seed, Some(n)) => format!(
                "{n}{}",
                if r.is_some_and(|r| r.closed_after_answer.is_some()) {
                    ", hung up"
                } else {
                    ""
                }
            ),
            _ => NONE.into(),
        };
        rows.push(vec![
            if o.problems.is_empty() { "ok" } else { "FAIL" }.into(),
            o.entry.role.name().into(),
            if o.entry.address.is_empty() {
                NONE.into()
            } else {
                o.entry.address.clone()
            },
            // Who answered (beside its network and version); the entry's
            // own ID where no node answered.
            match r.and_then(|r| r.node_id) {
                Some(id) => id.to_string()[..12].to_string(),
                None if o.entry.id.is_empty() => NONE.into(),
                None => o.entry.id.get(..12).unwrap_or(&o.entry.id).to_string(),
            },
            info.map_or(NONE.into(), |i| i.network.clone()),
            ver.unwrap_or_else(|| NONE.into()),
            line.unwrap_or_else(|| NONE.into()),
            ms(r).map_or(NONE.into(), |m| format!("{m:.1}")),
            pex,
            o.problems.join("; "),
        ]);
    }
    let mut out = crate::output::columns::render(&rows);
    let failed = outcomes.iter().filter(|o| !o.problems.is_empty()).count();
    out.push_str(&format!(
        "{}, {} ok, {failed} failed; network {}\n",
        count(outcomes.len() as u64, "entry", "entries"),
        outcomes.len() - failed,
        network.unwrap_or("not checked (give --network)")
    ));
    out
}

/// The same as one JSON document.
pub fn json_of(outcomes: &[Outcome], network: Option<&str>) -> Value {
    let entries: Vec<Value> = outcomes
        .iter()
        .map(|o| {
            let r = o.report.as_ref();
            let info = r.and_then(|r| r.info.as_ref());
            let (ver, line) = version(r);
            json!({
                "source": o.entry.source,
                "role": o.entry.role.name(),
                "id": o.entry.id,
                "address": o.entry.address,
                "provider": o.entry.provider,
                "ok": o.problems.is_empty(),
                "problems": o.problems,
                "status": r.map(|r| r.status.name()),
                "detail": r.and_then(|r| r.status.detail()),
                "node_id": r.and_then(|r| r.node_id).map(|i| i.to_string()),
                "network": info.map(|i| &i.network),
                "moniker": info.map(|i| &i.moniker),
                "version": ver,
                "release_line": line,
                "handshake_ms": ms(r),
                "pex_addrs": r.and_then(|r| r.answered),
                "hung_up_after_answer_ms": r
                    .and_then(|r| r.closed_after_answer)
                    .map(|d| (d.as_secs_f64() * 1e4).round() / 10.0),
            })
        })
        .collect();
    let failed = outcomes.iter().filter(|o| !o.problems.is_empty()).count();
    json!({
        "network": network,
        "entries": entries,
        "ok": failed == 0,
        "failed": failed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed() -> Entry {
        Entry {
            source: "t".into(),
            role: Role::Seed,
            id: "ade4d8bc8cbe014af6ebdf3cb7b1e9ad36f412c0".into(),
            address: "1.2.3.4:26656".into(),
            provider: None,
        }
    }

    #[test]
    fn a_seed_must_answer_with_addresses_and_hang_up() {
        let mut r = Report::failed(Status::Ok);
        r.answered = Some(0);
        assert_eq!(
            judge(&seed(), Some(&r), None),
            vec!["seed answered with no addresses"]
        );
        r.answered = Some(1);
        let stayed = judge(&seed(), Some(&r), None);
        assert!(
            stayed[0].starts_with("not a seed: answered PEX but stayed"),
            "{stayed:?}"
        );
        r.closed_after_answer = Some(Duration::from_millis(3));
        assert!(judge(&seed(), Some(&r), None).is_empty());
        // A peer is not asked: Ok with no addresses passes.
        let peer = Entry {
            role: Role::Peer,
            ..seed()
        };
        assert!(judge(&peer, Some(&Report::failed(Status::Ok)), None).is_empty());
        let refused = Report::failed(Status::Refused("connection refused".into()));
        assert_eq!(
            judge(&peer, Some(&refused), None),
            vec!["unreachable: connect failed: connection refused"]
        );
        // Each stage named once, in front.
        for (status, want) in [
            (
                Status::HandshakeFailed("handshake failed: malformed".into()),
                "unreachable: handshake failed: malformed",
            ),
            (
                Status::HandshakeFailed("I/O error: the peer reset the connection".into()),
                "unreachable: handshake failed: I/O error: the peer reset the connection",
            ),
            (
                Status::ConnectFailed("connect failed: no TCP connection to x:1: no".into()),
                "unreachable: connect failed: no TCP connection to x:1: no",
            ),
        ] {
            assert_eq!(
                judge(&peer, Some(&Report::failed(status)), None),
                vec![want]
            );
        }
    }
}
