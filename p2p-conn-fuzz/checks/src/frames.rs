//! `frames`: the receive side on raw, hand-sealed hostile and tampered
//! streams.

use crate::drive::{handshake_pair, read_all, Chunks, KEY};
use crate::input::Input;
use crate::internals::ReadCore;
use crate::Seeds;
use p2p_conn::proto::FrameSize;
use p2p_conn::testkit;
use p2p_conn::testkit::internals::wire::sealed_frame_len;
use p2p_conn::testkit::internals::wire::{LEN_PREFIX, TAG_LEN};
use p2p_conn::Backend;

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
pub fn check(data: &[u8]) {
    let mut inp = Input::new(data);
    let cfg = inp.u8();
    let backend = Backend::ALL[usize::from(cfg >> 2) % Backend::ALL.len()];
    match cfg % 4 {
        0 => frames_raw(&mut inp, backend),
        1 | 3 => frames_hostile(&mut inp, backend),
        _ => frames_tampered(&mut inp, backend),
    }
}

fn frames_raw(inp: &mut Input<'_>, backend: Backend) {
    let opts = inp.u8();
    let rbuf = usize::from(inp.u16()) * 2;
    let mut reads = Chunks::decode(inp);
    let out_max = 1 + usize::from(inp.u16());
    let wire = inp.rest();
    let run = handshake_pair(opts & 1 == 1, backend);
    let fs = run.b.opener.frame_size().get();
    let sealed = run.b.opener.frame_size().sealed_len();
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
    let cipher = p2p_conn::testkit::internals::cipher(backend, &KEY);

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
        let tag = crate::internals::seal_at(&cipher, counter, &mut plain);
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
        p2p_conn::testkit::internals::opener(
            p2p_conn::testkit::internals::cipher(read_backend, &KEY),
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
    let sealed = run.a.sealer.frame_size().sealed_len();

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

/// The seeds this check owns, written to `seeds/frames/` by `gen_seeds`: valid
/// frames from the pair's sealer, junk, hostile frame headers, 40 standard
/// frames for each backend, and tampered streams.
pub fn seeds() -> Seeds {
    use crate::cat;

    let mut s = Seeds::default();
    // Mode 0 (raw): cfg 0, opts, rbuf u16, chunks (seed, max u16),
    // out_max u16, then the stream: here valid frames from the pair's sealer.
    for (name, small, msg_len, chunk) in [
        ("raw-valid-std", false, 3000usize, 0u16),
        ("raw-valid-small-chunked", true, 500, 13),
    ] {
        let mut run = crate::drive::handshake_pair(small, Backend::ALL[0]);
        let mut wire = Vec::new();
        run.a
            .sealer
            .seal_append(&testkit::payload(msg_len, 1), &mut wire)
            .unwrap();
        let head = [
            &[0u8, small as u8, 0, 0, 4][..],
            &chunk.to_le_bytes(),
            &[0, 4],
        ]
        .concat();
        s.add(name, &cat(&[&head, &wire]));
    }
    s.add(
        "raw-junk",
        &cat(&[&[0, 0, 0, 0, 0, 0, 0, 0, 0], &[0xab; 1100]]),
    );
    // Mode 1 (hostile): cfg 1, sel (frame size), read backend, rbuf,
    // chunks, out_max, cut, then frames: kind [+ len bytes] + body.
    let hostile_frames = cat(&[
        &[5, 10, 0],   // len 10
        &[7u8; 10],    // body
        &[0],          // empty frame
        &[1],          // len = frame size
        &[9u8; 64],    // body (64-byte frames)
        &[0x85, 3, 0], // len 3, junk padding
        b"abc",
        &[2, 0], // len = frame size + 1: must fail
        &[0u8; 64],
    ]);
    s.add(
        "hostile-64",
        &cat(&[&[1, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0], &hostile_frames]),
    );
    s.add(
        "hostile-64-cut",
        &cat(&[&[1, 2, 0, 0, 0, 3, 5, 0, 0, 1, 9, 0], &hostile_frames[..90]]),
    );
    let mut many = Vec::new();
    for i in 0..40u8 {
        many.extend_from_slice(&[5, i, 3]);
        many.extend(std::iter::repeat_n(i, usize::from(i) + 768));
    }
    // 40 standard frames (groups of 16 for the multi-frame engine), rbuf
    // 4 * 0x4000 = 64 KiB.
    for i in 0..Backend::ALL.len() {
        let cfg = 1 | (i as u8) << 2;
        s.add(
            format!("hostile-std-40-frames-backend{i}"),
            &cat(&[&[cfg, 0, i as u8, 0, 0x40, 0, 0, 0, 0, 0x40, 0, 0], &many]),
        );
    }
    // Mode 2 (tampered): cfg 2, opts, rbuf, chunks, out_max, then
    // messages (count, u16 lens), flips (count, u32 pos, xor).
    s.add(
        "tampered-none",
        &[
            2, 0, 0, 0x10, 0, 0, 0, 0, 0x10, 2, 0xd0, 0x07, 0x10, 0x00, 0,
        ],
    );
    s.add(
        "tampered-one-flip",
        &[
            2, 0, 0, 0x10, 0, 0, 0, 0, 0x10, 2, 0xd0, 0x07, 0x10, 0x00, 1, 0x30, 0x08, 0, 0, 4,
        ],
    );
    s
}
