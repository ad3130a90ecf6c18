//! The checks behind the fuzz targets, one `pub fn TARGET(data: &[u8])` per
//! target. Each one panics (assert) when p2p-conn misbehaves on `data` and
//! returns quietly otherwise; protocol errors on hostile input are fine.
//!
//! This file is compiled twice: as the library of the `p2p-conn-fuzz` crate
//! (its `fuzz_targets/*.rs` call these functions under libFuzzer), and as a
//! module of `p2p-conn/tests/fuzz_seeds.rs` (`#[path]`), which replays every
//! committed seed in `p2p-conn-fuzz/seeds/<target>/` in `cargo test`. So it
//! uses nothing but `std`, `p2p_conn` (features `testkit` and `queue`) and,
//! for `send_queue`, the `tokio` runtime both crates depend on.
//!
//! Structured inputs are decoded by [`Input`], a small hand-written reader
//! (missing bytes read as zero), rather than the `arbitrary` crate: the replay
//! test runs inside p2p-conn's test suite, which does not depend on
//! `arbitrary`, and both must decode a seed identically.

use std::cell::Cell;
use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use p2p_conn::io::queue::{Bytes, CloseReason, Overflow, QueueConfig, SendError, Sender};
use p2p_conn::proto::aead::Cipher;
use p2p_conn::proto::auth_sig;
use p2p_conn::proto::wire::{sealed_frame_len, LEN_PREFIX, TAG_LEN};
use p2p_conn::proto::{Backend, FrameSize, HandshakeParams, Opener, ProtocolError, Sealer, Stage};
use p2p_conn::testkit::internals::{
    read_uvarint, seal_at, Admission, Budget, FrameReader, FrameWriter, ReadCore, Varint, WriteCore,
};
use p2p_conn::testkit::{self, Conn, Control, Plan, Rates, Rng, TokioConn};
use p2p_conn::{Config, Identity, PublicKey};

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
        let tag = seal_at(&cipher, counter, &mut plain);
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
    match read_uvarint(data) {
        Varint::Value(v, n) => {
            assert!(
                (1..=10).contains(&n) && n <= data.len(),
                "varint used {n} bytes"
            );
            let canon = uvarint(v);
            assert!(canon.len() <= n);
            assert_eq!(read_uvarint(&canon), Varint::Value(v, canon.len()));
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

// ---------------------------------------------------------------------------
// send_queue

/// Every `send_queue` message starts with its id and its whole length (u32
/// LE each), then a pattern; a requested length of 1..8 is raised to 8 and 0
/// stays an empty message (which queues nothing).
const SQ_HEADER: usize = 8;
/// Most driver steps (calls and peer reads) decoded from one input.
const SQ_MAX_STEPS: usize = 256;
/// Most message bytes one input queues; a message past it shrinks to a header.
const SQ_MAX_BYTES: usize = 256 * 1024;
/// Most runtime turns one settle takes (it stops once nothing moves).
const SQ_SETTLE_ROUNDS: usize = 64;
/// Final-drain steps in a row without any progress that count as a hang.
const SQ_STUCK_STEPS: usize = 64;
/// Pipe capacity while the peer reads to the end.
const SQ_DRAIN_CAPACITY: usize = 256 * 1024;
/// The queue's shutdown bound. Never reached: the peer always drains to the
/// end within milliseconds, so no result depends on the clock.
const SQ_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3600);

/// What one `send_queue` input did (for the seed generator's own checks).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SendQueueSummary {
    /// Sends and bundles of at least one byte that returned Ok.
    pub accepted: usize,
    /// Sends refused with `SendError::Full` (`Overflow::Error`).
    pub full: usize,
    /// Sends that waited for room (`Overflow::Backpressure`).
    pub waited: usize,
    /// The queue disconnected on overflow (`Overflow::Disconnect`).
    pub disconnected: bool,
    /// Calls that failed with `SendError::Closed`.
    pub closed: usize,
    /// Flushes that returned Ok.
    pub flushed: usize,
    /// Calls cancelled (their task aborted) before they returned.
    pub cancelled: usize,
    /// Bytes the peer read.
    pub delivered: usize,
    /// Bytes of every accepted message.
    pub expected: usize,
    /// The peer's stream ended cleanly (between frames).
    pub clean_end: bool,
}

