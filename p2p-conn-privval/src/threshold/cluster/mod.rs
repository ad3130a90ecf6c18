//! A threshold cosigner on the network (feature `threshold-cluster`:
//! `threshold` and `cosign-net`): the sans-IO core ([`Cosigner`],
//! [`Leader`](super::Leader)) joined to the cosigners' transport
//! ([`Cluster`]). [`ThresholdSigner`] serves the
//! other members' requests and, as this crate's [`Signer`], leads the
//! signatures its own node asks for, so
//! [`SignerEndpoint`](crate::endpoint::SignerEndpoint) serves a CometBFT
//! node with it unchanged. `spec/threshold.md` §3 has the payloads.
//!
//! # Design
//! - Catch-up at start: before it leads or answers a sign request, the
//!   cosigner asks its connected peers for their marks (kind
//!   [`KIND_MARK`], the HRS only), waiting at most 2 s for them to
//!   connect, and raises its own mark without sign bytes to the (t−1)-th
//!   highest answer ([`Cosigner::raise_mark`], saved first): it then
//!   refuses that HRS and below (`spec/threshold.md` §2 says why that
//!   rank). [`ThresholdSigner::caught_up`] waits for it.
//! - One thread owns the [`Cosigner`] and the [`Leader`](super::Leader)'s stock: peers'
//!   requests, the leader's own share and the stock all go through it as
//!   jobs, so the state file's sync never holds a runtime thread and the
//!   leader's share passes the same guard as any peer's.
//! - Serving: each [`Incoming`] of kind
//!   commitments gets fresh commitments; of kind sign, a share, once
//!   [`Incoming::peer`](crate::cosign_net::Incoming::peer) (the member
//!   the secret connection authenticated) is among the request's signers.
//!   A refusal (the guard's included) is an error response carrying the
//!   [`ThresholdError`]'s text.
//! - Stock: one task per peer keeps between 12 and 24 of its
//!   commitments at hand while it is connected. Each
//!   batch is stocked with the number of the connection it came over;
//!   once the peer has reconnected, the older batches are dropped (a
//!   reconnect may be a restart, which discards its nonces).
//! - Leading: for each vote or proposal the node asks, the connected
//!   peers are ordered by keepalive round trip and the first t−1 with
//!   stock are asked at once (with no stock at hand, a few commitments
//!   of each connected peer are fetched first), beside the own cosigner, with one deadline
//!   ([`ThresholdSigner::deadline`], default 1.5 s, well under the node's
//!   5 s), of which the first attempt has half. If a peer fails, the
//!   request is started once more without it;
//!   an earlier timestamp from the own guard is asked again with. The
//!   shares are aggregated and verified under the group key.
//!
//! # Guarantees
//! - Every share leaves a cosigner only as its guard allows and after
//!   its mark is saved (the core's rule); the leader's own share too, so
//!   a node cannot make its leader sign a conflict. A refused or failed
//!   request returns an error to the node, never a signature.
//! - Peers' payloads are decoded with bounds and errors, never a panic.
//! - The public key is the group key, the validator's.
//!
//! # Not provided
//! - Catching up again when a peer reconnects (only at start), and marks
//!   proven by a signature: at 2 of 3, one lying peer stalls the cosigner
//!   that catches up (`spec/threshold.md` §2).
//! - `SignBytesRequest`: refused (raw bytes pass no guard).
//! - Runtimes: the [`Signer`] calls block in place, which needs tokio's
//!   multi-thread runtime; on another they fail with an error.

mod wire;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use std::time::Instant;
use tokio::sync::{oneshot, Notify};
use tokio::task::AbortHandle;

use super::{Cosigner, SignRequest, SignResponse, Signable, ThresholdError};
use crate::cosign_net::{Cluster, Incoming, NetError, Requests};
use crate::messages::{crypto_public_key, CryptoPublicKey, Proposal, Vote};
use crate::{Signer, SignerError};
use worker::{Job, Worker};

pub use wire::{KIND_COMMITMENTS, KIND_MARK, KIND_SIGN};

/// The commitments of each peer a leader keeps at hand, at most.
const STOCK: usize = 24;
/// Below this many, a peer's stock is refilled.
const LOW_STOCK: usize = 12;
/// How long catch-up at start waits for the peers to connect, at most.
const CATCH_UP_WAIT: Duration = Duration::from_secs(2);
/// Once t−1 peers are connected, how much longer it waits for the rest.
const CATCH_UP_GRACE: Duration = Duration::from_millis(100);

