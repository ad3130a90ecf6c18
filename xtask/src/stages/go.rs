//! `go`: the Go toolchain, and the Go peer checked at every CometBFT line.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

use crate::ctx::Ctx;
use crate::early::Kind;

pub fn go(ctx: &Ctx) -> Result<(), String> {
    // Under `ci`, this stage ran in the background from the start; what is
    // left is Go on PATH for the tests.
    if let Some(outcome) = ctx.background("go") {
        return outcome.and_then(|()| find_or_install_go().map(drop));
    }
    let go = find_or_install_go()?;
    let go = go.to_str().ok_or("Go's path is not UTF-8")?;
    let local = [("GOTOOLCHAIN", "local")];
    ctx.run(go, &["version"], &local)?;
    let peer = ctx.root.join("interop/cometbft-go");
    // v0.34.35's node builds from a module of our own (go install refuses it).
    let node_v034 = ctx.root.join("interop/cometbft-node/v0.34");
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
    // Everything the Go code and the tests' Go builds download, first and
    // at once (network, no CPU): each line's module file, v0.34.35's node
    // module, and what `go install` of each release's node and e2e node
    // fetches (`go install -n` loads the packages, downloading their
    // modules, and builds nothing), so that no later build waits on the
    // network (a test waiting on a node's build). The go command fetches
    // GOMAXPROCS modules at a time, two on these machines; a download
    // waits rather than computes, so more.
    let lines = go_builds(ctx)?;
    let mut downloads: Vec<GoCmd> = lines
        .iter()
        .map(|(modfile, _)| GoCmd::new(&peer, &["mod", "download", &format!("-modfile={modfile}")]))
        .collect();
    downloads.push(GoCmd::new(&node_v034, &["mod", "download"]));
    let outside = std::env::temp_dir();
    let cache = ctx.output(go, &["env", "GOMODCACHE"])?;
    let cached = Path::new(cache.trim()).join("cache/download/github.com/cometbft/cometbft/@v");
    for (modfile, _) in &lines {
        let Some(version) = cometbft_version(&peer.join(modfile)) else {
            continue; // v0.34: its own module, above
        };
        // A release whose module is in the cache was fetched before: skip
        // it (`go install PKG@VERSION` asks the proxy about deprecation
        // even when it has every module, so this keeps a warm cache
        // offline).
        if cached.join(format!("{version}.zip")).is_file() {
            continue;
        }
        for package in NODE_PACKAGES {
            let target = format!("{package}@{version}");
            downloads.push(GoCmd::new(
                &outside,
                &["install", "-n", "-trimpath", &target],
            ));
        }
    }
    run_all(
        ctx,
        go,
        downloads,
        DOWNLOADS_AT_ONCE,
        &[("GOMAXPROCS", "8")],
    )?;
    // Then vet the peer at every line, two lines at a time: one go command
    // alone leaves a core idle whenever its next compile waits on another.
    // The build flags are the ones the tests build the peer with
    // (interop/src/cometbft_go.rs, `build`): with the same flags, vet's
    // compiles of CometBFT and its dependencies are the ones `go build`
    // finds in Go's build cache, so the tests' first build of each line's
    // peer only links. Without them every line compiles twice.
    let vets = lines
        .iter()
        .map(|(modfile, tags)| {
            let modflag = format!("-modfile={modfile}");
            let tagflag = tags.as_ref().map(|t| format!("-tags={t}"));
            let mut vet = vec!["vet", "-trimpath", "-mod=readonly", modflag.as_str()];
            vet.extend(tagflag.as_deref());
            vet.push(".");
            GoCmd::new(&peer, &vet)
        })
        .collect();
    run_all(ctx, go, vets, VETS_AT_ONCE, &[])
}

/// `ci`: this stage, as `cargo xtask go` runs it, in the background from
/// the start. Its downloads wait on the network, its go vet compiles
/// CometBFT at six releases (minutes from an empty Go build cache), on the
/// CPU the stages before `go` leave idle.
pub fn start_in_background(ctx: &Ctx) {
    match std::env::current_exe() {
        Ok(xtask) => ctx
            .early
            .start("go", Kind::Checks, &xtask, &["go".to_string()], &[]),
        Err(e) => eprintln!("notice: not running go in the background: {e}"),
    }
}

