//! The checks behind the fuzz targets, one `pub fn TARGET(data: &[u8])` per
//! target. Each one panics (assert) when p2p-conn misbehaves on `data` and
//! returns quietly otherwise; protocol errors on hostile input are fine.
//!
//! This file is compiled twice: as the library of the `p2p-conn-fuzz` crate
//! (its `fuzz_targets/*.rs` call these functions under libFuzzer), and as a
//! module of `p2p-conn/tests/fuzz_seeds.rs` (`#[path]`), which replays every
//! committed seed in `p2p-conn-fuzz/seeds/<target>/` in `cargo test`. So it
//! uses nothing but `std` and `p2p_conn` (feature `testkit`).
//!
//! Structured inputs are decoded by [`Input`], a small hand-written reader
//! (missing bytes read as zero), rather than the `arbitrary` crate: the replay
//! test runs inside p2p-conn's test suite, which does not depend on
//! `arbitrary`, and both must decode a seed identically.

use std::io::{self, IoSlice};
use std::task::Poll;

use p2p_conn::engine::budget::{Admission, Budget};
use p2p_conn::engine::{FrameReader, FrameWriter, ReadCore, WriteCore};
use p2p_conn::proto::aead::{Cipher, TAG_LEN};
use p2p_conn::proto::auth_sig::{self, Varint};
use p2p_conn::proto::frame::{nonce_bytes, sealed_frame_len, LEN_PREFIX};
use p2p_conn::proto::{Backend, FrameSize, HandshakeParams, Opener, ProtocolError, Sealer, Stage};
use p2p_conn::testkit::{self, Rng};
use p2p_conn::PublicKey;

/// The fixed frame key of the `frames` (hostile mode) and `roundtrip` targets.
pub const KEY: [u8; 32] = [0x42; 32];

/// Most loop turns any driver takes before it calls the run a hang.
const MAX_STEPS: usize = 2_000_000;

// ---------------------------------------------------------------------------
// Input decoding

/// Reads typed values from the front of the fuzz input; an exhausted input
/// reads as zeros, so every input decodes.
pub struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input(data)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    /// Up to `n` bytes (fewer at the end of the input).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.0)
    }
    /// A compiled-in AEAD backend.
    pub fn backend(&mut self) -> Backend {
        Backend::ALL[usize::from(self.u8()) % Backend::ALL.len()]
    }
}

/// What one transport call of a driver does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Move at most this many bytes (at least 1).
    Take(usize),
    /// `Poll::Pending` (the caller retries).
    Pending,
    /// `ErrorKind::Interrupted` (the engine must retry).
    Interrupted,
}

/// Fuzz-chosen chunking of a transport: every call moves a seeded-random
/// 1..=`max` bytes (`max == 0`: everything offered), with optional
/// `Pending`/`Interrupted` calls in between.
struct Chunks {
    rng: Rng,
    max: usize,
    faults: bool,
}

impl Chunks {
    /// Three bytes: fault flag + seed, and the largest piece.
    fn decode(inp: &mut Input<'_>) -> Self {
        let seed = inp.u8();
        let max = usize::from(inp.u16());
        Chunks {
            rng: Rng::new(u64::from(seed >> 1)),
            max,
            faults: seed & 1 == 1,
        }
    }
    fn next(&mut self, offered: usize) -> Step {
        if self.faults {
            match self.rng.below(16) {
                0 => return Step::Pending,
                1 => return Step::Interrupted,
                _ => {}
            }
        }
        if self.max == 0 {
            return Step::Take(offered.max(1));
        }
        Step::Take(self.rng.range(1, self.max))
    }
}

