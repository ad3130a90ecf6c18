//! The crawl's table and JSON document.

use std::io::Write;

use p2p_conn::NodeId;
use serde_json::{json, Value};

use crate::visit::report::Status;
use crate::visit::scheduler::{Crawl, Edge, ProbeId, Visit};

/// `—` for what is not known.
const NONE: &str = "-";

fn ms(v: &Visit) -> Option<f64> {
    v.report.as_ref()?.handshake_ms()
}

/// The node ID a visit proved in the handshake, if it got that far (an ID
/// it was only dialed under is `expected_id` in the JSON, not shown as the
/// node's).
fn proven_id(v: &Visit) -> Option<NodeId> {
    v.report.as_ref().and_then(|r| r.node_id)
}

/// The status as the table shows it: one short word or two (the detail is
/// the JSON's `detail`), so that one failed row cannot widen the column.
fn status_text(v: &Visit) -> &'static str {
    v.report.as_ref().map_or("running", |r| r.status.name())
}

/// Which visits are listed, in the table and in `--json` alike.
#[derive(Clone, Copy, Debug, Default)]
pub struct Filter {
    /// `--has-height`: only the nodes whose blocks include it.
    pub has_height: Option<i64>,
}

impl Filter {
    /// Whether `v` is listed.
    pub fn shows(&self, v: &Visit) -> bool {
        match self.has_height {
            None => true,
            Some(h) => v
                .report
                .as_ref()
                .and_then(|r| r.blocks)
                .is_some_and(|b| b.has(h)),
        }
    }

    /// What the filter left, for the end of the output (`None` without
    /// one): `N nodes can serve height H (--has-height)`.
    pub fn note(&self, listed: usize) -> Option<String> {
        let h = self.has_height?;
        Some(format!(
            "{listed} node{} can serve height {h} (--has-height)",
            if listed == 1 { "" } else { "s" }
        ))
    }
}

/// The line on reported addresses left out as not publicly routable,
/// when there are any: what `--allow-unroutable` would follow.
pub fn unroutable_note(crawl: &Crawl) -> Option<String> {
    let n = crawl.unroutable;
    (n > 0).then(|| {
        format!(
            "{} not followed: not publicly routable (--allow-unroutable follows them)",
            crate::output::plural::count(n as u64, "reported address", "reported addresses")
        )
    })
}