/// Where the Go builds of the release lines are listed: a row per line
/// (`GoBuild { modfile: "go.v0.38.mod", ..., tags: None, ... }`, in the
/// order of `p2p_conn_releases::ALL`), which the go stage reads rather
/// than keeping a list of its own.
const GO_BUILDS: &str = "interop/src/cometbft_go.rs";

/// Each line's module file (go.mod is v1.0.1, go.v0.NN.mod the others) and
/// the build tag that picks its files, from [`GO_BUILDS`].
fn go_builds(ctx: &Ctx) -> Result<Vec<(String, Option<String>)>, String> {
    let text = std::fs::read_to_string(ctx.root.join(GO_BUILDS))
        .map_err(|e| format!("{GO_BUILDS}: {e}"))?;
    let rows = parse_go_builds(&text);
    if rows.is_empty() {
        return Err(format!(
            "no `const GO_BUILDS` rows with a modfile and tags in {GO_BUILDS}"
        ));
    }
    Ok(rows)
}

/// The `(modfile, tags)` of each row of `const GO_BUILDS` in `text`; no
/// rows if a row lacks either.
fn parse_go_builds(text: &str) -> Vec<(String, Option<String>)> {
    let Some(start) = text.find("const GO_BUILDS") else {
        return Vec::new();
    };
    let table = &text[start..];
    let table = &table[..table.find("\n];").unwrap_or(table.len())];
    let quoted = |s: &str| Some(s.strip_prefix('"')?.split('"').next()?.to_string());
    let mut rows = Vec::new();
    let mut modfile = None;
    for line in table.lines().map(str::trim) {
        if let Some(value) = line.strip_prefix("modfile:") {
            modfile = quoted(value.trim());
        } else if let Some(value) = line.strip_prefix("tags:") {
            let value = value.trim().trim_end_matches(',');
            let tags = match value.strip_prefix("Some(") {
                Some(inner) => quoted(inner),
                None if value == "None" => None,
                None => return Vec::new(),
            };
            match modfile.take() {
                Some(m) => rows.push((m, tags)),
                None => return Vec::new(),
            }
        }
    }
    rows
}

/// The main packages the tests `go install` at each release (v0.37 and
/// later: interop/src/cometbft_node.rs): the node and the e2e node.
const NODE_PACKAGES: [&str; 2] = [
    "github.com/cometbft/cometbft/cmd/cometbft",
    "github.com/cometbft/cometbft/test/e2e/node",
];

/// Go commands at once while downloading, each with GOMAXPROCS=8.
const DOWNLOADS_AT_ONCE: usize = 6;

/// `go vet` commands at once.
const VETS_AT_ONCE: usize = 2;

/// The version of `github.com/cometbft/cometbft` a module file requires
/// (`require github.com/cometbft/cometbft v0.38.26`, alone or in a block);
/// `None` where it requires none (v0.34's replaces Tendermint's module).
fn cometbft_version(modfile: &Path) -> Option<String> {
    let text = std::fs::read_to_string(modfile).ok()?;
    cometbft_requirement(&text)
}

fn cometbft_requirement(modfile: &str) -> Option<String> {
    modfile.lines().find_map(|line| {
        let line = line.trim().trim_start_matches("require").trim();
        let version = line.strip_prefix("github.com/cometbft/cometbft ")?;
        Some(version.split_whitespace().next()?.to_string())
    })
}

/// A go command: where it runs and its arguments.
struct GoCmd {
    dir: PathBuf,
    args: Vec<String>,
}