struct Shared {
    cluster: Cluster,
    worker: Worker,
    index: u16,
    /// Restock now.
    restock: Notify,
    /// Caught up on the peers' marks: signing allowed.
    /// `None` while catching up, then whether the mark taken was saved.
    ready: tokio::sync::watch::Sender<Option<bool>>,
}

impl Shared {
    fn job(&self, job: Job) -> Result<(), SignerError> {
        self.worker
            .jobs
            .send(job)
            .map_err(|_| SignerError::Backend("the cosigner has stopped".into()))
    }

    async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Job) -> Result<T, SignerError> {
        let (tx, rx) = oneshot::channel();
        self.job(make(tx))?;
        rx.await
            .map_err(|_| SignerError::Backend("the cosigner has stopped".into()))
    }

    /// Wait until catch-up is done: an error if its mark was not saved.
    async fn caught_up(&self) -> Result<(), SignerError> {
        let mut rx = self.ready.subscribe();
        match rx.wait_for(Option::is_some).await.map(|r| *r) {
            Ok(Some(true)) => Ok(()),
            _ => Err(SignerError::Backend(
                "catch-up failed: the mark taken from the peers was not saved".into(),
            )),
        }
    }
}

/// A cosigner serving its cluster and leading for its node (module docs).
/// Dropping it stops the service, the stock and the cosigner's thread
/// (the state file's lock is released when the drop returns) and leaves
/// the cluster.
pub struct ThresholdSigner {
    shared: Arc<Shared>,
    tasks: Vec<AbortHandle>,
    chain_id: String,
    group_key: [u8; 32],
    threshold: u16,
    deadline: Duration,
}

impl std::fmt::Debug for ThresholdSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThresholdSigner")
            .field("index", &self.shared.index)
            .field("chain_id", &self.chain_id)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl Drop for ThresholdSigner {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        self.shared.worker.stop();
    }
}

impl ThresholdSigner {
    /// Serve `cluster`'s `requests` with `cosigner` (whose index must be
    /// the cluster's), and stock the peers' commitments. Call within a
    /// tokio runtime; the [`Signer`] calls need a multi-thread one.
    pub fn start(
        cosigner: Cosigner,
        cluster: Cluster,
        requests: Requests,
    ) -> Result<ThresholdSigner, SignerError> {
        let share = cosigner.share();
        let (index, threshold, signers) = (share.index(), share.threshold(), share.signers());
        let group_key = share.group_public_key();
        let chain_id = cosigner.chain_id().to_owned();
        let worker = Worker::start(cosigner)
            .map_err(|e| SignerError::Backend(format!("cannot start the cosigner: {e}").into()))?;
        let shared = Arc::new(Shared {
            cluster,
            worker,
            index,
            restock: Notify::new(),
            ready: tokio::sync::watch::channel(None).0,
        });
        let mut tasks = vec![
            tokio::spawn(serve(shared.clone(), requests)).abort_handle(),
            tokio::spawn(catch_up(shared.clone(), threshold)).abort_handle(),
        ];
        for peer in (1..=signers).filter(|&p| p != index) {
            tasks.push(tokio::spawn(restock(shared.clone(), peer)).abort_handle());
        }
        Ok(ThresholdSigner {
            shared,
            tasks,
            chain_id,
            group_key,
            threshold,
            deadline: Duration::from_millis(1500),
        })
    }

    /// The bound on one signature, both attempts included (default
    /// 1.5 s; keep it well under the node's 5 s read timeout). The first
    /// attempt has half of it, so a peer that hangs leaves the retry the
    /// other half.
    pub fn deadline(mut self, t: Duration) -> Self {
        self.deadline = t;
        self
    }

    /// Wait until the catch-up on the peers' marks at start is done (the
    /// module docs): this cosigner signs (leads or answers) only then.
    /// An error if the mark it took could not be saved: it then refuses
    /// every signature.
    pub async fn caught_up(&self) -> Result<(), SignerError> {
        self.shared.caught_up().await
    }

