//! `p2p-conn-lab profile`: the bench workload (or a transfer to a listening peer
//! with `--connect`) under a sampling profiler (`pprof`, SIGPROF at
//! `--frequency` Hz of CPU time), written as a flamegraph SVG, followed by
//! the seal/write/queue breakdown of our side's connections.
//!
//! The profiler samples this process only: with `--connect` the peer (a
//! `p2p-conn listen`, the Go peer's `listen`, a node) is not in the picture,
//! and the breakdown covers our connection's send side (and whatever the
//! peer sent back).

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use p2p_conn::io::queue::{Bytes, Sender};
use p2p_conn::io::tokio as ptokio;
use p2p_conn::stats::ConnStats;
use p2p_conn::{Config, Identity};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use crate::bench::breakdown::Breakdown;
use crate::bench::measure::{Cpu, Mark, Row};
use crate::bench::report::{self, print_row};
use crate::bench::transfer::run_ours;
use crate::bench::workload::{
    progress, tokio_runtime, Adapter, Workload, WorkloadArgs, COUNT_PROGRESS, PROGRESS,
};
use crate::error::LabError;
use p2p_conn_cli::conn;

mod svg;

#[derive(clap::Args, Debug, Clone)]
pub struct ProfileArgs {
    #[command(flatten)]
    work: WorkloadArgs,
    /// Instead of the loopback pair, dial ADDR (or ID@ADDR), a listening peer
    /// such as `p2p-conn listen` or the Go peer's `listen`, and send it
    /// --mib MiB in --size messages (tokio; with --producers, through the
    /// send queue), then read what it sends back until its end of stream
    #[arg(long, value_name = "ADDR")]
    connect: Option<String>,
    /// Where to write the flamegraph SVG
    #[arg(long, default_value = "p2p-conn-profile.svg")]
    out: PathBuf,
    /// Samples per second of CPU time, per thread (1 to 10000)
    #[arg(long, default_value_t = 999)]
    frequency: i32,
    /// Without --mib: send the workload in rounds of 64 MiB until the
    /// profiler has taken this many samples (or for at most 60 s)
    #[arg(long, default_value_t = TARGET_SAMPLES, conflicts_with = "mib")]
    samples: u64,
    /// Draw the stacks as sampled (default: each run of tokio runtime,
    /// thread start and call glue frames folded into one frame)
    #[arg(long)]
    raw_stacks: bool,
}

/// Below this many samples `profile` warns that the flamegraph's shares
/// are noise. A frame holding a share p of n samples is known to a relative
/// standard error of sqrt((1 - p) / (p n)) (binomial): at 500 samples, a
/// frame with 5% of them (the size of the socket write or the queue in a
/// 64 KiB profile) is known to ±20%, one with 20% to ±9%; at the 40 to 80
/// samples of a 256 MiB run (the old default), it is 2 to 4 samples,
/// ±69% to ±49%.
pub const MIN_USEFUL_SAMPLES: u64 = 500;

/// `--samples`' default: a 5% frame to ±10%, a 1% frame to ±22%.
const TARGET_SAMPLES: u64 = 2000;

/// Each round of a run without `--mib`.
const ROUND_MIB: u64 = 64;

/// A run without `--mib` stops after this long even when short of
/// `--samples` (and warns if short of `MIN_USEFUL_SAMPLES`).
const SAMPLING_LIMIT: Duration = Duration::from_secs(60);

/// Bound on waiting for a `--connect` peer's end of stream once everything
/// is sent.
const PEER_END_LIMIT: Duration = Duration::from_secs(10);

/// Shared objects the profiler does not unwind from: the unwinder itself
/// (a signal inside it would deadlock) and the vDSO. libc stays in, so the
/// time in the socket calls (`write`, `sendto`, `recvfrom`) shows as theirs.
const BLOCKLIST: [&str; 3] = ["libgcc", "pthread", "vdso"];

pub fn run(args: ProfileArgs) -> Result<(), LabError> {
    #[cfg(not(unix))]
    {
        let _ = args;
        Err(LabError::usage(
            "profile needs a Unix system (pprof samples with SIGPROF)",
        ))
    }
    #[cfg(unix)]
    run_unix(args)
}

