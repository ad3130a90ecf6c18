//! `p2p-conn resources`: what connections cost in memory (issue #10,
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
//!   pass's wall time. `--hold` picks what each connection is (see [`Hold`]).
//!   With `--baseline cometbft-go` the Go peer's `hold` subcommand does the
//!   same through CometBFT's own `SecretConnection`, as holder and peer.
//! - **Stalled handshakes.** A process accepts `--stalled` connections at
//!   once from peers that send nothing, or only their ephemeral key, and
//!   handshakes each under `--stall-timeout`; it reports RSS per stalled
//!   handshake and how each handshake ended (all must end with the timeout).
//! - **Churn.** A process runs `--churn` sequential handshakes and closes
//!   against itself (both roles) and samples RSS every `--churn-sample`: the
//!   first and last samples should match (no leak).

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{FutureExt, StreamExt};
use p2p_conn::io::queue::{Bytes, Sender};
use p2p_conn::io::tokio as ptokio;
use p2p_conn::proto::{Handshake, HandshakeParams};
use p2p_conn::{Config, Error, Identity};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::bench::s;
use crate::WireArgs;
use p2p_conn_interop::cometbft_go::{self, GoVersion};

type Conn = ptokio::SecretConnection<TcpStream>;
type ReadHalf = ptokio::ReadHalf<tokio::net::tcp::OwnedReadHalf>;
type WriteHalf = ptokio::WriteHalf<tokio::net::tcp::OwnedWriteHalf>;

/// Handshakes in flight while a holder connects (as a node dialing its
/// persistent peers at start-up would have a few at once).
const CONCURRENCY: usize = 64;

/// Descriptors a worker needs beyond one per connection (runtime, pipes,
/// listener, stdio).
const SPARE_FDS: u64 = 64;

/// What each held connection is.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// The whole `SecretConnection<TcpStream>` in a `Vec`, no task: the
    /// holder writes and reads on it directly
    Bare,
    /// Split: the read half in a task parked in `fill_buf` (a node's
    /// receive routine), the write half in a `Vec`
    Reader,
    /// As `reader`, with the write half behind a send queue (`Sender`; its
    /// writer task starts with the first message): the shape
    /// docs/embedding.md recommends
    Node,
}

impl Hold {
    fn name(self) -> &'static str {
        match self {
            Hold::Bare => "bare",
            Hold::Reader => "reader",
            Hold::Node => "node",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Hold::Bare => "SecretConnection in a Vec, no task",
            Hold::Reader => "read half in a task parked in fill_buf, write half in a Vec",
            Hold::Node => "read half in a task parked in fill_buf, write half in a send queue",
        }
    }
}

/// How a stalled peer behaves.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stall {
    /// Connects and never sends a byte
    Silent,
    /// Sends its ephemeral key (a well-formed first message), then nothing
    Ephemeral,
}

impl Stall {
    fn name(self) -> &'static str {
        match self {
            Stall::Silent => "silent",
            Stall::Ephemeral => "ephemeral",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Stall::Silent => "peer sends nothing",
            Stall::Ephemeral => "peer sends only its ephemeral key",
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoBaseline {
    /// CometBFT v1.0.1's Go SecretConnection (needs `go`)
    #[value(name = "cometbft-go")]
    CometbftGo,
    /// CometBFT v0.38.26's Go SecretConnection (needs `go`)
    #[value(name = "cometbft-go-0.38")]
    CometbftGo038,
}

impl GoBaseline {
    fn version(self) -> GoVersion {
        match self {
            GoBaseline::CometbftGo => GoVersion::V1,
            GoBaseline::CometbftGo038 => GoVersion::V038,
        }
    }
}

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

/// The hidden worker roles `p2p-conn resources` runs as child processes.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum Worker {
    /// Accept connections until stdin closes; handshake each and echo what
    /// arrives. Prints "listening ADDR" on stderr.
    Peer {
        addr: SocketAddr,
        #[command(flatten)]
        wire: WireArgs,
    },
    /// Dial and hold connections to a `peer`; print one JSON line.
    Hold {
        addr: SocketAddr,
        #[arg(long, value_enum)]
        hold: Hold,
        #[arg(long)]
        connections: u64,
        #[arg(long)]
        message_size: usize,
        #[command(flatten)]
        wire: WireArgs,
    },
    /// Accept `count` connections at once and handshake each under
    /// `timeout`; print one JSON line. Prints "listening ADDR" on stderr.
    Stalled {
        #[arg(long)]
        count: u64,
        #[arg(long)]
        timeout: f64,
        #[arg(long, value_enum)]
        stall: Stall,
        #[command(flatten)]
        wire: WireArgs,
    },
    /// `count` sequential handshakes and closes against ourselves; print
    /// one JSON line.
    Churn {
        #[arg(long)]
        count: u64,
        #[arg(long)]
        sample: u64,
        #[command(flatten)]
        wire: WireArgs,
    },
}

// ---------------------------------------------------------------------------
// /proc

/// Resident set (`VmRSS`) and its peak (`VmHWM`) of a process, in KiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    pub rss_kib: u64,
    pub hwm_kib: u64,
}

