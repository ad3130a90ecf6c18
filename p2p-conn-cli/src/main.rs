//! `p2p-conn`, the operator's tool: everything is in the crate's library
//! (`src/lib.rs`), which the benchmark lab shares.

fn main() -> std::process::ExitCode {
    p2p_conn_cli::run()
}
