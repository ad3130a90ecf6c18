//! The signals the signer acts on: SIGINT and SIGTERM stop it, SIGHUP
//! reloads the node list (Ctrl-C only, elsewhere than Unix).

/// What a signal asks for.
pub(super) enum Signal {
    /// Stop, named by the signal.
    Stop(&'static str),
    /// SIGHUP: reload.
    Reload,
}

/// The signals, listened for from [`Signals::listen`] on.
#[cfg(unix)]
pub(super) struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    pub(super) fn listen() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal that comes.
    pub(super) async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::Stop("SIGINT"),
            _ = self.term.recv() => Signal::Stop("SIGTERM"),
            _ = self.hup.recv() => Signal::Reload,
        }
    }
}

#[cfg(not(unix))]
pub(super) struct Signals;

#[cfg(not(unix))]
impl Signals {
    pub(super) fn listen() -> std::io::Result<Signals> {
        Ok(Signals)
    }

    pub(super) async fn next(&mut self) -> Signal {
        let _ = tokio::signal::ctrl_c().await;
        Signal::Stop("Ctrl-C")
    }
}
