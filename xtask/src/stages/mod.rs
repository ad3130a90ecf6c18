//! The stages: the table `cargo xtask` runs and lists, and what several
//! stages share. One file per group of stages.

mod go;
mod layout;
mod lint;
mod release;
mod testing;
mod trees;

use crate::ctx::Ctx;
use crate::needs::*;
use crate::tmkms_install;

/// A stage: its name, what it checks, what it needs beyond Rust (with
/// rustfmt and clippy) and a C compiler, and how it runs.
pub struct Stage {
    pub name: &'static str,
    pub about: &'static str,
    pub needs: &'static [&'static Need],
    pub run: fn(&Ctx) -> Result<(), String>,
}

/// CI's order: cheap checks first, the long test run and the fuzz smoke
/// last.
pub const STAGES: &[Stage] = &[
    Stage {
        name: "go",
        about: "Go toolchain (installed from the module proxy if missing); gofmt, go mod download and go vet of the Go peer at every CometBFT line",
        needs: &[&GO, &GO_MODULES],
        run: go::go,
    },
    Stage {
        name: "fmt",
        about: "cargo fmt --check",
        needs: &[],
        run: lint::fmt,
    },
    Stage {
        name: "lint",
        about: "the dependency trees: the lean builds', and the operator CLI's without the lab's crates, at most 120; the generated AVX2 rounds match their script; clippy -D warnings on every target, then each library crate with no features and with each feature alone",
        needs: &[&PYTHON3],
        run: lint::lint,
    },
    Stage {
        name: "aarch64",
        about: "the avx512 and avx2 features build clean off x86_64 (clippy for aarch64)",
        needs: &[&AARCH64],
        run: lint::aarch64,
    },
    Stage {
        name: "cycles",
        about: "no module cycles in any crate (scripts/module-cycles.py)",
        needs: &[&PYTHON3],
        run: layout::cycles,
    },
    Stage {
        name: "layout",
        about: "no source file over 800 lines, and no CLI command using another (scripts/layout.py, after its self-test)",
        needs: &[&PYTHON3],
        run: layout::layout,
    },
    Stage {
        name: "docs",
        about: "cargo doc -D warnings for the library crates (also as docs.rs builds them) and the CLI",
        needs: &[&BOOTSTRAP],
        run: release::docs,
    },
    Stage {
        name: "api",
        about: "each library crate's public API against its public-api.txt",
        needs: &[&PYTHON3, &BOOTSTRAP],
        run: release::api,
    },
    Stage {
        name: "package",
        about: "cargo publish --dry-run of the library crates, and what their packages hold",
        needs: &[&CRATES_IO],
        run: release::package,
    },
    Stage {
        name: "changelog",
        about: "CHANGELOG.md holds every .changelog/ fragment",
        needs: &[],
        run: release::changelog,
    },
    Stage {
        name: "test-lean",
        about: "the library crates' tests as embedders build them: pure Rust, avx512 and avx2 without ring, the layers with no features",
        needs: &[],
        run: testing::test_lean,
    },
    Stage {
        name: "memcheck",
        about: "the multi-frame engine's tests under valgrind memcheck (its AVX2 kernel: valgrind hides AVX-512)",
        needs: &[&VALGRIND],
        run: testing::memcheck,
    },
    Stage {
        name: "embedder",
        about: "a new project depending on p2p-conn with the defaults builds, and compiles none of the CLI's crates",
        needs: &[],
        run: testing::embedder,
    },
    Stage {
        name: "doc-examples",
        about: "every document's examples built as a user's crate with the Cargo lines it recommends",
        needs: &[&PYTHON3],
        run: testing::doc_examples,
    },
    Stage {
        name: "test",
        about: "the README's test command: cargo test --workspace --all-features (CI=true)",
        needs: &[&GO, &GO_MODULES, &COMETBFT, &TMKMS, &VECTORS, &ROOT, &CRATES_IO],
        run: testing::test,
    },
    Stage {
        name: "fuzz-smoke",
        about: "every fuzz target for FUZZ_SECONDS (default 10) seconds, a smoke run (long runs: p2p-conn-fuzz/run.sh 3600)",
        needs: &[&CARGO_FUZZ, &BOOTSTRAP, &CRATES_IO],
        run: testing::fuzz_smoke,
    },
];

/// The library crates, each with the features `lint` builds it with one at
/// a time (`testkit` among them where a crate has it; `api` never uses
/// it).
pub const LIBRARIES: &[(&str, &[&str])] = &[
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

/// `ci`'s early jobs (see [`crate::early::Jobs`]): the fuzz build for
/// `fuzz-smoke`, and the tmkms install that `test` would otherwise do in
/// the middle of its run (interop/src/tmkms_install.rs, shared with the
/// tests).
pub fn start_early_jobs(ctx: &Ctx) {
    ctx.early.start(
        "fuzz-build",
        "p2p-conn-fuzz/run.sh",
        &["--build-only".to_string()],
        &[],
    );
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    ctx.early.start(
        "tmkms",
        &cargo,
        &tmkms_install::install_args(&ctx.target_dir()),
        tmkms_install::ENV,
    );
}

/// Fail if any line of `tree` (a `cargo tree --prefix none`) names one of
/// `crates`.
pub(crate) fn refuse_in_tree(tree: &str, crates: &[&str], what: &str) -> Result<(), String> {
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
