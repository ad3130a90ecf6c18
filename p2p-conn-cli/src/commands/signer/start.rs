//! The signer's start, from a checked [`Plan`]: every key opened first
//! (a key file or a token's PIN file refused if others may read it), then
//! the connection identity
//! (refused likewise),
//! then each chain's state file and its folder checked (refused if others
//! may read or write the file, or write the folder), then opened
//! (created with `create_state`) under its own [`GuardedSigner`], shared
//! by that chain's nodes through one [`SharedSigner`]; the start told per
//! chain.

use std::path::Path;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use p2p_conn::{keyfile, Identity, PublicKey};
use p2p_conn_privval::{state_file, GuardedSigner, SharedSigner, SignerError, ValidatorKey};
use serde_json::json;

use super::key::{KeySpec, OpenedKey};
use super::metrics::{self, SignWatch};
use super::plan::{ChainPlan, Plan};
use super::recording::{Mark, SharedMark};
use super::report::Out;
use crate::error::CliError;
use crate::private_file;

/// One chain being served: its guard and state file, and its mark as the
/// reports show it.
pub(super) struct Chain {
    pub(super) signer: SharedSigner<GuardedSigner>,
    pub(super) mark: SharedMark,
    /// The chain as its metrics label it.
    pub(super) label: metrics::Chain,
    /// The slow-signing watch over this chain's signatures.
    pub(super) watch: Arc<SignWatch>,
    /// This chain's nodes connected now.
    pub(super) connected: Arc<AtomicUsize>,
}

/// The validator key `key` names, as `--key` (and a config's `key`)
/// takes it ([`super::key`]). The one place a key is opened: a key file,
/// or a token's PIN file, only its owner may read ([`private_file`]).
fn load_key(key: &str) -> Result<OpenedKey, CliError> {
    let spec = KeySpec::parse(key)?;
    match &spec {
        KeySpec::File(path) => private_file::check_file(path, "validator key")?,
        KeySpec::Pkcs11(uri) => {
            if let Some(pin) = uri.pin_file() {
                private_file::check_file(pin, "PIN file")?;
            }
        }
    }
    spec.open()
}

/// A state file, and its folder, that only its owner may write
/// ([`private_file`]): the file may not exist yet (`create_state`).
fn check_state(path: &Path) -> Result<(), CliError> {
    private_file::check_folder_of(path, "state file")?;
    if std::fs::symlink_metadata(path).is_ok() {
        private_file::check_file(path, "state file")?;
    }
    Ok(())
}

/// Read every key and the identity, then open every chain's state file,
/// and tell the start.
pub(super) fn open(plan: &Plan, out: &Out) -> Result<(Vec<Chain>, Identity), CliError> {
    // Every file is read before `create_state` may write one.
    let keys: Vec<OpenedKey> = plan
        .chains
        .iter()
        .map(|c| load_key(&c.key))
        .collect::<Result<_, _>>()?;
    let identity = match &plan.identity {
        Some(path) => {
            // A private key too: whoever reads it may pose as the signer
            // (over noise://, the one peer the node takes).
            private_file::check_file(path, "connection identity")?;
            keyfile::load(path)?
        }
        None => Identity::generate(),
    };
    if keys
        .iter()
        .any(|k| identity.public_key().as_bytes() == &k.public)
    {
        return Err(CliError::usage(
            "--identity is the validator key: the connection identity must be a key of its own \
             (`p2p-conn keygen --out FILE`)",
        ));
    }
    for c in &plan.chains {
        check_state(&c.state)?;
    }
    let mut chains = Vec::new();
    let any_file = keys.iter().any(|k| k.backend == "file");
    for (c, key) in plan.chains.iter().zip(keys) {
        let validator = PublicKey::from_bytes(key.public);
        let (backend, key_name) = (key.backend, key.name);
        let signer = open_state(c, key.key)?;
        let mark = signer.state().hrs();
        let address_hex = hex::encode_upper(validator.node_id().as_bytes());
        let pub_key = base64::engine::general_purpose::STANDARD.encode(validator.as_bytes());
        let index = chains.len();
        let shown: Vec<String> = plan
            .nodes
            .iter()
            .filter(|n| n.chain == index)
            .map(|n| n.address.to_string())
            .collect();
        if out.json {
            out.json(
                "start",
                json!({
                    "node": shown.first(),
                    "nodes": shown,
                    "validator_address": address_hex,
                    "pub_key": pub_key,
                    "key": { "backend": backend, "name": key_name },
                    "chain_id": c.id,
                    "state_file": c.state.display().to_string(),
                    "state": { "height": mark.height, "round": mark.round, "step": mark.step.as_i8() },
                    "connection_id": identity.node_id().to_string(),
                    "peer_id": identity.public_key().peer_id().to_string(),
                }),
            );
        } else {
            let chain = c.id.as_deref().unwrap_or("any chain: --any-chain");
            let dialing = if shown.is_empty() {
                "no node yet".to_string()
            } else {
                format!("dialing {}", shown.join(", "))
            };
            out.text(&format!(
                "signer for validator {address_hex} ({chain}); state {}: {mark}; \
                 key ({backend}) {key_name}; {dialing}",
                c.state.display(),
            ));
        }
        chains.push(Chain {
            signer: SharedSigner::new(signer),
            mark: Arc::new(Mutex::new(Mark::loaded(mark))),
            label: metrics::Chain::new(c.id.as_deref()),
            watch: SignWatch::new(plan.output.slow_sign),
            connected: Arc::default(),
        });
    }
    if !out.json && any_file {
        out.text(
            "validator keys from key files: each is on disk and in this process's memory, \
             as with CometBFT's FilePV",
        );
    }
    Ok((chains, identity))
}

/// Open the chain's state file, creating it first with `create_state`.
fn open_state(c: &ChainPlan, key: Box<dyn ValidatorKey>) -> Result<GuardedSigner, CliError> {
    let path = &c.state;
    let exists = std::fs::symlink_metadata(path).is_ok();
    if !exists {
        if !c.create_state {
            return Err(CliError::usage(format!(
                "state file {} does not exist. Bring the validator's own \
                 priv_validator_state.json (from the node's data/ folder, with the node \
                 stopped), or, for a key that has never signed, pass --create-state (in a \
                 config: `create_state = true`) to start one at height 0",
                path.display()
            )));
        }
        state_file::write_new(path, &Default::default(), format_for_name(path))
            .map_err(SignerError::from)?;
    }
    let signer = GuardedSigner::open(key, path)?;
    Ok(match &c.id {
        Some(id) => signer.with_chain_id(id.clone()),
        // --any-chain.
        None => signer,
    })
}

/// The format `--create-state` (and `state import`) makes for `path`: a
/// name ending in `.json` is FilePV's `priv_validator_state.json`, any
/// other p2p-conn's slot file (one sync per signature).
fn format_for_name(path: &Path) -> state_file::Format {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
    {
        state_file::Format::FilePv
    } else {
        state_file::Format::Slots
    }
}
