//! Child processes for the CLI and Go-peer tests, with loopback ports and
//! scratch folders.
//!
//! A [`Proc`] has its stdin fed and its stdout and stderr drained by threads
//! (a full pipe would otherwise stall the child), and every wait has a
//! deadline: a process that overstays is killed and the test fails with its
//! stderr. Dropping a `Proc` kills the process if it has not been waited for.

use std::ffi::OsStr;
use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// What a process gets on its (piped) stdin, and when its stdin ends.
pub enum Feed {
    /// All of it at once, then end of file.
    Now(Vec<u8>),
    /// Nothing until the process has written `.0` bytes to stdout (or its
    /// stdout has closed): stdin stays open and empty until then. Then `.1`,
    /// then end of file.
    AfterOutput(usize, Vec<u8>),
    /// `.0` at once, but end of file only once the process has written `.1`
    /// bytes to stdout (or its stdout has closed), as a person typing would.
    UntilOutput(Vec<u8>, usize),
}

impl Feed {
    /// No input: end of file at once.
    pub fn none() -> Feed {
        Feed::Now(Vec::new())
    }
}

/// Time left until `deadline` (zero once it has passed).
pub fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// A running process; see the module docs.
pub struct Proc {
    /// The program's file name and arguments, for messages.
    pub what: String,
    child: Child,
    waited: bool,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<Vec<u8>>>,
    /// Each stderr line as it arrives (the drain thread keeps all of stderr
    /// too).
    lines: mpsc::Receiver<String>,
}

/// A process that has exited, with everything it wrote.
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Finished {
    /// Stdout as text, trimmed (one-line outputs: IDs, versions).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim().to_string()
    }

    /// Stderr, line by line, without the line ends.
    pub fn stderr_lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.stderr)
            .lines()
            .map(String::from)
            .collect()
    }

    /// Fail unless the process exited 0, naming it and showing its stderr.
    pub fn assert_ok(&self, what: &str) {
        assert!(
            self.status.success(),
            "{what}: exited {}; stderr: {}",
            self.status,
            String::from_utf8_lossy(&self.stderr)
        );
    }
}

impl fmt::Debug for Finished {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Finished")
            .field("status", &self.status)
            .field("stdout", &String::from_utf8_lossy(&self.stdout))
            .field("stderr", &String::from_utf8_lossy(&self.stderr))
            .finish()
    }
}

