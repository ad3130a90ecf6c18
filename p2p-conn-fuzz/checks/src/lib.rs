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
pub mod noise;
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

/// A fuzz target: its name (its `fuzz_targets/NAME.rs` and `seeds/NAME/`),
/// its check, and the seeds it owns.
#[derive(Clone, Copy)]
pub struct Target {
    /// The target's name.
    pub name: &'static str,
    /// Panics when p2p-conn misbehaves on the input.
    pub check: Check,
    /// The committed seeds of `seeds/NAME/`, built from the layout the
    /// check decodes (each module's `seeds()`, next to its decoder).
    pub seeds: fn() -> Seeds,
}

/// Every target, each with its check and its seeds.
pub const TARGETS: &[Target] = &[
    target("handshake", handshake::check, handshake::seeds),
    target("frames", frames::check, frames::seeds),
    target("auth_sig", auth_sig::check, auth_sig::seeds),
    target("roundtrip", roundtrip::check, roundtrip::seeds),
    target("queue_budget", queue_budget::check, queue_budget::seeds),
    target("send_queue", send_queue::check, send_queue::seeds),
    target("nodeinfo", nodeinfo::check, nodeinfo::seeds),
    target("codec_decoder", codec_decoder::check, codec_decoder::seeds),
    target("privval", privval::check, privval::seeds),
    target("mconn_packets", mconn_packets::check, mconn_packets::seeds),
    target("noise", noise::check, noise::seeds),
];

const fn target(name: &'static str, check: Check, seeds: fn() -> Seeds) -> Target {
    Target { name, check, seeds }
}

/// The target called `name`.
pub fn target_of(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// The seeds one target owns: file names and bytes, in the order they were
/// added.
#[derive(Debug, Default)]
pub struct Seeds(Vec<(String, Vec<u8>)>);

impl Seeds {
    /// Adds the seed `name`.
    ///
    /// # Panics
    ///
    /// If the target already has a seed called `name`.
    pub fn add(&mut self, name: impl Into<String>, bytes: &[u8]) {
        let name = name.into();
        assert!(
            self.0.iter().all(|(n, _)| *n != name),
            "two seeds called {name}"
        );
        self.0.push((name, bytes.to_vec()));
    }

    /// The seeds, by file name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.0.iter().map(|(n, b)| (n.as_str(), b.as_slice()))
    }
}

/// The parts, one after another.
pub(crate) fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}