/// Read the whole of `wire` through a [`FrameReader`] over `core`, the
/// transport chunked by `reads`, into an `out_max`-byte buffer per call.
/// Returns the plaintext and how the stream ended.
fn read_all(
    core: ReadCore,
    wire: &[u8],
    reads: &mut Chunks,
    out_max: usize,
) -> (Vec<u8>, io::Result<()>) {
    let mut reader = FrameReader::new(core);
    let mut pos = 0;
    let mut out = Vec::new();
    let mut buf = vec![0u8; out_max.max(1)];
    let mut read = |dst: &mut [u8]| match reads.next(dst.len()) {
        Step::Pending => Poll::Pending,
        Step::Interrupted => Poll::Ready(Err(io::ErrorKind::Interrupted.into())),
        Step::Take(n) => {
            let n = n.min(dst.len()).min(wire.len() - pos);
            dst[..n].copy_from_slice(&wire[pos..pos + n]);
            pos += n;
            Poll::Ready(Ok(n))
        }
    };
    for _ in 0..MAX_STEPS {
        match reader.poll_read_with(&mut buf, &mut read) {
            Poll::Ready(Ok(0)) => return (out, Ok(())),
            Poll::Ready(Ok(n)) => {
                assert!(n <= buf.len(), "read returned more than the buffer");
                out.extend_from_slice(&buf[..n]);
            }
            Poll::Ready(Err(e)) => {
                // Errors are sticky: the stream cannot resynchronise.
                let again = reader.poll_read_with(&mut buf, |_: &mut [u8]| Poll::Ready(Ok(0)));
                assert!(
                    matches!(again, Poll::Ready(Err(_))),
                    "a read after the error {e} returned {again:?}"
                );
                return (out, Err(e));
            }
            Poll::Pending => {}
        }
    }
    panic!("FrameReader made no progress in {MAX_STEPS} calls");
}

