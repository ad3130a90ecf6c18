//! `cargo xtask`: the CI stages as named tasks, each runnable alone.
//!
//! ```text
//! cargo xtask list            the stages, in CI's order, with what each checks
//! cargo xtask STAGE...        run these stages (e.g. `cargo xtask lint test`)
//! cargo xtask ci              every stage in order (what `.ci/run` runs)
//! ```
//!
//! A stage runs commands from the workspace root and stops at the first
//! that fails (exit 1, naming it). The toolchain pieces a stage needs
//! beyond Rust are its own business: `go` installs Go from the module
//! proxy where it is missing, `fuzz-smoke` installs cargo-fuzz. Every
//! stage prints the free disk and the size of `target/` first (these
//! machines share one disk). Environment: `CI=true` makes the interop tests
//! fail, not skip, without Go, the vectors or tmkms (`test` sets it unless
//! it is set); `FUZZ_SECONDS` (default 10: a smoke run) bounds each fuzz target in
//! `fuzz-smoke`.
//!
//! `ci` also starts two builds before the first stage, in the background at
//! the lowest CPU priority, that need none of the workspace's build lock:
//! the fuzz targets (`p2p-conn-fuzz/run.sh --build-only`) and the tests'
//! tmkms (`interop/src/tmkms_install.rs`). They use the CPU that the stages
//! leave idle; `fuzz-smoke` and `test` wait for them (see [`Early`]).
//!
//! std only, so that `cargo xtask` builds in seconds.

use std::cell::RefCell;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

#[path = "../../interop/src/tmkms_install.rs"]
#[allow(dead_code)]
mod tmkms_install;

/// A stage: its name, what it checks, and how.
struct Stage {
    name: &'static str,
    about: &'static str,
    run: fn(&Ctx) -> Result<(), String>,
}

/// CI's order: cheap checks first, the long test run and the fuzz smoke
/// last.
const STAGES: &[Stage] = &[
    Stage {
        name: "go",
        about: "Go toolchain (installed from the module proxy if missing); gofmt, go mod download and go vet of the Go peer at every CometBFT line",
        run: go,
    },
    Stage {
        name: "fmt",
        about: "cargo fmt --check",
        run: fmt,
    },
    Stage {
        name: "lint",
        about: "the generated AVX2 rounds match their script; clippy -D warnings on every target, then each library crate with no features and with each feature alone; the lean builds' dependency trees",
        run: lint,
    },
    Stage {
        name: "aarch64",
        about: "the avx512 and avx2 features build clean off x86_64 (clippy for aarch64)",
        run: aarch64,
    },
    Stage {
        name: "cycles",
        about: "no module cycles in any crate (scripts/module-cycles.py)",
        run: cycles,
    },
    Stage {
        name: "docs",
        about: "cargo doc -D warnings for the library crates (also as docs.rs builds them) and the CLI",
        run: docs,
    },
    Stage {
        name: "api",
        about: "each library crate's public API against its public-api.txt",
        run: api,
    },
    Stage {
        name: "package",
        about: "cargo publish --dry-run of the library crates, and what their packages hold",
        run: package,
    },
    Stage {
        name: "changelog",
        about: "CHANGELOG.md holds every .changelog/ fragment",
        run: changelog,
    },
    Stage {
        name: "test-lean",
        about: "the library crates' tests as embedders build them: pure Rust, avx512 and avx2 without ring, the layers with no features",
        run: test_lean,
    },
    Stage {
        name: "memcheck",
        about: "the multi-frame engine's tests under valgrind memcheck (its AVX2 kernel: valgrind hides AVX-512)",
        run: memcheck,
    },
    Stage {
        name: "embedder",
        about: "a new project depending on p2p-conn with the defaults builds, and compiles none of the CLI's crates",
        run: embedder,
    },
    Stage {
        name: "doc-examples",
        about: "every document's examples built as a user's crate with the Cargo lines it recommends",
        run: doc_examples,
    },
    Stage {
        name: "test",
        about: "the README's test command: cargo test --workspace --all-features (CI=true)",
        run: test,
    },
    Stage {
        name: "fuzz-smoke",
        about: "every fuzz target for FUZZ_SECONDS (default 10) seconds, a smoke run (long runs: p2p-conn-fuzz/run.sh 3600)",
        run: fuzz_smoke,
    },
];

