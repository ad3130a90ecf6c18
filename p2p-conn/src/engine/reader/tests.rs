use super::*;
use crate::proto::aead::Cipher;
use crate::proto::{Backend, FrameSize, Sealer};
use crate::Error;

fn pair() -> (Sealer, ReadCore) {
    let key = [5u8; 32];
    let fs = FrameSize::new(64).unwrap();
    let b = Backend::default();
    (
        Sealer::new(Cipher::new(b, &key), fs),
        ReadCore::new(Opener::new(Cipher::new(b, &key), fs), b"hi".to_vec(), 1),
    )
}

#[test]
fn open_batch_opens_whole_frames_and_next_opened_skips_empty_ones() {
    let (mut s, mut core) = pair();
    let mut wire = Vec::new();
    s.seal_frame(b"", &mut wire).unwrap();
    s.seal_frame(b"", &mut wire).unwrap();
    s.seal_frame(b"abc", &mut wire).unwrap();
    s.seal_frame(b"", &mut wire).unwrap();
    let f = 84;
    wire.truncate(3 * f + 10);
    let b = core.open_batch(&mut wire, false);
    assert_eq!((b.consumed, b.bytes, b.error), (3 * f, 3, None));
    let mut at = 0;
    let data = next_opened(&wire[..b.consumed], 64, &mut at).unwrap();
    assert_eq!(&wire[data], b"abc");
    assert_eq!(at, 3 * f);
    assert_eq!(next_opened(&wire[..b.consumed], 64, &mut at), None);
    let b = core.open_batch(&mut wire[3 * f..], false);
    assert_eq!((b.consumed, b.bytes, b.error), (0, 0, None));
    assert!(core.end_of_stream(10).is_err());
    assert!(core.end_of_stream(0).is_ok());
    assert_eq!(core.read_buffer_size(), f);
}

#[test]
fn initial_plaintext_is_served_once_and_never_shown_by_debug() {
    let (_, mut core) = pair();
    assert_eq!(core.initial(), b"hi");
    core.consume_initial(1);
    assert_eq!(core.take_initial(), b"i");
    assert!(core.initial().is_empty());
    let (_, core) = pair();
    let shown = format!("{:?}", FrameReader::new(core));
    assert!(shown.contains("2 bytes"), "{shown}");
    assert!(
        !shown.contains("104") && !shown.contains("\"hi\""),
        "{shown}"
    );
}

/// Every backend's `ReadCore` delivers the same data from a stream cut
/// at arbitrary points, then reports a corrupted frame at its place.
#[test]
fn open_batch_over_groups_and_cuts() {
    let key = [9u8; 32];
    let data: Vec<u8> = (0..70 * 1024 + 300).map(|i| (i % 253) as u8).collect();
    let mut wire = Vec::new();
    let mut s = Sealer::new(Cipher::new(Backend::default(), &key), FrameSize::STANDARD);
    for msg in data.chunks(7 * 1024 + 11) {
        s.seal_append(msg, &mut wire).unwrap();
    }
    let sealed_len = crate::proto::wire::STANDARD_SEALED_FRAME;
    let frames = wire.len() / sealed_len;
    let bad_frame = 50;
    // Data bytes carried by the frames before the bad one.
    let mut o = Opener::new(Cipher::new(Backend::RustCrypto, &key), FrameSize::STANDARD);
    let before_bad: usize = wire[..bad_frame * sealed_len]
        .to_vec()
        .chunks_mut(sealed_len)
        .map(|f| o.open_in_place(f).unwrap().len())
        .sum();
    let mut corrupted = wire.clone();
    corrupted[bad_frame * sealed_len + 7] ^= 4;
    for &b in Backend::ALL {
        for cut in [1000usize, 1044, 16 * 1044, 20_000, 65_536] {
            for (input, fail) in [(&wire, None), (&corrupted, Some(bad_frame))] {
                let mut core = ReadCore::new(
                    Opener::new(Cipher::new(b, &key), FrameSize::STANDARD),
                    vec![],
                    1,
                );
                // A buffer like FrameReader's: unconsumed bytes stay at
                // its front, each "read" appends up to `cut` bytes.
                let mut buf: Vec<u8> = Vec::new();
                let mut fed = 0;
                let mut got = Vec::new();
                let mut err = None;
                while err.is_none() {
                    let b = core.open_batch(&mut buf, false);
                    let mut at = 0;
                    while let Some(d) = next_opened(&buf[..b.consumed], 1024, &mut at) {
                        got.extend_from_slice(&buf[d]);
                    }
                    buf.drain(..b.consumed);
                    if b.error.is_some() {
                        err = b.error;
                    } else if b.consumed == 0 && fed < input.len() {
                        let n = cut.min(input.len() - fed);
                        buf.extend_from_slice(&input[fed..fed + n]);
                        fed += n;
                    } else if b.consumed == 0 {
                        break;
                    }
                }
                match fail {
                    None => {
                        assert!(got == data, "{b}, cut {cut}: data differs");
                        assert!(buf.is_empty());
                    }
                    Some(k) => {
                        assert!(got == data[..before_bad], "{b}, cut {cut}: data differs");
                        assert_eq!(
                            err,
                            Some(ProtocolError::FrameAuthentication { counter: k as u64 })
                        );
                        assert_eq!(core.open_batch(&mut [], false).error, err, "sticky");
                    }
                }
                assert!(frames > 64);
            }
        }
    }
}

