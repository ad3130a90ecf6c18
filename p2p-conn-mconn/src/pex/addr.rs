//! Address validation: what CometBFT refuses in a received `NetAddress`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use p2p_conn::NodeId;
use thiserror::Error;

use super::NetAddress;

/// Whether an address must be publicly routable to be accepted: CometBFT's
/// `addr_book_strict` (the address book's `routabilityStrict`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum AddrPolicy {
    /// Refuse addresses that are not publicly routable
    /// ([`AddrError::Unroutable`]): CometBFT's default,
    /// `addr_book_strict = true`.
    #[default]
    Strict,
    /// Also accept private, loopback, link-local, unique-local and ORCHID
    /// addresses, as a node with `addr_book_strict = false` does (local and
    /// private test networks).
    AcceptUnroutable,
}

/// Why a received address is refused. The first two make CometBFT refuse
/// the whole `PexAddrs` and stop the peer that sent it
/// ([`stops_peer`](Self::stops_peer)); the others only make it skip that
/// address.
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum AddrError {
    /// The IP field is not an IP address (Go's `net.ParseIP` fails: empty,
    /// a host name, leading zeros, a zone, brackets, spaces).
    #[error("IP {0:?} is not an IP address")]
    NotAnIp(String),
    /// The port does not fit 16 bits.
    #[error("port {0} is over 65535")]
    PortOutOfRange(u32),
    /// The ID field is empty.
    #[error("no ID")]
    NoId,
    /// The ID is not 40 hex digits (20 bytes; either case, as Go's
    /// `hex.DecodeString` takes).
    #[error("ID {0:?} is not 40 hex digits")]
    BadId(String),
    /// The IP is unspecified (`0.0.0.0`, `::`, `::ffff:0.0.0.0`).
    #[error("IP {0} is unspecified")]
    Unspecified(IpAddr),
    /// The IP is the IPv4 broadcast address `255.255.255.255`.
    #[error("IP {0} is the broadcast address")]
    Broadcast(IpAddr),
    /// The IP is in the IPv6 documentation range `2001:db8::/32`
    /// (RFC 3849).
    #[error("IP {0} is a documentation address (2001:db8::/32)")]
    Documentation(IpAddr),
    /// The port is 0. CometBFT's `NetAddress.Valid` does not check the
    /// port, so a node stores such an address (and fails to dial it); this
    /// crate refuses it, since it cannot be dialed.
    #[error("port 0")]
    ZeroPort,
    /// The IP is not publicly routable (refused under
    /// [`AddrPolicy::Strict`] only).
    #[error("IP {ip} is not routable ({range})")]
    Unroutable {
        /// The IP (an IPv4-mapped IPv6 address as its IPv4 address).
        ip: IpAddr,
        /// The range it is in, e.g. `10.0.0.0/8, private (RFC 1918)`.
        range: &'static str,
    },
}

impl AddrError {
    /// Whether CometBFT refuses the whole message for this, stops the peer
    /// that sent it and bans it ([`NotAnIp`](Self::NotAnIp),
    /// [`PortOutOfRange`](Self::PortOutOfRange)); otherwise it only skips
    /// the address.
    pub fn stops_peer(&self) -> bool {
        matches!(self, AddrError::NotAnIp(_) | AddrError::PortOutOfRange(_))
    }
}

/// An address that passed [`NetAddress::validate`]: a node ID and where to
/// dial it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PeerAddr {
    id: NodeId,
    addr: SocketAddr,
}

impl PeerAddr {
    /// The node ID.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The IP and port (an IPv4-mapped IPv6 address as its IPv4 address,
    /// as CometBFT prints and dials it).
    pub fn socket_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether the IP is publicly routable (always, under
    /// [`AddrPolicy::Strict`]).
    pub fn is_routable(&self) -> bool {
        unroutable_range(self.addr.ip()).is_none()
    }
}

impl std::fmt::Display for PeerAddr {
    /// `ID@IP:PORT`, CometBFT's form.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.id, self.addr)
    }
}

impl std::fmt::Display for NetAddress {
    /// CometBFT's `NetAddress.String()`: `ID@IP:PORT`, without `ID@` when
    /// the ID is empty; the IP as Go prints it (`net.JoinHostPort`: an IPv6
    /// address in brackets, an IPv4-mapped one as IPv4). The fields are
    /// printed as received, unchecked: an IP that does not parse as it
    /// came (in brackets if it holds a colon), the port as the number sent.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.id.is_empty() {
            write!(f, "{}@", self.id)?;
        }
        match parse_ip(&self.ip) {
            Ok(IpAddr::V6(v6)) => write!(f, "[{v6}]:{}", self.port),
            Ok(ip) => write!(f, "{ip}:{}", self.port),
            Err(_) if self.ip.contains(':') => write!(f, "[{}]:{}", self.ip, self.port),
            Err(_) => write!(f, "{}:{}", self.ip, self.port),
        }
    }
}

