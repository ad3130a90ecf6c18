//! Build CometBFT's Go peer and a `cometbft` node at every release the test
//! suite proves, and install tmkms (or find them cached), printing how long
//! each took:
//!
//! ```sh
//! cargo run -p p2p-conn-interop --example build_all
//! ```
//!
//! The tests build what they need themselves; this builds it all up front,
//! one binary after the other, e.g. to time a first build.

use std::path::PathBuf;
use std::time::Instant;

use p2p_conn_interop::cometbft_go::{self, BuildError, GoVersion};
use p2p_conn_interop::{cometbft_node, tmkms};

/// `cometbft_go::build` or `cometbft_node::build`.
type Builder = fn(GoVersion) -> Result<PathBuf, BuildError>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let builders: [(&str, Builder); 2] = [
        ("Go peer", cometbft_go::build),
        ("node", cometbft_node::build),
    ];
    let all = Instant::now();
    for version in GoVersion::ALL {
        for (what, build) in builders {
            let started = Instant::now();
            let path = build(version)?;
            println!(
                "{:<9} {what:<8} {:>6.1} s  {}",
                version.label(),
                started.elapsed().as_secs_f64(),
                path.display()
            );
        }
    }
    let started = Instant::now();
    let path = tmkms::build()?;
    println!(
        "{:<9} {:<8} {:>6.1} s  {}",
        tmkms::VERSION,
        "tmkms",
        started.elapsed().as_secs_f64(),
        path.display()
    );
    println!("all      {:>15.1} s", all.elapsed().as_secs_f64());
    Ok(())
}
