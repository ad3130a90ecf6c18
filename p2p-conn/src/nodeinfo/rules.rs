//! CometBFT's checks on a NodeInfo, by name: `DefaultNodeInfo.Validate`,
//! the transport's ID check and `CompatibleWith`, each broken rule a
//! [`Violation`] with a stable [`Rule`].

use std::fmt;

use super::{NodeInfo, MAX_CHANNELS};
use crate::NodeId;

/// A CometBFT rule a NodeInfo can break.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Rule {
    /// `Validate`: the ID is 40 hex digits (CometBFT checks it as part of the
    /// listen address).
    IdFormat,
    /// `Validate`: `ID@listen_addr` parses as a network address.
    ListenAddr,
    /// `Validate`: the version, if present, is printable ASCII and not blank.
    Version,
    /// `Validate`: at most [`MAX_CHANNELS`] channels.
    ChannelCount,
    /// `Validate`: no channel twice.
    DuplicateChannel,
    /// `Validate`: the moniker is non-empty printable ASCII, not blank.
    Moniker,
    /// `Validate`: `tx_index` is `on`, `off` or empty.
    TxIndex,
    /// `Validate`: the RPC address, if present, is printable ASCII and not
    /// blank.
    RpcAddress,
    /// The transport: the NodeInfo's ID is the ID of the key the peer
    /// authenticated with.
    IdMatchesKey,
    /// `CompatibleWith`: the same block protocol version.
    BlockVersion,
    /// `CompatibleWith`: the same network.
    Network,
    /// `CompatibleWith`: a channel in common (unless one side lists none).
    CommonChannel,
}

impl Rule {
    /// A stable short name for logs and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Rule::IdFormat => "id_format",
            Rule::ListenAddr => "listen_addr",
            Rule::Version => "version",
            Rule::ChannelCount => "channel_count",
            Rule::DuplicateChannel => "duplicate_channel",
            Rule::Moniker => "moniker",
            Rule::TxIndex => "tx_index",
            Rule::RpcAddress => "rpc_address",
            Rule::IdMatchesKey => "id_matches_key",
            Rule::BlockVersion => "block_version",
            Rule::Network => "network",
            Rule::CommonChannel => "common_channel",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One broken rule, with what was wrong.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// The rule.
    pub rule: Rule,
    /// What the NodeInfo held that broke it.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.rule, self.detail)
    }
}

fn violation(rule: Rule, detail: impl Into<String>) -> Violation {
    Violation {
        rule,
        detail: detail.into(),
    }
}

impl NodeInfo {
    /// CometBFT's `DefaultNodeInfo.Validate`: every rule this NodeInfo
    /// breaks, in CometBFT's order (empty when valid). Host names in
    /// `listen_addr` are checked for syntax, not resolved.
    pub fn validate(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        if self.node_id().is_none() {
            out.push(violation(
                Rule::IdFormat,
                format!("{:?} is not 40 hex digits", self.id),
            ));
        }
        if let Err(why) = check_listen_addr(&self.listen_addr) {
            out.push(violation(
                Rule::ListenAddr,
                format!("{:?}: {why}", self.listen_addr),
            ));
        }
        check_text(&mut out, Rule::Version, &self.version, true);
        if self.channels.len() > MAX_CHANNELS {
            out.push(violation(
                Rule::ChannelCount,
                format!("{} channels; at most {MAX_CHANNELS}", self.channels.len()),
            ));
        }
        let mut seen = [false; 256];
        for &ch in &self.channels {
            if std::mem::replace(&mut seen[usize::from(ch)], true) {
                out.push(violation(
                    Rule::DuplicateChannel,
                    format!("channel {ch:#04x} is listed twice"),
                ));
                break;
            }
        }
        check_text(&mut out, Rule::Moniker, &self.moniker, false);
        if !matches!(self.tx_index.as_str(), "" | "on" | "off") {
            out.push(violation(
                Rule::TxIndex,
                format!("{:?} is not \"on\", \"off\" or empty", self.tx_index),
            ));
        }
        check_text(&mut out, Rule::RpcAddress, &self.rpc_address, true);
        out
    }

