//! Needs feature `testkit` (the seeded generator's `rand_chacha`).

use super::handshake::{Handshake, Session};
use super::*;
use crate::Identity;

fn rng(seed: u8) -> rand_chacha::ChaCha20Rng {
    // As `testkit::seeded_rng`, without using `testkit` (which reaches
    // into this module).
    rand_chacha::rand_core::SeedableRng::seed_from_u64(u64::from(seed))
}

fn ids() -> (Identity, Identity) {
    (Identity::from_seed(&[1; 32]), Identity::from_seed(&[2; 32]))
}

/// Run both sides to the end, feeding each the other's bytes in pieces of
/// `step`; returns the two sessions.
fn pump(
    mut i: Handshake,
    mut r: Handshake,
    step: usize,
) -> Result<(Session, Session), (NoiseError, bool)> {
    let mut to_r = Vec::new();
    let mut to_i = Vec::new();
    for _ in 0..1000 {
        to_r.extend(i.take_output());
        while !to_r.is_empty() && !r.is_finished() {
            let n = to_r.len().min(step);
            let used = r.read(&to_r[..n]).map_err(|e| (e, false))?;
            to_r.drain(..used);
            if used == 0 {
                break;
            }
        }
        to_i.extend(r.take_output());
        while !to_i.is_empty() && !i.is_finished() {
            let n = to_i.len().min(step);
            let used = i.read(&to_i[..n]).map_err(|e| (e, true))?;
            to_i.drain(..used);
            if used == 0 {
                break;
            }
        }
        to_r.extend(i.take_output());
        if i.is_finished() && r.is_finished() && to_r.is_empty() && to_i.is_empty() {
            return Ok((
                i.into_session().map_err(|e| (e, true))?,
                r.into_session().map_err(|e| (e, false))?,
            ));
        }
    }
    panic!("the handshake did not converge");
}

#[test]
fn both_sides_learn_each_other_and_talk() {
    let (a, b) = ids();
    for step in [1, 7, 4096] {
        let i = Handshake::new(
            Role::Initiator,
            &a,
            Some(b.public_key().peer_id()),
            &mut rng(1),
        )
        .unwrap();
        let r = Handshake::new(Role::Responder, &b, None, &mut rng(2)).unwrap();
        let (si, sr) = pump(i, r, step).unwrap();
        assert_eq!(si.peer(), b.public_key().peer_id());
        assert_eq!(sr.peer(), a.public_key().peer_id());
        let (mut seal_i, _) = si.split();
        let (_, mut open_r) = sr.split();
        for len in [
            0usize,
            1,
            1000,
            MAX_FRAME_PLAINTEXT,
            MAX_FRAME_PLAINTEXT + 1,
            200_000,
        ] {
            let msg: Vec<u8> = (0..len).map(|x| x as u8).collect();
            let mut wire = Vec::new();
            seal_i.seal(&msg, &mut wire).unwrap();
            assert_eq!(wire.len(), len + len.div_ceil(MAX_FRAME_PLAINTEXT) * 18);
            let mut got = Vec::new();
            let mut at = 0;
            while at < wire.len() {
                assert_eq!(open_r.open(&mut wire[at..at + 1]).unwrap(), None);
                let o = open_r.open(&mut wire[at..]).unwrap().unwrap();
                got.extend_from_slice(&wire[at..][o.plaintext.clone()]);
                at += o.frame_len;
            }
            assert_eq!(got, msg);
        }
    }
}