/// The library crates, each with the features `lint` builds it with one at
/// a time (`testkit` among them where a crate has it; `api` never uses
/// it).
const LIBRARIES: &[(&str, &[&str])] = &[
    (
        "p2p-conn",
        &[
            "tokio",
            "rustcrypto",
            "ring",
            "avx512",
            "avx2",
            "codec",
            "queue",
            "keyfile",
            "stats",
            "tracing",
            "metrics",
            "nodeinfo",
            "nodeinfo tokio",
            "noise",
            "noise tokio",
            "testkit",
        ],
    ),
    (
        "p2p-conn-mconn",
        &["", "tokio", "ring", "avx512", "avx2", "testkit"],
    ),
    (
        "p2p-conn-privval",
        &["", "tokio", "noise", "ring", "avx512", "avx2"],
    ),
];

struct Ctx {
    root: PathBuf,
    /// The early jobs `ci` started that no stage has waited for yet.
    early: RefCell<Vec<Early>>,
}

/// A build that takes none of the workspace's build lock (it has target
/// directories of its own), which `ci` starts before the first stage at the
/// lowest CPU priority (`nice -n 19`). It runs on the CPU the stages leave
/// idle: `test` waits minutes on nodes and CometBFT's timers, at about two
/// thirds of the two cores. The stage that needs it waits for it and then
/// runs its own step as when it runs alone (which finds the work done, or
/// redoes it and shows the error). Output in `target/ci-logs/NAME.log`.
struct Early {
    name: &'static str,
    /// Its process group (the child's PID).
    group: u32,
    /// A thread that waits for the child: its exit status, and when.
    exited: std::thread::JoinHandle<(std::io::Result<std::process::ExitStatus>, Instant)>,
    log: PathBuf,
    started: Instant,
}

impl Ctx {
    /// Start `program args...` as the early job `name` (see [`Early`]).
    fn start_early(
        &self,
        name: &'static str,
        program: &str,
        args: &[String],
        env: &[(&str, &str)],
    ) {
        let dir = self.root.join("target/ci-logs");
        let log = dir.join(format!("{name}.log"));
        let file = std::fs::create_dir_all(&dir).and_then(|()| std::fs::File::create(&log));
        let file = match file {
            Ok(f) => f,
            Err(e) => {
                eprintln!("notice: not starting {name} early ({}: {e})", log.display());
                return;
            }
        };
        let spawn = |nice: bool| {
            let mut cmd = if nice {
                let mut c = Command::new("nice");
                c.args(["-n", "19", program]);
                c
            } else {
                Command::new(program)
            };
            cmd.args(args)
                .envs(env.iter().copied())
                .current_dir(&self.root)
                .stdin(Stdio::null())
                .stdout(file.try_clone()?)
                .stderr(file.try_clone()?)
                // Its own process group, so that a failed run stops all of it.
                .process_group(0)
                .spawn()
        };
        match spawn(true).or_else(|_| spawn(false)) {
            Ok(mut child) => {
                println!(
                    "-- started early: {name} ({program} {}), log {}",
                    args.join(" "),
                    log.display()
                );
                let group = child.id();
                let exited = std::thread::spawn(move || (child.wait(), Instant::now()));
                self.early.borrow_mut().push(Early {
                    name,
                    group,
                    exited,
                    log,
                    started: Instant::now(),
                });
            }
            Err(e) => eprintln!("notice: not starting {name} early: {e}"),
        }
    }

    /// Wait for the early job `name`, if `ci` started it, and say how it
    /// went (its log's end when it failed). Never an error: the stage that
    /// needs the work does its own step after this.
    fn finish_early(&self, name: &str) {
        let job = {
            let mut early = self.early.borrow_mut();
            match early.iter().position(|e| e.name == name) {
                Some(i) => early.remove(i),
                None => return,
            }
        };
        let Early {
            name,
            exited,
            log,
            started,
            ..
        } = job;
        let asked = Instant::now();
        let (status, at) = exited.join().expect("the waiting thread does not panic");
        let took = at.duration_since(started).as_secs_f64();
        let waited = at.saturating_duration_since(asked).as_secs_f64();
        match status {
            Ok(s) if s.success() => {
                println!("-- early {name}: done in {took:.0} s, waited {waited:.0} s for it")
            }
            other => {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(30)..].join("\n");
                println!(
                    "-- early {name}: failed ({other:?}) after {took:.0} s; the stage redoes it. The end of {}:\n{tail}",
                    log.display()
                );
            }
        }
    }

    /// Stop every early job still running (a stage failed).
    fn stop_early(&self) {
        for job in self.early.borrow_mut().drain(..) {
            let group = format!("-{}", job.group);
            let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
            let _ = job.exited.join();
        }
    }
}

