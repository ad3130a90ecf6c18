//! Standard input and output of `listen` and `dial`: each on a thread of its
//! own, through the descriptor itself (a duplicate of fd 0 or 1), so that a
//! chunk costs one `read(2)` or one `write(2)`.
//!
//! Not std's `Stdout` (a `LineWriter`, which splits a chunk at its last
//! newline) nor tokio's (which copies every write to a blocking thread and
//! waits for it there): before, the connection's opened frames went to
//! stdout one frame (at most 1024 bytes) per write, each a round trip to
//! tokio's blocking pool, and receiving ran at about 27 MB/s.
//!
//! [`IoCounts`] counts the calls: every counted read is one `read(2)` of
//! stdin, every counted write one `write(2)` of stdout (`--count-io` prints
//! them).

use std::fs::File;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc as std_mpsc, Arc};

use tokio::sync::mpsc;

/// The calls stdin and stdout took, and their bytes.
#[derive(Debug, Default)]
pub struct IoCounts {
    stdin_reads: AtomicU64,
    stdin_bytes: AtomicU64,
    stdout_writes: AtomicU64,
    stdout_bytes: AtomicU64,
}

impl std::fmt::Display for IoCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "io stdin-reads={} stdin-bytes={} stdout-writes={} stdout-bytes={}",
            self.stdin_reads.load(Relaxed),
            self.stdin_bytes.load(Relaxed),
            self.stdout_writes.load(Relaxed),
            self.stdout_bytes.load(Relaxed),
        )
    }
}

/// Chunks queued between a stdio thread and the connection: one being
/// handled on each side and one waiting, so neither side waits for the
/// other's next call.
const QUEUED_CHUNKS: usize = 2;

/// A duplicate of standard input as a `File`: reads go straight to the
/// descriptor, past std's buffer.
fn raw_stdin() -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        Ok(File::from(io::stdin().as_fd().try_clone_to_owned()?))
    }
    #[cfg(windows)]
    {
        use std::os::windows::io::AsHandle;
        Ok(File::from(io::stdin().as_handle().try_clone_to_owned()?))
    }
}

/// A duplicate of standard output as a `File`: writes go straight to the
/// descriptor, past std's line buffering.
fn raw_stdout() -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        Ok(File::from(io::stdout().as_fd().try_clone_to_owned()?))
    }
    #[cfg(windows)]
    {
        use std::os::windows::io::AsHandle;
        Ok(File::from(io::stdout().as_handle().try_clone_to_owned()?))
    }
}

/// Standard input, read on a thread of its own: chunks of up to
/// `chunk_bytes`, each what one `read(2)` returned (so a line typed at a
/// terminal comes as soon as it is entered), then the end of the channel at
/// end of file, or an error.
pub struct StdinChunks {
    chunks: mpsc::Receiver<io::Result<Vec<u8>>>,
    spent: std_mpsc::Sender<Vec<u8>>,
}

impl StdinChunks {
    /// Start the reading thread. The thread may stay blocked in `read(2)`
    /// after the connection failed; the process exits without waiting for it.
    pub fn start(chunk_bytes: usize, counts: Arc<IoCounts>) -> io::Result<StdinChunks> {
        let mut input = raw_stdin()?;
        let (tx, chunks) = mpsc::channel(QUEUED_CHUNKS);
        let (spent, recycled) = std_mpsc::channel::<Vec<u8>>();
        std::thread::Builder::new()
            .name("stdin".into())
            .spawn(move || loop {
                let mut buf = recycled.try_recv().unwrap_or_default();
                buf.resize(chunk_bytes, 0);
                counts.stdin_reads.fetch_add(1, Relaxed);
                let r = match input.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        counts.stdin_bytes.fetch_add(n as u64, Relaxed);
                        buf.truncate(n);
                        Ok(buf)
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => Err(e),
                };
                let failed = r.is_err();
                if tx.blocking_send(r).is_err() || failed {
                    return;
                }
            })?;
        Ok(StdinChunks { chunks, spent })
    }

    /// The next chunk; `None` at end of file.
    pub async fn next(&mut self) -> Option<io::Result<Vec<u8>>> {
        self.chunks.recv().await
    }

    /// Whether no chunk is waiting right now (the next may still come).
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// Hand a sent chunk's buffer back for reuse.
    pub fn recycle(&self, buf: Vec<u8>) {
        let _ = self.spent.send(buf);
    }
}

/// Standard output, written on a thread of its own: each chunk handed to
/// [`StdoutChunks::write`] goes out whole in one `write(2)` (more only if the
/// kernel takes part of it), in order.
pub struct StdoutChunks {
    chunks: Option<mpsc::Sender<Vec<u8>>>,
    spent: std_mpsc::Receiver<Vec<u8>>,
    writer: tokio::task::JoinHandle<io::Result<()>>,
}

impl StdoutChunks {
    /// Start the writing thread (on tokio's blocking pool, so that
    /// [`StdoutChunks::finish`] can wait for it).
    pub fn start(counts: Arc<IoCounts>) -> io::Result<StdoutChunks> {
        let mut output = raw_stdout()?;
        let (chunks, mut rx) = mpsc::channel::<Vec<u8>>(QUEUED_CHUNKS);
        let (spent_tx, spent) = std_mpsc::channel();
        let writer = tokio::task::spawn_blocking(move || {
            while let Some(mut buf) = rx.blocking_recv() {
                let mut at = 0;
                while at < buf.len() {
                    counts.stdout_writes.fetch_add(1, Relaxed);
                    match output.write(&buf[at..]) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => {
                            counts.stdout_bytes.fetch_add(n as u64, Relaxed);
                            at += n;
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                buf.clear();
                let _ = spent_tx.send(buf);
            }
            Ok(())
        });
        Ok(StdoutChunks {
            chunks: Some(chunks),
            spent,
            writer,
        })
    }

    /// An empty buffer of at least `bytes` capacity, reused when one came
    /// back from the writer.
    pub fn buffer(&self, bytes: usize) -> Vec<u8> {
        let mut buf = self.spent.try_recv().unwrap_or_default();
        buf.reserve_exact(bytes);
        buf
    }

    /// Queue `chunk` for writing; waits while [`QUEUED_CHUNKS`] are queued.
    /// `false` if the writer has stopped (its error comes from
    /// [`StdoutChunks::finish`]).
    pub async fn write(&mut self, chunk: Vec<u8>) -> bool {
        match &self.chunks {
            Some(tx) => tx.send(chunk).await.is_ok(),
            None => false,
        }
    }

    /// Wait until everything queued is written (or writing failed).
    pub async fn finish(mut self) -> io::Result<()> {
        drop(self.chunks.take());
        self.writer.await.map_err(io::Error::other)?
    }
}