impl GoCmd {
    fn new(dir: &Path, args: &[&str]) -> GoCmd {
        GoCmd {
            dir: dir.to_path_buf(),
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    fn describe(&self, root: &Path) -> String {
        let dir = self.dir.strip_prefix(root).unwrap_or(&self.dir);
        format!("({}) go {}", dir.display(), self.args.join(" "))
    }
}

/// Run `cmds` with `go`, `at_once` at a time (GOTOOLCHAIN=local and `env`
/// set), each line of output once it ends; an error naming every command
/// that failed, with its output.
fn run_all(
    ctx: &Ctx,
    go: &str,
    cmds: Vec<GoCmd>,
    at_once: usize,
    env: &[(&str, &str)],
) -> Result<(), String> {
    let root = ctx.root.as_path();
    let started = Instant::now();
    let queue = Mutex::new(cmds.into_iter().collect::<VecDeque<GoCmd>>());
    let failed = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..at_once {
            s.spawn(|| loop {
                let Some(cmd) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front() else {
                    return;
                };
                let what = cmd.describe(root);
                let began = Instant::now();
                let out = Command::new(go)
                    .args(&cmd.args)
                    .env("GOTOOLCHAIN", "local")
                    .envs(env.iter().copied())
                    .current_dir(&cmd.dir)
                    .output();
                let took = began.elapsed().as_secs_f64();
                let why = match out {
                    Ok(o) if o.status.success() => {
                        println!("-- {what} ({took:.1} s)");
                        continue;
                    }
                    Ok(o) => format!(
                        "{} ({}):\n{}{}",
                        what,
                        o.status,
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    ),
                    Err(e) => format!("{what}: {e}"),
                };
                println!("-- {what} FAILED ({took:.1} s)");
                failed.lock().unwrap_or_else(|e| e.into_inner()).push(why);
            });
        }
    });
    println!("-- ({:.1} s)", started.elapsed().as_secs_f64());
    let failed = failed.into_inner().unwrap_or_else(|e| e.into_inner());
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} go commands failed:\n{}",
            failed.len(),
            failed.join("\n")
        ))
    }
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

#[cfg(test)]
mod tests {
    use super::{cometbft_requirement, parse_go_builds};

    #[test]
    fn reads_the_go_builds_table() {
        let text = "struct GoBuild {\n    modfile: &'static str,\n    tags: Option<&'static str>,\n}\n\n\
                    const GO_BUILDS: [GoBuild; 3] = [\n    GoBuild {\n        modfile: \"go.v0.34.mod\",\n        \
                    sumfile: \"go.v0.34.sum\",\n        tags: Some(\"cometbft_v034\"),\n    },\n    GoBuild {\n        \
                    modfile: \"go.v0.38.mod\",\n        tags: None,\n    },\n    GoBuild {\n        \
                    modfile: \"go.mod\",\n        // a comment\n        tags: Some(\"cometbft_v1\"),\n    },\n];\n\n\
                    fn later() { let tags: Option<u8> = None; }\n";
        let rows = parse_go_builds(text);
        let rows: Vec<(&str, Option<&str>)> = rows
            .iter()
            .map(|(m, t)| (m.as_str(), t.as_deref()))
            .collect();
        assert_eq!(
            rows,
            [
                ("go.v0.34.mod", Some("cometbft_v034")),
                ("go.v0.38.mod", None),
                ("go.mod", Some("cometbft_v1")),
            ]
        );
        assert!(parse_go_builds(
            "const GO_BUILDS: [GoBuild; 1] = [\n    GoBuild { tags: None },\n];"
        )
        .is_empty());
    }

    #[test]
    fn reads_this_repository_go_builds() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = std::fs::read_to_string(root.join(super::GO_BUILDS)).unwrap();
        let rows = parse_go_builds(&text);
        // One row per release of the releases crate's table.
        let releases = std::fs::read_to_string(root.join("releases/src/lib.rs")).unwrap();
        let labels = releases
            .lines()
            .filter(|l| l.trim().starts_with("label: \"v"))
            .count();
        assert_eq!(rows.len(), labels, "{rows:?}");
        assert!(rows
            .iter()
            .any(|(m, t)| m == "go.mod" && t.as_deref() == Some("cometbft_v1")));
    }

    #[test]
    fn reads_the_cometbft_requirement() {
        let one = "module x\n\ngo 1.25\n\nrequire github.com/cometbft/cometbft v1.0.1\n";
        assert_eq!(cometbft_requirement(one).as_deref(), Some("v1.0.1"));
        let block = "require (\n\tgithub.com/cometbft/cometbft v0.40.0\n\tgithub.com/cometbft/cometbft-db v1.0.1 // indirect\n)\n";
        assert_eq!(cometbft_requirement(block).as_deref(), Some("v0.40.0"));
        let v034 = "require github.com/tendermint/tendermint v0.34.35\nreplace github.com/tendermint/tendermint => github.com/cometbft/cometbft v0.34.35\n";
        assert_eq!(cometbft_requirement(v034), None);
    }
}
