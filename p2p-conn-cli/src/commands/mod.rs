//! The commands, one module each (`listen` and `dial` share [`netcat`]),
//! and the command line that picks one. A command uses the layers below it
//! (`crate::conn`, `crate::nodeinfo_step`, `crate::visit`,
//! `crate::output`, `crate::error`, ...), never another command.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::conn::{self, DEFAULT_CONNECT_TIMEOUT_SECS};
use netcat::PipeArgs;

mod check;
mod crawl;
mod id;
mod keygen;
mod netcat;
mod probe;
mod seed;
mod signer;
mod state;
mod threshold;

#[derive(Parser)]
#[command(
    name = "p2p-conn",
    version,
    about = "CometBFT secret connections: dial, listen, probe, crawl, check, seed, signer, keys, threshold shares",
    long_about = "CometBFT-compatible secret connections: a netcat-style client and server, \
        key tools, a probe, a crawler, a list checker and a seed node for live networks, a \
        remote signer for validators. \
        `p2p-conn COMMAND --help` says more of each (docs/operator-manual.md: all of it)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Show p2p-conn's tracing events (debug level) on stderr
    #[arg(short, long, global = true)]
    verbose: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Generate a CometBFT node_key.json and print its node ID
    Keygen {
        /// Where to write the key (refuses to overwrite an existing file)
        #[arg(long, default_value = "node_key.json")]
        out: PathBuf,
    },
    /// Print the node ID of a node_key.json (or its libp2p peer ID)
    ///
    /// With --libp2p, the libp2p peer ID, as `cometbft show-node-id
    /// --libp2p` prints it
    Id {
        /// The node_key.json
        #[arg(long)]
        key: PathBuf,
        /// Print the libp2p peer ID (12D3KooW...) instead: what a
        /// `noise://<peer-id>@IP:PORT` address names
        #[arg(long)]
        libp2p: bool,
    },
    /// Accept one connection and copy stdin to it, it to stdout
    ///
    /// Copies until both directions are done; prints `listening ADDR` on
    /// stderr once bound. The connection is the first to complete the
    /// handshake (as --peer-id, if given): up to 64 handshakes run at once
    /// (4 per IP address; when full, the oldest makes room), so one that
    /// stalls holds up no other; a failed handshake (or another ID) ends
    /// `listen` only if no other is in progress.
    /// Exit 0:
    /// all of stdin handed to the kernel and the peer's stream ended (not an
    /// acknowledgement); otherwise the stage's code, as probe's, plus 9 for
    /// a connection that failed after the handshake (docs/operator-manual.md, "Exit
    /// codes")
    Listen {
        /// Address to listen on, e.g. 127.0.0.1:26656 or tcp://0.0.0.0:26656
        /// (port 0: any free port, printed in the `listening` line)
        #[arg(value_parser = conn::listen_address)]
        addr: SocketAddr,
        #[command(flatten)]
        args: PipeArgs,
    },
    /// Connect to a node and copy stdin to it, it to stdout
    ///
    /// ADDR is HOST:PORT or ID@HOST:PORT, either also after tcp://. Copies
    /// until both directions are done. Exit codes as listen's
    /// (docs/operator-manual.md, "Exit codes")
    Dial {
        /// Address to dial, e.g. 127.0.0.1:26656, NODE_ID@127.0.0.1:26656 or
        /// tcp://NODE_ID@127.0.0.1:26656
        addr: String,
        /// Give up connecting (before the handshake) after this many seconds
        #[arg(long, default_value_t = DEFAULT_CONNECT_TIMEOUT_SECS)]
        connect_timeout: f64,
        #[command(flatten)]
        args: PipeArgs,
    },
    /// Ask a CometBFT node who it is (its NodeInfo), then hang up
    ///
    /// Dial, handshake, exchange NodeInfo, check it by CometBFT's rules,
    /// print it, hang up. Exit code by stage: 0 ok, 1 usage (a malformed
    /// address, bad flags, a key file), 3 connect, 4 handshake, 5 ID
    /// mismatch, 6 NodeInfo, 7 timeout, 8 network mismatch (2: the command
    /// line does not parse; docs/operator-manual.md, "Exit codes")
    Probe(probe::ProbeArgs),
    /// Map a CometBFT network over p2p (PEX, no RPC): table, JSON, graph
    ///
    /// From the seeds, breadth first, visit each node once (handshake, NodeInfo, one PexRequest,
    /// its PexAddrs, hang up) and print a table of every node, or --json;
    /// --graph draws who knows whom (docs/operator-manual.md, "Mapping a network")
    Crawl(crawl::CrawlArgs),
    /// Check seed and peer lists (chain.json, config.toml, addresses)
    ///
    /// For each entry: reachable, the right node ID, the right network, its
    /// version and release line, the handshake time, and for a seed a PEX
    /// answer and a hang-up (seed mode). Exit 0 all pass, 10 any fails, 1
    /// usage (docs/operator-manual.md, "Checking seeds and peers")
    Check(check::CheckArgs),
    /// A seed node: answer each node's PexRequest, hang up, keep the book
    ///
    /// CometBFT's seed mode: a node that dials it gets a sample of good
    /// addresses and is hung up on; the book is re-crawled on a schedule
    /// and saved as a CometBFT addrbook.json (docs/operator-manual.md, "Running a
    /// seed")
    Seed(seed::SeedArgs),
    /// A remote signer for CometBFT validators, one or more chains
    ///
    /// Dials each node's priv_validator_laddr, reconnects whenever the
    /// connection ends, and signs votes and proposals with FilePV's
    /// double-sign rules, each chain's high-water mark written to its state
    /// file (synced) before each signature leaves. One chain from the
    /// flags, or several from --config FILE (each with its own key, guard
    /// and state file; SIGHUP reloads the node list). A key file (--key
    /// FILE) is on disk and in this process's memory, as with CometBFT's
    /// FilePV. Refuses to start on a key or state file others may read or
    /// write. Runs until SIGINT/SIGTERM, then prints the final stats and
    /// exits 0; exits 1 if it cannot start (flags, config, key, state file,
    /// permissions; docs/operator-manual.md, "Remote signer")
    Signer(signer::SignerArgs),
    /// Move a signer's high-water mark between state files, or show it
    ///
    /// Between FilePV's priv_validator_state.json and p2p-conn's slot state
    /// file (docs/operator-manual.md, "Remote signer")
    #[command(subcommand)]
    State(state::StateCmd),
    /// Threshold signing (preview): a validator key's shares
    ///
    /// `split` a priv_validator_key.json into N share files, any T of which
    /// sign; `check` that shares recombine to the validator's public key;
    /// `show` a share's public parts. Cosigners that serve a node from these
    /// shares are not in this release (docs/operator-manual.md, "Threshold
    /// signing (preview)"; spec/threshold.md)
    #[command(subcommand)]
    Threshold(threshold::ThresholdCmd),
}

/// Parse the command line, run the command, and say how it ended.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    if cli.verbose {
        crate::show_tracing();
    }
    // `listen` and `dial` exit with the code of the stage they stopped at
    // (`probe` does too, in `probe::run`); every other command exits 1.
    let staged = matches!(cli.cmd, Cmd::Listen { .. } | Cmd::Dial { .. });
    let r = match cli.cmd {
        Cmd::Keygen { out } => keygen::run(out),
        Cmd::Id { key, libp2p } => id::run(key, libp2p),
        Cmd::Listen { addr, args } => netcat::run_async(netcat::listen(addr, args)),
        Cmd::Dial {
            addr,
            connect_timeout,
            args,
        } => netcat::run_async(netcat::dial(addr, connect_timeout, args)),
        Cmd::Probe(args) => return probe::run(args),
        Cmd::Crawl(args) => crawl::run(args),
        Cmd::Check(args) => return check::run(args),
        Cmd::Seed(args) => seed::run(args),
        Cmd::Signer(args) => signer::run(args),
        Cmd::State(cmd) => state::run(cmd),
        Cmd::Threshold(cmd) => threshold::run(cmd),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            if staged {
                ExitCode::from(e.stage().code())
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
