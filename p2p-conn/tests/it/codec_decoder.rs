//! The codec decoder never releases bytes the peer did not seal, whatever
//! buffers its caller hands it.
//!
//! `tokio_util::codec::Decoder::decode` takes a `&mut BytesMut` on every
//! call, and nothing stops a caller from handing it a different buffer each
//! time: a caller driving the decoder directly, or one that rebuilds
//! `FramedParts` with a fresh read buffer. The decoder must therefore keep
//! no promise about the caller's buffer between calls: frames it has opened
//! ahead (the multi-frame engine opens 16 at once) are its own, and every
//! byte it reads from the caller is authenticated before it is shown.
//!
//! * A regression test for the hole an audit found (issue #17): with
//!   `Backend::Avx512`, decoding one item of a 17 KiB message and then
//!   passing a new buffer holding a forged frame (`len = 5`, "EVIL!", zero
//!   padding, zero tag) yielded "EVIL!" as plaintext.
//! * A property test that drives the decoder with arbitrary buffer swaps,
//!   splits, concatenations and forgeries on every backend, and checks that
//!   everything yielded is the peer's sealed data, in order.

use crate::common::proptest_config;
use bytes::{BufMut, BytesMut};
use p2p_conn::io::codec::{SecretCodec, SecretDecoder, SecretEncoder};
use p2p_conn::proto::HandshakeParams;
use p2p_conn::testkit::internals::wire::STANDARD_SEALED_FRAME;
use p2p_conn::testkit::{deterministic_handshake, payload, run_handshakes};
use p2p_conn::{Backend, ProtocolError};
use p2p_conn::{Config, Error};
use proptest::prelude::*;
use tokio_util::codec::{Decoder, Encoder};

/// An encoder (the peer's sending side) and the decoder that opens what it
/// seals, from a real handshake, both on `backend`.
fn codec_pair(backend: Backend, seed: u64) -> (SecretEncoder, SecretDecoder) {
    // The handshake keys each side's ciphers for the backend.
    let params = HandshakeParams {
        backend,
        ..HandshakeParams::default()
    };
    let (_, a) = deterministic_handshake(seed, params);
    let (_, b) = deterministic_handshake(seed ^ 0x5eed, params);
    let run = run_handshakes(a, b, 1 << 16).unwrap();
    let config = Config::default();
    let (_, decoder) = SecretCodec::new(run.a, &config).unwrap().split();
    let (encoder, _) = SecretCodec::new(run.b, &config).unwrap().split();
    (encoder, decoder)
}

/// One standard sealed frame that no key sealed: a length prefix of 5,
/// "EVIL!", zero padding and a zero tag.
fn forged_frame() -> Vec<u8> {
    let mut f = vec![0u8; STANDARD_SEALED_FRAME];
    f[..4].copy_from_slice(&5u32.to_le_bytes());
    f[4..9].copy_from_slice(b"EVIL!");
    f
}

fn is_auth_failure(e: std::io::Error) -> bool {
    matches!(
        Error::from_io(e),
        Error::Protocol(ProtocolError::FrameAuthentication { .. })
    )
}

/// The audit's sequence on every backend: seal 17 KiB, decode the first
/// item, then hand the decoder a new buffer holding a forged frame. The
/// decoder may still yield the peer's own data it had already received, but
/// never the forged bytes, and it must then fail authentication.
#[test]
fn a_fresh_buffer_with_a_forged_frame_fails_authentication_on_every_backend() {
    for &backend in Backend::ALL {
        let (mut enc, mut dec) = codec_pair(backend, 17);
        let data = payload(17 * 1024, 1);
        let mut wire = BytesMut::new();
        enc.encode(&data[..], &mut wire).unwrap();
        assert_eq!(wire.len(), 17 * STANDARD_SEALED_FRAME);

        let first = dec.decode(&mut wire).unwrap().expect("first item");
        let mut got = first.to_vec();

        let mut evil = BytesMut::from(&forged_frame()[..]);
        let err = loop {
            match dec.decode(&mut evil) {
                Ok(Some(item)) => {
                    assert_ne!(&item[..], b"EVIL!", "{backend}: forged frame released");
                    got.extend_from_slice(&item);
                }
                Ok(None) => panic!("{backend}: the forged frame was neither opened nor refused"),
                Err(e) => break e,
            }
        };
        assert!(
            data.starts_with(&got),
            "{backend}: yielded bytes are not the peer's data"
        );
        assert!(
            is_auth_failure(err),
            "{backend}: not an authentication failure"
        );
        // Sticky: the decoder refuses again, even given the genuine rest.
        assert!(dec.decode(&mut wire).is_err(), "{backend}: not sticky");
    }
}

