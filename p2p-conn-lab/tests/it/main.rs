//! The `p2p-conn-lab` binary as its users run it, in one test binary: a
//! module per command (`bench`, `profile`, `resources`), and `bench`
//! against CometBFT's Go peer at every release line. The binary under test
//! is `CARGO_BIN_EXE_p2p-conn-lab`; child processes, Go peers and the other
//! helpers are `p2p-conn-interop`'s.

mod bench;
mod bench_args;
mod bench_cometbft_go;
mod profile;
mod resources;