impl Status {
    /// This process's figures.
    pub fn own() -> Result<Status, String> {
        Status::read(Path::new("/proc/self/status"))
    }

    /// A process's figures, from `/proc/PID/status` (or `/proc/self/status`).
    pub fn read(path: &Path) -> Result<Status, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "reading {}: {e} (resources needs Linux /proc)",
                path.display()
            )
        })?;
        Status::parse(&text).ok_or_else(|| format!("{} has no VmRSS or VmHWM", path.display()))
    }

    /// `VmRSS:  1234 kB` and `VmHWM:  5678 kB` from a status file's text.
    fn parse(text: &str) -> Option<Status> {
        let field = |name: &str| {
            text.lines().find_map(|line| {
                let value = line.strip_prefix(name)?.strip_prefix(':')?;
                value.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()
            })
        };
        Some(Status {
            rss_kib: field("VmRSS")?,
            hwm_kib: field("VmHWM")?,
        })
    }
}

/// Reset VmHWM to the current RSS (`5` to `/proc/self/clear_refs`, Linux
/// 4.0+); false where that is not permitted.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Raise the soft descriptor limit to the hard one; returns the limit now in
/// force.
#[cfg(unix)]
fn raise_fd_limit() -> Result<u64, String> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(s)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).map_err(s)?;
    }
    Ok(hard)
}

#[cfg(not(unix))]
fn raise_fd_limit() -> Result<u64, String> {
    Err("resources needs Linux".into())
}

