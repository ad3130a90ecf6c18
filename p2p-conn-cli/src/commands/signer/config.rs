//! `p2p-conn signer --config FILE`: the TOML file, read into the same
//! [`Plan`] the flags give. Every mistake is refused with the file, the
//! line and what is wrong: TOML syntax, an unknown or missing field, a
//! chain ID or state file given twice, a node given twice, naming no
//! chain or an unknown one, a bad address or pin, the output settings.
//! The format, with a commented example, is in docs/operator-manual.md
//! ("The config file"), which a test reads through [`parse`].

use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use p2p_conn::NodeId;
use p2p_conn_privval::endpoint::Address;
use serde::Deserialize;
use toml::Spanned;

use super::plan::{
    self, node_pin, repeats, ChainPlan, NodePlan, Plan, DEFAULT_DISCONNECTED_EVERY,
    DEFAULT_SLOW_SIGN_MS, DEFAULT_STATS_EVERY, IDENTITY_UNUSED, NOISE_NEEDS_IDENTITY,
};

/// The file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    identity: Option<Spanned<PathBuf>>,
    json: Option<bool>,
    stats_every: Option<Spanned<f64>>,
    disconnected_every: Option<Spanned<f64>>,
    metrics: Option<Metrics>,
    #[serde(default)]
    chain: Vec<Chain>,
    #[serde(default)]
    node: Vec<Node>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Metrics {
    listen: Option<Spanned<String>>,
    slow_sign_ms: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Chain {
    id: Spanned<String>,
    key: Spanned<String>,
    state: Spanned<PathBuf>,
    #[serde(default)]
    create_state: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Node {
    address: Spanned<String>,
    chain: Spanned<String>,
    node_id: Option<Spanned<String>>,
}

/// A config refused: where and why.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ConfigError {
    pub(super) file: PathBuf,
    /// 1-based; `None` for the file as a whole.
    pub(super) line: Option<usize>,
    pub(super) what: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}, line {line}: {}", self.file.display(), self.what),
            None => write!(f, "{}: {}", self.file.display(), self.what),
        }
    }
}

/// Read and check the config file at `path` (which the group and others
/// may not write: [`crate::private_file::check_unwritable`]).
pub(super) fn load(path: &Path) -> Result<Plan, ConfigError> {
    crate::private_file::check_unwritable(path, "config file").map_err(|e| ConfigError {
        file: path.to_path_buf(),
        line: None,
        what: e.0,
    })?;
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: path.to_path_buf(),
        line: None,
        what: format!("cannot read it: {e}"),
    })?;
    parse(path, &text)
}

