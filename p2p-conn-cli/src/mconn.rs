//! `listen --mconn` and `dial --mconn`: the library's MConnection
//! (`p2p_conn_mconn::MConnection`) between stdin/stdout and the peer, so
//! that a p2p-conn process stays a CometBFT node's peer.
//!
//! Each chunk read from stdin goes out as one message on the first channel
//! of `--channels` (back-pressure: the next read waits for room in its send
//! queue); each message received on that channel is written to stdout as
//! it is, with no framing; messages on the other channels are dropped (and
//! counted in the final `-v` tracing event). Pings are answered, ours go out
//! at CometBFT's default interval (60 s, pong timeout 45 s) or every
//! `--ping-interval` seconds (pong timeout 3/4 of that, at most 45 s). With
//! `-v`, the final `mconn closed` event counts the pings and pongs each way. At the end of stdin, what is queued is
//! sent and the connection is closed; the peer's close (or its failure)
//! ends the command too.

use std::sync::Arc;
use std::time::Duration;

use p2p_conn::io::tokio::SecretConnection;
use p2p_conn_mconn::{
    ChannelDescriptor, MConnCloseReason, MConnConfig, MConnSendError, MConnection, Received,
    DEFAULT_PONG_TIMEOUT,
};

use crate::error::CliError;
use crate::error::CopyError;
use crate::nodeinfo_step::Channels;
use crate::stdio::{IoCounts, StdinChunks, StdoutChunks};

/// Most bytes of stdin one read takes (one message).
const STDIN_CHUNK_BYTES: usize = 64 * 1024;

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
/// ends: `Ok` when it closed at the end of stdin or by the peer, the close
/// reason otherwise.
pub async fn pipe(
    conn: SecretConnection<tokio::net::TcpStream>,
    channels: &Channels,
    config: MConnConfig,
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
                Some(Received::Message { channel, data }) if channel == first => {
                    if !stdout.write(data.to_vec()).await {
                        break None;
                    }
                }
                Some(Received::Message { .. }) => {}
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
