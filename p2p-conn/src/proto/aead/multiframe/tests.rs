//! The engine against the one-frame backends, byte for byte.

use super::*;
use crate::proto::aead::{Backend, Cipher};
use crate::proto::wire::nonce_bytes;

/// A deterministic byte stream (SplitMix64).
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) as u8
        })
        .collect()
}

fn key(seed: u64) -> [u8; 32] {
    let mut k = [0u8; 32];
    k.copy_from_slice(&bytes(32, seed));
    k
}

/// `groups` groups of random plaintext frames (tag bytes zero).
fn plaintext(groups: usize, seed: u64) -> Vec<u8> {
    let mut buf = bytes(groups * GROUP_BYTES, seed);
    for frame in buf.chunks_exact_mut(SEALED_LEN) {
        frame[PLAIN_LEN..].fill(0);
    }
    buf
}

/// The same frames sealed one at a time by `backend`.
fn seal_one_by_one(backend: Backend, key: &[u8; 32], counter: u64, plain: &[u8]) -> Vec<u8> {
    let cipher = Cipher::new(backend, key);
    let mut out = plain.to_vec();
    for (i, frame) in out.chunks_exact_mut(SEALED_LEN).enumerate() {
        let nonce = nonce_bytes(counter.wrapping_add(i as u64));
        let tag = cipher.seal_in_place(&nonce, &mut frame[..PLAIN_LEN]);
        frame[PLAIN_LEN..].copy_from_slice(&tag);
    }
    out
}

/// Every kernel compiled in.
const KINDS: &[Kind] = &[
    #[cfg(feature = "avx512")]
    Kind::Avx512,
    #[cfg(feature = "avx2")]
    Kind::Avx2,
];

/// An engine of every kernel this CPU runs, keyed with `key` (a notice for
/// each one it cannot run: those tests are skipped, on that CPU only).
fn engines(key: &[u8; 32]) -> Vec<(Kind, Engine)> {
    KINDS
        .iter()
        .filter_map(|&kind| {
            let e = Engine::new(kind, key);
            if e.is_none() {
                eprintln!("notice: this CPU cannot run the {kind:?} kernel; its tests skipped");
            }
            e.map(|e| (kind, e))
        })
        .collect()
}

/// Counters that start anywhere, cross 2^32 inside a group, and end exactly
/// at u64::MAX.
fn counters(groups: usize) -> [u64; 5] {
    let last_start = u64::MAX - (groups * GROUP) as u64 + 1;
    [0, 1, 0xFFFF_FFF8, 0x0123_4567_89AB_CDEF, last_start]
}

#[test]
fn seal_matches_one_frame_backends() {
    for groups in [1, 2, 4] {
        for (n, counter) in counters(groups).into_iter().enumerate() {
            let k = key(n as u64 + 100 * groups as u64);
            for (kind, e) in engines(&k) {
                let plain = plaintext(groups, counter ^ 7);
                let mut sealed = plain.clone();
                e.seal_groups(counter, &mut sealed);
                for &b in Backend::ALL {
                    assert_eq!(
                        sealed,
                        seal_one_by_one(b, &k, counter, &plain),
                        "{kind:?}: {groups} groups at counter {counter:#x}, against {b}"
                    );
                }
                let mut opened = sealed.clone();
                assert_eq!(e.open_groups(counter, &mut opened), groups * GROUP);
                for (o, p) in opened
                    .chunks_exact(SEALED_LEN)
                    .zip(plain.chunks_exact(SEALED_LEN))
                {
                    assert_eq!(o[..PLAIN_LEN], p[..PLAIN_LEN], "{kind:?}");
                }
            }
        }
    }
}