    fn check_chain(&self, chain_id: &str) -> Result<(), SignerError> {
        if chain_id != self.chain_id {
            return Err(SignerError::WrongChainId {
                expected: self.chain_id.clone(),
                got: chain_id.to_owned(),
            });
        }
        Ok(())
    }

    /// Run a round on the runtime and wait for it here, blocking in place.
    fn lead(&mut self, signable: Signable) -> Result<Signable, SignerError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            SignerError::Backend("a threshold signer runs within a tokio runtime".into())
        })?;
        if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            return Err(SignerError::Backend(
                "a threshold signer needs tokio's multi-thread runtime".into(),
            ));
        }
        let deadline = Instant::now() + self.deadline;
        let shared = self.shared.clone();
        let need = usize::from(self.threshold) - 1;
        tokio::task::block_in_place(|| handle.block_on(lead(shared, signable, need, deadline)))
    }
}

impl Signer for ThresholdSigner {
    fn public_key(&mut self, chain_id: &str) -> Result<CryptoPublicKey, SignerError> {
        self.check_chain(chain_id)?;
        Ok(CryptoPublicKey {
            sum: Some(crypto_public_key::Key::Ed25519(self.group_key.to_vec())),
        })
    }

    fn sign_vote(
        &mut self,
        chain_id: &str,
        vote: Vote,
        sign_extension: bool,
    ) -> Result<Vote, SignerError> {
        self.check_chain(chain_id)?;
        match self.lead(Signable::Vote {
            vote,
            sign_extension,
        })? {
            Signable::Vote { vote, .. } => Ok(vote),
            Signable::Proposal(_) => Err(SignerError::Backend("a proposal for a vote".into())),
        }
    }

    fn sign_proposal(
        &mut self,
        chain_id: &str,
        proposal: Proposal,
    ) -> Result<Proposal, SignerError> {
        self.check_chain(chain_id)?;
        match self.lead(Signable::Proposal(proposal))? {
            Signable::Proposal(p) => Ok(p),
            Signable::Vote { .. } => Err(SignerError::Backend("a vote for a proposal".into())),
        }
    }

    fn sign_bytes(&mut self, _bytes: &[u8]) -> Result<Vec<u8>, SignerError> {
        Err(SignerError::SignBytesRefused)
    }
}

fn core_error(e: ThresholdError) -> SignerError {
    match e {
        ThresholdError::Signer(e) => e,
        e => SignerError::Backend(Box::new(e)),
    }
}

/// Answer the other members' requests.
async fn serve(shared: Arc<Shared>, mut requests: Requests) {
    while let Some(incoming) = requests.next().await {
        let shared = shared.clone();
        tokio::spawn(async move {
            let answer = answer(&shared, &incoming).await;
            incoming.respond(answer.map_err(|e| e.to_string()));
        });
    }
}

async fn answer(shared: &Shared, incoming: &Incoming) -> Result<bytes::Bytes, SignerError> {
    match incoming.kind() {
        KIND_COMMITMENTS => {
            let count = wire::decode_commit_request(incoming.payload()).map_err(core_error)?;
            let list = shared.ask(|tx| Job::Commit(count, tx)).await?;
            Ok(wire::encode_commitments(&list))
        }
        KIND_MARK => {
            let hrs = shared.ask(Job::Mark).await?;
            Ok(wire::encode_mark(hrs))
        }
        KIND_SIGN => {
            shared.caught_up().await?;
            let request = wire::decode_sign_request(incoming.payload()).map_err(core_error)?;
            if !request
                .commitments
                .iter()
                .any(|c| c.signer == incoming.peer())
            {
                return Err(core_error(ThresholdError::BadRequest(
                    "the requester is not among the request's signers",
                )));
            }
            let response = shared
                .ask(|tx| Job::Sign(Box::new(request), tx))
                .await?
                .map_err(core_error)?;
            Ok(wire::encode_sign_response(&response))
        }
        kind => Err(SignerError::Backend(
            format!("unknown request kind {kind}").into(),
        )),
    }
}