// ---------------------------------------------------------------------------
// handshake

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
pub fn handshake(data: &[u8]) {
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

// ---------------------------------------------------------------------------
// frames

/// The receive side after a handshake. `cfg % 3` picks the mode, `cfg / 4`
/// the backend:
///
/// * 0, raw: a deterministic handshake pair (seeds 1 and 2); the rest of the
///   input is the peer's sealed stream, fed to the second side's
///   [`FrameReader`] in fuzz-chosen chunks. Checks: no panic; a clean end
///   only on a frame boundary; never more plaintext than the frames hold.
/// * 1, hostile: frames built by hand from the input (any length field,
///   empty frames, junk padding) and sealed correctly with [`KEY`], then
///   optionally cut short. Checks: the reader returns exactly the data the
///   length fields announce, up to the first frame whose length field is too
///   large, and then fails; a clean end exactly when every frame is valid
///   and whole.
/// * 2, tampered: messages sealed by the handshake's own [`Sealer`], then up
///   to 4 bytes flipped. Checks: exactly the data of the frames before the
///   first damaged one comes back, then an error.
pub fn frames(data: &[u8]) {
    let mut inp = Input::new(data);
    let cfg = inp.u8();
    let backend = Backend::ALL[usize::from(cfg >> 2) % Backend::ALL.len()];
    match cfg % 4 {
        0 => frames_raw(&mut inp, backend),
        1 | 3 => frames_hostile(&mut inp, backend),
        _ => frames_tampered(&mut inp, backend),
    }
}

/// The deterministic handshake pair (seeds 1 and 2) of the `frames` target.
pub fn handshake_pair(small: bool, backend: Backend) -> p2p_conn::testkit::HandshakeRun {
    let params = HandshakeParams {
        frame_size: if small {
            FrameSize::new(64).expect("64-byte frames are valid")
        } else {
            FrameSize::STANDARD
        },
        backend,
    };
    testkit::run_handshakes(
        testkit::deterministic_handshake(1, params).1,
        testkit::deterministic_handshake(2, params).1,
        usize::MAX,
    )
    .expect("the deterministic handshake pair completes")
}

fn frames_raw(inp: &mut Input<'_>, backend: Backend) {
    let opts = inp.u8();
    let rbuf = usize::from(inp.u16()) * 2;
    let mut reads = Chunks::decode(inp);
    let out_max = 1 + usize::from(inp.u16());
    let wire = inp.rest();
    let run = handshake_pair(opts & 1 == 1, backend);
    let fs = run.b.opener.frame_size().get();
    let sealed = run.b.opener.sealed_frame_len();
    let core = ReadCore::new(run.b.opener, run.b.initial_plaintext, rbuf);
    let (out, end) = read_all(core, wire, &mut reads, out_max);
    assert!(
        out.len() <= wire.len() / sealed * fs,
        "{} plaintext bytes from {} sealed bytes",
        out.len(),
        wire.len()
    );
    if end.is_ok() {
        assert_eq!(wire.len() % sealed, 0, "clean end inside a frame");
    }
}

/// A frame size for the hostile mode: the standard one (the multi-frame
/// engine's), the smallest, or any in 64..=4096.
fn frame_size_of(sel: u8, inp: &mut Input<'_>) -> usize {
    match sel % 4 {
        0 | 1 => 1024,
        2 => 64,
        _ => 64 + usize::from(inp.u16()) % (4096 - 64 + 1),
    }
}

fn frames_hostile(inp: &mut Input<'_>, backend: Backend) {
    let sel = inp.u8();
    let fs = frame_size_of(sel, inp);
    let read_backend = inp.backend();
    let rbuf = usize::from(inp.u16()) * 4;
    let mut reads = Chunks::decode(inp);
    let out_max = 1 + usize::from(inp.u16());
    let cut = inp.u16();
    let sealed = sealed_frame_len(fs);
    let cipher = Cipher::new(backend, &KEY);

    // Build and seal the frames; `data[i]` is what frame i announces (None:
    // a length field above the frame size).
    let mut wire = Vec::new();
    let mut data: Vec<Option<Vec<u8>>> = Vec::new();
    let mut counter = 0u64;
    while !inp.is_empty() && data.len() < 80 {
        let kind = inp.u8();
        let len: u32 = match kind % 8 {
            0 => 0,
            1 => fs as u32,
            2 => fs as u32 + 1 + u32::from(inp.u8()),
            3 => inp.u32(),
            4 => u32::MAX,
            _ => (usize::from(inp.u16()) % (fs + 1)) as u32,
        };
        let body_len = (len as usize).min(fs);
        let mut plain = Vec::with_capacity(LEN_PREFIX + fs + TAG_LEN);
        plain.extend_from_slice(&len.to_le_bytes());
        plain.extend_from_slice(inp.bytes(body_len));
        // Hostile padding (must be ignored) or zeros; also fills a body the
        // input ran out for.
        let pad = if kind & 0x80 != 0 { 0xa5 } else { 0 };
        plain.resize(LEN_PREFIX + fs, pad);
        let clear = plain[LEN_PREFIX..LEN_PREFIX + body_len].to_vec();
        let tag = cipher.seal_in_place(&nonce_bytes(counter), &mut plain);
        plain.extend_from_slice(&tag);
        assert_eq!(plain.len(), sealed);
        wire.extend_from_slice(&plain);
        counter += 1;
        data.push((len as usize <= fs).then_some(clear));
    }
    if cut & 1 == 1 && !wire.is_empty() {
        let drop = usize::from(cut >> 1) % sealed.min(wire.len()) + 1;
        wire.truncate(wire.len() - drop);
    }

    let whole = wire.len() / sealed;
    let first_bad = data.iter().position(Option::is_none).unwrap_or(data.len());
    let good = first_bad.min(whole);
    let expected: Vec<u8> = data[..good]
        .iter()
        .flat_map(|d| d.as_deref().unwrap_or_default().iter().copied())
        .collect();
    let core = ReadCore::new(
        Opener::new(
            Cipher::new(read_backend, &KEY),
            FrameSize::new(fs).expect("valid frame size"),
        ),
        Vec::new(),
        rbuf,
    );
    let (out, end) = read_all(core, &wire, &mut reads, out_max);
    assert!(
        out == expected,
        "reader returned {} bytes, the frames before the first bad one announce {} \
         (frames {}, whole {whole}, first bad {first_bad})",
        out.len(),
        expected.len(),
        data.len()
    );
    let clean = first_bad >= whole && wire.len() % sealed == 0;
    match end {
        Ok(()) => assert!(clean, "clean end of a stream with a bad or cut frame"),
        Err(e) => assert!(!clean, "a valid whole stream failed: {e}"),
    }
}

fn frames_tampered(inp: &mut Input<'_>, backend: Backend) {
    let opts = inp.u8();
    let rbuf = usize::from(inp.u16()) * 4;
    let mut reads = Chunks::decode(inp);
    let out_max = 1 + usize::from(inp.u16());
    let mut run = handshake_pair(opts & 1 == 1, backend);
    let fs = run.a.sealer.frame_size().get();
    let sealed = run.a.sealer.sealed_frame_len();

    // Messages, and the plaintext carried by each frame.
    let mut wire = Vec::new();
    let mut frame_data: Vec<Vec<u8>> = Vec::new();
    for i in 0..(inp.u8() % 5) {
        let len = usize::from(inp.u16()) % 6000;
        let msg = testkit::payload(len, u64::from(i) + u64::from(opts));
        run.a
            .sealer
            .seal_append(&msg, &mut wire)
            .expect("sealing a message");
        frame_data.extend(msg.chunks(fs).map(<[u8]>::to_vec));
    }
    assert_eq!(wire.len(), frame_data.len() * sealed);
    let original = wire.clone();
    for _ in 0..(inp.u8() % 5) {
        if wire.is_empty() {
            break;
        }
        let pos = inp.u32() as usize % wire.len();
        wire[pos] ^= inp.u8() | 1;
    }
    let first_bad = wire
        .iter()
        .zip(&original)
        .position(|(a, b)| a != b)
        .map_or(frame_data.len(), |p| p / sealed);
    let expected: Vec<u8> = frame_data[..first_bad].concat();
    let core = ReadCore::new(run.b.opener, run.b.initial_plaintext, rbuf);
    let (out, end) = read_all(core, &wire, &mut reads, out_max);
    assert!(
        out == expected,
        "reader returned {} bytes, expected {} (first damaged frame {first_bad} of {})",
        out.len(),
        expected.len(),
        frame_data.len()
    );
    assert_eq!(
        end.is_ok(),
        first_bad == frame_data.len(),
        "end of stream {end:?} with the first damaged frame {first_bad} of {}",
        frame_data.len()
    );
}

// ---------------------------------------------------------------------------
// auth_sig

/// `auth_sig::decode` and `read_uvarint` on arbitrary bytes, and the
/// handshake's ephemeral-key message parser (not public on its own: driven
/// through a [`Handshake`]).
///
/// Checks: no panic; a decoded (key, signature) re-encodes with
/// `auth_sig::encode` into the canonical 103-byte message, which decodes to
/// the same pair; a decoded varint used at most 10 bytes of the input and
/// its canonical encoding is no longer and decodes to the same value; the
/// ephemeral message is accepted only with the `22 0a 20` prefix.
pub fn auth_sig(data: &[u8]) {
    if let Ok((key, sig)) = auth_sig::decode(data) {
        let enc = auth_sig::encode(&key, &sig);
        assert_eq!(enc.len(), auth_sig::AUTH_SIG_MSG_LEN);
        assert_eq!(usize::from(enc[0]), enc.len() - 1, "delimiting prefix");
        assert_eq!(
            auth_sig::decode(&enc[1..]),
            Ok((key, sig)),
            "re-encoded message decodes differently"
        );
    }
    match auth_sig::read_uvarint(data) {
        Varint::Value(v, n) => {
            assert!(
                (1..=10).contains(&n) && n <= data.len(),
                "varint used {n} bytes"
            );
            let canon = uvarint(v);
            assert!(canon.len() <= n);
            assert_eq!(
                auth_sig::read_uvarint(&canon),
                Varint::Value(v, canon.len())
            );
        }
        Varint::Incomplete => assert!(data.len() < 10 && data.iter().all(|b| b & 0x80 != 0)),
        Varint::Overflow => assert!(data.len() >= 10),
    }

    // The ephemeral-key message: the first 35 bytes into a fresh handshake.
    let msg = &data[..data.len().min(p2p_conn::proto::handshake::EPH_MSG_LEN)];
    let (_, mut hs) = testkit::deterministic_handshake(3, HandshakeParams::default());
    let local = hs.local_ephemeral_key();
    let r = testkit::feed(&mut hs, msg);
    let well_formed = msg.len() >= 3 && msg[..3] == [0x22, 0x0a, 0x20];
    // Our own key comes back (bit 255 is ignored, as X25519 ignores it).
    let reflected = msg.len() == 35 && {
        let (mut r, mut l) = ([0u8; 32], local);
        r.copy_from_slice(&msg[3..]);
        r[31] &= 0x7f;
        l[31] &= 0x7f;
        r == l
    };
    if msg.len() == p2p_conn::proto::handshake::EPH_MSG_LEN {
        match &r {
            Ok(()) => {
                assert!(well_formed, "accepted a malformed ephemeral message");
                assert!(!reflected, "accepted our own ephemeral key");
                assert_eq!(hs.stage(), Stage::AuthSignature);
            }
            Err(ProtocolError::MalformedEphemeralMessage(_)) => assert!(!well_formed),
            Err(ProtocolError::LowOrderEphemeralKey) => assert!(well_formed),
            Err(ProtocolError::ReflectedEphemeralKey) => {
                assert!(well_formed && reflected)
            }
            Err(e) => panic!("unexpected error for an ephemeral message: {e}"),
        }
    } else if r.is_ok() {
        assert_eq!(hs.stage(), Stage::EphemeralKey);
    }
}

/// The canonical unsigned LEB128 encoding of `v`.
fn uvarint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

// ---------------------------------------------------------------------------
// roundtrip

/// Messages through a [`FrameWriter`] and back through a [`FrameReader`].
///
/// Input (structure decoded by [`Input`]): frame size (64..=4096, or 1024),
/// write and read backends (they must interoperate), flush size, read-buffer
/// size, write and read chunkings (with `Pending`/`Interrupted`), the reader's
/// output-buffer size, optional handshake-leftover plaintext, then up to 8
/// messages (length, and how to send it: `poll_write_with` in pieces,
/// `poll_send_with` over two slices, or `poll_write_vectored_with` over three).
///
/// Checks: each call accepts at most one flush's worth and makes progress;
/// the wire is exactly the frames the accepted pieces need; nothing is left
/// pending after a flush; the reader returns the leftover plaintext and then
/// every message, byte-identical, and ends cleanly.
pub fn roundtrip(data: &[u8]) {
    let mut inp = Input::new(data);
    let cfg = inp.u8();
    let fs = if cfg & 1 == 1 {
        1024
    } else {
        64 + usize::from(inp.u16()) % (4096 - 64 + 1)
    };
    let frame_size = FrameSize::new(fs).expect("valid frame size");
    let wb = inp.backend();
    let rb = inp.backend();
    let flush = usize::from(inp.u16()) * 4;
    let rbuf = usize::from(inp.u16()) * 2;
    let mut writes = Chunks::decode(&mut inp);
    let mut reads = Chunks::decode(&mut inp);
    let out_max = 1 + usize::from(inp.u16());
    let initial = if cfg & 2 == 2 {
        testkit::payload(usize::from(inp.u8()), 7)
    } else {
        Vec::new()
    };
    let mut messages = Vec::new();
    for i in 0..(inp.u8() % 9) {
        let len = match inp.u8() % 4 {
            0 => usize::from(inp.u8()),
            1 => fs * usize::from(inp.u8() % 20),
            _ => usize::from(inp.u16()) % 40_000,
        };
        let how = inp.u16();
        messages.push((
            testkit::payload(len, u64::from(i) << 8 | u64::from(cfg)),
            how,
        ));
    }

    let mut writer = FrameWriter::new(WriteCore::new(
        Sealer::new(Cipher::new(wb, &KEY), frame_size),
        flush,
    ));
    let max_chunk = writer.core().max_chunk();
    let sealed = sealed_frame_len(fs);
    let mut wire = Vec::new();
    let mut write = |buf: &[u8]| match writes.next(buf.len()) {
        Step::Pending => Poll::Pending,
        Step::Interrupted => Poll::Ready(Err(io::ErrorKind::Interrupted.into())),
        Step::Take(n) => {
            let n = n.min(buf.len());
            wire.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
    };
    // Every accepting call seals min(rest, max_chunk) bytes as one message.
    let sealed_for = |len: usize| -> usize {
        let mut n = len;
        let mut total = 0;
        while n > 0 {
            let k = n.min(max_chunk);
            total += k.div_ceil(fs) * sealed;
            n -= k;
        }
        total
    };
    let mut expected_wire = 0usize;
    let mut steps = 0usize;
    let mut tick = || {
        steps += 1;
        assert!(steps < MAX_STEPS, "FrameWriter made no progress");
    };
    for (msg, how) in &messages {
        expected_wire += sealed_for(msg.len());
        let split = if msg.is_empty() {
            0
        } else {
            usize::from(*how >> 2) % (msg.len() + 1)
        };
        match how % 3 {
            0 => {
                let mut off = 0;
                while off < msg.len() {
                    tick();
                    match writer.poll_write_with(&msg[off..], &mut write) {
                        Poll::Ready(Ok(n)) => {
                            assert_eq!(n, (msg.len() - off).min(max_chunk), "bytes accepted");
                            off += n;
                        }
                        Poll::Ready(Err(e)) => panic!("write failed: {e}"),
                        Poll::Pending => {}
                    }
                }
            }
            1 => {
                let (a, b) = msg.split_at(split);
                let mut bufs = [IoSlice::new(a), IoSlice::new(b)];
                loop {
                    tick();
                    match writer.poll_send_with(&mut bufs, &mut write) {
                        Poll::Ready(Ok(())) => break,
                        Poll::Ready(Err(e)) => panic!("send failed: {e}"),
                        Poll::Pending => {}
                    }
                }
                assert!(
                    bufs.iter().all(|b| b.is_empty()),
                    "send returned with bytes left"
                );
            }
            _ => {
                let (a, rest) = msg.split_at(split);
                let (b, c) = rest.split_at(rest.len() / 2);
                let mut off = 0;
                while off < msg.len() {
                    tick();
                    // The three parts, past what was accepted.
                    let parts: Vec<&[u8]> = [a, b, c]
                        .iter()
                        .scan(0usize, |start, p| {
                            let s = *start;
                            *start += p.len();
                            Some(&p[off.saturating_sub(s).min(p.len())..])
                        })
                        .collect();
                    match writer.poll_write_vectored_with(&parts, &mut write) {
                        Poll::Ready(Ok(n)) => {
                            assert_eq!(n, (msg.len() - off).min(max_chunk), "bytes accepted");
                            off += n;
                        }
                        Poll::Ready(Err(e)) => panic!("vectored write failed: {e}"),
                        Poll::Pending => {}
                    }
                }
            }
        }
    }
    loop {
        tick();
        match writer.poll_flush_with(&mut write) {
            Poll::Ready(Ok(())) => break,
            Poll::Ready(Err(e)) => panic!("flush failed: {e}"),
            Poll::Pending => {}
        }
    }
    assert!(writer.pending().is_empty(), "bytes pending after a flush");
    assert_eq!(wire.len(), expected_wire, "wire length");

    let core = ReadCore::new(
        Opener::new(Cipher::new(rb, &KEY), frame_size),
        initial.clone(),
        rbuf,
    );
    let (out, end) = read_all(core, &wire, &mut reads, out_max);
    if let Err(e) = end {
        panic!("reading a valid stream failed: {e}");
    }
    let expected: Vec<u8> = std::iter::once(&initial)
        .chain(messages.iter().map(|(m, _)| m))
        .flatten()
        .copied()
        .collect();
    assert!(
        out == expected,
        "round trip returned {} bytes, sent {}",
        out.len(),
        expected.len()
    );
}

// ---------------------------------------------------------------------------
// queue_budget

/// [`Budget`] under an arbitrary sequence of admissions and releases,
/// against a model of its documented rules.
///
/// Input: the cap (2 bytes), then operations: a byte with the high bit set
/// releases a held admission (the rest of the byte picks which); otherwise
/// `op % 4` admits an empty message, a small one (< cap), one exactly at the
/// cap, or a large one (cap + 0..65535).
///
/// Checks: admission happens exactly when the rules allow it (a small
/// message fits under the cap with the small ones pending; a large one takes
/// the single large slot when it is free); `pending` is what is held and
/// never above cap + the one large message; a release gives back exactly
/// what it admitted; releasing everything returns to zero.
pub fn queue_budget(data: &[u8]) {
    let mut inp = Input::new(data);
    let max = usize::from(inp.u16()).max(1);
    let mut budget = Budget::new(max);
    assert_eq!(budget.max(), max);
    let mut held: Vec<Admission> = Vec::new();
    let (mut small, mut large) = (0usize, None::<usize>);
    while !inp.is_empty() {
        let op = inp.u8();
        if op & 0x80 != 0 {
            if held.is_empty() {
                continue;
            }
            let a = held.swap_remove(usize::from(op & 0x7f) % held.len());
            let before = budget.pending();
            budget.release(a);
            assert_eq!(budget.pending(), before - a.len(), "release of {a:?}");
            match a {
                Admission::Small(n) => small -= n,
                Admission::Large(_) => large = None,
            }
        } else {
            let len = match op % 4 {
                0 => 0,
                1 => usize::from(inp.u16()) % max,
                2 => max,
                _ => max + usize::from(inp.u16()),
            };
            let before = budget.pending();
            let got = budget.try_admit(len);
            let allowed = if len >= max {
                large.is_none()
            } else {
                small + len <= max
            };
            assert_eq!(
                got.is_some(),
                allowed,
                "admit {len} (cap {max}, small {small}, large {large:?})"
            );
            match got {
                Some(a) => {
                    assert_eq!(a.len(), len);
                    assert_eq!(a.is_empty(), len == 0);
                    assert_eq!(budget.pending(), before + len);
                    match a {
                        Admission::Small(n) => {
                            assert!(len < max);
                            small += n;
                        }
                        Admission::Large(n) => {
                            assert!(len >= max);
                            large = Some(n);
                        }
                    }
                    held.push(a);
                }
                None => assert_eq!(budget.pending(), before, "a refusal changed pending"),
            }
        }
        assert_eq!(budget.pending(), small + large.unwrap_or(0));
        assert!(small <= max, "small messages above the cap");
        assert!(budget.pending() <= max + large.unwrap_or(0));
        let larges = held
            .iter()
            .filter(|a| matches!(a, Admission::Large(_)))
            .count();
        assert!(larges <= 1, "{larges} large admissions held at once");
    }
    for a in held.drain(..) {
        budget.release(a);
    }
    assert_eq!(budget.pending(), 0, "everything released");
}
