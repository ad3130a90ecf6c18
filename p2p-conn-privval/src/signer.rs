//! The [`Signer`] trait a remote signer implements, and [`GuardedSigner`],
//! an Ed25519 signer with the double-sign guard and a state file, signing
//! with any [`ValidatorKey`] (the soft key or a PKCS#11 token).
//!
//! # Design
//! - [`Signer`] is what a signer-side endpoint (a later part) serves: one
//!   method per request the node sends. It knows no wire format beyond the
//!   message types, and no connection.
//! - [`GuardedSigner`] holds an Ed25519 [`ValidatorKey`] (the soft key,
//!   [`Identity`], loaded from a CometBFT `priv_validator_key.json` with
//!   [`load_validator_key`], or a key in a token,
//!   `pkcs11::Pkcs11Key`), the
//!   [`SignState`] and the state file's path. For each vote or proposal it
//!   asks the [`guard`](super::guard), and for a new HRS it signs, writes
//!   the new state with [`state_file::save`] (synced and renamed into
//!   place), and only then returns the signature. A failed write returns
//!   an error and leaves the state in memory as it was: the signature made
//!   is dropped, never released.
//! - Vote extensions follow FilePV (v0.38.26, v1.0.1): a non-nil
//!   precommit's extension is signed afresh on every request, re-served
//!   votes included; an extension on any other vote is refused. With
//!   `sign_extension` false (v1's `skip_extension_signing`) nothing is
//!   checked or signed, and the returned `extension_signature` is empty
//!   (FilePV leaves whatever the request carried).
//!
//! # Guarantees
//! - Every vote and proposal signature [`GuardedSigner`] returns was
//!   allowed by the guard and its state is on disk first.
//! - A [`SignerError`] never contains key material or a PIN.
//! - A key that fails to sign (a token's session dropped) fails that
//!   request only: nothing is saved or released, and the next request
//!   signs again once the key does.
//!
//! - [`GuardedSigner`] refuses v1's `SignBytesRequest` unless
//!   [`GuardedSigner::allow_sign_bytes`] is set: raw bytes pass no guard,
//!   and could be the canonical bytes of a conflicting vote. FilePV signs
//!   them; no CometBFT line's consensus asks for them.
//!
//! - One signer per state file, by whatever path it is named: a lock in
//!   its folder, and no second name for the file itself (checked at open
//!   and before every save; [`state_file`]'s module docs).
//! - One signer for several nodes: [`SharedSigner`] serves every
//!   connection through one signer, one request at a time, so a validator
//!   on two nodes (sentries, a node and a second process) has one guard
//!   and one state file. The same height, round and step with the same
//!   sign bytes gets the same signature on every connection; a
//!   conflicting request is refused on every connection, whichever asked
//!   first.
//!
//! # Not provided
//! - Protection against a copy of the state file: two signers started from
//!   two copies each keep their own mark.
//! - A guard on raw bytes once [`GuardedSigner::allow_sign_bytes`] is set:
//!   they are signed as given.
//! - Key types other than Ed25519. CometBFT v0.40.0's FilePV signs with
//!   the key its `priv_validator_key.json` holds: Ed25519
//!   (`tendermint/PrivKeyEd25519`, what `cometbft init` makes), secp256k1
//!   (`tendermint/PrivKeySecp256k1`), secp256k1eth
//!   (`tendermint/PrivKeySecp256k1eth`), ML-DSA-65
//!   (`cometbft/PrivKeyMlDsa65`) and, in builds with the `bls12381` tag,
//!   BLS12-381 (`cometbft/PrivKeyBls12_381`). Every type but Ed25519 is
//!   refused with [`SignerError::KeyType`], which names it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::guard::{self, Decision, GuardError, SignState};
use super::messages::{crypto_public_key, CryptoPublicKey, Proposal, Vote};
use super::sign_bytes::vote_extension_sign_bytes;
use super::state_file::{self, StateFileError};
use crate::atomic_file::parent_dir;
use crate::tmkms_key::TmkmsKeyProblem;
use p2p_conn::keyfile::KeyFileError;
#[cfg(doc)]
use p2p_conn::Identity;

mod key;
mod mark;

pub use key::{load_validator_key, ValidatorKey};
pub(crate) use mark::Mark;

