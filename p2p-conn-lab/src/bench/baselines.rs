//! The same workloads through other implementations: CometBFT's Go
//! `SecretConnection` (at any line the test suite proves, v0.34.35 to
//! v1.0.1: a separate process built from `interop/cometbft-go`) and
//! tendermint-p2p 0.41 (in this process).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use p2p_conn_interop::cometbft_go::{self, GoVersion};
use tendermint_p2p::secret_connection::{SecretConnection, Version};

use super::measure::{Cpu, Latency, Mark, Row};
use super::producers::{self, Checker};
use super::transfer::{run_threads, Threads, READ_CHUNK};
use super::workload::{Verifier, Workload};
use crate::error::LabError;

/// The Go peer for `version` (`--baseline cometbft-go*`), built first if
/// missing or stale. A build takes minutes (the CometBFT module and its
/// dependencies), so it is announced on stderr, with its time when done;
/// a peer already built is returned without a word.
pub fn go_peer(version: GoVersion) -> Result<PathBuf, LabError> {
    if cometbft_go::is_built(version) {
        return Ok(cometbft_go::build(version)?);
    }
    eprintln!(
        "building CometBFT's Go peer {} (first run only; up to a few minutes)...",
        version.label()
    );
    let started = std::time::Instant::now();
    let peer = cometbft_go::build(version)?;
    eprintln!(
        "built CometBFT's Go peer {} in {:.0} s",
        version.label(),
        started.elapsed().as_secs_f64()
    );
    Ok(peer)
}

/// CometBFT's Go `SecretConnection` at one of the lines the test suite
/// proves, as `--baseline` names it: `cometbft-go` (v1.0.1, also
/// `cometbft-go-1`) and `cometbft-go-0.40`, `-0.39`, `-0.38`, `-0.37`,
/// `-0.34` (the newest release of each line). `resources --baseline` takes
/// the same names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoBaseline(pub GoVersion);

/// The Go baselines in the order `--help` lists them: newest line first.
const GO_BASELINES: [GoBaseline; GoVersion::ALL.len()] = {
    let mut all = [GoBaseline(GoVersion::V1); GoVersion::ALL.len()];
    let mut i = 0;
    while i < all.len() {
        all[i] = GoBaseline(GoVersion::ALL[GoVersion::ALL.len() - 1 - i]);
        i += 1;
    }
    all
};

impl GoBaseline {
    /// Its `--baseline` name: `cometbft-go-` and the line's number
    /// (`cometbft-go-0.38`), `cometbft-go` for v1.
    pub fn name(self) -> &'static str {
        static NAMES: OnceLock<Vec<String>> = OnceLock::new();
        let names = NAMES.get_or_init(|| {
            GoVersion::ALL
                .iter()
                .map(|v| match v.line() {
                    "v1" => "cometbft-go".to_string(),
                    line => format!("cometbft-go-{}", line.trim_start_matches('v')),
                })
                .collect()
        });
        &names[self.0.index()]
    }

    fn possible_value(self) -> clap::builder::PossibleValue {
        let v = clap::builder::PossibleValue::new(self.name()).help(format!(
            "CometBFT {}'s Go SecretConnection (separate process; needs `go`)",
            self.0.label()
        ));
        match self.0 {
            GoVersion::V1 => v.alias("cometbft-go-1"),
            _ => v,
        }
    }
}

impl clap::ValueEnum for GoBaseline {
    fn value_variants<'a>() -> &'a [Self] {
        &GO_BASELINES
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(self.possible_value())
    }
}

/// What `bench --baseline` runs beside p2p-conn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Baseline {
    /// CometBFT's Go SecretConnection (see [`GoBaseline`]).
    Go(GoBaseline),
    /// tendermint-p2p 0.41 (std::io, one write syscall per frame; in process).
    TendermintP2p,
}

/// Every `--baseline`: the Go lines, then tendermint-p2p.
const BASELINES: [Baseline; GoVersion::ALL.len() + 1] = {
    let mut all = [Baseline::TendermintP2p; GoVersion::ALL.len() + 1];
    let mut i = 0;
    while i < GO_BASELINES.len() {
        all[i] = Baseline::Go(GO_BASELINES[i]);
        i += 1;
    }
    all
};