impl NetAddress {
    /// Checks the address as CometBFT's PEX reactor and address book do
    /// before storing it, in the same order: the IP and port first (what
    /// makes the whole message refused), then the ID and the IP's kind, then
    /// the port 0 this crate adds, then routability under `policy`.
    pub fn validate(&self, policy: AddrPolicy) -> Result<PeerAddr, AddrError> {
        let ip = parse_ip(&self.ip)?;
        let port = u16::try_from(self.port).map_err(|_| AddrError::PortOutOfRange(self.port))?;
        if self.id.is_empty() {
            return Err(AddrError::NoId);
        }
        let id: NodeId = self
            .id
            .parse()
            .map_err(|_| AddrError::BadId(self.id.clone()))?;
        if ip.is_unspecified() {
            return Err(AddrError::Unspecified(ip));
        }
        if ip == IpAddr::V4(Ipv4Addr::BROADCAST) {
            return Err(AddrError::Broadcast(ip));
        }
        if let IpAddr::V6(v6) = ip {
            if in_v6(v6, [0x2001, 0x0db8, 0, 0, 0, 0, 0, 0], 32) {
                return Err(AddrError::Documentation(ip));
            }
        }
        if port == 0 {
            return Err(AddrError::ZeroPort);
        }
        if policy == AddrPolicy::Strict {
            if let Some(range) = unroutable_range(ip) {
                return Err(AddrError::Unroutable { ip, range });
            }
        }
        Ok(PeerAddr {
            id,
            addr: SocketAddr::new(ip, port),
        })
    }
}

/// The first address of a `PexAddrs` for which CometBFT refuses the whole
/// message and stops the peer ([`AddrError::stops_peer`]), if any.
pub fn check_message(addrs: &[NetAddress]) -> Result<(), AddrError> {
    for a in addrs {
        parse_ip(&a.ip)?;
        if a.port > u32::from(u16::MAX) {
            return Err(AddrError::PortOutOfRange(a.port));
        }
    }
    Ok(())
}

/// The IP as Go's `net.ParseIP` reads it, an IPv4-mapped IPv6 address as
/// IPv4 (Go compares, prints and classifies it as IPv4).
fn parse_ip(text: &str) -> Result<IpAddr, AddrError> {
    let ip: IpAddr = text
        .parse()
        .map_err(|_| AddrError::NotAnIp(text.to_string()))?;
    Ok(match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    })
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn in_v6(ip: Ipv6Addr, net: [u16; 8], bits: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
    u128::from(ip) & mask == u128::from(Ipv6Addr::from(net)) & mask
}

/// The range that makes `ip` unroutable, by CometBFT's
/// `NetAddress.Routable` (`p2p/netaddress.go`): RFC 1918, RFC 3927,
/// RFC 4862, RFC 4193, RFC 4843 and `Local` (loopback, `0.0.0.0/8`).
fn unroutable_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            const V4: [([u8; 4], u32, &str); 6] = [
                ([10, 0, 0, 0], 8, "10.0.0.0/8, private (RFC 1918)"),
                ([172, 16, 0, 0], 12, "172.16.0.0/12, private (RFC 1918)"),
                ([192, 168, 0, 0], 16, "192.168.0.0/16, private (RFC 1918)"),
                (
                    [169, 254, 0, 0],
                    16,
                    "169.254.0.0/16, link-local (RFC 3927)",
                ),
                ([127, 0, 0, 0], 8, "127.0.0.0/8, loopback"),
                ([0, 0, 0, 0], 8, "0.0.0.0/8, this network"),
            ];
            V4.iter()
                .find(|(net, bits, _)| in_v4(v4, *net, *bits))
                .map(|r| r.2)
        }
        IpAddr::V6(v6) => {
            const V6: [([u16; 8], u32, &str); 4] = [
                // CometBFT's RFC 4862 range is fe80::/64, not all of fe80::/10.
                (
                    [0xfe80, 0, 0, 0, 0, 0, 0, 0],
                    64,
                    "fe80::/64, link-local (RFC 4862)",
                ),
                (
                    [0xfc00, 0, 0, 0, 0, 0, 0, 0],
                    7,
                    "fc00::/7, unique local (RFC 4193)",
                ),
                (
                    [0x2001, 0x0010, 0, 0, 0, 0, 0, 0],
                    28,
                    "2001:10::/28, ORCHID (RFC 4843)",
                ),
                ([0, 0, 0, 0, 0, 0, 0, 1], 128, "::1, loopback"),
            ];
            V6.iter()
                .find(|(net, bits, _)| in_v6(v6, *net, *bits))
                .map(|r| r.2)
        }
    }
}