#[test]
fn seal_ignores_what_the_tag_bytes_held() {
    let k = key(3);
    for (kind, e) in engines(&k) {
        let plain = plaintext(1, 3);
        let mut dirty = plain.clone();
        for frame in dirty.chunks_exact_mut(SEALED_LEN) {
            frame[PLAIN_LEN..].fill(0xAA);
        }
        let (mut a, mut b) = (plain, dirty);
        e.seal_groups(9, &mut a);
        e.seal_groups(9, &mut b);
        assert_eq!(a, b, "{kind:?}");
    }
}

#[test]
fn a_flipped_bit_stops_opening_at_that_frame() {
    let k = key(11);
    for (kind, e) in engines(&k) {
        let groups = 3;
        let counter = 0xFFFF_FFF0;
        let plain = plaintext(groups, 11);
        let mut sealed = plain.clone();
        e.seal_groups(counter, &mut sealed);
        // Bad frames at group starts, middles and ends; flipped bits in the
        // length prefix, data, last data byte, tail bytes and tag.
        for bad in [0, 1, 7, 8, 15, 16, 17, 31, 40, 47] {
            for pos in [0, 3, 4, 17, 1023, 1024, 1027, 1028, 1043] {
                let mut buf = sealed.clone();
                buf[bad * SEALED_LEN + pos] ^= 0x20;
                let opened = e.open_groups(counter, &mut buf);
                assert_eq!(opened, bad, "{kind:?}: bad frame {bad}, byte {pos}");
                for (i, (got, want)) in buf
                    .chunks_exact(SEALED_LEN)
                    .zip(plain.chunks_exact(SEALED_LEN))
                    .enumerate()
                {
                    if i < bad {
                        assert_eq!(
                            got[..PLAIN_LEN],
                            want[..PLAIN_LEN],
                            "{kind:?}: frame {i} opened"
                        );
                    } else {
                        // Untouched: exactly the (possibly corrupted) ciphertext.
                        let mut expect = sealed[i * SEALED_LEN..(i + 1) * SEALED_LEN].to_vec();
                        if i == bad {
                            expect[pos] ^= 0x20;
                        }
                        assert_eq!(got, &expect[..], "{kind:?}: frame {i} must stay sealed");
                    }
                }
            }
        }
    }
}

#[test]
fn wrong_counter_or_key_opens_nothing() {
    let k = key(5);
    for (kind, e) in engines(&k) {
        let mut sealed = plaintext(2, 5);
        e.seal_groups(1000, &mut sealed);
        let before = sealed.clone();
        assert_eq!(e.open_groups(1001, &mut sealed), 0, "{kind:?}");
        assert_eq!(sealed, before);
        let other = Engine::new(kind, &key(6)).expect("same CPU");
        assert_eq!(other.open_groups(1000, &mut sealed), 0);
        assert_eq!(sealed, before);
    }
}

#[test]
fn poly1305_edge_keys_and_messages() {
    // All-ones plaintext makes every Poly1305 block maximal; keys whose r is
    // at the clamp's maximum stress the lazy-carry bounds. ChaCha20 derives
    // the one-time keys, so search keys whose first group has a frame with a
    // large r, and compare with ring / RustCrypto.
    for seed in 0..64 {
        let k = key(seed);
        for (kind, e) in engines(&k) {
            let mut plain = vec![0xFFu8; GROUP_BYTES];
            for frame in plain.chunks_exact_mut(SEALED_LEN) {
                frame[PLAIN_LEN..].fill(0);
            }
            let mut sealed = plain.clone();
            e.seal_groups(seed << 40, &mut sealed);
            for &b in Backend::ALL {
                assert_eq!(
                    sealed,
                    seal_one_by_one(b, &k, seed << 40, &plain),
                    "{kind:?}: seed {seed}"
                );
            }
        }
    }
}

