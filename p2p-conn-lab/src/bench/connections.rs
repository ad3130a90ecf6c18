//! `bench --connections N` (`--all-cores`: N = the cores this process may
//! use): N loopback pairs at once, each over its own TCP connection, each
//! moving its share of the workload ([`Workload::share`]: the same message
//! size, the total split evenly) and verifying every byte of it, as a node
//! with many peers keeps every core busy.
//!
//! Every pair finishes its handshake first; then all senders start
//! together. A run is measured from that start to the last receiver's last
//! byte, with the whole process's CPU over that span, so the row's MB/s and
//! messages/s are aggregates over the wall time of the run. The first
//! connection to fail fails the run, whichever it is.
//!
//! The tokio and codec adapters run every pair's two tasks on one
//! multi-thread runtime with a worker per core ([`cores`]); the std adapter
//! runs two threads per pair. One connection's runs (`super::transfer`)
//! keep their own runtime (two workers, the sender on the calling thread),
//! so their figures are those of a plain `bench`.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use futures_util::SinkExt;
use p2p_conn::io::{blocking, codec, tokio as ptokio};
use p2p_conn::stats::ConnStats;
use p2p_conn::{Config, Identity};
use tokio::io::AsyncWriteExt;
use tokio::task::JoinSet;

use super::breakdown::Breakdown;
use super::measure::{Cpu, Mark, Row};
use super::transfer::{receive_std, receive_tokio};
use super::workload::{tokio_runtime_workers, Adapter, Workload, WorkloadArgs};
use crate::error::LabError;

/// The cores this process may use (`std::thread::available_parallelism`:
/// its CPU affinity and cgroup quota), at least 1: `--all-cores`'
/// connection count and the worker count of the runtime below.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A fault to inject, for the tests that prove a failed connection fails
/// the run: connection `corrupt`'s sender (from 0) flips one byte of its
/// last message.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    pub corrupt: Option<usize>,
}

impl Faults {
    /// Message `i` of connection `c`'s share `w`: the workload's, or a
    /// corrupted copy.
    fn message(self, c: usize, w: &Workload, i: u64) -> std::borrow::Cow<'_, [u8]> {
        let m = w.message(i);
        if self.corrupt == Some(c) && i + 1 == w.messages {
            let mut bad = m.to_vec();
            bad[m.len() / 2] ^= 0x01;
            bad.into()
        } else {
            m.into()
        }
    }
}

/// One run of `w` split over `n` connections through p2p-conn, as `args`
/// says (the tokio, codec or std adapter; not `--producers`).
pub fn run_ours(
    args: &WorkloadArgs,
    w: &Workload,
    cfg: &Config,
    n: usize,
    faults: Faults,
) -> Result<Row, LabError> {
    let shares = (0..n)
        .map(|c| w.share(n, c))
        .collect::<Result<Vec<_>, _>>()?;
    let (name, ((elapsed, cpu), breakdown)) = match args.adapter {
        Adapter::Tokio | Adapter::Codec => {
            let codec = args.adapter == Adapter::Codec;
            let rt = tokio_runtime_workers(cores())?;
            let name = if codec {
                "p2p-conn (codec)"
            } else {
                "p2p-conn (tokio)"
            };
            (name, rt.block_on(run_tokio(shares, cfg, codec, faults))?)
        }
        Adapter::Std => ("p2p-conn (std)", run_std(shares, cfg, faults)?),
    };
    Ok(Row {
        name: name.into(),
        bytes: w.bytes(),
        messages: w.messages,
        elapsed,
        cpu,
        latency: None,
        breakdown,
    })
}

/// What one pair's task ends with.
enum Done {
    /// A sender: connection `c`, its send-side stats (tokio adapter).
    Sent(usize, Option<ConnStats>),
    /// A receiver: connection `c`, when it verified its last byte, its
    /// receive-side stats (tokio adapter).
    Received(usize, Mark, Option<ConnStats>),
}

/// The measured span and the connections' breakdowns summed (when every
/// connection has one).
type Measured = ((Duration, Option<Cpu>), Option<Breakdown>);

