//! Shares: the group key is the validator's, share files are owner-only
//! and checked when loaded, t shares recombine to the validator's key.

use base64::Engine;
use p2p_conn::Identity;
use p2p_conn_privval::threshold::{check_shares, KeyShare, ShareFileProblem, ThresholdError};
use rand_core::OsRng;
use sha2::{Digest, Sha512};

use super::validator;
use crate::common::temp_dir;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The validator's secret scalar is the clamped first half of SHA-512 of
/// its seed; reduced mod l it is FROST's signing key, and the base point
/// times it is the validator's public key, which is the shares' group key.
#[test]
fn the_group_key_is_the_validators_public_key() {
    let seed = [7u8; 32];
    let key = Identity::from_seed(&seed);
    let hash = Sha512::digest(seed);
    let mut clamped = [0u8; 32];
    clamped.copy_from_slice(&hash[..32]);
    clamped[0] &= 248;
    clamped[31] &= 127;
    clamped[31] |= 64;
    let reduced = curve25519_dalek::Scalar::from_bytes_mod_order(clamped);
    let point = curve25519_dalek::constants::ED25519_BASEPOINT_POINT * reduced;
    assert_eq!(point.compress().to_bytes(), *key.public_key().as_bytes());
    // Unreduced, the same point: the base point has order l.
    assert_eq!(
        curve25519_dalek::EdwardsPoint::mul_base_clamped(clamped)
            .compress()
            .to_bytes(),
        *key.public_key().as_bytes()
    );
    for (t, n) in [(2, 3), (3, 5)] {
        let shares = KeyShare::split(&key, t, n, &mut OsRng).unwrap();
        assert_eq!(shares.len(), usize::from(n));
        for (i, share) in shares.iter().enumerate() {
            assert_eq!(share.index(), i as u16 + 1);
            assert_eq!((share.threshold(), share.signers()), (t, n));
            assert_eq!(share.group_public_key(), *key.public_key().as_bytes());
        }
    }
}

#[test]
fn split_refuses_parameters_out_of_bounds() {
    for (t, n) in [(1, 3), (0, 2), (3, 2), (2, 4), (3, 6), (9, 17), (2, 1)] {
        match KeyShare::split(&validator(), t, n, &mut OsRng) {
            Err(ThresholdError::Parameters { threshold, signers }) => {
                assert_eq!((threshold, signers), (t, n))
            }
            other => panic!("{t} of {n}: {other:?}"),
        }
    }
    for (t, n) in [(2, 2), (2, 3), (3, 4), (3, 5), (9, 16)] {
        KeyShare::split(&validator(), t, n, &mut OsRng).unwrap();
    }
}

/// Written owner-only, never over a file, holding neither the seed nor the
/// secret scalar; loaded back, the same share.
#[test]
fn a_share_file_round_trips_owner_only_without_the_key() {
    let dir = temp_dir("threshold-share-file");
    let shares = KeyShare::split(&validator(), 2, 3, &mut OsRng).unwrap();
    let path = dir.join("share-1.json");
    shares[0].save_new(&path).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
    }
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("\"type\":\"p2p-conn/FrostEd25519Share\""),
        "{text}"
    );
    assert!(!text.contains(&b64(&[7u8; 32])), "the seed is in the file");
    let hash = Sha512::digest([7u8; 32]);
    assert!(
        !text.contains(&b64(&hash[..32])),
        "the scalar is in the file"
    );
    let expected = *validator().public_key().as_bytes();
    let loaded = KeyShare::load(&path, &expected).unwrap();
    assert_eq!(loaded.index(), 1);
    assert_eq!(*loaded.to_json(), *shares[0].to_json());
    let again = shares[0].save_new(&path).unwrap_err();
    assert!(
        matches!(&again, ThresholdError::ShareWrite { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists),
        "{again:?}"
    );
    // Debug shows no secret.
    let debug = format!("{:?}", shares[0]);
    assert!(!debug.contains("signing"), "{debug}");
}

fn field(json: &str, name: &str) -> serde_json::Value {
    serde_json::from_str::<serde_json::Value>(json).unwrap()[name].clone()
}

fn with_field(json: &str, name: &str, value: serde_json::Value) -> String {
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    v[name] = value;
    v.to_string()
}

fn problem(json: &str, expected: &[u8; 32]) -> ShareFileProblem {
    match KeyShare::parse(json, expected) {
        Err(ThresholdError::ShareFile { problem, .. }) => problem,
        other => panic!("{other:?}"),
    }
}

