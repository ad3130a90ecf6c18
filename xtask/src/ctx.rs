//! What every stage runs with: the workspace root, the commands it runs
//! there, and the background jobs of a `ci` run.

use std::path::PathBuf;
use std::process::Command;

use crate::early::{Finished, Jobs};

pub struct Ctx {
    pub root: PathBuf,
    /// The background jobs `ci` started that no stage has waited for yet.
    pub early: Jobs,
}

impl Ctx {
    pub fn new(root: PathBuf) -> Ctx {
        Ctx {
            early: Jobs::new(&root),
            root,
        }
    }

    /// The target directory: `$CARGO_TARGET_DIR`, else the workspace's.
    pub fn target_dir(&self) -> PathBuf {
        std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.root.join("target"))
    }

    /// Wait for the background job `name` that prepares a stage's work,
    /// if `ci` started it, and say how it went. Never an error: the stage
    /// does its own step after this, which finds the work done, or does it
    /// again and shows the error.
    pub fn finish_early(&self, name: &str) {
        if let Finished::Failed(why) = self.early.finish(name) {
            println!("-- {why}\n-- the stage does it again");
        }
    }

    /// The outcome of the background job `name` that ran a stage's check,
    /// once it ends; `None` if `ci` started none (the stage then runs it).
    pub fn background(&self, name: &str) -> Option<Result<(), String>> {
        match self.early.finish(name) {
            Finished::NotStarted => None,
            Finished::Passed => Some(Ok(())),
            Finished::Failed(why) => Some(Err(why)),
        }
    }

    /// `program args...` in the workspace root, with `env` set; an error
    /// naming the command if it fails.
    pub fn run(&self, program: &str, args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
        println!("-- {program} {}", args.join(" "));
        let started = std::time::Instant::now();
        let status = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .current_dir(&self.root)
            .status()
            .map_err(|e| format!("{program}: {e}"))?;
        // Where a stage's time goes, command by command.
        println!("-- ({:.1} s)", started.elapsed().as_secs_f64());
        if status.success() {
            Ok(())
        } else {
            Err(format!("`{program} {}` failed ({status})", args.join(" ")))
        }
    }

    /// `cargo args...`.
    pub fn cargo(&self, args: &[&str]) -> Result<(), String> {
        self.run("cargo", args, &[])
    }

    /// The standard output of `program args...`, which must succeed.
    pub fn output(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let out = Command::new(program)
            .args(args)
            .current_dir(&self.root)
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "`{program} {}` failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// "   (disk: N GiB free, target/ M GiB)", or nothing where `df`/`du`
    /// fail.
    pub fn disk(&self) -> String {
        let free = self.output("df", &["-Pk", "."]).ok().and_then(|s| {
            s.lines()
                .nth(1)?
                .split_whitespace()
                .nth(3)?
                .parse::<f64>()
                .ok()
        });
        let used = self
            .output("du", &["-sk", "target"])
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0);
        match free {
            Some(free) => format!(
                "\n   (disk: {:.1} GiB free, target/ {:.1} GiB)",
                free / 1_048_576.0,
                used / 1_048_576.0
            ),
            None => String::new(),
        }
    }
}
