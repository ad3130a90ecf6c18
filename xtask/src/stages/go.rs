//! `go`: the Go toolchain, and the Go peer checked at every CometBFT line.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::ctx::Ctx;

pub fn go(ctx: &Ctx) -> Result<(), String> {
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
pub(super) fn find_or_install_go() -> Result<PathBuf, String> {
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
