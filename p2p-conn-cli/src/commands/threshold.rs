//! `p2p-conn threshold`: a validator key's shares for threshold signing
//! (`spec/threshold.md`): `split` a `priv_validator_key.json` into n share
//! files, any t of which sign; `check` that shares recombine to the
//! validator's public key; `show` a share's public parts. The shares, their
//! file format and every check on them are `p2p_conn_privval::threshold`'s;
//! this module reads the flags, applies the CLI's file rules
//! (`crate::private_file`) and words the verdicts. It never prints or
//! writes a signing share or the key.

use std::io::Read;
use std::path::{Path, PathBuf};

use base64::Engine;
use clap::{Args, Subcommand};
use p2p_conn::PublicKey;
use p2p_conn_privval::threshold::{check_shares, KeyShare, ThresholdError};
use zeroize::Zeroizing;

use crate::error::CliError;
use crate::private_file;

/// The largest share file read (a 16-signer file is under 2 KiB; the
/// library's own bound is the same).
const MAX_SHARE_FILE_BYTES: u64 = 16 * 1024;

/// Why 2t > n, for the refusal of a split.
const WHY_MAJORITY: &str = "with 2t > n, any two sets of t cosigners share at least one, whose \
    double-sign guard refuses the second of two conflicting votes";

#[derive(Subcommand)]
pub enum ThresholdCmd {
    /// Split a priv_validator_key.json into N share files, T of which sign
    ///
    /// Writes DIR/share-1.json ... DIR/share-N.json (mode 0600; refuses a
    /// file that exists, and a key file the group or others may read) and
    /// prints the group's public key, which is the validator's. Bounds: 2 ≤
    /// T ≤ N ≤ 16 and 2T > N. This process holds the whole key while it
    /// splits (a trusted dealer); afterwards move the key file off the
    /// machine or destroy it (docs/operator-manual.md, "Threshold signing
    /// (preview)")
    Split(SplitArgs),
    /// Check share files, and that T of them give the validator's key
    ///
    /// One verdict line per share file (readable by its owner only,
    /// well-formed, consistent with its split's public commitment, on the
    /// expected group key), then one for the shares together: at least T of
    /// one split recombine to the validator's public key (in memory only;
    /// nothing is written). The expected key comes from --key or --pub-key;
    /// without either, from the first share file. Exit 0 all pass, 1 any
    /// fails
    Check(CheckArgs),
    /// Show a share file's public parts
    ///
    /// Its index, T and N, the group's public key and address, and this
    /// share's verifying share (public); never the signing share
    Show {
        /// The share file
        #[arg(long)]
        share: PathBuf,
    },
}

#[derive(Args)]
pub struct SplitArgs {
    /// The validator key to split (a CometBFT priv_validator_key.json)
    #[arg(long)]
    key: PathBuf,
    /// T: how many shares sign (at least 2, more than half of N)
    #[arg(long, short = 't')]
    threshold: u16,
    /// N: how many share files (at most 16)
    #[arg(long, short = 'n')]
    shares: u16,
    /// The folder for the share files (created, owner-only, if missing)
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args)]
pub struct CheckArgs {
    /// A share file; give at least T of one split
    #[arg(long = "share", required = true, num_args = 1..)]
    shares: Vec<PathBuf>,
    /// The validator key file whose public key the shares must give
    #[arg(long, conflicts_with = "pub_key")]
    key: Option<PathBuf>,
    /// The validator's public key, base64 (as in genesis.json or
    /// priv_validator_key.json's pub_key.value)
    #[arg(long)]
    pub_key: Option<String>,
}

pub fn run(cmd: ThresholdCmd) -> Result<(), CliError> {
    match cmd {
        ThresholdCmd::Split(args) => split(args),
        ThresholdCmd::Check(args) => check(args),
        ThresholdCmd::Show { share } => show(&share),
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A public key as CometBFT prints a validator's: base64, and its
/// address (uppercase hex).
fn describe_key(key: &[u8; 32]) -> String {
    let address = hex::encode_upper(PublicKey::from_bytes(*key).node_id().as_bytes());
    format!("pub_key {} (address {address})", b64(key))
}

fn failed(e: ThresholdError) -> CliError {
    CliError::Failed(e.to_string())
}

fn split(args: SplitArgs) -> Result<(), CliError> {
    let SplitArgs {
        key,
        threshold,
        shares,
        out,
    } = args;
    private_file::check_file(&key, "validator key")?;
    let identity = p2p_conn_privval::load_validator_key(&key)?;
    let public = *identity.public_key().as_bytes();
    let parts = match KeyShare::split(&identity, threshold, shares, &mut rand_core::OsRng) {
        Err(e @ ThresholdError::Parameters { .. }) => {
            return Err(CliError::usage(format!("{e} ({WHY_MAJORITY})")))
        }
        other => other.map_err(failed)?,
    };
    drop(identity);
    let paths: Vec<PathBuf> = (1..=shares)
        .map(|i| out.join(format!("share-{i}.json")))
        .collect();
    if let Some(p) = paths.iter().find(|p| p.symlink_metadata().is_ok()) {
        return Err(CliError::usage(format!(
            "{} exists: refusing to replace a share file (choose another --out)",
            p.display()
        )));
    }
    create_private_dir(&out)?;
    for (i, (part, path)) in parts.iter().zip(&paths).enumerate() {
        if let Err(e) = part.save_new(path) {
            // All or nothing: remove the files this run wrote.
            for written in &paths[..i] {
                let _ = std::fs::remove_file(written);
            }
            return Err(failed(e));
        }
    }
    println!(
        "split the validator key {} into {shares} shares, any {threshold} of which sign",
        key.display()
    );
    println!("group {}", describe_key(&public));
    for p in &paths {
        println!("wrote {}", p.display());
    }
    println!(
        "now move {} off this machine or destroy it: whoever holds it signs alone, \
         and with it the shares protect nothing; give each share file to one cosigner",
        key.display()
    );
    Ok(())
}

/// `dir`, created owner-only (0700) if missing.
fn create_private_dir(dir: &Path) -> Result<(), CliError> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|e| CliError::Failed(format!("cannot create {}: {e}", dir.display())))
}

