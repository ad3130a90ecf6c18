//! `check`'s inputs: the command line's arguments, each a file (a chain
//! registry `chain.json`, a CometBFT `config.toml`) or a node's address,
//! read into entries.

use std::path::Path;

use serde_json::Value;

use crate::conn;
use crate::error::CliError;

/// An entry's role: a seed is asked for addresses, a peer is not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Seed,
    Peer,
}

impl Role {
    pub(super) fn name(self) -> &'static str {
        match self {
            Role::Seed => "seed",
            Role::Peer => "peer",
        }
    }
}

/// One entry as its list gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Where it came from: `chain.json peers.seeds[2]`, `the command line`.
    pub source: String,
    pub role: Role,
    /// The node ID as written (checked later).
    pub id: String,
    /// `HOST:PORT` as written.
    pub address: String,
    /// chain.json's `provider`.
    pub provider: Option<String>,
}

/// The entries of a list, and the chain ID it names (chain.json's).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct List {
    pub entries: Vec<Entry>,
    pub chain_id: Option<String>,
}

/// A chain registry `chain.json`: `chain_id`, `peers.seeds` and
/// `peers.persistent_peers`, each a list of `{id, address, provider}`.
pub fn parse_chain_json(name: &str, text: &str) -> Result<List, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let chain_id = v
        .get("chain_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    let peers = v
        .get("peers")
        .ok_or("no \"peers\" object (a chain registry chain.json has peers.seeds)")?;
    let mut entries = Vec::new();
    for (key, role) in [("seeds", Role::Seed), ("persistent_peers", Role::Peer)] {
        let Some(list) = peers.get(key) else {
            continue;
        };
        let list = list
            .as_array()
            .ok_or_else(|| format!("peers.{key} is not a list"))?;
        for (i, e) in list.iter().enumerate() {
            let field = |f: &str| e.get(f).and_then(Value::as_str).map(str::to_string);
            entries.push(Entry {
                source: format!("{name} peers.{key}[{i}]"),
                role,
                id: field("id").unwrap_or_default(),
                address: field("address").unwrap_or_default(),
                provider: field("provider"),
            });
        }
    }
    Ok(List { entries, chain_id })
}

/// A CometBFT `config.toml`: `seeds` and `persistent_peers` of `[p2p]`,
/// comma-separated `ID@HOST:PORT` lists. Read line by line: `key = "…"`
/// under the `[p2p]` header (the form CometBFT writes). A line that is
/// not TOML's (a blank, a comment, a `[table]` header, `key = value`, or
/// the rest of a multi-line array or string) fails, naming the line.
pub fn parse_config_toml(name: &str, text: &str) -> Result<List, String> {
    if let Some((n, line)) = first_non_toml_line(text) {
        return Err(format!(
            "not valid TOML: line {n} is neither a [table], a key = value nor a comment: {:?}",
            line.trim()
        ));
    }
    let mut section = String::new();
    let mut entries = Vec::new();
    let mut found = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(h) = line.strip_prefix('[') {
            section = h.trim_end_matches(']').trim().to_string();
            continue;
        }
        if section != "p2p" {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let role = match key.trim() {
            "seeds" => Role::Seed,
            "persistent_peers" => Role::Peer,
            _ => continue,
        };
        found = true;
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .ok_or_else(|| format!("{}: not a quoted string: {value}", key.trim()))?;
        for (i, item) in value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .enumerate()
        {
            let (id, address) = item.split_once('@').unwrap_or(("", item));
            entries.push(Entry {
                source: format!("{name} p2p.{}[{i}]", key.trim()),
                role,
                id: id.to_string(),
                address: address.to_string(),
                provider: None,
            });
        }
    }
    if !found {
        return Err("no seeds or persistent_peers under [p2p]".into());
    }
    Ok(List {
        entries,
        chain_id: None,
    })
}

