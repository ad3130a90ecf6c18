//! `p2p-conn keygen`: a new CometBFT `node_key.json`, and its node ID.

use std::path::PathBuf;

use p2p_conn::{keyfile, Identity};

use crate::error::CliError;

/// Write a fresh key to `out` (never over an existing file) and print its
/// node ID.
pub fn run(out: PathBuf) -> Result<(), CliError> {
    let id = Identity::generate();
    keyfile::save_new(&id, &out)?;
    println!("{}", id.node_id());
    Ok(())
}