fn need_fds(what: &str, n: u64, limit: u64) -> Result<(), String> {
    if n.saturating_add(SPARE_FDS) > limit {
        return Err(format!(
            "{what} {n} needs {} file descriptors per process; the limit here is {limit} (ulimit -Hn)",
            n.saturating_add(SPARE_FDS)
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Results (one JSON line per worker)

/// What a holder reports: `p2p-conn resources-worker hold` and the Go
/// peer's `hold -role holder` print these fields.
#[derive(serde::Deserialize, serde::Serialize, Debug, Clone)]
pub struct HoldResult {
    #[serde(rename = "impl")]
    pub implementation: String,
    /// What each connection is.
    pub hold: String,
    pub connections: u64,
    /// Bytes sent each way on every connection in the pass.
    pub message: u64,
    /// RSS (KiB) before dialing, with every connection idle after its
    /// handshake, and after one message each way on every connection.
    pub rss_before_kib: u64,
    pub rss_idle_kib: u64,
    pub rss_message_kib: u64,
    /// VmHWM (KiB) at the idle reading (the process's peak so far), and at
    /// the end of the pass (the pass's own peak when `peak_reset`).
    pub hwm_idle_kib: u64,
    pub hwm_pass_kib: u64,
    pub peak_reset: bool,
    pub handshake_seconds: f64,
    pub pass_seconds: f64,
    /// p2p-conn: bytes of read and write buffers the library reports
    /// (`buffer_capacity`) over all connections, idle and after the pass.
    #[serde(default)]
    pub buffers_idle: Option<u64>,
    #[serde(default)]
    pub buffers_message: Option<u64>,
    /// p2p-conn: bytes per connection that are not heap allocations the
    /// library makes: what the holder keeps inline per connection (the
    /// `Vec` element) plus the reader task's future, when there is one.
    #[serde(default)]
    pub inline_bytes: Option<u64>,
    /// Go: heap in use and goroutine stacks (KiB), idle and after the pass.
    #[serde(default)]
    pub go_heap_idle_kib: Option<u64>,
    #[serde(default)]
    pub go_stack_idle_kib: Option<u64>,
    #[serde(default)]
    pub go_heap_message_kib: Option<u64>,
    #[serde(default)]
    pub go_stack_message_kib: Option<u64>,
}

impl HoldResult {
    fn per_conn(&self, kib: u64) -> f64 {
        (kib as f64 - self.rss_before_kib as f64) * 1024.0 / self.connections as f64
    }
    /// RSS bytes per idle connection.
    pub fn idle_per_conn(&self) -> f64 {
        self.per_conn(self.rss_idle_kib)
    }
    /// RSS bytes per connection after one message each way.
    pub fn message_per_conn(&self) -> f64 {
        self.per_conn(self.rss_message_kib)
    }
    /// Peak RSS over the pass, bytes per connection above the start.
    pub fn peak_per_conn(&self) -> f64 {
        self.per_conn(self.hwm_pass_kib)
    }
}

#[derive(serde::Deserialize, serde::Serialize, Debug, Clone)]
pub struct StalledResult {
    pub stall: String,
    pub handshakes: u64,
    pub timeout_seconds: f64,
    /// RSS (KiB) before accepting, and with every handshake stalled.
    pub rss_before_kib: u64,
    pub rss_stalled_kib: u64,
    /// Handshakes that had already ended at the stalled reading (should be 0).
    pub ended_before_reading: u64,
    /// How the handshakes ended: with `Error::Timeout`, or otherwise.
    pub timed_out: u64,
    pub other_errors: u64,
    pub succeeded: u64,
    /// The first other error, if any.
    pub first_other_error: Option<String>,
    /// Shortest and longest time from a handshake's start to its end.
    pub min_seconds: f64,
    pub max_seconds: f64,
    /// Seconds from the first accept to the stalled reading.
    pub reading_after_seconds: f64,
}

impl StalledResult {
    pub fn per_handshake(&self) -> f64 {
        (self.rss_stalled_kib as f64 - self.rss_before_kib as f64) * 1024.0 / self.handshakes as f64
    }
}

#[derive(serde::Deserialize, serde::Serialize, Debug, Clone)]
pub struct ChurnResult {
    pub handshakes: u64,
    pub rss_before_kib: u64,
    /// (handshakes done, RSS KiB) every `sample` handshakes.
    pub samples: Vec<(u64, u64)>,
    pub hwm_kib: u64,
    pub seconds: f64,
}

impl ChurnResult {
    /// RSS growth per handshake between the first and the last sample, in
    /// bytes.
    pub fn growth_per_handshake(&self) -> Option<f64> {
        let (&(n0, r0), &(n1, r1)) = (self.samples.first()?, self.samples.last()?);
        (n1 > n0).then(|| (r1 as f64 - r0 as f64) * 1024.0 / (n1 - n0) as f64)
    }
}

fn print_json_line<T: serde::Serialize>(kind: &str, value: &T) -> Result<(), String> {
    let mut v = serde_json::to_value(value).map_err(s)?;
    if let serde_json::Value::Object(m) = &mut v {
        m.insert("kind".into(), kind.into());
    }
    println!("{v}");
    Ok(())
}

// ---------------------------------------------------------------------------
// The command

fn wire_flags(w: &WireArgs) -> Vec<String> {
    vec![
        "--frame-size".into(),
        w.frame_size.to_string(),
        "--flush-size".into(),
        w.flush_size.to_string(),
        "--read-buffer".into(),
        w.read_buffer.to_string(),
        "--backend".into(),
        w.backend.to_string(),
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

pub fn run(args: ResourcesArgs) -> Result<(), String> {
    args.wire.config().validate().map_err(s)?;
    if !Path::new("/proc/self/status").exists() {
        return Err("resources reads /proc/self/status: Linux only".into());
    }
    let limit = raise_fd_limit()?;
    if args.connections > 0 {
        need_fds("--connections", args.connections, limit)?;
    }
    if args.stalled > 0 {
        need_fds("--stalled", args.stalled, limit)?;
        crate::seconds("--stall-timeout", args.stall_timeout).map_err(|f| f.0)?;
    }
    if args.churn > 0 && args.churn_sample == 0 {
        return Err("--churn-sample must be at least 1".into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("locating this program: {e}"))?;
    let go_peer = match args.baseline {
        Some(b) if args.connections > 0 => Some(cometbft_go::build(b.version()).map_err(s)?),
        _ => None,
    };
    if !args.json {
        println!(
            "p2p-conn resources: process RSS (VmRSS, VmHWM from /proc) on loopback TCP; descriptor limit {limit} per process; frame {}, read buffer {}, backend {}",
            args.wire.frame_size, args.wire.read_buffer, args.wire.backend
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
            return Err(format!(
                "stalled handshakes ({}) did not all end with the timeout, or ended before the reading",
                failed.join(", ")
            ));
        }
    }
    if args.churn > 0 {
        let r = churn(&exe, &args)?;
        print_churn(&args, &r)?;
    }
    Ok(())
}

/// A child that prints `listening ADDR` on stderr first; its later stderr
/// lines are passed through.
struct Listening {
    child: std::process::Child,
    addr: SocketAddr,
}

impl Listening {
    fn spawn(cmd: &mut Command, what: &str) -> Result<Listening, String> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting the {what}: {e}"))?;
        let mut stderr = std::io::BufReader::new(child.stderr.take().ok_or("no stderr")?);
        let mut line = String::new();
        stderr.read_line(&mut line).map_err(s)?;
        let Some(addr) = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|a| a.parse().ok())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("the {what} printed {:?}", line.trim()));
        };
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                eprintln!("{line}");
            }
        });
        Ok(Listening { child, addr })
    }

    /// Close its stdin (peers exit then) and collect its output.
    fn finish(mut self, what: &str) -> Result<String, String> {
        drop(self.child.stdin.take());
        let out = self
            .child
            .wait_with_output()
            .map_err(|e| format!("waiting for the {what}: {e}"))?;
        if !out.status.success() {
            return Err(format!("the {what} failed ({})", out.status));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// Run `cmd` to the end and parse its one JSON line.
fn json_output<T: serde::de::DeserializeOwned>(cmd: &mut Command, what: &str) -> Result<T, String> {
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("starting the {what}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "the {what} failed ({}): {}",
            out.status,
            text.trim()
        ));
    }
    parse_line(&text, what)
}

fn parse_line<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, String> {
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).map_err(|e| format!("the {what} printed {line:?}: {e}"))
}

