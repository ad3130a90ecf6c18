//! The `p2p-conn` binary as a user runs it: keys, netcat-style exchange,
//! failure exits. The helpers every part uses are here; the parts are
//! [`netcat`], [`keys`], [`transfer`], [`flags`], [`refusals`], [`stages`]
//! and [`usage`].

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::process::{run, Feed, Finished, Proc};

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

/// Bound on the commands that run to their end by themselves (`keygen`,
/// `id`, a dial that cannot connect).
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// Bound on a listener's start, from its spawn to listening.
const LISTEN_LIMIT: Duration = Duration::from_secs(5);

/// `p2p-conn args` to its end.
fn run_cli(args: &[&str]) -> Finished {
    run(Path::new(BIN), args, RUN_LIMIT)
}

/// `p2p-conn args` with `stdin`, then end of file.
fn spawn(args: &[&str], stdin: &[u8]) -> Proc {
    Proc::spawn(Path::new(BIN), args, Feed::Now(stdin.to_vec()))
}

/// Start a listener and wait until it listens.
fn spawn_listener(port: u16, extra: &[&str], stdin: &[u8]) -> Proc {
    let addr = format!("127.0.0.1:{port}");
    let mut args = vec!["listen", addr.as_str()];
    args.extend_from_slice(extra);
    let mut listener = spawn(&args, stdin);
    listener.wait_listening(port, Instant::now() + LISTEN_LIMIT);
    listener
}

/// Start `listen 127.0.0.1:0 extra...` and the address it reports on its
/// first stderr line (`listening ADDR`).
fn spawn_listener_any_port(extra: &[&str], feed: Feed) -> (Proc, String) {
    let mut args = vec!["listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut listener = Proc::spawn(Path::new(BIN), &args, feed);
    let line = listener.next_line(Instant::now() + LISTEN_LIMIT);
    match line.strip_prefix("listening ") {
        Some(addr) => {
            let addr = addr.to_string();
            (listener, addr)
        }
        None => listener.fail(&format!("first stderr line {line:?}, not `listening ADDR`")),
    }
}

/// `len` pseudo-random bytes (xorshift64*), so a shifted or repeated chunk
/// cannot compare equal by accident.
fn pseudo_random(len: usize, mut seed: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        v.extend_from_slice(&seed.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    v.truncate(len);
    v
}

/// `p2p-conn args` with stdin and stdout as given (a piped stdout is
/// collected; stdin gets no input).
fn spawn_io(args: &[&str], stdin: Stdio, stdout: Stdio) -> Proc {
    Proc::start(
        Command::new(BIN).args(args).stdin(stdin).stdout(stdout),
        Feed::none(),
    )
}

fn file_in(path: &std::path::Path) -> Stdio {
    Stdio::from(std::fs::File::open(path).unwrap())
}

fn file_out(path: &std::path::Path) -> Stdio {
    Stdio::from(std::fs::File::create(path).unwrap())
}

mod flags;
mod keys;
mod netcat;
mod refusals;
mod stages;
mod transfer;
mod usage;
