//! The lab's one error type: the CLI's ([`CliError`], whose wording it
//! keeps: a flag out of range, a failed step, a connection's failure) and
//! the failures only the lab has: building CometBFT's Go peer,
//! tendermint-p2p, the sampling profiler, the system calls that read CPU
//! time and raise the descriptor limit. `main` prints it as one line,
//! `error: <message>`, and exits 1.

use p2p_conn_cli::error::CliError;

/// Why a lab command failed.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// Everything the CLI's error says: usage, a failed step, I/O, a
    /// connection, JSON.
    #[error(transparent)]
    Cli(#[from] CliError),
    /// `--baseline cometbft-go*`: the Go peer could not be built.
    #[error(transparent)]
    GoBuild(#[from] p2p_conn_interop::cometbft_go::BuildError),
    /// `--baseline tendermint-p2p`.
    #[error(transparent)]
    Tendermint(#[from] tendermint_p2p::error::Error),
    /// `profile`: the sampling profiler (what it was doing, and its error).
    #[cfg(unix)]
    #[error("{0}: {1}")]
    Profiler(&'static str, pprof::Error),
    #[error(transparent)]
    Queue(#[from] p2p_conn::io::queue::SendError),
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
    #[error(transparent)]
    Int(#[from] std::num::TryFromIntError),
    #[cfg(unix)]
    #[error(transparent)]
    Sys(#[from] nix::errno::Errno),
}

impl LabError {
    /// [`CliError::Usage`] with `msg`.
    pub fn usage(msg: impl Into<String>) -> Self {
        CliError::usage(msg).into()
    }

    /// [`CliError::Failed`] with `msg`.
    pub fn failed(msg: impl Into<String>) -> Self {
        CliError::failed(msg).into()
    }
}

/// The errors the CLI's error already words, taken through it (`?` on an
/// I/O error in the lab says what it says in the CLI).
macro_rules! through_cli {
    ($($t:ty),* $(,)?) => {$(
        impl From<$t> for LabError {
            fn from(e: $t) -> Self {
                LabError::Cli(e.into())
            }
        }
    )*};
}

through_cli!(
    std::io::Error,
    serde_json::Error,
    p2p_conn::Error,
    p2p_conn::IdentityError,
    p2p_conn::keyfile::KeyFileError,
);