/// Keep `peer`'s commitments in stock while it is connected.
async fn restock(shared: Arc<Shared>, peer: u16) {
    loop {
        let stats = shared.cluster.stats();
        let Some(st) = stats.iter().find(|s| s.index == peer) else {
            return;
        };
        let mut wait = Duration::from_millis(100);
        if st.connected {
            let have = match shared.ask(|tx| Job::Stocks(vec![peer], tx)).await {
                Ok(m) => m.get(&peer).copied().unwrap_or(0),
                Err(_) => return,
            };
            if have < LOW_STOCK {
                let deadline = Instant::now() + Duration::from_secs(1);
                if fetch(&shared, peer, st.connects, STOCK - have, deadline).await {
                    wait = Duration::ZERO;
                }
            }
        }
        if !wait.is_zero() {
            let _ = tokio::time::timeout(wait, shared.restock.notified()).await;
        }
    }
}

/// Fetch `count` commitments of `peer` over its connection number `gen`
/// and stock them; whether that worked.
async fn fetch(shared: &Shared, peer: u16, gen: u64, count: usize, deadline: Instant) -> bool {
    let payload = wire::encode_commit_request(count);
    match shared
        .cluster
        .request(peer, KIND_COMMITMENTS, payload, deadline)
        .await
        .map_err(ThresholdError::from_net)
        .and_then(|b| wire::decode_commitments(&b))
    {
        Ok(list) => shared.job(Job::Stock(peer, gen, list)).is_ok(),
        Err(_) => false,
    }
}

impl ThresholdError {
    fn from_net(e: NetError) -> ThresholdError {
        ThresholdError::Signer(SignerError::Backend(Box::new(e)))
    }
}

/// The connected peers but `excluded`, nearest first (keepalive round
/// trip), each with the count of its connections.
fn order_peers(shared: &Shared, excluded: &[u16]) -> Vec<(u16, u64)> {
    let mut stats = shared.cluster.stats();
    stats.retain(|s| s.connected && !excluded.contains(&s.index));
    stats.sort_by_key(|s| s.rtt_last.unwrap_or(Duration::MAX));
    stats.iter().map(|s| (s.index, s.connects)).collect()
}

/// One signature: at most two attempts, the second without the peers
/// that failed the first (or with the timestamp the own guard gave).
async fn lead(
    shared: Arc<Shared>,
    mut signable: Signable,
    need: usize,
    deadline: Instant,
) -> Result<Signable, SignerError> {
    tokio::time::timeout_at(deadline.into(), shared.caught_up())
        .await
        .map_err(|_| SignerError::Backend("catching up on the peers' marks".into()))??;
    let mut excluded: Vec<u16> = Vec::new();
    let mut last: Option<SignerError> = None;
    let mut fetched = false;
    let mut attempts = 0;
    // Two rounds at most, each after at most one fetch of commitments
    // (a peer's stock is dropped when it reconnects), and one ask again
    // with an earlier timestamp.
    for _ in 0..5 {
        let peers = order_peers(&shared, &excluded);
        let start = shared
            .ask(|tx| Job::Start {
                signable: Box::new(signable.clone()),
                peers,
                reply: tx,
            })
            .await?;
        shared.restock.notify_waiters();
        let (request, mut round) = match start {
            Ok(r) => r,
            Err(ThresholdError::NotEnoughCommitments { .. }) if !fetched => {
                // No stock yet (just connected, or a burst): ask the
                // connected peers for a few now, and try again.
                fetched = true;
                fetch_now(&shared, &order_peers(&shared, &excluded), deadline).await;
                continue;
            }
            Err(e) => return Err(last.unwrap_or_else(|| core_error(e))),
        };
        let chosen: Vec<u16> = request
            .commitments
            .iter()
            .map(|c| c.signer)
            .filter(|&s| s != shared.index)
            .collect();
        debug_assert_eq!(chosen.len(), need);
        // The first attempt has half of what is left, the retry the rest.
        let until = if attempts == 0 {
            let now = Instant::now();
            now + deadline.saturating_duration_since(now) / 2
        } else {
            deadline
        };
        attempts += 1;
        let payload = wire::encode_sign_request(&request);
        let mut asks = tokio::task::JoinSet::new();
        for &peer in &chosen {
            let (shared, payload) = (shared.clone(), payload.clone());
            asks.spawn(async move {
                let r = shared
                    .cluster
                    .request(peer, KIND_SIGN, payload, until)
                    .await
                    .map_err(|e| SignerError::Backend(Box::new(e)))
                    .and_then(|b| wire::decode_sign_response(&b).map_err(core_error));
                (peer, r)
            });
        }
        let own = own_share(&shared, request, until).await;
        let mut answers: Vec<SignResponse> = Vec::with_capacity(chosen.len() + 1);
        let mut failed = false;
        while let Some(joined) = asks.join_next().await {
            match joined {
                Ok((_, Ok(r))) => answers.push(r),
                Ok((peer, Err(e))) => {
                    excluded.push(peer);
                    last = Some(e);
                    failed = true;
                }
                Err(_) => failed = true,
            }
        }
        match own {
            Ok(r) => answers.push(r),
            Err(ThresholdError::EarlierTimestamp { timestamp }) => {
                match &mut signable {
                    Signable::Vote { vote, .. } => vote.timestamp = timestamp,
                    Signable::Proposal(p) => p.timestamp = timestamp,
                }
                continue;
            }
            Err(e) => return Err(core_error(e)),
        }
        if failed {
            fetched = false;
            continue;
        }
        for r in answers {
            round.add(r).map_err(core_error)?;
        }
        return round.finish().map_err(core_error);
    }
    Err(last.unwrap_or_else(|| SignerError::Backend("no signature in two attempts".into())))
}

