//! The `p2p-conn` binary as users run it, in one test binary: a module
//! per command or scenario (against the Go peer, real `cometbft` nodes and
//! networks on loopback). The binary under test is
//! `CARGO_BIN_EXE_p2p-conn`.

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod cli_bench;
mod cli_cometbft_go;
mod cli_profile;
mod cli_resources;
mod cli_signer;
mod cometbft_node;
mod crawl;
mod mconn_cli;
mod mconn_keepalive;
mod nodeinfo_cometbft_go;
mod probe;
mod signer_cometbft_node;
