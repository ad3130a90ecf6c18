//! The Go peer's MConnection mode (`cometbft-peer mconn`, in
//! `interop/cometbft-go/mconn.go`): CometBFT's own `p2p/conn.MConnection`
//! over its `SecretConnection`, at any release line, as the other end for
//! p2p-conn's MConnection tests.
//!
//! [`MconnArgs`] says how to run it: its channels (ID, priority, receive
//! cap), the `MConnConfig` fields it takes from the command line (ping
//! interval, pong timeout, packet payload, flush throttle; CometBFT's
//! defaults otherwise), whether to echo, what to send, and when to stop.
//! [`go_mconn_listen`] and [`go_mconn_dial`] start it; [`MconnOutput`] reads
//! what it printed, one [`MconnEvent`] per stdout line: each message it
//! received or sent, with its length and SHA-256 (not its bytes), the
//! MConnection's `onError` (after which the peer exits 0), or why it
//! stopped on its own (with its byte counts, pings and pongs included).
//!
//! The mode runs no NodeInfo exchange: MConnection starts right after the
//! handshake. Sent messages are random bytes, so a test compares digests,
//! not contents. The helpers fail by panicking on output they cannot parse;
//! they check nothing about the run itself: the tests do.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::go_peer::go_listen_as;
use crate::process::{Feed, Finished, Proc};

/// One MConnection channel of the Go peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoChannel {
    pub id: u8,
    /// `ChannelDescriptor.Priority` (at least 1).
    pub priority: u32,
    /// `ChannelDescriptor.RecvMessageCapacity`; CometBFT's default (22 MiB)
    /// when `None`.
    pub recv_cap: Option<usize>,
}

impl GoChannel {
    /// Channel `id` at `priority`, with the default receive cap.
    pub fn new(id: u8, priority: u32) -> GoChannel {
        GoChannel {
            id,
            priority,
            recv_cap: None,
        }
    }

    /// The same channel with receive cap `bytes`.
    pub fn recv_cap(self, bytes: usize) -> GoChannel {
        GoChannel {
            recv_cap: Some(bytes),
            ..self
        }
    }

    fn flag(&self) -> String {
        match self.recv_cap {
            Some(cap) => format!("{:#04x}:{}:{cap}", self.id, self.priority),
            None => format!("{:#04x}:{}", self.id, self.priority),
        }
    }
}

/// `--send CH:SIZE:COUNT`: `count` messages of `size` random bytes on
/// `channel`, one after the other, from the start (each `--send` in a
/// goroutine of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoSend {
    pub channel: u8,
    pub size: usize,
    pub count: usize,
}

/// How to run `cometbft-peer mconn`. Durations go to the Go peer in whole
/// milliseconds.
#[derive(Clone, Debug, Default)]
pub struct MconnArgs {
    /// `node_key.json` to use; a fresh key when `None`.
    pub key: Option<PathBuf>,
    /// Its channels; the Go peer's default (`0x20`, priority 1) when empty.
    pub channels: Vec<GoChannel>,
    pub ping_interval: Option<Duration>,
    /// Must be below the ping interval (CometBFT panics otherwise; the Go
    /// peer refuses it first).
    pub pong_timeout: Option<Duration>,
    pub max_packet_payload: Option<usize>,
    pub flush_throttle: Option<Duration>,
    /// Send every received message back on its channel.
    pub echo: bool,
    pub sends: Vec<GoSend>,
    /// Stop (FlushStop, a [`MconnEvent::Stopped`] line, exit 0) after this
    /// many received messages.
    pub exit_after: Option<usize>,
    /// Stop likewise after this long.
    pub duration: Option<Duration>,
}

fn millis(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

impl MconnArgs {
    /// The command-line flags (after `mconn listen|dial`, before the
    /// address).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        let mut flag = |name: &str, value: String| {
            args.push(format!("--{name}").into());
            args.push(value.into());
        };
        if let Some(key) = &self.key {
            flag("key", key.display().to_string());
        }
        if !self.channels.is_empty() {
            let list: Vec<String> = self.channels.iter().map(GoChannel::flag).collect();
            flag("channels", list.join(","));
        }
        if let Some(d) = self.ping_interval {
            flag("ping-interval", millis(d));
        }
        if let Some(d) = self.pong_timeout {
            flag("pong-timeout", millis(d));
        }
        if let Some(n) = self.max_packet_payload {
            flag("max-packet-payload", n.to_string());
        }
        if let Some(d) = self.flush_throttle {
            flag("flush-throttle", millis(d));
        }
        for s in &self.sends {
            flag("send", format!("{:#04x}:{}:{}", s.channel, s.size, s.count));
        }
        if let Some(n) = self.exit_after {
            flag("exit-after", n.to_string());
        }
        if let Some(d) = self.duration {
            flag("duration", millis(d));
        }
        if self.echo {
            args.push("--echo".into());
        }
        args
    }
}

/// `cometbft-peer mconn listen ARGS 127.0.0.1:0`, and the address it
/// listens on (its first stderr line), read by `deadline`.
pub fn go_mconn_listen(bin: &Path, args: &MconnArgs, deadline: Instant) -> (Proc, String) {
    go_listen_as(
        bin,
        &["mconn", "listen"],
        &args.to_args(),
        Feed::none(),
        deadline,
    )
}

/// `cometbft-peer mconn dial ARGS ADDR`.
pub fn go_mconn_dial(bin: &Path, args: &MconnArgs, addr: &str) -> Proc {
    let mut all: Vec<OsString> = vec!["mconn".into(), "dial".into()];
    all.extend(args.to_args());
    all.push(addr.into());
    Proc::spawn(bin, &all, Feed::none())
}

