//! Inbound connections, for every listener the CLI runs: `seed`'s,
//! `listen`'s and `/metrics` (`seed --metrics`, `signer --metrics`; the
//! signer itself only dials). One rule for all, in [`admission`] (sans-IO):
//! a bound on the connections open and on those from one IP address, and,
//! when the listener is full, the oldest connection still in its
//! handshake (or, if none is, the oldest authenticated and not yet served)
//! makes room for the newcomer. A peer that connects and sends nothing, or
//! sends half a handshake, or authenticates and then idles, therefore
//! holds its slot only until newer connections need it, not until its own
//! timeout: a visitor is answered while such peers fill the listener, and
//! once authenticated it is not pushed out by bare connections.
//!
//! The tokio part here is thin: [`Gate`] wraps the state in a lock and
//! gives each admitted connection a [`Pass`] (it counts until dropped) and
//! an [`Evicted`] future (ready when the connection has been evicted; its
//! task then drops the connection); [`accept`] accepts, riding out the
//! errors a full descriptor table or an aborted connection give. File
//! descriptors stay bounded: a connection is accepted only with a
//! [`Gate::socket`] permit, held until its socket is closed (twice
//! `max_open`: the connections that count, and as many evicted ones whose
//! tasks have not dropped them yet); a refused connection is closed at
//! once, an evicted one as soon as its task sees [`Evicted`]; nothing
//! queues beyond the kernel's listen backlog.

pub(crate) mod admission;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

pub(crate) use admission::Limits;
use admission::{Admission, Ticket, Verdict};

/// What a listener's [`Gate`] has done, for metrics and logs.
#[derive(Default)]
pub(crate) struct Counts {
    /// Connections admitted.
    pub admitted: AtomicU64,
    /// Refused: their IP address had `max_per_ip` open.
    pub refused_per_ip: AtomicU64,
    /// Refused: full, every connection being served.
    pub refused_full: AtomicU64,
    /// Closed to make room for a newer connection.
    pub evicted: AtomicU64,
}

/// Why a connection was refused (it is to be closed at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    PerIp,
    Full,
}

/// The admission state of one listener, shared by its accept loop and its
/// connections' tasks.
pub(crate) struct Gate {
    /// Each admitted connection's payload is the sender whose drop makes
    /// its [`Evicted`] ready.
    state: Mutex<Admission<oneshot::Sender<()>>>,
    /// One permit per socket open, admitted or on its way to be closed.
    sockets: Arc<Semaphore>,
    counts: Counts,
}

/// An admitted connection's place: it counts until this is dropped.
pub(crate) struct Pass {
    gate: Arc<Gate>,
    ticket: Ticket,
}

/// Ready when the connection has been evicted (or its [`Pass`] dropped).
pub(crate) struct Evicted(oneshot::Receiver<()>);

impl Gate {
    pub(crate) fn new(limits: Limits) -> Arc<Gate> {
        let max = limits.max_open.max(1);
        Arc::new(Gate {
            state: Mutex::new(Admission::new(limits)),
            sockets: Arc::new(Semaphore::new(max.saturating_mul(2))),
            counts: Counts::default(),
        })
    }

    /// The verdict on a connection from `ip`, just accepted. A connection
    /// evicted for it is told through its [`Evicted`].
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<(Pass, Evicted), Refused> {
        let (tx, rx) = oneshot::channel();
        let verdict = self.state.lock().expect("admission").admit(ip, tx);
        match verdict {
            Verdict::Admit { ticket, evicted } => {
                self.counts.admitted.fetch_add(1, Ordering::Relaxed);
                if let Some((_, stop)) = evicted {
                    self.counts.evicted.fetch_add(1, Ordering::Relaxed);
                    drop(stop);
                }
                let pass = Pass {
                    gate: Arc::clone(self),
                    ticket,
                };
                Ok((pass, Evicted(rx)))
            }
            Verdict::RefusePerIp => {
                self.counts.refused_per_ip.fetch_add(1, Ordering::Relaxed);
                Err(Refused::PerIp)
            }
            Verdict::RefuseFull => {
                self.counts.refused_full.fetch_add(1, Ordering::Relaxed);
                Err(Refused::Full)
            }
        }
    }