/// The target directory: `$CARGO_TARGET_DIR`, else the workspace's.
fn target_dir(ctx: &Ctx) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| ctx.root.join("target"))
}

/// `ci`'s early jobs (see [`Early`]): the fuzz build for `fuzz-smoke`, and
/// the tmkms install that `test` would otherwise do in the middle of its
/// run (interop/src/tmkms_install.rs, shared with the tests).
fn start_early_jobs(ctx: &Ctx) {
    ctx.start_early(
        "fuzz-build",
        "p2p-conn-fuzz/run.sh",
        &["--build-only".to_string()],
        &[],
    );
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    ctx.start_early(
        "tmkms",
        &cargo,
        &tmkms_install::install_args(&target_dir(ctx)),
        tmkms_install::ENV,
    );
}

impl Ctx {
    /// `program args...` in the workspace root, with `env` set; an error
    /// naming the command if it fails.
    fn run(&self, program: &str, args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
        println!("-- {program} {}", args.join(" "));
        let started = std::time::Instant::now();
        let status = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .current_dir(&self.root)
            .status()
            .map_err(|e| format!("{program}: {e}"))?;
        // Where a stage's time goes, command by command.
        println!("-- ({:.1} s)", started.elapsed().as_secs_f64());
        if status.success() {
            Ok(())
        } else {
            Err(format!("`{program} {}` failed ({status})", args.join(" ")))
        }
    }

    /// `cargo args...`.
    fn cargo(&self, args: &[&str]) -> Result<(), String> {
        self.run("cargo", args, &[])
    }

    /// The standard output of `program args...`, which must succeed.
    fn output(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let out = Command::new(program)
            .args(args)
            .current_dir(&self.root)
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "`{program} {}` failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask/ is inside the workspace")
        .to_path_buf();
    let ctx = Ctx {
        root,
        early: RefCell::new(Vec::new()),
    };
    if args.is_empty()
        || args
            .iter()
            .any(|a| a == "list" || a == "-h" || a == "--help")
    {
        println!("cargo xtask STAGE... | ci | list\n\nstages, in CI's order:");
        for s in STAGES {
            println!("  {:<13} {}", s.name, s.about);
        }
        return ExitCode::SUCCESS;
    }
    let names: Vec<&str> = if args.iter().any(|a| a == "ci") {
        STAGES.iter().map(|s| s.name).collect()
    } else {
        args.iter().map(String::as_str).collect()
    };
    for name in &names {
        if !STAGES.iter().any(|s| s.name == *name) {
            eprintln!("xtask: no stage {name:?} (cargo xtask list)");
            return ExitCode::from(2);
        }
    }
    // Debug info is most of a test build's disk and link time; a failed
    // assertion still names its file and line without it. Incremental data
    // is gigabytes that a fresh run never reuses. Set for every stage, as
    // `.ci/run` always did (a stage run alone builds the same way).
    for (key, value) in [("CARGO_PROFILE_DEV_DEBUG", "0"), ("CARGO_INCREMENTAL", "0")] {
        if std::env::var_os(key).is_none() {
            // Before any thread is spawned; the children inherit it.
            std::env::set_var(key, value);
        }
    }
    if args.iter().any(|a| a == "ci") {
        start_early_jobs(&ctx);
    }
    for name in names {
        let stage = STAGES
            .iter()
            .find(|s| s.name == name)
            .expect("checked above");
        let started = std::time::Instant::now();
        println!("\n== {} ({}){}", stage.name, stage.about, disk(&ctx));
        if let Err(e) = (stage.run)(&ctx) {
            eprintln!("error: stage {}: {e}", stage.name);
            ctx.stop_early();
            return ExitCode::FAILURE;
        }
        println!(
            "== {} passed in {:.0} s",
            stage.name,
            started.elapsed().as_secs_f64()
        );
    }
    // Any early job no stage waited for (a `ci` run's stages all do).
    let left: Vec<&'static str> = ctx.early.borrow().iter().map(|e| e.name).collect();
    for name in left {
        ctx.finish_early(name);
    }
    ExitCode::SUCCESS
}