/// The span from `start` to the latest receiver's end, and the breakdowns
/// of the connections summed, from every pair's [`Done`].
fn measure(start: Mark, done: Vec<Done>, n: usize) -> Result<Measured, LabError> {
    let mut end: Option<Mark> = None;
    let mut sent = vec![None; n];
    let mut received = vec![None; n];
    for d in done {
        match d {
            Done::Sent(c, s) => sent[c] = s,
            Done::Received(c, at, r) => {
                end = Some(end.map_or(at, |e| e.later(at)));
                received[c] = r;
            }
        }
    }
    let end = end.ok_or_else(|| LabError::failed("no receiver finished"))?;
    let per: Option<Vec<Breakdown>> = sent
        .iter()
        .zip(&received)
        .map(|(s, r)| Some(Breakdown::new(s.as_ref()?, r.as_ref()?)))
        .collect();
    let summed = per
        .and_then(|p| Breakdown::sum(&p))
        .map(|b| Breakdown { runs: 1, ..b });
    Ok((end.since(start), summed))
}

/// Every pair on this runtime: the receivers accept, handshake and verify;
/// the senders dial, handshake, say so on `ready` and wait for `go`.
async fn run_tokio(
    shares: Vec<Workload>,
    cfg: &Config,
    use_codec: bool,
    faults: Faults,
) -> Result<Measured, LabError> {
    let n = shares.len();
    let mut tasks = JoinSet::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(n);
    let (go_tx, go_rx) = tokio::sync::watch::channel(false);
    for (c, w) in shares.into_iter().enumerate() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (rcfg, rw) = (cfg.clone(), w.clone());
        let receiver = async move {
            let (tcp, _) = listener.accept().await?;
            drop(listener);
            let stats = receive_tokio(tcp, &rcfg, rw, use_codec).await?;
            Ok::<_, LabError>(Done::Received(c, Mark::now(), stats))
        };
        tasks.spawn(async move { receiver.await.map_err(on(c, n)) });
        let (scfg, ready, go) = (cfg.clone(), ready_tx.clone(), go_rx.clone());
        let sender = async move {
            let tcp = tokio::net::TcpStream::connect(addr).await?;
            tcp.set_nodelay(true)?;
            if use_codec {
                let mut framed = codec::handshake(tcp, &Identity::generate(), &scfg).await?;
                start(ready, go).await?;
                for i in 0..w.messages {
                    framed.feed(&faults.message(c, &w, i)[..]).await?;
                }
                SinkExt::<&[u8]>::flush(&mut framed).await?;
                framed.get_mut().shutdown().await?;
                Ok::<_, LabError>(Done::Sent(c, None))
            } else {
                let mut conn = ptokio::handshake(tcp, &Identity::generate(), &scfg).await?;
                start(ready, go).await?;
                for i in 0..w.messages {
                    conn.write_all(&faults.message(c, &w, i)).await?;
                }
                conn.shutdown().await?;
                Ok(Done::Sent(c, Some(conn.stats())))
            }
        };
        tasks.spawn(async move { sender.await.map_err(on(c, n)) });
    }
    drop(ready_tx);
    // Every sender through its handshake. A sender drops its `ready`
    // once it has said so or failed: when all are dropped short of `n`,
    // one failed, and its task (or its receiver's) says why.
    for _ in 0..n {
        if ready_rx.recv().await.is_none() {
            let mut why = LabError::failed("a connection ended before the start");
            while let Some(joined) = tasks.join_next().await {
                if let Err(e) = joined.map_err(task_failed).and_then(|r| r) {
                    why = e;
                    break;
                }
            }
            return Err(why);
        }
    }
    let start = Mark::now();
    // Every sender holds a receiver of `go` until it has seen it.
    let _ = go_tx.send(true);
    let mut done = Vec::with_capacity(2 * n);
    while let Some(joined) = tasks.join_next().await {
        // The first failure returns at once; dropping the runtime cancels
        // the other pairs.
        done.push(joined.map_err(task_failed)??);
    }
    measure(start, done, n)
}

