//! `p2p-conn signer` without a CometBFT node: its refusals to start (exit
//! 1), and a scripted node over `unix://` (plaintext privval, written with
//! the library's message codec) that asks for the key, votes, a re-sent
//! vote with a later timestamp, a conflicting vote, a vote for another
//! chain and one below the mark, drops the connection and sees the signer
//! dial again, then stops it with SIGTERM. The human-mode output must say
//! each of those things. Over `tcp://`, the library's node endpoint with
//! pins on both ends (`ID@HOST:PORT`, `--connection-key`), and a node that
//! is not the pinned one, which the signer never serves. The real-node
//! tests are in `signer_cometbft_node.rs`. The scripted node and the
//! helpers are here; the tests are in [`refusals`], [`serving`],
//! [`reporting`] and [`crash`].

#![cfg(unix)]

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::process::{run, Finished, Proc};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use p2p_conn::Identity;
use p2p_conn_interop::privval_peer::validator_key_json;
use p2p_conn_privval::testkit::message::Sum;
use p2p_conn_privval::testkit::{encode, Message, MessageDecoder, SignVoteRequest};
use p2p_conn_privval::{signed_msg_type, BlockId, Timestamp, Vote};

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

/// Bound on a command that exits by itself, and on each wait below.
const LIMIT: Duration = Duration::from_secs(20);

const CHAIN: &str = "test-chain";

fn run_cli(args: &[&str]) -> Finished {
    run(Path::new(BIN), args, LIMIT)
}

/// A validator key file (`priv_validator_key.json`, as FilePV writes it)
/// in `dir`.
fn validator_key(dir: &Path) -> (PathBuf, Identity) {
    let path = dir.join("priv_validator_key.json");
    let mut seed = [0u8; 32];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut seed);
    let (json, id) = validator_key_json(seed);
    write_private(&path, json.as_bytes());
    (path, id)
}

/// Write `bytes` to a file at `path` (mode 0600 if new) that only its owner may read or
/// write (mode 0600), as a key or a state file must be.
fn write_private(path: &Path, bytes: &[u8]) {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    f.write_all(bytes).unwrap();
}

/// The text a signer printed on stderr, each line without its leading
/// RFC 3339 time (checked: UTC, milliseconds) and level.
fn untimed(text: &str) -> Vec<String> {
    leveled(text).into_iter().map(|(_, l)| l).collect()
}