/// The first line (1-based) of `text` that a TOML file cannot hold, by
/// the shapes of TOML's lines: blank, `# comment`, `[table]` or
/// `[[array of tables]]`, `key = value`, and the continuation of a
/// multi-line array (`[` to its `]`) or string (`"""`, `'''`). Not a
/// full TOML parser: enough to tell a config.toml from a broken file.
fn first_non_toml_line(text: &str) -> Option<(usize, &str)> {
    // Open brackets of a multi-line array, or the delimiter of an open
    // multi-line string.
    let (mut depth, mut string): (i64, Option<&str>) = (0, None);
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if let Some(delim) = string {
            if line.contains(delim) {
                string = None;
            }
            continue;
        }
        if depth > 0 {
            depth += brackets(line);
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('[') {
            let header = line.split(" #").next().unwrap_or(line).trim_end();
            if header.ends_with(']') && header.len() > 2 {
                continue;
            }
            return Some((i + 1, raw));
        }
        let Some((key, value)) = line.split_once('=') else {
            return Some((i + 1, raw));
        };
        let key_ok = key
            .trim()
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '"' | '\'' | ' '));
        let value = value.trim();
        if key.trim().is_empty() || !key_ok || value.is_empty() {
            return Some((i + 1, raw));
        }
        for delim in ["\"\"\"", "'''"] {
            if let Some(rest) = value.strip_prefix(delim) {
                if !rest.contains(delim) {
                    string = Some(delim);
                }
            }
        }
        if value.starts_with('[') {
            depth = brackets(value);
        }
    }
    None
}

/// Opening minus closing brackets of `s` outside its quoted strings.
fn brackets(s: &str) -> i64 {
    let (mut n, mut quote) = (0, None);
    for c in s.chars() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '[') => n += 1,
            (None, ']') => n -= 1,
            (None, '#') => break,
            _ => {}
        }
    }
    n
}

/// Whether a command-line input that names nothing on disk was meant as
/// a file: it has a `/` (but is no `scheme://` address) or ends in
/// `.json` or `.toml`. Addresses have neither.
fn looks_like_path(input: &str) -> bool {
    let lower = input.to_ascii_lowercase();
    (input.contains('/') && !input.contains("://"))
        || input.contains('\\')
        || lower.ends_with(".json")
        || lower.ends_with(".toml")
}

