//! `cargo xtask`: the CI stages as named tasks, each runnable alone.
//!
//! ```text
//! cargo xtask list            the stages, in CI's order: what each checks and needs
//! cargo xtask list --markdown the same as CONTRIBUTING.md's tables
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
//! `ci` also runs work of four stages in the background, at the lowest CPU
//! priority and with none of the workspace's build lock, on the CPU that
//! the stages before them leave idle (see [`stages::Background`] and
//! [`early::Jobs`]): from the start, the whole `go` stage, the fuzz
//! targets' build (`p2p-conn-fuzz/run.sh --build-only`) and the tests'
//! tmkms (`interop/src/tmkms_install.rs`); once `test-lean` has built the
//! library's tests, `memcheck`'s valgrind run; once `go` has passed, the
//! fuzz smoke run, beside `test`. Each stage waits for its
//! part at its turn; a check that fails in the background stops the run
//! at the end of the stage then running.
//!
//! std only, so that `cargo xtask` builds in seconds.

mod ctx;
mod early;
mod list;
mod manifest;
mod needs;
mod stages;

#[path = "../../interop/src/tmkms_install.rs"]
#[allow(dead_code)]
mod tmkms_install;

use std::path::Path;
use std::process::ExitCode;

use ctx::Ctx;
use stages::STAGES;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask/ is inside the workspace")
        .to_path_buf();
    let ctx = Ctx::new(root);
    if args.is_empty()
        || args
            .iter()
            .any(|a| a == "list" || a == "-h" || a == "--help")
    {
        let rust = manifest::workspace_setting(&ctx.root, "workspace.package", "rust-version")
            .unwrap_or_else(|| "?".into());
        if args.iter().any(|a| a == "--markdown") {
            print!("{}", list::markdown(&rust));
        } else {
            print!("{}", list::text(&rust));
        }
        return ExitCode::SUCCESS;
    }
    let ci = args.iter().any(|a| a == "ci");
    let names: Vec<&str> = if ci {
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
    // The dev profile (.cargo/config.toml) is the one setting of debug info
    // and optimisation, so a stage run alone shares its build with `cargo
    // test` and with `ci`. `ci` also turns incremental
    // compilation off: a whole run, usually from a fresh clone, never
    // reuses that data, and it is gigabytes of writes. Every dependency's
    // build is the same with or without it (cargo compiles no dependency
    // incrementally), so a stage run after `ci` rebuilds at most the
    // workspace's own crates.
    if ci && std::env::var_os("CARGO_INCREMENTAL").is_none() {
        // Before any thread is spawned; the children inherit it.
        std::env::set_var("CARGO_INCREMENTAL", "0");
    }
    // Under `ci`, a stage's background work starts before the first stage
    // or once the stage it follows has passed (stages::Background).
    let start_background = |after: Option<&str>| {
        let running = STAGES.iter().filter(|s| ci && names.contains(&s.name));
        for stage in running {
            for bg in stage.background.iter().filter(|bg| bg.after == after) {
                (bg.start)(&ctx);
            }
        }
    };
    start_background(None);
    for &name in &names {
        let stage = STAGES
            .iter()
            .find(|s| s.name == name)
            .expect("checked above");
        let started = std::time::Instant::now();
        println!("\n== {} ({}){}", stage.name, stage.about, ctx.disk());
        if let Err(e) = (stage.run)(&ctx) {
            eprintln!("error: stage {}: {e}", stage.name);
            ctx.early.stop_all();
            return ExitCode::FAILURE;
        }
        println!(
            "== {} passed in {:.0} s",
            stage.name,
            started.elapsed().as_secs_f64()
        );
        start_background(Some(stage.name));
        // A check running in the background that has failed stops the run
        // now, not at its stage's turn.
        if let Some((name, why)) = ctx.early.failed_check() {
            eprintln!("error: stage {name}: {why}");
            ctx.early.stop_all();
            return ExitCode::FAILURE;
        }
    }
    // Any background job no stage waited for (a `ci` run's stages all do).
    for name in ctx.early.pending() {
        ctx.finish_early(name);
    }
    ExitCode::SUCCESS
}
