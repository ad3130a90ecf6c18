//! Key shares: a validator's Ed25519 key split t-of-n by a trusted dealer,
//! one share file per cosigner, loaded with its checks, and the check that
//! t shares recombine to the validator's public key.
//!
//! # Design
//! - The validator's key is a 32-byte seed; its secret scalar is the first
//!   half of SHA-512 of the seed, clamped (RFC 8032 §5.1.5), and its public
//!   key that scalar times the base point. FROST's Ed25519 signing key is
//!   the same scalar reduced mod l: the base point has order l, so the
//!   group's public key is the validator's (tested).
//! - [`KeyShare::split`] is `frost_ed25519::keys::split` (Shamir's sharing
//!   with the dealer's Feldman commitment, RFC 9591 appendix C), with the
//!   identifiers 1..=n.
//! - A share file is JSON (format below), written owner-only and never
//!   over an existing file. It carries the dealer's commitment to the
//!   polynomial (t points, public), from which every verifying share and
//!   the group key follow: [`KeyShare::load`] recomputes them all and
//!   refuses a file whose listed keys differ, whose signing share is not on
//!   the committed polynomial, or whose group key is not the one expected.
//!
//! # Format
//! ```text
//! {"type": "p2p-conn/FrostEd25519Share",
//!  "index": i, "threshold": t, "signers": n,
//!  "group_public_key": base64 (32 bytes: the validator's public key),
//!  "verifying_shares": [base64 (32 bytes), ... n of them, index 1 first],
//!  "commitment": [base64 (32 bytes), ... t of them: the dealer's
//!                 commitment to the polynomial's coefficients],
//!  "signing_share": base64 (32 bytes: this cosigner's secret share)}
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use base64::Engine;
use frost_ed25519::keys::{
    KeyPackage, PublicKeyPackage, SecretShare, SigningShare, VerifiableSecretSharingCommitment,
    VerifyingShare,
};
use frost_ed25519::{Identifier, SigningKey, VerifyingKey};
use p2p_conn::Identity;
use rand_core::{CryptoRng, RngCore};
use zeroize::{Zeroize, Zeroizing};

use super::{check_parameters, ShareFileProblem, ThresholdError};
use crate::atomic_file::{read_bounded, Staged};

/// The `type` of a share file.
const SHARE_TYPE: &str = "p2p-conn/FrostEd25519Share";
/// The largest share file [`KeyShare::load`] reads (a 16-signer file is
/// under 2 KiB).
const MAX_SHARE_FILE_BYTES: usize = 16 * 1024;

/// One cosigner's share of a validator's key: its signing share (secret)
/// and the group's public parts. Never holds the whole key; `Debug` shows
/// only the public parts.
#[derive(Clone)]
pub struct KeyShare {
    index: u16,
    threshold: u16,
    signers: u16,
    key: KeyPackage,
    public: PublicKeyPackage,
    commitment: VerifiableSecretSharingCommitment,
}

impl std::fmt::Debug for KeyShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyShare")
            .field("index", &self.index)
            .field("threshold", &self.threshold)
            .field("signers", &self.signers)
            .field("group_public_key", &hex::encode(self.group_public_key()))
            .finish_non_exhaustive()
    }
}