#[test]
fn the_initiator_refuses_another_responder_before_revealing_itself() {
    let (a, b) = ids();
    let other = Identity::from_seed(&[3; 32]).public_key().peer_id();
    let i = Handshake::new(Role::Initiator, &a, Some(other), &mut rng(1)).unwrap();
    let r = Handshake::new(Role::Responder, &b, None, &mut rng(2)).unwrap();
    match pump(i, r, 4096) {
        Err((NoiseError::UnexpectedPeer { expected, got }, true)) => {
            assert_eq!(expected, other);
            assert_eq!(got, b.public_key().peer_id());
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn the_responder_refuses_another_initiator() {
    let (a, b) = ids();
    let other = Identity::from_seed(&[3; 32]).public_key().peer_id();
    let i = Handshake::new(Role::Initiator, &a, None, &mut rng(1)).unwrap();
    let r = Handshake::new(Role::Responder, &b, Some(other), &mut rng(2)).unwrap();
    assert!(matches!(
        pump(i, r, 4096),
        Err((NoiseError::UnexpectedPeer { .. }, false))
    ));
}

#[test]
fn a_long_handshake_length_is_refused_before_its_body() {
    let (_, b) = ids();
    let mut r = Handshake::new(Role::Responder, &b, None, &mut rng(2)).unwrap();
    let len = (MAX_HANDSHAKE_MESSAGE + 1) as u16;
    assert!(matches!(
        r.read(&len.to_be_bytes()),
        Err(NoiseError::MessageTooLong { len: 4097, .. })
    ));
    assert!(matches!(r.read(&[0]), Err(NoiseError::Poisoned)));
}

#[test]
fn a_flipped_bit_anywhere_in_the_handshake_fails_it() {
    let (a, b) = ids();
    // Message 2 (from the responder), every byte of its body.
    let mut i = Handshake::new(Role::Initiator, &a, None, &mut rng(1)).unwrap();
    let mut r = Handshake::new(Role::Responder, &b, None, &mut rng(2)).unwrap();
    let m1 = i.take_output();
    assert_eq!(r.read(&m1).unwrap(), m1.len());
    let m2 = r.take_output();
    let mut good = Handshake::new(Role::Initiator, &a, None, &mut rng(1)).unwrap();
    good.take_output();
    assert_eq!(good.read(&m2).unwrap(), m2.len());
    assert_eq!(good.remote_peer(), Some(b.public_key().peer_id()));
    for at in 2 + 32..m2.len() {
        let mut i = Handshake::new(Role::Initiator, &a, None, &mut rng(1)).unwrap();
        i.take_output();
        let mut bad = m2.clone();
        bad[at] ^= 1;
        assert!(i.read(&bad).is_err(), "byte {at}");
        assert!(i.remote_peer().is_none());
    }
}

#[test]
fn transport_bytes_after_the_last_message_are_left_unread() {
    let (a, b) = ids();
    let mut i = Handshake::new(Role::Initiator, &a, None, &mut rng(1)).unwrap();
    let mut r = Handshake::new(Role::Responder, &b, None, &mut rng(2)).unwrap();
    let m1 = i.take_output();
    r.read(&m1).unwrap();
    let m2 = r.take_output();
    i.read(&m2).unwrap();
    let mut m3 = i.take_output();
    let m3_len = m3.len();
    let (mut seal, _) = i.into_session().unwrap().split();
    seal.seal(b"first", &mut m3).unwrap();
    assert_eq!(r.read(&m3).unwrap(), m3_len);
    let (_, mut open) = r.into_session().unwrap().split();
    let o = open.open(&mut m3[m3_len..]).unwrap().unwrap();
    assert_eq!(&m3[m3_len..][o.plaintext], b"first");
}

#[test]
fn a_tampered_or_short_frame_ends_the_session() {
    let (a, b) = ids();
    let i = Handshake::new(Role::Initiator, &a, None, &mut rng(1)).unwrap();
    let r = Handshake::new(Role::Responder, &b, None, &mut rng(2)).unwrap();
    let (si, sr) = pump(i, r, 4096).unwrap();
    let (mut seal, _) = si.split();
    let (_, mut open) = sr.split();
    let mut wire = Vec::new();
    seal.seal(b"hello", &mut wire).unwrap();
    wire[3] ^= 0x80;
    assert!(matches!(open.open(&mut wire), Err(NoiseError::Decrypt)));
    assert!(matches!(open.open(&mut wire), Err(NoiseError::Poisoned)));

    let (_, mut open2) = {
        let i = Handshake::new(Role::Initiator, &a, None, &mut rng(1)).unwrap();
        let r = Handshake::new(Role::Responder, &b, None, &mut rng(2)).unwrap();
        pump(i, r, 4096).unwrap().1.split()
    };
    assert!(matches!(
        open2.open(&mut [0, 15, 0, 0]),
        Err(NoiseError::FrameTooShort(15))
    ));
}

#[test]
fn a_replayed_frame_fails() {
    let (a, b) = ids();
    let i = Handshake::new(Role::Initiator, &a, None, &mut rng(1)).unwrap();
    let r = Handshake::new(Role::Responder, &b, None, &mut rng(2)).unwrap();
    let (si, sr) = pump(i, r, 4096).unwrap();
    let (mut seal, _) = si.split();
    let (_, mut open) = sr.split();
    let mut wire = Vec::new();
    seal.seal(b"once", &mut wire).unwrap();
    let mut again = wire.clone();
    open.open(&mut wire).unwrap().unwrap();
    assert!(matches!(open.open(&mut again), Err(NoiseError::Decrypt)));
}

/// A responder of our own making whose handshake is genuine Noise but whose
/// payload lies: a signature over another static key, or an identity of
/// another key type. The initiator refuses each at message 2, with the
/// error that names it, and has revealed nothing of itself.
#[test]
fn a_lying_payload_is_refused_by_name() {
    use super::crypto::Resolver;
    let (a, b) = ids();
    let secp_payload = {
        let mut p = vec![0x0a, 37, 0x08, 0x02, 0x12, 33];
        p.extend_from_slice(&[2; 33]);
        p.extend_from_slice(&[0x12, 64]);
        p.extend_from_slice(&[0; 64]);
        p
    };
    for (case, lie) in [
        (
            "a signature over another key",
            payload::encode(&b, &[0x55; 32]),
        ),
        ("a secp256k1 identity", secp_payload),
    ] {
        let mut i = Handshake::new(Role::Initiator, &a, None, &mut rng(1)).unwrap();
        let secret = [0x42u8; 32];
        let mut r = snow::Builder::with_resolver(
            "Noise_XX_25519_ChaChaPoly_SHA256".parse().unwrap(),
            Box::new(Resolver::new(
                crate::Backend::default(),
                zeroize::Zeroizing::new([0x43; 32]),
            )),
        )
        .local_private_key(&secret)
        .unwrap()
        .build_responder()
        .unwrap();
        let m1 = i.take_output();
        let mut buf = vec![0u8; 4096];
        r.read_message(&m1[2..], &mut buf).unwrap();
        let n = r.write_message(&lie, &mut buf).unwrap();
        let mut m2 = (n as u16).to_be_bytes().to_vec();
        m2.extend_from_slice(&buf[..n]);
        let err = i.read(&m2).unwrap_err();
        match case {
            "a secp256k1 identity" => assert!(matches!(err, NoiseError::KeyType(2)), "{err}"),
            _ => assert!(matches!(err, NoiseError::BadSignature), "{case}: {err}"),
        }
        assert!(i.take_output().is_empty(), "{case}: the initiator answered");
        assert!(i.remote_peer().is_none());
    }
}
