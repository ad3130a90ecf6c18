//! Writes the committed seed corpus: `cargo run --example gen_seeds` (from
//! `p2p-conn-fuzz/`). Every seed is run through its check before it is
//! written. The layouts follow the input decoding in `src/lib.rs`.

use std::fs;
use std::path::Path;

use p2p_conn::proto::auth_sig;
use p2p_conn::proto::{Backend, FrameSize, HandshakeParams};
use p2p_conn::testkit;

fn write(target: &str, name: &str, bytes: &[u8], check: fn(&[u8])) {
    check(bytes);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(name), bytes).unwrap();
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn transcript(small: bool) -> testkit::HandshakeRun {
    let params = HandshakeParams {
        frame_size: if small {
            FrameSize::new(64).unwrap()
        } else {
            FrameSize::STANDARD
        },
        backend: Backend::ALL[0],
    };
    testkit::run_handshakes(
        testkit::deterministic_handshake(1, params).1,
        testkit::deterministic_handshake(2, params).1,
        usize::MAX,
    )
    .unwrap()
}

fn main() {
    use p2p_conn_fuzz as f;

    // handshake: cfg (bit 0 role, bit 1 small frames), chunk, peer bytes.
    let std_run = transcript(false);
    let small_run = transcript(true);
    write(
        "handshake",
        "seed1-full",
        &cat(&[&[0, 0], &std_run.b_wire]),
        f::handshake,
    );
    write(
        "handshake",
        "seed1-chunk1",
        &cat(&[&[0, 1], &std_run.b_wire]),
        f::handshake,
    );
    write(
        "handshake",
        "seed2-chunk37",
        &cat(&[&[1, 37], &std_run.a_wire]),
        f::handshake,
    );
    write(
        "handshake",
        "seed2-small-frames",
        &cat(&[&[3, 0], &small_run.a_wire]),
        f::handshake,
    );
    write(
        "handshake",
        "seed1-truncated",
        &cat(&[&[0, 5], &std_run.b_wire[..100]]),
        f::handshake,
    );
    write(
        "handshake",
        "seed1-own-key",
        &cat(&[&[0, 0], &std_run.a_wire]),
        f::handshake,
    );

    // frames mode 0 (raw): cfg 0, opts, rbuf u16, chunks (seed, max u16),
    // out_max u16, then the stream: here valid frames from the pair's sealer.
    for (name, small, msg_len, chunk) in [
        ("raw-valid-std", false, 3000usize, 0u16),
        ("raw-valid-small-chunked", true, 500, 13),
    ] {
        let mut run = f::handshake_pair(small, Backend::ALL[0]);
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
        write("frames", name, &cat(&[&head, &wire]), f::frames);
    }
    write(
        "frames",
        "raw-junk",
        &cat(&[&[0, 0, 0, 0, 0, 0, 0, 0, 0], &[0xab; 1100]]),
        f::frames,
    );
    // frames mode 1 (hostile): cfg 1, sel (frame size), read backend, rbuf,
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
    write(
        "frames",
        "hostile-64",
        &cat(&[&[1, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0], &hostile_frames]),
        f::frames,
    );
    write(
        "frames",
        "hostile-64-cut",
        &cat(&[&[1, 2, 0, 0, 0, 3, 5, 0, 0, 1, 9, 0], &hostile_frames[..90]]),
        f::frames,
    );
    let mut many = Vec::new();
    for i in 0..40u8 {
        many.extend_from_slice(&[5, i, 3]);
        many.extend(std::iter::repeat_n(i, usize::from(i) + 768));
    }
    // 40 standard frames (groups of 16 for the multi-frame engine), rbuf
    // 4 * 0x4000 = 64 KiB.
    for (i, b) in Backend::ALL.iter().enumerate() {
        let cfg = 1 | (i as u8) << 2;
        let _ = b;
        write(
            "frames",
            &format!("hostile-std-40-frames-backend{i}"),
            &cat(&[&[cfg, 0, i as u8, 0, 0x40, 0, 0, 0, 0, 0x40, 0, 0], &many]),
            f::frames,
        );
    }
    // frames mode 2 (tampered): cfg 2, opts, rbuf, chunks, out_max, then
    // messages (count, u16 lens), flips (count, u32 pos, xor).
    write(
        "frames",
        "tampered-none",
        &[
            2, 0, 0, 0x10, 0, 0, 0, 0, 0x10, 2, 0xd0, 0x07, 0x10, 0x00, 0,
        ],
        f::frames,
    );
    write(
        "frames",
        "tampered-one-flip",
        &[
            2, 0, 0, 0x10, 0, 0, 0, 0, 0x10, 2, 0xd0, 0x07, 0x10, 0x00, 1, 0x30, 0x08, 0, 0, 4,
        ],
        f::frames,
    );

    // auth_sig: a real message body, a reordered one, an ephemeral message.
    let id = testkit::deterministic_handshake(1, HandshakeParams::default()).0;
    let pk = *id.public_key().as_bytes();
    let sig = [0x5a; 64];
    let enc = auth_sig::encode(&pk, &sig);
    write("auth_sig", "ed25519", &enc[1..], f::auth_sig);
    let reordered = cat(&[
        &[0x12, 0x40],
        &sig,
        &[0x0a, 0x22, 0x0a, 0x20],
        &pk,
        &[0x18, 0x96, 0x01],
    ]);
    write(
        "auth_sig",
        "reordered-unknown-field",
        &reordered,
        f::auth_sig,
    );
    let (_, hs) = testkit::deterministic_handshake(2, HandshakeParams::default());
    write(
        "auth_sig",
        "ephemeral-message",
        &hs.outgoing()[..35],
        f::auth_sig,
    );
    write("auth_sig", "varint-overflow", &[0xff; 11], f::auth_sig);
    write(
        "auth_sig",
        "secp256k1-key",
        &[0x0a, 0x23, 0x12, 0x21, 2, 1, 2, 3],
        f::auth_sig,
    );

    // roundtrip: cfg (bit 0: 1024-byte frames, bit 1: leftover plaintext),
    // [fs u16], write backend, read backend, flush u16, rbuf u16, write
    // chunks, read chunks, out_max u16, [initial len], count, messages
    // (kind, len, how u16).
    write(
        "roundtrip",
        "std-frames-three-messages",
        &[
            1, 0, 0, 0, 0x10, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0x10, 3, 2, 0x10, 0x27, 0, 0, 0, 200,
            1, 0, 1, 5, 2, 0,
        ],
        f::roundtrip,
    );
    write(
        "roundtrip",
        "odd-frames-chunked-faults",
        &[
            2, 0x3e, 0x01, 1, 2, 0x40, 0, 0x80, 0, 3, 7, 0, 5, 3, 0, 9, 0, 50, 4, 2, 0x70, 0x17,
            0xff, 0x01, 1, 3, 0x22, 0x00, 3, 0, 0x10, 2, 0x40, 0x9c, 2, 0,
        ],
        f::roundtrip,
    );
    write(
        "roundtrip",
        "tiny-flush-empty-message",
        &[
            1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2, 0x88, 0x13, 1, 0,
        ],
        f::roundtrip,
    );

    // queue_budget: cap u16, then ops.
    write(
        "queue_budget",
        "fill-and-release",
        &[
            0xe8, 0x03, 1, 0x58, 0x02, 1, 0x91, 0x01, 1, 0x90, 0x01, 0x80, 1, 0x58, 0x02,
        ],
        f::queue_budget,
    );
    write(
        "queue_budget",
        "large-slot",
        &[
            0x10, 0, 1, 0x0e, 0, 2, 3, 5, 0, 3, 0, 0, 0x81, 3, 7, 0, 0x80, 0x80, 0x80,
        ],
        f::queue_budget,
    );
    write(
        "queue_budget",
        "cap-one-empties",
        &[1, 0, 0, 0, 1, 0, 0, 2, 2, 0x83, 0x84, 0x85],
        f::queue_budget,
    );
    println!("seeds written");
}