fn identifier(index: u16) -> Identifier {
    Identifier::try_from(index).expect("indexes start at 1")
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn key_bytes(key: &VerifyingKey) -> [u8; 32] {
    key.serialize()
        .ok()
        .and_then(|b| b.try_into().ok())
        .expect("a group key from a nonzero scalar serializes to 32 bytes")
}

/// FROST's signing key for the validator key `key`: its clamped secret
/// scalar, reduced mod l (module docs).
fn signing_key_of(key: &Identity) -> Result<SigningKey, ThresholdError> {
    use sha2::{Digest, Sha512};

    let seed = seed_of(key);
    let mut hash = Zeroizing::new([0u8; 64]);
    hash.copy_from_slice(&Sha512::digest(&seed[..]));
    let mut scalar_bytes = Zeroizing::new([0u8; 32]);
    scalar_bytes.copy_from_slice(&hash[..32]);
    scalar_bytes[0] &= 248;
    scalar_bytes[31] &= 127;
    scalar_bytes[31] |= 64;
    let mut scalar = curve25519_dalek::Scalar::from_bytes_mod_order(*scalar_bytes);
    let signing = SigningKey::from_scalar(scalar).map_err(ThresholdError::Frost);
    scalar.zeroize();
    signing
}

/// The 32-byte seed of `key`, read back from its `node_key.json` form (the
/// one way `p2p-conn` hands a key's secret out).
fn seed_of(key: &Identity) -> Zeroizing<[u8; 32]> {
    #[derive(serde::Deserialize)]
    struct Value<'a> {
        #[serde(borrow)]
        value: &'a str,
    }
    #[derive(serde::Deserialize)]
    struct File<'a> {
        #[serde(borrow)]
        priv_key: Value<'a>,
    }
    let json = p2p_conn::keyfile::to_json(key);
    let file: File<'_> = serde_json::from_str(&json).expect("keyfile::to_json writes valid JSON");
    let mut raw = Zeroizing::new([0u8; 64]);
    let n = base64::engine::general_purpose::STANDARD
        .decode_slice(file.priv_key.value, &mut raw[..])
        .expect("keyfile::to_json writes 64 bytes in base64");
    assert_eq!(n, 64, "keyfile::to_json writes the seed and the public key");
    let mut seed = Zeroizing::new([0u8; 32]);
    seed.copy_from_slice(&raw[..32]);
    seed
}