/// "   (disk: N GiB free, target/ M GiB)", or nothing where `df`/`du` fail.
fn disk(ctx: &Ctx) -> String {
    let free = ctx.output("df", &["-Pk", "."]).ok().and_then(|s| {
        s.lines()
            .nth(1)?
            .split_whitespace()
            .nth(3)?
            .parse::<f64>()
            .ok()
    });
    let used = ctx
        .output("du", &["-sk", "target"])
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    match free {
        Some(free) => format!(
            "\n   (disk: {:.1} GiB free, target/ {:.1} GiB)",
            free / 1_048_576.0,
            used / 1_048_576.0
        ),
        None => String::new(),
    }
}

/// Fail if any line of `tree` (a `cargo tree --prefix none`) names one of
/// `crates`.
fn refuse_in_tree(tree: &str, crates: &[&str], what: &str) -> Result<(), String> {
    let found: Vec<&str> = tree
        .lines()
        .filter(|l| crates.iter().any(|c| l.starts_with(&format!("{c} "))))
        .collect();
    if found.is_empty() {
        Ok(())
    } else {
        Err(format!("{what} depends on: {}", found.join(", ")))
    }
}

fn go(ctx: &Ctx) -> Result<(), String> {
    let go = find_or_install_go()?;
    let go = go.to_str().ok_or("Go's path is not UTF-8")?;
    let local = [("GOTOOLCHAIN", "local")];
    ctx.run(go, &["version"], &local)?;
    let peer = ctx.root.join("interop/cometbft-go");
    // gofmt sits beside the go binary (or on PATH beside it).
    let gofmt = match Path::new(go).parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join("gofmt"),
        _ => PathBuf::from("gofmt"),
    };
    let unformatted = Command::new(&gofmt)
        .args(["-l", "."])
        .current_dir(&peer)
        .output()
        .map_err(|e| format!("gofmt: {e}"))?;
    let list = String::from_utf8_lossy(&unformatted.stdout);
    if !list.trim().is_empty() {
        return Err(format!("gofmt would change: {}", list.trim()));
    }
    // One module file per line (go.mod is v1.0.1, go.v0.NN.mod the others),
    // each with the build tag that picks its line's files.
    for (modfile, tags) in [
        ("go.mod", Some("cometbft_v1")),
        ("go.v0.34.mod", Some("cometbft_v034")),
        ("go.v0.37.mod", Some("cometbft_v037")),
        ("go.v0.38.mod", None),
        ("go.v0.39.mod", None),
        ("go.v0.40.mod", Some("cometbft_v040")),
    ] {
        let modflag = format!("-modfile={modfile}");
        // The build flags the tests build the peer with
        // (interop/src/cometbft_go.rs, `build`): with the same flags, vet's
        // compiles of CometBFT and its dependencies are the ones `go build`
        // finds in Go's build cache, so the tests' first build of each
        // line's peer only links. Without them every line compiles twice.
        let mut vet = vec!["vet", "-trimpath", "-mod=readonly", modflag.as_str()];
        let tagflag = tags.map(|t| format!("-tags={t}"));
        vet.extend(tagflag.as_deref());
        vet.push(".");
        for args in [vec!["mod", "download", modflag.as_str()], vet] {
            println!("-- (interop/cometbft-go) go {}", args.join(" "));
            let status = Command::new(go)
                .args(&args)
                .env("GOTOOLCHAIN", "local")
                .current_dir(&peer)
                .status()
                .map_err(|e| format!("go: {e}"))?;
            if !status.success() {
                return Err(format!("go {} failed", args.join(" ")));
            }
        }
    }
    // v0.34.35's node builds from a module of our own (go install refuses it).
    let status = Command::new(go)
        .args(["mod", "download"])
        .env("GOTOOLCHAIN", "local")
        .current_dir(ctx.root.join("interop/cometbft-node/v0.34"))
        .status()
        .map_err(|e| format!("go: {e}"))?;
    if !status.success() {
        return Err("go mod download in interop/cometbft-node/v0.34 failed".into());
    }
    Ok(())
}

