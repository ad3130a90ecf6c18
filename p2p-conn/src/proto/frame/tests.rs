use super::super::aead::Backend;
use super::super::wire::STANDARD_SEALED_FRAME;
use super::*;

fn pair(backend: Backend, fs: usize, counter: u64) -> (Sealer, Opener) {
    let key = [3u8; 32];
    (
        Sealer::with_counter(
            Cipher::new(backend, &key),
            FrameSize::new(fs).unwrap(),
            counter,
        ),
        Opener::with_counter(
            Cipher::new(backend, &key),
            FrameSize::new(fs).unwrap(),
            counter,
        ),
    )
}

#[test]
fn nonce_layout() {
    assert_eq!(hex::encode(nonce_bytes(0)), "000000000000000000000000");
    assert_eq!(hex::encode(nonce_bytes(1)), "000000000100000000000000");
    assert_eq!(hex::encode(nonce_bytes(256)), "000000000001000000000000");
}

#[test]
fn split_sizes_and_roundtrip() {
    for &b in Backend::ALL {
        for (len, frames) in [
            (0usize, 0usize),
            (1, 1),
            (1023, 1),
            (1024, 1),
            (1025, 2),
            (4096, 4),
        ] {
            let (mut s, mut o) = pair(b, 1024, 0);
            let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let mut out = Vec::new();
            assert_eq!(s.seal_append(&data, &mut out).unwrap(), frames);
            assert_eq!(out.len(), frames * STANDARD_SEALED_FRAME);
            let mut got = Vec::new();
            for f in out.chunks_mut(STANDARD_SEALED_FRAME) {
                let r = o.open_in_place(f).unwrap();
                got.extend_from_slice(&f[r]);
            }
            assert_eq!(got, data);
        }
    }
}

#[test]
fn padding_is_zero_on_send() {
    for &backend in Backend::ALL {
        let (mut s, _) = pair(backend, 1024, 0);
        let mut out = Vec::new();
        s.seal_append(b"abc", &mut out).unwrap();
        let c = Cipher::new(Backend::RustCrypto, &[3u8; 32]);
        c.open_in_place(&nonce_bytes(0), &mut out).unwrap();
        assert_eq!(&out[..7], &[3, 0, 0, 0, b'a', b'b', b'c']);
        assert!(out[7..1028].iter().all(|&b| b == 0));
    }
}

#[test]
fn nonce_exhaustion_is_an_error_not_a_wrap() {
    for &backend in Backend::ALL {
        let (mut s, mut o) = pair(backend, 1024, u64::MAX - 1);
        let mut out = Vec::new();
        // Three frames need counters MAX-1, MAX, and one more: refused whole.
        assert_eq!(
            s.seal_append(&[1u8; 3000], &mut out),
            Err(ProtocolError::NonceExhausted)
        );
        assert!(out.is_empty());
        // Two frames fit exactly.
        assert_eq!(s.seal_append(&[1u8; 2000], &mut out).unwrap(), 2);
        assert_eq!(
            s.seal_append(b"x", &mut out),
            Err(ProtocolError::NonceExhausted)
        );
        assert_eq!(
            s.seal_frame(b"", &mut out),
            Err(ProtocolError::NonceExhausted)
        );
        assert_eq!(out.len(), 2 * STANDARD_SEALED_FRAME);
        for f in out.chunks_mut(STANDARD_SEALED_FRAME) {
            o.open_in_place(f).unwrap();
        }
        let mut extra = vec![0u8; STANDARD_SEALED_FRAME];
        assert_eq!(
            o.open_in_place(&mut extra),
            Err(ProtocolError::NonceExhausted)
        );
    }
}

#[test]
fn failures_are_sticky() {
    let (mut s, mut o) = pair(Backend::RustCrypto, 1024, 0);
    let mut out = Vec::new();
    s.seal_append(&[9u8; 2048], &mut out).unwrap();
    out[10] ^= 0x80;
    let (a, b) = out.split_at_mut(STANDARD_SEALED_FRAME);
    assert_eq!(
        o.open_in_place(a),
        Err(ProtocolError::FrameAuthentication { counter: 0 })
    );
    // The second frame is intact but the stream is dead.
    assert!(o.open_in_place(b).is_err());
}

#[test]
fn length_above_frame_size_is_rejected() {
    for &backend in Backend::ALL {
        let c = Cipher::new(backend, &[3u8; 32]);
        let mut plain = vec![0u8; 1028];
        plain[..4].copy_from_slice(&1025u32.to_le_bytes());
        let tag = c.seal_in_place(&nonce_bytes(0), &mut plain);
        plain.extend_from_slice(&tag);
        let (_, mut o) = pair(backend, 1024, 0);
        assert_eq!(
            o.open_in_place(&mut plain),
            Err(ProtocolError::FrameTooLarge {
                len: 1025,
                max: 1024
            })
        );
    }
}