#[test]
fn loading_checks_every_part_of_a_share_file() {
    let expected = *validator().public_key().as_bytes();
    let shares = KeyShare::split(&validator(), 2, 3, &mut OsRng).unwrap();
    let one = shares[0].to_json();
    let two = shares[1].to_json();
    KeyShare::parse(&one, &expected).unwrap();

    // Another key expected: the chain's validator is another.
    let other = *Identity::from_seed(&[8; 32]).public_key().as_bytes();
    assert!(matches!(
        KeyShare::parse(&one, &other),
        Err(ThresholdError::GroupKeyMismatch { .. })
    ));
    // Share 2's signing share in share 1's file.
    let swapped = with_field(&one, "signing_share", field(&two, "signing_share"));
    assert_eq!(
        problem(&swapped, &expected),
        ShareFileProblem::NotOnPolynomial
    );
    // A verifying share of another split.
    let third = KeyShare::split(&validator(), 2, 3, &mut OsRng).unwrap();
    let foreign = with_field(
        &one,
        "verifying_shares",
        field(&third[0].to_json(), "verifying_shares"),
    );
    assert_eq!(problem(&foreign, &expected), ShareFileProblem::Inconsistent);
    // Another split's commitment and signing share, this one's keys.
    let mixed = with_field(
        &with_field(&one, "commitment", field(&third[0].to_json(), "commitment")),
        "signing_share",
        field(&third[0].to_json(), "signing_share"),
    );
    assert_eq!(problem(&mixed, &expected), ShareFileProblem::Inconsistent);
    // The group key is another's (and so not the commitment's).
    let regrouped = with_field(&one, "group_public_key", b64(&other).into());
    assert_eq!(
        problem(&regrouped, &expected),
        ShareFileProblem::Inconsistent
    );
    assert_eq!(
        problem(
            &with_field(&one, "type", "tendermint/PrivKeyEd25519".into()),
            &expected
        ),
        ShareFileProblem::WrongType
    );
    assert_eq!(
        problem(&with_field(&one, "signers", 4.into()), &expected),
        ShareFileProblem::Parameters
    );
    assert_eq!(
        problem(&with_field(&one, "index", 0.into()), &expected),
        ShareFileProblem::BadField { field: "index" }
    );
    assert_eq!(
        problem(&with_field(&one, "index", 4.into()), &expected),
        ShareFileProblem::BadField { field: "index" }
    );
    assert_eq!(
        problem(&with_field(&one, "signing_share", "AAAA".into()), &expected),
        ShareFileProblem::BadField {
            field: "signing_share"
        }
    );
    assert_eq!(problem("{}", &expected), ShareFileProblem::NotJson);
    assert_eq!(problem("not json", &expected), ShareFileProblem::NotJson);
    // No secret in the errors' text.
    let secret = field(&one, "signing_share");
    let text = KeyShare::parse(&swapped, &expected)
        .unwrap_err()
        .to_string();
    assert!(!text.contains(secret.as_str().unwrap()), "{text}");
}

#[test]
fn t_shares_recombine_to_the_validators_key() {
    let expected = *validator().public_key().as_bytes();
    let shares = KeyShare::split(&validator(), 3, 5, &mut OsRng).unwrap();
    for pick in [[0, 1, 2], [0, 2, 4], [4, 3, 1]] {
        let picked: Vec<KeyShare> = pick.iter().map(|&i| shares[i].clone()).collect();
        check_shares(&picked, &expected).unwrap();
    }
    check_shares(&shares, &expected).unwrap();
    assert!(matches!(
        check_shares(&shares[..2], &expected),
        Err(ThresholdError::NotEnoughShares { have: 2, need: 3 })
    ));
    assert!(matches!(
        check_shares(
            &[shares[0].clone(), shares[0].clone(), shares[1].clone()],
            &expected
        ),
        Err(ThresholdError::NotEnoughShares { have: 2, need: 3 })
    ));
    let other = KeyShare::split(&validator(), 3, 5, &mut OsRng).unwrap();
    assert!(matches!(
        check_shares(
            &[shares[0].clone(), shares[1].clone(), other[2].clone()],
            &expected
        ),
        Err(ThresholdError::DifferentSplits)
    ));
    // Shares of another validator's key do not recombine to this one.
    let stranger = KeyShare::split(&Identity::from_seed(&[9; 32]), 3, 5, &mut OsRng).unwrap();
    assert!(matches!(
        check_shares(&stranger[..3], &expected),
        Err(ThresholdError::GroupKeyMismatch { .. })
    ));
}
