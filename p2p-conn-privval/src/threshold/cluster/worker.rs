//! The one owner of a [`Cosigner`] and its [`Leader`]: a dedicated thread,
//! so a sign's state-file sync never holds a runtime thread. Everything
//! else sends it jobs and awaits the answer.

use std::collections::BTreeMap;
use std::sync::{mpsc, Mutex};
use std::thread::JoinHandle;

use rand_core::OsRng;

use crate::guard::Hrs;
use tokio::sync::oneshot;

use super::super::{
    Commitment, Cosigner, Leader, SignRequest, SignResponse, Signable, SigningRound, ThresholdError,
};

type Reply<T> = oneshot::Sender<T>;

pub(super) enum Job {
    /// Fresh commitments for a peer that leads.
    Commit(usize, Reply<Vec<Commitment>>),
    /// A sign request, a peer's or our own leader's.
    Sign(
        Box<SignRequest>,
        Reply<Result<SignResponse, ThresholdError>>,
    ),
    /// Start a round as leader: the request and the round. The peers
    /// with the count of their connections now.
    Start {
        signable: Box<Signable>,
        peers: Vec<(u16, u64)>,
        reply: Reply<Result<(SignRequest, SigningRound), ThresholdError>>,
    },
    /// Stock a peer's commitments, fetched over its connection number
    /// `.1`.
    Stock(u16, u64, Vec<Commitment>),
    /// How many commitments of each peer are in stock.
    Stocks(Vec<u16>, Reply<BTreeMap<u16, usize>>),
    /// The guard's mark now.
    Mark(Reply<Hrs>),
    /// Raise the guard's mark (catch-up).
    Raise(Hrs, Reply<Result<bool, ThresholdError>>),
    Stop,
}

/// The thread and its queue. Every job's producer is bounded (a peer's
/// requests by the transport's `max_in_flight`, the restockers one
/// request each, the leader one round at a time), so the queue is too.
pub(super) struct Worker {
    pub(super) jobs: mpsc::Sender<Job>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Worker {
    pub(super) fn start(cosigner: Cosigner) -> std::io::Result<Worker> {
        let (jobs, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("cosigner-{}", cosigner.index()))
            .spawn(move || run(cosigner, rx))?;
        Ok(Worker {
            jobs,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Stop the thread and wait for it: its [`Cosigner`] (and the state
    /// file's lock) is released when this returns. Later jobs fail.
    pub(super) fn stop(&self) {
        let _ = self.jobs.send(Job::Stop);
        let thread = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(mut cosigner: Cosigner, jobs: mpsc::Receiver<Job>) {
    let mut leader = Leader::new(&cosigner);
    // Each peer's connection the stock came over: commitments of an
    // earlier connection are dropped (a reconnect may be a restart).
    let mut generation: BTreeMap<u16, u64> = BTreeMap::new();
    let mut renew = |leader: &mut Leader, peer: u16, gen: u64| -> bool {
        let cur = generation.entry(peer).or_insert(gen);
        if gen > *cur {
            leader.drop_stock(peer);
            *cur = gen;
        }
        gen == *cur
    };
    let chain_id = cosigner.chain_id().to_owned();
    let rng = &mut OsRng;
    while let Ok(job) = jobs.recv() {
        match job {
            Job::Commit(count, reply) => {
                let _ = reply.send(cosigner.commit(count, rng));
            }
            Job::Sign(request, reply) => {
                let _ = reply.send(cosigner.sign(&request));
            }
            Job::Start {
                signable,
                peers,
                reply,
            } => {
                for &(peer, gen) in &peers {
                    renew(&mut leader, peer, gen);
                }
                let peers: Vec<u16> = peers.iter().map(|p| p.0).collect();
                let r = leader.start(&mut cosigner, &chain_id, *signable, &peers, rng);
                let _ = reply.send(r);
            }
            Job::Stock(peer, gen, list) => {
                if renew(&mut leader, peer, gen) {
                    let _ = leader.add_commitments(peer, &list);
                }
            }
            Job::Stocks(peers, reply) => {
                let _ = reply.send(peers.iter().map(|&p| (p, leader.stock(p))).collect());
            }
            Job::Mark(reply) => {
                let _ = reply.send(cosigner.state().hrs());
            }
            Job::Raise(hrs, reply) => {
                let _ = reply.send(cosigner.raise_mark(hrs));
            }
            Job::Stop => break,
        }
    }
}