#[cfg(feature = "avx512")]
#[test]
fn poly_finish_reduces_at_the_modulus() {
    // h = p = 2^130 - 5 must reduce to 0, so the tag is s.
    let mut k = [0u8; 32];
    k[16..].copy_from_slice(&[0x11; 16]);
    let p_limbs = [(1u64 << 44) - 5, (1u64 << 44) - 1, (1u64 << 42) - 1];
    assert_eq!(poly_finish(&p_limbs, &[0, 44, 88], &k), [0x11; 16]);
    // h = p + 1 reduces to 1.
    let p1 = [(1u64 << 44) - 4, (1u64 << 44) - 1, (1u64 << 42) - 1];
    let mut want = [0x11u8; 16];
    want[0] = 0x12;
    assert_eq!(poly_finish(&p1, &[0, 44, 88], &k), want);
    // Lazily reduced limbs (above their radix) give the same result.
    let lazy = [
        (1u64 << 44) - 4 + (1 << 44),
        (1u64 << 44) - 2,
        (1u64 << 42) - 1,
    ];
    assert_eq!(poly_finish(&lazy, &[0, 44, 88], &k), want);
}

#[test]
fn a_batch_whose_counters_wrap_is_refused() {
    let k = key(1);
    for (kind, e) in engines(&k) {
        let mut frames = plaintext(1, 1);
        // Counters u64::MAX - 14 ..= u64::MAX + 1: the last one wraps.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            e.seal_groups(u64::MAX - 14, &mut frames)
        }));
        assert!(r.is_err(), "{kind:?}: a wrapping batch must be refused");
        // Ending exactly at u64::MAX is fine.
        e.seal_groups(u64::MAX - 15, &mut frames);
    }
}

/// Groups the soak compares: a smoke run by default, millions of frames
/// with `P2P_CONN_SOAK` set (`P2P_CONN_SOAK=1 cargo test --release -p
/// p2p-conn --lib soak`: 125,000 groups, 2,000,000 frames per kernel).
fn soak_groups() -> usize {
    if std::env::var_os("P2P_CONN_SOAK").is_some() {
        125_000
    } else {
        200
    }
}

/// Random keys, counters and plaintext, group after group: every kernel's
/// seal against ring's (RustCrypto's without `ring`), byte for byte, and
/// its open of the result; then one random bit flipped, which must stop
/// the open at that frame and leave it and every later frame as received.
#[test]
fn soak_against_the_one_frame_backend() {
    let one = *Backend::ALL.first().expect("a one-frame backend");
    let mut rng = 0x5eed_u64;
    let mut next = move || {
        rng = rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        rng
    };
    for g in 0..soak_groups() {
        let k = key(next());
        // Counters anywhere, including the last group before u64::MAX.
        let counter = match g % 4 {
            0 => u64::MAX - GROUP as u64 + 1,
            _ => next() % (u64::MAX - GROUP as u64),
        };
        let plain = plaintext(1, next());
        let want = seal_one_by_one(one, &k, counter, &plain);
        for (kind, e) in engines(&k) {
            let mut sealed = plain.clone();
            e.seal_groups(counter, &mut sealed);
            assert_eq!(sealed, want, "{kind:?}: group {g}, counter {counter:#x}");
            let mut opened = sealed.clone();
            assert_eq!(e.open_groups(counter, &mut opened), GROUP, "{kind:?}");
            for (o, p) in opened
                .chunks_exact(SEALED_LEN)
                .zip(plain.chunks_exact(SEALED_LEN))
            {
                assert_eq!(o[..PLAIN_LEN], p[..PLAIN_LEN], "{kind:?}: group {g}");
            }
            let at = (next() % GROUP_BYTES as u64) as usize;
            let mut bad = sealed.clone();
            bad[at] ^= 1 << (next() % 8);
            let frame = at / SEALED_LEN;
            assert_eq!(
                e.open_groups(counter, &mut bad),
                frame,
                "{kind:?}: flip at {at}"
            );
            let mut expect = sealed.clone();
            expect[at] = bad[at];
            assert_eq!(
                bad[frame * SEALED_LEN..],
                expect[frame * SEALED_LEN..],
                "{kind:?}: frames from the flipped one on stay as received"
            );
        }
    }
}