/// What the caller does to the decoder's input before the next `decode`.
#[derive(Clone, Debug)]
enum Step {
    /// Append the next `n` bytes of the peer's wire to the buffer.
    Feed(usize),
    /// Decode until the decoder asks for more.
    Decode,
    /// Move the unconsumed bytes into a fresh buffer (as a caller
    /// rebuilding `FramedParts` would) and go on with that one.
    Swap,
    /// Split the buffer at `at` and hand the decoder only the back part,
    /// then put the two halves back together (`unsplit`).
    SplitBack(usize),
    /// Hand the decoder a fresh buffer of forged bytes: a forged frame, or
    /// garbage of `len` bytes. Its state is unknown afterwards, so checking
    /// ends with this step.
    Forge { garbage: Option<usize> },
    /// Flip one bit of the unconsumed bytes.
    Flip(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1usize..40_000).prop_map(Step::Feed),
        4 => Just(Step::Decode),
        2 => Just(Step::Swap),
        1 => (0usize..40_000).prop_map(Step::SplitBack),
        1 => proptest::option::of(1usize..3000).prop_map(|garbage| Step::Forge { garbage }),
        1 => (0usize..40_000 * 8).prop_map(Step::Flip),
    ]
}

/// Decode from `src` until it yields nothing more; append the items to
/// `got`. `Err` once the decoder refuses.
fn drain(dec: &mut SecretDecoder, src: &mut BytesMut, got: &mut Vec<u8>) -> Result<(), ()> {
    loop {
        match dec.decode(src) {
            Ok(Some(item)) => got.extend_from_slice(&item),
            Ok(None) => return Ok(()),
            Err(_) => return Err(()),
        }
    }
}

proptest! {
    #![proptest_config(proptest_config(48))]

    /// Whatever the caller does to the buffers, every byte the decoder
    /// yields is the peer's data, in order; with no forgery and no flipped
    /// bit, all of it arrives.
    #[test]
    fn decoder_yields_only_sealed_bytes_in_order(
        messages in proptest::collection::vec(0usize..40_000, 1..6),
        steps in proptest::collection::vec(step(), 1..40),
        seed in any::<u64>(),
    ) {
        for &backend in Backend::ALL {
            let (mut enc, mut dec) = codec_pair(backend, seed);
            let mut data = Vec::new();
            let mut wire = BytesMut::new();
            for (i, &len) in messages.iter().enumerate() {
                let msg = payload(len, seed.wrapping_add(i as u64));
                enc.encode(&msg[..], &mut wire).unwrap();
                data.extend_from_slice(&msg);
            }
            let wire = wire.freeze();
            let mut fed = 0;
            let mut src = BytesMut::new();
            let mut got = Vec::new();
            let mut tampered = false;
            let mut refused = false;
            for s in &steps {
                let r = match s {
                    Step::Feed(n) => {
                        let n = (*n).min(wire.len() - fed);
                        src.put_slice(&wire[fed..fed + n]);
                        fed += n;
                        Ok(())
                    }
                    Step::Decode => drain(&mut dec, &mut src, &mut got),
                    Step::Swap => {
                        src = BytesMut::from(&src[..]);
                        Ok(())
                    }
                    Step::SplitBack(at) => {
                        let at = (*at).min(src.len());
                        let mut back = src.split_off(at);
                        // Skipping unconsumed sealed bytes is tampering.
                        tampered |= at > 0 && !back.is_empty();
                        let r = drain(&mut dec, &mut back, &mut got);
                        // What the decoder did not consume goes back
                        // behind the front.
                        src.unsplit(back);
                        r
                    }
                    Step::Forge { garbage } => {
                        let mut evil = match garbage {
                            None => BytesMut::from(&forged_frame()[..]),
                            Some(len) => BytesMut::from(&payload(*len, seed)[..]),
                        };
                        tampered = true;
                        let r = drain(&mut dec, &mut evil, &mut got);
                        prop_assert!(
                            data.starts_with(&got),
                            "{}: forged input released as data", backend
                        );
                        r
                    }
                    Step::Flip(bit) => {
                        if !src.is_empty() {
                            let i = (bit / 8) % src.len();
                            src[i] ^= 1 << (bit % 8);
                            tampered = true;
                        }
                        Ok(())
                    }
                };
                prop_assert!(
                    data.starts_with(&got),
                    "{}: yielded {} bytes that are not the peer's data in order",
                    backend,
                    got.len()
                );
                if r.is_err() {
                    refused = true;
                    // Refused once, refused for good.
                    prop_assert!(dec.decode(&mut src).is_err(), "{}: not sticky", backend);
                    break;
                }
                if matches!(s, Step::Forge { .. }) {
                    break;
                }
            }
            if !tampered && !refused {
                // Nothing was tampered with: deliver the rest, and all of the
                // data must arrive.
                src.put_slice(&wire[fed..]);
                prop_assert!(drain(&mut dec, &mut src, &mut got).is_ok());
                prop_assert!(got == data, "{}: {} of {} bytes", backend, got.len(), data.len());
                prop_assert!(src.is_empty());
            }
            prop_assert!(!refused || tampered, "{}: refused untampered input", backend);
        }
    }
}