#[test]
fn vectored_equals_contiguous() {
    for &backend in Backend::ALL {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 13) as u8).collect();
        for cuts in [
            vec![0usize, 5000],
            vec![0, 0, 1, 1024, 1025, 4999, 5000],
            vec![0, 3000, 3000, 5000],
        ] {
            let parts: Vec<&[u8]> = cuts.windows(2).map(|w| &data[w[0]..w[1]]).collect();
            let (mut a, _) = pair(backend, 1024, 0);
            let (mut b, _) = pair(backend, 1024, 0);
            let mut x = Vec::new();
            let mut y = Vec::new();
            a.seal_append(&data, &mut x).unwrap();
            b.seal_append_vectored(&parts, &mut y).unwrap();
            assert_eq!(x, y, "{cuts:?}");
        }
        // A prefix seals exactly what sealing that prefix alone would.
        let parts: [&[u8]; 3] = [&data[..100], &data[100..3000], &data[3000..]];
        for len in [0usize, 1, 100, 1024, 2500, 5000, 9999] {
            let (mut a, _) = pair(backend, 1024, 0);
            let (mut b, _) = pair(backend, 1024, 0);
            let mut x = Vec::new();
            let mut y = Vec::new();
            a.seal_append(&data[..len.min(data.len())], &mut x).unwrap();
            b.seal_append_prefix(&parts, len, &mut y).unwrap();
            assert_eq!(x, y, "prefix {len}");
        }
        let (mut a, _) = pair(backend, 1024, 0);
        let mut x = Vec::new();
        let empty: [&[u8]; 2] = [&[], &[]];
        assert_eq!(a.seal_append_vectored(&empty, &mut x).unwrap(), 0);
        assert!(x.is_empty());
    }
}

#[test]
fn non_standard_frame_size() {
    for &backend in Backend::ALL {
        let (mut s, mut o) = pair(backend, 16384, 0);
        let data = vec![5u8; 40000];
        let mut out = Vec::new();
        assert_eq!(s.seal_append(&data, &mut out).unwrap(), 3);
        let mut got = Vec::new();
        for f in out.chunks_mut(sealed_frame_len(16384)) {
            let r = o.open_in_place(f).unwrap();
            got.extend_from_slice(&f[r]);
        }
        assert_eq!(got, data);
        assert!(FrameSize::new(MIN_FRAME_SIZE - 1).is_err());
        assert!(FrameSize::new(MAX_FRAME_SIZE + 1).is_err());
        assert!(FrameSize::new(MIN_FRAME_SIZE).is_ok());
        assert!(FrameSize::new(MAX_FRAME_SIZE).is_ok());
        let fs = FrameSize::STANDARD;
        assert_eq!(fs.whole_frames(0), 1044);
        assert_eq!(fs.whole_frames(1043), 1044);
        assert_eq!(fs.whole_frames(2 * 1044 + 1043), 2 * 1044);
        assert_eq!(fs.whole_frames(128 * 1024), 125 * 1044);
    }
}

/// Messages of every size around group boundaries, through every
/// backend: the grouped sealing (`Avx512`) writes the very bytes the
/// one-frame backends write, and every opener reads them back.
#[test]
fn grouped_sealing_is_byte_identical() {
    let sizes = [
        1usize,
        1024,
        15 * 1024,
        16 * 1024 - 1,
        16 * 1024,
        16 * 1024 + 1,
        17 * 1024,
        32 * 1024,
        33 * 1024 + 5,
        64 * 1024,
        100 * 1024 + 999,
    ];
    for counter in [0u64, 0xFFFF_FFF5, u64::MAX - 200] {
        for &len in &sizes {
            let data: Vec<u8> = (0..len).map(|i| (i * 13 + len) as u8).collect();
            // Two parts split off-frame, as a vectored write would.
            let cut = len / 3;
            let parts = [&data[..cut], &data[cut..]];
            let mut wires = Vec::new();
            for &b in Backend::ALL {
                let (mut s, _) = pair(b, 1024, counter);
                let mut out = vec![0xEE; 7]; // sealing appends after existing bytes
                s.seal_append_vectored(&parts, &mut out).unwrap();
                wires.push((b, out));
            }
            for (b, wire) in &wires[1..] {
                assert!(
                    wire == &wires[0].1,
                    "{len} bytes at {counter:#x}: {b} differs"
                );
            }
            for &b in Backend::ALL {
                let (_, mut o) = pair(b, 1024, counter);
                let mut wire = wires[0].1[7..].to_vec();
                let mut got = Vec::new();
                for f in wire.chunks_mut(STANDARD_SEALED_FRAME) {
                    let r = o.open_in_place(f).unwrap();
                    got.extend_from_slice(&f[r]);
                }
                assert_eq!(got, data, "{len} bytes opened by {b}");
            }
        }
    }
}

