//! `fmt`, `lint` and `aarch64`: the code as rustfmt and clippy want it,
//! with every feature set, on x86_64 and off it.

use std::process::Command;

use super::LIBRARIES;
use crate::ctx::Ctx;

pub fn fmt(ctx: &Ctx) -> Result<(), String> {
    ctx.cargo(&["fmt", "--all", "--", "--check"])
}

pub fn lint(ctx: &Ctx) -> Result<(), String> {
    // First what takes no build: the dependency trees of the lean builds
    // and of the operator binary.
    super::trees::check(ctx)?;
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
    Ok(())
}

pub fn aarch64(ctx: &Ctx) -> Result<(), String> {
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
