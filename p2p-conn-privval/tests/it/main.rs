//! The tests of `p2p-conn-privval`, in one binary: a module per concern,
//! each gated on the features it needs (`cargo test -p p2p-conn-privval
//! --no-default-features` runs the sans-IO ones).
//!
//! - [`guard`]: the double-sign guard, case by case and as properties.
//! - [`signer`]: `GuardedSigner` and the state file (names, faults, FilePV
//!   files both ways).
//! - [`messages`]: the message stream through a real secret connection and
//!   plaintext, hostile input, the decoder's properties.
//! - [`messages_cometbft_go`], [`sign_bytes_cometbft_go`]: the messages,
//!   the sign bytes and what may be signed, against each line's own Go code.
//! - [`pkcs11`]: the PKCS#11 key in SoftHSM 2 (feature `pkcs11`).
//! - [`cosign_net`]: the cosigners' transport over loopback sockets
//!   (feature `cosign-net`).
//! - [`endpoint`], [`endpoint_cometbft_go`], [`tmkms`]: the endpoints
//!   against each other, hostile peers, CometBFT's own signer and node
//!   sides, and tmkms; [`tmkms_state`]: tmkms's own state files imported.
//! - [`threshold`]: threshold signing, shares to aggregated signatures
//!   (feature `threshold`).

mod common;

#[cfg(feature = "cosign-net")]
mod cosign_net;
#[cfg(feature = "tokio")]
mod endpoint;
#[cfg(feature = "tokio")]
mod endpoint_cometbft_go;
mod guard;
#[cfg(feature = "tokio")]
mod messages;
mod messages_cometbft_go;
#[cfg(feature = "pkcs11")]
mod pkcs11;
mod sign_bytes_cometbft_go;
mod signer;
#[cfg(feature = "threshold")]
mod threshold;
#[cfg(feature = "threshold-cluster")]
mod threshold_catchup;
#[cfg(feature = "threshold-cluster")]
mod threshold_cluster;
#[cfg(feature = "tokio")]
mod tmkms;
#[cfg(feature = "tokio")]
mod tmkms_state;

/// The crate docs' table of Cargo features is Cargo.toml's.
#[test]
fn crate_docs_list_the_cargo_features() {
    p2p_conn::testkit::docs::check_feature_table(
        include_str!("../../src/lib.rs"),
        include_str!("../../Cargo.toml"),
    );
}
