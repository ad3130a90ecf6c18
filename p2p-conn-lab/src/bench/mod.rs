//! `p2p-conn-lab bench`: an in-process loopback pair over real TCP. One side
//! dials, the other accepts; both run the full handshake; then the dialer
//! streams `--mib` MiB in messages of `--size` bytes (one write each) and the
//! listener reads and verifies every byte.
//!
//! Each run reports throughput and the process CPU time (user + sys, from
//! getrusage) spent between the sender's first byte and the receiver's last,
//! per GiB moved. `--baseline` runs the same workload through another
//! implementation, alternating with ours under `--repeat`, and prints the
//! ratios of the medians: CometBFT's own Go `SecretConnection` (at v0.34.35,
//! v0.37.18, v0.38.26, v0.39.4, v0.40.0 or v1.0.1, as a separate process
//! built from `interop/cometbft-go`) or
//! tendermint-p2p 0.41 (in this process).
//!
//! `--connections N` (`--all-cores`: N = the cores the process may use)
//! adds, in every round, a run of the same workload split over N
//! connections at once (see [`connections`]), ours and the baseline's, and
//! prints how N connections compare with one.
//!
//! `--handshakes N` measures handshakes instead: N sequential connections,
//! each a TCP connect plus the full handshake, dialed by us and by the
//! baseline against the same listener (the Go peer's for the Go baselines).
//!
//! The modules, each depending only on those above it: [`workload`] (what
//! is sent and checked), [`breakdown`] and [`measure`] (what a run yields),
//! [`report`] (text and JSON), [`stability`] (when a result is not fit to
//! compare), [`producers`] and [`transfer`] (our runs),
//! [`connections`] (ours over N connections at once),
//! [`baselines`] (the other implementations), [`handshakes`]. `profile`
//! runs the same workload.

pub mod baselines;
pub mod breakdown;
pub mod connections;
pub mod handshakes;
pub mod measure;
pub mod producers;
pub mod report;
pub mod stability;
pub mod transfer;
pub mod workload;

use baselines::Baseline;
use report::Output;
use workload::WorkloadArgs;

use crate::error::LabError;

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    #[command(flatten)]
    work: WorkloadArgs,
    /// Also run the same workload through another implementation and print the ratio
    #[arg(long, value_enum)]
    baseline: Option<Baseline>,
    /// Run the workload this many times (alternating with the baseline) and
    /// summarise with medians [default: 5 with --baseline or --connections,
    /// else 1]
    #[arg(long)]
    repeat: Option<usize>,
    /// Also run the workload split evenly over N connections at once (N
    /// dialer/listener pairs, every byte verified; tokio: a multi-thread
    /// runtime with a worker per core), alternating with the one-connection
    /// run, and report aggregate MB/s, msg/s and the process's CPU per GiB
    /// beside it; with --baseline cometbft-go*, the Go peer runs N pairs too
    #[arg(long, value_name = "N")]
    connections: Option<usize>,
    /// --connections N with N the number of cores this process may use
    /// (std::thread::available_parallelism)
    #[arg(long, conflicts_with = "connections")]
    all_cores: bool,
    /// Test only: with --connections, connection K (1 to N) of our runs
    /// flips one byte of its last message, so the run must fail
    #[arg(long, value_name = "K", hide = true)]
    corrupt_connection: Option<usize>,
    /// Measure this many sequential handshakes (connect + handshake + close)
    /// instead of a transfer
    #[arg(long)]
    handshakes: Option<u64>,
    /// Print one JSON object per line instead of text, all with the same keys:
    /// "kind" is "run" (with "run" = 0..n-1), "median", "ratio" or, with
    /// --connections, "scaling" (N connections over one; with "run" = null);
    /// fields that do not apply to a kind are null; "connections" is the
    /// line's connection count. Our runs carry the seal/write/queue
    /// breakdown (send_*, recv_*, queue_*, write_to_seal, read_to_open)
    #[arg(long)]
    json: bool,
}

/// `--repeat` with a baseline when not given: a median of 5 alternating
/// pairs. A single pair's ratio moved from 1.08x to 3.62x on a shared
/// machine where medians of 5 stayed within 1.53x to 2.09x
/// (docs/performance.md).
const BASELINE_REPEAT: usize = 5;