impl KeyShare {
    /// Split the validator key `key` into `signers` shares, any `threshold`
    /// of which sign (a trusted dealer: this process holds the whole key
    /// while it splits). The shares' group public key is `key`'s public
    /// key. `threshold` and `signers` must pass the module's bounds
    /// ([`ThresholdError::Parameters`]).
    pub fn split(
        key: &Identity,
        threshold: u16,
        signers: u16,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<Vec<KeyShare>, ThresholdError> {
        check_parameters(threshold, signers)?;
        let signing = signing_key_of(key)?;
        let (shares, public) = frost_ed25519::keys::split(
            &signing,
            signers,
            threshold,
            frost_ed25519::keys::IdentifierList::Default,
            rng,
        )
        .map_err(ThresholdError::Frost)?;
        drop(signing);
        shares
            .into_values()
            .enumerate()
            .map(|(i, secret)| {
                let index = i as u16 + 1;
                debug_assert_eq!(*secret.identifier(), identifier(index));
                let commitment = secret.commitment().clone();
                let key = KeyPackage::try_from(secret).map_err(ThresholdError::Frost)?;
                Ok(KeyShare {
                    index,
                    threshold,
                    signers,
                    key,
                    public: public.clone(),
                    commitment,
                })
            })
            .collect()
    }

    /// This cosigner's index, 1 to [`KeyShare::signers`].
    pub fn index(&self) -> u16 {
        self.index
    }

    /// How many shares sign: t.
    pub fn threshold(&self) -> u16 {
        self.threshold
    }

    /// How many shares there are: n.
    pub fn signers(&self) -> u16 {
        self.signers
    }

    /// The group's public key: the validator's Ed25519 public key.
    pub fn group_public_key(&self) -> [u8; 32] {
        key_bytes(self.public.verifying_key())
    }

    pub(crate) fn key_package(&self) -> &KeyPackage {
        &self.key
    }

    pub(crate) fn public_package(&self) -> &PublicKeyPackage {
        &self.public
    }

    /// The share file's JSON (module docs); it holds the signing share and
    /// is zeroized on drop.
    pub fn to_json(&self) -> Zeroizing<String> {
        let verifying: Vec<String> = self
            .public
            .verifying_shares()
            .values()
            .map(|v| b64(&v.serialize().expect("a verifying share serializes")))
            .collect();
        let commitment: Vec<String> = self
            .commitment
            .serialize()
            .expect("the dealer's commitment serializes")
            .iter()
            .map(|c| b64(c))
            .collect();
        let mut share = Zeroizing::new(self.key.signing_share().serialize());
        let mut out = Zeroizing::new(String::with_capacity(MAX_SHARE_FILE_BYTES));
        out.push_str(&format!(
            "{{\"type\":\"{SHARE_TYPE}\",\"index\":{},\"threshold\":{},\"signers\":{},\"group_public_key\":\"{}\",\"verifying_shares\":{},\"commitment\":{},\"signing_share\":\"",
            self.index,
            self.threshold,
            self.signers,
            b64(&self.group_public_key()),
            serde_json::to_string(&verifying).expect("strings serialize"),
            serde_json::to_string(&commitment).expect("strings serialize"),
        ));
        base64::engine::general_purpose::STANDARD.encode_string(&share[..], &mut out);
        out.push_str("\"}\n");
        share.zeroize();
        out
    }

    /// Write the share file at `path`: owner-only (0600 on Unix), whole
    /// when it appears, never over an existing file
    /// ([`ThresholdError::ShareWrite`] with `AlreadyExists`).
    pub fn save_new(&self, path: impl AsRef<Path>) -> Result<(), ThresholdError> {
        use std::io::Write;
        let path = path.as_ref();
        let write_err = |source| ThresholdError::ShareWrite {
            path: path.to_path_buf(),
            source,
        };
        let json = self.to_json();
        Staged::new(path, json.as_bytes(), |f, d| f.write_all(d))
            .map_err(write_err)?
            .link_new(path)
            .map_err(write_err)?;
        Ok(())
    }

    /// Parse a share file's text and check it (module docs), and that its
    /// group key is `expected` (the validator's public key).
    pub fn parse(json: &str, expected: &[u8; 32]) -> Result<KeyShare, ThresholdError> {
        let share = parse_inner(json).map_err(|problem| ThresholdError::ShareFile {
            path: None,
            problem,
        })?;
        let got = share.group_public_key();
        if &got != expected {
            return Err(ThresholdError::GroupKeyMismatch {
                expected: hex::encode(expected),
                got: hex::encode(got),
            });
        }
        Ok(share)
    }

    /// Read the share file at `path` and check it as [`KeyShare::parse`]
    /// does.
    pub fn load(path: impl AsRef<Path>, expected: &[u8; 32]) -> Result<KeyShare, ThresholdError> {
        let path = path.as_ref();
        let mut bytes = Zeroizing::new(Vec::with_capacity(MAX_SHARE_FILE_BYTES + 1));
        let whole = read_bounded(path, MAX_SHARE_FILE_BYTES, &mut bytes).map_err(|source| {
            ThresholdError::ShareRead {
                path: path.to_path_buf(),
                source,
            }
        })?;
        let with_path = |problem| ThresholdError::ShareFile {
            path: Some(path.to_path_buf()),
            problem,
        };
        if !whole {
            return Err(with_path(ShareFileProblem::TooLarge));
        }
        let text = std::str::from_utf8(&bytes).map_err(|_| with_path(ShareFileProblem::NotJson))?;
        match KeyShare::parse(text, expected) {
            Err(ThresholdError::ShareFile { problem, .. }) => Err(with_path(problem)),
            other => other,
        }
    }
}

fn decode32(text: &str, field: &'static str) -> Result<Zeroizing<[u8; 32]>, ShareFileProblem> {
    let mut out = Zeroizing::new([0u8; 32]);
    let mut buf = Zeroizing::new([0u8; 48]);
    match base64::engine::general_purpose::STANDARD.decode_slice(text, &mut buf[..]) {
        Ok(32) => {
            out.copy_from_slice(&buf[..32]);
            Ok(out)
        }
        _ => Err(ShareFileProblem::BadField { field }),
    }
}

fn parse_inner(json: &str) -> Result<KeyShare, ShareFileProblem> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File<'a> {
        #[serde(rename = "type")]
        share_type: &'a str,
        index: u16,
        threshold: u16,
        signers: u16,
        group_public_key: &'a str,
        #[serde(borrow)]
        verifying_shares: Vec<&'a str>,
        #[serde(borrow)]
        commitment: Vec<&'a str>,
        signing_share: &'a str,
    }
    let file: File<'_> = serde_json::from_str(json).map_err(|_| ShareFileProblem::NotJson)?;
    if file.share_type != SHARE_TYPE {
        return Err(ShareFileProblem::WrongType);
    }
    let (t, n, index) = (file.threshold, file.signers, file.index);
    if check_parameters(t, n).is_err() {
        return Err(ShareFileProblem::Parameters);
    }
    if index == 0 || index > n {
        return Err(ShareFileProblem::BadField { field: "index" });
    }
    if file.verifying_shares.len() != usize::from(n) {
        return Err(ShareFileProblem::BadField {
            field: "verifying_shares",
        });
    }
    if file.commitment.len() != usize::from(t) {
        return Err(ShareFileProblem::BadField {
            field: "commitment",
        });
    }
    let bad = |field| move |_| ShareFileProblem::BadField { field };
    let group =
        VerifyingKey::deserialize(&decode32(file.group_public_key, "group_public_key")?[..])
            .map_err(bad("group_public_key"))?;
    let mut listed = BTreeMap::new();
    for (i, text) in file.verifying_shares.iter().enumerate() {
        let bytes = decode32(text, "verifying_shares")?;
        let share = VerifyingShare::deserialize(&bytes[..]).map_err(bad("verifying_shares"))?;
        listed.insert(identifier(i as u16 + 1), share);
    }
    let points = file
        .commitment
        .iter()
        .map(|text| decode32(text, "commitment"))
        .collect::<Result<Vec<_>, _>>()?;
    let commitment = VerifiableSecretSharingCommitment::deserialize(points.iter().map(|p| &p[..]))
        .map_err(bad("commitment"))?;
    let signing = SigningShare::deserialize(&decode32(file.signing_share, "signing_share")?[..])
        .map_err(bad("signing_share"))?;
    // Everything public follows from the commitment: the keys listed must
    // be those, and the signing share must lie on the committed polynomial.
    let ids: BTreeSet<Identifier> = (1..=n).map(identifier).collect();
    let derived = PublicKeyPackage::from_commitment(&ids, &commitment)
        .map_err(|_| ShareFileProblem::Inconsistent)?;
    if derived.verifying_shares() != &listed || derived.verifying_key() != &group {
        return Err(ShareFileProblem::Inconsistent);
    }
    let secret = SecretShare::new(identifier(index), signing, commitment.clone());
    let key = KeyPackage::try_from(secret).map_err(|_| ShareFileProblem::NotOnPolynomial)?;
    Ok(KeyShare {
        index,
        threshold: t,
        signers: n,
        key,
        public: PublicKeyPackage::new(listed, group, Some(t)),
        commitment,
    })
}

