//! What each call of the I/O double does: [`Fault`]s, [`Plan`]s of them,
//! and the [`Counters`] a test reads back.

use std::io;

use super::rng::Rng;

/// What one read or write call of the double does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Move as many bytes as possible.
    Pass,
    /// Move at most this many bytes (at least 1 when any can move).
    Short(usize),
    /// Move nothing: tokio wakes the waker and returns `Pending`, std returns
    /// `WouldBlock`.
    Pending,
    /// Move nothing, return `ErrorKind::Interrupted`.
    Interrupted,
    /// Move nothing, return this error; for a write, `WriteZero` means
    /// return `Ok(0)` (the way a transport reports it).
    Fail(io::ErrorKind),
}

/// Percent chance per call of each random fault (checked in this order:
/// pending, interrupted, short).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rates {
    pub pending: u32,
    pub interrupted: u32,
    pub short: u32,
}

/// The faults of one direction (reads or writes) of one end. Call numbers and
/// byte counts start at zero when the plan is installed.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Faults for the next calls, in order; then random faults by `rates`.
    pub script: Vec<Fault>,
    /// Random faults once the script is used up (seeded by [`Control::seed`](super::Control::seed)).
    pub rates: Rates,
    /// Every call from this 1-based call number on fails with this error.
    pub fail_at_call: Option<(u64, io::ErrorKind)>,
    /// Exactly this many bytes move (a call crossing the limit is cut short);
    /// every call after that fails with this error.
    pub fail_after_bytes: Option<(u64, io::ErrorKind)>,
    /// Each call moves at most a random 1..=`max_piece` bytes of the buffer
    /// it is given (and no more than can move).
    pub max_piece: Option<usize>,
}

impl Plan {
    /// No faults.
    pub fn clean() -> Self {
        Plan::default()
    }
    /// Random faults at these rates.
    pub fn random(rates: Rates) -> Self {
        Plan {
            rates,
            ..Plan::default()
        }
    }
    /// These faults for the next calls, then none.
    pub fn script(faults: &[Fault]) -> Self {
        Plan {
            script: faults.to_vec(),
            ..Plan::default()
        }
    }
    /// `bytes` more bytes, then `kind` on every call.
    pub fn fail_after_bytes(mut self, bytes: u64, kind: io::ErrorKind) -> Self {
        self.fail_after_bytes = Some((bytes, kind));
        self
    }
    /// `kind` from the `call`-th call (1-based) on.
    pub fn fail_at_call(mut self, call: u64, kind: io::ErrorKind) -> Self {
        self.fail_at_call = Some((call, kind));
        self
    }
    /// Move bytes in random pieces of 1..=`max` bytes.
    pub fn max_piece(mut self, max: usize) -> Self {
        self.max_piece = Some(max);
        self
    }

    /// The fuzz targets' chunking: every call moves a random 1..=`max`
    /// bytes (`max == 0`: as many as it can) and, with `faults`, about one
    /// call in sixteen is `Pending` and one in sixteen `Interrupted`.
    pub fn chunks(max: usize, faults: bool) -> Self {
        let rate = if faults { 6 } else { 0 };
        Plan {
            rates: Rates {
                pending: rate,
                interrupted: rate,
                short: 0,
            },
            max_piece: (max > 0).then_some(max),
            ..Plan::default()
        }
    }
}

/// A [`Plan`] being carried out: the next call's number and the bytes moved
/// so far. The I/O double keeps one per direction of each end; a driver
/// that hands the engine a closure instead of a transport keeps its own.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    plan: Plan,
    calls: u64,
    bytes: u64,
}

impl Faults {
    /// Start carrying out `plan`.
    pub fn new(plan: Plan) -> Self {
        Faults {
            plan,
            calls: 0,
            bytes: 0,
        }
    }

    /// What the next call does; `offered` is the caller's buffer length (at
    /// least 1), `possible` how many bytes could move. Random choices come
    /// from `rng`. A `Pass` or `Short(n)` moves at most `possible` bytes;
    /// report what moved with [`Self::moved`].
    pub fn draw(&mut self, rng: &mut Rng, offered: usize, possible: usize) -> Fault {
        self.calls += 1;
        let plan = &mut self.plan;
        if let Some((at, kind)) = plan.fail_at_call {
            if self.calls >= at {
                return Fault::Fail(kind);
            }
        }
        let mut cap = possible;
        if let Some(max) = plan.max_piece {
            cap = cap.min(rng.range(1, max.min(offered).max(1)));
        }
        if let Some((limit, kind)) = plan.fail_after_bytes {
            let left = limit.saturating_sub(self.bytes);
            if left == 0 {
                return Fault::Fail(kind);
            }
            cap = cap.min(usize::try_from(left).unwrap_or(usize::MAX));
        }
        let fault = if !plan.script.is_empty() {
            plan.script.remove(0)
        } else {
            let r = plan.rates;
            if rng.percent(r.pending) {
                Fault::Pending
            } else if rng.percent(r.interrupted) {
                Fault::Interrupted
            } else if cap > 1 && rng.percent(r.short) {
                Fault::Short(rng.range(1, cap - 1))
            } else {
                Fault::Pass
            }
        };
        match fault {
            Fault::Pass if cap < possible => Fault::Short(cap),
            Fault::Short(k) => Fault::Short(k.clamp(1, cap.max(1))),
            other => other,
        }
    }

    /// Count `n` bytes moved by the last call.
    pub fn moved(&mut self, n: usize) {
        self.bytes += n as u64;
    }
}

/// What one end's transport saw. Reset by [`Control::reset_counters`](super::Control::reset_counters).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Every write call (including those returning errors or `Pending`).
    pub write_calls: u64,
    /// Write calls that returned `Ok(n)` with `n > 0`.
    pub writes: u64,
    /// Bytes those writes accepted.
    pub written: u64,
    /// Size of each successful write, in order.
    pub write_sizes: Vec<usize>,
    /// Every read call.
    pub read_calls: u64,
    /// Read calls that returned `Ok(n)` with `n > 0`.
    pub reads: u64,
    /// Bytes those reads returned.
    pub read_bytes: u64,
    /// Size of each successful read, in order.
    pub read_sizes: Vec<usize>,
    /// Reads that returned `Ok(0)` at end of stream.
    pub eofs: u64,
    /// Writes that returned `Pending` / `WouldBlock` (injected or no room).
    pub write_pending: u64,
    /// Reads that returned `Pending` / `WouldBlock` (injected or no data).
    pub read_pending: u64,
    /// Calls that returned `Interrupted`.
    pub interrupted: u64,
    /// Calls that returned any other error.
    pub errors: u64,
}

impl Counters {
    /// All `Pending` / `WouldBlock` results.
    pub fn pending(&self) -> u64 {
        self.write_pending + self.read_pending
    }
}
