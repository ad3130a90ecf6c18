//! Instruction counts of the send path, for `valgrind --tool=callgrind`.
//!
//! `ir_per_byte bare|writer|none [MIB] [MSG_SIZE] [FRAME_SIZE]`:
//! * `bare`: the minimum: ChaCha20-Poly1305 seal of every frame's plaintext in
//!   place in a preallocated buffer (no framing, no copies);
//! * `writer`: p2p-conn's whole user-space send path, `FrameWriter::
//!   poll_write_with` over a transport that accepts every byte (copy into the
//!   buffer, padding, seal, tag, buffer management);
//! * `none`: setup only, to subtract.
//!
//! `p2p-conn-lab/scripts/ir-per-byte.sh` runs all three under callgrind and prints Ir/byte.

use std::task::Poll;

use p2p_conn::proto::FrameSize;
use p2p_conn::testkit::internals::wire::sealed_frame_len;
use p2p_conn::testkit::internals::{seal_at, FrameWriter, WriteCore};
use p2p_conn::Backend;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("writer");
    let mib: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(16);
    let msg_size: usize = args
        .get(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(64 * 1024);
    let frame: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(1024);
    let total = mib << 20;
    let messages = total / msg_size;
    let msg = vec![0x42u8; msg_size];
    let key = [7u8; 32];
    let mut checksum = 0u64;
    match mode {
        "bare" => {
            let cipher = p2p_conn::testkit::internals::cipher(Backend::Ring, &key);
            let frames_per_msg = msg_size.div_ceil(frame);
            let mut buf = vec![0u8; frames_per_msg * sealed_frame_len(frame)];
            let mut counter = 0u64;
            for _ in 0..messages {
                for f in buf.chunks_mut(sealed_frame_len(frame)) {
                    let (plain, tag) = f.split_at_mut(4 + frame);
                    tag.copy_from_slice(&seal_at(&cipher, counter, plain));
                    counter += 1;
                }
                checksum = checksum.wrapping_add(u64::from(buf[buf.len() - 1]));
            }
        }
        "writer" => {
            let sealer = p2p_conn::testkit::internals::sealer(
                p2p_conn::testkit::internals::cipher(Backend::Ring, &key),
                FrameSize::new(frame).unwrap(),
            );
            let mut w = FrameWriter::new(WriteCore::new(sealer, p2p_conn::DEFAULT_FLUSH_SIZE));
            for _ in 0..messages {
                let mut off = 0;
                while off < msg.len() {
                    let r = w.poll_write_with(&msg[off..], |b| {
                        checksum = checksum.wrapping_add(u64::from(b[b.len() - 1]));
                        Poll::Ready(Ok(b.len()))
                    });
                    match r {
                        Poll::Ready(Ok(n)) => off += n,
                        other => panic!("unexpected {other:?}"),
                    }
                }
            }
        }
        "none" => {}
        other => panic!("unknown mode {other}"),
    }
    println!("{mode}: {messages} messages of {msg_size} bytes, frame {frame}, checksum {checksum}");
}