fn hold_ours(exe: &Path, args: &ResourcesArgs, hold: Hold) -> Result<HoldResult, String> {
    let wire = wire_flags(&args.wire);
    let peer = Listening::spawn(
        Command::new(exe)
            .args(["resources-worker", "peer", "127.0.0.1:0"])
            .args(&wire),
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

fn hold_go(peer_bin: &Path, args: &ResourcesArgs) -> Result<HoldResult, String> {
    let peer = Listening::spawn(
        Command::new(peer_bin).args(["hold", "-role", "peer", "127.0.0.1:0"]),
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

fn print_holds(args: &ResourcesArgs, rows: &[HoldResult]) -> Result<(), String> {
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
    /// "p2p-conn [reader]": the implementation and the short name of what
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

fn stalled(exe: &Path, args: &ResourcesArgs, stall: Stall) -> Result<StalledResult, String> {
    let worker = Listening::spawn(
        Command::new(exe)
            .args(["resources-worker", "stalled", "--stall", stall.name()])
            .args(["--count", &args.stalled.to_string()])
            .args(["--timeout", &args.stall_timeout.to_string()])
            .args(wire_flags(&args.wire)),
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
        let mut sock = std::net::TcpStream::connect(worker.addr)
            .map_err(|e| format!("connecting to the stalled-handshake process: {e}"))?;
        sock.write_all(&first).map_err(s)?;
        socks.push(sock);
    }
    let out = worker.finish("stalled-handshake process");
    drop(socks);
    parse_line(&out?, "stalled-handshake process")
}

fn print_stalled(args: &ResourcesArgs, r: &StalledResult) -> Result<(), String> {
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

fn churn(exe: &Path, args: &ResourcesArgs) -> Result<ChurnResult, String> {
    json_output(
        Command::new(exe)
            .args(["resources-worker", "churn"])
            .args(["--count", &args.churn.to_string()])
            .args(["--sample", &args.churn_sample.to_string()])
            .args(wire_flags(&args.wire)),
        "churn process",
    )
}

fn print_churn(args: &ResourcesArgs, r: &ChurnResult) -> Result<(), String> {
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

// ---------------------------------------------------------------------------
// Workers

pub fn run_worker(w: Worker) -> Result<(), String> {
    raise_fd_limit()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(s)?;
    match w {
        Worker::Peer { addr, wire } => rt.block_on(peer(addr, config(&wire)?)),
        Worker::Hold {
            addr,
            hold,
            connections,
            message_size,
            wire,
        } => {
            let r = rt.block_on(holder(
                addr,
                hold,
                connections,
                message_size,
                config(&wire)?,
            ))?;
            print_json_line("hold", &r)
        }
        Worker::Stalled {
            count,
            timeout,
            stall,
            wire,
        } => {
            let timeout = crate::seconds("--timeout", timeout).map_err(|f| f.0)?;
            let cfg = config(&wire)?.handshake_timeout(timeout);
            let r = rt.block_on(stalled_worker(count, stall, cfg))?;
            print_json_line("stalled", &r)
        }
        Worker::Churn {
            count,
            sample,
            wire,
        } => {
            let r = rt.block_on(churn_worker(count, sample.max(1), config(&wire)?))?;
            print_json_line("churn", &r)
        }
    }
}

fn config(wire: &WireArgs) -> Result<Config, String> {
    let cfg = wire.config();
    cfg.validate().map_err(s)?;
    Ok(cfg)
}

/// Let background work (tasks parking, buffers being released, the
/// allocator) come to rest before a reading.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

async fn dial(addr: SocketAddr, identity: &Identity, cfg: &Config) -> Result<Conn, String> {
    let tcp = tokio::time::timeout(Duration::from_secs(3), TcpStream::connect(addr))
        .await
        .map_err(|_| format!("connecting to {addr} timed out"))?
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    tcp.set_nodelay(true).map_err(s)?;
    ptokio::handshake(tcp, identity, cfg).await.map_err(s)
}

/// Any free port on the loopback address.
const LOOPBACK: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// A listener whose accept queue takes a burst of connections: tokio's
/// `TcpListener::bind` asks for 128 places, and a burst of stalled peers
/// beyond that overflows it (their SYNs are dropped and retried a second
/// later). 4096 (the kernel caps it at `net.core.somaxconn`), as Go's
/// `net.Listen` asks for `somaxconn`.
fn listen(addr: SocketAddr) -> Result<tokio::net::TcpListener, String> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
    }
    .map_err(s)?;
    socket.set_reuseaddr(true).map_err(s)?;
    socket
        .bind(addr)
        .map_err(|e| format!("binding {addr}: {e}"))?;
    socket.listen(4096).map_err(s)
}

/// Accept until stdin closes: handshake each connection and echo what
/// arrives on it.
async fn peer(addr: SocketAddr, cfg: Config) -> Result<(), String> {
    let listener = listen(addr)?;
    eprintln!("listening {}", listener.local_addr().map_err(s)?);
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(0);
    });
    let identity = Arc::new(Identity::generate());
    let cfg = Arc::new(cfg);
    loop {
        let (tcp, _) = listener.accept().await.map_err(s)?;
        let (identity, cfg) = (identity.clone(), cfg.clone());
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            let mut conn = match ptokio::handshake(tcp, &identity, &cfg).await {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("p2p-conn resources peer: handshake failed: {e}");
                    return;
                }
            };
            loop {
                let data = match conn.fill_buf().await {
                    Ok(d) if !d.is_empty() => d.to_vec(),
                    _ => return,
                };
                conn.consume(data.len());
                if conn.write_all(&data).await.is_err() || conn.flush().await.is_err() {
                    return;
                }
            }
        });
    }
}

