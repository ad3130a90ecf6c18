//! Replays the committed fuzz seed corpora (`p2p-conn-fuzz/seeds/<target>/`)
//! through the same checks the cargo-fuzz targets run, so every seed (and
//! every crash a fuzzer found, once added there) is an ordinary test. See
//! `docs/fuzzing.md`.

#[path = "../../p2p-conn-fuzz/src/lib.rs"]
#[allow(dead_code)]
mod fuzz_checks;

use std::fs;
use std::path::PathBuf;

/// Run `check` over every file of `p2p-conn-fuzz/seeds/<target>/`.
fn replay(target: &str, check: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../p2p-conn-fuzz/seeds")
        .join(target);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("seed directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no seeds in {}", dir.display());
    for path in files {
        let data = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        eprintln!("replaying {}", path.display());
        check(&data);
    }
}

#[test]
fn handshake_seeds() {
    replay("handshake", fuzz_checks::handshake);
}

#[test]
fn frames_seeds() {
    replay("frames", fuzz_checks::frames);
}

#[test]
fn auth_sig_seeds() {
    replay("auth_sig", fuzz_checks::auth_sig);
}

#[test]
fn roundtrip_seeds() {
    replay("roundtrip", fuzz_checks::roundtrip);
}

#[test]
fn queue_budget_seeds() {
    replay("queue_budget", fuzz_checks::queue_budget);
}

#[test]
fn nodeinfo_seeds() {
    replay("nodeinfo", fuzz_checks::nodeinfo);
}

#[test]
fn send_queue_seeds() {
    replay("send_queue", fuzz_checks::send_queue);
}

/// Inputs that are not seeds: the empty input and one byte, for every target.
#[test]
fn tiny_inputs() {
    for data in [&[][..], &[0], &[1], &[2], &[0xff]] {
        fuzz_checks::handshake(data);
        fuzz_checks::frames(data);
        fuzz_checks::auth_sig(data);
        fuzz_checks::roundtrip(data);
        fuzz_checks::queue_budget(data);
        fuzz_checks::nodeinfo(data);
        fuzz_checks::send_queue(data);
    }
}

/// Found by `auth_sig` in its first run: our ephemeral key reflected back
/// with bit 255 set. The library rightly refuses it (`is_reflection` ignores
/// bit 255, as X25519 does); the harness's check expected an exact match.
/// Kept as seed `auth_sig/reflected-key-bit255` and here.
#[test]
fn auth_sig_reflected_key_with_bit_255_set() {
    let (_, hs) = p2p_conn::testkit::deterministic_handshake(3, Default::default());
    let mut msg = hs.outgoing()[..35].to_vec();
    msg[34] ^= 0x80;
    fuzz_checks::auth_sig(&msg);
    let seed = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../p2p-conn-fuzz/seeds/auth_sig/reflected-key-bit255"),
    )
    .expect("regression seed");
    fuzz_checks::auth_sig(&seed);
}
