//! Property tests.
//!
//! * Stream round-trips through both adapters with the real handshake on both
//!   ends, over in-memory transports that cut the bytes into arbitrary pieces:
//!   the blocking pipe of `common` with random short reads/writes (and
//!   spurious `Interrupted` errors) for `io::blocking`, and a small-capacity
//!   `tokio::io::duplex` for `io::tokio`. Arbitrary messages, write chunkings,
//!   read-buffer sizes, flush sizes and receive-buffer sizes.
//! * The sans-IO `Sealer` / `Opener`: round-trip, sealed length, and
//!   single-bit-flip detection, across both AEAD backends.
//! * `auth_sig::decode` and the handshake state machine never panic on
//!   arbitrary input.
//!
//! Case counts are modest so the file runs quickly in debug builds; set
//! `PROPTEST_CASES` to run more.

use std::io::{self, Read, Write};
use std::time::Duration;

use crate::common::{payload, pipe, proptest_config, End, Fault, Plan, Rates};
use p2p_conn::io::{blocking, tokio as ptokio};
use p2p_conn::proto::FrameSize;
use p2p_conn::proto::{Handshake, HandshakeParams};
use p2p_conn::testkit::internals::auth_sig;
use p2p_conn::testkit::internals::wire::{
    sealed_frame_len, STANDARD_FRAME_SIZE, STANDARD_SEALED_FRAME,
};
use p2p_conn::testkit::internals::OpenerHooks;
use p2p_conn::{Backend, ProtocolError};
use p2p_conn::{Config, Identity};
use proptest::prelude::*;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

// ---------------------------------------------------------------------------
// The std transport: `common`'s blocking pipe
// ---------------------------------------------------------------------------

/// How one end of the pipe moves bytes: the fault plans of its reads and of
/// its writes.
#[derive(Clone, Debug, Default)]
struct Pieces {
    reads: Plan,
    writes: Plan,
}

/// Moves whole buffers (as much as is there), no faults.
fn whole() -> Pieces {
    Pieces::default()
}

/// Two ends of a fresh blocking, unbounded pipe (reads wait for bytes or end
/// of stream, for at most `crate::common::DEADLOCK_LIMIT`, then fail with `TimedOut`:
/// a deadlock); each end moves bytes as its [`Pieces`] say, with random faults
/// seeded from `seed`.
fn pipe_pair(a: Pieces, b: Pieces, seed: u64) -> (End, End) {
    let (ea, eb) = pipe();
    for (end, pieces, seed) in [(&ea, a, seed), (&eb, b, !seed)] {
        let control = end.control();
        control.seed(seed);
        control.set_read_plan(pieces.reads);
        control.set_write_plan(pieces.writes);
    }
    (ea, eb)
}

// ---------------------------------------------------------------------------
// Stream round-trip through the adapters
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct StreamCase {
    /// Message lengths A→B and B→A (contents derive from `seed`).
    a_to_b: Vec<usize>,
    b_to_a: Vec<usize>,
    seed: u64,
    /// Write-call sizes, cycled across each side's messages.
    write_chunks: Vec<usize>,
    /// Read-buffer sizes, cycled.
    read_sizes: Vec<usize>,
    /// Largest piece the transport moves at once: the std pipe's reads, and
    /// the duplex pipe's capacity.
    piece: usize,
    /// Largest piece one write to the std pipe takes.
    write_piece: usize,
    flush_size: usize,
    read_buffer_size: usize,
    /// Flush after every message (else only at the end).
    flush_each: bool,
}

impl StreamCase {
    fn messages(&self, a_side: bool) -> Vec<Vec<u8>> {
        let (lens, salt) = if a_side {
            (&self.a_to_b, 0xa000)
        } else {
            (&self.b_to_a, 0xb000)
        };
        lens.iter()
            .enumerate()
            .map(|(i, &len)| payload(len, self.seed ^ (salt + i as u64)))
            .collect()
    }

    fn config(&self) -> Config {
        Config::default()
            .flush_size(self.flush_size)
            .read_buffer_size(self.read_buffer_size)
    }

    /// Each message cut into write calls by cycling `write_chunks`; `None`
    /// marks the end of a message.
    fn writes(&self, a_side: bool) -> Vec<Option<Vec<u8>>> {
        let mut sizes = self.write_chunks.iter().cycle();
        let mut out = Vec::new();
        for m in self.messages(a_side) {
            let mut rest = &m[..];
            while !rest.is_empty() {
                let n = (*sizes.next().unwrap()).min(rest.len());
                out.push(Some(rest[..n].to_vec()));
                rest = &rest[n..];
            }
            out.push(None);
        }
        out
    }
}