/// What a holder keeps.
enum Held {
    Bare(Vec<Conn>),
    Reader(Vec<WriteHalf>),
    Node(Vec<Sender>),
}

/// A reader task reports (connection, read buffer bytes after the release)
/// once a whole message has arrived.
type Echoed = tokio::sync::mpsc::UnboundedSender<(usize, usize)>;

/// A node's receive routine, reduced: parked in `fill_buf` for as long as
/// the connection lives; reports each whole `message` bytes. An `async move`
/// block over its captures, as a node would spawn it: an `async fn` taking
/// the read half by value stored it twice in its future (1808 bytes instead
/// of 896 when measured).
#[allow(clippy::manual_async_fn)]
fn receive(
    mut rx: ReadHalf,
    index: usize,
    message: usize,
    echoed: Echoed,
) -> impl std::future::Future<Output = ()> + Send {
    async move {
        let mut got = 0;
        loop {
            let n = match rx.fill_buf().await {
                Ok(d) if !d.is_empty() => d.len(),
                _ => return,
            };
            rx.consume(n);
            got += n;
            if message > 0 && got >= message {
                got -= message;
                // Poll once more before reporting, as the loop's next
                // `fill_buf` would: a read that finds nothing frees the idle
                // read buffer.
                let _ = rx.fill_buf().now_or_never();
                if echoed.send((index, rx.buffer_capacity())).is_err() {
                    return;
                }
            }
        }
    }
}

