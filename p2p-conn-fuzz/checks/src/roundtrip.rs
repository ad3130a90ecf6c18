//! `roundtrip`: messages through a `FrameWriter` and back through a
//! `FrameReader`.

use crate::Seeds;
use std::io::IoSlice;
use std::task::Poll;

use crate::drive::{read_all, Chunks, KEY, MAX_STEPS};
use crate::input::Input;
use crate::internals::{FrameWriter, ReadCore, WriteCore};
use p2p_conn::proto::FrameSize;
use p2p_conn::testkit;
use p2p_conn::testkit::internals::wire::sealed_frame_len;

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
pub fn check(data: &[u8]) {
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
        p2p_conn::testkit::internals::sealer(
            p2p_conn::testkit::internals::cipher(wb, &KEY),
            frame_size,
        ),
        flush,
    ));
    let max_chunk = writer.core().max_chunk();
    let sealed = sealed_frame_len(fs);
    let mut wire = Vec::new();
    let mut write = |buf: &[u8]| match writes.call(buf.len(), buf.len()) {
        Err(result) => result,
        Ok(n) => {
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
        p2p_conn::testkit::internals::opener(
            p2p_conn::testkit::internals::cipher(rb, &KEY),
            frame_size,
        ),
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

/// The seeds this check owns, written to `seeds/roundtrip/` by `gen_seeds`:
/// standard and odd frame sizes, chunked transports with faults, a tiny flush
/// size and an empty message.
pub fn seeds() -> Seeds {
    let mut s = Seeds::default();
    // Layout: cfg (bit 0: 1024-byte frames, bit 1: leftover plaintext),
    // [fs u16], write backend, read backend, flush u16, rbuf u16, write
    // chunks, read chunks, out_max u16, [initial len], count, messages
    // (kind, len, how u16).
    s.add(
        "std-frames-three-messages",
        &[
            1, 0, 0, 0, 0x10, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0x10, 3, 2, 0x10, 0x27, 0, 0, 0, 200,
            1, 0, 1, 5, 2, 0,
        ],
    );
    s.add(
        "odd-frames-chunked-faults",
        &[
            2, 0x3e, 0x01, 1, 2, 0x40, 0, 0x80, 0, 3, 7, 0, 5, 3, 0, 9, 0, 50, 4, 2, 0x70, 0x17,
            0xff, 0x01, 1, 3, 0x22, 0x00, 3, 0, 0x10, 2, 0x40, 0x9c, 2, 0,
        ],
    );
    s.add(
        "tiny-flush-empty-message",
        &[
            1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2, 0x88, 0x13, 1, 0,
        ],
    );
    s
}
