//! `p2p-conn state`: move a signer's high-water mark between FilePV's
//! `priv_validator_state.json` and p2p-conn's slot state file, bring one
//! from tmkms's consensus state file, or show it (the library's
//! `state_file` and `convert_state_file` do the work).

use std::path::PathBuf;

use p2p_conn_privval::{convert_state_file, state_file, SignerError};

use crate::error::CliError;

/// `p2p-conn state`: move a high-water mark between FilePV's
/// `priv_validator_state.json` and p2p-conn's slot file, bring one from
/// tmkms, or show one.
#[derive(clap::Subcommand)]
pub enum StateCmd {
    /// Copy a state file into a new p2p-conn slot state file
    ///
    /// Reads a FilePV priv_validator_state.json, a tmkms consensus state
    /// file (the state_file of its tmkms.toml) or a p2p-conn state file,
    /// told apart by their content (a file that mixes them, or is cut
    /// short, is refused), and writes a new p2p-conn slot state file (one fdatasync
    /// per signature instead of FilePV's new file, sync and rename).
    /// tmkms records the block it signed last but no sign bytes: at
    /// exactly tmkms's last height, round and step the signer signs that
    /// block again (as tmkms would) and refuses any other; above it, it
    /// signs as usual. Stop the node, tmkms or signer that uses FROM first,
    /// and never start one on FROM again
    Import {
        /// The state file to copy: FilePV's, tmkms's or p2p-conn's (a
        /// running p2p-conn signer on it is refused: its lock is taken)
        #[arg(long)]
        from: PathBuf,
        /// The slot state file to make (must not exist)
        #[arg(long)]
        to: PathBuf,
    },
    /// Copy a state file into a new FilePV priv_validator_state.json
    ///
    /// From a slot file or JSON state file (FilePV's or tmkms's), for
    /// FilePV or another signer. FilePV's format has no place for the
    /// block a mark from tmkms records: FilePV then refuses that mark's
    /// own height, round and step, and signs above it.
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
            let name = format_name(format);
            println!(
                "{}: {name}; mark {}{}",
                file.display(),
                state.hrs(),
                block_of(&state)
            );
            return Ok(());
        }
        StateCmd::Import { from, to } => (from, to, state_file::Format::Slots),
        StateCmd::Export { from, to } => (from, to, state_file::Format::FilePv),
    };
    let source = state_file::format_of(&from).map_err(SignerError::from)?;
    let state = convert_state_file(&from, &to, format)?;
    println!(
        "{} ({}) -> {}: mark {}{}",
        from.display(),
        format_name(source),
        to.display(),
        state.hrs(),
        block_of(&state)
    );
    if state.block_id().is_some() {
        if format == state_file::Format::Slots {
            println!(
                "note: tmkms records no sign bytes, only the block it signed: at exactly {} \
                 the signer signs that block again, as tmkms would (a request tmkms was \
                 stopped in the middle of), and refuses any other; above it, it signs as usual",
                state.hrs()
            );
        } else {
            println!(
                "note: FilePV's format has no place for the block {} records: FilePV will \
                 refuse {} itself, and sign above it",
                from.display(),
                state.hrs()
            );
        }
    }
    Ok(())
}

/// `, tmkms's block HASH` (or nil) for a mark with a block ID instead of
/// sign bytes; empty for any other.
fn block_of(state: &p2p_conn_privval::guard::SignState) -> String {
    match state.block_id() {
        Some(id) if id.is_nil() => ", tmkms's block nil".to_string(),
        Some(id) => format!(", tmkms's block {}", hex::encode_upper(&id.hash)),
        None => String::new(),
    }
}

/// How `state show` and `state import` name a format.
fn format_name(format: state_file::Format) -> &'static str {
    match format {
        state_file::Format::Slots => "p2p-conn slot state file",
        state_file::Format::Tmkms => "tmkms consensus state file",
        _ => "FilePV priv_validator_state.json",
    }
}