async fn holder(
    addr: SocketAddr,
    hold: Hold,
    n: u64,
    message: usize,
    cfg: Config,
) -> Result<HoldResult, String> {
    let n = usize::try_from(n).map_err(s)?;
    let identity = Identity::generate();
    let msg = Bytes::from(vec![0x5a; message]);
    let (echo_tx, mut echo_rx) = tokio::sync::mpsc::unbounded_channel();

    // Warm up the runtime, the crypto code and the allocator with one
    // connection used the same way, then dropped.
    {
        let mut warm = dial(addr, &identity, &cfg).await?;
        if message > 0 {
            warm.write_all(&msg).await.map_err(s)?;
            warm.flush().await.map_err(s)?;
            let mut back = vec![0; message];
            tokio::io::AsyncReadExt::read_exact(&mut warm, &mut back)
                .await
                .map_err(s)?;
        }
    }
    settle().await;
    let before = Status::own()?;

    let start = Instant::now();
    let mut held = match hold {
        Hold::Bare => Held::Bare(Vec::with_capacity(n)),
        Hold::Reader => Held::Reader(Vec::with_capacity(n)),
        Hold::Node => Held::Node(Vec::with_capacity(n)),
    };
    let mut inline_bytes = 0;
    let mut read_idle = 0;
    let mut dials = futures_util::stream::iter(0..n)
        .map(|_| dial(addr, &identity, &cfg))
        .buffer_unordered(CONCURRENCY);
    let mut index = 0;
    while let Some(conn) = dials.next().await {
        let conn = conn.map_err(|e| format!("connection {index}: {e}"))?;
        match &mut held {
            Held::Bare(v) => {
                inline_bytes = std::mem::size_of::<Conn>();
                v.push(conn);
            }
            Held::Reader(_) | Held::Node(_) => {
                let (rx, tx) = conn.into_split();
                read_idle += rx.buffer_capacity();
                let task = receive(rx, index, message, echo_tx.clone());
                let task_bytes = std::mem::size_of_val(&task);
                tokio::spawn(task);
                match &mut held {
                    Held::Reader(v) => {
                        inline_bytes = task_bytes + std::mem::size_of::<WriteHalf>();
                        v.push(tx);
                    }
                    Held::Node(v) => {
                        inline_bytes = task_bytes + std::mem::size_of::<Sender>();
                        v.push(Sender::new(tx, &cfg).map_err(s)?);
                    }
                    Held::Bare(_) => unreachable!(),
                }
            }
        }
        index += 1;
    }
    drop(dials);
    let handshake_seconds = start.elapsed().as_secs_f64();
    settle().await;
    let idle = Status::own()?;
    let buffers_idle = match &held {
        Held::Bare(v) => Some(v.iter().map(|c| c.buffer_capacity()).sum::<usize>()),
        Held::Reader(v) => Some(read_idle + v.iter().map(|w| w.buffer_capacity()).sum::<usize>()),
        Held::Node(_) => None,
    };

    // One message each way, one connection at a time.
    let peak_reset = reset_peak();
    let start = Instant::now();
    let mut read_after = 0;
    if message > 0 {
        let limit = Duration::from_secs(10);
        for i in 0..n {
            let sent = async {
                match &mut held {
                    Held::Bare(v) => {
                        let c = &mut v[i];
                        c.write_all(&msg).await?;
                        c.flush().await?;
                        let mut got = 0;
                        while got < message {
                            let k = c.fill_buf().await?.len();
                            if k == 0 {
                                return Err(std::io::ErrorKind::UnexpectedEof.into());
                            }
                            c.consume(k);
                            got += k;
                        }
                        // As a reader task's next `fill_buf` would: a read
                        // that finds nothing frees the idle read buffer.
                        let _ = c.fill_buf().now_or_never();
                        Ok::<_, std::io::Error>(())
                    }
                    Held::Reader(v) => {
                        v[i].write_all(&msg).await?;
                        v[i].flush().await
                    }
                    Held::Node(v) => v[i].send(msg.clone()).await.map_err(std::io::Error::other),
                }
            };
            tokio::time::timeout(limit, sent)
                .await
                .map_err(|_| format!("connection {i}: sending timed out"))?
                .map_err(|e| format!("connection {i}: {e}"))?;
            if !matches!(held, Held::Bare(_)) {
                let (got, read_buffer) = tokio::time::timeout(limit, echo_rx.recv())
                    .await
                    .map_err(|_| format!("connection {i}: no echo within {limit:?}"))?
                    .ok_or("the reader tasks are gone")?;
                if got != i {
                    return Err(format!("echo on connection {got} while waiting for {i}"));
                }
                read_after += read_buffer;
            }
        }
    }
    let pass_seconds = start.elapsed().as_secs_f64();
    settle().await;
    let after = Status::own()?;
    let buffers_message = match &held {
        Held::Bare(v) => Some(v.iter().map(|c| c.buffer_capacity()).sum::<usize>()),
        Held::Reader(v) => Some(read_after + v.iter().map(|w| w.buffer_capacity()).sum::<usize>()),
        Held::Node(_) => None,
    };
    let result = HoldResult {
        implementation: "p2p-conn".into(),
        hold: format!("{}: {}", hold.name(), hold.describe()),
        connections: n as u64,
        message: message as u64,
        rss_before_kib: before.rss_kib,
        rss_idle_kib: idle.rss_kib,
        rss_message_kib: after.rss_kib,
        hwm_idle_kib: idle.hwm_kib,
        hwm_pass_kib: after.hwm_kib,
        peak_reset,
        handshake_seconds,
        pass_seconds,
        buffers_idle: buffers_idle.map(|b| b as u64),
        buffers_message: buffers_message.map(|b| b as u64),
        inline_bytes: Some(inline_bytes as u64),
        go_heap_idle_kib: None,
        go_stack_idle_kib: None,
        go_heap_message_kib: None,
        go_stack_message_kib: None,
    };
    // Everything stays held until the readings are taken.
    drop(held);
    Ok(result)
}