/// A message's line: its channel, length and SHA-256 (lowercase hex).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest {
    pub channel: u8,
    pub len: usize,
    pub sha256: String,
}

/// One stdout line of `cometbft-peer mconn`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MconnEvent {
    /// `{"channel","len","sha256"}`: a message the MConnection delivered.
    Received(Digest),
    /// `{"sent":true,"channel","len","sha256"}`: a message `Send` queued.
    Sent(Digest),
    /// `{"error":"..."}`: what the MConnection's `onError` got (`pong
    /// timeout`, `unknown channel 22`, `EOF` when the other side hung up).
    Error(String),
    /// `{"stopped","received","sent_bytes","recv_bytes"}`: it stopped on
    /// its own (`duration`, `received N`), with the bytes its flow monitors
    /// counted each way.
    Stopped {
        why: String,
        received: u64,
        sent_bytes: u64,
        recv_bytes: u64,
    },
}

impl MconnEvent {
    /// Parse one line; panics on anything else.
    pub fn parse(line: &str) -> MconnEvent {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("cometbft-peer mconn printed {line:?}: {e}"));
        let num = |name: &str| {
            v.get(name)
                .and_then(Value::as_u64)
                .unwrap_or_else(|| panic!("no number {name:?} in {line:?}"))
        };
        let text = |name: &str| {
            v.get(name)
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("no string {name:?} in {line:?}"))
                .to_string()
        };
        if v.get("error").is_some() {
            return MconnEvent::Error(text("error"));
        }
        if v.get("stopped").is_some() {
            return MconnEvent::Stopped {
                why: text("stopped"),
                received: num("received"),
                sent_bytes: num("sent_bytes"),
                recv_bytes: num("recv_bytes"),
            };
        }
        let channel = u8::try_from(num("channel"))
            .unwrap_or_else(|_| panic!("channel out of range in {line:?}"));
        let digest = Digest {
            channel,
            len: num("len") as usize,
            sha256: text("sha256"),
        };
        match v.get("sent") {
            Some(Value::Bool(true)) => MconnEvent::Sent(digest),
            None => MconnEvent::Received(digest),
            Some(other) => panic!("\"sent\" is {other} in {line:?}"),
        }
    }
}

/// Everything a finished `cometbft-peer mconn` printed, in order.
#[derive(Debug)]
pub struct MconnOutput {
    pub events: Vec<MconnEvent>,
    pub finished: Finished,
}

impl MconnOutput {
    /// Wait for `proc`'s exit by `deadline`; it must exit 0 (it does after
    /// an `onError` too) and print only parseable lines.
    pub fn collect(proc: Proc, deadline: Instant) -> MconnOutput {
        let finished = proc.finish_ok(deadline);
        let events = String::from_utf8_lossy(&finished.stdout)
            .lines()
            .map(MconnEvent::parse)
            .collect();
        MconnOutput { events, finished }
    }

    /// The messages it received, sorted (delivery order across channels is
    /// the MConnection's to choose).
    pub fn received(&self) -> Vec<Digest> {
        self.digests(|e| match e {
            MconnEvent::Received(d) => Some(d),
            _ => None,
        })
    }

    /// The messages it sent, sorted.
    pub fn sent(&self) -> Vec<Digest> {
        self.digests(|e| match e {
            MconnEvent::Sent(d) => Some(d),
            _ => None,
        })
    }

    fn digests(&self, pick: impl Fn(&MconnEvent) -> Option<&Digest>) -> Vec<Digest> {
        let mut all: Vec<Digest> = self.events.iter().filter_map(pick).cloned().collect();
        all.sort();
        all
    }

    /// The `onError` text, if it printed one.
    pub fn error(&self) -> Option<&str> {
        self.events.iter().find_map(|e| match e {
            MconnEvent::Error(text) => Some(text.as_str()),
            _ => None,
        })
    }

    /// Its last line (why it ended), for assertions and messages.
    pub fn last(&self) -> Option<&MconnEvent> {
        self.events.last()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags() {
        let args = MconnArgs {
            channels: vec![
                GoChannel::new(0x20, 5),
                GoChannel::new(0x21, 1).recv_cap(1000),
            ],
            ping_interval: Some(Duration::from_millis(200)),
            pong_timeout: Some(Duration::from_millis(100)),
            sends: vec![GoSend {
                channel: 0x21,
                size: 10,
                count: 3,
            }],
            echo: true,
            ..MconnArgs::default()
        };
        let text: Vec<String> = args
            .to_args()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            text,
            [
                "--channels",
                "0x20:5,0x21:1:1000",
                "--ping-interval",
                "200ms",
                "--pong-timeout",
                "100ms",
                "--send",
                "0x21:10:3",
                "--echo"
            ]
        );
    }

    #[test]
    fn parses_lines() {
        let d = Digest {
            channel: 33,
            len: 10,
            sha256: "ab".into(),
        };
        assert_eq!(
            MconnEvent::parse(r#"{"channel":33,"len":10,"sha256":"ab"}"#),
            MconnEvent::Received(d.clone())
        );
        assert_eq!(
            MconnEvent::parse(r#"{"sent":true,"channel":33,"len":10,"sha256":"ab"}"#),
            MconnEvent::Sent(d)
        );
        assert_eq!(
            MconnEvent::parse(r#"{"error":"unknown channel 22"}"#),
            MconnEvent::Error("unknown channel 22".into())
        );
        assert_eq!(
            MconnEvent::parse(
                r#"{"stopped":"duration","received":0,"sent_bytes":27,"recv_bytes":26}"#
            ),
            MconnEvent::Stopped {
                why: "duration".into(),
                received: 0,
                sent_bytes: 27,
                recv_bytes: 26
            }
        );
    }
}
