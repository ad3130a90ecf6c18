//! `p2p-conn-lab resources`: what connections cost in memory (issue #10,
//! "Bounded resources"). Every figure is the resident set of a process
//! (`VmRSS`, and its peak `VmHWM`, from `/proc/self/status`), so it counts
//! everything the connections cost in user space: heap, allocator slack,
//! task and goroutine stacks. Kernel socket buffers are not in it.
//!
//! Each measurement runs in a fresh child process of this binary (hidden
//! `resources-worker` subcommand), so one cannot reuse memory another freed:
//!
//! - **Idle scale.** A holder process dials `--connections` connections to a
//!   peer process over loopback TCP (each process then holds one descriptor
//!   per connection, so N can reach the descriptor limit rather than half of
//!   it), handshakes all of them and holds them; then sends one
//!   `--message-size` message on each, one connection at a time, and waits
//!   for the peer's echo. It reports RSS before dialing, with all connections
//!   idle, and after the message pass once the read buffers have been
//!   released, plus the peak (VmHWM, reset just before the pass) and the
//!   pass's wall time. `--hold` picks what each connection is (see
//!   [`worker::Hold`]).
//!   With `--baseline cometbft-go` the Go peer's `hold` subcommand does the
//!   same through CometBFT's own `SecretConnection`, as holder and peer.
//! - **Stalled handshakes.** A process accepts `--stalled` connections at
//!   once from peers that send nothing, or only their ephemeral key, and
//!   handshakes each under `--stall-timeout`; it reports RSS per stalled
//!   handshake and how each handshake ended (all must end with the timeout).
//! - **Churn.** A process runs `--churn` sequential handshakes and closes
//!   against itself (both roles) and samples RSS every `--churn-sample`: the
//!   first and last samples should match (no leak).
//!
//! The modules: [`worker`] (the child processes), [`results`] (what they
//! print), [`procfs`] (what is read from the kernel); this one runs the
//! workers and prints the tables.

pub mod procfs;
pub mod results;
pub mod worker;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use p2p_conn::proto::{Handshake, HandshakeParams};
use p2p_conn::Identity;

use crate::bench::baselines::GoBaseline;
use crate::child::Listening;
use crate::error::LabError;
use p2p_conn_cli::conn::{self, WireArgs};
use procfs::{need_fds, raise_fd_limit};
use results::{print_json_line, ChurnResult, HoldResult, StalledResult};
use worker::{Hold, Stall, CONCURRENCY};

#[derive(clap::Args, Debug, Clone)]
pub struct ResourcesArgs {
    /// Connections one holder process keeps open (the other ends are in a
    /// peer process; each needs one file descriptor per connection); 0 skips
    /// the idle-scale measurement
    #[arg(long, default_value_t = 10_000)]
    connections: u64,
    /// What each held connection is; a list runs each in its own holder
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Hold::Bare, Hold::Reader, Hold::Node])]
    hold: Vec<Hold>,
    /// Bytes of the one message sent each way on every held connection
    /// (0: no message pass)
    #[arg(long, default_value_t = 100)]
    message_size: usize,
    /// Concurrent stalled handshakes; 0 skips them
    #[arg(long, default_value_t = 1000)]
    stalled: u64,
    /// How the stalled peers behave; a list runs each in its own process
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Stall::Silent, Stall::Ephemeral])]
    stall: Vec<Stall>,
    /// Handshake timeout for the stalled handshakes, in seconds
    #[arg(long, default_value_t = 2.0)]
    stall_timeout: f64,
    /// Sequential handshakes and closes; 0 skips the churn measurement
    #[arg(long, default_value_t = 10_000)]
    churn: u64,
    /// Sample RSS every this many churn handshakes
    #[arg(long, default_value_t = 1000)]
    churn_sample: u64,
    /// Also hold the connections through CometBFT's Go SecretConnection
    /// (holder and peer both Go, built from interop/cometbft-go)
    #[arg(long, value_enum)]
    baseline: Option<GoBaseline>,
    /// Print one JSON object per line ("kind": "hold", "stalled" or "churn")
    /// instead of text
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    wire: WireArgs,
}