/// `--connections N` (`--all-cores`), checked against the other flags: 1
/// when not given.
fn connection_count(args: &BenchArgs) -> Result<usize, LabError> {
    let n = match (args.connections, args.all_cores) {
        (Some(n), _) => n,
        (None, true) => connections::cores(),
        (None, false) => 1,
    };
    if n == 0 {
        return Err(LabError::usage("--connections must be at least 1"));
    }
    if n == 1 && args.all_cores {
        eprintln!("note: --all-cores: this process may use 1 core, so only one connection runs");
    }
    if let Some(k) = args
        .corrupt_connection
        .filter(|k| *k == 0 || *k > n || n == 1)
    {
        return Err(LabError::usage(format!(
            "--corrupt-connection {k}: takes 1 to N, with --connections N of at least 2"
        )));
    }
    if n > 1 {
        let refuse = |what: &str| {
            Err(LabError::usage(format!(
                "--connections (or --all-cores) runs the plain transfer; it does not take {what}"
            )))
        };
        if args.handshakes.is_some() {
            return refuse("--handshakes");
        }
        if args.work.producers > 0 {
            return refuse("--producers");
        }
        if args.work.runtime == workload::Runtime::CurrentThread {
            return refuse("--runtime current-thread (it runs on one core)");
        }
        if args.baseline == Some(Baseline::TendermintP2p) {
            return refuse("--baseline tendermint-p2p (the Go baselines only)");
        }
    }
    Ok(n)
}

pub fn run(args: BenchArgs) -> Result<(), LabError> {
    let n = connection_count(&args)?;
    let repeat = args
        .repeat
        .unwrap_or(if args.baseline.is_some() || n > 1 {
            BASELINE_REPEAT
        } else {
            1
        })
        .max(1);
    let cfg = args.work.config()?;
    let go_peer = match args.baseline.and_then(Baseline::go_version) {
        Some(v) => Some(baselines::go_peer(v)?),
        None => None,
    };
    if let Some(n) = args.handshakes {
        return handshakes::run(
            &args.work,
            &cfg,
            n,
            repeat,
            args.baseline,
            go_peer.as_deref(),
            args.json,
        );
    }
    let w = args.work.workload()?;
    let out = Output {
        json: args.json,
        handshakes: false,
        connections: 1,
        wire: &args.work.wire,
        workload: &w,
    };
    // The same workload over `n` connections at once.
    let many = Output {
        connections: n,
        ..out
    };
    if n > 1 {
        // Every share non-empty, before any run.
        w.share(n, n - 1)?;
    }
    if !args.json {
        println!(
            "p2p-conn bench: {}",
            args.work.describe(&w, "over loopback TCP")
        );
        if n > 1 {
            println!(
                "each round also over {n} connections at once ({} to {} messages each, all verified; {} cores, so p2p-conn's tokio runtime has {} workers)",
                w.share(n, n - 1)?.messages,
                w.share(n, 0)?.messages,
                connections::cores(),
                connections::cores(),
            );
        }
    }
    let faults = connections::Faults {
        corrupt: args.corrupt_connection.map(|k| k - 1),
    };
    let mut ours_rows = Vec::new();
    let mut base_rows = Vec::new();
    let mut ours_many = Vec::new();
    let mut base_many = Vec::new();
    let producers = args.work.producers;
    let (mib, rate) = (args.work.mib(), args.work.rate);
    for run in 0..repeat {
        let ours = transfer::run_ours(&args.work, &w, &cfg)?;
        out.run(run, &ours)?;
        ours_rows.push(ours);
        let base = match (args.baseline, &go_peer) {
            (None, _) => None,
            (Some(Baseline::TendermintP2p), _) if producers > 0 => {
                Some(baselines::run_tendermint_producers(
                    w.size,
                    producers,
                    producers::per_producer(w.messages, producers),
                )?)
            }
            (Some(Baseline::TendermintP2p), _) => Some(baselines::run_tendermint(&w)?),
            (Some(_), Some(peer)) => Some(baselines::run_go(peer, &w, mib, producers, rate, 1)?),
            (Some(_), None) => unreachable!("the Go peer was built above"),
        };
        if let Some(base) = base {
            out.run(run, &base)?;
            base_rows.push(base);
        }
        if n == 1 {
            continue;
        }
        let ours = connections::run_ours(&args.work, &w, &cfg, n, faults)?;
        many.run(run, &ours)?;
        ours_many.push(ours);
        if let Some(peer) = &go_peer {
            let base = baselines::run_go(peer, &w, mib, 0, None, n)?;
            many.run(run, &base)?;
            base_many.push(base);
        }
    }
    out.summarize(&ours_rows, &base_rows)?;
    if n > 1 {
        many.summarize(&ours_many, &base_many)?;
        many.scaling(&ours_rows, &ours_many)?;
        many.scaling(&base_rows, &base_many)?;
    }
    let flags = stability::Flags {
        amount: args.work.mib(),
        handshakes: false,
        repeat,
    };
    stability::print_notes(
        &[&ours_rows, &base_rows, &ours_many, &base_many],
        &flags,
        args.json,
    );
    if !args.json {
        let which = (n > 1).then_some("one connection");
        report::print_breakdown(&args.work, &ours_rows, which);
    }
    Ok(())
}
