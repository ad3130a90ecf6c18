//! Help and usage: each command in one short line, each connection
//! command with only its flags, `check` refusing what it cannot read.

use std::time::Duration;

use super::{run_cli, spawn};

/// The lines of `help`'s `Commands:` list.
fn command_list(help: &str) -> Vec<&str> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

/// `p2p-conn --help` (and `state --help`, `threshold --help`) list each
/// command in one short line, at most 80 columns; the detail is in the
/// command's own `--help`.
#[test]
fn help_lists_each_command_in_one_short_line() {
    for args in [
        &["--help"][..],
        &["-h"],
        &["state", "--help"],
        &["threshold", "--help"],
    ] {
        let help = run_cli(args).stdout_text();
        let list = command_list(&help);
        assert!(list.len() >= 3, "{args:?}: no command list: {help}");
        for line in list {
            assert!(
                line.chars().count() <= 80,
                "{args:?}: {} columns: {line}",
                line.chars().count()
            );
        }
    }
    // The detail is still there, one level down.
    for (cmd, detail) in [
        ("probe", "8 network mismatch"),
        ("signer", "exits 1 if it cannot start"),
        (
            "listen",
            "plus 9 for a connection that failed after the handshake",
        ),
    ] {
        let help = run_cli(&[cmd, "--help"]).stdout_text();
        assert!(help.contains(detail), "{cmd} --help: {help}");
    }
}

/// The flags `help` lists, by their long names (`--help` included).
fn listed_flags(help: &str) -> Vec<String> {
    help.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix("-v, ")
                .or(l.strip_prefix("-h, "))
                .unwrap_or(l);
            let flag = l.strip_prefix("--")?.split([' ', '=']).next()?;
            Some(format!("--{flag}"))
        })
        .collect()
}

/// Each connection command lists exactly the flags it uses: `probe` has no
/// wire settings (it only talks to CometBFT nodes, on CometBFT's wire), and
/// its help does not send the reader to `listen` and `dial`'s flags.
#[test]
fn each_connection_command_lists_only_its_flags() {
    let conn = ["--key", "--handshake-timeout", "--peer-id"];
    let wire = ["--frame-size", "--flush-size", "--read-buffer", "--backend"];
    let info = ["--network", "--moniker", "--channels"];
    let pipe = [
        "--nodeinfo",
        "--mconn",
        "--ping-interval",
        "--output",
        "--count-io",
    ];
    let common = ["--verbose", "--help"];
    let cases: [(&str, Vec<&str>); 3] = [
        (
            "probe",
            [&["--connect-timeout", "--json"][..], &conn, &info, &common].concat(),
        ),
        ("listen", [&conn[..], &wire, &info, &pipe, &common].concat()),
        (
            "dial",
            [
                &["--connect-timeout"][..],
                &conn,
                &wire,
                &info,
                &pipe,
                &common,
            ]
            .concat(),
        ),
    ];
    for (cmd, want) in cases {
        let help = run_cli(&[cmd, "--help"]).stdout_text();
        let mut listed = listed_flags(&help);
        let mut want: Vec<String> = want.iter().map(|f| f.to_string()).collect();
        listed.sort();
        want.sort();
        assert_eq!(listed, want, "{cmd} --help:\n{help}");
    }
    let help = run_cli(&["probe", "--help"]).stdout_text();
    for other in ["--nodeinfo", "--mconn", "listen", "dial"] {
        assert!(!help.contains(other), "probe --help names {other}:\n{help}");
    }
    // And a wire flag is refused, as any unknown flag (clap's exit 2).
    let out = run_cli(&["probe", "127.0.0.1:9", "--frame-size", "1024"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// `check` without inputs is clap's usage error (2); a file that is not a
/// chain.json or a config.toml with peers is a usage error (1); an entry
/// without a node ID fails (10) without anything being dialed.
#[test]
fn check_refuses_what_it_cannot_read() {
    let out = spawn(&["check"], b"").finish_within(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2));
    let dir = crate::common::process::scratch("check-usage");
    let bad = dir.join("chain.json");
    std::fs::write(&bad, "{\"chain_id\": \"x\"}").unwrap();
    let out = spawn(&["check", bad.to_str().unwrap()], b"").finish_within(Duration::from_secs(10));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no \"peers\" object"), "{err}");
    let toml = dir.join("config.toml");
    std::fs::write(&toml, "[p2p]\nladdr = \"tcp://0.0.0.0:26656\"\n").unwrap();
    let out = spawn(&["check", toml.to_str().unwrap()], b"").finish_within(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no seeds or persistent_peers"));
    let out =
        spawn(&["check", "--json", "127.0.0.1:9"], b"").finish_within(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(10));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["entries"][0]["problems"][0],
        "no node ID: an entry needs ID@HOST:PORT"
    );
    assert_eq!(
        v["entries"][0]["status"],
        serde_json::Value::Null,
        "dialed: {v:#}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
