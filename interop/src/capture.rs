//! `tracing` events captured as text: a thread-local `fmt` subscriber
//! (debug level, no colours) writing into a buffer the test reads.
//!
//! `tracing` caches each callsite's interest for the whole process, asked
//! of the registering thread's subscriber. A test thread with none would
//! cache "never" for a callsite it reaches first, and a capturing test that
//! reaches it later would see nothing (tokio-rs/tracing#3611; seen here as
//! an empty capture in a full test run). So the first capture also sets a
//! global subscriber that is interested in everything and keeps nothing:
//! every callsite then asks the current thread's subscriber at each event.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// A writer for the subscriber that keeps what it is given.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// The process-wide subscriber: "sometimes" for every callsite, so that
/// the interest is decided per event by the thread's own subscriber; it
/// records nothing.
struct AskEachTime;

impl tracing::Subscriber for AskEachTime {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        false
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Capture this thread's events until the guard is dropped.
pub fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    static GLOBAL: std::sync::Once = std::sync::Once::new();
    // Before this thread's own subscriber exists. An error means another
    // global subscriber is set, which answers for itself.
    GLOBAL.call_once(|| {
        let _ = tracing::subscriber::set_global_default(AskEachTime);
    });
    let log = Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .finish();
    (log, tracing::subscriber::set_default(subscriber))
}

#[cfg(test)]
mod tests {
    use super::capture;

    /// The event of a callsite that a thread without a subscriber reached
    /// first is still captured on the capturing thread.
    #[test]
    fn a_callsite_first_reached_elsewhere_is_still_captured() {
        fn emit() {
            tracing::debug!("the callsite under test");
        }
        let (log, _guard) = capture();
        std::thread::spawn(emit).join().unwrap();
        emit();
        assert!(
            log.text().contains("the callsite under test"),
            "captured: {:?}",
            log.text()
        );
    }
}