fn wire_flags(w: &WireArgs) -> Vec<String> {
    vec![
        "--frame-size".into(),
        w.frame_size.to_string(),
        "--flush-size".into(),
        w.flush_size.to_string(),
        "--read-buffer".into(),
        w.read_buffer.to_string(),
        "--backend".into(),
        w.backend().to_string(),
    ]
}

fn kib(k: u64) -> String {
    format!("{:.1} MiB", k as f64 / 1024.0)
}

fn bytes(b: f64) -> String {
    if b.abs() >= 1024.0 {
        format!("{:.2} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

pub fn run(args: ResourcesArgs) -> Result<(), LabError> {
    args.wire.config().validate()?;
    if !Path::new("/proc/self/status").exists() {
        return Err(LabError::usage(
            "resources reads /proc/self/status: Linux only",
        ));
    }
    let limit = raise_fd_limit()?;
    if args.connections > 0 {
        need_fds("--connections", args.connections, limit)?;
    }
    if args.stalled > 0 {
        need_fds("--stalled", args.stalled, limit)?;
        conn::seconds("--stall-timeout", args.stall_timeout)?;
    }
    if args.churn > 0 && args.churn_sample == 0 {
        return Err(LabError::usage("--churn-sample must be at least 1"));
    }
    let exe = std::env::current_exe()
        .map_err(|e| LabError::failed(format!("locating this program: {e}")))?;
    let go_peer = match args.baseline {
        Some(b) if args.connections > 0 => Some(crate::bench::baselines::go_peer(b.0)?),
        _ => None,
    };
    if !args.json {
        println!(
            "p2p-conn resources: process RSS (VmRSS, VmHWM from /proc) on loopback TCP; descriptor limit {limit} per process; frame {}, read buffer {}, backend {}",
            args.wire.frame_size, args.wire.read_buffer, args.wire.backend_choice()
        );
    }
    if args.connections > 0 {
        let mut rows = Vec::new();
        for &hold in &args.hold {
            rows.push(hold_ours(&exe, &args, hold)?);
        }
        if let Some(peer) = &go_peer {
            rows.push(hold_go(peer, &args)?);
        }
        print_holds(&args, &rows)?;
    }
    if args.stalled > 0 {
        if !args.json {
            println!();
            println!(
                "{} concurrent stalled handshakes, {} s handshake timeout (RSS of the accepting process):",
                args.stalled, args.stall_timeout
            );
        }
        let mut failed = Vec::new();
        for &stall in &args.stall {
            let r = stalled(&exe, &args, stall)?;
            print_stalled(&args, &r)?;
            if r.timed_out != r.handshakes || r.ended_before_reading > 0 {
                failed.push(r.stall.clone());
            }
        }
        if !failed.is_empty() {
            return Err(LabError::failed(format!(
                "stalled handshakes ({}) did not all end with the timeout, or ended before the reading",
                failed.join(", ")
            )));
        }
    }
    if args.churn > 0 {
        let r = churn(&exe, &args)?;
        print_churn(&args, &r)?;
    }
    Ok(())
}

/// Run `cmd` to the end and parse its one JSON line.
fn json_output<T: serde::de::DeserializeOwned>(
    cmd: &mut Command,
    what: &str,
) -> Result<T, LabError> {
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| LabError::failed(format!("starting the {what}: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(LabError::failed(format!(
            "the {what} failed ({}): {}",
            out.status,
            text.trim()
        )));
    }
    parse_line(&text, what)
}

fn parse_line<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, LabError> {
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .map_err(|e| LabError::failed(format!("the {what} printed {line:?}: {e}")))
}

fn hold_ours(exe: &Path, args: &ResourcesArgs, hold: Hold) -> Result<HoldResult, LabError> {
    let wire = wire_flags(&args.wire);
    let peer = Listening::spawn(
        Command::new(exe)
            .args(["resources-worker", "peer", "127.0.0.1:0"])
            .args(&wire)
            .stdout(Stdio::piped()),
        "peer process",
    )?;
    let result = json_output(
        Command::new(exe)
            .args(["resources-worker", "hold", "--hold", hold.name()])
            .args(["--connections", &args.connections.to_string()])
            .args(["--message-size", &args.message_size.to_string()])
            .args(&wire)
            .arg(peer.addr.to_string()),
        "holder process",
    );
    peer.finish("peer process")?;
    result
}

fn hold_go(peer_bin: &Path, args: &ResourcesArgs) -> Result<HoldResult, LabError> {
    let peer = Listening::spawn(
        Command::new(peer_bin)
            .args(["hold", "-role", "peer", "127.0.0.1:0"])
            .stdout(Stdio::piped()),
        "Go peer process",
    )?;
    let result = json_output(
        Command::new(peer_bin)
            .args(["hold", "-role", "holder"])
            .args(["-n", &args.connections.to_string()])
            .args(["-message", &args.message_size.to_string()])
            .args(["-concurrency", &CONCURRENCY.to_string()])
            .arg(peer.addr.to_string()),
        "Go holder process",
    );
    peer.finish("Go peer process")?;
    result
}

fn print_holds(args: &ResourcesArgs, rows: &[HoldResult]) -> Result<(), LabError> {
    if args.json {
        for r in rows {
            print_json_line("hold", r)?;
        }
        return Ok(());
    }
    println!();
    println!(
        "{} connections held by one process, their other ends in a peer process; RSS per connection above the holder's RSS before dialing:",
        args.connections
    );
    println!(
        "  idle: after the handshakes; message: after one {}-byte message each way on every connection, one connection at a time;",
        args.message_size
    );
    println!("  peak: VmHWM over that pass; pass: its wall time; handshakes: time to dial and handshake all, 64 at a time");
    println!(
        "{:<34} {:>10} {:>10} {:>10} {:>10} {:>8} {:>11}",
        "holder [each connection]", "idle", "message", "peak", "peak RSS", "pass", "handshakes"
    );
    for r in rows {
        println!(
            "{:<34} {:>10} {:>10} {:>10} {:>10} {:>7.2}s {:>10.2}s",
            r.label(),
            bytes(r.idle_per_conn()),
            bytes(r.message_per_conn()),
            bytes(r.peak_per_conn()),
            kib(r.hwm_pass_kib),
            r.pass_seconds,
            r.handshake_seconds
        );
    }
    for r in rows {
        let mut notes = vec![format!(
            "RSS {} before, {} idle, {} after; peak while connecting {}",
            kib(r.rss_before_kib),
            kib(r.rss_idle_kib),
            kib(r.rss_message_kib),
            kib(r.hwm_idle_kib)
        )];
        if let (Some(i), Some(m)) = (r.buffers_idle, r.buffers_message) {
            notes.push(format!(
                "library buffers {} idle, {} after the pass ({} per connection)",
                bytes(i as f64),
                bytes(m as f64),
                bytes(m as f64 / r.connections as f64)
            ));
        }
        if let Some(b) = r.inline_bytes {
            notes.push(format!("{b} bytes inline per connection"));
        }
        if let (Some(h), Some(st)) = (r.go_heap_idle_kib, r.go_stack_idle_kib) {
            notes.push(format!(
                "Go heap in use {} idle, {} after, stacks {} idle, {} after (Go readings after debug.FreeOSMemory)",
                kib(h),
                kib(r.go_heap_message_kib.unwrap_or(0)),
                kib(st),
                kib(r.go_stack_message_kib.unwrap_or(0))
            ));
        }
        if !r.peak_reset {
            notes.push("VmHWM could not be reset: the peak is the process's".into());
        }
        println!("  {}: {}", r.label(), r.hold_text());
        println!("    {}", notes.join("; "));
    }
    Ok(())
}

impl HoldResult {
    /// "p2p-conn \[reader\]": the implementation and the short name of what
    /// each connection is (the `hold` text before its colon).
    fn label(&self) -> String {
        match self.hold.split_once(':') {
            Some((k, _)) => format!("{} [{k}]", self.implementation),
            None => self.implementation.clone(),
        }
    }

    fn hold_text(&self) -> &str {
        self.hold
            .split_once(':')
            .map_or(self.hold.as_str(), |(_, t)| t.trim())
    }
}

fn stalled(exe: &Path, args: &ResourcesArgs, stall: Stall) -> Result<StalledResult, LabError> {
    let worker = Listening::spawn(
        Command::new(exe)
            .args(["resources-worker", "stalled", "--stall", stall.name()])
            .args(["--count", &args.stalled.to_string()])
            .args(["--timeout", &args.stall_timeout.to_string()])
            .args(wire_flags(&args.wire))
            .stdout(Stdio::piped()),
        "stalled-handshake process",
    )?;
    let first = match stall {
        Stall::Silent => Vec::new(),
        Stall::Ephemeral => Handshake::new(&Identity::generate(), HandshakeParams::default())
            .outgoing()
            .to_vec(),
    };
    // The stalling peers: connect, send (at most) the ephemeral key, then
    // hold the socket open until the worker has reported.
    let mut socks = Vec::with_capacity(args.stalled as usize);
    for _ in 0..args.stalled {
        let mut sock = std::net::TcpStream::connect(worker.addr).map_err(|e| {
            LabError::failed(format!("connecting to the stalled-handshake process: {e}"))
        })?;
        sock.write_all(&first)?;
        socks.push(sock);
    }
    let out = worker.finish("stalled-handshake process");
    drop(socks);
    parse_line(&out?, "stalled-handshake process")
}

fn print_stalled(args: &ResourcesArgs, r: &StalledResult) -> Result<(), LabError> {
    if args.json {
        return print_json_line("stalled", r);
    }
    let how = match r.stall.as_str() {
        "silent" => Stall::Silent.describe(),
        _ => Stall::Ephemeral.describe(),
    };
    println!(
        "  {how:<34} {:>10} RSS each ({} -> {}); {} of {} ended with the timeout after {:.2}-{:.2} s{}",
        bytes(r.per_handshake()),
        kib(r.rss_before_kib),
        kib(r.rss_stalled_kib),
        r.timed_out,
        r.handshakes,
        r.min_seconds,
        r.max_seconds,
        match (&r.first_other_error, r.ended_before_reading) {
            (Some(e), _) => format!("; {} others, first: {e}", r.other_errors + r.succeeded),
            (None, 0) => String::new(),
            (None, k) => format!("; {k} ended before the reading"),
        }
    );
    Ok(())
}

fn churn(exe: &Path, args: &ResourcesArgs) -> Result<ChurnResult, LabError> {
    json_output(
        Command::new(exe)
            .args(["resources-worker", "churn"])
            .args(["--count", &args.churn.to_string()])
            .args(["--sample", &args.churn_sample.to_string()])
            .args(wire_flags(&args.wire)),
        "churn process",
    )
}

fn print_churn(args: &ResourcesArgs, r: &ChurnResult) -> Result<(), LabError> {
    if args.json {
        return print_json_line("churn", r);
    }
    println!();
    let (Some(first), Some(last)) = (r.samples.first(), r.samples.last()) else {
        println!("churn: {} handshakes, no samples", r.handshakes);
        return Ok(());
    };
    println!(
        "churn: {} sequential handshakes and closes (both ends in one process) in {:.2} s: RSS {} at {}, {} at {} ({} per handshake between them); peak {}",
        r.handshakes,
        r.seconds,
        kib(first.1),
        first.0,
        kib(last.1),
        last.0,
        r.growth_per_handshake().map(bytes).unwrap_or_else(|| "-".into()),
        kib(r.hwm_kib)
    );
    let all: Vec<String> = r.samples.iter().map(|(n, k)| format!("{n}: {k}")).collect();
    println!("  samples (handshakes: RSS KiB): {}", all.join(", "));
    Ok(())
}
