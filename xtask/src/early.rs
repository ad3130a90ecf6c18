//! Jobs that `ci` runs in the background while the stages run (see
//! [`Jobs`]).

use std::cell::RefCell;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::Instant;

/// Work that takes none of the workspace's build lock (a build with target
/// directories of its own, or a program over what a stage built), which
/// `ci` starts at the lowest CPU priority (`nice -n 19`). It runs on the
/// CPU the stages leave idle: `test` waits minutes on nodes and
/// CometBFT's timers, at about two thirds of the two cores. The stage that
/// needs it waits for it. Output in `target/ci-logs/NAME.log`.
struct Job {
    name: &'static str,
    /// Its process group (the child's PID).
    group: u32,
    /// A thread that waits for the child: its exit status, and when.
    exited: JoinHandle<(std::io::Result<ExitStatus>, Instant)>,
    log: PathBuf,
    started: Instant,
}

/// How a background job ended, as [`Jobs::finish`] tells it.
pub enum Finished {
    /// No job of that name was started (or it was waited for already).
    NotStarted,
    /// It exited 0.
    Passed,
    /// It failed: what happened and the end of its log.
    Failed(String),
}

/// The background jobs started and not yet waited for.
pub struct Jobs {
    root: PathBuf,
    jobs: RefCell<Vec<Job>>,
}

impl Jobs {
    /// No jobs; logs go to `root/target/ci-logs/`.
    pub fn new(root: &Path) -> Jobs {
        Jobs {
            root: root.to_path_buf(),
            jobs: RefCell::new(Vec::new()),
        }
    }

    /// Start `program args...` as the job `name`, in the workspace root
    /// with `env` set, at the lowest CPU priority (at normal priority
    /// where `nice` is missing). A job that cannot start is a notice: the
    /// stage that needs the work then does it itself.
    pub fn start(&self, name: &'static str, program: &str, args: &[String], env: &[(&str, &str)]) {
        let dir = self.root.join("target/ci-logs");
        let log = dir.join(format!("{name}.log"));
        let file = std::fs::create_dir_all(&dir).and_then(|()| std::fs::File::create(&log));
        let file = match file {
            Ok(f) => f,
            Err(e) => {
                eprintln!("notice: not starting {name} early ({}: {e})", log.display());
                return;
            }
        };
        let spawn = |nice: bool| {
            let mut cmd = if nice {
                let mut c = Command::new("nice");
                c.args(["-n", "19", program]);
                c
            } else {
                Command::new(program)
            };
            cmd.args(args)
                .envs(env.iter().copied())
                .current_dir(&self.root)
                .stdin(Stdio::null())
                .stdout(file.try_clone()?)
                .stderr(file.try_clone()?)
                // Its own process group, so that a failed run stops all of it.
                .process_group(0)
                .spawn()
        };
        match spawn(true).or_else(|_| spawn(false)) {
            Ok(mut child) => {
                println!(
                    "-- started early: {name} ({program} {}), log {}",
                    args.join(" "),
                    log.display()
                );
                let group = child.id();
                let exited = std::thread::spawn(move || (child.wait(), Instant::now()));
                self.jobs.borrow_mut().push(Job {
                    name,
                    group,
                    exited,
                    log,
                    started: Instant::now(),
                });
            }
            Err(e) => eprintln!("notice: not starting {name} early: {e}"),
        }
    }

    /// Wait for the job `name`, if it was started, and say how it went (its
    /// log's end when it failed).
    pub fn finish(&self, name: &str) -> Finished {
        let job = {
            let mut jobs = self.jobs.borrow_mut();
            match jobs.iter().position(|e| e.name == name) {
                Some(i) => jobs.remove(i),
                None => return Finished::NotStarted,
            }
        };
        let Job {
            name,
            exited,
            log,
            started,
            ..
        } = job;
        let asked = Instant::now();
        let (status, at) = exited.join().expect("the waiting thread does not panic");
        let took = at.duration_since(started).as_secs_f64();
        let waited = at.saturating_duration_since(asked).as_secs_f64();
        match status {
            Ok(s) if s.success() => {
                println!("-- early {name}: done in {took:.0} s, waited {waited:.0} s for it");
                Finished::Passed
            }
            other => {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(30)..].join("\n");
                Finished::Failed(format!(
                    "early {name}: failed ({other:?}) after {took:.0} s; the end of {}:\n{tail}",
                    log.display()
                ))
            }
        }
    }

    /// The names of the jobs not waited for yet.
    pub fn pending(&self) -> Vec<&'static str> {
        self.jobs.borrow().iter().map(|e| e.name).collect()
    }

    /// Stop every job still running (a stage failed).
    pub fn stop_all(&self) {
        for job in self.jobs.borrow_mut().drain(..) {
            let group = format!("-{}", job.group);
            let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
            let _ = job.exited.join();
        }
    }
}
