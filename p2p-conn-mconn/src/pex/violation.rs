//! What makes CometBFT stop a PEX peer, and for how long it bans it.

use std::time::Duration;

use thiserror::Error;

use super::AddrError;

/// How long CometBFT bans a peer it stops for a PEX violation
/// (`defaultBanTime`, 24 h: the address book's `MarkBad`).
pub const BAN_TIME: Duration = Duration::from_secs(24 * 60 * 60);

/// A PEX message for which CometBFT stops the peer that sent it
/// (`StopPeerForError`) and bans it for [`BAN_TIME`].
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum Violation {
    /// A `PexRequest` sooner than the minimum interval after the previous
    /// one (past the free ones).
    #[error(
        "PEX request {since_last:?} after the previous one, under the minimum of {min_interval:?}"
    )]
    RequestTooSoon {
        /// Time since the previous request that counted.
        since_last: Duration,
        /// The minimum interval.
        min_interval: Duration,
    },
    /// A `PexAddrs` that answers no request of ours.
    #[error("unsolicited PexAddrs")]
    Unsolicited,
    /// A `PexAddrs` holding an address whose IP or port CometBFT cannot
    /// read ([`AddrError::stops_peer`]).
    #[error("PexAddrs with an unreadable address: {0}")]
    BadAddress(AddrError),
}

impl Violation {
    /// How long to ban the peer: [`BAN_TIME`] for every violation, as
    /// CometBFT does.
    pub fn ban_time(&self) -> Duration {
        BAN_TIME
    }
}
