//! Drivers and fixtures more than one check uses: the fixed frame key, the
//! fuzz-chosen transport chunking ([`Chunks`], a testkit fault-plan preset), reading a whole sealed stream
//! through a `FrameReader` ([`read_all`]) and the deterministic handshake
//! pair ([`handshake_pair`]).

use std::io;
use std::task::Poll;

use crate::input::Input;
use crate::internals::{FrameReader, ReadCore};
use p2p_conn::proto::{FrameSize, HandshakeParams};
use p2p_conn::testkit::{self, Fault, Faults, HandshakeRun, Plan, Rng};
use p2p_conn::Backend;

/// The fixed frame key of the `frames` (hostile mode) and `roundtrip` targets.
pub const KEY: [u8; 32] = [0x42; 32];

/// Most loop turns any driver takes before it calls the run a hang.
pub(crate) const MAX_STEPS: usize = 2_000_000;

/// Fuzz-chosen chunking of a transport: the testkit's [`Plan::chunks`]
/// preset (random pieces of 1..=`max` bytes, optional `Pending` and
/// `Interrupted` calls), seeded from the input, for drivers that hand the
/// engine closures instead of a transport.
pub(crate) struct Chunks {
    faults: Faults,
    rng: Rng,
}

impl Chunks {
    /// Three bytes: fault flag + seed, and the largest piece (0: no limit).
    pub(crate) fn decode(inp: &mut Input<'_>) -> Self {
        let seed = inp.u8();
        let max = usize::from(inp.u16());
        Chunks {
            faults: Faults::new(Plan::chunks(max, seed & 1 == 1)),
            rng: Rng::new(u64::from(seed >> 1)),
        }
    }

    /// What one transport call does, given the caller's buffer of `offered`
    /// bytes and the `possible` bytes the transport could move: `Ok(n)`
    /// moves `n` bytes (0 only when none can), `Err(result)` is the call's
    /// result instead.
    pub(crate) fn call(
        &mut self,
        offered: usize,
        possible: usize,
    ) -> Result<usize, Poll<io::Result<usize>>> {
        let possible = possible.min(offered);
        let n = match self.faults.draw(&mut self.rng, offered.max(1), possible) {
            Fault::Pass => possible,
            Fault::Short(n) => n.min(possible),
            Fault::Pending => return Err(Poll::Pending),
            Fault::Interrupted => return Err(Poll::Ready(Err(io::ErrorKind::Interrupted.into()))),
            Fault::Fail(kind) => return Err(Poll::Ready(Err(kind.into()))),
        };
        self.faults.moved(n);
        Ok(n)
    }
}

/// Read the whole of `wire` through a [`FrameReader`] over `core`, the
/// transport chunked by `reads`, into an `out_max`-byte buffer per call.
/// Returns the plaintext and how the stream ended.
pub(crate) fn read_all(
    core: ReadCore,
    wire: &[u8],
    reads: &mut Chunks,
    out_max: usize,
) -> (Vec<u8>, io::Result<()>) {
    let mut reader = FrameReader::new(core);
    let mut pos = 0;
    let mut out = Vec::new();
    let mut buf = vec![0u8; out_max.max(1)];
    let mut read = |dst: &mut [u8]| match reads.call(dst.len(), wire.len() - pos) {
        Err(result) => result,
        Ok(n) => {
            dst[..n].copy_from_slice(&wire[pos..pos + n]);
            pos += n;
            Poll::Ready(Ok(n))
        }
    };
    for _ in 0..MAX_STEPS {
        match reader.poll_read_with(&mut buf, &mut read) {
            Poll::Ready(Ok(0)) => return (out, Ok(())),
            Poll::Ready(Ok(n)) => {
                assert!(n <= buf.len(), "read returned more than the buffer");
                out.extend_from_slice(&buf[..n]);
            }
            Poll::Ready(Err(e)) => {
                // Errors are sticky: the stream cannot resynchronise.
                let again = reader.poll_read_with(&mut buf, |_: &mut [u8]| Poll::Ready(Ok(0)));
                assert!(
                    matches!(again, Poll::Ready(Err(_))),
                    "a read after the error {e} returned {again:?}"
                );
                return (out, Err(e));
            }
            Poll::Pending => {}
        }
    }
    panic!("FrameReader made no progress in {MAX_STEPS} calls");
}

/// The deterministic handshake pair (seeds 1 and 2) of the `frames` target.
pub fn handshake_pair(small: bool, backend: Backend) -> HandshakeRun {
    let params = HandshakeParams {
        frame_size: if small {
            FrameSize::new(64).expect("64-byte frames are valid")
        } else {
            FrameSize::STANDARD
        },
        backend,
    };
    testkit::run_handshakes(
        testkit::deterministic_handshake(1, params).1,
        testkit::deterministic_handshake(2, params).1,
        usize::MAX,
    )
    .expect("the deterministic handshake pair completes")
}
