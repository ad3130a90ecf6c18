//! `bench --handshakes N`: N sequential connections (TCP connect, full
//! handshake, close) from us and, with a Go baseline, from the Go peer,
//! alternating under `--repeat`, all against one listener: the Go peer's
//! `handshake-serve` for a Go baseline, else our own (std, one thread).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use p2p_conn::io::{blocking, codec, tokio as ptokio};
use p2p_conn::{Config, Identity};

use super::baselines::{running, Baseline, GoResult};
use super::measure::{Mark, Row};
use super::report::Output;
use super::stability;
use super::workload::{tokio_runtime, Adapter, Workload, WorkloadArgs};
use crate::child::Listening;
use crate::error::LabError;

/// `n` handshakes per run, `repeat` runs, through `work`'s adapter and
/// runtime, against the Go peer `go_peer` (built for `baseline`; it also
/// dials, as the baseline) or our own listener; `json` as `bench --json`.
pub fn run(
    work: &WorkloadArgs,
    cfg: &Config,
    n: u64,
    repeat: usize,
    baseline: Option<Baseline>,
    go_peer: Option<&Path>,
    json: bool,
) -> Result<(), LabError> {
    if n == 0 {
        return Err(LabError::usage("--handshakes must be at least 1"));
    }
    if baseline == Some(Baseline::TendermintP2p) {
        return Err(LabError::usage(
            "--handshakes compares with the Go baselines only",
        ));
    }
    let w = Workload::handshakes(n);
    let out = Output {
        json,
        handshakes: true,
        connections: 1,
        wire: &work.wire,
        workload: &w,
    };
    let server = match go_peer {
        Some(peer) => Server::go(peer)?,
        None => Server::ours(cfg)?,
    };
    if !json {
        println!(
            "p2p-conn bench: {n} sequential handshakes (connect, handshake, close) over loopback TCP against {}",
            server.name
        );
    }
    let identity = Identity::generate();
    let rt = tokio_runtime(work.runtime)?;
    let mut ours_rows = Vec::new();
    let mut base_rows = Vec::new();
    for run in 0..repeat.max(1) {
        let start = Mark::now();
        for _ in 0..n {
            handshake_once(work.adapter, &rt, server.addr, &identity, cfg)?;
        }
        let (elapsed, cpu) = Mark::now().since(start);
        let ours = Row {
            name: format!("p2p-conn ({:?}) -> {}", work.adapter, server.name).to_lowercase(),
            bytes: 0,
            messages: n,
            elapsed,
            cpu,
            latency: None,
            breakdown: None,
        };
        out.run(run, &ours)?;
        ours_rows.push(ours);
        if let Some(peer) = go_peer {
            let args = [
                "handshake-dial".to_string(),
                "-n".into(),
                n.to_string(),
                server.addr.to_string(),
            ];
            let r = GoResult::run(peer, &args)?;
            let base = Row {
                name: format!("{} -> {}", r.implementation, server.name),
                bytes: 0,
                messages: r.handshakes,
                elapsed: Duration::from_secs_f64(r.seconds),
                cpu: r.cpu(),
                latency: None,
                breakdown: None,
            };
            out.run(run, &base)?;
            base_rows.push(base);
        }
    }
    server.stop()?;
    out.summarize(&ours_rows, &base_rows)?;
    let flags = stability::Flags {
        amount: n,
        handshakes: true,
        repeat,
    };
    stability::print_notes(&[&ours_rows, &base_rows], &flags, json);
    Ok(())
}

/// One connection: connect, handshake through `adapter`, close.
fn handshake_once(
    adapter: Adapter,
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    identity: &Identity,
    cfg: &Config,
) -> Result<(), LabError> {
    match adapter {
        Adapter::Std => {
            let tcp = TcpStream::connect(addr)?;
            tcp.set_nodelay(true)?;
            blocking::handshake_tcp(tcp, identity, cfg)?;
        }
        Adapter::Tokio | Adapter::Codec => rt.block_on(async {
            let tcp = tokio::net::TcpStream::connect(addr).await?;
            tcp.set_nodelay(true)?;
            if adapter == Adapter::Codec {
                codec::handshake(tcp, identity, cfg).await?;
            } else {
                ptokio::handshake(tcp, identity, cfg).await?;
            }
            Ok::<_, LabError>(())
        })?,
    }
    Ok(())
}

/// The listener `--handshakes` dials.
struct Server {
    name: String,
    addr: SocketAddr,
    kind: ServerKind,
}

enum ServerKind {
    /// The Go peer's `handshake-serve`; it exits when its stdin closes.
    Go(std::process::Child),
    /// Our std listener thread; it stops at the first connection after
    /// `stop` is set.
    Ours(Arc<AtomicBool>, std::thread::JoinHandle<()>),
}

impl Server {
    fn go(peer: &Path) -> Result<Server, LabError> {
        // Its later stderr lines (failed handshakes) are passed through.
        let Listening { child, addr } = Listening::spawn(
            Command::new(peer)
                .args(["handshake-serve", "127.0.0.1:0"])
                .stdout(Stdio::null()),
            "Go peer's handshake-serve",
        )?;
        let version = Command::new(peer)
            .arg("version")
            .output()
            .map_err(running(peer))?;
        Ok(Server {
            name: format!(
                "cometbft-go {}",
                String::from_utf8_lossy(&version.stdout).trim()
            ),
            addr,
            kind: ServerKind::Go(child),
        })
    }

    fn ours(cfg: &Config) -> Result<Server, LabError> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, cfg) = (stop.clone(), cfg.clone());
        let thread = std::thread::spawn(move || {
            let identity = Identity::generate();
            for tcp in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(tcp) = tcp {
                    let _ = tcp.set_nodelay(true);
                    if let Err(e) = blocking::handshake_tcp(tcp, &identity, &cfg) {
                        eprintln!("p2p-conn bench: server handshake failed: {e}");
                    }
                }
            }
        });
        Ok(Server {
            name: "p2p-conn (std)".into(),
            addr,
            kind: ServerKind::Ours(stop, thread),
        })
    }

    fn stop(self) -> Result<(), LabError> {
        match self.kind {
            ServerKind::Go(mut child) => {
                drop(child.stdin.take());
                child.wait()?;
            }
            ServerKind::Ours(stop, thread) => {
                stop.store(true, Ordering::SeqCst);
                // Wake the accept loop so it sees the flag.
                let _ = TcpStream::connect(self.addr);
                thread
                    .join()
                    .map_err(|_| LabError::failed("server thread panicked"))?;
            }
        }
        Ok(())
    }
}
