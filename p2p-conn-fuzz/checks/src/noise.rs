//! `noise`: libp2p's Noise handshake (`noise://` privval, CometBFT v0.40)
//! and its transport frames on arbitrary peer bytes.

use crate::input::Input;
use crate::Seeds;
use p2p_conn::noise::{NoiseError, Role};
use p2p_conn::testkit::internals::noise::{Handshake, Opener, MAX_FRAME_PLAINTEXT};
use p2p_conn::{testkit, Identity, PeerId};

/// Our identity, and the peer's whose transcripts the seeds hold.
fn ours() -> Identity {
    Identity::from_seed(&[0x11; 32])
}
fn theirs() -> Identity {
    Identity::from_seed(&[0x22; 32])
}

fn handshake(role: Role, who: &Identity, expect: Option<PeerId>, seed: u64) -> Handshake {
    Handshake::new(role, who, expect, &mut testkit::seeded_rng(seed))
        .expect("the suite is built in")
}

/// Our handshake fed arbitrary peer bytes in arbitrary pieces, then, once
/// it is finished, the rest as transport frames.
///
/// Input: `cfg` (bit 0: we respond rather than initiate; bit 1: we require
/// the seeds' peer), `chunk` (the largest piece fed at once, 0 = all), then
/// the peer's bytes.
///
/// Checks: no panic; a handshake uses no more than it is given and never
/// bytes past its last message; an error is sticky; a finished handshake
/// proved the seeds' peer (no input makes it finish as anyone else, since
/// no other key signs); frames open in place within the buffer and an
/// error ends the session.
pub fn check(data: &[u8]) {
    let mut inp = Input::new(data);
    let cfg = inp.u8();
    let chunk = usize::from(inp.u8());
    let peer = inp.rest();
    let role = if cfg & 1 == 0 {
        Role::Initiator
    } else {
        Role::Responder
    };
    let them = theirs().public_key().peer_id();
    let expect = (cfg & 2 != 0).then_some(them);
    let mut hs = handshake(role, &ours(), expect, 1);
    let _ = hs.take_output();

    let mut rest = peer;
    let mut calls = 0usize;
    while !rest.is_empty() && !hs.is_finished() {
        calls += 1;
        let piece = if chunk == 0 {
            rest.len()
        } else {
            (1 + (calls * 31) % chunk).min(rest.len())
        };
        match hs.read(&rest[..piece]) {
            Ok(used) => {
                assert!(used <= piece, "used {used} of {piece}");
                rest = &rest[used..];
                let _ = hs.take_output();
                if used == 0 && !hs.is_finished() {
                    // Nothing more it can take (our turn cannot come without
                    // input, so this is a bug).
                    panic!("the handshake stalled with {} bytes left", rest.len());
                }
            }
            Err(e) => {
                assert!(
                    matches!(hs.read(&[0]), Err(NoiseError::Poisoned)),
                    "errors are sticky after {e}"
                );
                assert!(!hs.is_finished());
                assert!(hs.into_session().is_err());
                return;
            }
        }
    }
    if !hs.is_finished() {
        assert!(hs.into_session().is_err(), "an unfinished handshake");
        return;
    }
    assert_eq!(hs.remote_peer(), Some(them), "finished as another peer");
    let session = hs.into_session().expect("a finished handshake");
    assert_eq!(session.peer(), them);
    let (_, mut opener) = session.split();

    let mut buf = rest.to_vec();
    let mut at = 0;
    loop {
        match opener.open(&mut buf[at..]) {
            Ok(None) => {
                // What is left is a partial frame.
                if let Some(len) = Opener::frame_len(&buf[at..]) {
                    assert!(len > buf.len() - at, "a whole frame left unopened");
                }
                break;
            }
            Ok(Some(o)) => {
                assert!(o.frame_len <= buf.len() - at);
                assert!(o.plaintext.end <= o.frame_len);
                assert!(o.plaintext.len() <= MAX_FRAME_PLAINTEXT);
                at += o.frame_len;
            }
            Err(_) => {
                assert!(matches!(
                    opener.open(&mut buf[at..]),
                    Err(NoiseError::Poisoned)
                ));
                break;
            }
        }
    }
}

/// The seeds: the peer's side of whole handshakes in both roles, with and
/// without transport frames after them, and a few broken ones.
pub fn seeds() -> Seeds {
    let mut seeds = Seeds::default();
    for (name, role) in [
        ("initiator", Role::Initiator),
        ("responder", Role::Responder),
    ] {
        // Run our side (seed 1, as `check` does) against the peer's.
        let them_role = if role == Role::Initiator {
            Role::Responder
        } else {
            Role::Initiator
        };
        let mut us = handshake(role, &ours(), None, 1);
        let mut peer = handshake(them_role, &theirs(), None, 2);
        let mut transcript = Vec::new();
        for _ in 0..4 {
            let out = us.take_output();
            if !out.is_empty() {
                peer.read(&out).expect("the peer reads ours");
            }
            let theirs_out = peer.take_output();
            if !theirs_out.is_empty() {
                us.read(&theirs_out).expect("we read the peer's");
                transcript.extend_from_slice(&theirs_out);
            }
        }
        assert!(us.is_finished() && peer.is_finished());
        let cfg = if role == Role::Initiator { 2 } else { 3 };
        seeds.add(
            format!("{name}-handshake"),
            &crate::cat(&[&[cfg, 0], &transcript]),
        );
        seeds.add(
            format!("{name}-handshake-pieces"),
            &crate::cat(&[&[cfg, 9], &transcript]),
        );
        let (mut sealer, _) = peer.into_session().expect("finished").split();
        let mut frames = Vec::new();
        for len in [0usize, 1, 100, 1500] {
            sealer
                .seal(&vec![0x5a; len], &mut frames)
                .expect("nonces left");
        }
        seeds.add(
            format!("{name}-frames"),
            &crate::cat(&[&[cfg, 0], &transcript, &frames]),
        );
        let mut flipped = frames.clone();
        if let Some(b) = flipped.get_mut(5) {
            *b ^= 1;
        }
        seeds.add(
            format!("{name}-frame-flipped"),
            &crate::cat(&[&[cfg, 13], &transcript, &flipped]),
        );
        let mut cut = transcript.clone();
        cut.truncate(transcript.len() - 1);
        seeds.add(format!("{name}-cut"), &crate::cat(&[&[cfg, 0], &cut]));
    }
    seeds.add("too-long", &[1, 0, 0xff, 0xff]);
    seeds.add("empty-message", &[1, 0, 0, 0]);
    seeds
}