    /// The transport's check: the claimed ID is the ID of the key the peer
    /// authenticated with (compared as CometBFT does, as lowercase hex text).
    pub fn check_id(&self, authenticated: NodeId) -> Result<(), Violation> {
        let expected = authenticated.to_string();
        if self.id == expected {
            Ok(())
        } else {
            Err(violation(
                Rule::IdMatchesKey,
                format!(
                    "the NodeInfo claims {:?} but the peer authenticated as {expected}",
                    self.id
                ),
            ))
        }
    }

    /// CometBFT's `CompatibleWith`, from this node's side: every rule that
    /// makes `other` incompatible with us (empty when compatible). If we list
    /// no channels, any channels will do, as in CometBFT.
    pub fn compatible_with(&self, other: &NodeInfo) -> Vec<Violation> {
        let mut out = Vec::new();
        if self.protocol_version.block != other.protocol_version.block {
            out.push(violation(
                Rule::BlockVersion,
                format!(
                    "the peer is on block protocol {}, we are on {}",
                    other.protocol_version.block, self.protocol_version.block
                ),
            ));
        }
        if self.network != other.network {
            out.push(violation(
                Rule::Network,
                format!(
                    "the peer is on network {:?}, we are on {:?}",
                    other.network, self.network
                ),
            ));
        }
        if !self.channels.is_empty() && !self.channels.iter().any(|c| other.channels.contains(c)) {
            out.push(violation(
                Rule::CommonChannel,
                format!(
                    "no common channel: ours {}, the peer's {}",
                    hex::encode(&self.channels),
                    hex::encode(&other.channels)
                ),
            ));
        }
        out
    }
}

/// The text rules of `Validate`: `value` must be [`is_ascii_text`], or empty
/// where `may_be_empty`.
fn check_text(out: &mut Vec<Violation>, rule: Rule, value: &str, may_be_empty: bool) {
    if (may_be_empty && value.is_empty()) || is_ascii_text(value) {
        return;
    }
    let non_empty = if may_be_empty { "" } else { "non-empty " };
    out.push(violation(
        rule,
        format!("{value:?} is not {non_empty}printable ASCII with something besides spaces"),
    ));
}

/// CometBFT's `IsASCIIText` and `ASCIITrim(s) != ""`: non-empty, every byte
/// printable ASCII (32 to 126), and not only spaces.
fn is_ascii_text(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (32..=126).contains(&b)) && s.bytes().any(|b| b != b' ')
}

/// CometBFT's `NewNetAddressString(ID@addr)` after the ID: an optional
/// `scheme://`, then Go's `net.SplitHostPort`, a non-empty host (an IP, or a
/// name, which CometBFT would resolve), and a decimal port below 65536.
pub(super) fn check_listen_addr(addr: &str) -> Result<(), String> {
    // `removeProtocolIfDefined`: the part between the first and the second
    // "://".
    let addr = match addr.split("://").nth(1) {
        Some(rest) => rest,
        None => addr,
    };
    let (host, port) = split_host_port(addr)?;
    if host.is_empty() {
        return Err("the host is empty".into());
    }
    if host.parse::<std::net::IpAddr>().is_err()
        && !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err(format!("{host:?} is neither an IP address nor a host name"));
    }
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) || port.parse::<u16>().is_err()
    {
        return Err(format!("{port:?} is not a port number"));
    }
    Ok(())
}

/// Go's `net.SplitHostPort`: `host:port` or `[host]:port`.
pub(super) fn split_host_port(s: &str) -> Result<(&str, &str), String> {
    let colon = s.rfind(':').ok_or("missing port")?;
    // After the host, no '[' and no ']' may follow (Go's `j` and `k`).
    let (host, j, k) = if let Some(inner) = s.strip_prefix('[') {
        let end = inner.find(']').ok_or("missing ']'")? + 1;
        if end + 1 != colon {
            return Err("missing port or too many colons".into());
        }
        (&s[1..end], 1, end + 1)
    } else {
        let host = &s[..colon];
        if host.contains(':') {
            return Err("too many colons".into());
        }
        (host, 0, 0)
    };
    if s[j..].contains('[') || s[k..].contains(']') {
        return Err("unexpected bracket".into());
    }
    Ok((host, &s[colon + 1..]))
}