impl clap::ValueEnum for Baseline {
    fn value_variants<'a>() -> &'a [Self] {
        &BASELINES
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(match self {
            Baseline::Go(go) => go.possible_value(),
            Baseline::TendermintP2p => clap::builder::PossibleValue::new("tendermint-p2p")
                .help("tendermint-p2p 0.41 (std::io, one write syscall per frame; in process)"),
        })
    }
}

impl Baseline {
    /// The Go peer's CometBFT release, for the Go baselines.
    pub fn go_version(self) -> Option<GoVersion> {
        match self {
            Baseline::Go(GoBaseline(v)) => Some(v),
            Baseline::TendermintP2p => None,
        }
    }
}

/// A tendermint-p2p connection over `tcp` with a fresh key.
fn tendermint(tcp: std::net::TcpStream) -> Result<SecretConnection<std::net::TcpStream>, LabError> {
    let key = ed25519_consensus::SigningKey::new(rand_core::OsRng);
    Ok(SecretConnection::new(tcp, key, Version::V0_34)?)
}

/// The receiving end of a tendermint-p2p run: a connection over `tcp`, read
/// in 64 KiB buffers into `check` (with its `feed`) until `done`.
fn receive<C>(
    tcp: std::net::TcpStream,
    mut check: C,
    feed: fn(&mut C, &[u8]) -> Result<(), LabError>,
    done: fn(&C) -> bool,
) -> Result<(), LabError> {
    let mut conn = tendermint(tcp)?;
    let mut buf = vec![0u8; READ_CHUNK];
    while !done(&check) {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            return Err(LabError::failed("tendermint-p2p stream ended early"));
        }
        feed(&mut check, &buf[..n])?;
    }
    Ok(())
}

/// The same workload through tendermint-p2p 0.41 (std threads, as its API is
/// blocking). Its reads must use buffers of at least one frame's payload.
pub fn run_tendermint(w: &Workload) -> Result<Row, LabError> {
    let rw = w.clone();
    let Threads { elapsed, cpu, .. } = run_threads(
        move |tcp| receive(tcp, Verifier::new(rw), Verifier::feed, Verifier::done),
        |tcp, start| {
            let mut conn = tendermint(tcp)?;
            *start = Some(Mark::now());
            for i in 0..w.messages {
                conn.write_all(w.message(i))?;
            }
            Ok(conn.flush()?)
        },
    )?;
    Ok(Row {
        name: "tendermint-p2p 0.41".into(),
        bytes: w.bytes(),
        messages: w.messages,
        elapsed,
        cpu,
        latency: None,
        breakdown: None,
    })
}

/// The `--producers` workload through tendermint-p2p 0.41: producer threads
/// share one connection behind a `Mutex` (its writes are one syscall per
/// frame).
pub fn run_tendermint_producers(size: usize, producers: usize, per: u64) -> Result<Row, LabError> {
    let Threads { elapsed, cpu, .. } = run_threads(
        move |tcp| {
            let check = Checker::new(size, producers, per as u32);
            receive(tcp, check, Checker::feed, Checker::complete)
        },
        |tcp, start| {
            let shared = Arc::new(std::sync::Mutex::new(tendermint(tcp)?));
            *start = Some(Mark::now());
            let threads: Vec<_> = (0..producers)
                .map(|p| {
                    let shared = shared.clone();
                    let base = producers::base(size);
                    std::thread::spawn(move || {
                        for seq in 0..per as u32 {
                            let m = producers::message(&base, p as u8, seq, None);
                            let mut conn = shared
                                .lock()
                                .map_err(|_| LabError::failed("lock poisoned"))?;
                            conn.write_all(&m)?;
                        }
                        Ok::<_, LabError>(())
                    })
                })
                .collect();
            for t in threads {
                t.join()
                    .map_err(|_| LabError::failed("producer panicked"))??;
            }
            Ok(())
        },
    )?;
    let messages = per * producers as u64;
    Ok(Row {
        name: format!("tendermint-p2p 0.41 ({producers} threads)"),
        bytes: messages * size as u64,
        messages,
        elapsed,
        cpu,
        latency: None,
        breakdown: None,
    })
}