impl Proc {
    /// Start `bin args` with stdin, stdout and stderr piped.
    pub fn spawn<S: AsRef<OsStr>>(bin: &Path, args: &[S], feed: Feed) -> Proc {
        let mut cmd = Command::new(bin);
        cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped());
        Proc::start(&mut cmd, feed)
    }

    /// Start `cmd` as it sets stdin and stdout (set both: a piped stdin gets
    /// `feed`, a piped stdout is collected); stderr is always piped.
    pub fn start(cmd: &mut Command, feed: Feed) -> Proc {
        let name = Path::new(cmd.get_program())
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
        let what = format!("{name} {}", args.join(" "));
        let mut child = cmd
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));

        // Fires once stdout has carried `threshold` bytes; the sender is
        // dropped when stdout closes, which releases the feeder too.
        let (output_seen, gate) = mpsc::channel::<()>();
        let threshold = match feed {
            Feed::Now(_) => None,
            Feed::AfterOutput(n, _) | Feed::UntilOutput(_, n) => Some(n),
        };
        match child.stdin.take() {
            Some(mut input) => {
                thread::spawn(move || {
                    // An early exit of the process shows in its status and
                    // output; a broken pipe here adds nothing.
                    match feed {
                        Feed::Now(data) => {
                            let _ = input.write_all(&data);
                        }
                        Feed::AfterOutput(_, data) => {
                            let _ = gate.recv();
                            let _ = input.write_all(&data);
                        }
                        Feed::UntilOutput(data, _) => {
                            let _ = input.write_all(&data);
                            let _ = gate.recv();
                        }
                    }
                    // Dropping `input` ends the process's stdin.
                });
            }
            None => assert!(
                matches!(&feed, Feed::Now(data) if data.is_empty()),
                "{what}: input for a stdin that is not piped"
            ),
        }

        let out = child.stdout.take();
        assert!(
            threshold.is_none() || out.is_some(),
            "{what}: waits for output on a stdout that is not piped"
        );
        let stdout = thread::spawn(move || {
            let mut all = Vec::new();
            let Some(mut out) = out else { return all };
            let mut buf = vec![0u8; 64 * 1024];
            let mut seen = threshold.map(|at| (at, output_seen));
            loop {
                match out.read(&mut buf) {
                    Ok(0) | Err(_) => return all,
                    Ok(n) => all.extend_from_slice(&buf[..n]),
                }
                if matches!(&seen, Some((at, _)) if all.len() >= *at) {
                    let _ = seen.take().unwrap().1.send(());
                }
            }
        });

        let mut err = BufReader::new(child.stderr.take().unwrap());
        let (tx, lines) = mpsc::channel();
        let stderr = thread::spawn(move || {
            let mut all = Vec::new();
            let mut line = Vec::new();
            while matches!(err.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                all.extend_from_slice(&line);
                let text = String::from_utf8_lossy(&line);
                let text = text.strip_suffix('\n').unwrap_or(&text);
                let _ = tx.send(text.strip_suffix('\r').unwrap_or(text).to_string());
                line.clear();
            }
            all
        });

        Proc {
            what,
            child,
            waited: false,
            stdout: Some(stdout),
            stderr: Some(stderr),
            lines,
        }
    }

    /// Kill the process and fail with `msg` and everything it wrote on
    /// stderr.
    pub fn fail(&mut self, msg: &str) -> ! {
        let _ = self.child.kill();
        let status = self.child.wait();
        self.waited = true;
        let stderr = self.stderr.take().map(|h| h.join().unwrap_or_default());
        panic!(
            "{}: {msg}; status {status:?}; stderr: {:?}",
            self.what,
            String::from_utf8_lossy(&stderr.unwrap_or_default())
        );
    }

    /// The next stderr line, by `deadline`.
    pub fn next_line(&mut self, deadline: Instant) -> String {
        match self.lines.recv_timeout(left(deadline)) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => self.fail("no stderr line in time"),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.fail("closed stderr before the expected line")
            }
        }
    }

    /// Its process ID (to signal it).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Whether it has exited (it is reaped then; [`finish`](Self::finish)
    /// still collects its status and output).
    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Fail at once if the process has already exited (it must not, yet).
    pub fn check_running(&mut self, doing: &str) {
        if let Ok(Some(status)) = self.child.try_wait() {
            self.fail(&format!("exited ({status}) while {doing}"));
        }
    }

    /// Wait until the process listens on 127.0.0.1:`port` (see
    /// [`listening`]), failing if it exits first or `deadline` passes.
    pub fn wait_listening(&mut self, port: u16, deadline: Instant) {
        while !listening(port) {
            self.check_running(&format!("we waited for it to listen on port {port}"));
            if Instant::now() >= deadline {
                self.fail(&format!("never listened on port {port}"));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Give the process `grace` to exit, then kill it: its status and
    /// stderr, for a diagnostic (never fails).
    pub fn stop(mut self, grace: Duration) -> String {
        let until = Instant::now() + grace;
        while Instant::now() < until && matches!(self.child.try_wait(), Ok(None)) {
            thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let status = self.child.wait();
        self.waited = true;
        let stderr = self.stderr.take().unwrap().join().unwrap_or_default();
        format!(
            "{}: status {status:?}, stderr {:?}",
            self.what,
            String::from_utf8_lossy(&stderr)
        )
    }

    /// Wait for the exit by `deadline` (killing the process and failing
    /// otherwise) and collect its output.
    pub fn finish(mut self, deadline: Instant) -> Finished {
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                Ok(None) => self.fail("still running at the deadline"),
                Err(e) => self.fail(&format!("wait failed: {e}")),
            }
        };
        self.waited = true;
        Finished {
            status,
            stdout: self.stdout.take().unwrap().join().unwrap(),
            stderr: self.stderr.take().unwrap().join().unwrap(),
        }
    }

    /// [`finish`](Self::finish) a process that must exit 0.
    pub fn finish_ok(self, deadline: Instant) -> Finished {
        let what = self.what.clone();
        let out = self.finish(deadline);
        out.assert_ok(&what);
        out
    }

    /// [`finish`](Self::finish) with a deadline `limit` from now.
    pub fn finish_within(self, limit: Duration) -> Finished {
        self.finish(Instant::now() + limit)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if !self.waited {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Run `bin args` with empty stdin to its exit, within `limit`.
pub fn run<S: AsRef<OsStr>>(bin: &Path, args: &[S], limit: Duration) -> Finished {
    Proc::spawn(bin, args, Feed::none()).finish_within(limit)
}

/// [`run`] a command that must exit 0.
pub fn run_ok<S: AsRef<OsStr>>(bin: &Path, args: &[S], limit: Duration) -> Finished {
    Proc::spawn(bin, args, Feed::none()).finish_ok(Instant::now() + limit)
}

/// A fresh, empty scratch folder for test `name` of this test process.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("p2p-conn-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A loopback port that was free a moment ago, for a process to listen on.
///
/// Taken below the kernel's ephemeral range where it can (on Linux,
/// `ip_local_port_range`, 32768 by default): a port from that range (what
/// binding port 0 gives) can be taken, before the process binds it, as the
/// local port of some other connection, which a network of nodes dialing
/// each other makes often ("bind: address already in use" in about one
/// start in fifteen). Ports are tried from a per-process, per-call
/// sequence, so parallel tests and processes spread out.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(0);
    const FLOOR: u32 = 10_000;
    if low > FLOOR + 1000 {
        let span = low - FLOOR;
        let start = std::process::id().wrapping_mul(2_654_435_761) % span;
        for _ in 0..64 {
            let k = NEXT.fetch_add(7919, Ordering::Relaxed);
            let port = FLOOR + (start.wrapping_add(k)) % span;
            if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port as u16)) {
                return l.local_addr().unwrap().port();
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether something listens on 127.0.0.1:`port`. A probe connection would
/// be accepted as the listener's one connection, so on Linux this reads
/// `/proc/net/tcp` (a socket in state 0A, LISTEN); elsewhere it tries to
/// bind the port, which can race with the listener's own bind.
pub fn listening(port: u16) -> bool {
    match std::fs::read_to_string("/proc/net/tcp") {
        Ok(table) => {
            let local = format!("0100007F:{port:04X}");
            table.lines().skip(1).any(|line| {
                let mut fields = line.split_whitespace().skip(1);
                fields.next() == Some(local.as_str()) && fields.nth(1) == Some("0A")
            })
        }
        Err(_) => std::net::TcpListener::bind(("127.0.0.1", port)).is_err(),
    }
}
