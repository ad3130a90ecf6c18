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

/// A stage: its name, what it checks, what it needs beyond Rust (with
/// rustfmt and clippy) and a C compiler, what of it `ci` starts in the
/// background, and how it runs.
pub struct Stage {
    pub name: &'static str,
    pub about: &'static str,
    pub needs: &'static [&'static Need],
    pub background: &'static [Background],
    pub run: fn(&Ctx) -> Result<(), String>,
}

/// Work of a stage that `ci` starts in the background before the stage's
/// turn (crate::early: at the lowest CPU priority, taking none of the
/// workspace's build lock), so that it runs on the CPU the stages before
/// leave idle. At its turn the stage waits for it: its check's outcome
/// (`go`, `memcheck`), or work it then finds done (`test`'s tmkms,
/// `fuzz-smoke`'s build). A stage may have several, each started at its
/// own time. A stage run alone does it all in the foreground.
pub struct Background {
    /// Start once this stage has passed (it built what the job runs);
    /// `None`: before the first stage.
    pub after: Option<&'static str>,
    /// What runs in the background, for `cargo xtask list`.
    pub what: &'static str,
    pub start: fn(&Ctx),
}

/// CI's order: cheap checks first, the long test run and the fuzz smoke
/// last. The stages with background work come late, so that it has the
/// stages before them to run in: `go` (its downloads and go vet at every
/// line start first) just before `test`, which needs Go, and `memcheck`
/// (started once `test-lean` built its tests) after `test`.
pub const STAGES: &[Stage] = &[
    Stage {
        name: "fmt",
        about: "cargo fmt --check",
        needs: &[],
        background: &[],
        run: lint::fmt,
    },
    Stage {
        name: "lint",
        about: "the dependency trees: the lean builds', and the operator CLI's without the lab's crates, at most 128; the generated AVX2 rounds match their script; clippy -D warnings on every target, then each library crate with no features and with each feature alone",
        needs: &[&PYTHON3],
        background: &[],
        run: lint::lint,
    },
    Stage {
        name: "aarch64",
        about: "the avx512 and avx2 features build clean off x86_64 (clippy for aarch64)",
        needs: &[&AARCH64],
        background: &[],
        run: lint::aarch64,
    },
    Stage {
        name: "cycles",
        about: "no module cycles in any crate (scripts/module-cycles.py)",
        needs: &[&PYTHON3],
        background: &[],
        run: layout::cycles,
    },
    Stage {
        name: "layout",
        about: "no source file over 800 lines, and no CLI command using another (scripts/layout.py, after its self-test)",
        needs: &[&PYTHON3],
        background: &[],
        run: layout::layout,
    },
    Stage {
        name: "docs",
        about: "cargo doc -D warnings for the library crates (also as docs.rs builds them), the CLI, the lab and the releases table",
        needs: &[&BOOTSTRAP],
        background: &[],
        run: release::docs,
    },
    Stage {
        name: "api",
        about: "each library crate's public API against its public-api.txt",
        needs: &[&PYTHON3, &BOOTSTRAP],
        background: &[],
        run: release::api,
    },
    Stage {
        name: "package",
        about: "cargo publish --dry-run of the library crates, and what their packages hold",
        needs: &[&CRATES_IO],
        background: &[],
        run: release::package,
    },
    Stage {
        name: "changelog",
        about: "CHANGELOG.md holds every .changelog/ fragment",
        needs: &[],
        background: &[],
        run: release::changelog,
    },
    Stage {
        name: "test-lean",
        about: "the library crates' tests as embedders build them: pure Rust, avx512 and avx2 without ring, the layers with no features",
        needs: &[],
        background: &[],
        run: testing::test_lean,
    },
    Stage {
        name: "embedder",
        about: "a new project depending on p2p-conn with the defaults builds, and compiles none of the CLI's crates",
        needs: &[],
        background: &[],
        run: testing::embedder,
    },
    Stage {
        name: "doc-examples",
        about: "every document's examples built as a user's crate with the Cargo lines it recommends",
        needs: &[&PYTHON3],
        background: &[],
        run: testing::doc_examples,
    },
    Stage {
        name: "go",
        about: "Go toolchain (installed from the module proxy if missing); gofmt; every Go module the peer and the tests' node builds need, fetched at once; go vet of the Go peer at every CometBFT line",
        needs: &[&GO, &GO_MODULES],
        background: &[Background {
            after: None,
            what: "the whole stage",
            start: go::start_in_background,
        }],
        run: go::go,
    },
    Stage {
        name: "test",
        about: "the README's test command: cargo test --workspace --all-features (CI=true)",
        needs: &[&GO, &GO_MODULES, &COMETBFT, &TMKMS, &VECTORS, &ROOT, &CRATES_IO],
        background: &[Background {
            after: None,
            what: "the tmkms install",
            start: testing::start_tmkms_install,
        }],
        run: testing::test,
    },
    Stage {
        name: "memcheck",
        about: "the multi-frame engine's tests under valgrind memcheck (its AVX2 kernel: valgrind hides AVX-512)",
        needs: &[&VALGRIND],
        background: &[Background {
            after: Some("test-lean"),
            what: "the valgrind run",
            start: testing::start_memcheck,
        }],
        run: testing::memcheck,
    },
    Stage {
        name: "fuzz-smoke",
        about: "every fuzz target for FUZZ_SECONDS (default 10) seconds, a smoke run (long runs: p2p-conn-fuzz/run.sh 3600)",
        needs: &[&CARGO_FUZZ, &BOOTSTRAP, &CRATES_IO],
        background: &[Background {
            after: None,
            what: "the fuzz targets' build",
            start: testing::start_fuzz_build,
        }, Background {
            after: Some("go"),
            what: "the smoke run, beside `test` and its idle waits on CometBFT nodes,",
            start: testing::start_fuzz_smoke,
        }],
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
        &[
            "",
            "tokio",
            "noise",
            "ring",
            "avx512",
            "avx2",
            "pkcs11",
            "threshold",
            "cosign-net",
        ],
    ),
];

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