/// `go` on PATH, or Go 1.26.8 from the module proxy (the zip the go command
/// itself downloads when it switches toolchains) under
/// `~/.cache/p2p-conn/`, put on PATH for the later stages' tests.
fn find_or_install_go() -> Result<PathBuf, String> {
    if let Ok(out) = Command::new("go").arg("version").output() {
        if out.status.success() {
            return Ok(PathBuf::from("go"));
        }
    }
    const VERSION: &str = "1.26.8";
    let home = std::env::var("HOME").map_err(|_| "HOME is not set")?;
    let dir = PathBuf::from(home).join(format!(".cache/p2p-conn/go{VERSION}"));
    let bin = dir.join("bin/go");
    if !bin.exists() {
        let tmp = std::env::temp_dir().join(format!("p2p-conn-go-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
        let zip = tmp.join("go.zip");
        let url = format!(
            "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go{VERSION}.linux-amd64.zip"
        );
        for (program, args) in [
            (
                "curl",
                vec!["-fsSL", url.as_str(), "-o", zip.to_str().unwrap_or("")],
            ),
            (
                "unzip",
                vec![
                    "-q",
                    zip.to_str().unwrap_or(""),
                    "-d",
                    tmp.to_str().unwrap_or(""),
                ],
            ),
        ] {
            let status = Command::new(program)
                .args(&args)
                .status()
                .map_err(|e| format!("{program} (needed to install Go): {e}"))?;
            if !status.success() {
                return Err(format!("{program} failed while installing Go"));
            }
        }
        std::fs::create_dir_all(dir.parent().expect("has a parent")).map_err(|e| e.to_string())?;
        std::fs::rename(
            tmp.join(format!(
                "golang.org/toolchain@v0.0.1-go{VERSION}.linux-amd64"
            )),
            &dir,
        )
        .map_err(|e| format!("installing Go: {e}"))?;
        let _ = std::fs::remove_dir_all(&tmp);
    }
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::set_var("PATH", format!("{}:{path}", dir.join("bin").display()));
    Ok(bin)
}

fn fmt(ctx: &Ctx) -> Result<(), String> {
    ctx.cargo(&["fmt", "--all", "--", "--check"])
}

fn lint(ctx: &Ctx) -> Result<(), String> {
    // The AVX2 kernel's generated double rounds agree with their generator.
    ctx.run("python3", &["scripts/gen-avx2-rounds.py", "--check"], &[])?;
    ctx.cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ])?;
    ctx.cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--",
        "-D",
        "warnings",
    ])?;
    for (krate, features) in LIBRARIES {
        ctx.cargo(&[
            "clippy",
            "-p",
            krate,
            "--lib",
            "--no-default-features",
            "--",
            "-D",
            "warnings",
        ])?;
        for f in features.iter().filter(|f| !f.is_empty()) {
            ctx.cargo(&[
                "clippy",
                "-p",
                krate,
                "--lib",
                "--no-default-features",
                "--features",
                f,
                "--",
                "-D",
                "warnings",
            ])?;
        }
    }
    // The lean builds pull in none of the heavy or runtime crates.
    let lean = ctx.output(
        "cargo",
        &[
            "tree",
            "-e",
            "normal",
            "-p",
            "p2p-conn",
            "--no-default-features",
            "--prefix",
            "none",
        ],
    )?;
    refuse_in_tree(
        &lean,
        &[
            "tokio",
            "tokio-util",
            "clap",
            "tendermint-p2p",
            "ring",
            "serde",
            "serde_json",
            "futures-util",
            "tracing",
            "bytes",
            "prost",
        ],
        "p2p-conn with no default features",
    )?;
    for krate in ["p2p-conn-mconn", "p2p-conn-privval"] {
        let lean = ctx.output(
            "cargo",
            &[
                "tree",
                "-e",
                "normal",
                "-p",
                krate,
                "--no-default-features",
                "--prefix",
                "none",
            ],
        )?;
        refuse_in_tree(
            &lean,
            &[
                "tokio",
                "tokio-util",
                "clap",
                "tendermint-p2p",
                "ring",
                "futures-util",
                "tracing",
            ],
            &format!("{krate} with no default features"),
        )?;
    }
    Ok(())
}

