//! One call's contract: `Ok(n)` belongs to the current call, `send_vectored`
//! leaves `bufs` at the unsent remainder, and the smallest frame sizes
//! handshake.

use super::*;

// ---------------------------------------------------------------------------
// Ok(n) belongs to the current call

/// After a short write leaves sealed bytes of message 1 buffered, a write of
/// message 2 is `WouldBlock` / `Pending` until every one of them is on the
/// wire, and then accepts only bytes of message 2.
fn current_call_only<C: Conn>() {
    let cfg = Config::default();
    let (mut a, ca, mut b, _cb) = pair::<C, StdConn>(&cfg, &cfg, 500);
    let m1 = payload(3000, 1);
    let m2 = payload(10, 2);
    let old = sealed_len(3000, 1024) as u64;
    assert_eq!(a.try_write(&m1).expect("write of message 1"), 3000);
    assert_eq!(ca.bytes().0, 500, "the transport took what fit");
    for _ in 0..3 {
        let e = a
            .try_write(&m2)
            .expect_err("transport full: nothing new may be accepted");
        assert!(is_would_block(&e), "{}: {e}", C::NAME);
        assert_eq!(ca.bytes().0, 500);
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 300];
    let n2 = loop {
        match b.try_read(&mut buf) {
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => assert!(is_would_block(&e), "{e}"),
        }
        let r = a.try_write(&m2);
        let written = ca.bytes().0;
        match r {
            Ok(n) => {
                assert!(
                    (1..=10).contains(&n),
                    "{}: Ok({n}) for a 10-byte write",
                    C::NAME
                );
                assert!(
                    written >= old,
                    "{}: Ok({n}) with message 1's sealed bytes still pending ({written} of {old})",
                    C::NAME
                );
                break n;
            }
            Err(e) => {
                assert!(is_would_block(&e), "{}: {e}", C::NAME);
                assert!(
                    written <= old,
                    "{}: message 2 sealed while waiting",
                    C::NAME
                );
            }
        }
    };
    loop {
        match a.try_shutdown() {
            Ok(()) => break,
            Err(e) => assert!(is_would_block(&e), "{e}"),
        }
        if let Ok(n) = b.try_read(&mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
    }
    loop {
        match b.try_read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("after shutdown: {e}"),
        }
    }
    let mut expected = m1.clone();
    expected.extend_from_slice(&m2[..n2]);
    check_bytes("receiver", &got, &expected);
}

#[test]
fn tokio_write_accepts_only_the_current_call() {
    current_call_only::<TokioConn>();
}

#[test]
fn std_write_accepts_only_the_current_call() {
    current_call_only::<StdConn>();
}

// ---------------------------------------------------------------------------
// send_vectored: bufs end at exactly the unsent remainder

/// `send_vectored` over a transport that takes 100 bytes, then blocks: the
/// call (std: returns `WouldBlock`; tokio: its future is dropped while
/// pending) must leave `bufs` holding exactly what it did not accept, so that
/// resuming with the same `bufs` (as the docs promise) sends every byte once.
fn send_vectored_resumes<C: Conn>(cuts: &[usize], total: usize) {
    let cfg = Config::default();
    let (mut a, ca, mut b, _cb) = pair::<C, StdConn>(&cfg, &cfg, 100);
    let msg = payload(total, 5);
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(total);
    let mut slices: Vec<IoSlice<'_>> = bounds
        .windows(2)
        .map(|w| IoSlice::new(&msg[w[0]..w[1]]))
        .collect();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let mut first_remaining = None;
    let mut rounds = 0;
    // Resume until done, or until the receiver has more than the message
    // (a duplicate is on its way; the assertion below reports it).
    while got.len() <= total {
        match a.try_send_vectored(&mut slices) {
            Ok(()) => break,
            Err(Error::Io(e)) if is_would_block(&e) => {}
            Err(e) => panic!("{}: send_vectored: {e}", C::NAME),
        }
        let remaining: usize = slices.iter().map(|s| s.len()).sum();
        first_remaining.get_or_insert(remaining);
        while let Ok(n) = b.try_read(&mut buf) {
            assert!(n > 0, "end of stream before close");
            got.extend_from_slice(&buf[..n]);
        }
        rounds += 1;
        assert!(rounds < 1_000_000, "no progress");
    }
    ca.close_write();
    // (After a duplicate the stream may end inside a frame: stop there.)
    while let Ok(n @ 1..) = b.try_read(&mut buf) {
        got.extend_from_slice(&buf[..n]);
    }
    let accepted_first = total.min(max_chunk(cfg.flush_size, 1024));
    assert!(
        got == msg && first_remaining == Some(total - accepted_first),
        "{}: send_vectored of {total} bytes in slices cut at {cuts:?}: after the first call \
         stopped (it had accepted {accepted_first} bytes), bufs held {first_remaining:?} bytes; \
         resuming with them delivered {} bytes (expected exactly the {total}-byte message once)",
        C::NAME,
        got.len(),
    );
}

#[test]
fn tokio_send_vectored_one_slice_resumes_exactly() {
    send_vectored_resumes::<TokioConn>(&[], 3000);
}

#[test]
fn std_send_vectored_one_slice_resumes_exactly() {
    send_vectored_resumes::<StdConn>(&[], 3000);
}

#[test]
fn tokio_send_vectored_three_slices_resume_exactly() {
    send_vectored_resumes::<TokioConn>(&[50_000, 100_000], 300_000);
}

#[test]
fn std_send_vectored_three_slices_resume_exactly() {
    send_vectored_resumes::<StdConn>(&[50_000, 100_000], 300_000);
}

// ---------------------------------------------------------------------------
// Frame sizes at the bottom of the accepted range

/// `Config` accepts any frame size from 64 bytes (`validate` passes) and the
/// guide promises any such value works between two p2p-conn peers with the
/// same setting. Frame #0 carries the 103-byte AuthSigMessage, so a frame
/// size below that must still hand it over (the reader accepts it split
/// across frames).
#[test]
fn smallest_valid_frame_sizes_handshake() {
    let mut failures = Vec::new();
    for frame_size in [64, 100, 102, 103, 128] {
        let cfg = Config::default().frame_size(frame_size);
        cfg.validate().expect("a frame size the config accepts");
        let (a, _, b, _) = connect(
            usize::MAX,
            |e| StdConn::handshake(e, &Identity::generate(), &cfg),
            |e| StdConn::handshake(e, &Identity::generate(), &cfg),
        );
        if let (Err(e), _) | (_, Err(e)) = (&a, &b) {
            failures.push(format!("frame_size {frame_size}: {e}"));
        }
    }
    assert!(failures.is_empty(), "handshakes failed: {failures:#?}");
}
