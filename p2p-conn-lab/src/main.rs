//! `p2p-conn-lab`: p2p-conn's benchmark lab, apart from the operator's
//! `p2p-conn`: [`bench`](mod@bench) (a loopback pair, and the same workload
//! through CometBFT's Go `SecretConnection` and tendermint-p2p),
//! [`profile`] (that workload under a sampling profiler) and [`resources`]
//! (memory per connection). Every command fails with one
//! [`error::LabError`].
//!
//! The wire flags, the dial helper, the wall clock and the wording of
//! errors are the CLI's (`p2p_conn_cli`), so a flag reads and fails here as
//! it does in `p2p-conn listen`. The criterion benches (`benches/`), the
//! benchmark binaries (`src/bin/`), the examples and the scripts that
//! produce the published figures (`scripts/`) live in this crate too.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod child;
mod error;
mod profile;
mod resources;

#[derive(Parser)]
#[command(
    name = "p2p-conn-lab",
    version,
    about = "p2p-conn's benchmark lab: bench, profile, resources",
    long_about = "p2p-conn's benchmark lab: a loopback benchmark against CometBFT's Go \
        SecretConnection and tendermint-p2p, a profiler of the same workload, and memory \
        per connection. `p2p-conn-lab COMMAND --help` says more of each"
)]
struct Lab {
    #[command(subcommand)]
    cmd: Cmd,
    /// Show p2p-conn's tracing events (debug level) on stderr
    #[arg(short, long, global = true)]
    verbose: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Loopback benchmark: handshake, then stream messages and verify them
    Bench(bench::BenchArgs),
    /// Profile the bench workload: flamegraph SVG, seal/write breakdown
    ///
    /// Run the bench workload (or send to a listening peer with --connect)
    /// under a sampling profiler
    Profile(profile::ProfileArgs),
    /// Memory per connection: idle, stalled handshakes, churn (Linux)
    ///
    /// Idle connections at scale, stalled handshakes, handshake churn
    /// (process RSS from /proc)
    Resources(resources::ResourcesArgs),
    /// A child process of `resources`
    #[command(hide = true)]
    ResourcesWorker {
        #[command(subcommand)]
        role: resources::worker::Worker,
    },
}

fn main() -> ExitCode {
    let lab = Lab::parse();
    if lab.verbose {
        p2p_conn_cli::show_tracing();
    }
    let r = match lab.cmd {
        Cmd::Bench(args) => bench::run(args),
        Cmd::Profile(args) => profile::run(args),
        Cmd::Resources(args) => resources::run(args),
        Cmd::ResourcesWorker { role } => resources::worker::run(role),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
