//! Threshold signing (feature `threshold`): shares of a validator's key,
//! cosigners with their guards and nonce pools, the leader's aggregation,
//! the safety property over random interleavings, and the CPU cost of a
//! share and of an aggregation.

mod cosigner;
mod leader;
mod property;
mod shares;
mod timing;

use std::path::Path;

use p2p_conn::Identity;
use p2p_conn_privval::state_file::{self, Format};
use p2p_conn_privval::threshold::{Cosigner, KeyShare, Leader};
use rand_core::OsRng;

pub const CHAIN: &str = "test-chain";

/// The validator's key.
pub fn validator() -> Identity {
    Identity::from_seed(&[7; 32])
}

/// Whether `sig` is a valid Ed25519 signature of `msg` under the
/// validator's key (ed25519-dalek's strict verification, as an ordinary
/// signer's).
pub fn verifies(msg: &[u8], sig: &[u8]) -> bool {
    let vk = ed25519_dalek::VerifyingKey::from_bytes(validator().public_key().as_bytes()).unwrap();
    let Ok(sig) = ed25519_dalek::Signature::from_slice(sig) else {
        return false;
    };
    vk.verify_strict(msg, &sig).is_ok()
}

/// A cluster: `n` cosigners of a t-of-n split of [`validator`], each with
/// its own slot state file in `dir`, and a leader beside each, stocked
/// with `stock` commitments of every peer.
pub fn cluster(dir: &Path, t: u16, n: u16, stock: usize) -> (Vec<Cosigner>, Vec<Leader>) {
    let shares = KeyShare::split(&validator(), t, n, &mut OsRng).unwrap();
    let mut cosigners: Vec<Cosigner> = shares
        .into_iter()
        .map(|share| {
            let path = dir.join(format!("cosigner-{}.state", share.index()));
            state_file::write_new(&path, &Default::default(), Format::Slots).unwrap();
            Cosigner::open(share, &path, CHAIN, &mut OsRng).unwrap()
        })
        .collect();
    let mut leaders: Vec<Leader> = cosigners.iter().map(Leader::new).collect();
    for (leader_at, leader) in leaders.iter_mut().enumerate() {
        for (peer_at, peer) in cosigners.iter_mut().enumerate() {
            if peer_at != leader_at {
                let commitments = peer.commit(stock, &mut OsRng);
                leader.add_commitments(peer.index(), &commitments).unwrap();
            }
        }
    }
    (cosigners, leaders)
}
