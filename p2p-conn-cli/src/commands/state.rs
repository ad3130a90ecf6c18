//! `p2p-conn state`: move a signer's high-water mark between FilePV's
//! `priv_validator_state.json` and p2p-conn's slot state file, or show it
//! (the library's `state_file` and `convert_state_file` do the work).

use std::path::PathBuf;

use p2p_conn_privval::{convert_state_file, state_file, SignerError};

use crate::error::CliError;

/// `p2p-conn state`: move a high-water mark between FilePV's
/// `priv_validator_state.json` and p2p-conn's slot file, or show one.
#[derive(clap::Subcommand)]
pub enum StateCmd {
    /// Copy a state file into a new p2p-conn slot state file
    ///
    /// From a FilePV priv_validator_state.json (or any state file) to a new
    /// p2p-conn slot state file (one fdatasync per signature instead of
    /// FilePV's new file, sync and rename). Stop the node (or signer) that
    /// uses FROM first, and never start one on FROM again
    Import {
        /// The state file to copy (a running p2p-conn signer on it is
        /// refused: its lock is taken)
        #[arg(long)]
        from: PathBuf,
        /// The slot state file to make (must not exist)
        #[arg(long)]
        to: PathBuf,
    },
    /// Copy a state file into a new FilePV priv_validator_state.json
    ///
    /// From a slot file or JSON state file, for FilePV, tmkms or another
    /// signer.
    /// Stop the signer on FROM first
    Export {
        /// The state file to copy
        #[arg(long)]
        from: PathBuf,
        /// The priv_validator_state.json to make (must not exist)
        #[arg(long)]
        to: PathBuf,
    },
    /// Print a state file's format and mark
    Show {
        /// The state file
        file: PathBuf,
    },
}

/// `p2p-conn state ...`.
pub fn run(cmd: StateCmd) -> Result<(), CliError> {
    let (from, to, format) = match cmd {
        StateCmd::Show { file } => {
            let format = state_file::format_of(&file).map_err(SignerError::from)?;
            let state = state_file::load(&file).map_err(SignerError::from)?;
            let name = match format {
                state_file::Format::Slots => "p2p-conn slot state file",
                _ => "FilePV priv_validator_state.json",
            };
            println!("{}: {name}; mark {}", file.display(), state.hrs());
            return Ok(());
        }
        StateCmd::Import { from, to } => (from, to, state_file::Format::Slots),
        StateCmd::Export { from, to } => (from, to, state_file::Format::FilePv),
    };
    let state = convert_state_file(&from, &to, format)?;
    println!(
        "{} -> {}: mark {}",
        from.display(),
        to.display(),
        state.hrs()
    );
    Ok(())
}
