//! The config file's checks: each mistake refused with its line, and a
//! config read into the same plan as the flags that say the same.

use super::*;
use clap::Parser;
use std::time::Duration;

const NODE_ID: &str = "f981ab195d664a8e2c6f7d6358628e05a8b5be8d";

const GOOD: &str = r#"
identity = "/etc/signer/connection_key.json"
stats_every = 5
json = true

[metrics]
listen = "127.0.0.1:26660"
slow_sign_ms = 20.5

[[chain]]
id = "chain-a"
key = "/etc/signer/a/priv_validator_key.json"
state = "/var/lib/signer/a/state"

[[chain]]
id = "chain-b"
key = "/etc/signer/b/priv_validator_key.json"
state = "/var/lib/signer/b/priv_validator_state.json"
create_state = true

[[node]]
address = "tcp://127.0.0.1:26659"
chain = "chain-a"
node_id = "f981ab195d664a8e2c6f7d6358628e05a8b5be8d"

[[node]]
address = "unix:///run/b/privval.sock"
chain = "chain-b"
"#;

fn refused(text: &str) -> ConfigError {
    parse(Path::new("signer.toml"), text).expect_err("a mistake must be refused")
}

/// `text` with `old` (once) replaced by `new`.
fn with(old: &str, new: &str) -> String {
    assert_eq!(GOOD.matches(old).count(), 1, "{old:?}");
    GOOD.replace(old, new)
}

#[test]
fn a_good_config_gives_its_plan() {
    let plan = parse(Path::new("signer.toml"), GOOD).unwrap();
    assert_eq!(plan.chains.len(), 2);
    assert_eq!(plan.chains[1].id.as_deref(), Some("chain-b"));
    assert!(plan.chains[1].create_state && !plan.chains[0].create_state);
    assert_eq!(plan.nodes.len(), 2);
    assert_eq!(plan.nodes[0].chain, 0);
    assert_eq!(plan.nodes[1].chain, 1);
    assert_eq!(plan.nodes[0].node_id, Some(NODE_ID.parse().unwrap()));
    assert!(plan.output.json);
    assert_eq!(plan.output.stats_every, Some(Duration::from_secs(5)));
    assert_eq!(plan.output.slow_sign, Duration::from_micros(20_500));
    assert_eq!(
        plan.output.metrics,
        Some("127.0.0.1:26660".parse().unwrap())
    );
}

/// Each mistake: what is refused, on which line, saying what.
#[test]
fn each_mistake_is_refused_with_its_line() {
    let cases: Vec<(String, &str, &str)> = vec![
        // TOML syntax.
        (
            with("json = true", "json = true true"),
            "json = true",
            "expected",
        ),
        // Unknown fields, at the top, in a chain, in a node, in [metrics].
        (
            with("json = true", "jsn = true"),
            "jsn = true",
            "unknown field `jsn`",
        ),
        (
            with("create_state = true", "create-state = true"),
            "create-state",
            "unknown field `create-state`",
        ),
        (
            with("chain = \"chain-b\"", "chain = \"chain-b\"\nport = 3"),
            "port = 3",
            "unknown field `port`",
        ),
        (
            with("slow_sign_ms = 20.5", "slow_sign = 20.5"),
            "slow_sign = 20.5",
            "unknown field `slow_sign`",
        ),
        // A wrong type.
        (
            with("stats_every = 5", "stats_every = \"5\""),
            "stats_every",
            "expected a number",
        ),
        // A missing field: the chain whose key is missing.
        (
            with("key = \"/etc/signer/b/priv_validator_key.json\"\n", ""),
            // The [[chain]] line of the chain without it.
            "state = \"/var/lib/signer/a/state\"\n\n[[chain]]",
            "missing field `key`",
        ),
        // A node naming no chain, or an unknown one.
        (
            with("chain = \"chain-b\"\n", ""),
            "f981ab195d664a8e2c6f7d6358628e05a8b5be8d\"\n\n[[node]]",
            "missing field `chain`",
        ),
        (
            with("chain = \"chain-b\"\n", "chain = \"chain-c\"\n"),
            "chain = \"chain-c\"",
            "chain \"chain-c\" is not a [[chain]] of this file (those are: chain-a, chain-b)",
        ),
        // One chain ID twice; one state file for two chains.
        (
            with("id = \"chain-b\"", "id = \"chain-a\""),
            "signer/a/state\"\n\n[[chain]]\nid = \"chain-a\"",
            "chain \"chain-a\" is given twice (also on line 11)",
        ),
        (
            with(
                "state = \"/var/lib/signer/b/priv_validator_state.json\"",
                "state = \"/var/lib/signer/a/state\"",
            ),
            "key = \"/etc/signer/b/priv_validator_key.json\"\nstate",
            "state file /var/lib/signer/a/state is chain \"chain-a\"'s too (line 13)",
        ),
        // A node twice.
        (
            with("unix:///run/b/privval.sock", "tcp://127.0.0.1:26659"),
            "8e05a8b5be8d\"\n\n[[node]]\naddress = \"tcp://127.0.0.1:26659\"",
            "node tcp://127.0.0.1:26659 is given twice (also on line 22)",
        ),
        // Bad addresses and pins.
        (
            with("unix:///run/b/privval.sock", "http://127.0.0.1:1"),
            "http://127.0.0.1:1",
            "tcp://HOST:PORT, unix://PATH or noise://PEER_ID@IP:PORT",
        ),
        (
            with(
                "chain = \"chain-b\"",
                &format!("chain = \"chain-b\"\nnode_id = \"{NODE_ID}\""),
            ),
            "unix:///run/b/privval.sock\"\nchain = \"chain-b\"\nnode_id",
            "node_id needs a tcp:// address",
        ),
        (
            with(&format!("node_id = \"{NODE_ID}\""), "node_id = \"zz\""),
            "node_id = \"zz\"",
            "node_id \"zz\"",
        ),
        (
            with("listen = \"127.0.0.1:26660\"", "listen = \"localhost\""),
            "listen = \"localhost\"",
            "(IP:PORT)",
        ),
        (
            with("stats_every = 5", "stats_every = -1"),
            "stats_every = -1",
            "stats_every must be a positive number of seconds",
        ),
        (
            with("slow_sign_ms = 20.5", "slow_sign_ms = 0"),
            "slow_sign_ms = 0",
            "slow_sign_ms must be a positive number of milliseconds",
        ),
    ];
    for (text, at, says) in cases {
        let e = refused(&text);
        // `at` may span lines (to be found once): the error is on its
        // last line.
        let first_line = text
            .find(at)
            .map(|i| line_of(&text, i))
            .unwrap_or_else(|| panic!("{at:?} not in the case's text"));
        let want = first_line + at.matches('\n').count();
        assert_eq!(e.line, Some(want), "{says:?}: {e} in\n{text}");
        assert!(e.what.contains(says), "{e} must say {says:?}");
        assert!(
            e.to_string()
                .starts_with(&format!("signer.toml, line {want}: ")),
            "{e}"
        );
    }
}