fn aarch64(ctx: &Ctx) -> Result<(), String> {
    let _ = Command::new("rustup")
        .args(["target", "add", "aarch64-unknown-linux-gnu"])
        .output();
    let installed = ctx
        .output("rustup", &["target", "list", "--installed"])
        .unwrap_or_default();
    if !installed.lines().any(|l| l == "aarch64-unknown-linux-gnu") {
        if std::env::var("CI").as_deref() == Ok("true") {
            return Err(
                "the aarch64-unknown-linux-gnu target is missing (rustup target add failed)".into(),
            );
        }
        eprintln!("notice: aarch64-unknown-linux-gnu not installed; skipping the aarch64 check");
        return Ok(());
    }
    ctx.cargo(&[
        "clippy",
        "-p",
        "p2p-conn",
        "--lib",
        "--target",
        "aarch64-unknown-linux-gnu",
        "--no-default-features",
        "--features",
        "avx512,avx2",
        "--",
        "-D",
        "warnings",
    ])
}

fn cycles(ctx: &Ctx) -> Result<(), String> {
    ctx.run("python3", &["scripts/module-cycles.py"], &[])
}

fn docs(ctx: &Ctx) -> Result<(), String> {
    let libs = [
        "-p",
        "p2p-conn",
        "-p",
        "p2p-conn-mconn",
        "-p",
        "p2p-conn-privval",
    ];
    let mut args = vec!["doc", "--no-deps", "--all-features"];
    args.extend(libs);
    ctx.run("cargo", &args, &[("RUSTDOCFLAGS", "-D warnings")])?;
    // And as an embedder builds them: the defaults, and p2p-conn with no
    // features (a link to an item behind a feature breaks there; the
    // layers' docs link their `tokio` items and are checked with it).
    let mut defaults = vec!["doc", "--no-deps"];
    defaults.extend(libs);
    ctx.run("cargo", &defaults, &[("RUSTDOCFLAGS", "-D warnings")])?;
    ctx.run(
        "cargo",
        &[
            "doc",
            "--no-deps",
            "--no-default-features",
            "-p",
            "p2p-conn",
        ],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    // The CLI's and the lab's own docs (their module maps, and their flags'
    // help, which rustdoc reads as Markdown) stay clean too.
    ctx.run(
        "cargo",
        &[
            "doc",
            "-p",
            "p2p-conn-cli",
            "-p",
            "p2p-conn-lab",
            "-p",
            "p2p-conn-releases",
            "--no-deps",
            "--document-private-items",
        ],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    ctx.run(
        "cargo",
        &args,
        &[
            ("RUSTC_BOOTSTRAP", "1"),
            ("RUSTDOCFLAGS", "--cfg docsrs -D warnings"),
            // The API snapshot's builds (scripts/public-api.py) run with
            // RUSTC_BOOTSTRAP too: one target directory keeps one copy of
            // the dependencies built that way.
            ("CARGO_TARGET_DIR", "target/bootstrap"),
        ],
    )
}

fn api(ctx: &Ctx) -> Result<(), String> {
    ctx.run("python3", &["scripts/public-api.py", "--check"], &[])
}

fn package(ctx: &Ctx) -> Result<(), String> {
    forget_packaged_sources();
    // Together, so that the layers build against the packaged p2p-conn
    // (none is on crates.io yet).
    ctx.cargo(&[
        "publish",
        "--dry-run",
        "-p",
        "p2p-conn",
        "-p",
        "p2p-conn-mconn",
        "-p",
        "p2p-conn-privval",
    ])?;
    for (krate, _) in LIBRARIES {
        let list = ctx.output("cargo", &["package", "--list", "-p", krate])?;
        let allowed = |f: &str| {
            matches!(
                f,
                ".cargo_vcs_info.json"
                    | "Cargo.lock"
                    | "Cargo.toml"
                    | "Cargo.toml.orig"
                    | "LICENSE"
                    | "README.md"
            ) || (f.starts_with("src/") && f.ends_with(".rs"))
        };
        let stray: Vec<&str> = list.lines().filter(|f| !allowed(f)).collect();
        if !stray.is_empty() {
            return Err(format!(
                "the {krate} package holds {} (only src/, Cargo.toml, README.md and LICENSE belong there)",
                stray.join(", ")
            ));
        }
    }
    Ok(())
}

/// Remove what earlier dry runs extracted of our packages. `cargo publish
/// --dry-run` of several crates verifies each against the others' packages
/// through a local registry, and cargo unpacks a registry's crate into
/// `$CARGO_HOME/registry/src/<registry>/NAME-VERSION` once: a second dry
/// run from the same checkout (same registry, same version 0.1.0) would
/// build against the first run's sources, stale since. crates.io's own
/// folders (`index.crates.io-*`) are left alone.
fn forget_packaged_sources() {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let Some(src) = home.map(|h| h.join("registry/src")) else {
        return;
    };
    let Ok(registries) = std::fs::read_dir(&src) else {
        return;
    };
    for registry in registries.flatten() {
        if registry.file_name().to_string_lossy().starts_with("index.") {
            continue;
        }
        let Ok(unpacked) = std::fs::read_dir(registry.path()) else {
            continue;
        };
        for dir in unpacked.flatten() {
            let name = dir.file_name().to_string_lossy().into_owned();
            let ours = LIBRARIES.iter().any(|(krate, _)| {
                name.strip_prefix(krate)
                    .and_then(|rest| rest.strip_prefix('-'))
                    .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
            });
            if ours {
                println!(
                    "-- removing the stale unpacked package {}",
                    dir.path().display()
                );
                let _ = std::fs::remove_dir_all(dir.path());
            }
        }
    }
}

fn changelog(ctx: &Ctx) -> Result<(), String> {
    let log = std::fs::read_to_string(ctx.root.join("CHANGELOG.md")).map_err(|e| e.to_string())?;
    let mut missing = Vec::new();
    let mut stack = vec![ctx.root.join(".changelog")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| e.to_string())? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
                let first = text.trim().lines().next().unwrap_or("");
                if !log.contains(first) {
                    missing.push(
                        path.strip_prefix(&ctx.root)
                            .unwrap_or(&path)
                            .display()
                            .to_string(),
                    );
                }
            }
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        missing.sort();
        Err(format!(
            "CHANGELOG.md lacks these fragments (run `unclog build --all > CHANGELOG.md`): {}",
            missing.join(", ")
        ))
    }
}