#[cfg(unix)]
fn run_unix(args: ProfileArgs) -> Result<(), LabError> {
    if !(1..=10_000).contains(&args.frequency) {
        return Err(LabError::usage(
            "--frequency must be 1 to 10000 samples per second",
        ));
    }
    let cfg = args.work.config()?;
    // With --mib, one run of that size; without, rounds until --samples.
    let rounds = args.work.mib.is_none();
    let w = if rounds {
        Workload::new(args.work.size, args.work.bytes_of(ROUND_MIB)?)?
    } else {
        args.work.workload()?
    };
    if args.connect.is_some() {
        if args.work.adapter != Adapter::Tokio || args.work.rate.is_some() {
            return Err(LabError::usage(
                "--connect sends through the tokio adapter (with --producers, the send queue), unpaced: drop --adapter and --rate",
            ));
        }
        if args.work.producers > 255 {
            return Err(LabError::usage("--producers: at most 255"));
        }
    }
    let target = match &args.connect {
        Some(addr) => format!("to {addr}"),
        None => "over loopback TCP".into(),
    };
    let (rounds_of, until) = if rounds {
        let until = format!(
            ", until {} samples or {} s",
            args.samples,
            SAMPLING_LIMIT.as_secs()
        );
        ("rounds of ", until)
    } else {
        ("", String::new())
    };
    let heading = format!(
        "p2p-conn profile: {rounds_of}{}{until}; sampling at {} Hz",
        args.work.describe(&w, &target),
        args.frequency,
    );
    println!("{heading}");
    PROGRESS.store(0, Ordering::Relaxed);
    let bar = Progress::start((!rounds).then(|| w.bytes()));
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(args.frequency)
        .blocklist(&BLOCKLIST)
        .build()
        .map_err(|e| LabError::Profiler("cannot start the profiler", e))?;
    let started = Instant::now();
    let timed_out = std::cell::Cell::new(false);
    // Whether to run another round: without --mib, while short of --samples
    // and within the time limit.
    let more = || {
        if !rounds {
            return false;
        }
        if started.elapsed() >= SAMPLING_LIMIT {
            timed_out.set(true);
            return false;
        }
        let taken: isize = guard
            .report()
            .build_unresolved()
            .map_or(0, |r| r.data.values().sum());
        (taken.max(0) as u64) < args.samples
    };
    let result = match &args.connect {
        None => run_rounds(&args.work, &w, &cfg, &more),
        Some(addr) => run_connect(addr, &args.work, &w, &cfg, &more),
    };
    // Build the report before the guard goes: dropping it discards the
    // samples.
    let report = guard
        .report()
        .frames_post_processor(drop_sampler_frames)
        .build();
    drop(guard);
    bar.finish();
    let row = result?;
    let report = report.map_err(|e| LabError::Profiler("the profiler's report failed", e))?;
    let samples: isize = report.data.values().sum();
    if samples == 0 {
        print_row(&row, "no samples");
        return Err(LabError::failed(format!(
            "no samples taken: the run used {:.3} s of CPU, too little to sample (the kernel delivers SIGPROF at its timer tick: a few hundred samples per CPU second at most); raise --mib, or drop it to sample until --samples",
            row.cpu.map_or(0.0, |c| c.total())
        )));
    }
    let samples = samples as u64;
    let few = samples < MIN_USEFUL_SAMPLES;
    let mut options = pprof::flamegraph::Options::default();
    options.title = format!("p2p-conn profile: {}", row.name);
    options.subtitle = Some(format!(
        "{} x {} B ({:.1} MiB) {target}, backend {}, {} Hz, {samples} samples{}",
        row.messages,
        w.size,
        row.bytes as f64 / (1u64 << 20) as f64,
        args.work.wire.backend_choice(),
        args.frequency,
        if few {
            format!(" (too few: below {MIN_USEFUL_SAMPLES}, shares are noise)")
        } else {
            String::new()
        }
    ));
    options.count_name = "samples".into();
    let note = if args.connect.is_some() {
        "until the last byte was handed to the socket"
    } else {
        "content verified"
    };
    let warning = few.then(|| {
        let how = if !rounds {
            "drop --mib to sample until --samples, or raise --mib"
        } else if timed_out.get() {
            "the run stopped at its time limit; raise --size or --frequency"
        } else {
            "raise --samples"
        };
        few_samples_warning(samples, how)
    });
    let breakdown = match &row.breakdown {
        Some(b) => b.text(&format!("breakdown, {}", row.name)),
        None => format!(
            "breakdown, {}: not measured (tokio-util's Framed makes the socket calls of the codec adapter)\n",
            row.name
        ),
    };
    // The SVG keeps what the terminal shows: the run, its figures, the
    // breakdown, and the machine.
    let mut footer = vec![heading, report::row_text(&row, note)];
    footer.extend(warning.clone());
    footer.extend(breakdown.lines().map(str::to_string));
    footer.push(format!(
        "{}; {}; stacks {}",
        svg::cpu().unwrap_or_else(|| "CPU not known".into()),
        p2p_conn_cli::wall_clock::now(),
        if args.raw_stacks {
            "as sampled (--raw-stacks)"
        } else {
            "with runtime frames folded (--raw-stacks draws them)"
        },
    ));
    let stacks = report.data.iter().map(|(frames, &count)| svg::Stack {
        thread: frames.thread_name_or_id(),
        frames: frames
            .frames
            .iter()
            .rev()
            .flat_map(|f| f.iter().rev())
            .map(|s| s.name())
            .collect(),
        count: count.max(0) as u64,
    });
    let lines = svg::lines(stacks, args.raw_stacks);
    let mut svg = Vec::new();
    pprof::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)
        .map_err(|e| LabError::failed(format!("cannot draw the flamegraph: {e}")))?;
    let svg = String::from_utf8_lossy(&svg);
    let svg = svg::with_footer(&svg, &footer)
        .ok_or_else(|| LabError::failed("cannot draw the flamegraph: not the SVG expected"))?;
    std::fs::write(&args.out, svg)
        .map_err(|e| LabError::failed(format!("cannot write {}: {e}", args.out.display())))?;
    print_row(&row, note);
    println!(
        "flamegraph: {} ({samples} samples at {} Hz)",
        args.out.display(),
        args.frequency
    );
    if let Some(warning) = warning {
        eprintln!("{warning}");
        println!("{warning}");
    }
    print!("{breakdown}");
    Ok(())
}

