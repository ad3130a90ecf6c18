//! `p2p-conn bench`: an in-process loopback pair over real TCP. One side
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
//! `--handshakes N` measures handshakes instead: N sequential connections,
//! each a TCP connect plus the full handshake, dialed by us and by the
//! baseline against the same listener (the Go peer's for the Go baselines).
//!
//! The modules, each depending only on those above it: [`workload`] (what
//! is sent and checked), [`breakdown`] and [`measure`] (what a run yields),
//! [`report`] (text and JSON), [`stability`] (when a result is not fit to
//! compare), [`producers`] and [`transfer`] (our runs),
//! [`baselines`] (the other implementations), [`handshakes`]. `profile`
//! runs the same workload.

pub mod baselines;
pub mod breakdown;
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

use crate::error::CliError;

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    #[command(flatten)]
    work: WorkloadArgs,
    /// Also run the same workload through another implementation and print the ratio
    #[arg(long, value_enum)]
    baseline: Option<Baseline>,
    /// Run the workload this many times (alternating with the baseline) and
    /// summarise with medians [default: 5 with --baseline, else 1]
    #[arg(long)]
    repeat: Option<usize>,
    /// Measure this many sequential handshakes (connect + handshake + close)
    /// instead of a transfer
    #[arg(long)]
    handshakes: Option<u64>,
    /// Print one JSON object per line instead of text, all with the same keys:
    /// "kind" is "run" (with "run" = 0..n-1), "median" or "ratio" (with
    /// "run" = null); fields that do not apply to a kind are null. Our runs
    /// carry the seal/write/queue breakdown (send_*, recv_*, queue_*,
    /// write_to_seal, read_to_open)
    #[arg(long)]
    json: bool,
}

/// `--repeat` with a baseline when not given: a median of 5 alternating
/// pairs. A single pair's ratio moved from 1.08x to 3.62x on a shared
/// machine where medians of 5 stayed within 1.53x to 2.09x
/// (docs/performance.md).
const BASELINE_REPEAT: usize = 5;

pub fn run(args: BenchArgs) -> Result<(), CliError> {
    let repeat = args
        .repeat
        .unwrap_or(if args.baseline.is_some() {
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
        wire: &args.work.wire,
        workload: &w,
    };
    if !args.json {
        println!(
            "p2p-conn bench: {}",
            args.work.describe(&w, "over loopback TCP")
        );
    }
    let mut ours_rows = Vec::new();
    let mut base_rows = Vec::new();
    let producers = args.work.producers;
    for run in 0..repeat {
        let ours = transfer::run_ours(&args.work, &w, &cfg)?;
        out.run(run, &ours)?;
        ours_rows.push(ours);
        let base = match (args.baseline, &go_peer) {
            (None, _) => continue,
            (Some(Baseline::TendermintP2p), _) if producers > 0 => {
                baselines::run_tendermint_producers(
                    w.size,
                    producers,
                    producers::per_producer(w.messages, producers),
                )?
            }
            (Some(Baseline::TendermintP2p), _) => baselines::run_tendermint(&w)?,
            (Some(_), Some(peer)) => {
                baselines::run_go(peer, &w, args.work.mib(), producers, args.work.rate)?
            }
            (Some(_), None) => unreachable!("the Go peer was built above"),
        };
        out.run(run, &base)?;
        base_rows.push(base);
    }
    out.summarize(&ours_rows, &base_rows)?;
    let flags = stability::Flags {
        amount: args.work.mib(),
        handshakes: false,
        repeat,
    };
    stability::print_notes(&ours_rows, &base_rows, &flags, args.json);
    if !args.json {
        report::print_breakdown(&args.work, &ours_rows);
    }
    Ok(())
}