fn test_lean(ctx: &Ctx) -> Result<(), String> {
    // The self dev-dependency adds only testkit, so these test exactly the
    // features named (test modules that need an optional part are skipped).
    ctx.cargo(&[
        "test",
        "-p",
        "p2p-conn",
        "--no-default-features",
        "--features",
        "testkit",
    ])?;
    // avx512 and avx2 without ring: the multi-frame engine's two kernels
    // with RustCrypto for everything outside a group of 16 frames. The adapters, the queue and
    // the interop tests do not change with the backend (the stage `test`
    // runs them); what does is proven here: the vectors and properties run
    // every compiled-in backend against the others, the evil peers and the
    // writer faults go through the default backend.
    ctx.cargo(&[
        "test",
        "-p",
        "p2p-conn",
        "--no-default-features",
        "--features",
        "testkit,avx512,avx2",
    ])?;
    ctx.cargo(&["test", "-p", "p2p-conn-mconn", "--no-default-features"])?;
    ctx.cargo(&["test", "-p", "p2p-conn-privval", "--no-default-features"])
}

fn memcheck(ctx: &Ctx) -> Result<(), String> {
    if Command::new("valgrind").arg("--version").output().is_err() {
        if std::env::var("CI").as_deref() == Ok("true") {
            return Err("valgrind is missing (apt-get install valgrind)".into());
        }
        eprintln!("notice: valgrind not installed; skipping the memcheck stage");
        return Ok(());
    }
    // The library's unit tests as `test-lean` built them, found through
    // cargo's own report of the executable.
    let args = [
        "test",
        "-p",
        "p2p-conn",
        "--lib",
        "--no-default-features",
        "--features",
        "testkit,avx512,avx2",
        "--no-run",
        "--message-format=json",
    ];
    let report = ctx.output("cargo", &args)?;
    let exe = report
        .lines()
        .filter(|l| l.contains("\"executable\":\"") && l.contains("\"test\":true"))
        .find_map(|l| {
            let rest = &l[l.find("\"executable\":\"")? + 14..];
            Some(rest[..rest.find('"')?].to_string())
        })
        .ok_or("no test executable in cargo's report")?;
    // The soak's smoke size; every test of the engine, both kernels where
    // the CPU (as valgrind presents it) runs them.
    ctx.run(
        "valgrind",
        &[
            "--quiet",
            "--error-exitcode=9",
            &exe,
            "proto::aead::multiframe",
        ],
        &[],
    )
}

