//! The workload through p2p-conn: a loopback pair over real TCP, one side
//! dialing and sending, the other accepting and verifying every byte, over
//! the tokio, codec or std adapter (or through producers, see
//! [`super::producers`]).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use p2p_conn::io::{blocking, codec, tokio as ptokio};
use p2p_conn::stats::ConnStats;
use p2p_conn::{Config, Identity};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use super::breakdown::Breakdown;
use super::measure::{Cpu, Mark, Row};
use super::producers;
use super::workload::{tokio_runtime, Adapter, Runtime, Verifier, Workload, WorkloadArgs};
use crate::error::LabError;

/// 64 KiB reads on the receiving side, as the Go peer's bench.
pub const READ_CHUNK: usize = 64 * 1024;

/// One run of the workload through p2p-conn, as `args` says.
pub fn run_ours(args: &WorkloadArgs, w: &Workload, cfg: &Config) -> Result<Row, LabError> {
    match args.adapter {
        _ if args.producers > 0 => {
            let per = producers::per_producer(w.messages, args.producers);
            tokio_runtime(args.runtime)?.block_on(producers::run(
                w.size,
                args.producers,
                per,
                cfg,
                &args.queue_config(),
                args.send_path,
                args.rate,
            ))
        }
        Adapter::Tokio | Adapter::Codec => {
            let codec = args.adapter == Adapter::Codec;
            tokio_runtime(args.runtime)?.block_on(run_tokio(w, cfg, codec, args.runtime))
        }
        Adapter::Std => run_std(w, cfg),
    }
}

/// The receiving end of one pair once its TCP connection is accepted, over
/// the tokio or codec adapter: the handshake, then every byte checked
/// against `w` (straight from the receive buffer with tokio: no copy), to
/// the end of the stream; the connection's stats (none through the codec).
pub(super) async fn receive_tokio(
    tcp: tokio::net::TcpStream,
    cfg: &Config,
    w: Workload,
    use_codec: bool,
) -> Result<Option<ConnStats>, LabError> {
    tcp.set_nodelay(true)?;
    let mut v = Verifier::new(w);
    let mut stats = None;
    if use_codec {
        let mut framed = codec::handshake(tcp, &Identity::generate(), cfg).await?;
        while let Some(item) = framed.next().await {
            v.feed(&item?)?;
        }
    } else {
        let mut conn = ptokio::handshake(tcp, &Identity::generate(), cfg).await?;
        loop {
            let chunk = conn.fill_buf().await?;
            if chunk.is_empty() {
                break;
            }
            let n = chunk.len();
            v.feed(chunk)?;
            conn.consume(n);
        }
        stats = Some(conn.stats());
    }
    if !v.done() {
        return Err(v.ended_early());
    }
    Ok(stats)
}

/// The receiving end of one pair over the std adapter, once its TCP
/// connection is accepted: the handshake, then every byte checked against
/// `w`, read `READ_CHUNK` bytes at a time, to the end of the stream.
pub(super) fn receive_std(
    tcp: TcpStream,
    cfg: &Config,
    w: Workload,
) -> Result<ConnStats, LabError> {
    let mut conn = blocking::handshake_tcp(tcp, &Identity::generate(), cfg)?;
    let mut v = Verifier::new(w);
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        v.feed(&buf[..n])?;
    }
    if !v.done() {
        return Err(v.ended_early());
    }
    Ok(conn.stats())
}

async fn run_tokio(
    w: &Workload,
    cfg: &Config,
    use_codec: bool,
    flavor: Runtime,
) -> Result<Row, LabError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (rcfg, rw) = (cfg.clone(), w.clone());
    let receiver = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await?;
        let stats = receive_tokio(tcp, &rcfg, rw, use_codec).await?;
        Ok::<_, LabError>((Mark::now(), stats))
    });
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let start;
    let mut sent = None;
    if use_codec {
        let mut framed = codec::handshake(tcp, &Identity::generate(), cfg).await?;
        start = Mark::now();
        for i in 0..w.messages {
            framed.feed(w.message(i)).await?;
        }
        SinkExt::<&[u8]>::flush(&mut framed).await?;
        framed.get_mut().shutdown().await?;
    } else {
        let mut conn = ptokio::handshake(tcp, &Identity::generate(), cfg).await?;
        start = Mark::now();
        for i in 0..w.messages {
            conn.write_all(w.message(i)).await?;
        }
        conn.shutdown().await?;
        sent = Some(conn.stats());
    }
    let (end, received) = receiver.await??;
    let (elapsed, cpu) = end.since(start);
    let name = match (use_codec, flavor) {
        (false, Runtime::MultiThread) => "p2p-conn (tokio)",
        (true, Runtime::MultiThread) => "p2p-conn (codec)",
        (false, Runtime::CurrentThread) => "p2p-conn (tokio, 1 thread)",
        (true, Runtime::CurrentThread) => "p2p-conn (codec, 1 thread)",
    };
    Ok(Row {
        name: name.into(),
        bytes: w.bytes(),
        messages: w.messages,
        elapsed,
        cpu,
        latency: None,
        breakdown: sent.zip(received).map(|(s, r)| Breakdown::new(&s, &r)),
    })
}

/// What `run_threads` measured, and what the two ends returned.
pub struct Threads<RT, ST> {
    pub elapsed: Duration,
    pub cpu: Option<Cpu>,
    pub received: RT,
    pub sent: ST,
}

/// Accept on one thread, dial on this one, run `recv` and `send` over the
/// two ends, and measure from the sender's first byte (the `Mark` `send`
/// sets) to the receiver's last.
pub fn run_threads<R, S, RT, ST>(recv: R, send: S) -> Result<Threads<RT, ST>, LabError>
where
    R: FnOnce(TcpStream) -> Result<RT, LabError> + Send + 'static,
    S: FnOnce(TcpStream, &mut Option<Mark>) -> Result<ST, LabError>,
    RT: Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let receiver = std::thread::spawn(move || {
        let (tcp, _) = listener.accept()?;
        tcp.set_nodelay(true)?;
        let received = recv(tcp)?;
        Ok::<_, LabError>((Mark::now(), received))
    });
    let tcp = TcpStream::connect(addr)?;
    tcp.set_nodelay(true)?;
    let mut start = None;
    let sent = send(tcp, &mut start);
    let (end, received) = receiver
        .join()
        .map_err(|_| LabError::failed("receiver thread panicked"))??;
    let sent = sent?;
    let (elapsed, cpu) = end.since(start.ok_or_else(|| LabError::failed("sender never started"))?);
    Ok(Threads {
        elapsed,
        cpu,
        received,
        sent,
    })
}

fn run_std(w: &Workload, cfg: &Config) -> Result<Row, LabError> {
    let (rcfg, rw) = (cfg.clone(), w.clone());
    let t = run_threads(
        move |tcp| receive_std(tcp, &rcfg, rw),
        |tcp, start| {
            let conn = blocking::handshake_tcp(tcp, &Identity::generate(), cfg)?;
            let (r, mut wr) = conn.split()?;
            *start = Some(Mark::now());
            for i in 0..w.messages {
                wr.write_all(w.message(i))?;
            }
            wr.shutdown()?;
            Ok(ConnStats::new(wr.stats().send, r.stats().recv))
        },
    )?;
    Ok(Row {
        name: "p2p-conn (std)".into(),
        bytes: w.bytes(),
        messages: w.messages,
        elapsed: t.elapsed,
        cpu: t.cpu,
        latency: None,
        breakdown: Some(Breakdown {
            blocking_reads: true,
            ..Breakdown::new(&t.sent, &t.received)
        }),
    })
}
