//! `p2p-conn-lab profile` and the seal/write breakdown `bench` prints: the
//! flamegraph shows p2p-conn's sealing and its socket writes, and the
//! breakdown is in the words field engineers use.

use std::path::Path;
use std::time::Duration;

use p2p_conn_interop::process::{run, scratch, Finished};

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn-lab");

/// Bound on one CLI run (the workloads below take about a second in a debug
/// build).
const RUN_LIMIT: Duration = Duration::from_secs(120);

fn run_cli(args: &[&str]) -> Finished {
    let out = run(Path::new(BIN), args, RUN_LIMIT);
    out.assert_ok(&args.join(" "));
    out
}

/// The function names of a flamegraph SVG: every `<title>` without its
/// "(N samples, P%)" tail, unescaped.
fn frame_names(svg: &str) -> Vec<String> {
    svg.split("<title>")
        .skip(1)
        .filter_map(|t| t.split_once("</title>"))
        .map(|(t, _)| {
            let name = t.rsplit_once(" (").map_or(t, |(name, _)| name);
            name.replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&amp;", "&")
        })
        .collect()
}

/// A flamegraph frame: its name, its place (fg:x, fg:w in samples) and
/// its row (y: a frame's callees are drawn one row, 16 px, above it).
struct Frame {
    name: String,
    x: u64,
    w: u64,
    y: u64,
}

/// Every frame of an inferno flamegraph SVG.
fn svg_frames(svg: &str) -> Vec<Frame> {
    svg.split("<g><title>")
        .skip(1)
        .filter_map(|g| {
            let (title, rest) = g.split_once("</title>")?;
            let attr = |k: &str| -> Option<&str> {
                let at = rest.find(&format!(" {k}=\""))? + k.len() + 3;
                rest[at..].split('"').next()
            };
            Some(Frame {
                name: title
                    .rsplit_once(" (")
                    .map_or(title, |(n, _)| n)
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&amp;", "&"),
                x: attr("fg:x")?.parse().ok()?,
                w: attr("fg:w")?.parse().ok()?,
                y: attr("y")?.parse().ok()?,
            })
        })
        .collect()
}

/// The ratio in "1 s of sealing needed X s of socket write".
fn write_to_seal(text: &str) -> Option<f64> {
    let (_, rest) = text.split_once("1 s of sealing needed ")?;
    let (x, rest) = rest.split_once(' ')?;
    rest.starts_with("s of socket write").then_some(())?;
    x.parse().ok()
}

/// Names the test looks for, so a failure says which one is missing.
struct Expect {
    what: &'static str,
    test: fn(&str) -> bool,
}

const SEAL: Expect = Expect {
    what: "a p2p-conn seal function (Sealer::seal_*, WriteCore::seal, Cipher::seal_in_place)",
    test: |n| {
        // By its path; or, where the optimiser inlined it (the crypto is
        // built optimised even in debug builds), by the short name the
        // debug info gives an inlined frame: the sealer's own methods.
        (n.starts_with("p2p_conn::")
            && ["Sealer::seal", "WriteCore::seal", "Cipher::seal_in_place"]
                .iter()
                .any(|f| n.contains(f)))
            || n.starts_with("seal_append")
    },
};

const WRITE: Expect = Expect {
    what: "p2p-conn's socket write step (FrameWriter::poll_drain)",
    test: |n| n.starts_with("p2p_conn::engine::writer::FrameWriter::poll_drain"),
};

/// The C library's socket write wrappers (glibc's names for send/write).
const SYSCALL: Expect = Expect {
    what: "the socket write call (__libc_send, send, write, ...)",
    test: |n| {
        matches!(
            n,
            "__libc_send" | "__send" | "send" | "__libc_write" | "__write" | "write" | "sendto"
        )
    },
};

fn assert_has(names: &[String], e: &Expect, svg_path: &Path) {
    assert!(
        names.iter().any(|n| (e.test)(n)),
        "{} has no frame for {}; its p2p_conn frames: {:?}",
        svg_path.display(),
        e.what,
        names
            .iter()
            .filter(|n| n.starts_with("p2p_conn::"))
            .collect::<Vec<_>>()
    );
}

