//! `p2p-conn id`: the node ID of a `node_key.json`, or its libp2p peer ID.

use std::path::Path;

use p2p_conn::keyfile;

use crate::error::CliError;

/// Print the node ID of the key at `key` (with `libp2p`, its libp2p peer
/// ID, as `cometbft show-node-id --libp2p` prints it).
pub fn run(key: impl AsRef<Path>, libp2p: bool) -> Result<(), CliError> {
    let id = keyfile::load(key.as_ref())?;
    match libp2p {
        true => println!("{}", id.public_key().peer_id()),
        false => println!("{}", id.node_id()),
    }
    Ok(())
}
