//! `docs`, `api`, `package` and `changelog`: what a release publishes.

use std::path::PathBuf;

use super::LIBRARIES;
use crate::ctx::Ctx;

pub fn docs(ctx: &Ctx) -> Result<(), String> {
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

pub fn api(ctx: &Ctx) -> Result<(), String> {
    ctx.run("python3", &["scripts/public-api.py", "--check"], &[])
}

pub fn package(ctx: &Ctx) -> Result<(), String> {
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

pub fn changelog(ctx: &Ctx) -> Result<(), String> {
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
