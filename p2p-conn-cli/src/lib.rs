//! `p2p-conn`: a netcat for CometBFT secret connections, key tools, a probe,
//! a crawler, a list checker, a seed node and a remote signer. `main.rs`
//! calls [`run`]; the benchmark lab (`p2p-conn-lab`) reuses the layers that
//! are public here.
//!
//! - [`commands`]: one module per command (`keygen`, `id`, `listen` and
//!   `dial` in `netcat`, `probe`, `check`, `crawl`, `seed`, `signer`,
//!   `state`, `threshold`) and the command line; no command uses another.
//! - Below them, what the commands share: [`visit`] (visiting a node: the
//!   probe `crawl`, `check` and `seed` dial through, what it reports, the
//!   crawl's scheduler), [`conn`] (the connection flags, the dial helper),
//!   [`nodeinfo_step`] (the NodeInfo exchange of `listen`, `dial` and
//!   `probe`), [`release_line`], [`addrbook`] (CometBFT's
//!   `addrbook.json`), [`inbound`] (who an inbound listener keeps: `seed`,
//!   `listen`, `/metrics`), [`exporter`] (every
//!   command's metrics, through the `metrics` facade), [`metrics_http`]
//!   (serving them at `/metrics`), [`private_file`] (the permissions a
//!   key or state file must have), [`output`] (tables,
//!   SVG text), [`wall_clock`], [`error`] (the one error, [`error::CliError`],
//!   and how failures are worded) and [`exit`] (exit codes by stage).

// The crate's docs are read with `--document-private-items` (stage `docs`):
// its public items are there for the lab only, and their docs link the
// commands and layers they serve.
#![allow(rustdoc::private_intra_doc_links)]

mod addrbook;
mod commands;
pub mod conn;
pub mod error;
mod exit;
mod exporter;
mod inbound;
mod metrics_http;
mod nodeinfo_step;
pub mod output;
mod private_file;
mod release_line;
mod visit;
pub mod wall_clock;

pub use commands::run;

/// `-v`: p2p-conn's `tracing` events at debug level and above on stderr
/// (handshakes, closes, queue overflows; see `docs/profiling.md`), for
/// `p2p-conn` and `p2p-conn-lab` alike.
pub fn show_tracing() {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let only_ours = Targets::new().with_target("p2p_conn", LevelFilter::DEBUG);
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(only_ours),
        )
        .try_init();
}