/// A sender through its handshake: say so on `ready`, then wait for `go`.
async fn start(
    ready: tokio::sync::mpsc::Sender<()>,
    mut go: tokio::sync::watch::Receiver<bool>,
) -> Result<(), LabError> {
    // The coordinator holds the receiver until every sender has said so.
    let _ = ready.send(()).await;
    drop(ready);
    go.wait_for(|go| *go)
        .await
        .map(|_| ())
        .map_err(|_| LabError::failed("the run ended before it started"))
}

/// An error of connection `c` (from 0) of `n`, saying which, counted from
/// 1: "connection 2 of 4: message 511 arrived corrupted".
fn on(c: usize, n: usize) -> impl FnOnce(LabError) -> LabError {
    move |e| LabError::failed(format!("connection {} of {n}: {e}", c + 1))
}

/// A task that panicked or was cancelled.
fn task_failed(e: tokio::task::JoinError) -> LabError {
    LabError::failed(format!("a connection's task failed: {e}"))
}

/// Where the std adapter's senders wait until every pair is through its
/// handshake.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn wait(&self) -> Result<(), LabError> {
        let poisoned = |_| LabError::failed("a connection's thread panicked");
        let mut open = self.open.lock().map_err(poisoned)?;
        while !*open {
            open = self.opened.wait(open).map_err(poisoned)?;
        }
        Ok(())
    }

    fn open(&self) {
        if let Ok(mut open) = self.open.lock() {
            *open = true;
        }
        self.opened.notify_all();
    }
}

/// Every pair on two threads of its own (the std adapter); a thread's
/// failure ends the run at once (the other threads are left to the
/// process's exit).
fn run_std(shares: Vec<Workload>, cfg: &Config, faults: Faults) -> Result<Measured, LabError> {
    let n = shares.len();
    let gate = Arc::new(Gate::default());
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), LabError>>();
    let (done_tx, done_rx) = mpsc::channel::<Result<Done, LabError>>();
    for (c, w) in shares.into_iter().enumerate() {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let (rcfg, rw, done) = (cfg.clone(), w.clone(), done_tx.clone());
        std::thread::spawn(move || {
            let recv = || {
                let (tcp, _) = listener.accept()?;
                tcp.set_nodelay(true)?;
                let stats = receive_std(tcp, &rcfg, rw)?;
                Ok(Done::Received(c, Mark::now(), Some(stats)))
            };
            let _ = done.send(recv().map_err(on(c, n)));
        });
        let (scfg, gate, ready, done) =
            (cfg.clone(), gate.clone(), ready_tx.clone(), done_tx.clone());
        std::thread::spawn(move || {
            let handshake = || {
                let tcp = TcpStream::connect(addr)?;
                tcp.set_nodelay(true)?;
                Ok(blocking::handshake_tcp(tcp, &Identity::generate(), &scfg)?.split()?)
            };
            let (r, mut wr) = match handshake() {
                Ok(halves) => halves,
                Err(e) => {
                    let _ = ready.send(Err(on(c, n)(e)));
                    return;
                }
            };
            let _ = ready.send(Ok(()));
            let mut send = || {
                gate.wait()?;
                for i in 0..w.messages {
                    wr.write_all(&faults.message(c, &w, i))?;
                }
                wr.shutdown()?;
                Ok(Done::Sent(
                    c,
                    Some(ConnStats::new(wr.stats().send, r.stats().recv)),
                ))
            };
            let _ = done.send(send().map_err(on(c, n)));
        });
    }
    drop((ready_tx, done_tx));
    let failed = || LabError::failed("a connection's thread ended without a word");
    for _ in 0..n {
        // A receiver that fails before the start fails its sender's
        // handshake too, which ends up here.
        ready_rx.recv().map_err(|_| failed())??;
    }
    let start = Mark::now();
    gate.open();
    let mut done = Vec::with_capacity(2 * n);
    for _ in 0..2 * n {
        done.push(done_rx.recv().map_err(|_| failed())??);
    }
    let (span, b) = measure(start, done, n)?;
    Ok((
        span,
        b.map(|b| Breakdown {
            blocking_reads: true,
            ..b
        }),
    ))
}