/// The entries of one command-line input: a file (chain.json or
/// config.toml: by its name's ending, else by its first character) or an
/// address. An input is a file when something by that name exists, or
/// when it looks like a path ([`looks_like_path`]): then it must be read
/// and parse, or it is a usage error that names it.
pub(super) fn read_input(input: &str, role: Role) -> Result<List, CliError> {
    let path = Path::new(input);
    let exists = std::fs::symlink_metadata(path).is_ok();
    if !exists && looks_like_path(input) {
        return Err(CliError::usage(format!(
            "{input}: no such file (a chain.json or config.toml to check; a node is given as ID@HOST:PORT)"
        )));
    }
    if !exists {
        let (address, id) = conn::split_id(input)?;
        if id.is_none() && !conn::is_host_port(&address) {
            return Err(CliError::usage(format!(
                "{input}: neither a file nor a node's address (want a chain.json, a config.toml, or ID@HOST:PORT)"
            )));
        }
        return Ok(List {
            entries: vec![Entry {
                source: "the command line".into(),
                role,
                id: id.map(|i| i.to_string()).unwrap_or_default(),
                address,
                provider: None,
            }],
            chain_id: None,
        });
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("cannot read {input}: {e}")))?;
    let name = path
        .file_name()
        .map_or(input.to_string(), |n| n.to_string_lossy().into_owned());
    let lower = name.to_ascii_lowercase();
    let parsed = if lower.ends_with(".json") {
        parse_chain_json(&name, &text)
    } else if lower.ends_with(".toml") {
        parse_config_toml(&name, &text)
    } else if text.trim_start().starts_with('{') {
        parse_chain_json(&name, &text)
    } else {
        parse_config_toml(&name, &text).map_err(|e| match e.strip_prefix("not valid TOML: ") {
            Some(why) => format!("neither JSON (a chain.json) nor TOML (a config.toml): {why}"),
            None => e,
        })
    };
    parsed.map_err(|e| CliError::usage(format!("{input}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    const CHAIN_JSON: &str = r#"{
      "chain_name": "test", "chain_id": "test-chain-1",
      "peers": {
        "seeds": [
          {"id": "ade4d8bc8cbe014af6ebdf3cb7b1e9ad36f412c0", "address": "seeds.example.org:26656", "provider": "a"},
          {"id": "", "address": "1.2.3.4:26656"}
        ],
        "persistent_peers": [
          {"id": "bde4d8bc8cbe014af6ebdf3cb7b1e9ad36f412c0", "address": "5.6.7.8:26656"}
        ]
      }
    }"#;

    #[test]
    fn chain_json_entries_and_chain_id() {
        let l = parse_chain_json("chain.json", CHAIN_JSON).unwrap();
        assert_eq!(l.chain_id.as_deref(), Some("test-chain-1"));
        assert_eq!(l.entries.len(), 3);
        assert_eq!(l.entries[0].role, Role::Seed);
        assert_eq!(l.entries[0].address, "seeds.example.org:26656");
        assert_eq!(l.entries[0].provider.as_deref(), Some("a"));
        assert_eq!(l.entries[1].source, "chain.json peers.seeds[1]");
        assert_eq!(l.entries[2].role, Role::Peer);
        assert_eq!(
            parse(&l.entries[1]),
            Err("no node ID: an entry needs ID@HOST:PORT".into())
        );
        assert!(parse(&l.entries[0]).is_ok());
        assert!(parse_chain_json("x", "{}").is_err());
        assert!(parse_chain_json("x", "[").is_err());
    }

    #[test]
    fn config_toml_seeds_and_persistent_peers() {
        let toml = r#"
moniker = "n"
[rpc]
seeds = "not this one"
[p2p]
laddr = "tcp://0.0.0.0:26656"
seeds = "ade4d8bc8cbe014af6ebdf3cb7b1e9ad36f412c0@1.2.3.4:26656, bde4d8bc8cbe014af6ebdf3cb7b1e9ad36f412c0@5.6.7.8:26656"
persistent_peers = ""
[mempool]
"#;
        let l = parse_config_toml("config.toml", toml).unwrap();
        assert_eq!(l.chain_id, None);
        assert_eq!(l.entries.len(), 2);
        assert_eq!(l.entries[1].id, "bde4d8bc8cbe014af6ebdf3cb7b1e9ad36f412c0");
        assert_eq!(l.entries[1].address, "5.6.7.8:26656");
        assert_eq!(l.entries[1].source, "config.toml p2p.seeds[1]");
        assert!(parse_config_toml("c", "[p2p]\nladdr = \"x\"\n").is_err());
        assert!(parse_config_toml("c", "[p2p]\nseeds = bare\n").is_err());
    }

    /// TOML's line shapes pass, multi-line arrays and strings included;
    /// anything else is named by its line.
    #[test]
    fn a_broken_toml_file_is_told_by_its_line() {
        let good = "# c\n\n[p2p]\nseeds = \"a@b:1\" # c\nx = [\n  \"a\",\n  \"b]\",\n]\n\
                    s = \"\"\"\nanything { here\n\"\"\"\n[[t.u]]\n\"q k\" = 1\n";
        assert_eq!(first_non_toml_line(good), None);
        assert_eq!(first_non_toml_line("garbage{"), Some((1, "garbage{")));
        assert_eq!(
            first_non_toml_line("[p2p]\nseeds =\n"),
            Some((2, "seeds ="))
        );
        assert_eq!(first_non_toml_line("[p2p\n"), Some((1, "[p2p")));
        assert_eq!(
            first_non_toml_line("{\"peers\": 1}"),
            Some((1, "{\"peers\": 1}"))
        );
    }

    #[test]
    fn paths_and_addresses_are_told_apart() {
        for path in ["chain.json", "x/peers", "./c", "CONFIG.TOML", "..\\c"] {
            assert!(looks_like_path(path), "{path}");
        }
        for addr in [
            "127.0.0.1:26656",
            "ade4d8bc8cbe014af6ebdf3cb7b1e9ad36f412c0@seed.example.org:26656",
            "tcp://ade4d8bc8cbe014af6ebdf3cb7b1e9ad36f412c0@[::1]:26656",
        ] {
            assert!(!looks_like_path(addr), "{addr}");
        }
    }
}