/// The all-or-nothing nonce rule holds for grouped sealing too.
#[test]
fn grouped_sealing_stops_at_nonce_exhaustion() {
    for &b in Backend::ALL {
        // 20 counters left: a 20-frame message fits, a 21-frame one not.
        let (mut s, _) = pair(b, 1024, u64::MAX - 19);
        let mut out = Vec::new();
        assert_eq!(
            s.seal_append(&[1u8; 21 * 1024], &mut out),
            Err(ProtocolError::NonceExhausted)
        );
        assert!(out.is_empty());
        assert_eq!(s.seal_append(&[1u8; 20 * 1024], &mut out), Ok(20));
        assert_eq!(
            s.seal_append(&[1u8], &mut out),
            Err(ProtocolError::NonceExhausted)
        );
    }
}

/// Group opening: frames up to a bad one open, the bad one is reported
/// with its counter by the one-frame path, and the failure sticks.
#[cfg(any(feature = "avx512", feature = "avx2"))]
#[test]
fn group_open_stops_before_a_bad_frame() {
    for &b in Backend::ALL {
        group_open_stops_before_a_bad_frame_with(b);
    }
}

#[cfg(any(feature = "avx512", feature = "avx2"))]
fn group_open_stops_before_a_bad_frame_with(b: Backend) {
    let (mut s, _) = pair(b, 1024, 5);
    let data: Vec<u8> = (0..40 * 1024).map(|i| (i % 251) as u8).collect();
    let mut wire = Vec::new();
    s.seal_append(&data, &mut wire).unwrap();
    wire[21 * STANDARD_SEALED_FRAME + 100] ^= 1;
    let (_, mut o) = pair(b, 1024, 5);
    let opened = o.open_groups_in_place(&mut wire);
    if !b.accelerated() {
        assert_eq!(opened, 0);
        return;
    }
    // Group 0 (frames 0..16) opens; group 1 stops at frame 21.
    assert_eq!(opened, 21);
    assert_eq!(o.next_counter(), 5 + 21);
    for i in 0..21 {
        let f = &wire[i * STANDARD_SEALED_FRAME..(i + 1) * STANDARD_SEALED_FRAME];
        let r = o.opened_frame(f).unwrap();
        assert_eq!(&f[r], &data[i * 1024..(i + 1) * 1024]);
    }
    let bad = &mut wire[21 * STANDARD_SEALED_FRAME..22 * STANDARD_SEALED_FRAME];
    let err = ProtocolError::FrameAuthentication { counter: 26 };
    assert_eq!(o.open_in_place(bad), Err(err.clone()));
    assert_eq!(
        o.open_groups_in_place(&mut wire[22 * STANDARD_SEALED_FRAME..]),
        0
    );
    assert_eq!(o.opened_frame(&[0u8; STANDARD_SEALED_FRAME]), Err(err));
}

/// A frame inside a group that decrypts to a length above the frame
/// size is an error at that frame, as on the one-frame path.
#[cfg(any(feature = "avx512", feature = "avx2"))]
#[test]
fn group_open_checks_each_length_prefix() {
    for &b in Backend::ALL.iter().filter(|b| b.accelerated()) {
        group_open_checks_each_length_prefix_with(b);
    }
}

#[cfg(any(feature = "avx512", feature = "avx2"))]
fn group_open_checks_each_length_prefix_with(b: Backend) {
    let key = [3u8; 32];
    let c = Cipher::new(b, &key);
    let mut wire = Vec::new();
    for i in 0..16u64 {
        let mut plain = vec![0u8; LEN_PREFIX + 1024];
        let len: u32 = if i == 9 { 1025 } else { 10 };
        plain[..4].copy_from_slice(&len.to_le_bytes());
        let tag = c.seal_in_place(&nonce_bytes(i), &mut plain);
        wire.extend_from_slice(&plain);
        wire.extend_from_slice(&tag);
    }
    let mut o = Opener::new(Cipher::new(b, &key), FrameSize::STANDARD);
    assert_eq!(o.open_groups_in_place(&mut wire), 16);
    for i in 0..9 {
        let f = &wire[i * STANDARD_SEALED_FRAME..(i + 1) * STANDARD_SEALED_FRAME];
        assert_eq!(o.opened_frame(f), Ok(LEN_PREFIX..LEN_PREFIX + 10));
    }
    let f = &wire[9 * STANDARD_SEALED_FRAME..10 * STANDARD_SEALED_FRAME];
    let err = ProtocolError::FrameTooLarge {
        len: 1025,
        max: 1024,
    };
    assert_eq!(o.opened_frame(f), Err(err.clone()));
    assert_eq!(o.open_in_place(&mut [0u8; STANDARD_SEALED_FRAME]), Err(err));
}