/// Check the config `text` (read from `file`, which messages name).
pub(super) fn parse(file: &Path, text: &str) -> Result<Plan, ConfigError> {
    let at = |span: Option<Range<usize>>, what: String| ConfigError {
        file: file.to_path_buf(),
        line: span.map(|s| line_of(text, s.start)),
        what,
    };
    let f: File = toml::from_str(text).map_err(|e| {
        // serde names Rust's types.
        let what = e
            .message()
            .trim()
            .replace("expected f64", "expected a number");
        at(e.span(), what)
    })?;

    if f.chain.is_empty() {
        return Err(at(None, "no [[chain]]: name at least one chain".into()));
    }
    let mut chains: Vec<ChainPlan> = Vec::new();
    for (i, c) in f.chain.iter().enumerate() {
        let id = c.id.get_ref();
        if id.is_empty() {
            return Err(at(Some(c.id.span()), "the chain id is empty".into()));
        }
        if let Some(first) = f.chain[..i].iter().find(|o| o.id.get_ref() == id) {
            return Err(at(
                Some(c.id.span()),
                format!(
                    "chain {id:?} is given twice (also on line {}): one [[chain]] per chain",
                    line_of(text, first.id.span().start)
                ),
            ));
        }
        if let Some(first) = f.chain[..i]
            .iter()
            .find(|o| o.state.get_ref() == c.state.get_ref())
        {
            return Err(at(
                Some(c.state.span()),
                format!(
                    "state file {} is chain {:?}'s too (line {}): each chain has its own \
                     state file, as each has its own high-water mark",
                    c.state.get_ref().display(),
                    first.id.get_ref(),
                    line_of(text, first.state.span().start)
                ),
            ));
        }
        if c.key.get_ref().is_empty() {
            return Err(at(Some(c.key.span()), "the key is empty".into()));
        }
        chains.push(ChainPlan {
            id: Some(id.clone()),
            key: c.key.get_ref().clone(),
            state: c.state.get_ref().clone(),
            create_state: c.create_state,
        });
    }

    if f.node.is_empty() {
        return Err(at(
            None,
            "no [[node]]: name at least one node to serve".into(),
        ));
    }
    let mut nodes: Vec<NodePlan> = Vec::new();
    for n in &f.node {
        let line = Some(n.address.span());
        let address: Address = n
            .address
            .get_ref()
            .parse()
            .map_err(|e| at(line.clone(), format!("address: {e}")))?;
        let chain = f
            .chain
            .iter()
            .position(|c| c.id.get_ref() == n.chain.get_ref())
            .ok_or_else(|| {
                let known: Vec<&str> = f.chain.iter().map(|c| c.id.get_ref().as_str()).collect();
                at(
                    Some(n.chain.span()),
                    format!(
                        "chain {:?} is not a [[chain]] of this file (those are: {})",
                        n.chain.get_ref(),
                        known.join(", ")
                    ),
                )
            })?;
        let node_id = match &n.node_id {
            Some(s) => Some(
                s.get_ref()
                    .parse::<NodeId>()
                    .map_err(|e| at(Some(s.span()), format!("node_id {:?}: {e}", s.get_ref())))?,
            ),
            None => None,
        };
        let (address, node_id) = node_pin(address, node_id, "node_id")
            .map_err(|e| at(n.node_id.as_ref().map(|s| s.span()).or(line.clone()), e))?;
        nodes.push(NodePlan {
            address,
            node_id,
            chain,
        });
        if let Some(first) = repeats(&nodes, nodes.len() - 1) {
            return Err(at(
                line,
                format!(
                    "node {} is given twice (also on line {}): one connection per node",
                    n.address.get_ref(),
                    line_of(text, f.node[first].address.span().start)
                ),
            ));
        }
    }
    let identity = f.identity.as_ref().map(|i| i.get_ref().clone());
    if let Some(i) = &f.identity {
        if nodes.iter().all(|n| matches!(n.address, Address::Unix(_))) {
            return Err(at(Some(i.span()), format!("identity {IDENTITY_UNUSED}")));
        }
    } else if let Some(n) = f
        .node
        .iter()
        .zip(&nodes)
        .find_map(|(n, p)| matches!(p.address, Address::Noise { .. }).then_some(n))
    {
        return Err(at(Some(n.address.span()), NOISE_NEEDS_IDENTITY.into()));
    }

    let number = |v: &Option<Spanned<f64>>, default: f64| {
        v.as_ref()
            .map_or((default, None), |s| (*s.get_ref(), Some(s.span())))
    };
    let (stats_every, stats_span) = number(&f.stats_every, DEFAULT_STATS_EVERY);
    let (disconnected_every, disc_span) = number(&f.disconnected_every, DEFAULT_DISCONNECTED_EVERY);
    let (listen, slow) = match &f.metrics {
        Some(m) => (m.listen.as_ref(), &m.slow_sign_ms),
        None => (None, &None),
    };
    let (slow_sign_ms, slow_span) = number(slow, DEFAULT_SLOW_SIGN_MS);
    let metrics = match listen {
        Some(l) => Some(l.get_ref().parse::<SocketAddr>().map_err(|e| {
            at(
                Some(l.span()),
                format!("metrics listen {:?}: {e} (IP:PORT)", l.get_ref()),
            )
        })?),
        None => None,
    };
    // Each setting alone, so that the message names its line.
    let check = |span: Option<Range<usize>>, r: Result<plan::Output, String>| {
        r.map_err(|e| at(span, e.replace("--", "").replace('-', "_")))
    };
    let d = (
        DEFAULT_STATS_EVERY,
        DEFAULT_DISCONNECTED_EVERY,
        DEFAULT_SLOW_SIGN_MS,
    );
    check(stats_span, plan::output(false, stats_every, d.1, None, d.2))?;
    check(
        disc_span,
        plan::output(false, d.0, disconnected_every, None, d.2),
    )?;
    check(slow_span, plan::output(false, d.0, d.1, None, slow_sign_ms))?;
    let output = plan::output(
        f.json.unwrap_or(false),
        stats_every,
        disconnected_every,
        metrics,
        slow_sign_ms,
    )
    .map_err(|e| at(None, e))?;
    Ok(Plan {
        chains,
        nodes,
        identity,
        output,
    })
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