/// `profile` on a loopback workload, in 64 MiB rounds until 500 samples:
/// the SVG is a flamegraph with p2p-conn's seal function, its socket write
/// step and the socket call, and the breakdown is printed, summed over the
/// rounds. 1 KiB messages make both sealing (a padded frame each) and the
/// socket writes (one each) a large share of the samples; the `ring` backend
/// keeps the debug build fast on every CPU.
#[test]
fn profile_draws_seal_and_write() {
    let dir = scratch("profile");
    let svg_path = dir.join("profile.svg");
    let out = run_cli(&[
        "profile",
        "--size",
        "1024",
        "--samples",
        "500",
        "--backend",
        "ring",
        "--out",
        svg_path.to_str().unwrap(),
    ]);
    let text = out.stdout_text();
    // Not a terminal: no progress bar. Without `--mib` it samples until it
    // has `--samples` (here 500, the warning's threshold, to keep the test
    // short) and says how many it took: enough, so no warning. Nothing on
    // stderr.
    assert!(out.stderr.is_empty(), "{:?}", out.stderr_lines());
    let n = samples_reported(&text).unwrap_or_else(|| panic!("no sample count: {text}"));
    assert!(n >= 500, "{n} samples: {text}");
    assert!(!text.contains("warning"), "{text}");
    let ratio = write_to_seal(&text).unwrap_or_else(|| panic!("no ratio line: {text}"));
    assert!(ratio > 0.0, "{text}");
    for row in [
        "seal time",
        "write time",
        "not-ready time",
        "writes / reads",
        "short writes",
        "frames",
        "read time",
        "open time",
    ] {
        assert!(
            text.contains(&format!("\n  {row} ")),
            "no {row:?} row: {text}"
        );
    }
    // Each 64 MiB round in 1 KiB messages: 65536 frames sealed and opened.
    let rounds: u64 = if text.contains(" (1 run):") {
        1
    } else {
        let (_, rest) = text
            .split_once("breakdown, p2p-conn (tokio) (")
            .unwrap_or_else(|| panic!("no breakdown title: {text}"));
        rest.split_once(" runs summed):")
            .and_then(|(n, _)| n.parse().ok())
            .unwrap_or_else(|| panic!("no round count: {text}"))
    };
    let frames = (65536 * rounds).to_string();
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["frames", frames.as_str(), frames.as_str()]),
        "{rounds} rounds: {text}"
    );
    assert!(text.contains("flamegraph: "), "{text}");

    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(
        svg.starts_with("<?xml") && svg.contains("<svg") && svg.trim_end().ends_with("</svg>"),
        "not an SVG: {}",
        &svg[..svg.len().min(200)]
    );
    let names = frame_names(&svg);
    assert!(names.len() > 20, "{names:?}");
    for e in [&SEAL, &WRITE, &SYSCALL] {
        assert_has(&names, e, &svg_path);
    }
    // The sampler's own frames are dropped.
    assert!(
        !names.iter().any(|n| n.contains("pprof::")),
        "the sampler's frames remain"
    );
    // The runtime's frames are folded: a task harness or catch_unwind
    // frame is drawn only as a sample's innermost frame (time in the
    // runtime itself), never with frames on top of it; the folded frame is
    // drawn.
    let all = svg_frames(&svg);
    let harness: Vec<&Frame> = all
        .iter()
        .filter(|f| {
            f.name.starts_with("std::panicking::") || f.name.starts_with("tokio::runtime::task::")
        })
        .collect();
    assert!(all.len() > 20);
    for h in &harness {
        let above = all
            .iter()
            .find(|f| f.y + 16 == h.y && f.x >= h.x && f.x < h.x + h.w);
        assert!(
            above.is_none(),
            "runtime frame {} drawn under {:?}",
            h.name,
            above.map(|f| &f.name)
        );
    }
    assert!(
        names
            .iter()
            .any(|n| n == "[runtime, thread start and call glue]"),
        "no folded frame"
    );
    // What the terminal showed is in the picture too.
    let footer = svg
        .split_once("<g id=\"footer\">")
        .map(|(_, f)| f)
        .unwrap_or_else(|| panic!("{} has no footer", svg_path.display()));
    let shown: Vec<String> = footer
        .split("<text ")
        .skip(1)
        .filter_map(|t| t.split_once('>'))
        .filter_map(|(_, t)| t.split_once("</text>"))
        .map(|(t, _)| {
            t.replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&")
        })
        .collect();
    let shown = shown.join("\n");
    assert!(
        write_to_seal(&shown).is_some(),
        "no ratio in the SVG: {shown}"
    );
    for row in ["seal time", "write time", "frames"] {
        assert!(
            shown.contains(&format!("\n  {row} ")),
            "no {row:?} in the SVG: {shown}"
        );
    }
    assert!(
        shown.contains("p2p-conn (tokio) "),
        "no result row in the SVG: {shown}"
    );
    assert!(shown.contains(" CPUs, with"), "no CPU in the SVG: {shown}");

    // --raw-stacks draws the stacks as sampled: the harness is there.
    let raw_path = dir.join("raw.svg");
    run_cli(&[
        "profile",
        "--size",
        "1024",
        "--samples",
        "100",
        "--backend",
        "ring",
        "--raw-stacks",
        "--out",
        raw_path.to_str().unwrap(),
    ]);
    let raw = frame_names(&std::fs::read_to_string(&raw_path).unwrap());
    assert!(
        raw.iter().any(|n| n.starts_with("tokio::runtime::task::")),
        "--raw-stacks lost the runtime's frames"
    );
    assert!(
        !raw.iter().any(|n| n.starts_with("[runtime")),
        "folded with --raw-stacks"
    );
}

