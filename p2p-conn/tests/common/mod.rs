//! Test-only helpers on top of the crate's `testkit` (the shared I/O double
//! and handshake pumps live there, for the fuzz targets too).
#![allow(dead_code, unused_imports)]

pub use p2p_conn::testkit::*;
use proptest::test_runner::Config as ProptestConfig;

/// `cases` unless `PROPTEST_CASES` says otherwise; no regression files are
/// written (proptest prints the minimal failing input instead).
pub fn proptest_config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}