/// Errors of the signer layer: the guard's refusals, the state file's and
/// the key file's errors, and the application's own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SignerError {
    /// The double-sign guard refused the request.
    #[error("refused: {0}")]
    Refused(#[from] GuardError),
    /// The request is for another chain than the signer serves.
    #[error("the request is for chain {got:?}, this signer serves {expected:?}")]
    WrongChainId {
        /// The chain the signer serves.
        expected: String,
        /// The request's chain.
        got: String,
    },
    /// The state file could not be read, written or trusted: nothing was
    /// signed or released.
    #[error(transparent)]
    State(#[from] StateFileError),
    /// Another signer (in this process or another) holds the state file's
    /// lock: two signers on one state file could both sign the same height.
    #[error("state file {} is in use by another signer (lock {} is held)", .path.display(), .lock.display())]
    StateLocked {
        /// The state file.
        path: PathBuf,
        /// The lock file beside it.
        lock: PathBuf,
    },
    /// The lock file beside the state file could not be opened or locked.
    #[error("cannot lock state file {} (lock {}): {source}", .path.display(), .lock.display())]
    LockFailed {
        /// The state file.
        path: PathBuf,
        /// The lock file beside it.
        lock: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The validator key file could not be loaded.
    #[error("{0}")]
    Key(#[from] KeyFileError),
    /// The validator key file's `pub_key` or `address` does not belong to
    /// its private key.
    #[error("validator key file {}: {field} does not match priv_key", .path.display())]
    KeyMismatch {
        /// The file.
        path: PathBuf,
        /// `pub_key.value` or `address`.
        field: &'static str,
    },
    /// The key file has `priv_key` but neither `address` nor `pub_key`: the
    /// shape of a node's `node_key.json` (its p2p identity), which is not
    /// the validator's key. FilePV always writes all three.
    #[error("{} holds only priv_key, as a node_key.json does (a node's p2p identity, not its validator key): give the validator's priv_validator_key.json, which has address and pub_key beside priv_key", .path.display())]
    NotValidatorKey {
        /// The file.
        path: PathBuf,
    },
    /// The key is of a type this signer does not sign with (only Ed25519):
    /// a `priv_validator_key.json` of another `priv_key.type`, or a token
    /// key that is not `CKK_EC_EDWARDS` on edwards25519.
    #[error("{key}: the key type is {key_type}; p2p-conn signs with Ed25519 keys only")]
    KeyType {
        /// The key file, or the token and object.
        key: String,
        /// The type found.
        key_type: String,
    },
    /// A PKCS#11 URI (`pkcs11:...`) that does not name a key this signer
    /// can open; the message says what is wrong.
    #[error("key URI: {0}")]
    KeyUri(String),
    /// The PIN file named by the URI's `pin-source` could not be read.
    #[error("cannot read the PIN file {}: {source}", .path.display())]
    PinFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A PKCS#11 call failed: the module, the token, the login, the object,
    /// or a signature. The request fails; a dropped session is reopened at
    /// the next.
    #[error("{key}: {action} failed: {error}")]
    Token {
        /// The token and object (the URI without its query).
        key: String,
        /// What was being done.
        action: &'static str,
        /// The PKCS#11 error (its `CKR_` name in Rust's spelling).
        error: String,
    },
    /// The key's public key is not the one expected: the operator's
    /// (`x-pub-key`), or the token's public key object does not belong to
    /// its private key (a signature made with one does not verify with
    /// the other).
    #[error("{key}: {what}")]
    PublicKeyMismatch {
        /// The token and object.
        key: String,
        /// What differs, with the public keys in base64.
        what: String,
    },
    /// The key file is not JSON, and not a tmkms softsign key either.
    #[error("key file {}: {problem}", .path.display())]
    TmkmsKey {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: TmkmsKeyProblem,
    },
    /// A `SignBytesRequest` reached a [`GuardedSigner`] that does not sign
    /// raw bytes (the default: see [`GuardedSigner::allow_sign_bytes`]).
    #[error("this signer does not sign raw bytes (SignBytesRequest): they could be a vote or proposal the guard never saw")]
    SignBytesRefused,
    /// The application's signer failed (an HSM, a remote KMS...).
    #[error("signer failed: {0}")]
    Backend(Box<dyn std::error::Error + Send + Sync>),
}

/// What a remote signer does for its node. A signer-side endpoint calls
/// these methods, one request at a time, and sends the result (or the
/// error as a `RemoteSignerError`) back.
pub trait Signer {
    /// The validator's public key (`PubKeyRequest`, for `chain_id`).
    fn public_key(&mut self, chain_id: &str) -> Result<CryptoPublicKey, SignerError>;

    /// Sign `vote` on `chain_id` (`SignVoteRequest`), returning it with
    /// its `signature` (and, when `sign_extension` and the vote is a
    /// non-nil precommit, its `extension_signature`) set. The timestamp may
    /// be replaced by an earlier one (a re-served signature). MUST refuse
    /// anything that could be a double sign. `sign_extension` is true for
    /// v0.38.26-line nodes, `!skip_extension_signing` for v1.0.1, and
    /// false for v0.34.35 and v0.37.18, which have no extensions.
    fn sign_vote(
        &mut self,
        chain_id: &str,
        vote: Vote,
        sign_extension: bool,
    ) -> Result<Vote, SignerError>;

    /// Sign `proposal` on `chain_id` (`SignProposalRequest`), as
    /// [`Signer::sign_vote`].
    fn sign_proposal(
        &mut self,
        chain_id: &str,
        proposal: Proposal,
    ) -> Result<Proposal, SignerError>;

    /// Sign raw bytes (v1's `SignBytesRequest`). No guard can apply: a
    /// signer SHOULD refuse unless its node needs it ([`GuardedSigner`]
    /// refuses by default).
    fn sign_bytes(&mut self, bytes: &[u8]) -> Result<Vec<u8>, SignerError>;

    /// Answer a `PingRequest`. The default does nothing.
    fn ping(&mut self) -> Result<(), SignerError> {
        Ok(())
    }
}

/// An Ed25519 signer that guards every vote and proposal against double
/// signing and persists its high-water mark before a signature leaves
/// (module docs), with its key wherever the [`ValidatorKey`] keeps it.
pub struct GuardedSigner {
    key: Box<dyn ValidatorKey>,
    /// The key's public key, checked to be Ed25519 at open.
    public: [u8; 32],
    /// The mark and its state file, locked while the signer lives.
    mark: Mark,
    chain_id: Option<String>,
    sign_bytes: bool,
}

impl std::fmt::Debug for GuardedSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedSigner")
            .field("public_key", &hex::encode(self.public))
            .field("mark", &self.mark)
            .field("chain_id", &self.chain_id)
            .field("sign_bytes", &self.sign_bytes)
            .finish_non_exhaustive()
    }
}

impl GuardedSigner {
    /// A signer with `key` and the state file at `state_path`, which must
    /// exist (create one with [`state_file::create_new`], or bring FilePV's).
    ///
    /// The path must be the state file's one name: a regular file, not a
    /// symbolic link, with one hard link, not a mount point
    /// ([`StateFileError::Path`] otherwise; `state_file`'s module docs
    /// say why). Then it takes an exclusive lock on `<state_path>.lock`
    /// (created if missing, and left in place), held until the signer is
    /// dropped: a second signer on the same state file, in this process or
    /// another and by any path to its folder, gets
    /// [`SignerError::StateLocked`]. The lock is advisory (`flock` on
    /// Unix): it stops signers that take it, as every `GuardedSigner` does.
    /// Holding it, the signer removes the temporary files a killed save
    /// left beside the state file, and loads the state.
    ///
    /// Before each save the signer checks that the path still leads to the
    /// file it last wrote, with one name; otherwise it signs nothing
    /// ([`state_file::StatePathProblem::Gone`],
    /// [`state_file::StatePathProblem::Replaced`],
    /// [`state_file::StatePathProblem::HardLinks`]).
    ///
    /// `key` is an [`Identity`] (the soft key), a
    /// `pkcs11::Pkcs11Key`, or any other [`ValidatorKey`]; one whose public
    /// key is not Ed25519 is refused ([`SignerError::KeyType`]).
    pub fn open(
        key: impl ValidatorKey + 'static,
        state_path: impl AsRef<Path>,
    ) -> Result<Self, SignerError> {
        let public = key::ed25519_public_key(&key)?;
        let mark = Mark::open(state_path.as_ref())?;
        Ok(GuardedSigner {
            key: Box::new(key),
            public,
            mark,
            chain_id: None,
            sign_bytes: false,
        })
    }

    /// Serve only `chain_id`: requests for other chains are refused with
    /// [`SignerError::WrongChainId`].
    pub fn with_chain_id(mut self, chain_id: impl Into<String>) -> Self {
        self.chain_id = Some(chain_id.into());
        self
    }

    /// Sign raw bytes (v1's `SignBytesRequest`), as FilePV does. Off by
    /// default: those bytes pass no guard, so a node (or whoever speaks
    /// for it) could have the canonical bytes of a conflicting vote or
    /// proposal signed through them. No CometBFT line's consensus sends
    /// `SignBytesRequest` (v1.0.1 serves it for applications); turn it on
    /// only for a node that needs it and is trusted not to abuse it.
    pub fn allow_sign_bytes(mut self) -> Self {
        self.sign_bytes = true;
        self
    }

    /// The high-water mark: as last saved, or, after a save the disk
    /// failed to make durable ([`StateFileError::NotDurable`]), the mark
    /// that save wrote (the disk may hold it, so the guard counts it), to
    /// be saved again before any signature leaves.
    pub fn state(&self) -> &SignState {
        self.mark.state()
    }

    /// The Ed25519 public key.
    pub fn ed25519_public_key(&self) -> [u8; 32] {
        self.public
    }

    fn check_chain(&self, chain_id: &str) -> Result<(), SignerError> {
        match &self.chain_id {
            Some(expected) if expected != chain_id => Err(SignerError::WrongChainId {
                expected: expected.clone(),
                got: chain_id.to_owned(),
            }),
            _ => Ok(()),
        }
    }

    fn sign_raw(&mut self, bytes: &[u8]) -> Result<Vec<u8>, SignerError> {
        self.key.sign(bytes)
    }

    /// Sign `sign_bytes` at a new HRS, persist, then hand the signature out.
    fn sign_and_persist(
        &mut self,
        hrs: guard::Hrs,
        sign_bytes: Vec<u8>,
    ) -> Result<Vec<u8>, SignerError> {
        let signature = self.sign_raw(&sign_bytes)?;
        self.mark
            .save(SignState::new(hrs, sign_bytes, signature.clone()))?;
        Ok(signature)
    }
}

impl Signer for GuardedSigner {
    fn public_key(&mut self, chain_id: &str) -> Result<CryptoPublicKey, SignerError> {
        self.check_chain(chain_id)?;
        Ok(CryptoPublicKey {
            sum: Some(crypto_public_key::Key::Ed25519(
                self.ed25519_public_key().to_vec(),
            )),
        })
    }

    fn sign_vote(
        &mut self,
        chain_id: &str,
        mut vote: Vote,
        sign_extension: bool,
    ) -> Result<Vote, SignerError> {
        self.check_chain(chain_id)?;
        let decision = guard::check_vote(self.mark.state(), chain_id, &vote)?;
        let extension_signature = if sign_extension && guard::check_extension(&vote)? {
            self.sign_raw(&vote_extension_sign_bytes(chain_id, &vote))?
        } else {
            Vec::new()
        };
        match decision {
            Decision::Sign { hrs, sign_bytes } => {
                vote.signature = self.sign_and_persist(hrs, sign_bytes)?;
            }
            Decision::Reuse {
                signature,
                timestamp,
            } => {
                self.mark.make_durable()?;
                vote.signature = signature;
                vote.timestamp = timestamp;
            }
        }
        vote.extension_signature = extension_signature;
        Ok(vote)
    }

    fn sign_proposal(
        &mut self,
        chain_id: &str,
        mut proposal: Proposal,
    ) -> Result<Proposal, SignerError> {
        self.check_chain(chain_id)?;
        match guard::check_proposal(self.mark.state(), chain_id, &proposal)? {
            Decision::Sign { hrs, sign_bytes } => {
                proposal.signature = self.sign_and_persist(hrs, sign_bytes)?;
            }
            Decision::Reuse {
                signature,
                timestamp,
            } => {
                self.mark.make_durable()?;
                proposal.signature = signature;
                proposal.timestamp = timestamp;
            }
        }
        Ok(proposal)
    }

    fn sign_bytes(&mut self, bytes: &[u8]) -> Result<Vec<u8>, SignerError> {
        if !self.sign_bytes {
            return Err(SignerError::SignBytesRefused);
        }
        self.sign_raw(bytes)
    }
}

/// Takes the exclusive lock beside `state_path`, in its folder's real
/// path (so the message names one file for every path to the folder; the
/// lock is that folder's one file either way).
fn lock_state(state_path: &Path) -> Result<std::fs::File, SignerError> {
    let dir = parent_dir(state_path);
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut name = state_path.file_name().unwrap_or_default().to_owned();
    name.push(".lock");
    let lock = dir.join(name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .map_err(|source| SignerError::LockFailed {
            path: state_path.to_path_buf(),
            lock: lock.clone(),
            source,
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(SignerError::StateLocked {
            path: state_path.to_path_buf(),
            lock,
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(SignerError::LockFailed {
            path: state_path.to_path_buf(),
            lock,
            source,
        }),
    }
}

/// Copy the mark of the state file `from` (either format) into a new state
/// file `to` of `format`, holding `from`'s signer lock meanwhile, so that
/// no signer moves the mark during the copy ([`SignerError::StateLocked`]
/// if one runs on it). `to` must not exist. The mark copied.
///
/// This is how a mark moves between FilePV's `priv_validator_state.json`
/// and p2p-conn's slot file (`p2p-conn state import` / `export`). The
/// copy is a second file: run the next signer (or FilePV) on `to` only,
/// and keep `from` away from any signer.
pub fn convert_state_file(
    from: impl AsRef<Path>,
    to: impl AsRef<Path>,
    format: state_file::Format,
) -> Result<SignState, SignerError> {
    let from = from.as_ref();
    state_file::inspect(from)?;
    let _lock = lock_state(from)?;
    let state = state_file::load(from)?;
    state_file::write_new(to, &state, format)?;
    Ok(state)
}

/// One [`Signer`] shared by several connections: every clone serves
/// through the same signer, one request at a time (a lock held from the
/// request to its answer, the state file's save included), so one guard
/// and one state file decide for every node a validator runs on. Give each
/// endpoint its own clone.
///
/// A request that panicked inside the signer leaves the lock poisoned:
/// every later request is then refused ([`SignerError::Backend`]), as the
/// signer's state can no longer be trusted.
pub struct SharedSigner<S> {
    inner: Arc<Mutex<S>>,
}

impl<S> Clone for SharedSigner<S> {
    fn clone(&self) -> Self {
        SharedSigner {
            inner: self.inner.clone(),
        }
    }
}

impl<S> std::fmt::Debug for SharedSigner<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSigner")
            .field("clones", &Arc::strong_count(&self.inner))
            .finish_non_exhaustive()
    }
}

impl<S> SharedSigner<S> {
    /// Share `signer`.
    pub fn new(signer: S) -> SharedSigner<S> {
        SharedSigner {
            inner: Arc::new(Mutex::new(signer)),
        }
    }

    /// The signer, locked: no request is served while the guard lives.
    pub fn lock(&self) -> Result<MutexGuard<'_, S>, SignerError> {
        self.inner.lock().map_err(|_| {
            SignerError::Backend("a request panicked inside the shared signer; refusing all".into())
        })
    }
}

impl<S: Signer> Signer for SharedSigner<S> {
    fn public_key(&mut self, chain_id: &str) -> Result<CryptoPublicKey, SignerError> {
        self.lock()?.public_key(chain_id)
    }

    fn sign_vote(
        &mut self,
        chain_id: &str,
        vote: Vote,
        sign_extension: bool,
    ) -> Result<Vote, SignerError> {
        self.lock()?.sign_vote(chain_id, vote, sign_extension)
    }

    fn sign_proposal(
        &mut self,
        chain_id: &str,
        proposal: Proposal,
    ) -> Result<Proposal, SignerError> {
        self.lock()?.sign_proposal(chain_id, proposal)
    }

    fn sign_bytes(&mut self, bytes: &[u8]) -> Result<Vec<u8>, SignerError> {
        self.lock()?.sign_bytes(bytes)
    }

    fn ping(&mut self) -> Result<(), SignerError> {
        self.lock()?.ping()
    }
}

#[cfg(test)]
mod disk_faults;
