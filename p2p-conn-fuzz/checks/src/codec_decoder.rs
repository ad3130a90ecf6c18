//! `codec_decoder`: the tokio-util codec's [`SecretDecoder`] driven the way
//! a caller may drive it, with a different buffer on any call.
//!
//! `tokio_util::codec::Decoder::decode` takes a `&mut BytesMut` on every
//! call, and nothing stops a caller from handing it another buffer each time
//! (one driving the decoder directly, or one rebuilding `FramedParts` with a
//! fresh read buffer). Whatever it is handed, the decoder must release only
//! bytes the peer sealed, in order (issue 17: with `Backend::Avx512` it used
//! to trust that the buffer still held the frames it had opened ahead, and
//! released a forged frame handed to it in a fresh buffer).

use bytes::{BufMut, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use crate::drive::handshake_pair;
use crate::input::Input;
use crate::Seeds;
use p2p_conn::io::codec::{SecretCodec, SecretDecoder};
use p2p_conn::testkit;
use p2p_conn::testkit::internals::wire::STANDARD_SEALED_FRAME;
use p2p_conn::Config;

/// Most steps decoded from one input.
const MAX_STEPS: usize = 64;

/// What the caller does next, by `op % 8` of the step's first byte.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// 0, 1: append the next `n` bytes (u16; 0: all that is left) of the
    /// peer's sealed stream to the buffer.
    Feed(usize),
    /// 2: decode until the decoder yields `None` (or fails).
    Decode,
    /// 3: decode once (it may keep frames it opened ahead for later calls).
    DecodeOne,
    /// 4: move the unconsumed bytes into a fresh `BytesMut` and go on with
    /// that one.
    Swap,
    /// 5: split the buffer at `at` (u16), hand the decoder only the back
    /// part (decode until `None`), then put the halves back together.
    SplitBack(usize),
    /// 6: hand the decoder a fresh buffer of forged bytes: a forged frame
    /// (`op & 8 == 0`), or `len` (u16 % 4 frames) bytes of the input. The
    /// decoder's state is unknown afterwards, so the steps end here.
    Forge { garbage: Option<usize> },
    /// 7: flip bit `bit` (u32, modulo the buffer's bits) of the buffer.
    Flip(u32),
}

impl Step {
    fn decode(inp: &mut Input<'_>) -> Self {
        let op = inp.u8();
        match op % 8 {
            0 | 1 => Step::Feed(usize::from(inp.u16())),
            2 => Step::Decode,
            3 => Step::DecodeOne,
            4 => Step::Swap,
            5 => Step::SplitBack(usize::from(inp.u16())),
            6 => Step::Forge {
                garbage: (op & 8 != 0)
                    .then(|| usize::from(inp.u16()) % (4 * STANDARD_SEALED_FRAME)),
            },
            _ => Step::Flip(inp.u32()),
        }
    }
}

/// One standard sealed frame that no key sealed: a length prefix of 5,
/// "EVIL!", zero padding and a zero tag.
pub fn forged_frame() -> Vec<u8> {
    let mut f = vec![0u8; STANDARD_SEALED_FRAME];
    f[..4].copy_from_slice(&5u32.to_le_bytes());
    f[4..9].copy_from_slice(b"EVIL!");
    f
}

