//! Exit codes of the commands that talk to a peer (`listen`, `dial`,
//! `probe`): the stage a run stopped at. [`CliError::stage`] is the one
//! rule from failure to stage; docs/operator-manual.md ("Exit codes") is the one
//! table. Every other command exits 1 on any failure.
//!
//! [`CliError::stage`]: crate::error::CliError::stage

/// Where a connection command stopped, and its exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Bad arguments or a local problem: a key file, stdin, stdout (exit 1).
    Usage,
    /// No TCP connection (exit 3).
    Connect,
    /// The secret-connection handshake or authentication failed (exit 4).
    Handshake,
    /// The peer authenticated as another ID than the expected one (exit 5).
    IdMismatch,
    /// The NodeInfo exchange failed, or the peer's NodeInfo broke a rule or
    /// is incompatible with ours (exit 6).
    NodeInfo,
    /// Connected, but the handshake or the NodeInfo exchange did not finish
    /// in time (exit 7).
    Timeout,
    /// The peer is on another network than `--network` (exit 8).
    Network,
    /// The connection failed after the handshake: the peer reset it (it may
    /// have refused us), ended it before all of stdin was sent, or sent a
    /// frame that does not authenticate (exit 9).
    Connection,
}

impl Stage {
    /// The exit code (2 is clap's, for a command line that does not parse).
    pub fn code(self) -> u8 {
        match self {
            Stage::Usage => 1,
            Stage::Connect => 3,
            Stage::Handshake => 4,
            Stage::IdMismatch => 5,
            Stage::NodeInfo => 6,
            Stage::Timeout => 7,
            Stage::Network => 8,
            Stage::Connection => 9,
        }
    }

    /// Its name in `probe --json` (`stage`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Usage => "usage",
            Stage::Connect => "connect",
            Stage::Handshake => "handshake",
            Stage::IdMismatch => "id_mismatch",
            Stage::NodeInfo => "nodeinfo",
            Stage::Timeout => "timeout",
            Stage::Network => "network",
            Stage::Connection => "connection",
        }
    }
}
