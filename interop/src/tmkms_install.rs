//! How the tests' tmkms is installed, in one place for two users: the
//! interop crate, which installs it on first use (`tmkms::build`), and
//! `cargo xtask ci`, which starts the same install in the background at
//! once so that it is done before the test stage needs it. std only:
//! xtask includes this file as source (`#[path]`), without the crate.

use std::path::{Path, PathBuf};

/// The tmkms release the tests run: the newest on crates.io (2025-11-07),
/// which builds with Rust 1.85 and later.
pub const VERSION: &str = "0.15.0";

/// The cargo features it is installed with: the file-backed signer only.
pub const FEATURES: &str = "softsign";

/// The environment of the install: no debug info (nothing here debugs
/// tmkms, and it is most of a debug build's link time and size).
pub const ENV: &[(&str, &str)] = &[("CARGO_PROFILE_DEV_DEBUG", "0")];

/// `<target>/tmkms`: the install root (`bin/tmkms`, cargo's records).
pub fn install_root(target: &Path) -> PathBuf {
    target.join("tmkms")
}

/// `<target>/tmkms/bin/tmkms`.
pub fn binary_path(target: &Path) -> PathBuf {
    install_root(target).join("bin").join("tmkms")
}

/// `<target>/tmkms-build`: the install's own target directory, so that it
/// never waits on the build lock of the workspace's `target/`.
pub fn build_dir(target: &Path) -> PathBuf {
    target.join("tmkms-build")
}

/// The arguments of the install, after `cargo`. Two installs at once are
/// serialized by cargo's locks on the root and the build directory; the
/// second finds the first's binary.
pub fn install_args(target: &Path) -> Vec<String> {
    let mut args: Vec<String> = ["install", "tmkms", "--version"].map(String::from).into();
    args.push(format!("={VERSION}"));
    // A debug build: the tests sign a few hundred messages, and an
    // unoptimized tmkms without debug info compiled in 84 s against 119 s
    // for a release build (2 cores, idle, dependencies downloaded).
    args.extend(["--features", FEATURES, "--locked", "--debug", "--root"].map(String::from));
    args.push(install_root(target).display().to_string());
    args.push("--target-dir".into());
    args.push(build_dir(target).display().to_string());
    args
}