/// Accept `count` connections and handshake each under the configured
/// timeout, measuring RSS once all are stalled.
async fn stalled_worker(count: u64, stall: Stall, cfg: Config) -> Result<StalledResult, String> {
    let timeout = cfg.handshake_timeout;
    let listener = listen(LOOPBACK)?;
    let addr = listener.local_addr().map_err(s)?;
    let identity = Arc::new(Identity::generate());
    // Warm up with one whole handshake over this listener.
    {
        let other = Identity::generate();
        let (dialed, accepted) = tokio::join!(dial(addr, &other, &cfg), async {
            let (tcp, _) = listener.accept().await.map_err(s)?;
            ptokio::handshake(tcp, &identity, &cfg).await.map_err(s)
        });
        dialed?;
        accepted?;
    }
    settle().await;
    let before = Status::own()?;
    eprintln!("listening {addr}");

    let ended = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(count as usize);
    let mut first_accept = None;
    for _ in 0..count {
        let (tcp, _) = listener.accept().await.map_err(s)?;
        first_accept.get_or_insert_with(Instant::now);
        let (identity, cfg, ended) = (identity.clone(), cfg.clone(), ended.clone());
        tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            let r = ptokio::handshake(tcp, &identity, &cfg).await;
            ended.fetch_add(1, Ordering::SeqCst);
            (r.err(), start.elapsed())
        }));
    }
    // Let every handshake take what the peer sent and wait for more, but read
    // well before the first timeout.
    tokio::time::sleep(Duration::from_millis(300).min(timeout / 4)).await;
    let stalled = Status::own()?;
    let ended_before_reading = ended.load(Ordering::SeqCst) as u64;
    let reading_after = first_accept
        .map(|t| t.elapsed().as_secs_f64())
        .unwrap_or(0.0);

    let (mut timed_out, mut other, mut ok) = (0, 0, 0);
    let mut first_other = None;
    let (mut min, mut max) = (f64::INFINITY, 0f64);
    for t in tasks {
        let (err, took) = t.await.map_err(s)?;
        let took = took.as_secs_f64();
        (min, max) = (min.min(took), max.max(took));
        match err {
            Some(Error::Timeout(_)) => timed_out += 1,
            Some(e) => {
                other += 1;
                first_other.get_or_insert_with(|| e.to_string());
            }
            None => ok += 1,
        }
    }
    Ok(StalledResult {
        stall: stall.name().into(),
        handshakes: count,
        timeout_seconds: timeout.as_secs_f64(),
        rss_before_kib: before.rss_kib,
        rss_stalled_kib: stalled.rss_kib,
        ended_before_reading,
        timed_out,
        other_errors: other,
        succeeded: ok,
        first_other_error: first_other,
        min_seconds: if min.is_finite() { min } else { 0.0 },
        max_seconds: max,
        reading_after_seconds: reading_after,
    })
}