/// The warning for a profile of `n` samples (below `MIN_USEFUL_SAMPLES`),
/// with `how` to get more.
fn few_samples_warning(n: u64, how: &str) -> String {
    // The relative standard error of a 5% frame's share (see
    // MIN_USEFUL_SAMPLES).
    let err = 100.0 * (0.95 / (0.05 * n.max(1) as f64)).sqrt();
    format!(
        "warning: only {n} samples, below the {MIN_USEFUL_SAMPLES} a profile needs: a frame with 5% of them is known to ±{err:.0}%, so the flamegraph's shares are noise; {how}"
    )
}

/// `run_ours` once, then again while `more()` says so, summed into one row.
fn run_rounds(
    work: &WorkloadArgs,
    w: &Workload,
    cfg: &Config,
    more: &dyn Fn() -> bool,
) -> Result<Row, LabError> {
    let mut total = run_ours(work, w, cfg)?;
    while more() {
        let r = run_ours(work, w, cfg)?;
        total.bytes += r.bytes;
        total.messages += r.messages;
        total.elapsed += r.elapsed;
        total.cpu = match (total.cpu, r.cpu) {
            (Some(a), Some(b)) => Some(Cpu {
                user: a.user + b.user,
                sys: a.sys + b.sys,
            }),
            _ => None,
        };
        total.breakdown = match (&total.breakdown, &r.breakdown) {
            (Some(a), Some(b)) => Breakdown::sum([a, b]),
            _ => None,
        };
    }
    Ok(total)
}

/// Each sample's innermost frames are the sampler's own (pprof's trace
/// through the `backtrace` crate, above its signal handler, which pprof
/// drops): drop them, so a sample's leaf is the code it interrupted. A
/// sample taken while `profile` counts the samples between rounds has
/// pprof's frames under `profile`'s own: drop those too, so that time shows
/// as `profile`'s.
fn drop_sampler_frames(f: &mut pprof::Frames) {
    let own = |frame: &Vec<pprof::Symbol>| {
        frame.iter().any(|s| {
            let name = s.name();
            name.starts_with("backtrace::") || name.contains("pprof::")
        })
    };
    f.frames.retain(|frame| !own(frame));
}

