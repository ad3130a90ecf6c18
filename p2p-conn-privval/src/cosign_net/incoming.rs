//! The requests other members send: the handler's queue and each
//! request's answer.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use super::slot::Slot;
use super::wire::{Body, Envelope, Failure, FailureCode, Response};
use super::{NetError, NetEvent};

/// The requests other members send this one, for its handler: each
/// [`Incoming`] is answered with [`Incoming::respond`].
#[derive(Debug)]
pub struct Requests(pub(super) mpsc::Receiver<Incoming>);

impl Requests {
    /// The next request; `None` once the cluster is dropped.
    pub async fn next(&mut self) -> Option<Incoming> {
        self.0.recv().await
    }
}

/// A request from another member. Answer it with [`Incoming::respond`];
/// dropped unanswered, the requester gets [`NetError::Unanswered`].
/// Until then it counts against the bound on that member's requests in
/// flight.
pub struct Incoming {
    pub(super) peer: u16,
    pub(super) kind: u32,
    pub(super) payload: Bytes,
    pub(super) reply: Option<Reply>,
}

impl std::fmt::Debug for Incoming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Incoming")
            .field("peer", &self.peer)
            .field("kind", &self.kind)
            .field("payload_len", &self.payload.len())
            .finish_non_exhaustive()
    }
}

pub(super) struct Reply {
    pub(super) id: u64,
    pub(super) tx: mpsc::Sender<Envelope>,
    pub(super) slot: Arc<Slot>,
    pub(super) generation: u64,
    pub(super) _permit: OwnedSemaphorePermit,
}

impl Reply {
    /// Queue `body` for the requester. A full queue means it does not
    /// read: its connection is dropped.
    fn send(self, body: Body) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(body.into()) {
            if self.slot.drop_link(self.generation) {
                self.slot.report(NetEvent::Disconnected {
                    peer: self.slot.index,
                    error: NetError::Stalled,
                });
            }
        }
    }

    fn failure(self, code: FailureCode, message: String) {
        let id = self.id;
        self.send(Body::Failure(Failure {
            id,
            code: code as u32,
            message,
        }));
    }
}

impl Incoming {
    /// The member that sent it.
    pub fn peer(&self) -> u16 {
        self.peer
    }

    /// Its kind tag, as the sender set it.
    pub fn kind(&self) -> u32 {
        self.kind
    }

    /// Its payload.
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// Answer it: a payload, or an error the requester sees as
    /// [`NetError::Refused`]. A payload over the limit is sent as such an
    /// error. Never waits: a requester that leaves its answers unread past
    /// the write queue's bound has its connection dropped.
    pub fn respond(mut self, answer: Result<Bytes, String>) {
        let Some(reply) = self.reply.take() else {
            return;
        };
        match answer {
            Ok(payload) if payload.len() > reply.slot.max_payload => {
                let msg = format!("a {}-byte response, over the limit", payload.len());
                reply.failure(FailureCode::Refused, msg);
            }
            Ok(payload) => {
                let id = reply.id;
                reply.send(Body::Response(Response { id, payload }));
            }
            Err(message) => reply.failure(FailureCode::Refused, message),
        }
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        if let Some(reply) = self.reply.take() {
            reply.failure(FailureCode::Dropped, String::new());
        }
    }
}
