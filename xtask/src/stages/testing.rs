//! `test-lean`, `memcheck`, `embedder`, `doc-examples`, `test` and
//! `fuzz-smoke`: the code built and run as its users build it.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::refuse_in_tree;
use crate::ctx::Ctx;
use crate::early::Kind;
use crate::tmkms_install;

pub fn test_lean(ctx: &Ctx) -> Result<(), String> {
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

pub fn memcheck(ctx: &Ctx) -> Result<(), String> {
    // Under `ci`, valgrind started once `test-lean` had built the tests.
    if let Some(outcome) = ctx.background("memcheck") {
        return outcome;
    }
    let Some(args) = memcheck_args(ctx)? else {
        return Ok(());
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ctx.run("valgrind", &args, &[])
}

/// `ci`: valgrind over the tests `test-lean` built, in the background.
pub fn start_memcheck(ctx: &Ctx) {
    // Where valgrind or the tests are missing, the stage says so at its
    // turn.
    if let Ok(Some(args)) = memcheck_args(ctx) {
        let valgrind = Path::new("valgrind");
        ctx.early
            .start("memcheck", Kind::Checks, valgrind, &args, &[]);
    }
}

/// valgrind's arguments: the multi-frame engine's tests, in the library's
/// unit tests as `test-lean` built them. `None` (after a notice) where
/// valgrind is missing, unless `CI=true`.
fn memcheck_args(ctx: &Ctx) -> Result<Option<Vec<String>>, String> {
    if Command::new("valgrind").arg("--version").output().is_err() {
        if std::env::var("CI").as_deref() == Ok("true") {
            return Err("valgrind is missing (apt-get install valgrind)".into());
        }
        eprintln!("notice: valgrind not installed; skipping the memcheck stage");
        return Ok(None);
    }
    // Found through cargo's own report of the executable.
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
    Ok(Some(
        [
            "--quiet",
            "--error-exitcode=9",
            &exe,
            "proto::aead::multiframe",
        ]
        .map(String::from)
        .to_vec(),
    ))
}

pub fn embedder(ctx: &Ctx) -> Result<(), String> {
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
    // .cargo/config.toml's dev profile applies here too: the same build.
    ctx.run(
        "cargo",
        &[
            "build",
            "--manifest-path",
            manifest,
            "--target-dir",
            "target",
        ],
        &[],
    )
}

pub fn doc_examples(ctx: &Ctx) -> Result<(), String> {
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
        let manifest = manifest.to_str().ok_or("path is not UTF-8")?;
        ctx.run(
            "cargo",
            &[
                "build",
                "--manifest-path",
                manifest,
                "--target-dir",
                "target",
            ],
            &[],
        )?;
    }
    Ok(())
}

pub fn test(ctx: &Ctx) -> Result<(), String> {
    // CI=true: the golden-vector, CometBFT Go, real-node and tmkms tests fail
    // rather than skip when what they need is missing. They build what they
    // run on first use (README: What the tests need).
    let ci = std::env::var("CI").unwrap_or_else(|_| "true".into());
    // Go on PATH for the tests, as the go stage puts it there (installed
    // under ~/.cache/p2p-conn where none is on PATH).
    if let Err(e) = super::go::find_or_install_go() {
        eprintln!("notice: no Go for the interop tests: {e}");
    }
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

/// `ci`: the tests' tmkms install (interop/src/tmkms_install.rs, shared
/// with the tests), which `test` would otherwise do in the middle of its
/// run. Its own target directory: no wait on the workspace's build lock.
pub fn start_tmkms_install(ctx: &Ctx) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let args = tmkms_install::install_args(&ctx.target_dir());
    let env = tmkms_install::ENV;
    ctx.early
        .start("tmkms", Kind::Prepares, Path::new(&cargo), &args, env);
}

/// `ci`: the fuzz targets' build, in p2p-conn-fuzz's own target directory.
pub fn start_fuzz_build(ctx: &Ctx) {
    let args = ["--build-only".to_string()];
    let run = Path::new("p2p-conn-fuzz/run.sh");
    ctx.early
        .start("fuzz-build", Kind::Prepares, run, &args, &[]);
}

/// `ci`: the smoke run itself, in the background from the `test` stage on
/// (run.sh first takes the fuzz build's lock, so it starts once the early
/// build is done, and finds nothing to rebuild).
pub fn start_fuzz_smoke(ctx: &Ctx) {
    let run = Path::new("p2p-conn-fuzz/run.sh");
    ctx.early
        .start("fuzz-smoke", Kind::Checks, run, &[fuzz_seconds()], &[]);
}

fn fuzz_seconds() -> String {
    std::env::var("FUZZ_SECONDS").unwrap_or_else(|_| "10".into())
}

pub fn fuzz_smoke(ctx: &Ctx) -> Result<(), String> {
    // Under `ci`, the build ran early; run.sh then finds it done.
    ctx.finish_early("fuzz-build");
    // Under `ci`, the smoke run started beside `test`.
    if let Some(outcome) = ctx.background("fuzz-smoke") {
        // Each target's line (its runs), as the foreground run prints it.
        let log = ctx.root.join("target/ci-logs/fuzz-smoke.log");
        let text = std::fs::read_to_string(log).unwrap_or_default();
        for line in text.lines().filter(|l| l.starts_with("== fuzz ")) {
            println!("{line}");
        }
        return outcome;
    }
    ctx.run("p2p-conn-fuzz/run.sh", &[&fuzz_seconds()], &[])
}