/// `count` sequential handshakes and closes against our own listener (both
/// ends in this process), sampling RSS every `sample`.
async fn churn_worker(count: u64, sample: u64, cfg: Config) -> Result<ChurnResult, String> {
    let listener = listen(LOOPBACK)?;
    let addr = listener.local_addr().map_err(s)?;
    let served = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let server = {
        let (served, failed, cfg) = (served.clone(), failed.clone(), cfg.clone());
        tokio::spawn(async move {
            let identity = Arc::new(Identity::generate());
            while let Ok((tcp, _)) = listener.accept().await {
                let (identity, cfg, served, failed) = (
                    identity.clone(),
                    cfg.clone(),
                    served.clone(),
                    failed.clone(),
                );
                tokio::spawn(async move {
                    let _ = tcp.set_nodelay(true);
                    if ptokio::handshake(tcp, &identity, &cfg).await.is_err() {
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                    served.fetch_add(1, Ordering::SeqCst);
                });
            }
        })
    };
    let identity = Identity::generate();
    // Warm up with one handshake.
    drop(dial(addr, &identity, &cfg).await?);
    while served.load(Ordering::SeqCst) < 1 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    settle().await;
    let before = Status::own()?;
    let start = Instant::now();
    let mut samples = Vec::new();
    for i in 1..=count {
        drop(dial(addr, &identity, &cfg).await?);
        if i % sample == 0 || i == count {
            // Wait for the server side of every handshake so far to end.
            let waited = Instant::now();
            while (served.load(Ordering::SeqCst) as u64) < i + 1 {
                if waited.elapsed() > Duration::from_secs(10) {
                    return Err("the server side of the churn stopped".into());
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            samples.push((i, Status::own()?.rss_kib));
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    server.abort();
    let failed = failed.load(Ordering::SeqCst);
    if failed > 0 {
        return Err(format!("{failed} server-side churn handshakes failed"));
    }
    Ok(ChurnResult {
        handshakes: count,
        rss_before_kib: before.rss_kib,
        samples,
        hwm_kib: Status::own()?.hwm_kib,
        seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_parsed() {
        let text = "Name:\tp2p-conn\nVmPeak:\t  99 kB\nVmHWM:\t   13532 kB\nVmRSS:\t    2048 kB\nThreads:\t3\n";
        assert_eq!(
            Status::parse(text),
            Some(Status {
                rss_kib: 2048,
                hwm_kib: 13532
            })
        );
        assert_eq!(Status::parse("VmRSS:\t1 kB\n"), None);
        assert_eq!(Status::parse("VmRSS:\tlots kB\nVmHWM:\t1 kB\n"), None);
        let own = Status::own().unwrap();
        assert!(own.rss_kib > 0 && own.hwm_kib >= own.rss_kib, "{own:?}");
    }

    #[test]
    fn churn_growth_is_per_handshake_between_first_and_last_sample() {
        let r = ChurnResult {
            handshakes: 3000,
            rss_before_kib: 1000,
            samples: vec![(1000, 2000), (2000, 2001), (3000, 2002)],
            hwm_kib: 3000,
            seconds: 1.0,
        };
        assert_eq!(r.growth_per_handshake(), Some(2.0 * 1024.0 / 2000.0));
    }
}
