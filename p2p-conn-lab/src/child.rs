//! Child processes that listen: `resources` workers and Go peers, and the Go
//! peer's `handshake-serve` for `bench --handshakes`. Each prints `listening
//! ADDR` on stderr first.

use std::io::BufRead;
use std::net::SocketAddr;
use std::process::{Command, Stdio};

use crate::error::LabError;

/// A child that printed `listening ADDR` on stderr first; its later stderr
/// lines are passed through to ours.
pub struct Listening {
    pub child: std::process::Child,
    pub addr: SocketAddr,
}

impl Listening {
    /// Start `cmd` (the `what` of messages) with stdin and stderr piped
    /// (stdout as `cmd` sets it) and read its address.
    pub fn spawn(cmd: &mut Command, what: &str) -> Result<Listening, LabError> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| LabError::failed(format!("starting the {what}: {e}")))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| LabError::failed("no stderr"))?;
        let mut stderr = std::io::BufReader::new(stderr);
        let mut line = String::new();
        stderr.read_line(&mut line)?;
        let Some(addr) = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|a| a.parse().ok())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(LabError::failed(format!(
                "the {what} printed {:?}",
                line.trim()
            )));
        };
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                eprintln!("{line}");
            }
        });
        Ok(Listening { child, addr })
    }

    /// Close its stdin (listeners exit then) and collect its stdout.
    pub fn finish(mut self, what: &str) -> Result<String, LabError> {
        drop(self.child.stdin.take());
        let out = self
            .child
            .wait_with_output()
            .map_err(|e| LabError::failed(format!("waiting for the {what}: {e}")))?;
        if !out.status.success() {
            return Err(LabError::failed(format!(
                "the {what} failed ({})",
                out.status
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}
