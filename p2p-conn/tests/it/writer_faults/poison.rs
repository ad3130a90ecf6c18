//! Poisoning: a hard transport error or a zero-byte write poisons the
//! writer, and the wire holds only whole frames under distinct counters.

use super::*;

// ---------------------------------------------------------------------------
// Poisoning

/// The receiving peer: the library's own handshake state machine with a
/// known ephemeral secret (so the test can derive the frame keys itself) and
/// the engine's `FrameReader`, the read path both adapters use.
struct Peer {
    end: End,
    reader: FrameReader,
}

impl Peer {
    fn handshake(mut end: End, secret: [u8; 32], config: &Config) -> Peer {
        let params = HandshakeParams {
            frame_size: FrameSize::new(config.frame_size).expect("valid frame size"),
            backend: config.backend,
        };
        let mut hs = handshake_with_ephemeral(&Identity::generate(), params, secret);
        match poll_handshake(&mut hs, &mut StdIo(&mut end)) {
            Poll::Ready(r) => r.expect("peer handshake"),
            Poll::Pending => unreachable!("the pipe blocks during the handshake"),
        }
        let est = hs.into_established().expect("peer handshake");
        Peer {
            end,
            reader: FrameReader::new(ReadCore::new(
                est.opener,
                est.initial_plaintext,
                config.read_buffer_size,
            )),
        }
    }

    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let end = &mut self.end;
        match self
            .reader
            .poll_read_with(buf, |b| ready(Read::read(end, b)))
        {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

/// Open every whole frame of `wire` (everything one side wrote, handshake
/// included) with keys derived here from the peer's ephemeral secret, with a
/// fresh `Opener` (counters 0, 1, 2, ... in order). Returns the data of the
/// frames after frame #0 (the AuthSigMessage). A frame the opener refuses
/// fails the test, naming the counter that does open it if any (a reused
/// nonce shows up as an earlier frame's counter).
fn open_wire(wire: &[u8], peer_secret: [u8; 32], frame: usize) -> Vec<u8> {
    assert_eq!(&wire[..3], &[0x22, 0x0a, 0x20], "ephemeral key message");
    let eph: [u8; 32] = wire[3..35].try_into().unwrap();
    let keys = p2p_conn::testkit::PeerKeys::derive(peer_secret, &eph);
    let mut opener = p2p_conn::testkit::internals::opener(
        p2p_conn::testkit::internals::cipher(Backend::default(), &keys.recv),
        FrameSize::new(frame).unwrap(),
    );
    let sealed = frame + 20;
    let frames = (wire.len() - 35) / sealed;
    let mut data = Vec::new();
    for (i, f) in wire[35..].chunks_exact(sealed).enumerate() {
        let mut b = f.to_vec();
        match opener.open_in_place(&mut b) {
            Ok(r) if i > 0 => data.extend_from_slice(&b[r]),
            Ok(_) => {}
            Err(e) => {
                let cipher = p2p_conn::testkit::internals::cipher(Backend::default(), &keys.recv);
                let opens_with = (0..frames as u64 + 2).find(|&c| {
                    let mut b = f.to_vec();
                    open_at(&cipher, c, &mut b)
                });
                panic!(
                    "frame {i} of {frames} on the wire does not open with counter {i} ({e}); \
                     counter that opens it: {opens_with:?}"
                );
            }
        }
    }
    data
}

#[derive(Clone, Debug)]
struct PoisonCase {
    seed: u64,
    flush_size: usize,
    read_buffer: usize,
    capacity: usize,
    rates: Rates,
    messages: Vec<usize>,
    /// Where the transport fails, as a fraction of all sealed bytes.
    fail_at: prop::sample::Index,
    /// Round the failure point down to a frame boundary.
    at_boundary: bool,
    /// The transport fails with a zero-byte write instead of `ConnectionReset`.
    zero_write: bool,
    vectored: bool,
}

fn poison_case() -> impl Strategy<Value = PoisonCase> {
    (
        any::<u64>(),
        prop::sample::select(vec![1usize, 5000, 16 * 1024, 128 * 1024]),
        prop::sample::select(vec![1usize, 3000, 64 * 1024]),
        prop_oneof![1usize..=5000, 1usize..=300_000],
        rates(),
        prop::collection::vec(prop_oneof![1usize..=3000, 1usize..=200_000], 1..5),
        any::<prop::sample::Index>(),
        prop::bool::weighted(0.25),
        prop::bool::weighted(0.25),
        any::<bool>(),
    )
        .prop_map(
            |(
                seed,
                flush_size,
                read_buffer,
                capacity,
                rates,
                messages,
                fail_at,
                at_boundary,
                zero_write,
                vectored,
            )| {
                PoisonCase {
                    seed,
                    flush_size,
                    read_buffer,
                    capacity,
                    rates,
                    messages,
                    fail_at,
                    at_boundary,
                    zero_write,
                    vectored,
                }
            },
        )
}

fn expect_poisoned(what: &str, r: Result<(), Error>) {
    match r {
        Err(Error::Poisoned) => {}
        other => panic!("{what} after the failed write: expected Error::Poisoned, got {other:?}"),
    }
}

fn io_poisoned<T: std::fmt::Debug>(r: io::Result<T>) -> Result<(), Error> {
    match r {
        Ok(v) => panic!("succeeded with {v:?}"),
        Err(e) => Err(Error::from_io(e)),
    }
}

fn run_poison<C: Conn>(case: &PoisonCase) {
    const SEALED: u64 = 1044;
    let cfg = Config::default()
        .flush_size(case.flush_size)
        .read_buffer_size(case.read_buffer);
    let mut secret = [0x33u8; 32];
    secret[..8].copy_from_slice(&case.seed.to_le_bytes());
    let (a, ca, peer, _cb) = connect(
        usize::MAX,
        |e| C::handshake(e, &Identity::generate(), &cfg).expect("handshake"),
        |e| Peer::handshake(e, secret, &cfg),
    );
    let (mut a, mut peer) = (a, peer);
    let msgs: Vec<Vec<u8>> = case
        .messages
        .iter()
        .enumerate()
        .map(|(i, &len)| payload(len, case.seed.wrapping_add(i as u64)))
        .collect();
    let total: u64 = msgs.iter().map(|m| sealed_len(m.len(), 1024) as u64).sum();
    let mut fail_at = case.fail_at.index(total as usize) as u64;
    if case.at_boundary {
        fail_at -= fail_at % SEALED;
    }
    ca.set_capacity(case.capacity);
    ca.seed(case.seed);
    let kind = if case.zero_write {
        io::ErrorKind::WriteZero
    } else {
        io::ErrorKind::ConnectionReset
    };
    ca.set_write_plan(Plan::random(case.rates).fail_after_bytes(fail_at, kind));

    let mut accepted = Vec::new();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 70_000];
    let (mut i, mut off) = (0, 0);
    let mut idle = 0;
    let (err, offered) = loop {
        let before = (ca.bytes(), i, off, got.len());
        if i < msgs.len() {
            let rest = &msgs[i][off..];
            let r = if case.vectored {
                let h = rest.len() / 2;
                a.try_write_vectored(&[IoSlice::new(&rest[..h]), IoSlice::new(&rest[h..])])
            } else {
                a.try_write(rest)
            };
            match r {
                Ok(n) => {
                    assert!(
                        n > 0 && n <= rest.len(),
                        "write of {} returned {n}",
                        rest.len()
                    );
                    accepted.extend_from_slice(&rest[..n]);
                    off += n;
                    if off == msgs[i].len() {
                        i += 1;
                        off = 0;
                    }
                }
                Err(e) if retry_kind(&e) => {}
                Err(e) => break (e, rest.to_vec()),
            }
        } else {
            match a.try_flush() {
                Ok(()) => panic!(
                    "{}: flush succeeded although the transport fails after {fail_at} of \
                     {total} sealed bytes",
                    C::NAME
                ),
                Err(e) if retry_kind(&e) => {}
                Err(e) => break (e, Vec::new()),
            }
        }
        match peer.try_read(&mut buf) {
            Ok(0) => panic!("peer: end of stream before the failure"),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if is_would_block(&e) => {}
            Err(e) => panic!("peer: {e}"),
        }
        if before == (ca.bytes(), i, off, got.len()) {
            idle += 1;
            assert!(idle < IDLE_LIMIT, "no progress before the failure");
        } else {
            idle = 0;
        }
    };

    // The failing call returns the transport's own error (a zero-byte write
    // is reported as `WriteZero`).
    assert_eq!(err.kind(), kind, "{}: {err}", C::NAME);
    match Error::from_io(err) {
        Error::Io(e) if e.kind() == kind => {}
        other => panic!("{}: failing call maps to {other:?}", C::NAME),
    }
    assert_eq!(ca.bytes().0, fail_at, "bytes the transport accepted");

    // Every later call is Poisoned, and none reaches the transport.
    let calls = ca.counters().write_calls;
    expect_poisoned("write", io_poisoned(a.try_write(b"more")));
    expect_poisoned("empty write", io_poisoned(a.try_write(b"")));
    expect_poisoned(
        "write_vectored",
        io_poisoned(a.try_write_vectored(&[IoSlice::new(b"x"), IoSlice::new(&[7; 5000])])),
    );
    expect_poisoned("flush", io_poisoned(a.try_flush()));
    expect_poisoned("send", a.try_send(b"more"));
    expect_poisoned("empty send", a.try_send(b""));
    expect_poisoned(
        "send_vectored",
        a.try_send_vectored(&mut [IoSlice::new(b"a"), IoSlice::new(b"b")]),
    );
    expect_poisoned("write again", io_poisoned(a.try_write(&[1; 100_000])));
    expect_poisoned("shutdown", io_poisoned(a.try_shutdown()));
    assert_eq!(
        ca.counters().write_calls,
        calls,
        "{}: the poisoned writer called the transport",
        C::NAME
    );

    // The connection dies; the peer reads what reached it.
    ca.close_write();
    let end = loop {
        match peer.try_read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => break Err(e),
        }
    };
    match &end {
        Ok(()) => assert_eq!(
            fail_at % SEALED,
            0,
            "clean end of stream although the wire ends inside a frame"
        ),
        Err(e) => {
            assert_eq!(
                e.kind(),
                io::ErrorKind::UnexpectedEof,
                "{}: peer's read ended with {e} (fail_at {fail_at})",
                C::NAME
            );
            assert_ne!(
                fail_at % SEALED,
                0,
                "end of stream inside a frame at a boundary"
            );
        }
    }

    // The wire: handshake, then exactly `fail_at` bytes; every whole frame
    // opens with the next counter, and their data is what the peer read.
    let wire = ca.wire();
    assert_eq!(wire.len() as u64, 35 + SEALED + fail_at);
    let on_wire = open_wire(&wire, secret, 1024);
    check_bytes("peer's data vs the frames on the wire", &got, &on_wire);
    accepted.extend_from_slice(&offered);
    assert!(
        accepted.starts_with(&got),
        "{}: the peer's {} bytes are not a prefix of the accepted bytes and the failing call's",
        C::NAME,
        got.len()
    );
}

proptest! {
    #![proptest_config(proptest_config(64))]

    #[test]
    fn tokio_failed_write_poisons(case in poison_case()) {
        run_poison::<TokioConn>(&case);
    }

    #[test]
    fn std_failed_write_poisons(case in poison_case()) {
        run_poison::<StdConn>(&case);
    }
}