fn embedder(ctx: &Ctx) -> Result<(), String> {
    // What an embedder gets from `p2p-conn = "0.1"`: a Cargo project of its
    // own (not a workspace member) under target/, with the workspace's lock
    // file, built in the workspace's target directory.
    let dir = ctx.root.join("target/ci-embedder");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).map_err(|e| e.to_string())?;
    let manifest = format!(
        "[package]\nname = \"ci-embedder\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         # A project of its own, not a member of the p2p-conn workspace.\n[workspace]\n\n\
         [dependencies]\np2p-conn = {{ path = \"{}\" }}\n",
        ctx.root.join("p2p-conn").display()
    );
    let main = "//! The defaults are a tokio node's: the send queue (over the tokio adapter).\n\
                fn main() {\n    let _queue: Option<p2p_conn::io::queue::Sender> = None;\n    \
                println!(\"{}\", p2p_conn::Identity::generate().node_id());\n}\n";
    let write = |p: PathBuf, s: &str| std::fs::write(p, s).map_err(|e| e.to_string());
    write(dir.join("Cargo.toml"), &manifest)?;
    write(dir.join("src/main.rs"), main)?;
    std::fs::copy(ctx.root.join("Cargo.lock"), dir.join("Cargo.lock"))
        .map_err(|e| e.to_string())?;
    let manifest = dir.join("Cargo.toml");
    let manifest = manifest.to_str().ok_or("path is not UTF-8")?;
    let tree = ctx.output(
        "cargo",
        &[
            "tree",
            "--manifest-path",
            manifest,
            "-e",
            "normal",
            "--prefix",
            "none",
        ],
    )?;
    refuse_in_tree(
        &tree,
        &[
            "clap",
            "pprof",
            "nix",
            "indicatif",
            "tracing-subscriber",
            "tendermint-p2p",
            "p2p-conn-interop",
        ],
        "a project depending on p2p-conn with the default features",
    )?;
    ctx.cargo(&[
        "build",
        "--manifest-path",
        manifest,
        "--target-dir",
        "target",
    ])
}

fn doc_examples(ctx: &Ctx) -> Result<(), String> {
    // docs/examples/<crate>/ is generated from the documents; first check it
    // is what they say now, and that every document's Cargo lines are ones
    // docs/library-guide.md recommends. Each is a project of its own with the
    // workspace's lock file, built in the workspace's target directory.
    ctx.run("python3", &["scripts/doc-examples.py", "--check"], &[])?;
    let mut crates: Vec<PathBuf> = std::fs::read_dir(ctx.root.join("docs/examples"))
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    crates.sort();
    for krate in crates {
        std::fs::copy(ctx.root.join("Cargo.lock"), krate.join("Cargo.lock"))
            .map_err(|e| e.to_string())?;
        let manifest = krate.join("Cargo.toml");
        ctx.cargo(&[
            "build",
            "--manifest-path",
            manifest.to_str().ok_or("path is not UTF-8")?,
            "--target-dir",
            "target",
        ])?;
    }
    Ok(())
}

fn test(ctx: &Ctx) -> Result<(), String> {
    // CI=true: the golden-vector, CometBFT Go, real-node and tmkms tests fail
    // rather than skip when what they need is missing. They build what they
    // run on first use (README: What the tests need).
    let ci = std::env::var("CI").unwrap_or_else(|_| "true".into());
    let result = ctx.run(
        "cargo",
        &["test", "--workspace", "--all-features"],
        &[("CI", &ci)],
    );
    // Under `ci`, the tmkms install started early; the tmkms tests waited
    // on cargo's lock for it if it was still running.
    ctx.finish_early("tmkms");
    result
}

fn fuzz_smoke(ctx: &Ctx) -> Result<(), String> {
    let seconds = std::env::var("FUZZ_SECONDS").unwrap_or_else(|_| "10".into());
    // Under `ci`, the build ran early; run.sh then finds it done.
    ctx.finish_early("fuzz-build");
    ctx.run("p2p-conn-fuzz/run.sh", &[&seconds], &[])
}