/// A share file's text, read whole (bounded), zeroized when dropped.
fn read_share(path: &Path) -> Result<Zeroizing<String>, String> {
    let file = std::fs::File::open(path)
        .map_err(|e| format!("cannot read share file {}: {e}", path.display()))?;
    let mut text = Zeroizing::new(String::new());
    file.take(MAX_SHARE_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read share file {}: {e}", path.display()))?;
    if text.len() as u64 > MAX_SHARE_FILE_BYTES {
        return Err(format!("share file {}: too large", path.display()));
    }
    Ok(text)
}

/// The public fields of a share file this module prints; the library
/// checks them (and the rest) in [`KeyShare::parse`].
#[derive(serde::Deserialize)]
struct PublicParts {
    group_public_key: String,
    verifying_shares: Vec<String>,
}

fn public_parts(text: &str) -> Option<(PublicParts, [u8; 32])> {
    let parts: PublicParts = serde_json::from_str(text).ok()?;
    let group = base64::engine::general_purpose::STANDARD
        .decode(&parts.group_public_key)
        .ok()?
        .try_into()
        .ok()?;
    Some((parts, group))
}

/// Read and check the share file at `path`: owner-only, and every check of
/// [`KeyShare::parse`] against `expected` (or, if `None`, the file's own
/// group key).
fn load(path: &Path, expected: Option<&[u8; 32]>) -> Result<(KeyShare, PublicParts), String> {
    private_file::check_file(path, "share file").map_err(|e| e.0)?;
    let text = read_share(path)?;
    let with_path = |e: ThresholdError| match e {
        ThresholdError::ShareFile { problem, .. } => {
            format!("share file {}: {problem}", path.display())
        }
        e => format!("{}: {e}", path.display()),
    };
    let Some((parts, own)) = public_parts(&text) else {
        // Not even the public fields: the library words it.
        return Err(match KeyShare::parse(&text, &[0; 32]) {
            Err(e) => with_path(e),
            Ok(_) => format!("share file {}: not a share file", path.display()),
        });
    };
    let share = KeyShare::parse(&text, expected.unwrap_or(&own)).map_err(with_path)?;
    Ok((share, parts))
}

fn expected_key(args: &CheckArgs) -> Result<Option<[u8; 32]>, CliError> {
    if let Some(key) = &args.key {
        private_file::check_file(key, "validator key")?;
        let id = p2p_conn_privval::load_validator_key(key)?;
        return Ok(Some(*id.public_key().as_bytes()));
    }
    let Some(text) = &args.pub_key else {
        return Ok(None);
    };
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .map(Some)
        .ok_or_else(|| CliError::usage("--pub-key: not 32 bytes in base64"))
}

fn check(args: CheckArgs) -> Result<(), CliError> {
    let mut expected = expected_key(&args)?;
    let from_file = expected.is_none();
    let mut good = Vec::new();
    let mut failures = 0usize;
    for path in &args.shares {
        match load(path, expected.as_ref()) {
            Ok((share, _)) => {
                expected.get_or_insert(share.group_public_key());
                println!(
                    "ok    {}: share {} of {}, threshold {}",
                    path.display(),
                    share.index(),
                    share.signers(),
                    share.threshold()
                );
                good.push(share);
            }
            Err(e) => {
                failures += 1;
                println!("FAIL  {e}");
            }
        }
    }
    let Some(key) = expected else {
        return Err(CliError::Failed(
            "no share file could be read: nothing to check".into(),
        ));
    };
    let against = if from_file {
        "the first share file's group key (give --key or --pub-key to check against the chain's)"
    } else {
        "the validator's key"
    };
    match check_shares(&good, &key) {
        Ok(()) => println!(
            "ok    {} shares recombine to {against}: {}",
            good.len(),
            describe_key(&key)
        ),
        Err(e) => {
            failures += 1;
            println!("FAIL  the shares together: {e}");
        }
    }
    if failures > 0 {
        return Err(CliError::Failed(format!(
            "{failures} check(s) failed: these shares cannot be trusted to sign as {}",
            describe_key(&key)
        )));
    }
    Ok(())
}

fn show(path: &Path) -> Result<(), CliError> {
    let (share, parts) = load(path, None).map_err(CliError::Failed)?;
    let own = parts
        .verifying_shares
        .get(usize::from(share.index()) - 1)
        .cloned()
        .unwrap_or_default();
    println!("{}", path.display());
    println!(
        "share {} of {}, threshold {}",
        share.index(),
        share.signers(),
        share.threshold()
    );
    println!("group {}", describe_key(&share.group_public_key()));
    println!("verifying share {own}");
    Ok(())
}