/// A frame sealed by hand around `plain` (length prefix, data, padding
/// as given) under counter `counter`.
fn hand_sealed(backend: Backend, counter: u64, plain: &[u8]) -> Vec<u8> {
    let c = Cipher::new(backend, &[3u8; 32]);
    let mut f = plain.to_vec();
    let tag = c.seal_in_place(&nonce_bytes(counter), &mut f);
    f.extend_from_slice(&tag);
    f
}

/// Short frames whose padding holds stale non-zero bytes (CometBFT's Go
/// sender reuses its frame buffer without clearing it): the padding is
/// ignored and the data arrives intact.
#[test]
fn stale_padding_is_ignored() {
    for &b in Backend::ALL {
        let mut plain = vec![0xA5u8; LEN_PREFIX + 1024];
        plain[..4].copy_from_slice(&3u32.to_le_bytes());
        plain[4..7].copy_from_slice(b"abc");
        let mut f = hand_sealed(b, 0, &plain);
        let (_, mut o) = pair(b, 1024, 0);
        let r = o.open_in_place(&mut f).unwrap();
        assert_eq!(&f[r], b"abc", "{b}");
    }
}

/// Length fields past the frame size, up to u32::MAX: refused, never
/// read past the frame.
#[test]
fn length_fields_of_1025_and_u32_max_are_refused() {
    for &b in Backend::ALL {
        for len in [1025u32, u32::MAX] {
            let mut plain = vec![0u8; LEN_PREFIX + 1024];
            plain[..4].copy_from_slice(&len.to_le_bytes());
            let mut f = hand_sealed(b, 0, &plain);
            let (_, mut o) = pair(b, 1024, 0);
            assert_eq!(
                o.open_in_place(&mut f),
                Err(ProtocolError::FrameTooLarge {
                    len: u64::from(len),
                    max: 1024
                }),
                "{b}, length {len}"
            );
        }
    }
}

/// A replayed frame and a skipped one both fail at that frame, with the
/// counter the opener expected, and the failure sticks.
#[test]
fn replayed_and_skipped_frames_fail() {
    for &b in Backend::ALL {
        let (mut s, _) = pair(b, 1024, 0);
        let mut wire = Vec::new();
        for i in 0..3u8 {
            s.seal_frame(&[i; 10], &mut wire).unwrap();
        }
        let frame =
            |i: usize| wire[i * STANDARD_SEALED_FRAME..(i + 1) * STANDARD_SEALED_FRAME].to_vec();
        // Replay: frame 0 twice.
        let (_, mut o) = pair(b, 1024, 0);
        assert!(o.open_in_place(&mut frame(0)).is_ok());
        let replay = o.open_in_place(&mut frame(0));
        assert_eq!(
            replay,
            Err(ProtocolError::FrameAuthentication { counter: 1 }),
            "{b}"
        );
        assert_eq!(o.open_in_place(&mut frame(1)), replay, "sticky");
        // Skip: frame 1 missing.
        let (_, mut o) = pair(b, 1024, 0);
        assert!(o.open_in_place(&mut frame(0)).is_ok());
        assert_eq!(
            o.open_in_place(&mut frame(2)),
            Err(ProtocolError::FrameAuthentication { counter: 1 }),
            "{b}"
        );
    }
}

/// The receiving side refuses to open past the last counter, without
/// wrapping, like the sending side.
#[test]
fn nonce_exhaustion_on_receive() {
    for &b in Backend::ALL {
        let (mut s, mut o) = pair(b, 1024, u64::MAX);
        let mut wire = Vec::new();
        s.seal_frame(b"last", &mut wire).unwrap();
        let r = o.open_in_place(&mut wire).unwrap();
        assert_eq!(&wire[r], b"last");
        let mut again = hand_sealed(b, 0, &[0u8; LEN_PREFIX + 1024]);
        assert_eq!(
            o.open_in_place(&mut again),
            Err(ProtocolError::NonceExhausted),
            "{b}"
        );
    }
}