#[test]
fn a_config_without_chains_or_nodes_is_refused() {
    let e = refused("json = true\n");
    assert_eq!(e.line, None);
    assert!(e.what.contains("no [[chain]]"), "{e}");
    let only_chains = GOOD.split("[[node]]").next().unwrap();
    assert!(refused(only_chains).what.contains("no [[node]]"));
}

/// The flags and a config that say the same give the same plan: the one
/// the signer starts from.
#[test]
fn the_flags_and_the_config_give_one_plan() {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: crate::commands::signer::SignerArgs,
    }
    let flags = Cli::parse_from([
        "signer",
        "--node",
        &format!("tcp://{NODE_ID}@127.0.0.1:26659"),
        "--node",
        "tcp://127.0.0.1:26658",
        "--key",
        "/k.json",
        "--state",
        "/s",
        "--create-state",
        "--chain-id",
        "c",
        "--identity",
        "/id.json",
        "--stats-every",
        "0",
        "--metrics",
        "127.0.0.1:9",
    ]);
    let from_flags = plan::from_flags(&flags.args).unwrap();
    let text = format!(
        r#"
identity = "/id.json"
stats_every = 0
[metrics]
listen = "127.0.0.1:9"
[[chain]]
id = "c"
key = "/k.json"
state = "/s"
create_state = true
[[node]]
address = "tcp://127.0.0.1:26659"
node_id = "{NODE_ID}"
chain = "c"
[[node]]
address = "tcp://127.0.0.1:26658"
chain = "c"
"#
    );
    let from_config = parse(Path::new("x.toml"), &text).unwrap();
    assert_eq!(from_config, from_flags);
}

/// The example config in docs/deploy/signer.toml parses, and the operator
/// manual shows it as it is.
#[test]
fn the_documented_example_parses_and_is_in_the_manual() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let file = root.join("docs/deploy/signer.toml");
    let example = std::fs::read_to_string(&file).unwrap();
    let plan = parse(&file, &example).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plan.chains.len(), 2);
    assert_eq!(plan.nodes.len(), 3);
    assert!(plan.identity.is_some() && plan.output.metrics.is_some());
    let manual = std::fs::read_to_string(root.join("docs/operator-manual.md")).unwrap();
    assert!(
        manual.contains(&format!("```toml\n{example}```\n")),
        "docs/operator-manual.md must show docs/deploy/signer.toml as it is"
    );
}