/// The real send queue ([`Sender`], feature `queue`) over an in-memory
/// transport, under an arbitrary sequence of calls and peer reads, against a
/// model of what the peer must receive.
///
/// Setup: two tokio connections handshaken (`io::tokio::handshake`, fixed
/// identities) over the testkit pipe, each direction then holding at most
/// `capacity` bytes, so the writer really stalls while the peer does not
/// read; our write half goes into a [`Sender`], the peer stays a whole
/// connection the driver reads from (`testkit::Conn::try_read`). All of it
/// runs on one current-thread tokio runtime per input; calls that may
/// wait are spawned as tasks, and after every step the driver yields until
/// nothing moves, so no input can deadlock the driver and a run is
/// deterministic (the shutdown bound is an hour, never reached).
///
/// Input: `cfg` (bits 0-1: overflow policy Backpressure/Error/Disconnect/
/// Backpressure; bit 2: end by dropping every handle instead of `shutdown`;
/// bit 3: cap `1 + u8` instead of `1 + u16`; bit 4: frame size
/// `64 + u16 % 1985` instead of 1024; bit 5/6: random write/read faults;
/// bit 7: `max_batch_messages` 1024 instead of `1 + u8 % 16`), the cap,
/// [frame size u16], [batch u8], `flush_size` (u16: 0 = default, else
/// 4 * v), pipe capacity (u16: `1 + v % 8192`), the peer's read buffer (u16),
/// backends (low nibble ours, high nibble the peer's), [write faults: seed,
/// rates], [read faults: seed, rates]; then steps, by `op % 16`: 0-4 send
/// (length kind `op >> 4`), 5-6 bundle of `(op >> 4) % 6` parts (a length
/// kind byte each), 7 flush, 11 cancel a waiting call, 12 shutdown, 13
/// close, anything else: the peer reads up to `u16` bytes (0: all it can).
/// Length kinds: empty, header + u8, u16, exactly the cap, above it, one
/// below, frames, up to 4x the cap. Every message carries its id and length.
///
/// Checks: `stats().pending_bytes` never exceeds the cap plus the one
/// pending message at or above it, nor the bytes of accepted messages the
/// peer has not read; the overflow counter matches the refusals and waits
/// seen; every refusal (`Full`, the disconnect, a wait) is justified by
/// what is pending; the peer's stream is always a prefix of the accepted
/// messages in the order their calls returned (so bundles are contiguous,
/// nothing refused or cancelled appears, nothing is duplicated), checked
/// as it is read; a flush returns only once the messages accepted before it
/// are on the wire; after `shutdown` (or dropping every handle) the peer
/// reads every accepted message and a clean end; after an overflow
/// disconnect a clean end (no torn frame); after `close` at most a cut frame
/// (`UnexpectedEof`), never a frame that fails authentication; every call
/// after the queue closed fails at once with `Closed` and the first reason;
/// no call is left waiting once the peer has read to the end.
pub fn send_queue(data: &[u8]) {
    std::hint::black_box(send_queue_run(data));
}

/// [`send_queue`], returning what happened.
pub fn send_queue_run(data: &[u8]) -> SendQueueSummary {
    count_panics();
    let panics_before = PANICS.with(Cell::get);
    let mut inp = Input::new(data);
    let setup = SqSetup::decode(&mut inp);
    let (our_end, peer_end) = testkit::pipe();
    let (wire, peer_ctl) = (our_end.control(), peer_end.control());
    let (id_a, id_b) = SQ_IDENTITIES.with(Clone::clone);
    let summary = testkit::block_on(async move {
        // Both handshakes on this runtime (no helper thread): the per-input
        // setup is the handshake's own crypto.
        let (ours, peer) = tokio::join!(
            p2p_conn::io::tokio::handshake(our_end, &id_a, &setup.ours),
            p2p_conn::io::tokio::handshake(peer_end, &id_b, &setup.peer),
        );
        let ours = ours.expect("our handshake");
        let peer = peer.expect("the peer's handshake");
        for c in [&wire, &peer_ctl] {
            c.set_capacity(setup.capacity);
        }
        if let Some((seed, rates)) = setup.write_faults {
            wire.seed(u64::from(seed));
            wire.set_write_plan(Plan::random(rates));
        }
        if let Some((seed, rates)) = setup.read_faults {
            peer_ctl.seed(u64::from(seed) | 0x100);
            peer_ctl.set_read_plan(Plan::random(rates));
        }
        let (our_read, our_write) = ours.into_split_locked();
        let sender = Sender::new(our_write, &setup.queue).expect("a valid queue config");
        let mut d = SqDriver::new(&setup, sender, our_read, peer, wire);
        for _ in 0..SQ_MAX_STEPS {
            if inp.is_empty() {
                break;
            }
            d.step(&mut inp).await;
        }
        d.finish().await
    });
    // The writer task is spawned by the library: a panic there is caught by
    // tokio, so it is counted here (libFuzzer's own hook aborts on it).
    assert_eq!(
        PANICS.with(Cell::get),
        panics_before,
        "a task panicked (message above)"
    );
    summary
}

thread_local! {
    /// The two ends' identities (fixed: a run depends only on its input).
    static SQ_IDENTITIES: (Identity, Identity) =
        (Identity::from_seed(&[1; 32]), Identity::from_seed(&[2; 32]));
    /// Panics on this thread (tasks of the current-thread runtime included).
    static PANICS: Cell<u64> = const { Cell::new(0) };
}

/// Count panics per thread, then run the previous hook (once per process).
fn count_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.with(|p| p.set(p.get() + 1));
            previous(info);
        }));
    });
}

fn sq_lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A message: id, whole length, then a pattern of the id.
fn sq_message(id: u32, len: usize) -> Bytes {
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&id.to_le_bytes());
    m.extend_from_slice(&(len as u32).to_le_bytes());
    m.extend((SQ_HEADER..len).map(|j| (j as u8) ^ ((j >> 8) as u8) ^ (id as u8).wrapping_mul(151)));
    Bytes::from(m)
}

/// Two close reasons are the same (`CloseReason` holds an `Arc<Error>`
/// and has no `PartialEq`; its message names every field).
fn sq_same(a: &CloseReason, b: &CloseReason) -> bool {
    a.to_string() == b.to_string()
}