/// Decode from `src` until it yields nothing more (or, with `once`, at most
/// one item); append the items to `got`. `Err` once the decoder refuses.
fn decode(
    dec: &mut SecretDecoder,
    src: &mut BytesMut,
    got: &mut Vec<u8>,
    once: bool,
) -> Result<(), String> {
    loop {
        match dec.decode(src) {
            Ok(Some(item)) => {
                got.extend_from_slice(&item);
                if once {
                    return Ok(());
                }
            }
            Ok(None) => return Ok(()),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The codec decoder of a deterministic handshake pair, under fuzz-chosen
/// buffer handling.
///
/// Input: the backend (one byte, `Backend::ALL`), the number of messages the
/// peer seals (`u8 % 6`) and each one's length (u16), all sealed by the
/// peer's own `SecretEncoder` from the same handshake; then up to 64 steps
/// (see [`Step`]): feed, decode until `None`, decode once, swap to a fresh
/// buffer, split and hand only the back part, forge, flip a bit.
///
/// Checks: every byte the decoder ever yields continues the peer's
/// plaintext, in order (so no forged, flipped or skipped byte is ever
/// released); once `decode` fails, every later `decode` fails too (on the
/// buffer at hand, an empty one, and one holding the rest of the genuine
/// stream); with no tampering step (forge, flip, a split that skips bytes),
/// feeding the rest of the stream delivers the whole plaintext, leaves no
/// byte in the buffer and never fails.
pub fn check(data: &[u8]) {
    let mut inp = Input::new(data);
    let backend = inp.backend();
    let run = handshake_pair(false, backend);
    let config = Config::default();
    let mut plain = run.b.initial_plaintext.clone();
    let (mut enc, _) = SecretCodec::new(run.a, &config)
        .expect("the sending side's codec")
        .split();
    let (_, mut dec) = SecretCodec::new(run.b, &config)
        .expect("the receiving side's codec")
        .split();
    let mut wire = BytesMut::new();
    for i in 0..inp.u8() % 6 {
        let msg = testkit::payload(usize::from(inp.u16()), u64::from(i));
        enc.encode(&msg[..], &mut wire).expect("sealing a message");
        plain.extend_from_slice(&msg);
    }
    let wire = wire.freeze();

    let mut steps = Vec::new();
    let mut fed = 0;
    let mut src = BytesMut::new();
    let mut got = Vec::new();
    let mut tampered = false;
    let mut refused = None;
    while steps.len() < MAX_STEPS && !inp.is_empty() {
        let step = Step::decode(&mut inp);
        steps.push(step);
        let r = match step {
            Step::Feed(n) => {
                let left = wire.len() - fed;
                let n = if n == 0 { left } else { n.min(left) };
                src.put_slice(&wire[fed..fed + n]);
                fed += n;
                Ok(())
            }
            Step::Decode => decode(&mut dec, &mut src, &mut got, false),
            Step::DecodeOne => decode(&mut dec, &mut src, &mut got, true),
            Step::Swap => {
                src = BytesMut::from(&src[..]);
                Ok(())
            }
            Step::SplitBack(at) => {
                let at = at.min(src.len());
                let mut back = src.split_off(at);
                // Skipping unconsumed sealed bytes is tampering.
                tampered |= at > 0 && !back.is_empty();
                let r = decode(&mut dec, &mut back, &mut got, false);
                // What the decoder did not consume goes back behind the front.
                src.unsplit(back);
                r
            }
            Step::Forge { garbage } => {
                let mut evil = match garbage {
                    None => BytesMut::from(&forged_frame()[..]),
                    Some(len) => BytesMut::from(inp.bytes(len)),
                };
                tampered = true;
                decode(&mut dec, &mut evil, &mut got, false)
            }
            Step::Flip(bit) => {
                if !src.is_empty() {
                    let bit = bit as usize % (src.len() * 8);
                    src[bit / 8] ^= 1 << (bit % 8);
                    tampered = true;
                }
                Ok(())
            }
        };
        if !plain.starts_with(&got) {
            let at = got.iter().zip(&plain).take_while(|(a, b)| a == b).count();
            panic!(
                "{backend}: the decoder yielded {} bytes that do not continue the peer's \
                 plaintext ({} bytes) from byte {at} on (steps {steps:?})",
                got.len(),
                plain.len()
            );
        }
        if let Err(e) = r {
            refused = Some(e);
            break;
        }
        if matches!(step, Step::Forge { .. }) {
            break;
        }
    }

    if let Some(e) = refused {
        // Refused once, refused for good, whatever buffer comes next.
        let rest = &wire[fed..];
        for (what, mut buf) in [
            ("the buffer at hand", src),
            ("an empty buffer", BytesMut::new()),
            ("the rest of the genuine stream", BytesMut::from(rest)),
        ] {
            let again = dec.decode(&mut buf);
            assert!(
                again.is_err(),
                "{backend}: after `{e}` a decode of {what} returned {again:?} (steps {steps:?})"
            );
        }
        assert!(
            tampered,
            "{backend}: refused an untampered stream: `{e}` (steps {steps:?})"
        );
        return;
    }
    if !tampered {
        // Nothing was tampered with: all of the rest must arrive.
        src.put_slice(&wire[fed..]);
        if let Err(e) = decode(&mut dec, &mut src, &mut got, false) {
            panic!("{backend}: an untampered stream failed: `{e}` (steps {steps:?})");
        }
        assert!(
            got == plain,
            "{backend}: {} of the peer's {} plaintext bytes arrived (steps {steps:?})",
            got.len(),
            plain.len()
        );
        assert!(
            src.is_empty(),
            "{backend}: {} bytes of a whole stream left in the buffer (steps {steps:?})",
            src.len()
        );
    }
}

/// `codec_decoder` input (see `p2p_conn_fuzz_checks::codec_decoder`): the
/// backend, the messages the peer seals, then steps.
mod cd {
    use p2p_conn::testkit::internals::wire::STANDARD_SEALED_FRAME;
    use p2p_conn::Backend;

    pub fn head(backend: Backend, lens: &[u16]) -> Vec<u8> {
        let i = Backend::ALL.iter().position(|&b| b == backend).unwrap();
        let mut v = vec![i as u8, lens.len() as u8];
        for n in lens {
            v.extend_from_slice(&n.to_le_bytes());
        }
        v
    }
    /// The next `n` sealed bytes (0: all that is left).
    pub fn feed(n: u16) -> Vec<u8> {
        let mut v = vec![0];
        v.extend_from_slice(&n.to_le_bytes());
        v
    }
    pub const DECODE: &[u8] = &[2];
    pub const DECODE_ONE: &[u8] = &[3];
    pub const SWAP: &[u8] = &[4];
    /// Hand only the part behind `at` (frames: `at` whole sealed frames).
    pub fn split_back(frames: u16) -> Vec<u8> {
        let mut v = vec![5];
        v.extend_from_slice(&(frames * STANDARD_SEALED_FRAME as u16).to_le_bytes());
        v
    }
    /// A fresh buffer holding the forged frame (length 5, "EVIL!").
    pub const FORGE_FRAME: &[u8] = &[6];
    /// A fresh buffer holding `bytes`.
    pub fn forge(bytes: &[u8]) -> Vec<u8> {
        let mut v = vec![6 | 8];
        v.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        v.extend_from_slice(bytes);
        v
    }
    pub fn flip(bit: u32) -> Vec<u8> {
        let mut v = vec![7];
        v.extend_from_slice(&bit.to_le_bytes());
        v
    }
}

/// The seeds this check owns, written to `seeds/codec_decoder/` by
/// `gen_seeds`: untampered streams fed in pieces with decodes and buffer
/// swaps, and tampered ones (split, forged, flipped), among them the
/// audit's case of issue 17.
pub fn seeds() -> Seeds {
    use crate::cat;
    use p2p_conn::Backend;
    let mut s = Seeds::default();
    use cd::*;
    use p2p_conn::testkit::internals::wire::STANDARD_SEALED_FRAME as FRAME;
    let avx512 = Backend::ALL.iter().copied().find(|b| b.name() == "avx512");
    let wide = avx512.unwrap_or(Backend::ALL[0]);
    let narrow = Backend::ALL[0];
    let rustcrypto = Backend::RustCrypto;
    // 17 KiB: one group of 16 frames for the multi-frame engine, and one more.
    let group: u16 = 17 * 1024;
    let seeds: Vec<(&str, Vec<u8>)> = vec![
        // Untampered: the whole plaintext must arrive.
        (
            "feed-in-halves",
            cat(&[
                &head(narrow, &[3000]),
                &feed(1500),
                DECODE,
                &feed(0),
                DECODE,
            ]),
        ),
        (
            "decode-one-then-swap",
            cat(&[
                &head(wide, &[group, 300]),
                &feed(0),
                DECODE_ONE,
                SWAP,
                DECODE_ONE,
                DECODE,
            ]),
        ),
        (
            "chunked-with-swaps",
            cat(&[
                &head(rustcrypto, &[100, 5000, 0]),
                &feed(700),
                DECODE,
                SWAP,
                &feed(2000),
                DECODE_ONE,
                SWAP,
                DECODE,
            ]),
        ),
        (
            "split-back-at-front",
            cat(&[&head(wide, &[group]), &feed(0), &split_back(0), DECODE]),
        ),
        // Forged bytes shorter than a frame: nothing to open, nothing to yield.
        (
            "forge-short-garbage",
            cat(&[&head(rustcrypto, &[2000]), &feed(500), &forge(b"EVIL!")]),
        ),
        // Tampered: refused, and refused for good.
        (
            "split-back-skips-a-frame",
            cat(&[&head(narrow, &[5000]), &feed(0), &split_back(1)]),
        ),
        (
            "forged-frame-after-decode",
            cat(&[&head(narrow, &[3000]), &feed(0), DECODE, FORGE_FRAME]),
        ),
        (
            "forge-garbage-frame-after-decode-one",
            cat(&[
                &head(wide, &[group]),
                &feed(0),
                DECODE_ONE,
                &forge(&[0xa5; FRAME]),
            ]),
        ),
        (
            "flip-then-decode",
            cat(&[&head(narrow, &[3000]), &feed(0), &flip(8 * 100 + 3), DECODE]),
        ),
        // The audit's case (issue 17): seal 17 KiB, decode one item, then a
        // fresh buffer holding the forged frame. With `Backend::Avx512` the
        // decoder used to yield "EVIL!".
        (
            "forged-frame-after-decode-one",
            cat(&[&head(wide, &[group]), &feed(0), DECODE_ONE, FORGE_FRAME]),
        ),
    ];
    for (name, bytes) in seeds {
        s.add(name, &bytes);
    }
    s
}