fn stream_case() -> impl Strategy<Value = StreamCase> {
    stream_case_with(5000, 20, 6000)
}

/// Messages of up to 100 KiB written in pieces of up to 70 KiB: whole groups
/// of 16 frames on both sides, for the multi-frame backend.
fn large_stream_case() -> impl Strategy<Value = StreamCase> {
    stream_case_with(100_000, 4, 70_000)
}

fn stream_case_with(
    max_len: usize,
    max_messages: usize,
    max_write: usize,
) -> impl Strategy<Value = StreamCase> {
    let lens = move || prop::collection::vec(0usize..max_len, 0..=max_messages);
    (
        (lens(), lens(), any::<u64>()),
        (
            prop::collection::vec(1usize..=max_write, 1..6),
            prop::collection::vec(1usize..=3000, 1..6),
        ),
        (
            prop_oneof![1 => 1usize..=16, 3 => 17usize..=4096],
            prop_oneof![1 => 1usize..=16, 3 => 17usize..=4096],
            prop_oneof![3 => 1usize..=200_000, 1 => Just(p2p_conn::DEFAULT_FLUSH_SIZE)],
            prop_oneof![3 => 1usize..=70_000, 1 => Just(p2p_conn::DEFAULT_READ_BUFFER)],
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (a_to_b, b_to_a, seed),
                (write_chunks, read_sizes),
                (piece, write_piece, flush_size, read_buffer_size, flush_each),
            )| StreamCase {
                a_to_b,
                b_to_a,
                seed,
                write_chunks,
                read_sizes,
                piece,
                write_piece,
                flush_size,
                read_buffer_size,
                flush_each,
            },
        )
}

/// The write-size guarantee: a write of up to one frame's data is accepted
/// whole (one frame); larger writes accept at least one full frame.
fn check_write_len(asked: usize, accepted: usize) {
    assert!(
        accepted > 0 && accepted <= asked,
        "write({asked}) -> {accepted}"
    );
    assert!(
        accepted >= asked.min(STANDARD_FRAME_SIZE),
        "write({asked}) accepted only {accepted}: a write of up to 1024 bytes must be one frame"
    );
}

/// A read returns at most one frame's payload (protocol.md §7.11).
fn check_read_len(asked: usize, got: usize) {
    assert!(got <= asked, "read({asked}) -> {got}");
    assert!(
        got <= STANDARD_FRAME_SIZE,
        "read({asked}) -> {got}: more than one frame"
    );
}

