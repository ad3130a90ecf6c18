//! CometBFT's own code as a peer, for p2p-conn's test suites and its CLI.
//!
//! - [`cometbft_go`] builds and locates CometBFT's Go `SecretConnection`
//!   peer (`interop/cometbft-go`) at the releases nodes run; the CLI's
//!   `--baseline cometbft-go*` and the interop tests run the same binaries.
//! - [`go_peer`] drives that peer from tests (keys, `dial`, `listen`).
//! - [`privval_peer`] drives its remote-signer modes: CometBFT's own
//!   privval `SignerServer` (with a `FilePV`) and `SignerClient`.
//! - [`mconn_peer`] drives its MConnection mode: CometBFT's own
//!   `p2p/conn.MConnection` over the secret connection, reporting each
//!   message's digest and the connection's `onError`.
//! - [`cometbft_node`] builds and runs real `cometbft` nodes on loopback.
//! - [`cometbft_network`] runs several of them, from several release
//!   lines, as one chain joined in a line, one of them a seed.
//! - [`process`] runs child processes with deadlines, loopback ports and
//!   scratch folders; [`compare`] checks byte streams.
//! - [`scripted`] is a p2p-conn peer that sends exactly the bytes a test
//!   gives it after the handshake.
//! - [`proptest_config`]: the property tests' configuration, for every
//!   suite; [`alloc`], the counting allocator of the memory tests;
//!   [`capture`], `tracing` events captured as text.
//! - [`softhsm`]: SoftHSM 2 token folders for the PKCS#11 tests, and the
//!   import of a validator key into one.
//! - [`tmkms`] installs and runs tmkms (iqlusion's KMS, Rust, `softsign`
//!   backend), an independent remote signer that dials a node's privval
//!   endpoint; [`tmkms_install`] is how it is installed, shared as source
//!   with `cargo xtask`.
//!
//! Not published: a workspace crate that the CLI depends on and the library
//! and CLI test suites dev-depend on (a dev-dependency cycle with p2p-conn,
//! which cargo allows; nothing here is in a library user's build). Test
//! helpers here fail by panicking.

pub mod alloc;
pub mod capture;
pub mod cometbft_go;
pub mod cometbft_network;
pub mod cometbft_node;
pub mod compare;
pub mod go_peer;
pub mod mconn_peer;
pub mod privval_peer;
pub mod process;
pub mod scripted;
pub mod softhsm;
pub mod tmkms;
pub mod tmkms_install;

/// `cases` unless `PROPTEST_CASES` says otherwise; no regression files are
/// written (proptest prints the minimal failing input instead).
pub fn proptest_config(cases: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

/// A test module per CometBFT release line, each with a `#[test]` per
/// function: `per_release! { v0_34: V034, v1: V1; [probe, dial] }` makes
/// `v0_34::probe`, calling `super::probe(GoVersion::V034, "v0_34::probe")`,
/// and so on. Name the module after the line (`v0_39`, `v1`), so that a
/// test names the version its claim is about.
#[macro_export]
macro_rules! per_release {
    ($($module:ident: $version:ident),+ $(,)?; $tests:tt) => {$(
        $crate::per_release!(@module $module, $version, $tests);
    )+};
    (@module $module:ident, $version:ident, [$($test:ident),+ $(,)?]) => {
        mod $module {
            $(
                #[test]
                fn $test() {
                    super::$test(
                        $crate::cometbft_go::GoVersion::$version,
                        concat!(stringify!($module), "::", stringify!($test)),
                    );
                }
            )+
        }
    };
}
