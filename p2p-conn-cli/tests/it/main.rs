//! The `p2p-conn` binary as users run it, in one test binary: a module
//! per command or scenario (against the Go peer, real `cometbft` nodes and
//! networks on loopback). The binary under test is
//! `CARGO_BIN_EXE_p2p-conn`.

#[path = "../common/mod.rs"]
mod common;

// libtest starts tests in the order of their names, as many at a time as
// it has threads. The one test of `after_pong_timeout` waits 110 s on
// CometBFT's hard-coded keepalive timers with the CPU idle, so its name
// sorts first and the other tests run beside the wait, not after it.
mod after_pong_timeout;
mod check;
mod cli;
mod cli_cometbft_go;
mod cli_signer;
mod cometbft_node;
mod crawl;
mod crawl_hostile;
mod crawl_output;
mod doc_examples;
mod inbound_pressure;
mod mconn_cli;
mod nodeinfo_cometbft_go;
mod probe;
mod seed;
mod seed_book;
mod signer_cometbft_node;
mod signer_config_cometbft;
mod signer_deploy;
mod signer_migration;
mod threshold_shares;

/// Three tests at a time unless `RUST_TEST_THREADS` (or `--test-threads`)
/// says otherwise. libtest's default is one per CPU; on a 2-core machine
/// that leaves one test running beside the 110 s wait of
/// `after_pong_timeout`, while this binary's tests mostly wait on child
/// processes (the CLI, Go peers, real nodes): in a fresh-clone CI run the
/// CPU sat about 90 % idle for the last two minutes of this binary.
///
/// Set before `main` from the ELF `.init_array`, because libtest reads the
/// variable when its `main` starts and offers no other hook. Sound: the
/// function runs once, while the process still has one thread, and only
/// reads and sets one environment variable.
#[used]
#[link_section = ".init_array"]
static TEST_THREADS: extern "C" fn() = {
    extern "C" fn three_unless_told() {
        if std::env::var_os("RUST_TEST_THREADS").is_none() {
            std::env::set_var("RUST_TEST_THREADS", "3");
        }
    }
    three_unless_told
};