/// Seed and rates of random transport faults: up to 35 % `Pending`, 15 %
/// `Interrupted`, 98 % short transfers.
fn sq_rates(inp: &mut Input<'_>) -> (u8, Rates) {
    let seed = inp.u8();
    let r = inp.u8();
    let rates = Rates {
        pending: u32::from(r & 7) * 5,
        interrupted: u32::from((r >> 3) & 3) * 5,
        short: u32::from(r >> 5) * 14,
    };
    (seed, rates)
}

struct SqSetup {
    ours: Config,
    queue: QueueConfig,
    peer: Config,
    capacity: usize,
    drop_at_end: bool,
    write_faults: Option<(u8, Rates)>,
    read_faults: Option<(u8, Rates)>,
}

impl SqSetup {
    fn decode(inp: &mut Input<'_>) -> Self {
        let cfg = inp.u8();
        let overflow = match cfg & 3 {
            1 => Overflow::Error,
            2 => Overflow::Disconnect,
            _ => Overflow::Backpressure,
        };
        let max = if cfg & 8 != 0 {
            1 + usize::from(inp.u8())
        } else {
            1 + usize::from(inp.u16())
        };
        let fs = if cfg & 16 == 0 {
            1024
        } else {
            64 + usize::from(inp.u16()) % (2048 - 64 + 1)
        };
        let batch = if cfg & 128 != 0 {
            p2p_conn::io::queue::DEFAULT_MAX_BATCH_MESSAGES
        } else {
            1 + usize::from(inp.u8() % 16)
        };
        let flush = match inp.u16() {
            0 => p2p_conn::DEFAULT_FLUSH_SIZE,
            v => usize::from(v) * 4,
        };
        let capacity = 1 + usize::from(inp.u16()) % 8192;
        let read_buffer = 1 + usize::from(inp.u16());
        let backends = inp.u8();
        let write_faults = (cfg & 32 != 0).then(|| sq_rates(inp));
        let read_faults = (cfg & 64 != 0).then(|| sq_rates(inp));
        let backend = |b: u8| Backend::ALL[usize::from(b) % Backend::ALL.len()];
        SqSetup {
            ours: Config::default()
                .frame_size(fs)
                .backend(backend(backends & 15))
                .flush_size(flush),
            queue: QueueConfig::default()
                .max_pending_bytes(max)
                .overflow(overflow)
                .max_batch_messages(batch)
                .shutdown_timeout(SQ_SHUTDOWN_TIMEOUT),
            peer: Config::default()
                .frame_size(fs)
                .backend(backend(backends >> 4))
                .read_buffer_size(read_buffer),
            capacity,
            drop_at_end: cfg & 4 != 0,
            write_faults,
            read_faults,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SqKind {
    Send,
    Bundle,
    Flush,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SqOutcome {
    Waiting,
    Accepted,
    Full,
    Closed,
    Cancelled,
}

/// One call the driver made.
struct SqOp {
    kind: SqKind,
    /// Message bytes (the sum of its parts).
    len: usize,
    /// Ids of its non-empty messages, in order.
    ids: Vec<u32>,
    outcome: SqOutcome,
}

/// What the tasks and the driver record, in the order it happened.
enum SqEvent {
    /// A send's first poll returned `Pending`: it waits for room.
    Waited {
        op: usize,
    },
    /// A call returned; a flush also records (accepted message bytes when
    /// it was queued, bytes on the wire when it returned).
    Done {
        op: usize,
        result: Result<(), SendError>,
        flush: Option<(usize, usize)>,
    },
    Shutdown,
    Close,
    DropAll,
}

/// Shared between the driver and the call tasks.
#[derive(Default)]
struct SqBook {
    /// Every message of every send and bundle that returned Ok, in the order
    /// they returned (which is the order they were queued: a call queues in
    /// the poll that returns): what the peer must read.
    expected: Vec<u8>,
    /// (offset in `expected`, id) of each of those messages.
    starts: Vec<(usize, u32)>,
    events: Vec<SqEvent>,
}

/// Accepted bytes, messages and the largest message at or above the cap
/// that the peer has not wholly read.
struct SqUnread {
    bytes: usize,
    messages: usize,
    large: Option<usize>,
}

type SqReadHalf = p2p_conn::io::tokio::ReadHalf<tokio::io::ReadHalf<testkit::End>>;
type SqCall = Pin<Box<dyn Future<Output = Result<(), SendError>> + Send>>;

struct SqDriver {
    /// `None` once every handle was dropped (the end).
    sender: Option<Sender>,
    peer: TokioConn,
    /// Our read half: keeps the transport open until the end.
    our_read: Option<SqReadHalf>,
    /// Our end of the pipe (what the writer put on the wire).
    wire: Control,
    wire_base: usize,
    book: Arc<Mutex<SqBook>>,
    max: usize,
    overflow: Overflow,
    fs: usize,
    sealed: usize,
    drop_at_end: bool,
    ops: Vec<SqOp>,
    /// Per message id: (op, index among the op's messages, length).
    msgs: Vec<(usize, usize, usize)>,
    tasks: Vec<(usize, tokio::task::JoinHandle<()>)>,
    bytes: usize,
    /// Events of the book taken into account.
    seen: usize,
    /// Why the queue stopped (the first reason), as the calls saw it.
    closed: Option<CloseReason>,
    close_called: bool,
    disconnected: bool,
    overflows: u64,
    /// (end offset in `expected`, bytes, messages) of every accepted call.
    accepted: Vec<(usize, usize, usize)>,
    accepted_end: usize,
    accepted_msgs: u64,
    /// What the peer read.
    received: Vec<u8>,
    peer_end: Option<io::Result<()>>,
    buf: Vec<u8>,
    summary: SendQueueSummary,
}

impl SqDriver {
    fn new(
        setup: &SqSetup,
        sender: Sender,
        our_read: SqReadHalf,
        peer: TokioConn,
        wire: Control,
    ) -> Self {
        let fs = setup.ours.frame_size;
        SqDriver {
            sender: Some(sender),
            peer,
            our_read: Some(our_read),
            wire_base: wire.wire_len(),
            wire,
            book: Arc::default(),
            max: setup.queue.max_pending_bytes,
            overflow: setup.queue.overflow,
            fs,
            sealed: sealed_frame_len(fs),
            drop_at_end: setup.drop_at_end,
            ops: Vec::new(),
            msgs: Vec::new(),
            tasks: Vec::new(),
            bytes: 0,
            seen: 0,
            closed: None,
            close_called: false,
            disconnected: false,
            overflows: 0,
            accepted: Vec::new(),
            accepted_end: 0,
            accepted_msgs: 0,
            received: Vec::new(),
            peer_end: None,
            buf: vec![0; 16 * 1024],
            summary: SendQueueSummary::default(),
        }
    }

    async fn step(&mut self, inp: &mut Input<'_>) {
        let op = inp.u8();
        match op % 16 {
            0..=4 => {
                let len = self.length(op >> 4, inp);
                self.send(SqKind::Send, vec![len]);
            }
            5 | 6 => {
                let mut lens = Vec::new();
                for _ in 0..(op >> 4) % 6 {
                    let kind = inp.u8();
                    lens.push(self.length(kind, inp));
                }
                self.send(SqKind::Bundle, lens);
            }
            7 => self.flush(),
            11 => self.cancel(usize::from(op >> 4)),
            12 => self.shutdown(),
            13 => self.close(),
            _ => {
                let k = inp.u16();
                self.peer_read(if k == 0 { usize::MAX } else { usize::from(k) });
            }
        }
        self.settle().await;
    }

    /// A message length of the given kind (see [`send_queue`]).
    fn length(&mut self, kind: u8, inp: &mut Input<'_>) -> usize {
        let max = self.max;
        let len = match kind % 8 {
            0 => 0,
            1 => SQ_HEADER + usize::from(inp.u8()),
            2 => usize::from(inp.u16()),
            3 => max,
            4 => max + 1 + usize::from(inp.u8()),
            5 => max - 1,
            6 => self.fs * (1 + usize::from(inp.u8() % 8)),
            _ => inp.u32() as usize % (4 * max + 1),
        };
        if len == 0 {
            return 0;
        }
        let len = len.max(SQ_HEADER);
        let len = if self.bytes + len > SQ_MAX_BYTES {
            SQ_HEADER
        } else {
            len
        };
        self.bytes += len;
        len
    }

    fn sender(&self) -> Sender {
        self.sender
            .clone()
            .expect("handles are dropped only at the end")
    }

    fn new_op(&mut self, kind: SqKind, lens: &[usize]) -> (usize, Vec<Bytes>) {
        let op = self.ops.len();
        let mut parts = Vec::with_capacity(lens.len());
        let mut ids = Vec::new();
        for &len in lens {
            if len == 0 {
                parts.push(Bytes::new());
                continue;
            }
            let id = self.msgs.len() as u32;
            self.msgs.push((op, ids.len(), len));
            ids.push(id);
            parts.push(sq_message(id, len));
        }
        self.ops.push(SqOp {
            kind,
            len: lens.iter().sum(),
            ids,
            outcome: SqOutcome::Waiting,
        });
        (op, parts)
    }

    /// `send` (one length) or `send_bundle`, as a task.
    fn send(&mut self, kind: SqKind, lens: Vec<usize>) {
        let (op, mut parts) = self.new_op(kind, &lens);
        let sender = self.sender();
        if self.closed.is_some() {
            let r = match kind {
                SqKind::Send => testkit::now_or_never(sender.send(parts.pop().unwrap_or_default())),
                _ => testkit::now_or_never(sender.send_bundle(parts)),
            };
            self.after_close(op, r);
            return;
        }
        let book = Arc::clone(&self.book);
        let task = tokio::spawn(async move {
            let queued: Vec<Bytes> = parts.iter().filter(|m| !m.is_empty()).cloned().collect();
            let call: SqCall = match kind {
                SqKind::Send => {
                    let m = parts.pop().unwrap_or_default();
                    Box::pin(async move { sender.send(m).await })
                }
                _ => Box::pin(async move { sender.send_bundle(parts).await }),
            };
            let result = sq_track(call, &book, op).await;
            // Still the poll that queued the messages: nothing ran since.
            let mut b = sq_lock(&book);
            if result.is_ok() {
                for m in &queued {
                    let at = b.expected.len();
                    let id = u32::from_le_bytes([m[0], m[1], m[2], m[3]]);
                    b.starts.push((at, id));
                    b.expected.extend_from_slice(m);
                }
            }
            b.events.push(SqEvent::Done {
                op,
                result,
                flush: None,
            });
        });
        self.tasks.push((op, task));
    }

    fn flush(&mut self) {
        let (op, _) = self.new_op(SqKind::Flush, &[]);
        let sender = self.sender();
        if self.closed.is_some() {
            let r = testkit::now_or_never(sender.flush());
            self.after_close(op, r);
            return;
        }
        let book = Arc::clone(&self.book);
        let wire = self.wire.clone();
        let task = tokio::spawn(async move {
            // `flush` queues its marker in this same poll, right after the
            // messages accepted so far.
            let before = sq_lock(&book).expected.len();
            let result = sender.flush().await;
            let written = wire.wire_len();
            sq_lock(&book).events.push(SqEvent::Done {
                op,
                result,
                flush: Some((before, written)),
            });
        });
        self.tasks.push((op, task));
    }

    /// A call made after the queue closed: it must fail at once with
    /// `Closed` and the first reason.
    fn after_close(&mut self, op: usize, r: Option<Result<(), SendError>>) {
        let first = self.closed.as_ref().expect("closed");
        let kind = self.ops[op].kind;
        match r {
            Some(Err(SendError::Closed { reason, .. })) => assert!(
                sq_same(first, &reason),
                "op {op} ({kind:?}) after the queue closed (`{first}`) failed with another reason: `{reason}`"
            ),
            Some(Ok(())) => {
                panic!("op {op} ({kind:?}) after the queue closed (`{first}`) returned Ok")
            }
            Some(Err(e)) => panic!(
                "op {op} ({kind:?}) after the queue closed (`{first}`) failed with `{e}`, not Closed"
            ),
            None => panic!(
                "op {op} ({kind:?}) after the queue closed (`{first}`) did not return at once"
            ),
        }
        self.ops[op].outcome = SqOutcome::Closed;
        self.summary.closed += 1;
    }

    /// Abort one call still waiting (the `which`-th, modulo).
    fn cancel(&mut self, which: usize) {
        let live: Vec<usize> = (0..self.tasks.len())
            .filter(|&i| {
                let (op, t) = &self.tasks[i];
                !t.is_finished() && self.ops[*op].outcome == SqOutcome::Waiting
            })
            .collect();
        if live.is_empty() {
            return;
        }
        let (op, task) = &self.tasks[live[which % live.len()]];
        task.abort();
        self.ops[*op].outcome = SqOutcome::Cancelled;
        self.summary.cancelled += 1;
    }

    fn shutdown(&mut self) {
        sq_lock(&self.book).events.push(SqEvent::Shutdown);
        self.sender().shutdown();
        self.absorb();
        self.check_stats();
    }

    fn close(&mut self) {
        sq_lock(&self.book).events.push(SqEvent::Close);
        self.sender().close();
        self.absorb();
        self.check_stats();
    }

    /// The peer reads up to `k` bytes, as far as it can without waiting.
    fn peer_read(&mut self, k: usize) {
        let mut left = k;
        let mut buf = std::mem::take(&mut self.buf);
        while left > 0 && self.peer_end.is_none() {
            let n = left.min(buf.len());
            match self.peer.try_read(&mut buf[..n]) {
                Ok(0) => self.peer_end = Some(Ok(())),
                Ok(got) => {
                    self.on_read(&buf[..got]);
                    left -= got;
                }
                Err(e) if testkit::is_would_block(&e) => break,
                Err(e) => self.peer_end = Some(Err(e)),
            }
        }
        self.buf = buf;
    }

    /// The peer read `chunk`: it must continue the accepted messages.
    fn on_read(&mut self, chunk: &[u8]) {
        let at = self.received.len();
        self.received.extend_from_slice(chunk);
        let book = Arc::clone(&self.book);
        let book = sq_lock(&book);
        let exp = &book.expected;
        let end = at + chunk.len();
        let bad = (at..end).find(|&i| i >= exp.len() || exp[i] != self.received[i]);
        if let Some(bad) = bad {
            panic!("{}", self.diverge(bad, &book));
        }
    }

    /// Let the writer and the call tasks run until nothing moves; check the
    /// counters at every turn.
    async fn settle(&mut self) {
        let mut last = None;
        let mut quiet = 0;
        for _ in 0..SQ_SETTLE_ROUNDS {
            tokio::task::yield_now().await;
            self.absorb();
            self.check_stats();
            let now = self.progress();
            if last.as_ref() == Some(&now) {
                quiet += 1;
                if quiet >= 2 {
                    break;
                }
            } else {
                quiet = 0;
                last = Some(now);
            }
        }
    }

    fn progress(&self) -> (usize, usize, usize, Option<p2p_conn::stats::QueueStats>) {
        (
            self.seen,
            self.wire.wire_len(),
            self.received.len(),
            self.sender.as_ref().map(Sender::stats),
        )
    }

    /// Take the new events of the book into account, in order.
    fn absorb(&mut self) {
        let book = Arc::clone(&self.book);
        let book = sq_lock(&book);
        while self.seen < book.events.len() {
            let i = self.seen;
            self.seen += 1;
            match &book.events[i] {
                SqEvent::Shutdown => {
                    self.closed.get_or_insert(CloseReason::Shutdown);
                }
                SqEvent::Close => {
                    self.closed.get_or_insert(CloseReason::Closed);
                    self.close_called = true;
                }
                SqEvent::DropAll => {}
                SqEvent::Waited { op } => self.waited(*op),
                SqEvent::Done { op, result, flush } => self.done(*op, result, *flush),
            }
        }
        assert_eq!(
            self.accepted_end,
            book.expected.len(),
            "driver bookkeeping: accepted bytes"
        );
    }

    fn unread(&self) -> SqUnread {
        let read = self.received.len();
        let from = self.accepted.partition_point(|&(end, _, _)| end <= read);
        let mut u = SqUnread {
            bytes: 0,
            messages: 0,
            large: None,
        };
        for &(_, len, n) in &self.accepted[from..] {
            u.bytes += len;
            u.messages += n;
            if len >= self.max {
                u.large = u.large.max(Some(len));
            }
        }
        u
    }

    /// A call of `len` bytes was refused (or made to wait) with `pending`
    /// bytes pending (`None`: not reported): the cap must explain it.
    fn refusal_justified(&self, op: usize, len: usize, pending: Option<usize>) {
        let u = self.unread();
        if let Some(p) = pending {
            assert!(
                p <= u.bytes,
                "op {op}: refused with {p} bytes pending, but the accepted messages the peer \
                 has not read hold only {} bytes",
                u.bytes
            );
        }
        if len >= self.max {
            assert!(
                u.large.is_some(),
                "op {op}: {len} bytes (at or above max_pending_bytes {}) refused or made to wait \
                 while no other message at or above the cap was pending",
                self.max
            );
        } else {
            let p = pending.unwrap_or(u.bytes);
            assert!(
                p + len > self.max,
                "op {op}: {len} bytes refused or made to wait with at most {p} bytes pending \
                 under max_pending_bytes {}",
                self.max
            );
        }
    }

    fn waited(&mut self, op: usize) {
        let len = self.ops[op].len;
        assert_eq!(
            self.overflow,
            Overflow::Backpressure,
            "op {op}: a send of {len} bytes waited for room under {:?}",
            self.overflow
        );
        if let Some(first) = &self.closed {
            panic!("op {op}: a send waited for room after the queue closed (`{first}`)");
        }
        self.refusal_justified(op, len, None);
        self.overflows += 1;
        self.summary.waited += 1;
    }

    fn done(&mut self, op: usize, result: &Result<(), SendError>, flush: Option<(usize, usize)>) {
        let (kind, len, msgs) = (self.ops[op].kind, self.ops[op].len, self.ops[op].ids.len());
        assert_ne!(
            self.ops[op].outcome,
            SqOutcome::Cancelled,
            "op {op}: a cancelled call returned"
        );
        let outcome = match (kind, result) {
            (SqKind::Flush, Ok(())) => {
                let (before, written) = flush.expect("a flush records the wire");
                let need = before.div_ceil(self.fs) * self.sealed;
                let wrote = written - self.wire_base;
                assert!(
                    wrote >= need,
                    "op {op}: flush returned before the {before} message bytes accepted ahead of \
                     it were written: they take at least {need} sealed bytes, {wrote} are on the wire"
                );
                self.summary.flushed += 1;
                SqOutcome::Accepted
            }
            (SqKind::Flush, Err(SendError::Closed { reason, .. })) => {
                let Some(first) = &self.closed else {
                    panic!("op {op}: flush failed with `{reason}` while the queue was open");
                };
                assert!(
                    sq_same(first, reason),
                    "op {op}: flush failed with `{reason}`, the queue closed with `{first}`"
                );
                assert!(
                    !matches!(first, CloseReason::Shutdown),
                    "op {op}: a flush queued before shutdown() failed (`{reason}`): shutdown \
                     finishes what is queued"
                );
                self.summary.closed += 1;
                SqOutcome::Closed
            }
            (_, Ok(())) => {
                if let Some(first) = &self.closed {
                    panic!("op {op}: a {kind:?} of {len} bytes returned Ok after the queue closed (`{first}`)");
                }
                if len > 0 {
                    self.accepted_end += len;
                    self.accepted.push((self.accepted_end, len, msgs));
                    self.accepted_msgs += msgs as u64;
                    self.summary.accepted += 1;
                }
                SqOutcome::Accepted
            }
            (
                _,
                Err(SendError::Full {
                    pending,
                    len: l,
                    max,
                    ..
                }),
            ) => {
                assert_eq!(
                    self.overflow,
                    Overflow::Error,
                    "op {op}: `Full` under {:?}",
                    self.overflow
                );
                if let Some(first) = &self.closed {
                    panic!("op {op}: `Full` after the queue closed (`{first}`)");
                }
                assert_eq!(
                    (*l, *max),
                    (len, self.max),
                    "op {op}: `Full` names wrong sizes"
                );
                self.refusal_justified(op, len, Some(*pending));
                self.overflows += 1;
                self.summary.full += 1;
                SqOutcome::Full
            }
            (_, Err(SendError::Closed { reason, .. })) => {
                match (&self.closed, reason) {
                    (Some(first), _) => assert!(
                        sq_same(first, reason),
                        "op {op}: failed with `{reason}`, the queue closed with `{first}`"
                    ),
                    (
                        None,
                        CloseReason::Overflow {
                            pending,
                            len: l,
                            max,
                        },
                    ) => {
                        assert_eq!(
                            self.overflow,
                            Overflow::Disconnect,
                            "op {op}: overflow disconnect under {:?}",
                            self.overflow
                        );
                        assert_eq!(
                            (*l, *max),
                            (len, self.max),
                            "op {op}: disconnect names wrong sizes"
                        );
                        self.refusal_justified(op, len, Some(*pending));
                        self.overflows += 1;
                        self.disconnected = true;
                        self.summary.disconnected = true;
                        self.closed = Some(reason.clone());
                    }
                    (None, _) => {
                        panic!(
                            "op {op}: a {kind:?} failed with `{reason}` while the queue was open"
                        )
                    }
                }
                self.summary.closed += 1;
                SqOutcome::Closed
            }
            (_, Err(e)) => panic!("op {op}: unexpected error `{e}`"),
        };
        self.ops[op].outcome = outcome;
    }

    /// The counters and the close reason, against what the calls saw.
    fn check_stats(&self) {
        let Some(s) = &self.sender else { return };
        let st = s.stats();
        let u = self.unread();
        assert!(
            st.pending_bytes <= self.max + u.large.unwrap_or(0),
            "byte cap broken: {} bytes pending, max_pending_bytes {} and the largest pending \
             message at or above the cap {:?} (the bound is the cap plus one such message)",
            st.pending_bytes,
            self.max,
            u.large
        );
        assert!(
            st.pending_bytes <= u.bytes && st.pending_messages <= u.messages,
            "stats count {} bytes in {} messages pending, but accepted messages the peer has \
             not read hold only {} bytes in {} messages",
            st.pending_bytes,
            st.pending_messages,
            u.bytes,
            u.messages
        );
        assert_eq!(
            st.overflows, self.overflows,
            "the overflow counter disagrees with the refusals and waits the calls saw"
        );
        match (&self.closed, s.close_reason()) {
            (None, None) => {}
            (Some(a), Some(b)) if sq_same(a, &b) => {}
            (a, b) => panic!("close_reason() is {b:?}; the calls saw {a:?}"),
        }
    }

    /// Where the peer's stream left the accepted messages, in words.
    fn diverge(&self, at: usize, book: &SqBook) -> String {
        let exp_len = book.expected.len();
        let i = book.starts.partition_point(|&(off, _)| off <= at);
        let (start, want) = if at >= exp_len || i == 0 {
            (exp_len.min(at), None)
        } else {
            let (off, id) = book.starts[i - 1];
            (off, Some(id))
        };
        let got = self
            .received
            .get(start..start + SQ_HEADER)
            .map(|h| u32::from_le_bytes([h[0], h[1], h[2], h[3]]));
        let want_s = match want {
            Some(id) => format!("message {}", self.describe(id)),
            None => format!("nothing more: every accepted message ({exp_len} bytes) was read"),
        };
        let got_s = match got {
            Some(id) if Some(id) == want => {
                format!("that message with byte {} changed", at - start)
            }
            Some(id) => format!("a message headed {}", self.describe(id)),
            None => "bytes without a whole message header".to_string(),
        };
        let mut s = format!(
            "the peer's stream diverges at byte {at}: at byte {start} it should read {want_s}; \
             it read {got_s}"
        );
        if let (Some(w), Some(g)) = (want, got) {
            let (op, part, _) = self.msgs[w as usize];
            let other = self.msgs.get(g as usize).map(|m| m.0);
            if part > 0 && other != Some(op) {
                s += &format!(" (bundle of op {op} interrupted after its part {part})");
            }
        }
        s
    }

    fn describe(&self, id: u32) -> String {
        let Some(&(op, part, len)) = self.msgs.get(id as usize) else {
            return format!("#{id}, which was never sent");
        };
        let o = &self.ops[op];
        let what = match o.kind {
            SqKind::Bundle => format!("part {} of {} of the bundle", part + 1, o.ids.len()),
            _ => "the message".to_string(),
        };
        let outcome = match o.outcome {
            SqOutcome::Waiting => "has not returned",
            SqOutcome::Accepted => "returned Ok",
            SqOutcome::Full => "was refused (Full)",
            SqOutcome::Closed => "failed (Closed)",
            SqOutcome::Cancelled => "was cancelled",
        };
        format!(
            "#{id} ({len} bytes, {what} of op {op}, {:?}, which {outcome})",
            o.kind
        )
    }

    fn state(&self) -> String {
        let waiting = self
            .ops
            .iter()
            .filter(|o| o.outcome == SqOutcome::Waiting)
            .count();
        format!(
            "{waiting} calls not returned; peer read {} of {} accepted bytes; stats {:?}; \
             close reason {:?}",
            self.received.len(),
            self.accepted_end,
            self.sender.as_ref().map(Sender::stats),
            self.closed
        )
    }

    /// Stop the queue if the input did not, let the peer read to the end,
    /// and check the outcome.
    async fn finish(mut self) -> SendQueueSummary {
        if self.closed.is_none() {
            if self.drop_at_end {
                // The waiting calls keep their handles until they return.
                sq_lock(&self.book).events.push(SqEvent::DropAll);
                self.sender = None;
            } else {
                self.shutdown();
            }
        }
        // With the writer's half gone too (close, or a queue that never
        // started), this ends the stream for the peer.
        self.our_read = None;
        // The peer now reads everything: a roomy pipe keeps that quick.
        self.wire.set_capacity(SQ_DRAIN_CAPACITY);
        let mut idle = 0;
        for _ in 0..MAX_STEPS {
            let before = self.progress();
            self.peer_read(usize::MAX);
            if self.peer_end.is_some() {
                break;
            }
            self.settle().await;
            if self.progress() == before {
                idle += 1;
                assert!(
                    idle < SQ_STUCK_STEPS,
                    "hang: nothing moves and the peer's stream does not end: {}",
                    self.state()
                );
            } else {
                idle = 0;
            }
        }
        self.settle().await;
        for (op, task) in std::mem::take(&mut self.tasks) {
            if self.ops[op].outcome == SqOutcome::Cancelled {
                continue;
            }
            assert!(
                task.is_finished(),
                "op {op} ({:?}) never returned, though the peer read to the end: {}",
                self.ops[op].kind,
                self.state()
            );
            if let Some(Err(e)) = testkit::now_or_never(task) {
                if e.is_panic() {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
        }
        if let Some((op, o)) = self
            .ops
            .iter()
            .enumerate()
            .find(|(_, o)| o.outcome == SqOutcome::Waiting)
        {
            panic!("op {op} ({:?}) has no outcome: {}", o.kind, self.state());
        }

        let end = self.peer_end.take().expect("the drain ends");
        let graceful = !self.close_called && !self.disconnected;
        if let Err(e) = &end {
            let why = if self.close_called {
                "after close() only a cut frame (UnexpectedEof) may end it"
            } else if self.disconnected {
                "an overflow disconnect must end it between frames (no torn frame)"
            } else {
                "a shutdown must end it cleanly"
            };
            assert!(
                self.close_called && e.kind() == io::ErrorKind::UnexpectedEof,
                "the peer's stream ended with `{e}` ({:?}): {why}",
                e.kind()
            );
        }
        if graceful && self.received.len() < self.accepted_end {
            let book = sq_lock(&self.book);
            let i = book
                .starts
                .partition_point(|&(off, _)| off <= self.received.len());
            let (_, id) = book.starts[i.max(1) - 1];
            panic!(
                "lost messages: the stream ended cleanly after {} of {} accepted bytes; the first \
                 missing is {} (no close(), no overflow disconnect: everything accepted must arrive)",
                self.received.len(),
                self.accepted_end,
                self.describe(id)
            );
        }
        if let Some(s) = &self.sender {
            let st = s.stats();
            assert_eq!(
                (st.pending_bytes, st.pending_messages),
                (0, 0),
                "the queue stopped with {st:?}"
            );
            if graceful {
                assert_eq!(
                    st.messages_sent, self.accepted_msgs,
                    "messages_sent after the peer read every accepted message"
                );
            }
        }
        self.check_stats();
        self.summary.delivered = self.received.len();
        self.summary.expected = self.accepted_end;
        self.summary.clean_end = end.is_ok();
        self.summary
    }
}

/// Run a send call, recording in the book when its first poll waits.
async fn sq_track(mut call: SqCall, book: &Mutex<SqBook>, op: usize) -> Result<(), SendError> {
    let mut first = true;
    std::future::poll_fn(|cx| {
        let p = call.as_mut().poll(cx);
        if first && p.is_pending() {
            sq_lock(book).events.push(SqEvent::Waited { op });
        }
        first = false;
        p
    })
    .await
}

/// `nodeinfo`: the NodeInfo reader on any bytes. The first byte sets the
/// chunk size the rest is fed in; fed whole or in chunks, the decoder must
/// reach the same result after taking the same bytes, never more than the
/// message. A decoded NodeInfo must survive the checks and re-encode to
/// one that decodes equal.
pub fn nodeinfo(data: &[u8]) {
    use p2p_conn::nodeinfo::{Decoder, NodeInfo, MAX_NODE_INFO_SIZE};
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(split).max(1);
    let whole = Decoder::new().feed(rest);
    let mut dec = Decoder::new();
    let mut used = 0;
    let mut chunked = None;
    for piece in rest.chunks(chunk) {
        match dec.feed(piece) {
            Ok((n, None)) => {
                assert_eq!(n, piece.len(), "an unfinished decoder left input");
                used += n;
            }
            Ok((n, Some(info))) => {
                used += n;
                chunked = Some(Ok(info));
                break;
            }
            Err(e) => {
                chunked = Some(Err(e.to_string()));
                break;
            }
        }
    }
    match (whole, chunked) {
        (Ok((n, Some(info))), Some(Ok(again))) => {
            assert_eq!(n, used, "whole and chunked took different lengths");
            assert_eq!(info, again);
            assert!(n <= rest.len());
            let _ = info.validate();
            let _ = info.compatible_with(&info);
            let _ = info.check_id(p2p_conn::NodeId::from_public_key(&[0; 32]));
            if let Ok(wire) = info.encode_delimited() {
                assert!(wire.len() <= MAX_NODE_INFO_SIZE + 2);
                let (m, back) = Decoder::new().feed(&wire).expect("our own encoding");
                assert_eq!(m, wire.len());
                assert_eq!(
                    back.as_ref(),
                    Some(&info),
                    "re-encoded NodeInfo decodes differently"
                );
            }
        }
        (Ok((n, None)), None) => assert_eq!(n, rest.len()),
        (Err(e), Some(Err(again))) => assert_eq!(e.to_string(), again),
        (whole, chunked) => panic!("whole {whole:?} and chunked {chunked:?} disagree"),
    }
    // The body decoder alone, on the raw bytes.
    if let Ok(info) = NodeInfo::decode(rest) {
        let _ = info.validate();
    }
}