/// Each line's level (`INFO`, `WARN` or `ERROR`, after the time) and the
/// rest of it.
fn leveled(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|l| {
            let (time, rest) = l
                .split_once(' ')
                .unwrap_or_else(|| panic!("no time: {l:?}"));
            assert!(
                is_rfc3339_utc_ms(time),
                "{l:?} does not start with an RFC 3339 time"
            );
            let (level, rest) = rest
                .split_once(' ')
                .filter(|(level, _)| ["INFO", "WARN", "ERROR"].contains(level))
                .unwrap_or_else(|| panic!("{l:?}: no level after the time"));
            (level.to_string(), rest.to_string())
        })
        .collect()
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`, within a day of now.
fn is_rfc3339_utc_ms(t: &str) -> bool {
    let b = t.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let shape = b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z';
    shape && {
        // Days since the epoch from the date (the civil calendar), against
        // the system clock.
        let n = |r: std::ops::Range<usize>| t[r].parse::<i64>().unwrap();
        let (y, m, d) = (n(0..4), n(5..7), n(8..10));
        let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * m + 2) / 5 + d - 1;
        let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
            / 86_400;
        (days - now).abs() <= 1
    }
}

/// Ask a running signer to stop, as an operator's Ctrl-C or service
/// manager would.
fn sigterm(signer: &Proc) {
    let pid = Pid::from_raw(i32::try_from(signer.id()).unwrap());
    kill(pid, Signal::SIGTERM).unwrap();
}

fn stderr(out: &Finished) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The node side of a plaintext privval connection, one request at a time.
pub(crate) struct ScriptedNode {
    stream: UnixStream,
    decoder: MessageDecoder,
    pending: Vec<u8>,
}

impl ScriptedNode {
    pub(crate) fn accept(listener: &UnixListener) -> ScriptedNode {
        // Bounded: a signer that exits instead of dialing fails the test
        // rather than hanging it.
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        use std::os::fd::AsFd;
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        let ready = poll(&mut fds, PollTimeout::try_from(LIMIT).unwrap()).expect("poll");
        assert!(ready > 0, "the signer did not connect within {LIMIT:?}");
        let (stream, _) = listener.accept().expect("the signer connects");
        stream.set_read_timeout(Some(LIMIT)).unwrap();
        ScriptedNode {
            stream,
            decoder: MessageDecoder::new(),
            pending: Vec::new(),
        }
    }

    /// [`Self::accept`], failing if no connection comes within [`LIMIT`].
    fn accept_within(listener: &UnixListener) -> ScriptedNode {
        let listener = listener.try_clone().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(ScriptedNode::accept(&listener));
        });
        rx.recv_timeout(LIMIT)
            .expect("the signer connects within the limit")
    }

    fn request(&mut self, sum: Sum) -> Sum {
        self.try_request(sum)
            .expect("the signer hung up instead of answering")
    }

    /// [`Self::request`], or `None` if the connection ends first.
    fn try_request(&mut self, sum: Sum) -> Option<Sum> {
        self.stream.write_all(&encode(&Message::from(sum))).ok()?;
        loop {
            if !self.pending.is_empty() {
                let (used, msg) = self.decoder.feed(&self.pending).unwrap();
                self.pending.drain(..used);
                if let Some(msg) = msg {
                    return Some(msg.sum.expect("a response"));
                }
            }
            let mut buf = [0u8; 4096];
            let n = self.stream.read(&mut buf).ok()?;
            if n == 0 {
                return None;
            }
            self.pending.extend_from_slice(&buf[..n]);
        }
    }

    /// [`Self::sign`], or `None` if the connection ends first.
    fn try_sign(&mut self, chain: &str, vote: &Vote) -> Option<Result<Vote, String>> {
        let mut req = SignVoteRequest::default();
        req.vote = Some(vote.clone());
        req.chain_id = chain.into();
        match self.try_request(Sum::SignVoteRequest(req))? {
            Sum::SignedVoteResponse(r) => Some(match r.error {
                None => Ok(r.vote),
                Some(e) => Err(e.description),
            }),
            other => panic!("expected a SignedVoteResponse, got {other:?}"),
        }
    }

    /// A ping answered: every request before it is counted in the stats
    /// and reported (the endpoint counts and reports a request after
    /// writing its response, before it reads the next).
    fn settle(&mut self) {
        let ping = Sum::PingRequest(p2p_conn_privval::testkit::PingRequest::default());
        match self.request(ping) {
            Sum::PingResponse(_) => {}
            other => panic!("expected a PingResponse, got {other:?}"),
        }
    }

    /// Ask to sign `vote` on `chain`: the signed vote, or the error.
    pub(crate) fn sign(&mut self, chain: &str, vote: &Vote) -> Result<Vote, String> {
        let mut req = SignVoteRequest::default();
        req.vote = Some(vote.clone());
        req.chain_id = chain.into();
        match self.request(Sum::SignVoteRequest(req)) {
            Sum::SignedVoteResponse(r) => match r.error {
                None => Ok(r.vote),
                Some(e) => Err(e.description),
            },
            other => panic!("expected a SignedVoteResponse, got {other:?}"),
        }
    }
}

fn prevote(height: i64, block: u8, seconds: i64) -> Vote {
    let mut id = BlockId::default();
    id.hash = vec![block; 32];
    id.part_set_header.total = 1;
    id.part_set_header.hash = vec![block ^ 0xff; 32];
    let mut ts = Timestamp::default();
    ts.seconds = seconds;
    let mut v = Vote::default();
    v.msg_type = signed_msg_type::PREVOTE;
    v.height = height;
    v.round = 0;
    v.block_id = id;
    v.timestamp = ts;
    v.validator_address = vec![7; 20];
    v
}

/// The JSON events a signer printed on stdout.
fn json_events(out: &Finished) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect()
}

fn count(events: &[serde_json::Value], name: &str) -> usize {
    events.iter().filter(|e| e["event"] == name).count()
}

mod alerts;
mod config;
mod crash;
mod permissions;
mod refusals;
mod reload;
mod reporting;
mod serving;
mod standby;