    /// Room for one more socket: wait for it before accepting, and hold
    /// it until the socket is closed.
    pub(crate) async fn socket(&self) -> OwnedSemaphorePermit {
        Arc::clone(&self.sockets)
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    /// Connections open now.
    pub(crate) fn open(&self) -> usize {
        self.state.lock().expect("admission").open()
    }

    pub(crate) fn counts(&self) -> &Counts {
        &self.counts
    }
}

impl Pass {
    /// The peer has authenticated: only other authenticated connections
    /// push it out.
    pub(crate) fn authenticated(&self) {
        self.gate
            .state
            .lock()
            .expect("admission")
            .authenticated(self.ticket);
    }

    /// The connection is being served (its answer on the way): it is no
    /// longer evicted.
    pub(crate) fn serving(&self) {
        self.gate
            .state
            .lock()
            .expect("admission")
            .serving(self.ticket);
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        // The sender is dropped outside the lock.
        let stop = self
            .gate
            .state
            .lock()
            .expect("admission")
            .release(self.ticket);
        drop(stop);
    }
}

impl Future for Evicted {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Nothing is ever sent: the sender's drop is the signal.
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

/// The next connection on `listener`. Errors of one connection (aborted
/// before it was taken) are skipped; errors of the process (no descriptor
/// left, no buffer memory) are waited out, briefly, rather than spun on.
pub(crate) async fn accept(listener: &TcpListener) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionAborted
                        | std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Accept on `listener` forever, each admitted connection on its own task
/// running `serve`, which is dropped (closing the connection) if the
/// connection is evicted. `serve` holds the [`Pass`]; the connection
/// counts until `serve` ends or is dropped.
pub(crate) async fn serve<F, Fut>(listener: TcpListener, gate: Arc<Gate>, serve: F)
where
    F: Fn(TcpStream, SocketAddr, Pass) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        let socket = gate.socket().await;
        let (tcp, from) = accept(&listener).await;
        // A refused connection is dropped here: closed at once.
        let Ok((pass, evicted)) = gate.admit(from.ip()) else {
            continue;
        };
        let visit = serve(tcp, from, pass);
        tokio::spawn(async move {
            tokio::select! {
                biased;
                () = evicted => {}
                () = visit => {}
            }
            // The socket is closed (dropped with `visit`): room for another.
            drop(socket);
        });
    }
}

/// Accept on `listener` until one admitted connection's `attempt`
/// succeeds, and return what it gave: for a command that serves one peer
/// (`listen`). The attempts run at once, so a peer that stalls holds up
/// no other, and each is dropped if its connection is evicted. An attempt
/// that fails ends the wait with its error only if no other is running
/// (a lone peer's failure is the command's, as with one connection; a
/// failure beside others is that peer's alone).
pub(crate) async fn first<F, Fut, T, E>(
    listener: &TcpListener,
    gate: &Arc<Gate>,
    attempt: F,
) -> Result<T, E>
where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    let mut running = JoinSet::new();
    loop {
        let next = async {
            let socket = gate.socket().await;
            (socket, accept(listener).await)
        };
        tokio::select! {
            (socket, (tcp, from)) = next => {
                let Ok((pass, evicted)) = gate.admit(from.ip()) else {
                    continue;
                };
                let attempt = attempt(tcp, from);
                running.spawn(async move {
                    let done = tokio::select! {
                        biased;
                        () = evicted => None,
                        done = attempt => Some(done),
                    };
                    drop((pass, socket));
                    done
                });
            }
            Some(done) = running.join_next(), if !running.is_empty() => match done {
                Ok(Some(Ok(t))) => return Ok(t),
                Ok(Some(Err(e))) if running.is_empty() => return Err(e),
                // Evicted, or failed beside others.
                _ => {}
            },
        }
    }
}
