//! The integration tests of `p2p-conn`, in one binary: a module per
//! concern, each gated on the features it needs (a build without an
//! optional part skips its modules). The memory tests, which count every
//! allocation of the process, are the binary `memory`.

#[path = "../common/mod.rs"]
mod common;

#[cfg(feature = "codec")]
mod codec_decoder;
#[cfg(all(feature = "codec", feature = "keyfile"))]
mod cometbft_go;
#[cfg(feature = "tracing")]
mod events;
mod evil_peer;
#[cfg(feature = "codec")]
mod interop;
#[cfg(feature = "keyfile")]
mod keyfile;
mod loopback;
#[cfg(all(feature = "metrics", feature = "queue"))]
mod metrics_export;
#[cfg(feature = "nodeinfo")]
mod nodeinfo;
mod properties;
#[cfg(feature = "queue")]
mod reader_pattern;
#[cfg(all(feature = "codec", feature = "keyfile"))]
mod regressions;
#[cfg(feature = "queue")]
mod send_queue;
#[cfg(all(feature = "queue", feature = "stats"))]
mod stats;
#[cfg(feature = "codec")]
mod syscall_counts;
mod vectors;
mod writer_faults;

/// The crate docs' table of Cargo features is Cargo.toml's.
#[test]
fn crate_docs_list_the_cargo_features() {
    p2p_conn::testkit::docs::check_feature_table(
        include_str!("../../src/lib.rs"),
        include_str!("../../Cargo.toml"),
    );
}