/// The table: one row per dial (with a [`Filter`], only the visits it
/// shows), then a summary line.
pub fn table(crawl: &Crawl, filter: Filter) -> String {
    let head = [
        "NODE ID",
        "MONIKER",
        "NETWORK",
        "VERSION",
        "LISTEN ADDR",
        "ADDRESS",
        "STATUS",
        "HS MS",
        "BLOCKS",
        "PEX ADDRS",
    ];
    let mut rows: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    let shown: Vec<&Visit> = crawl.visits.iter().filter(|v| filter.shows(v)).collect();
    // A SNAPSHOTS column when they were asked for (not `--no-snapshots`): how
    // many, and the newest height.
    let asked = crawl
        .visits
        .iter()
        .any(|v| v.report.as_ref().is_some_and(|r| r.snapshots.is_some()));
    if asked {
        rows[0].push("SNAPSHOTS".into());
    }
    for v in &shown {
        let r = v.report.as_ref();
        let info = r.and_then(|r| r.info.as_ref());
        let text = |f: &dyn Fn(&p2p_conn::nodeinfo::NodeInfo) -> &str| {
            info.map(f)
                .filter(|s| !s.is_empty())
                .unwrap_or(NONE)
                .to_string()
        };
        rows.push(vec![
            proven_id(v).map_or(NONE.into(), |id| id.to_string()),
            text(&|i| &i.moniker),
            text(&|i| &i.network),
            text(&|i| &i.version),
            text(&|i| &i.listen_addr),
            v.target.addr.clone(),
            status_text(v).to_string(),
            ms(v).map_or(NONE.into(), |m| format!("{m:.1}")),
            r.and_then(|r| r.blocks)
                .map_or(NONE.into(), |b| format!("{}-{}", b.base, b.height)),
            r.and_then(|r| r.answered)
                .map_or(NONE.into(), |n| n.to_string()),
        ]);
        if asked {
            let cell = match r.and_then(|r| r.snapshots.as_ref()) {
                None => NONE.to_string(),
                Some(list) if list.is_empty() => "0".to_string(),
                Some(list) => format!(
                    "{} (newest {})",
                    list.len(),
                    list.iter().map(|s| s.height).max().unwrap_or(0)
                ),
            };
            rows.last_mut().expect("a row").push(cell);
        }
    }
    let mut out = crate::output::columns::render(&rows);
    let (answered, reachable) = counts(crawl);
    out.push_str(&format!(
        "{} dialed, {reachable} reachable, {answered} answered PEX, {}, {} not dialed (--max-nodes); network {}\n",
        crawl.visits.len(),
        crate::output::plural::count(crawl.reported as u64, "reported address", "reported addresses"),
        crawl.left.len() + crawl.not_queued,
        crawl.network.as_deref().unwrap_or("unknown"),
    ));
    let detailed = crawl
        .visits
        .iter()
        .filter(|v| {
            v.report
                .as_ref()
                .is_some_and(|r| r.status.detail().is_some())
        })
        .count();
    if let Some(note) = unroutable_note(crawl) {
        out.push_str(&format!("{note}\n"));
    }
    if let Some(note) = filter.note(shown.len()) {
        out.push_str(&format!("{note}: the rows above\n"));
    }
    if detailed > 0 {
        out.push_str(&format!(
            "{detailed} row{} with more to say: --json has each status's detail\n",
            if detailed == 1 { "" } else { "s" }
        ));
    }
    out
}

fn counts(crawl: &Crawl) -> (usize, usize) {
    let done = || crawl.visits.iter().filter_map(|v| v.report.as_ref());
    let answered = done().filter(|r| r.answered.is_some()).count();
    let reachable = done().filter(|r| r.status.reachable()).count();
    (answered, reachable)
}

/// One node's record in `--json`: what the dial found, and the addresses
/// its answer held (`reported`: each with the reason when it was not
/// followed). `probe` is the dial's index (dial order).
pub fn node_json(pid: ProbeId, v: &Visit, edges: &[Edge]) -> Value {
    let r = v.report.as_ref();
    let info = r.and_then(|r| r.info.as_ref());
    let reported: Vec<Value> = edges
        .iter()
        .map(|e| {
            json!({
                "id": e.addr.id,
                "ip": e.addr.ip,
                "port": e.addr.port,
                "invalid": e.invalid,
            })
        })
        .collect();
    json!({
        "probe": pid,
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
        "pex_addrs": r.and_then(|r| r.answered),
        "height": r.and_then(|r| r.blocks).map(|b| b.height),
        "snapshots": r.and_then(|r| r.snapshots.as_ref()).map(|list| {
            list.iter()
                .map(|s| json!({
                    "height": s.height,
                    "format": s.format,
                    "chunks": s.chunks,
                    "hash": hex::encode(&s.hash),
                }))
                .collect::<Vec<_>>()
        }),
        "base": r.and_then(|r| r.blocks).map(|b| b.base),
        "ignored_messages": r.map_or(0, |r| r.ignored_messages),
        "reported": reported,
    })
}

/// `--json`, written as the crawl goes: one JSON document whose `nodes`
/// array gets each listed node's record ([`node_json`]; the [`Filter`]
/// says which, as for the table) when its visit ends (in the order visits
/// end), so that what is held in memory does not grow with the answers;
/// the totals (`network`, `dialed`, `reachable`, `answered`, `reported`,
/// `unroutable`, `not_queued`), `not_dialed`, and the filter
/// (`has_height`, null without it) with `listed`, the records in `nodes`,
/// follow the array.
pub struct JsonStream<W: Write> {
    out: W,
    filter: Filter,
    listed: usize,
}

