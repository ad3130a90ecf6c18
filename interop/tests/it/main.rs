//! The tests of `p2p-conn-interop`'s own helpers, in one binary: that the
//! Go peer's MConnection mode and a network of real nodes do what the other
//! suites rely on.

mod cometbft_network;
mod mconn_go_peer;