/// Catch up on the peers' marks (`spec/threshold.md` §2): wait at most
/// [`CATCH_UP_WAIT`] for every peer to connect (at most
/// [`CATCH_UP_GRACE`] more once t−1 are), ask those connected for
/// their marks, and raise the own mark to the (t−1)-th highest of the
/// answers (saved before use); then allow signing. Without t−1 answers,
/// the mark is left as it is.
async fn catch_up(shared: Arc<Shared>, threshold: u16) {
    let k = usize::from(threshold.saturating_sub(1));
    let mut deadline = Instant::now() + CATCH_UP_WAIT;
    let mut graced = false;
    let connected = |shared: &Shared| -> Vec<u16> {
        let stats = shared.cluster.stats();
        stats
            .iter()
            .filter(|s| s.connected && s.index != shared.index)
            .map(|s| s.index)
            .collect()
    };
    let peers = loop {
        let up = connected(&shared);
        let all = shared
            .cluster
            .stats()
            .iter()
            .all(|s| s.index == shared.index || s.connected);
        if all || Instant::now() >= deadline {
            break up;
        }
        if !graced && up.len() >= k {
            graced = true;
            deadline = deadline.min(Instant::now() + CATCH_UP_GRACE);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let ask_until = Instant::now() + CATCH_UP_WAIT;
    let mut asks = tokio::task::JoinSet::new();
    for peer in peers {
        let shared = shared.clone();
        asks.spawn(async move {
            shared
                .cluster
                .request(peer, KIND_MARK, bytes::Bytes::new(), ask_until)
                .await
                .map_err(ThresholdError::from_net)
                .and_then(|b| wire::decode_mark(&b))
        });
    }
    let mut marks = Vec::new();
    while let Some(joined) = asks.join_next().await {
        if let Ok(Ok(hrs)) = joined {
            marks.push(hrs);
        }
    }
    marks.sort_unstable_by(|a, b| b.cmp(a));
    if k > 0 && marks.len() >= k {
        let hrs = marks[k - 1];
        match shared.ask(|tx| Job::Raise(hrs, tx)).await {
            Ok(Ok(_)) => {}
            // Not saved: refuse every signature.
            _ => {
                shared.ready.send_replace(Some(false));
                return;
            }
        }
    }
    shared.ready.send_replace(Some(true));
}

/// A few commitments of each of `peers`, now, at once.
async fn fetch_now(shared: &Arc<Shared>, peers: &[(u16, u64)], deadline: Instant) {
    let mut asks = tokio::task::JoinSet::new();
    for &(peer, gen) in peers {
        let shared = shared.clone();
        asks.spawn(async move { fetch(&shared, peer, gen, 4, deadline).await });
    }
    while asks.join_next().await.is_some() {}
}

async fn own_share(
    shared: &Shared,
    request: SignRequest,
    deadline: Instant,
) -> Result<SignResponse, ThresholdError> {
    let ask = shared.ask(|tx| Job::Sign(Box::new(request), tx));
    match tokio::time::timeout_at(deadline.into(), ask).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => Err(ThresholdError::Signer(e)),
        Err(_) => Err(ThresholdError::Signer(SignerError::Backend(
            "the own cosigner did not answer within the deadline".into(),
        ))),
    }
}
