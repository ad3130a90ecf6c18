//! `listen --mconn` and `dial --mconn`: the library's MConnection
//! (`p2p_conn_mconn::MConnection`) between stdin/stdout and the peer, so
//! that a p2p-conn process stays a CometBFT node's peer.
//!
//! Each chunk read from stdin goes out as one message on the first channel
//! of `--channels` (back-pressure: the next read waits for room in its send
//! queue). Received messages go to stdout as `--output` says ([`Output`]):
//! by default one line each, `0x20 5 68656c6c6f` (channel, length, hex), on
//! every channel, so that they can be told apart again; with `raw`, the
//! first channel's as they are, back to back, and the other channels'
//! dropped (counted in the final `-v` tracing event). Pings are answered,
//! ours go out at CometBFT's default interval (60 s, pong timeout 45 s) or
//! every `--ping-interval` seconds (pong timeout 3/4 of that, at most 45
//! s). With `-v`, the final `mconn closed` event counts the pings and pongs
//! each way. At the end of stdin, what is queued is sent and the
//! connection is closed; the peer's close (or its failure) ends the
//! command too.

use std::sync::Arc;
use std::time::Duration;

use p2p_conn::io::tokio::SecretConnection;
use p2p_conn_mconn::{
    ChannelDescriptor, MConnCloseReason, MConnConfig, MConnSendError, MConnection, Received,
    DEFAULT_PONG_TIMEOUT,
};

use super::stdio::{IoCounts, StdinChunks, StdoutChunks};
use crate::error::CliError;
use crate::error::CopyError;
use crate::nodeinfo_step::Channels;

/// Most bytes of stdin one read takes (one message).
const STDIN_CHUNK_BYTES: usize = 64 * 1024;

/// How received messages go to stdout (`--output`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// One line per message, on every channel: `0x20 5 68656c6c6f`
    /// (channel, length in bytes, the message in hex; empty for an empty
    /// message)
    #[default]
    Lines,
    /// The first channel's messages as they are, back to back, with nothing
    /// between them (the other channels' are dropped)
    Raw,
}

impl Output {
    /// What stdout gets for a message of `data` on `channel`, if anything
    /// (`first`: the first of `--channels`).
    fn render(self, first: u8, channel: u8, data: &[u8]) -> Option<Vec<u8>> {
        match self {
            Output::Lines => {
                let mut line = format!("{channel:#04x} {} ", data.len()).into_bytes();
                line.reserve(2 * data.len() + 1);
                line.extend_from_slice(hex::encode(data).as_bytes());
                line.push(b'\n');
                Some(line)
            }
            Output::Raw if channel == first => Some(data.to_vec()),
            Output::Raw => None,
        }
    }
}

/// The MConnection's settings: CometBFT's defaults, or with `ping_interval`
/// (`--ping-interval`, seconds) that interval and a pong timeout of 3/4 of
/// it, at most CometBFT's 45 s.
pub fn config(ping_interval: Option<f64>) -> Result<MConnConfig, CliError> {
    let config = MConnConfig::default();
    let Some(secs) = ping_interval else {
        return Ok(config);
    };
    let every = crate::conn::seconds("--ping-interval", secs)?;
    let pong = (every * 3 / 4).min(DEFAULT_PONG_TIMEOUT);
    if pong < Duration::from_millis(1) {
        return Err(CliError::usage(
            "--ping-interval must be at least 0.002 seconds",
        ));
    }
    Ok(config.with_keepalive(every, pong))
}

/// Run the MConnection over `conn` on `channels` (at least one) until it
/// ends, writing what it receives as `output` says: `Ok` when it closed at
/// the end of stdin or by the peer, the close reason otherwise.
pub async fn pipe(
    conn: SecretConnection<tokio::net::TcpStream>,
    channels: &Channels,
    config: MConnConfig,
    output: Output,
    counts: &Arc<IoCounts>,
) -> Result<(), CliError> {
    let descs: Vec<ChannelDescriptor> = channels
        .0
        .iter()
        .map(|&(id, prio)| ChannelDescriptor::new(id).with_priority(prio))
        .collect();
    let Some(&(first, _)) = channels.0.first() else {
        return Err(CliError::usage("--mconn needs at least one channel"));
    };
    let (tx, mut rx) = MConnection::spawn(conn, &descs, config)
        .map_err(|e| CliError::usage(format!("--mconn: {e}")))?;
    let mut stdin =
        StdinChunks::start(STDIN_CHUNK_BYTES, counts.clone()).map_err(CopyError::Stdin)?;
    let mut stdout = StdoutChunks::start(counts.clone()).map_err(CopyError::Stdout)?;
    let sender = tx.clone();
    let upload = async move {
        while let Some(chunk) = stdin.next().await {
            let chunk = chunk.map_err(CopyError::Stdin)?;
            match sender.send(first, chunk).await {
                Ok(()) => {}
                // The download side reports why it closed.
                Err(MConnSendError::Closed(_)) => break,
                Err(e) => return Err(CliError::failed(format!("--mconn: {e}"))),
            }
        }
        sender.close();
        std::future::pending::<Result<(), CliError>>().await
    };
    let download = async move {
        let reason = loop {
            match rx.recv().await {
                Some(Received::Message { channel, data }) => {
                    let Some(bytes) = output.render(first, channel, &data) else {
                        continue;
                    };
                    if !stdout.write(bytes).await {
                        break None;
                    }
                }
                Some(Received::Closed(reason)) => break Some(reason),
                Some(_) => {}
                None => break None,
            }
        };
        stdout.finish().await.map_err(CopyError::Stdout)?;
        match reason {
            Some(
                reason @ MConnCloseReason::PeerClosed {
                    after_message: Some(_),
                },
            ) => {
                // Not a failure of ours, but likely the node refusing what
                // we sent: say so.
                eprintln!("p2p-conn: {reason}");
                Ok(())
            }
            None | Some(MConnCloseReason::Local | MConnCloseReason::PeerClosed { .. }) => Ok(()),
            Some(other) => Err(CliError::from(CopyError::Mconn(other))),
        }
    };
    let r = tokio::select! {
        r = upload => r,
        r = download => r,
    };
    // Ends the connection if stdout failed or stdin did.
    tx.close();
    r
}

#[cfg(test)]
mod tests {
    use super::Output;

    #[test]
    fn lines_name_channel_and_length() {
        let line = |ch, data: &[u8]| Output::Lines.render(0x20, ch, data).unwrap();
        assert_eq!(line(0x30, b"hello"), b"0x30 5 68656c6c6f\n");
        assert_eq!(line(0x00, b""), b"0x00 0 \n");
        assert_eq!(line(0xff, &[0, 0xab]), b"0xff 2 00ab\n");
        assert_eq!(Output::Raw.render(0x20, 0x20, b"hi"), Some(b"hi".to_vec()));
        assert_eq!(Output::Raw.render(0x20, 0x21, b"hi"), None);
    }
}
