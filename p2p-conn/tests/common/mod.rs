//! Test-only helpers on top of the crate's `testkit` (the shared I/O double
//! and handshake pumps live there, for the fuzz targets too); child
//! processes ([`process`]), CometBFT's Go peer ([`go_peer`]), scripted peers
//! ([`scripted`]) and byte-stream checks come from the `p2p-conn-interop`
//! workspace crate, which the CLI's tests share.
#![allow(dead_code, unused_imports)]

pub use p2p_conn_interop::alloc;
pub use p2p_conn_interop::capture;

pub use p2p_conn_interop::compare::{check_bytes, check_bytes_at};
pub use p2p_conn_interop::{go_peer, process, scripted};

pub use p2p_conn::testkit::*;
pub use p2p_conn_interop::proptest_config;

/// Run one test at a time while the guard lives: the memory tests count
/// every allocation of the process, so none may run beside another.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Resume a tokio task's panic in the caller (or fail with the task's
/// cancellation).
pub fn rethrow(e: tokio::task::JoinError) -> ! {
    match e.try_into_panic() {
        Ok(payload) => std::panic::resume_unwind(payload),
        Err(e) => panic!("task failed: {e}"),
    }
}

/// Run-length summary of a size list, e.g. `[1024 x2, 1, 1024 x2, 1]`; after
/// 12 runs, only how many sizes are left.
pub fn summarize(sizes: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sizes.len() {
        let run = sizes[i..].iter().take_while(|&&n| n == sizes[i]).count();
        parts.push(if run == 1 {
            sizes[i].to_string()
        } else {
            format!("{} x{run}", sizes[i])
        });
        i += run;
        if parts.len() == 12 && i < sizes.len() {
            parts.push(format!("... ({} more)", sizes.len() - i));
            break;
        }
    }
    format!("[{}]", parts.join(", "))
}