/// A listener as `p2p-conn listen ADDR` with nothing on its stdin is (the
/// operator CLI's binary is another crate's, so the test runs the same
/// library calls in a thread): bound before it returns, it takes one
/// connection with a fresh key and the default configuration, half-closes
/// its side (it has nothing to send) and reads to the peer's end of
/// stream. Joined, it gives the number of bytes it read.
fn listen() -> (String, std::thread::JoinHandle<u64>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let reader = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        let identity = p2p_conn::Identity::generate();
        let config = p2p_conn::Config::default();
        let mut conn = p2p_conn::io::blocking::handshake_tcp(tcp, &identity, &config).unwrap();
        conn.shutdown().unwrap();
        std::io::copy(&mut conn, &mut std::io::sink()).unwrap()
    });
    (addr, reader)
}

/// `profile --connect` against a listener (as `p2p-conn listen`): sends to
/// the listener and reports our send side (32 MiB in 1 KiB messages: enough
/// CPU time for samples).
#[test]
fn profile_connects_to_a_listener() {
    let dir = scratch("profile-connect");
    let svg_path = dir.join("connect.svg");
    let (addr, listener) = listen();
    let out = run_cli(&[
        "profile",
        "--connect",
        &addr,
        "--mib",
        "32",
        "--size",
        "1024",
        "--backend",
        "ring",
        "--out",
        svg_path.to_str().unwrap(),
    ]);
    let text = out.stdout_text();
    assert!(write_to_seal(&text).is_some(), "{text}");
    assert!(text.contains(&format!("-> {addr}")), "{text}");
    assert!(text.contains("send (us)"), "{text}");
    let names = frame_names(&std::fs::read_to_string(&svg_path).unwrap());
    assert_has(&names, &SEAL, &svg_path);
    // The listener got all of it and ended.
    assert_eq!(listener.join().unwrap(), 32 << 20);
}

/// `profile --connect` without `--mib` sends whole 64 MiB rounds over its
/// one connection until `--samples` (1 here: the first round is enough),
/// and reports what it sent: the listener gets a whole number of rounds.
#[test]
fn profile_connect_sends_whole_rounds() {
    let dir = scratch("profile-connect-rounds");
    let svg_path = dir.join("rounds.svg");
    let (addr, listener) = listen();
    let out = run_cli(&[
        "profile",
        "--connect",
        &addr,
        "--samples",
        "1",
        "--backend",
        "ring",
        "--out",
        svg_path.to_str().unwrap(),
    ]);
    let text = out.stdout_text();
    assert!(
        text.contains("rounds of 1024 x 65536-byte messages (64.0 MiB)"),
        "{text}"
    );
    let got = listener.join().unwrap();
    assert!(
        got > 0 && got.is_multiple_of(64 << 20),
        "{got} bytes: {text}"
    );
    // The breakdown counts every round's frames (the peer sent none).
    let frames = (got / 1024).to_string();
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["frames", frames.as_str(), "0"]),
        "{got} bytes: {text}"
    );
}

