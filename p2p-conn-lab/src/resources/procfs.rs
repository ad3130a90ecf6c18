//! What `resources` reads and sets in the kernel: a process's resident set
//! and its peak (`/proc/<pid>/status`), the peak's reset, the descriptor
//! limit.

use std::path::Path;

use crate::error::LabError;

/// Descriptors a worker needs beyond one per connection (runtime, pipes,
/// listener, stdio).
const SPARE_FDS: u64 = 64;

/// Resident set (`VmRSS`) and its peak (`VmHWM`) of a process, in KiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    pub rss_kib: u64,
    pub hwm_kib: u64,
}

impl Status {
    /// This process's figures.
    pub fn own() -> Result<Status, LabError> {
        Status::read(Path::new("/proc/self/status"))
    }

    /// A process's figures, from `/proc/PID/status` (or `/proc/self/status`).
    pub fn read(path: &Path) -> Result<Status, LabError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            LabError::failed(format!(
                "reading {}: {e} (resources needs Linux /proc)",
                path.display()
            ))
        })?;
        Status::parse(&text)
            .ok_or_else(|| LabError::failed(format!("{} has no VmRSS or VmHWM", path.display())))
    }

    /// `VmRSS:  1234 kB` and `VmHWM:  5678 kB` from a status file's text.
    fn parse(text: &str) -> Option<Status> {
        let field = |name: &str| {
            text.lines().find_map(|line| {
                let value = line.strip_prefix(name)?.strip_prefix(':')?;
                value.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()
            })
        };
        Some(Status {
            rss_kib: field("VmRSS")?,
            hwm_kib: field("VmHWM")?,
        })
    }
}

/// Reset VmHWM to the current RSS (`5` to `/proc/self/clear_refs`, Linux
/// 4.0+); false where that is not permitted.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Raise the soft descriptor limit to the hard one; returns the limit now in
/// force.
#[cfg(unix)]
pub fn raise_fd_limit() -> Result<u64, LabError> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    Ok(hard)
}

#[cfg(not(unix))]
pub fn raise_fd_limit() -> Result<u64, LabError> {
    Err(LabError::usage("resources needs Linux"))
}

/// Fail unless `n` connections (the flag `what`), plus spares, fit in
/// `limit` descriptors.
pub fn need_fds(what: &str, n: u64, limit: u64) -> Result<(), LabError> {
    if n.saturating_add(SPARE_FDS) > limit {
        return Err(LabError::usage(format!(
            "{what} {n} needs {} file descriptors per process; the limit here is {limit} (ulimit -Hn)",
            n.saturating_add(SPARE_FDS)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_parsed() {
        let text = "Name:\tp2p-conn\nVmPeak:\t  99 kB\nVmHWM:\t   13532 kB\nVmRSS:\t    2048 kB\nThreads:\t3\n";
        assert_eq!(
            Status::parse(text),
            Some(Status {
                rss_kib: 2048,
                hwm_kib: 13532
            })
        );
        assert_eq!(Status::parse("VmRSS:\t1 kB\n"), None);
        assert_eq!(Status::parse("VmRSS:\tlots kB\nVmHWM:\t1 kB\n"), None);
        let own = Status::own().unwrap();
        assert!(own.rss_kib > 0 && own.hwm_kib >= own.rss_kib, "{own:?}");
    }
}