/// `--connect`: dial, handshake, send the workload (again while `more()`
/// says so), half-close, then read
/// what the peer sends until its end of stream (at most `PEER_END_LIMIT`).
/// The time is from the first byte sent to the last one handed to the
/// socket (the peer's receipt is not visible from here).
fn run_connect(
    addr: &str,
    work: &WorkloadArgs,
    w: &Workload,
    cfg: &Config,
    more: &dyn Fn() -> bool,
) -> Result<Row, LabError> {
    let (host, id) = conn::split_id(addr)?;
    let cfg = match id {
        Some(id) => cfg.clone().expect_peer(id),
        None => cfg.clone(),
    };
    let rt = tokio_runtime(work.runtime)?;
    rt.block_on(async {
        let tcp = conn::connect(host.as_str(), conn::DEFAULT_CONNECT_TIMEOUT).await?;
        tcp.set_nodelay(true)?;
        let peer_addr: Option<SocketAddr> = tcp.peer_addr().ok();
        let conn = ptokio::handshake(tcp, &Identity::generate(), &cfg).await?;
        eprintln!("peer {}", conn.remote_node_id());
        let (mut rx, mut tx) = conn.into_split();
        // Read (and drop) what the peer sends, until its end of stream or
        // until told to stop.
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let download = tokio::spawn(async move {
            let mut ended = false;
            loop {
                tokio::select! {
                    r = rx.fill_buf() => {
                        let n = r?.len();
                        if n == 0 {
                            ended = true;
                            break;
                        }
                        rx.consume(n);
                    }
                    _ = &mut stopped => break,
                }
            }
            Ok::<_, LabError>((rx.stats(), ended))
        });
        let start = Mark::now();
        let mut rounds = 0u64;
        let (sent, queue) = if work.producers > 0 {
            let q = Sender::with_addr(tx, peer_addr, &work.queue_config())?;
            let n = work.producers as u64;
            loop {
                let tasks: Vec<_> = (0..n)
                    .map(|p| {
                        let (q, w) = (q.clone(), w.clone());
                        tokio::spawn(async move {
                            for i in (p..w.messages).step_by(n as usize) {
                                q.send(Bytes::copy_from_slice(w.message(i))).await?;
                                progress(w.size);
                            }
                            Ok::<_, LabError>(())
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await??;
                }
                rounds += 1;
                if !more() {
                    break;
                }
            }
            // Everything written: the queue's counters cover it.
            q.flush().await?;
            let qs = q.stats();
            q.shutdown();
            let mut c = ConnStats::default();
            c.send = qs.send;
            (c, Some(qs))
        } else {
            loop {
                for i in 0..w.messages {
                    tx.write_all(w.message(i)).await?;
                    progress(w.size);
                }
                rounds += 1;
                if !more() {
                    break;
                }
            }
            tx.shutdown().await?;
            (tx.stats(), None)
        };
        let (elapsed, cpu) = Mark::now().since(start);
        let waited = Instant::now();
        let mut download = download;
        let (received, ended) =
            match tokio::time::timeout(PEER_END_LIMIT, &mut download).await {
                Ok(r) => r??,
                Err(_) => {
                    let _ = stop.send(());
                    download.await??
                }
            };
        if !ended {
            eprintln!(
                "note: the peer did not end its stream within {:?} after ours (its stdin still open?); stopped reading",
                waited.elapsed()
            );
        }
        let name = match work.producers {
            0 => format!("p2p-conn (tokio) -> {host}"),
            n => format!("p2p-conn (queue, {n} producers) -> {host}"),
        };
        Ok(Row {
            name,
            bytes: w.bytes() * rounds,
            messages: w.messages * rounds,
            elapsed,
            cpu,
            latency: None,
            breakdown: Some(Breakdown {
                queue,
                sender: "us",
                receiver: "us",
                ..Breakdown::new(&sent, &received)
            }),
        })
    })
}

/// A progress bar on stderr for runs longer than `SHOW_AFTER`, drawn only
/// when both stdout and stderr are terminals (quiet in scripts and tests).
/// It follows the workload's `PROGRESS`, against `total` bytes when known
/// (with `--mib`).
struct Progress {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Runs shorter than this show no bar.
const SHOW_AFTER: Duration = Duration::from_secs(2);

impl Progress {
    fn start(total: Option<u64>) -> Progress {
        if !(std::io::stdout().is_terminal() && std::io::stderr().is_terminal()) {
            return Progress {
                stop: None,
                thread: None,
            };
        }
        COUNT_PROGRESS.store(true, Ordering::Relaxed);
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let mut bar: Option<indicatif::ProgressBar> = None;
            // Until `finish` (sends or drops the sender).
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(Duration::from_millis(100))
            {
                if bar.is_none() && started.elapsed() >= SHOW_AFTER {
                    let b = indicatif::ProgressBar::with_draw_target(
                        total,
                        indicatif::ProgressDrawTarget::stderr(),
                    )
                    .with_elapsed(started.elapsed())
                    .with_position(PROGRESS.load(Ordering::Relaxed));
                    let template = match total {
                        Some(_) => {
                            "{elapsed:>4} [{bar:40}] {binary_bytes}/{binary_total_bytes} {msg}"
                        }
                        None => "{elapsed:>4} {binary_bytes} {msg}",
                    };
                    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
                        b.set_style(style.progress_chars("=> "));
                    }
                    bar = Some(b);
                }
                if let Some(b) = &bar {
                    // The rate over the whole run (indicatif's own estimate
                    // starts when the bar appears, mid-run).
                    let done = PROGRESS.load(Ordering::Relaxed);
                    let secs = started.elapsed().as_secs_f64();
                    let rate = done as f64 / secs;
                    b.set_position(done);
                    if rate > 0.0 {
                        let mibs = rate / (1u64 << 20) as f64;
                        b.set_message(match total {
                            Some(total) => format!(
                                "{mibs:.0} MiB/s, about {:.0} s left",
                                total.saturating_sub(done) as f64 / rate
                            ),
                            None => format!("{mibs:.0} MiB/s"),
                        });
                    }
                }
            }
            if let Some(b) = bar {
                b.finish_and_clear();
            }
        });
        Progress {
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn finish(mut self) {
        COUNT_PROGRESS.store(false, Ordering::Relaxed);
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
