//! The tests of `p2p-conn-mconn`, in one binary: a module per concern,
//! each gated on the features it needs (`cargo test -p p2p-conn-mconn
//! --no-default-features` runs the sans-IO core's).
//!
//! - [`core`]: `MConnCore` (packets, channels, reassembly, ping/pong,
//!   rates) and the PEX messages, case by case and as properties, over
//!   `testkit::Pair`.
//! - [`pair`]: `testkit::Pair` itself (splits, budgets, the clock, the
//!   step limit).
//! - [`adapter`]: `MConnection` over real secret connections: the send
//!   queue, back-pressure, the close bound, the `tracing` events.
//!   (What a saturated `MConnection` holds in front of the application
//!   and of the socket, and its wake-ups per batch, are unit tests in
//!   `src/connection.rs`, beside the counters they read.)
//! - [`cometbft_go`]: against CometBFT's own MConnection at every line.
//! - [`pex_rules`]: CometBFT's PEX rules (`pex`: address validation,
//!   `Requests`, `Asks`, answer sizes) at their boundaries, on a test clock.
//! - [`hostile`]: hostile packets over a real socket, with memory bounds
//!   (this binary counts its allocations: `hostile` installs the counting
//!   allocator, which reads per thread).

mod common;

#[cfg(feature = "tokio")]
mod adapter;
#[cfg(feature = "tokio")]
mod cometbft_go;
mod core;
#[cfg(feature = "tokio")]
mod hostile;
mod pair;
mod pex_rules;

/// The crate docs' table of Cargo features is Cargo.toml's.
#[test]
fn crate_docs_list_the_cargo_features() {
    p2p_conn::testkit::docs::check_feature_table(
        include_str!("../../src/lib.rs"),
        include_str!("../../Cargo.toml"),
    );
}
