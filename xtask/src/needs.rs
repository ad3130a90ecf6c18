//! What the stages need beyond Rust, and who provides it: the data behind
//! `cargo xtask list`'s "needs" and CONTRIBUTING.md's table. `.ci/run`
//! installs the Debian packages among them; the stages install the rest.

/// One thing a stage needs.
pub struct Need {
    /// As `cargo xtask list` names it.
    pub name: &'static str,
    /// What it is for and where it comes from.
    pub how: &'static str,
}

pub const PYTHON3: Need = Need {
    name: "python3",
    how: "the checks in scripts/ (standard library only); .ci/run installs it (apt-get)",
};

pub const VALGRIND: Need = Need {
    name: "valgrind",
    how: ".ci/run installs it (apt-get); without it the stage skips, unless CI=true",
};

pub const GO: Need = Need {
    name: "go",
    how: "Go 1.25 or later; where none is on PATH, the go and test stages install Go 1.26.8 from the Go module proxy under ~/.cache/p2p-conn/ (with curl and unzip, which .ci/run installs)",
};

pub const GO_MODULES: Need = Need {
    name: "network: Go modules",
    how: "CometBFT and its dependencies from the Go module proxy, on first use (then Go's module cache)",
};

pub const COMETBFT: Need = Need {
    name: "CometBFT binaries",
    how: "the Go peer and the cometbft nodes of six releases, built on first use into target/cometbft-go/ and target/cometbft-node/ (Go, the module proxy)",
};

pub const TMKMS: Need = Need {
    name: "tmkms",
    how: "tmkms 0.15.0 from crates.io, installed on first use into target/tmkms/ (ci starts the install at once, in the background)",
};

pub const VECTORS: Need = Need {
    name: "golden file",
    how: "CometBFT's p2p/conn/testdata/TestDeriveSecretsAndChallengeGolden.golden in ../shared/vectors/ beside the checkout, where this workplace provides it (never committed); without it the known-answer test skips, unless CI=true",
};

pub const ROOT: Need = Need {
    name: "root",
    how: "the signer test's bind mounts make a mount namespace (unshare -m); without root that half skips, unless CI=true",
};

pub const AARCH64: Need = Need {
    name: "aarch64 target",
    how: "rustup's aarch64-unknown-linux-gnu standard library; .ci/run and the stage add it (rustup target add); without it the stage skips, unless CI=true",
};

pub const BOOTSTRAP: Need = Need {
    name: "RUSTC_BOOTSTRAP",
    how: "unstable flags on the stable toolchain (docs.rs's --cfg docsrs, rustdoc JSON, the fuzz sanitizer), set by the stage: no nightly toolchain",
};

pub const CRATES_IO: Need = Need {
    name: "network: crates.io",
    how: "cargo publish --dry-run and the installs of cargo-fuzz and tmkms read crates.io",
};

pub const CARGO_FUZZ: Need = Need {
    name: "cargo-fuzz",
    how: "cargo-fuzz 0.13.2, installed from crates.io by p2p-conn-fuzz/run.sh; libFuzzer needs a C++ compiler (.ci/run installs build-essential)",
};

/// Every need, in the order `cargo xtask list` explains them.
pub const ALL: &[&Need] = &[
    &PYTHON3,
    &VALGRIND,
    &GO,
    &GO_MODULES,
    &COMETBFT,
    &TMKMS,
    &VECTORS,
    &ROOT,
    &AARCH64,
    &BOOTSTRAP,
    &CRATES_IO,
    &CARGO_FUZZ,
];