/// One side over the std pipe: handshake, write everything, half-close, then
/// read the peer's stream to its end.
fn std_side(end: End, case: &StreamCase, a_side: bool) -> Vec<u8> {
    let identity = Identity::generate();
    let mut conn = blocking::handshake(end, &identity, &case.config()).expect("handshake");
    for w in case.writes(a_side) {
        match w {
            Some(chunk) => {
                let mut rest = &chunk[..];
                while !rest.is_empty() {
                    match conn.write(rest) {
                        Ok(n) => {
                            check_write_len(rest.len(), n);
                            rest = &rest[n..];
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => panic!("write: {e}"),
                    }
                }
            }
            None if case.flush_each => conn.flush().expect("flush"),
            None => {}
        }
    }
    conn.flush().expect("flush");
    conn.get_ref().close_write();
    let mut got = Vec::new();
    let mut sizes = case.read_sizes.iter().cycle();
    loop {
        let mut buf = vec![0u8; *sizes.next().unwrap()];
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                check_read_len(buf.len(), n);
                got.extend_from_slice(&buf[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => panic!("read: {e}"),
        }
    }
    got
}

fn std_roundtrip(case: &StreamCase) {
    // Random short pieces, and `Interrupted` on about one call in 16.
    let interrupts = Rates {
        interrupted: 6,
        ..Rates::default()
    };
    let pieces = Pieces {
        reads: Plan::random(interrupts).max_piece(case.piece),
        writes: Plan::random(interrupts).max_piece(case.write_piece),
    };
    let (a, b) = pipe_pair(pieces.clone(), pieces, case.seed);
    let case_a = case.clone();
    let side_a = std::thread::spawn(move || std_side(a, &case_a, true));
    let got_by_b = std_side(b, case, false);
    let got_by_a = side_a.join().expect("side A panicked");
    assert!(
        got_by_b == case.messages(true).concat(),
        "A→B stream differs"
    );
    assert!(
        got_by_a == case.messages(false).concat(),
        "B→A stream differs"
    );
}

/// Run the blocking handshake on both ends of a pipe; both must succeed.
fn blocking_handshake_pair(a: Pieces, b: Pieces) {
    let (a, b) = pipe_pair(a, b, 7);
    let side_a = std::thread::spawn(move || {
        blocking::handshake(a, &Identity::generate(), &Config::default()).map(|_| ())
    });
    let rb = blocking::handshake(b, &Identity::generate(), &Config::default()).map(|_| ());
    let ra = side_a.join().expect("side A panicked");
    assert!(
        ra.is_ok() && rb.is_ok(),
        "blocking handshake failed: A: {ra:?}, B: {rb:?}"
    );
}

/// Deterministic reduction of what `blocking_stream_roundtrip` finds: a
/// blocking `Read + Write` whose `write` takes fewer bytes than offered (legal
/// for `std::io::Write`). Side A's transport takes whole writes; side B's
/// takes one byte per `write`.
///
/// B receives A's whole 35-byte ephemeral message after writing only a few
/// of its own 35 bytes, queues frame #0, writes one more byte and then blocks
/// reading A's frame #0, while A blocks reading the rest of B's ephemeral
/// message: neither side can progress. The handshake must write everything it
/// has before blocking in a read (as `write_all` then `read_exact` would).
#[test]
fn blocking_handshake_over_short_writing_transport() {
    blocking_handshake_pair(
        whole(),
        Pieces {
            writes: Plan::clean().max_piece(1),
            ..whole()
        },
    );
}

/// Same root cause, smallest trigger: each side's first `write` fails with
/// `Interrupted` (EINTR, which std callers are expected to retry) and moves
/// no bytes. The driver counts that as progress but then blocks in a read
/// before writing anything, so both sides wait for an ephemeral key that
/// neither has sent.
#[test]
fn blocking_handshake_with_interrupted_first_write() {
    let interrupted = Pieces {
        writes: Plan::script(&[Fault::Interrupted]),
        ..whole()
    };
    blocking_handshake_pair(interrupted.clone(), interrupted);
}

async fn tokio_write_side<W: AsyncWrite + Unpin>(
    mut w: W,
    writes: Vec<Option<Vec<u8>>>,
    flush_each: bool,
) {
    for chunk in writes {
        match chunk {
            Some(chunk) => {
                let mut rest = &chunk[..];
                while !rest.is_empty() {
                    let n = w.write(rest).await.expect("write");
                    check_write_len(rest.len(), n);
                    rest = &rest[n..];
                }
            }
            None if flush_each => w.flush().await.expect("flush"),
            None => {}
        }
    }
    w.shutdown().await.expect("shutdown");
}

async fn tokio_read_side<R: AsyncRead + Unpin>(mut r: R, read_sizes: Vec<usize>) -> Vec<u8> {
    let mut got = Vec::new();
    let mut sizes = read_sizes.iter().cycle();
    loop {
        let mut buf = vec![0u8; *sizes.next().unwrap()];
        let n = r.read(&mut buf).await.expect("read");
        if n == 0 {
            return got;
        }
        check_read_len(buf.len(), n);
        got.extend_from_slice(&buf[..n]);
    }
}

fn tokio_roundtrip(case: &StreamCase) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let run = async {
            let (a, b) = tokio::io::duplex(case.piece);
            let (ida, idb) = (Identity::generate(), Identity::generate());
            let cfg = case.config();
            let (ca, cb) = tokio::join!(
                ptokio::handshake(a, &ida, &cfg),
                ptokio::handshake(b, &idb, &cfg)
            );
            let (ca, cb) = (ca.expect("handshake A"), cb.expect("handshake B"));
            assert_eq!(ca.remote_public_key(), idb.public_key());
            assert_eq!(cb.remote_public_key(), ida.public_key());
            let (ra, wa) = ca.into_split_locked();
            let (rb, wb) = cb.into_split_locked();
            let (got_by_a, got_by_b, (), ()) = tokio::join!(
                tokio_read_side(ra, case.read_sizes.clone()),
                tokio_read_side(rb, case.read_sizes.clone()),
                tokio_write_side(wa, case.writes(true), case.flush_each),
                tokio_write_side(wb, case.writes(false), case.flush_each),
            );
            assert!(
                got_by_b == case.messages(true).concat(),
                "A→B stream differs"
            );
            assert!(
                got_by_a == case.messages(false).concat(),
                "B→A stream differs"
            );
        };
        tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .expect("round trip timed out");
    });
}

