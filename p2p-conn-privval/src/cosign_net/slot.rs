//! One other member as this one keeps it: the connection up now, our
//! requests waiting on it, and its counters.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use p2p_conn::NodeId;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::AbortHandle;

use super::stats::Counters;
use super::wire::Envelope;
use super::{EventSink, NetError, NetEvent};

/// One other member: its connection (if up), our requests waiting for
/// it, and its counters.
pub(super) struct Slot {
    pub(super) index: u16,
    pub(super) node_id: NodeId,
    pub(super) addr: String,
    pub(super) max_payload: usize,
    pub(super) out_permits: Arc<Semaphore>,
    pub(super) in_permits: Arc<Semaphore>,
    pub(super) state: Mutex<SlotState>,
    pub(super) events: Option<EventSink>,
}

#[derive(Default)]
pub(super) struct SlotState {
    pub(super) generation: u64,
    pub(super) link: Option<Link>,
    pub(super) pending: HashMap<u64, Waiter>,
    pub(super) counters: Counters,
}

/// The connection up now.
pub(super) struct Link {
    pub(super) generation: u64,
    pub(super) tx: mpsc::Sender<Envelope>,
    pub(super) abort: AbortHandle,
}

/// One of our requests, waiting for its answer on connection
/// `generation`.
pub(super) struct Waiter {
    pub(super) generation: u64,
    pub(super) tx: oneshot::Sender<Result<Bytes, NetError>>,
}

impl Slot {
    /// Report `e` to the cluster's event sink.
    pub(super) fn report(&self, e: NetEvent) {
        if let Some(f) = &self.events {
            f(&e);
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// End connection `generation` if it is still the current one: its
    /// task is aborted, its requests fail. Whether it was.
    pub(super) fn drop_link(&self, generation: u64) -> bool {
        let mut st = self.lock();
        match st.link.take() {
            Some(link) if link.generation == generation => {
                link.abort.abort();
                fail_pending(&mut st, generation);
                true
            }
            other => {
                st.link = other;
                false
            }
        }
    }
}

/// Every request waiting on connection `generation` fails.
pub(super) fn fail_pending(st: &mut SlotState, generation: u64) {
    st.pending.retain(|_, w| w.generation != generation);
}
