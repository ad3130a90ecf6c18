//! `handshake`: the handshake state machine on arbitrary peer bytes.

use crate::input::Input;
use crate::Seeds;
use p2p_conn::proto::{FrameSize, HandshakeParams, Stage};
use p2p_conn::testkit;
use p2p_conn::PublicKey;
use p2p_conn::{Backend, ProtocolError};

/// The handshake state machine fed arbitrary peer bytes in arbitrary chunks.
///
/// Input: `cfg` (bit 0: we are seed 1 or seed 2 of `deterministic_handshake`;
/// bit 1: 64-byte frames instead of 1024; bits 2..: backend), `chunk` (the
/// largest piece fed at once, 0 = as much as the machine asks for), then the
/// peer's bytes. A transcript of the other seed completes the handshake.
///
/// Checks: no panic; `read_progress` stays in bounds; an error is sticky; a
/// completed handshake authenticated exactly the other seed's identity (no
/// input can complete it as anyone else).
pub fn check(data: &[u8]) {
    let mut inp = Input::new(data);
    let cfg = inp.u8();
    let chunk = usize::from(inp.u8());
    let peer = inp.rest();
    let params = HandshakeParams {
        frame_size: if cfg & 2 == 0 {
            FrameSize::STANDARD
        } else {
            FrameSize::new(64).expect("64-byte frames are valid")
        },
        backend: Backend::ALL[usize::from(cfg >> 2) % Backend::ALL.len()],
    };
    let (me, other) = if cfg & 1 == 0 { (1, 2) } else { (2, 1) };
    let (_, mut hs) = testkit::deterministic_handshake(me, params);

    let mut rest = peer;
    let mut failed: Option<ProtocolError> = None;
    let mut calls = 0usize;
    while !rest.is_empty() {
        // Drain what we send in pieces too (the directions are independent).
        let out = hs.outgoing().len();
        hs.advance_outgoing(out.min(chunk.max(7)));
        let (got, total) = hs.read_progress();
        assert!(got <= total, "read_progress {got} of {total}");
        let buf = hs.read_buffer();
        if buf.is_empty() {
            break;
        }
        // Vary the piece size: 1..=chunk, cycling (0 = all it asks for).
        calls += 1;
        let piece = if chunk == 0 {
            buf.len()
        } else {
            1 + (calls * 31) % chunk
        };
        let n = piece.min(buf.len()).min(rest.len());
        buf[..n].copy_from_slice(&rest[..n]);
        rest = &rest[n..];
        if let Err(e) = hs.advance_read(n) {
            failed = Some(e);
            break;
        }
    }
    let out = hs.outgoing().len();
    hs.advance_outgoing(out);
    assert!(hs.outgoing().is_empty());

    if let Some(e) = failed {
        assert_eq!(hs.advance_read(0), Err(e.clone()), "errors are sticky");
        assert!(
            hs.read_buffer().is_empty(),
            "a failed handshake reads no more"
        );
        assert!(!hs.is_finished(), "a failed handshake is not finished");
        assert!(hs.into_established().is_err());
        return;
    }
    if hs.is_finished() {
        assert_eq!(hs.stage(), Stage::Done);
        let est = hs
            .into_established()
            .expect("a finished handshake yields its keys");
        let expected: PublicKey = testkit::deterministic_handshake(other, params)
            .0
            .public_key();
        assert_eq!(
            est.remote_public_key, expected,
            "the handshake authenticated someone it has no signature from"
        );
        std::hint::black_box(est);
    } else {
        assert_ne!(hs.stage(), Stage::Done, "not finished, yet nothing to read");
        assert!(hs.into_established().is_err());
    }
}

/// The seeds this check owns, written to `seeds/handshake/` by `gen_seeds`: the
/// two sides' real handshake bytes, whole, in pieces and cut short, and one
/// side's own bytes reflected back.
pub fn seeds() -> Seeds {
    use crate::cat;

    let mut s = Seeds::default();
    // Layout: cfg (bit 0 role, bit 1 small frames), chunk, peer bytes.
    let std_run = crate::drive::handshake_pair(false, Backend::ALL[0]);
    let small_run = crate::drive::handshake_pair(true, Backend::ALL[0]);
    s.add("seed1-full", &cat(&[&[0, 0], &std_run.b_wire]));
    s.add("seed1-chunk1", &cat(&[&[0, 1], &std_run.b_wire]));
    s.add("seed2-chunk37", &cat(&[&[1, 37], &std_run.a_wire]));
    s.add("seed2-small-frames", &cat(&[&[3, 0], &small_run.a_wire]));
    s.add("seed1-truncated", &cat(&[&[0, 5], &std_run.b_wire[..100]]));
    s.add("seed1-own-key", &cat(&[&[0, 0], &std_run.a_wire]));
    s
}