proptest! {
    // A failure here can be a deadlock (each attempt then costs
    // crate::common::DEADLOCK_LIMIT), so shrinking is time-boxed.
    #![proptest_config(ProptestConfig {
        max_shrink_time: 10_000,
        ..proptest_config(32)
    })]

    /// io::blocking over a pipe with random short reads/writes and
    /// `Interrupted` errors: both directions round-trip byte-identically.
    #[test]
    fn blocking_stream_roundtrip(case in stream_case()) {
        std_roundtrip(&case);
    }

    /// io::tokio over a small-capacity duplex pipe: both directions, run
    /// concurrently, round-trip byte-identically.
    #[test]
    fn tokio_stream_roundtrip(case in stream_case()) {
        tokio_roundtrip(&case);
    }
}

proptest! {
    #![proptest_config(proptest_config(12))]

    /// Large messages through both adapters: the default backend (the
    /// multi-frame engine where the CPU has it) seals and opens whole groups
    /// across every cut of the transport.
    #[test]
    fn large_messages_roundtrip(case in large_stream_case()) {
        std_roundtrip(&case);
        tokio_roundtrip(&case);
    }
}

// ---------------------------------------------------------------------------
// Sans-IO Sealer / Opener
// ---------------------------------------------------------------------------

fn backend(i: usize) -> Backend {
    Backend::ALL[i % Backend::ALL.len()]
}

