//! The checks behind p2p-conn's fuzz targets: one module per target, each
//! with a `pub fn check(data: &[u8])` that panics (assert) when p2p-conn
//! misbehaves on `data` and returns quietly otherwise; protocol errors on
//! hostile input are fine.
//!
//! Two crates call them: the cargo-fuzz crate `p2p-conn-fuzz`, whose
//! `fuzz_targets/TARGET.rs` runs `TARGET::check` under libFuzzer, and this
//! crate's own `tests/seeds.rs`, which replays every committed seed in
//! `p2p-conn-fuzz/seeds/TARGET/` in `cargo test --workspace`. So this crate
//! builds on stable and never links libFuzzer.
//!
//! Structured inputs are decoded by [`input::Input`], a small hand-written
//! reader (missing bytes read as zero), rather than the `arbitrary` crate, so
//! a seed decodes the same way under the fuzzer and in the replay test with
//! no derive machinery to keep in step. See `docs/fuzzing.md`.

pub mod drive;
pub mod input;

pub mod auth_sig;
pub mod codec_decoder;
pub mod frames;
pub mod handshake;
pub mod mconn_packets;
pub mod nodeinfo;
pub mod privval;
pub mod queue_budget;
pub mod roundtrip;
pub mod send_queue;

/// The p2p-conn internals the checks drive: the engine and the test hooks
/// are crate-private in p2p-conn and reached through `testkit::internals`.
mod internals {
    pub use p2p_conn::testkit::internals::{
        read_uvarint, seal_at, Admission, Budget, FrameReader, FrameWriter, ReadCore, Varint,
        WriteCore,
    };
}

/// A target's check: panics when p2p-conn misbehaves on the input.
pub type Check = fn(&[u8]);

/// Every target by name (its `fuzz_targets/NAME.rs` and `seeds/NAME/`), with
/// its check.
pub const TARGETS: &[(&str, Check)] = &[
    ("handshake", handshake::check),
    ("frames", frames::check),
    ("auth_sig", auth_sig::check),
    ("roundtrip", roundtrip::check),
    ("queue_budget", queue_budget::check),
    ("send_queue", send_queue::check),
    ("nodeinfo", nodeinfo::check),
    ("codec_decoder", codec_decoder::check),
    ("privval", privval::check),
    ("mconn_packets", mconn_packets::check),
];

/// The check of the target called `name`.
pub fn check_of(name: &str) -> Option<Check> {
    TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, check)| check)
}