/// Check that `shares` (at least t of one split, distinct) recombine to
/// the public key `expected`, the one the chain knows for the validator.
/// The secret is recombined in memory only, and zeroized before this
/// returns; nothing is written.
pub fn check_shares(shares: &[KeyShare], expected: &[u8; 32]) -> Result<(), ThresholdError> {
    let Some(first) = shares.first() else {
        return Err(ThresholdError::NotEnoughShares { have: 0, need: 2 });
    };
    let need = first.threshold;
    let distinct: BTreeSet<u16> = shares.iter().map(|s| s.index).collect();
    if distinct.len() < usize::from(need) {
        return Err(ThresholdError::NotEnoughShares {
            have: distinct.len(),
            need,
        });
    }
    if distinct.len() != shares.len() {
        return Err(ThresholdError::DifferentSplits);
    }
    if shares
        .iter()
        .any(|s| s.commitment != first.commitment || s.threshold != need)
    {
        return Err(ThresholdError::DifferentSplits);
    }
    let packages: Vec<KeyPackage> = shares.iter().map(|s| s.key.clone()).collect();
    let secret = frost_ed25519::keys::reconstruct(&packages).map_err(ThresholdError::Frost)?;
    drop(packages);
    // `SigningKey` zeroizes its scalar when dropped, here.
    let got = key_bytes(&VerifyingKey::from(&secret));
    drop(secret);
    if &got != expected {
        return Err(ThresholdError::GroupKeyMismatch {
            expected: hex::encode(expected),
            got: hex::encode(got),
        });
    }
    Ok(())
}