proptest! {
    #![proptest_config(proptest_config(64))]

    /// Seal with one backend, open with the other (or the same): the data
    /// round-trips, the sealed length is frames × (frame_size + 20), and any
    /// single bit flip makes the affected frame fail (and every later one).
    #[test]
    fn sealer_opener_roundtrip_and_bit_flips(
        seal_backend in 0usize..2,
        open_backend in 0usize..2,
        key in any::<[u8; 32]>(),
        frame_size in 64usize..=20_000,
        len in prop_oneof![0usize..=3000, 0usize..=60_000],
        seed in any::<u64>(),
        flip in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let data = payload(len, seed);
        let mut sealer = p2p_conn::testkit::internals::sealer(p2p_conn::testkit::internals::cipher(backend(seal_backend), &key), FrameSize::new(frame_size).unwrap());
        let mut sealed = Vec::new();
        let frames = sealer.seal_append(&data, &mut sealed).unwrap();
        let flen = frame_size + 20;
        prop_assert_eq!(flen, sealed_frame_len(frame_size));
        prop_assert_eq!(frames, len.div_ceil(frame_size));
        prop_assert_eq!(sealed.len(), frames * flen);
        prop_assert_eq!(sealed.len(), sealer.sealed_len(len));

        let opener = || p2p_conn::testkit::internals::opener(p2p_conn::testkit::internals::cipher(backend(open_backend), &key), FrameSize::new(frame_size).unwrap());
        let mut o = opener();
        let mut got = Vec::new();
        let mut copy = sealed.clone();
        for (i, f) in copy.chunks_mut(flen).enumerate() {
            let r = o.open_in_place(f).unwrap();
            // Every frame is full except the last.
            if i + 1 < frames {
                prop_assert_eq!(r.len(), frame_size);
            }
            got.extend_from_slice(&f[r]);
        }
        prop_assert_eq!(o.next_counter(), frames as u64);
        prop_assert!(got == data, "round trip differs");

        if !sealed.is_empty() {
            let at = flip.index(sealed.len());
            let mut bad = sealed.clone();
            bad[at] ^= 1 << bit;
            let hit = at / flen;
            let mut o = opener();
            for (i, f) in bad.chunks_mut(flen).enumerate() {
                let r = o.open_in_place(f);
                if i < hit {
                    prop_assert!(r.is_ok(), "frame {} before the flip failed", i);
                } else if i == hit {
                    prop_assert_eq!(r, Err(ProtocolError::FrameAuthentication { counter: i as u64 }));
                } else {
                    prop_assert!(r.is_err(), "frame {} after a failure opened", i);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Decoders never panic
// ---------------------------------------------------------------------------

/// Protobuf-ish bodies: a few fields with random numbers, wire types and
/// payloads (often nested AuthSig-like structures), so the decoder is
/// exercised beyond its first byte.
fn protobuf_like() -> impl Strategy<Value = Vec<u8>> {
    let field = (
        0u64..8,
        0u8..8,
        prop::collection::vec(any::<u8>(), 0..80),
        any::<bool>(),
    )
        .prop_map(|(number, wire, payload, honest_len)| {
            let mut out = Vec::new();
            push_uvarint(&mut out, (number << 3) | u64::from(wire));
            match wire {
                0 => push_uvarint(&mut out, payload.len() as u64 * 977),
                2 => {
                    let len = if honest_len {
                        payload.len() as u64
                    } else {
                        payload.len() as u64 + 3
                    };
                    push_uvarint(&mut out, len);
                    out.extend_from_slice(&payload);
                }
                _ => out.extend_from_slice(&payload[..payload.len().min(8)]),
            }
            out
        });
    prop::collection::vec(field, 0..5).prop_map(|v| v.concat())
}

fn push_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A valid AuthSig body with a few byte edits, insertions and a truncation.
fn mutated_auth_sig() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<[u8; 32]>(),
        any::<[u8; 32]>(),
        prop::collection::vec(
            (any::<prop::sample::Index>(), any::<u8>(), any::<bool>()),
            0..4,
        ),
        any::<Option<prop::sample::Index>>(),
    )
        .prop_map(|(pk, sig_half, edits, cut)| {
            let mut sig = [0u8; 64];
            sig[..32].copy_from_slice(&sig_half);
            let mut body = auth_sig::encode(&pk, &sig)[1..].to_vec();
            for (at, byte, insert) in edits {
                let i = at.index(body.len());
                if insert {
                    body.insert(i, byte);
                } else {
                    body[i] = byte;
                }
            }
            if let Some(cut) = cut {
                body.truncate(cut.index(body.len() + 1));
            }
            body
        })
}

proptest! {
    #![proptest_config(proptest_config(512))]

    /// `auth_sig::decode` returns Ok or Err on any input, never panics; when
    /// it accepts, the key and signature have the right sizes by type.
    #[test]
    fn auth_sig_decode_never_panics(
        body in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            protobuf_like(),
            mutated_auth_sig(),
        ]
    ) {
        let _ = auth_sig::decode(&body);
        let _ = p2p_conn::testkit::internals::read_uvarint(&body);
    }

    /// Encoding then decoding any key and signature is the identity.
    #[test]
    fn auth_sig_roundtrip(pk in any::<[u8; 32]>(), s1 in any::<[u8; 32]>(), s2 in any::<[u8; 32]>()) {
        let mut sig = [0u8; 64];
        sig[..32].copy_from_slice(&s1);
        sig[32..].copy_from_slice(&s2);
        let m = auth_sig::encode(&pk, &sig);
        prop_assert_eq!(m.len(), 103);
        prop_assert_eq!(auth_sig::decode(&m[1..]), Ok((pk, sig)));
    }
}

proptest! {
    #![proptest_config(proptest_config(64))]

    /// The handshake state machine fed arbitrary peer bytes in arbitrary
    /// pieces: no panic, it never asks for more than one sealed frame at a
    /// time, and once it fails it stays failed.
    #[test]
    fn handshake_never_panics_on_arbitrary_input(
        input in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..3000),
            // A well-formed first message with an arbitrary key, then noise.
            (any::<[u8; 32]>(), prop::collection::vec(any::<u8>(), 0..3000)).prop_map(|(k, rest)| {
                let mut m = p2p_conn::testkit::eph_message(&k).to_vec();
                m.extend_from_slice(&rest);
                m
            }),
        ],
        pieces in prop::collection::vec(1usize..200, 1..8),
    ) {
        let mut hs = Handshake::new(&Identity::generate(), HandshakeParams::default());
        let mut rest = &input[..];
        let mut sizes = pieces.iter().cycle();
        let mut failed = None;
        while !rest.is_empty() {
            let buf = hs.read_buffer();
            prop_assert!(buf.len() <= STANDARD_SEALED_FRAME);
            if buf.is_empty() {
                break;
            }
            let n = buf.len().min(rest.len()).min(*sizes.next().unwrap());
            buf[..n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            if let Err(e) = hs.advance_read(n) {
                failed = Some(e);
                break;
            }
        }
        if let Some(e) = failed {
            prop_assert!(hs.read_buffer().is_empty());
            prop_assert_eq!(hs.advance_read(0), Err(e));
            prop_assert!(!hs.is_finished());
        }
    }
}