/// A non-blocking reader whose read filled its buffer holds back a
/// partial group for one more read, and when that read finds nothing
/// (`Pending`) it opens those frames at once: data already here is
/// never kept waiting for bytes that may not come.
#[test]
fn held_back_frames_are_delivered_when_nothing_more_comes() {
    let key = [4u8; 32];
    let b = Backend::default();
    let sealed_len = crate::proto::wire::STANDARD_SEALED_FRAME;
    // The first read is one frame (the buffer starts small), the second
    // fills the 34-frame read buffer: 35 frames = 2 groups + 3.
    let read_buffer = 2 * (GROUP_FRAMES + 1) * sealed_len;
    let frames = 1 + 2 * (GROUP_FRAMES + 1);
    let data: Vec<u8> = (0..frames * 1024).map(|i| (i % 239) as u8).collect();
    let mut wire = Vec::new();
    Sealer::new(Cipher::new(b, &key), FrameSize::STANDARD)
        .seal_append(&data, &mut wire)
        .unwrap();
    assert_eq!(wire.len(), frames * sealed_len);
    let core = || {
        ReadCore::new(
            Opener::new(Cipher::new(b, &key), FrameSize::STANDARD),
            vec![],
            read_buffer,
        )
    };
    for nonblocking in [false, true] {
        let mut r = FrameReader::new(core());
        r.set_nonblocking(nonblocking);
        let mut fed = 0;
        let mut pendings = 0;
        let mut got = Vec::new();
        while got.len() < data.len() {
            let poll = r.poll_fill_with(|buf: &mut [u8]| {
                if fed == wire.len() {
                    pendings += 1;
                    return Poll::Pending;
                }
                let n = buf.len().min(wire.len() - fed);
                buf[..n].copy_from_slice(&wire[fed..fed + n]);
                fed += n;
                Poll::Ready(Ok(n))
            });
            match poll {
                Poll::Ready(Ok(n)) => {
                    got.extend_from_slice(&r.available()[..n]);
                    r.consume(n);
                }
                other => panic!(
                    "nonblocking {nonblocking}: {other:?} after {} bytes",
                    got.len()
                ),
            }
        }
        assert!(got == data);
        // The blocking reader never reads ahead; the non-blocking one
        // tries once (and only) when the engine would group frames.
        let expect = usize::from(nonblocking && b.accelerated());
        assert_eq!(pendings, expect, "nonblocking {nonblocking}");
    }
}

/// The first hard error poisons the reader: a reset followed by what a
/// reset socket reads next (end of stream) fails again with the reset,
/// without touching the transport; a bad frame fails again as itself;
/// `WouldBlock` and `TimedOut` do not poison.
#[test]
fn first_hard_error_is_returned_by_every_later_call() {
    let (mut s, core) = pair();
    let mut r = FrameReader::new(core);
    let mut wire = Vec::new();
    s.seal_frame(b"ok", &mut wire).unwrap();
    let mut calls = 0;
    let mut fill = |r: &mut FrameReader, result: fn() -> io::Result<usize>| {
        r.poll_fill_with(|_buf: &mut [u8]| {
            calls += 1;
            Poll::Ready(result())
        })
    };
    // The initial plaintext first, untouched by any error.
    assert!(matches!(fill(&mut r, || Ok(0)), Poll::Ready(Ok(2))));
    r.consume(2);
    for transient in [io::ErrorKind::WouldBlock, io::ErrorKind::TimedOut] {
        let e = match r.poll_fill_with(|_: &mut [u8]| Poll::Ready(Err(transient.into()))) {
            Poll::Ready(Err(e)) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!(e.kind(), transient);
    }
    let reset = || Err(io::ErrorKind::ConnectionReset.into());
    for _ in 0..3 {
        match fill(&mut r, reset) {
            Poll::Ready(Err(e)) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset),
            other => panic!("{other:?}"),
        }
        // What a reset socket reads next: never consulted.
        match fill(&mut r, || Ok(0)) {
            Poll::Ready(Err(e)) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset),
            other => panic!("after a reset: {other:?}"),
        }
    }
    assert_eq!(calls, 1, "the transport was read after the reset");

    // A tampered frame: the same typed error every time.
    let (mut s, core) = pair();
    let mut r = FrameReader::new(core);
    r.consume(2);
    let mut wire = Vec::new();
    s.seal_frame(b"abc", &mut wire).unwrap();
    wire[5] ^= 1;
    let mut fed = false;
    for _ in 0..3 {
        let e = match r.poll_fill_with(|buf: &mut [u8]| {
            if fed {
                return Poll::Ready(Ok(0));
            }
            fed = true;
            buf[..wire.len()].copy_from_slice(&wire);
            Poll::Ready(Ok(wire.len()))
        }) {
            Poll::Ready(Err(e)) => e,
            other => panic!("{other:?}"),
        };
        assert!(matches!(
            Error::from_io(e),
            Error::Protocol(ProtocolError::FrameAuthentication { counter: 0 })
        ));
    }
}
