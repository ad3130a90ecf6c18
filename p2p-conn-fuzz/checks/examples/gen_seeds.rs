//! Writes the committed seed corpus in `p2p-conn-fuzz/seeds/`:
//! `cargo run -p p2p-conn-fuzz-checks --example gen_seeds`. Every seed is run
//! through its check once it is written; the generator then fails, naming
//! each seed whose check failed (one that reproduces a bug the code at hand
//! still has). The layouts follow the input decoding in each target's
//! module (`src/TARGET.rs`).

use std::fs;
use std::panic;
use std::path::Path;
use std::sync::Mutex;

use p2p_conn::proto::HandshakeParams;
use p2p_conn::testkit;
use p2p_conn::testkit::internals::auth_sig;
use p2p_conn::Backend;

/// `TARGET/NAME` of every seed whose check failed.
static FAILED: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn write(target: &str, name: &str, bytes: &[u8]) {
    let check = p2p_conn_fuzz_checks::check_of(target).expect("a target");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../seeds")
        .join(target);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(name), bytes).unwrap();
    if panic::catch_unwind(|| check(bytes)).is_err() {
        FAILED.lock().unwrap().push(format!("{target}/{name}"));
    }
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn main() {
    use p2p_conn_fuzz_checks as f;

    // handshake: cfg (bit 0 role, bit 1 small frames), chunk, peer bytes.
    let std_run = f::drive::handshake_pair(false, Backend::ALL[0]);
    let small_run = f::drive::handshake_pair(true, Backend::ALL[0]);
    write("handshake", "seed1-full", &cat(&[&[0, 0], &std_run.b_wire]));
    write(
        "handshake",
        "seed1-chunk1",
        &cat(&[&[0, 1], &std_run.b_wire]),
    );
    write(
        "handshake",
        "seed2-chunk37",
        &cat(&[&[1, 37], &std_run.a_wire]),
    );
    write(
        "handshake",
        "seed2-small-frames",
        &cat(&[&[3, 0], &small_run.a_wire]),
    );
    write(
        "handshake",
        "seed1-truncated",
        &cat(&[&[0, 5], &std_run.b_wire[..100]]),
    );
    write(
        "handshake",
        "seed1-own-key",
        &cat(&[&[0, 0], &std_run.a_wire]),
    );

    // frames mode 0 (raw): cfg 0, opts, rbuf u16, chunks (seed, max u16),
    // out_max u16, then the stream: here valid frames from the pair's sealer.
    for (name, small, msg_len, chunk) in [
        ("raw-valid-std", false, 3000usize, 0u16),
        ("raw-valid-small-chunked", true, 500, 13),
    ] {
        let mut run = f::drive::handshake_pair(small, Backend::ALL[0]);
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
        write("frames", name, &cat(&[&head, &wire]));
    }
    write(
        "frames",
        "raw-junk",
        &cat(&[&[0, 0, 0, 0, 0, 0, 0, 0, 0], &[0xab; 1100]]),
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
    );
    write(
        "frames",
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
    for (i, b) in Backend::ALL.iter().enumerate() {
        let cfg = 1 | (i as u8) << 2;
        let _ = b;
        write(
            "frames",
            &format!("hostile-std-40-frames-backend{i}"),
            &cat(&[&[cfg, 0, i as u8, 0, 0x40, 0, 0, 0, 0, 0x40, 0, 0], &many]),
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
    );
    write(
        "frames",
        "tampered-one-flip",
        &[
            2, 0, 0, 0x10, 0, 0, 0, 0, 0x10, 2, 0xd0, 0x07, 0x10, 0x00, 1, 0x30, 0x08, 0, 0, 4,
        ],
    );

    // auth_sig: a real message body, a reordered one, an ephemeral message.
    let id = testkit::deterministic_handshake(1, HandshakeParams::default()).0;
    let pk = *id.public_key().as_bytes();
    let sig = [0x5a; 64];
    let enc = auth_sig::encode(&pk, &sig);
    write("auth_sig", "ed25519", &enc[1..]);
    let reordered = cat(&[
        &[0x12, 0x40],
        &sig,
        &[0x0a, 0x22, 0x0a, 0x20],
        &pk,
        &[0x18, 0x96, 0x01],
    ]);
    write("auth_sig", "reordered-unknown-field", &reordered);
    let (_, hs) = testkit::deterministic_handshake(2, HandshakeParams::default());
    write("auth_sig", "ephemeral-message", &hs.outgoing()[..35]);
    write("auth_sig", "varint-overflow", &[0xff; 11]);
    write(
        "auth_sig",
        "secp256k1-key",
        &[0x0a, 0x23, 0x12, 0x21, 2, 1, 2, 3],
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
    );
    write(
        "roundtrip",
        "odd-frames-chunked-faults",
        &[
            2, 0x3e, 0x01, 1, 2, 0x40, 0, 0x80, 0, 3, 7, 0, 5, 3, 0, 9, 0, 50, 4, 2, 0x70, 0x17,
            0xff, 0x01, 1, 3, 0x22, 0x00, 3, 0, 0x10, 2, 0x40, 0x9c, 2, 0,
        ],
    );
    write(
        "roundtrip",
        "tiny-flush-empty-message",
        &[
            1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2, 0x88, 0x13, 1, 0,
        ],
    );

    // queue_budget: cap u16, then ops.
    write(
        "queue_budget",
        "fill-and-release",
        &[
            0xe8, 0x03, 1, 0x58, 0x02, 1, 0x91, 0x01, 1, 0x90, 0x01, 0x80, 1, 0x58, 0x02,
        ],
    );
    write(
        "queue_budget",
        "large-slot",
        &[
            0x10, 0, 1, 0x0e, 0, 2, 3, 5, 0, 3, 0, 0, 0x81, 3, 7, 0, 0x80, 0x80, 0x80,
        ],
    );
    write(
        "queue_budget",
        "cap-one-empties",
        &[1, 0, 0, 0, 1, 0, 0, 2, 2, 0x83, 0x84, 0x85],
    );
    send_queue_seeds();
    codec_decoder_seeds();
    mconn_packets_seeds();
    let failed = FAILED.lock().unwrap();
    if !failed.is_empty() {
        eprintln!(
            "seeds written; these fail their check: {}",
            failed.join(", ")
        );
        std::process::exit(1);
    }
    println!("seeds written");
}

/// `send_queue` input header (see `p2p_conn_fuzz_checks::send_queue`): policy
/// (0 Backpressure, 1 Error, 2 Disconnect), drop every handle at the end
/// instead of `shutdown`, cap, 64-byte frames, batch (None: 1024),
/// flush-size word, pipe capacity, peer read buffer, write and read faults
/// (seed, rates).
#[allow(clippy::too_many_arguments)]
fn sq_head(
    policy: u8,
    drop: bool,
    cap: u16,
    small_frames: bool,
    batch: Option<u8>,
    flush: u16,
    capacity: u16,
    rbuf: u16,
    write_faults: Option<(u8, u8)>,
    read_faults: Option<(u8, u8)>,
) -> Vec<u8> {
    let cfg = policy
        | (drop as u8) << 2
        | (small_frames as u8) << 4
        | (write_faults.is_some() as u8) << 5
        | (read_faults.is_some() as u8) << 6
        | (batch.is_none() as u8) << 7;
    let mut h = vec![cfg];
    h.extend_from_slice(&(cap - 1).to_le_bytes());
    if small_frames {
        h.extend_from_slice(&0u16.to_le_bytes()); // 64-byte frames
    }
    if let Some(b) = batch {
        h.push(b - 1);
    }
    h.extend_from_slice(&flush.to_le_bytes());
    h.extend_from_slice(&(capacity - 1).to_le_bytes());
    h.extend_from_slice(&(rbuf - 1).to_le_bytes());
    h.push(0x10); // our backend 0, the peer's 1
    for (seed, rates) in write_faults.into_iter().chain(read_faults) {
        h.extend_from_slice(&[seed, rates]);
    }
    h
}

/// `send_queue` steps.
mod sq {
    /// A send of `n` bytes (length kind 2, a u16).
    pub fn send(n: u16) -> Vec<u8> {
        let mut v = vec![2 << 4];
        v.extend_from_slice(&n.to_le_bytes());
        v
    }
    /// Sends of exactly the cap (kind 3), one above it (kind 4), one below
    /// (kind 5), and an empty one (kind 0).
    pub const AT_CAP: &[u8] = &[3 << 4];
    pub fn above_cap(extra: u8) -> Vec<u8> {
        vec![4 << 4, extra]
    }
    pub const BELOW_CAP: &[u8] = &[5 << 4];
    pub const EMPTY: &[u8] = &[0];
    /// A bundle of parts of these lengths (0: an empty part).
    pub fn bundle(lens: &[u16]) -> Vec<u8> {
        assert!(lens.len() < 6);
        let mut v = vec![(lens.len() as u8) << 4 | 5];
        for &n in lens {
            if n == 0 {
                v.push(0);
            } else {
                v.push(2);
                v.extend_from_slice(&n.to_le_bytes());
            }
        }
        v
    }
    pub const FLUSH: &[u8] = &[7];
    /// The peer reads up to `k` bytes (0: all it can).
    pub fn read(k: u16) -> Vec<u8> {
        let mut v = vec![8];
        v.extend_from_slice(&k.to_le_bytes());
        v
    }
    /// The peer reads all it can, `n` times (the writer runs in between).
    pub fn reads(n: usize) -> Vec<u8> {
        read(0).repeat(n)
    }
    pub fn cancel(which: u8) -> Vec<u8> {
        vec![which << 4 | 11]
    }
    pub const SHUTDOWN: &[u8] = &[12];
    pub const CLOSE: &[u8] = &[13];
}

fn sq_write(
    name: &str,
    head: Vec<u8>,
    steps: &[Vec<u8>],
    want: fn(&p2p_conn_fuzz_checks::send_queue::Summary) -> bool,
) {
    let data = cat(&[&head, &steps.concat()]);
    let summary = p2p_conn_fuzz_checks::send_queue::run(&data);
    println!("send_queue/{name}: {summary:?}");
    assert!(
        want(&summary),
        "seed {name} does not do what it is for: {summary:?}"
    );
    write("send_queue", name, &data);
}

fn send_queue_seeds() {
    use sq::*;
    let k1 = || send(1000);
    // Backpressure: the peer does not read, sends wait, a flush waits; then
    // the peer reads and everything arrives after the shutdown.
    sq_write(
        "backpressure-stall-and-drain",
        sq_head(0, false, 4096, false, Some(4), 0, 512, 1024, None, None),
        &[
            k1(),
            k1(),
            k1(),
            k1(),
            k1(),
            k1(),
            FLUSH.to_vec(),
            k1(),
            read(3000),
            k1(),
            read(0),
        ],
        |s| s.waited >= 2 && s.flushed == 1 && s.clean_end && s.delivered == s.expected,
    );
    // Error: sends past the cap fail with Full; once the peer reads, sending
    // works again.
    sq_write(
        "error-full-then-room",
        sq_head(1, false, 2048, false, Some(2), 0, 256, 2048, None, None),
        &[
            k1(),
            k1(),
            k1(),
            k1(),
            k1(),
            read(0),
            read(0),
            k1(),
            FLUSH.to_vec(),
            read(0),
        ],
        |s| s.full >= 1 && s.accepted >= 3 && s.clean_end && s.delivered == s.expected,
    );
    // Disconnect: the overflow closes the queue once; later calls fail;
    // the peer reads whole frames and a clean end.
    sq_write(
        "disconnect-on-overflow",
        sq_head(2, false, 2048, false, Some(2), 0, 256, 2048, None, None),
        &[
            k1(),
            k1(),
            k1(),
            k1(),
            k1(),
            k1(),
            FLUSH.to_vec(),
            read(100),
        ],
        |s| s.disconnected && s.closed >= 2 && s.clean_end,
    );
    // Bundles of up to 5 parts (one empty) with 64-byte frames, one message
    // per batch, 400-byte writes, a 100-byte pipe, faults both ways.
    sq_write(
        "bundles-small-frames-faults",
        sq_head(
            0,
            false,
            8192,
            true,
            Some(1),
            100,
            100,
            50,
            Some((7, 0xab)),
            Some((9, 0x6d)),
        ),
        &[
            bundle(&[300, 40, 0, 900]),
            send(77),
            bundle(&[8, 8, 8, 8, 8]),
            read(500),
            bundle(&[2000, 1]),
            send(3000),
            bundle(&[130, 64, 65]),
            read(0),
            bundle(&[5000, 5000]),
            FLUSH.to_vec(),
        ],
        |s| s.accepted == 7 && s.clean_end && s.delivered == s.expected,
    );
    // shutdown() with a backlog the peer has not read: later calls fail,
    // and the peer still reads everything before the end.
    sq_write(
        "shutdown-with-pending",
        sq_head(0, false, 65535, false, None, 0, 64, 4096, None, None),
        &[
            send(4000),
            send(4000),
            bundle(&[4000, 4000]),
            send(4000),
            SHUTDOWN.to_vec(),
            send(10),
            FLUSH.to_vec(),
            bundle(&[1, 2]),
            read(10),
        ],
        |s| s.closed == 3 && s.clean_end && s.delivered == s.expected && s.expected >= 20000,
    );
    // close() mid-stream: queued messages are dropped, later calls fail,
    // the peer reads a prefix (a cut frame at most).
    sq_write(
        "close-mid-stream",
        sq_head(0, false, 65535, false, Some(3), 0, 700, 4096, None, None),
        &[
            send(5000),
            send(5000),
            read(1500),
            send(5000),
            CLOSE.to_vec(),
            send(9),
            FLUSH.to_vec(),
        ],
        |s| s.closed >= 2 && s.delivered < s.expected,
    );
    // Under Error: messages at and above the cap are large, counted one at
    // a time. The first is sealed at once (the pipe is full after it), the
    // second holds the large slot, the third is refused; one just below the
    // cap still fits, and once the peer reads a large one fits again.
    sq_write(
        "at-and-above-cap-error",
        sq_head(1, false, 1000, false, Some(4), 0, 128, 4096, None, None),
        &[
            AT_CAP.to_vec(),
            above_cap(9),
            above_cap(20),
            BELOW_CAP.to_vec(),
            reads(40),
            above_cap(200),
            EMPTY.to_vec(),
            bundle(&[600, 600]),
        ],
        |s| s.full == 1 && s.accepted == 5 && s.clean_end && s.delivered == s.expected,
    );
    // Under Backpressure the same: the third large message waits until the
    // second is sealed.
    sq_write(
        "at-and-above-cap-backpressure",
        sq_head(0, false, 1000, false, Some(4), 0, 128, 4096, None, None),
        &[
            AT_CAP.to_vec(),
            above_cap(9),
            above_cap(20),
            BELOW_CAP.to_vec(),
            read(300),
            reads(40),
        ],
        |s| s.waited == 1 && s.accepted == 4 && s.clean_end && s.delivered == s.expected,
    );
    // Every handle dropped while sends wait: they finish as the peer reads,
    // then the queue drains and ends the stream.
    sq_write(
        "drop-handles-while-waiting",
        sq_head(0, true, 3000, false, Some(2), 0, 300, 4096, None, None),
        &[k1(), k1(), k1(), k1(), k1(), k1(), FLUSH.to_vec()],
        |s| s.waited >= 2 && s.clean_end && s.delivered == s.expected,
    );
    // A waiting send is cancelled: it never reaches the peer.
    sq_write(
        "cancel-waiting-send",
        sq_head(0, false, 2500, false, Some(2), 0, 200, 4096, None, None),
        &[
            k1(),
            k1(),
            k1(),
            k1(),
            k1(),
            cancel(0),
            cancel(1),
            reads(30),
            k1(),
            reads(30),
        ],
        |s| s.cancelled == 2 && s.accepted == 4 && s.clean_end && s.delivered == s.expected,
    );
    // A one-byte cap: every message is large and waits for the previous;
    // empty messages and an empty bundle queue nothing.
    sq_write(
        "cap-one-empties",
        sq_head(0, false, 1, false, Some(1), 0, 50, 64, None, None),
        &[
            EMPTY.to_vec(),
            send(20),
            bundle(&[0, 0]),
            send(30),
            send(40),
            reads(20),
            EMPTY.to_vec(),
        ],
        |s| s.waited >= 1 && s.accepted == 3 && s.clean_end && s.delivered == s.expected,
    );
}

/// `codec_decoder` input (see `p2p_conn_fuzz_checks::codec_decoder`): the
/// backend, the messages the peer seals, then steps.
mod cd {
    use p2p_conn::proto::wire::STANDARD_SEALED_FRAME;
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

fn codec_decoder_seeds() {
    use cd::*;
    use p2p_conn::proto::wire::STANDARD_SEALED_FRAME as FRAME;
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
        write("codec_decoder", name, &bytes);
    }
}

/// `mconn_packets`: chunk size, then the peer's plaintext (packets made by
/// the library's own encoder, and hostile ones by hand).
fn mconn_packets_seeds() {
    use p2p_conn_mconn::pex::{NetAddress, PexMessage};
    use p2p_conn_mconn::{
        encode_packet, ChannelDescriptor, MConnConfig, MConnCore, Packet, PacketMsg,
    };
    use std::time::Instant;

    let now = Instant::now();
    let chans = [
        ChannelDescriptor::new(0x00),
        ChannelDescriptor::new(0x20),
        ChannelDescriptor::new(0xc0),
    ];
    let mut tx = MConnCore::new(MConnConfig::default(), &chans, now).unwrap();
    let addrs = (0..40)
        .map(|i| NetAddress {
            id: format!("{i:040x}"),
            ip: format!("10.0.0.{i}"),
            port: 26656,
        })
        .collect();
    tx.send(0x00, PexMessage::Request.encode()).unwrap();
    tx.send(0x20, (0..2500u32).map(|i| i as u8).collect())
        .unwrap();
    tx.send(0xc0, vec![0xab; 3000]).unwrap();
    tx.send(0x00, PexMessage::Addrs(addrs).encode()).unwrap();
    tx.send(0x20, Vec::new()).unwrap();
    let mut stream = Vec::new();
    while tx.poll_transmit(now, &mut stream, 4096) > 0 {}
    write("mconn_packets", "channels-chunk13", &cat(&[&[13], &stream]));
    write("mconn_packets", "channels-whole", &cat(&[&[0], &stream]));

    let msg = |channel_id: i32, eof: bool, data: Vec<u8>| {
        let mut out = Vec::new();
        encode_packet(
            &Packet::Msg(PacketMsg {
                channel_id,
                eof,
                data,
            }),
            &mut out,
        );
        out
    };
    let mut ping_pong = Vec::new();
    encode_packet(&Packet::Ping, &mut ping_pong);
    encode_packet(&Packet::Pong, &mut ping_pong);
    encode_packet(&Packet::Ping, &mut ping_pong);
    write("mconn_packets", "ping-pong-ping", &cat(&[&[1], &ping_pong]));
    // eof never set on 0x20 (cap 3000 in the check).
    let piece = msg(0x20, false, vec![0x55; 1024]);
    write(
        "mconn_packets",
        "never-ends",
        &cat(&[&[200], &piece, &piece, &piece, &piece]),
    );
    write(
        "mconn_packets",
        "unknown-channel",
        &cat(&[&[3], &msg(0x21, true, b"hi".to_vec())]),
    );
    write(
        "mconn_packets",
        "negative-channel",
        &cat(&[&[3], &msg(-1, true, b"hi".to_vec())]),
    );
    write("mconn_packets", "oversized-prefix", &[1, 0x8b, 0x08]);
    write(
        "mconn_packets",
        "garbage-protobuf",
        &[2, 0x03, 0x1a, 0x05, 0x08],
    );
    write(
        "mconn_packets",
        "empty-packet",
        &[2, 0x00, 0x02, 0x0a, 0x00],
    );
}