impl<W: Write> JsonStream<W> {
    /// Writes the document's start.
    pub fn start(mut out: W, crawler_id: NodeId, filter: Filter) -> std::io::Result<Self> {
        write!(out, "{{\"crawler_id\":\"{crawler_id}\",\"nodes\":[")?;
        Ok(JsonStream {
            out,
            filter,
            listed: 0,
        })
    }

    /// How many records were written.
    pub fn listed(&self) -> usize {
        self.listed
    }

    /// Writes one node's record, if the filter shows it.
    pub fn node(&mut self, pid: ProbeId, v: &Visit, edges: &[Edge]) -> std::io::Result<()> {
        if !self.filter.shows(v) {
            return Ok(());
        }
        self.listed += 1;
        if self.listed > 1 {
            self.out.write_all(b",")?;
        }
        self.out.write_all(b"\n")?;
        serde_json::to_writer(&mut self.out, &node_json(pid, v, edges))?;
        Ok(())
    }

    /// Writes the totals and the rest, and ends the document.
    pub fn finish(mut self, crawl: &Crawl) -> std::io::Result<W> {
        let (answered, reachable) = counts(crawl);
        let left: Vec<Value> = crawl
            .left
            .iter()
            .map(|t| json!({"address": t.addr, "id": t.id.map(|id| id.to_string()), "depth": t.depth}))
            .collect();
        let tail = json!({
            "network": crawl.network,
            "dialed": crawl.visits.len(),
            "reachable": reachable,
            "answered": answered,
            "reported": crawl.reported,
            "unroutable": crawl.unroutable,
            "not_queued": crawl.not_queued,
            "not_dialed": left,
            "has_height": self.filter.has_height,
            "listed": self.listed,
        });
        // The tail object's members, after the array.
        let tail = tail.to_string();
        write!(self.out, "\n],{}\n", &tail[1..])?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// `--addrbook`: the nodes reached, on the crawl's network, one per node
/// ID (its first address reached), as [`crate::addrbook`] entries, all in
/// the new table (the node that loads the book has not tried them); and
/// the count left out because the address dialed is a host name, not an
/// IP address (a book holds IP addresses).
pub fn addrbook(crawl: &Crawl) -> (Vec<crate::addrbook::BookEntry>, usize) {
    let mut seen = std::collections::HashSet::new();
    let mut skipped = 0;
    let mut entries = Vec::new();
    for v in &crawl.visits {
        let Some(r) = v.report.as_ref() else {
            continue;
        };
        let (Some(id), true) = (r.node_id, r.status.reachable()) else {
            continue;
        };
        if r.status == Status::OtherNetwork || !seen.insert(id) {
            continue;
        }
        let Ok(addr) = v.target.addr.parse::<std::net::SocketAddr>() else {
            skipped += 1;
            continue;
        };
        entries.push(crate::addrbook::BookEntry {
            id,
            addr,
            good: false,
            attempts: 0,
            last_attempt: None,
            last_success: None,
        });
    }
    (entries, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::visit::report::{Blocks, Report, Target};
    use crate::visit::scheduler::fake::{addr_of, opts, run, Fake};
    use crate::visit::scheduler::Options;
    use std::time::Duration;

    /// A crawl of two answering nodes and a dial, made under node 0's ID,
    /// whose handshake failed with a long reason.
    fn crawl() -> (Fake, Crawl) {
        let mut f = Fake::new(2);
        f.link(0, 1);
        let o = Options {
            concurrency: 1,
            timeout: Duration::from_secs(1),
            max_nodes: 10,
            ..opts()
        };
        let seed = Target {
            addr: addr_of(0),
            id: None,
            depth: 0,
        };
        let (mut c, _, _) = run(&f, vec![seed], o);
        c.visits.push(Visit {
            target: Target {
                addr: "127.0.0.1:26657".into(),
                id: Some(f.nodes[0].id),
                depth: 0,
            },
            report: Some(Report::failed(Status::HandshakeFailed(format!(
                "handshake failed: malformed ephemeral-key message: {}",
                "x".repeat(250)
            )))),
        });
        (f, c)
    }

    /// The whole document as `--json` streams it (edges from `c.edges`).
    fn streamed(c: &Crawl, id: NodeId) -> Value {
        let mut out = JsonStream::start(Vec::new(), id, Filter::default()).unwrap();
        for (pid, v) in c.visits.iter().enumerate() {
            let mine: Vec<Edge> = c.edges.iter().filter(|e| e.from == pid).cloned().collect();
            out.node(pid, v, &mine).unwrap();
        }
        let bytes = out.finish(c).unwrap();
        serde_json::from_slice(&bytes).expect("one JSON document")
    }

    /// The streamed document parses, holds every node with what it
    /// reported, and the totals.
    #[test]
    fn the_streamed_json_is_one_document() {
        let (f, c) = crawl();
        let j = streamed(&c, f.nodes[0].id);
        assert_eq!(j["crawler_id"], f.nodes[0].id.to_string());
        let nodes = j["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 3);
        assert_eq!(nodes[0]["probe"], 0);
        assert_eq!(nodes[0]["reported"][0]["id"], f.nodes[1].id.to_string());
        assert_eq!(nodes[0]["reported"][0]["invalid"], Value::Null);
        assert_eq!(j["dialed"], 3);
        assert_eq!(j["reported"], c.reported);
        assert_eq!(j["network"], "chain-a");
        assert_eq!(j["not_dialed"], json!([]));
        // An empty crawl is a document too.
        let empty = Crawl {
            network: None,
            visits: vec![],
            edges: vec![],
            reported: 0,
            left: vec![],
            not_queued: 0,
            unroutable: 0,
        };
        let bytes = JsonStream::start(Vec::new(), f.nodes[0].id, Filter::default())
            .unwrap()
            .finish(&empty)
            .unwrap();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["nodes"], json!([]));
    }

    /// `--has-height`: only the rows of nodes whose blocks include it, and
    /// the heights in the BLOCKS column and the JSON.
    #[test]
    fn has_height_lists_the_nodes_that_can_serve_it() {
        let (f, mut c) = crawl();
        let set = |c: &mut Crawl, i: usize, base, height| {
            c.visits[i].report.as_mut().unwrap().blocks = Some(Blocks { height, base });
        };
        set(&mut c, 0, 1, 500);
        set(&mut c, 1, 300, 520);
        let all = table(&c, Filter::default());
        assert!(all.lines().next().unwrap().contains(" BLOCKS "), "{all}");
        assert!(
            all.contains(" 1-500 ") && all.contains(" 300-520 "),
            "{all}"
        );
        let some = table(
            &c,
            Filter {
                has_height: Some(200),
            },
        );
        let id = |i: usize| f.nodes[i].id.to_string();
        assert!(some.lines().any(|l| l.starts_with(&id(0))), "{some}");
        assert!(!some.lines().any(|l| l.starts_with(&id(1))), "{some}");
        assert!(!some.contains("127.0.0.1:26657"), "{some}");
        assert!(some.contains("1 node can serve height 200"), "{some}");
        assert!(table(
            &c,
            Filter {
                has_height: Some(510)
            }
        )
        .contains("1 node can serve height 510"));
        assert!(table(
            &c,
            Filter {
                has_height: Some(9999)
            }
        )
        .contains("0 nodes can serve"));
        let j = node_json(1, &c.visits[1], &[]);
        assert_eq!(
            (j["base"].clone(), j["height"].clone()),
            (json!(300), json!(520))
        );
        assert!(Blocks { height: 5, base: 0 }.has(1));
        assert!(!Blocks { height: 5, base: 0 }.has(0));
    }

    /// The book has each node reached once, by the ID it proved, in the
    /// file's field names; a failed dial is not in it.
    #[test]
    fn the_addrbook_holds_the_nodes_reached() {
        let (f, c) = crawl();
        let (entries, skipped) = addrbook(&c);
        assert_eq!(skipped, 0);
        let book = crate::addrbook::to_json(&"ab".repeat(24), &entries);
        assert_eq!(book["key"], "ab".repeat(24));
        let addrs = book["addrs"].as_array().unwrap();
        assert_eq!(addrs.len(), 2, "{book:#}");
        for (a, i) in addrs.iter().zip([0, 1]) {
            assert_eq!(a["addr"]["id"], f.nodes[i].id.to_string());
            assert_eq!(a["addr"]["ip"], "127.0.0.1");
            assert_eq!(a["addr"]["port"], 20000 + i);
            assert_eq!(a["src"], a["addr"]);
            assert_eq!(a["bucket_type"], 1);
            assert!(a["buckets"][0].as_u64().unwrap() < 256);
            assert_eq!(a["last_success"], "0001-01-01T00:00:00Z");
        }
    }

    /// With snapshots asked for, a SNAPSHOTS column (count and newest
    /// height, `0` when none came, `-` when not asked) and the JSON list.
    #[test]
    fn snapshots_are_listed_when_asked() {
        let (_, mut c) = crawl();
        assert!(!table(&c, Filter::default()).contains("SNAPSHOTS"));
        let snap = |height| p2p_conn_mconn::statesync::Snapshot {
            height,
            format: 1,
            chunks: 3,
            hash: vec![0xab, 0xcd],
            metadata_len: 0,
        };
        c.visits[0].report.as_mut().unwrap().snapshots = Some(vec![snap(300), snap(200)]);
        c.visits[1].report.as_mut().unwrap().snapshots = Some(vec![]);
        let t = table(&c, Filter::default());
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].ends_with(" SNAPSHOTS"), "{t}");
        assert!(lines[1].ends_with(" 2 (newest 300)"), "{t}");
        assert!(lines[2].ends_with(" 0"), "{t}");
        assert!(lines[3].ends_with(" -"), "{t}");
        let j = node_json(0, &c.visits[0], &[]);
        assert_eq!(
            j["snapshots"][0],
            json!({"height": 300, "format": 1, "chunks": 3, "hash": "abcd"})
        );
        assert_eq!(node_json(1, &c.visits[1], &[])["snapshots"], json!([]));
        assert_eq!(node_json(2, &c.visits[2], &[])["snapshots"], Value::Null);
    }

    #[test]
    fn a_failed_row_is_short_and_claims_no_id() {
        let (f, c) = crawl();
        let t = table(&c, Filter::default());
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("NODE ID ") && lines[0].ends_with("PEX ADDRS"),
            "{t}"
        );
        // Every row within a terminal's width of the header's.
        for l in &lines[..4] {
            assert!(l.len() < 200, "too wide ({}): {l}", l.len());
        }
        let failed = lines
            .iter()
            .find(|l| l.contains("127.0.0.1:26657"))
            .expect("the failed row");
        assert!(failed.starts_with("- "), "{failed}");
        assert!(failed.contains(" handshake failed "), "{failed}");
        assert!(!failed.contains("malformed"), "{failed}");
        // The node's own row carries its ID.
        let id0 = f.nodes[0].id.to_string();
        assert_eq!(
            lines.iter().filter(|l| l.starts_with(&id0)).count(),
            1,
            "{t}"
        );
        assert!(t.contains("1 row with more to say: --json"), "{t}");
        // The JSON keeps the detail and the expected ID, and counts the
        // PEX addresses under their own name.
        let j = streamed(&c, f.nodes[1].id);
        let nodes = j["nodes"].as_array().unwrap();
        let bad = &nodes[2];
        assert_eq!(bad["node_id"], Value::Null);
        assert_eq!(bad["expected_id"], id0.as_str());
        assert!(bad["detail"].as_str().unwrap().contains("malformed"));
        assert_eq!(nodes[0]["pex_addrs"], 1);
        assert!(nodes[0].get("peers_known").is_none());
    }
}
