//! Visiting a node, below the commands that do it: `crawl` (breadth first,
//! through the [`scheduler`]), `check` (each entry of a list once) and
//! `seed` (its book's rounds) all dial, handshake, exchange NodeInfo and
//! ask for addresses through one [`probe`](mod@probe), and read what it
//! found as one [`report::Report`].
//!
//! - [`report`]: what a visit yields (the target, the status, the report).
//! - [`probe`](mod@probe): the one piece of network code, one node per
//!   call.
//! - [`scheduler`]: the crawl's sans-IO scheduler (which address next, the
//!   limits, one visit per node), over CometBFT's PEX rules from
//!   `p2p_conn_mconn::pex`; the crawl command drives it.

pub(crate) mod probe;
pub(crate) mod report;
pub(crate) mod scheduler;
