//! What the CLI's tests share with the library's: child processes
//! ([`process`]), CometBFT's Go peer ([`go_peer`]) and real nodes
//! ([`cometbft_node`]), scripted peers ([`scripted`]) and byte-stream checks,
//! all from the `p2p-conn-interop` workspace crate, and the library's
//! deterministic payloads.
#![allow(dead_code, unused_imports)]

pub use p2p_conn::testkit::payload;
pub use p2p_conn_interop::compare::{check_bytes, check_bytes_at};
pub use p2p_conn_interop::{cometbft_node, go_peer, process, scripted};
