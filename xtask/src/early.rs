//! Work that `ci` runs in the background while the stages run (see
//! [`Jobs`]).

use std::cell::RefCell;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::Instant;

/// What a background job is to the stage that waits for it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Work the stage would do anyway (a build, an install): if it fails,
    /// the stage does it again in the foreground and shows the error.
    Prepares,
    /// The stage's check itself: if it fails, the stage fails, and `ci`
    /// stops as soon as it sees the failure.
    Checks,
}

/// How a job ended: its exit status and when.
type Exit = (io::Result<ExitStatus>, Instant);

/// A process that takes none of the workspace's build lock (a build with
/// target directories of its own, or a program over what an earlier stage
/// built), which `ci` runs at the lowest CPU priority (`nice -n 19`). It
/// runs on the CPU the stages leave idle: `test` waits minutes on nodes
/// and CometBFT's timers, at about two thirds of the two cores, and a
/// build has stretches where one core works. The stage that needs it waits
/// for it. Output in `target/ci-logs/NAME.log`.
struct Job {
    name: &'static str,
    kind: Kind,
    /// Its process group (the child's PID).
    group: u32,
    /// A thread that waits for the child.
    exited: Option<JoinHandle<Exit>>,
    /// How it ended, once [`Jobs::failed_check`] saw it end.
    ended: Option<Exit>,
    log: PathBuf,
    started: Instant,
}

impl Job {
    /// Wait for the job to end (at once if it has): when it ended.
    fn wait(&mut self) -> Instant {
        if self.ended.is_none() {
            let thread = self.exited.take().expect("a job is waited for once");
            self.ended = Some(thread.join().expect("the waiting thread does not panic"));
        }
        self.ended.as_ref().expect("set above").1
    }

    /// Once it ended: `None` if it passed, else what happened and the end
    /// of its log.
    fn failure(&self) -> Option<String> {
        let (status, at) = self.ended.as_ref()?;
        let took = at.duration_since(self.started).as_secs_f64();
        let status = match status {
            Ok(s) if s.success() => return None,
            Ok(s) => s.to_string(),
            Err(e) => e.to_string(),
        };
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(30)..].join("\n");
        Some(format!(
            "{} (in the background) failed ({status}) after {took:.0} s; the end of {}:\n{tail}",
            self.name,
            self.log.display()
        ))
    }
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
    pub fn start(
        &self,
        name: &'static str,
        kind: Kind,
        program: &Path,
        args: &[String],
        env: &[(&str, &str)],
    ) {
        let dir = self.root.join("target/ci-logs");
        let log = dir.join(format!("{name}.log"));
        let file = std::fs::create_dir_all(&dir).and_then(|()| std::fs::File::create(&log));
        let file = match file {
            Ok(f) => f,
            Err(e) => {
                eprintln!(
                    "notice: not starting {name} in the background ({}: {e})",
                    log.display()
                );
                return;
            }
        };
        let spawn = |nice: bool| {
            let mut cmd = if nice {
                let mut c = Command::new("nice");
                c.args(["-n", "19"]).arg(program);
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
                    "-- started in the background: {name} ({} {}), log {}",
                    program.display(),
                    args.join(" "),
                    log.display()
                );
                let group = child.id();
                let exited = std::thread::spawn(move || (child.wait(), Instant::now()));
                self.jobs.borrow_mut().push(Job {
                    name,
                    kind,
                    group,
                    exited: Some(exited),
                    ended: None,
                    log,
                    started: Instant::now(),
                });
            }
            Err(e) => eprintln!("notice: not starting {name} in the background: {e}"),
        }
    }

    /// Wait for the job `name`, if it was started, and say how it went.
    pub fn finish(&self, name: &str) -> Finished {
        let mut job = {
            let mut jobs = self.jobs.borrow_mut();
            match jobs.iter().position(|e| e.name == name) {
                Some(i) => jobs.remove(i),
                None => return Finished::NotStarted,
            }
        };
        let asked = Instant::now();
        let at = job.wait();
        match job.failure() {
            None => {
                println!(
                    "-- {name} (in the background): done in {:.0} s, waited {:.0} s for it",
                    at.duration_since(job.started).as_secs_f64(),
                    at.saturating_duration_since(asked).as_secs_f64()
                );
                Finished::Passed
            }
            Some(why) => Finished::Failed(why),
        }
    }

    /// The first [`Kind::Checks`] job that has ended and failed, without
    /// waiting for any: the name of its stage and what happened. It stays
    /// listed ([`finish`](Self::finish) tells the same).
    pub fn failed_check(&self) -> Option<(&'static str, String)> {
        let mut jobs = self.jobs.borrow_mut();
        for job in jobs.iter_mut().filter(|j| j.kind == Kind::Checks) {
            let done = job.ended.is_some() || job.exited.as_ref().is_some_and(|t| t.is_finished());
            if done {
                job.wait();
                if let Some(why) = job.failure() {
                    return Some((job.name, why));
                }
            }
        }
        None
    }

    /// The names of the jobs not waited for yet.
    pub fn pending(&self) -> Vec<&'static str> {
        self.jobs.borrow().iter().map(|e| e.name).collect()
    }

    /// Stop every job still running (a stage failed).
    pub fn stop_all(&self) {
        for mut job in self.jobs.borrow_mut().drain(..) {
            if job.ended.is_none() {
                let group = format!("-{}", job.group);
                let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
                job.wait();
            }
        }
    }
}