/// `bench` prints the breakdown after its table, and every `--json` line
/// has the breakdown's keys: numbers on our runs, null on the baseline's.
#[test]
fn bench_prints_and_exports_the_breakdown() {
    let out = run_cli(&["bench", "--mib", "2", "--size", "4096"]);
    let text = out.stdout_text();
    let table = text.find("MB/s").unwrap_or_else(|| panic!("{text}"));
    let ratio = text
        .find("1 s of sealing needed")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(table < ratio, "the breakdown comes after the table: {text}");

    let out = run_cli(&[
        "bench",
        "--mib",
        "2",
        "--size",
        "4096",
        "--json",
        "--baseline",
        "tendermint-p2p",
    ]);
    let rows: Vec<serde_json::Value> = out
        .stdout_text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ours = rows
        .iter()
        .find(|r| r["kind"] == "run" && r["impl"] == "p2p-conn (tokio)")
        .expect("our run");
    let base = rows
        .iter()
        .find(|r| r["kind"] == "run" && r["impl"] != "p2p-conn (tokio)")
        .expect("the baseline's run");
    // 2 MiB in 4 KiB messages: 2048 frames, 512 seal steps.
    assert_eq!(ours["send_frames"], 2048);
    assert_eq!(ours["recv_frames"], 2048);
    assert_eq!(ours["send_seals"], 512);
    assert_eq!(ours["send_bytes_sealed"], 2 << 20);
    for key in [
        "send_seal_s",
        "send_write_s",
        "send_not_ready_s",
        "recv_read_s",
        "recv_open_s",
        "write_to_seal",
        "read_to_open",
    ] {
        assert!(ours[key].as_f64().is_some(), "{key}: {ours}");
        assert!(base[key].is_null(), "{key}: {base}");
    }
    assert!(ours["queue_wait_s"].is_null(), "{ours}");

    // A queue workload adds the queue's figures.
    let out = run_cli(&[
        "bench",
        "--mib",
        "1",
        "--size",
        "200",
        "--producers",
        "2",
        "--json",
    ]);
    let row: serde_json::Value = serde_json::from_str(out.stdout_text().trim()).unwrap();
    assert_eq!(row["queue_messages"], row["messages"], "{row}");
    assert!(row["queue_messages_per_batch"].as_f64().unwrap() >= 1.0);
    assert!(row["queue_wait_s"].as_f64().is_some());
}

/// The sample count in "flamegraph: PATH (N samples at F Hz)".
fn samples_reported(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("flamegraph: "))?;
    let (_, rest) = line.rsplit_once(" (")?;
    rest.split_once(" samples at ")?.0.parse().ok()
}

/// `profile --mib 32` takes a few dozen samples: too few for the
/// flamegraph's shares to mean anything, and `profile` says so, on stderr
/// and in its report, with the count. (1 MiB, as this test first used,
/// took 0.003 s of CPU here and sometimes no sample at all; 32 MiB stays
/// under 500 samples on a CPU ten times slower.)
#[test]
fn profile_warns_when_samples_are_few() {
    let dir = scratch("profile-few");
    let svg_path = dir.join("few.svg");
    let out = run_cli(&[
        "profile",
        "--mib",
        "32",
        "--backend",
        "ring",
        "--out",
        svg_path.to_str().unwrap(),
    ]);
    let text = out.stdout_text();
    let n = samples_reported(&text).unwrap_or_else(|| panic!("no sample count: {text}"));
    assert!(n < 500, "32 MiB gave {n} samples: {text}");
    let warned = |s: &str| s.contains(&format!("warning: only {n} samples")) && s.contains("500");
    let stderr = out.stderr_lines().join("\n");
    assert!(warned(&stderr), "no warning on stderr: {stderr:?}");
    assert!(warned(&text), "no warning in the report: {text}");
}
