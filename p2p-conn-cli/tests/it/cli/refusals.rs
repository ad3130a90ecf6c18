//! A refused peer never exits 0: the side that refuses resets the
//! connection.

use std::time::Duration;

use super::{spawn, spawn_listener_any_port};
use crate::common::process::{Feed, Finished};

/// How many times each refusal test runs: the outcome used to depend on
/// nothing but timing (a clean close read as a clean end).
const REFUSAL_RUNS: usize = 5;

/// Fail unless `peer` (the refused side's peer) exited non-zero with one
/// `error:` line that names the reset.
fn assert_saw_reset(peer: &Finished, what: &str) {
    let err = String::from_utf8_lossy(&peer.stderr);
    assert!(!peer.status.success(), "{what}: the peer exited 0: {err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ") && last.contains("reset the connection"),
        "{what}: {err}"
    );
}

/// `listen --peer-id` (another ID) refuses the dialer, which was fed a line
/// and end of file.
#[test]
fn dialer_refused_by_peer_id_exits_non_zero() {
    let wrong = "00".repeat(20);
    for run in 0..REFUSAL_RUNS {
        let (listener, addr) = spawn_listener_any_port(&["--peer-id", &wrong], Feed::none());
        let d = spawn(&["dial", &addr], b"hello\n").finish_within(Duration::from_secs(30));
        let l = listener.finish_within(Duration::from_secs(30));
        let lerr = String::from_utf8_lossy(&l.stderr);
        assert!(
            lerr.contains("error: peer ID mismatch"),
            "run {run}: {lerr}"
        );
        assert_saw_reset(&d, &format!("run {run}: dialer"));
    }
}

/// `dial WRONG_ID@ADDR` refuses the listener, which was fed a line and end
/// of file.
#[test]
fn listener_refused_by_peer_id_exits_non_zero() {
    let wrong = "00".repeat(20);
    for run in 0..REFUSAL_RUNS {
        let (listener, addr) = spawn_listener_any_port(&[], Feed::Now(b"hello\n".to_vec()));
        let d = spawn(&["dial", &format!("{wrong}@{addr}")], b"")
            .finish_within(Duration::from_secs(30));
        let l = listener.finish_within(Duration::from_secs(30));
        let derr = String::from_utf8_lossy(&d.stderr);
        assert!(
            derr.contains("error: peer ID mismatch"),
            "run {run}: {derr}"
        );
        assert_saw_reset(&l, &format!("run {run}: listener"));
    }
}

/// `listen --nodeinfo` refuses a dialer whose NodeInfo breaks a rule (an
/// empty moniker); the dialer finds the listener's NodeInfo fine, goes on to
/// copy, and must not exit 0.
#[test]
fn dialer_refused_by_nodeinfo_exits_non_zero() {
    for run in 0..REFUSAL_RUNS {
        let (listener, addr) =
            spawn_listener_any_port(&["--nodeinfo", "--network", "refusal-net"], Feed::none());
        let d = spawn(
            &[
                "dial",
                &addr,
                "--nodeinfo",
                "--network",
                "refusal-net",
                "--moniker",
                "",
            ],
            b"hello\n",
        )
        .finish_within(Duration::from_secs(30));
        let l = listener.finish_within(Duration::from_secs(30));
        let lerr = String::from_utf8_lossy(&l.stderr);
        assert!(lerr.contains("not acceptable"), "run {run}: {lerr}");
        assert!(lerr.contains("moniker"), "run {run}: {lerr}");
        assert_eq!(l.status.code(), Some(6), "run {run}: {lerr}");
        assert_saw_reset(&d, &format!("run {run}: dialer"));
    }
}

// ---------------------------------------------------------------------------
// Exit codes by stage, and the NodeInfo flags.
