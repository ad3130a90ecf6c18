//! The crawl's table and JSON document.

use p2p_conn::NodeId;
use serde_json::{json, Value};

use super::scheduler::{Crawl, Visit};

/// `—` for what is not known.
const NONE: &str = "-";

fn ms(v: &Visit) -> Option<f64> {
    v.report
        .as_ref()?
        .handshake
        .map(|d| (d.as_secs_f64() * 1e4).round() / 10.0)
}

/// The node ID to show for a visit: the one that answered, else the one
/// it was dialed under.
fn shown_id(v: &Visit) -> Option<NodeId> {
    v.report.as_ref().and_then(|r| r.node_id).or(v.target.id)
}

/// The status as the table shows it: `ok`, or the name and detail.
fn status_text(v: &Visit) -> String {
    match &v.report {
        None => "running".into(),
        Some(r) => match (r.status.detail(), &r.info) {
            (Some(d), _) => format!("{}: {d}", r.status.name()),
            (None, Some(i)) if r.status == super::scheduler::Status::OtherNetwork => {
                format!("{} ({})", r.status.name(), i.network)
            }
            _ => r.status.name().to_string(),
        },
    }
}

/// The table: one row per dial, then a summary line.
pub fn table(crawl: &Crawl) -> String {
    let head = [
        "NODE ID",
        "MONIKER",
        "NETWORK",
        "VERSION",
        "LISTEN ADDR",
        "ADDRESS",
        "STATUS",
        "HS MS",
        "PEERS",
    ];
    let mut rows: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for v in &crawl.visits {
        let r = v.report.as_ref();
        let info = r.and_then(|r| r.info.as_ref());
        let text = |f: &dyn Fn(&p2p_conn::nodeinfo::NodeInfo) -> &str| {
            info.map(f)
                .filter(|s| !s.is_empty())
                .unwrap_or(NONE)
                .to_string()
        };
        rows.push(vec![
            shown_id(v).map_or(NONE.into(), |id| id.to_string()),
            text(&|i| &i.moniker),
            text(&|i| &i.network),
            text(&|i| &i.version),
            text(&|i| &i.listen_addr),
            v.target.addr.clone(),
            status_text(v),
            ms(v).map_or(NONE.into(), |m| format!("{m:.1}")),
            r.and_then(|r| r.addrs.as_ref())
                .map_or(NONE.into(), |a| a.len().to_string()),
        ]);
    }
    let cols = head.len();
    let width: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == cols {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(
                    ' ',
                    width[c] - cell.chars().count() + 2,
                ));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let (answered, reachable) = counts(crawl);
    out.push_str(&format!(
        "{} dialed, {reachable} reachable, {answered} answered PEX, {} reported addresses, {} not dialed (--max-nodes); network {}\n",
        crawl.visits.len(),
        crawl.edges.len(),
        crawl.left.len(),
        crawl.network.as_deref().unwrap_or("unknown"),
    ));
    out
}

fn counts(crawl: &Crawl) -> (usize, usize) {
    let done = || crawl.visits.iter().filter_map(|v| v.report.as_ref());
    let answered = done().filter(|r| r.addrs.is_some()).count();
    let reachable = done().filter(|r| r.status.reachable()).count();
    (answered, reachable)
}

/// The same as data: one JSON document with the nodes (one per dial), the
/// edges (each reported address, from the node that reported it) and the
/// targets left undialed.
pub fn json(crawl: &Crawl, crawler_id: NodeId) -> Value {
    let nodes: Vec<Value> = crawl
        .visits
        .iter()
        .map(|v| {
            let r = v.report.as_ref();
            let info = r.and_then(|r| r.info.as_ref());
            json!({
                "address": v.target.addr,
                "expected_id": v.target.id.map(|id| id.to_string()),
                "depth": v.target.depth,
                "node_id": r.and_then(|r| r.node_id).map(|id| id.to_string()),
                "status": r.map_or("running", |r| r.status.name()),
                "detail": r.and_then(|r| r.status.detail()),
                "reachable": r.is_some_and(|r| r.status.reachable()),
                "moniker": info.map(|i| &i.moniker),
                "network": info.map(|i| &i.network),
                "version": info.map(|i| &i.version),
                "listen_addr": info.map(|i| &i.listen_addr),
                "channels": info.map(|i| i.channels.iter().map(|c| format!("{c:02x}")).collect::<Vec<_>>()),
                "handshake_ms": ms(v),
                "peers_known": r.and_then(|r| r.addrs.as_ref()).map(Vec::len),
                "ignored_messages": r.map_or(0, |r| r.ignored_messages),
            })
        })
        .collect();
    let edges: Vec<Value> = crawl
        .edges
        .iter()
        .map(|e| {
            let from = &crawl.visits[e.from];
            json!({
                "from": shown_id(from).map(|id| id.to_string()),
                "from_address": from.target.addr,
                "to": e.addr.id,
                "ip": e.addr.ip,
                "port": e.addr.port,
                "invalid": e.invalid,
            })
        })
        .collect();
    let left: Vec<Value> = crawl
        .left
        .iter()
        .map(|t| json!({"address": t.addr, "id": t.id.map(|id| id.to_string()), "depth": t.depth}))
        .collect();
    let (answered, reachable) = counts(crawl);
    json!({
        "crawler_id": crawler_id.to_string(),
        "network": crawl.network,
        "dialed": crawl.visits.len(),
        "reachable": reachable,
        "answered": answered,
        "nodes": nodes,
        "edges": edges,
        "not_dialed": left,
    })
}