/// What the Go peer's `bench` and `handshake-dial` print (one JSON line).
#[derive(serde::Deserialize)]
pub struct GoResult {
    #[serde(rename = "impl")]
    pub implementation: String,
    #[serde(default)]
    messages: u64,
    #[serde(default)]
    bytes: u64,
    #[serde(default)]
    pub handshakes: u64,
    pub seconds: f64,
    cpu_user: f64,
    cpu_sys: f64,
    /// `bench -connections`: pairs at once (absent for one).
    #[serde(default)]
    connections: Option<usize>,
    /// Paced runs (`-rate`): send-to-receive latency percentiles.
    #[serde(default)]
    lat_p50_us: Option<f64>,
    #[serde(default)]
    lat_p99_us: Option<f64>,
}

impl GoResult {
    fn latency(&self) -> Option<Latency> {
        Some(Latency {
            p50_us: self.lat_p50_us?,
            p99_us: self.lat_p99_us?,
        })
    }

    /// Run the Go peer `peer` with `args` (its subcommand `what` first) to
    /// its end and parse the JSON line it prints.
    pub fn run(peer: &Path, args: &[String]) -> Result<GoResult, LabError> {
        let what = args.first().map_or("", String::as_str);
        let output = std::process::Command::new(peer)
            .args(args)
            .output()
            .map_err(running(peer))?;
        if !output.status.success() {
            return Err(LabError::failed(format!(
                "the Go peer's {what} failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        let line = String::from_utf8_lossy(&output.stdout);
        serde_json::from_str(line.trim())
            .map_err(|e| LabError::failed(format!("the Go peer's {what} printed {line:?}: {e}")))
    }

    pub fn cpu(&self) -> Option<Cpu> {
        Some(Cpu {
            user: self.cpu_user,
            sys: self.cpu_sys,
        })
    }
}

/// The error of a Go peer that did not start: "running PATH: ...".
pub fn running(peer: &Path) -> impl FnOnce(std::io::Error) -> LabError + '_ {
    move |e| LabError::failed(format!("running {}: {e}", peer.display()))
}

/// The same workload through CometBFT's Go `SecretConnection`, as a separate
/// process (the Go peer's `bench`: the same messages, pattern, 64 KiB reads
/// and verification; it measures its own time and CPU over the same span).
/// With `connections` above 1, the Go peer runs that many pairs at once in
/// its one process, split as [`Workload::share`] splits ours, and its CPU
/// is that process's (all its goroutines, on as many cores as Go's
/// default `GOMAXPROCS` gives it: all of them).
pub fn run_go(
    peer: &Path,
    w: &Workload,
    mib: u64,
    producers: usize,
    rate: Option<u64>,
    connections: usize,
) -> Result<Row, LabError> {
    let mut args = vec![
        "bench".to_string(),
        "-size".into(),
        w.size.to_string(),
        "-mib".into(),
        mib.to_string(),
        "-producers".into(),
        producers.to_string(),
        "-rate".into(),
        rate.unwrap_or(0).to_string(),
    ];
    if connections > 1 {
        args.extend(["-connections".into(), connections.to_string()]);
    }
    let r = GoResult::run(peer, &args)?;
    let ran = r.connections.unwrap_or(1);
    if ran != connections {
        return Err(LabError::failed(format!(
            "the Go peer ran {ran} connections, not {connections}"
        )));
    }
    let messages = match producers {
        0 => w.messages,
        n => producers::per_producer(w.messages, n) * n as u64,
    };
    if (r.messages, r.bytes) != (messages, messages * w.size as u64) {
        return Err(LabError::failed(format!(
            "the Go peer sent {} messages ({} bytes), not {} ({} bytes)",
            r.messages,
            r.bytes,
            messages,
            messages * w.size as u64
        )));
    }
    Ok(Row {
        cpu: r.cpu(),
        latency: r.latency(),
        breakdown: None,
        name: r.implementation,
        bytes: r.bytes,
        messages: r.messages,
        elapsed: Duration::from_secs_f64(r.seconds),
    })
}
