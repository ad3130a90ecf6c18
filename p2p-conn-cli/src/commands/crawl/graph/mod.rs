//! `--graph`: who knows whom, drawn by p2p-conn itself, as DOT (for
//! Graphviz, if one has it) or as SVG with a layout of our own.
//!
//! One vertex per node, keyed by the ID the node proved in the handshake:
//! every node reached (once, however many of its addresses were dialed,
//! drawn by its best visit), every dial that proved no ID (its own box,
//! titled with its address: a wrong port given with a node's ID does not
//! take that node's box), and every reported ID never dialed. One line
//! from each node to each valid address it reported, to the node that
//! proved that ID, else to a failed dial made under it, else to the
//! not-dialed box; two nodes that report each other share one line with a
//! head at each end. Invalid addresses are counted in the JSON, not drawn.
//!
//! The SVG layout is breadth-first layers: columns by depth (seeds at the
//! left), the nodes of a depth stacked in dial order and wrapped into more
//! columns when a depth holds more than about the square root of the
//! count, so that the picture is wider than tall. Lines between columns
//! are straight; one that would run through the boxes in between (along a
//! row or a column) bends around them through the gap beside. A caption
//! above names the network, the time and the crawler. Styles: answered
//! PEX (green), reachable but not asked or no answer (yellow), another
//! network (orange), unreachable (grey, dashed), never dialed (white,
//! dotted).

use std::collections::HashMap;
use std::fmt::Write;

use crate::visit::report::{Report, Status};
use crate::visit::scheduler::Crawl;

/// How a vertex is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Answered,
    Reachable,
    OtherNetwork,
    Unreachable,
    NotDialed,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Answered => "answered PEX",
            Kind::Reachable => "reachable, no addresses",
            Kind::OtherNetwork => "other network",
            Kind::Unreachable => "unreachable",
            Kind::NotDialed => "not dialed",
        }
    }

    /// (fill, stroke, SVG dash pattern, DOT style).
    fn style(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            Kind::Answered => ("#d5f5d5", "#2a8a2a", "", "filled"),
            Kind::Reachable => ("#fff4b3", "#a08000", "", "filled"),
            Kind::OtherNetwork => ("#ffdcae", "#d06000", "", "filled"),
            Kind::Unreachable => ("#eeeeee", "#888888", "6,3", "filled,dashed"),
            Kind::NotDialed => ("#ffffff", "#888888", "2,3", "dotted"),
        }
    }

    const ALL: [Kind; 5] = [
        Kind::Answered,
        Kind::Reachable,
        Kind::OtherNetwork,
        Kind::Unreachable,
        Kind::NotDialed,
    ];
}

/// A vertex.
#[derive(Clone, Debug)]
pub struct Vertex {
    /// The tooltip, which names what it stands for: the node ID; for a dial
    /// that proved none, the address (and the ID it was dialed as).
    pub tip: String,
    /// First line: the moniker, else the address.
    pub title: String,
    /// Second line: the short ID and the status.
    pub sub: String,
    pub kind: Kind,
    pub depth: u32,
}

/// A line between two vertices (indexes into [`Graph::vertices`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edge {
    pub from: usize,
    pub to: usize,
    /// `to` reported `from` too: one line, a head at each end.
    pub both: bool,
}

/// The picture's data.
#[derive(Clone, Debug)]
pub struct Graph {
    pub vertices: Vec<Vertex>,
    /// Deduplicated: at most one per pair of vertices.
    pub edges: Vec<Edge>,
    /// A line above the picture (the network, when, by whom); may be empty.
    pub caption: String,
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

impl Graph {
    /// The graph of a crawl; see the module docs for what is a vertex.
    pub fn of(crawl: &Crawl) -> Graph {
        let mut vertices: Vec<Vertex> = Vec::new();
        // Node ID (or, for a dial that authenticated nobody, the address
        // dialed) -> vertex.
        let mut index: HashMap<String, usize> = HashMap::new();
        // The vertex of each visit.
        let mut of_visit: Vec<Option<usize>> = vec![None; crawl.visits.len()];
        // Three passes: the nodes that answered PEX, then the other dials
        // that proved an ID, keyed by that ID; then the dials that proved
        // none, keyed by their address. So a failed dial given with a
        // node's ID (its RPC port, say) cannot take that node's box, and a
        // node reached twice is drawn by its best visit, whatever the dial
        // order.
        let phase = |r: Option<&Report>| match r {
            Some(r) if r.node_id.is_some() && r.status == Status::Ok => 0,
            Some(r) if r.node_id.is_some() => 1,
            _ => 2,
        };
        for pass in 0..3 {
            for (i, v) in crawl.visits.iter().enumerate() {
                let r = v.report.as_ref();
                if phase(r) != pass {
                    continue;
                }
                let proven = r.and_then(|r| r.node_id);
                let key = proven.map_or_else(|| v.target.addr.clone(), |id| id.to_string());
                if let Some(&at) = index.get(&key) {
                    // A second address of a node already drawn.
                    of_visit[i] = Some(at);
                    continue;
                }
                let (kind, status) = match r {
                    None => (Kind::Unreachable, "running".to_string()),
                    Some(r) => (
                        match &r.status {
                            Status::Ok => Kind::Answered,
                            Status::OtherNetwork => Kind::OtherNetwork,
                            s if s.reachable() => Kind::Reachable,
                            _ => Kind::Unreachable,
                        },
                        match (&r.status, &r.info) {
                            (Status::OtherNetwork, Some(i)) => format!("network {}", i.network),
                            (Status::Ok, _) => {
                                let n = r.answered.unwrap_or(0);
                                let blocks = r
                                    .blocks
                                    .map_or(String::new(), |b| format!(" · h {}", b.height));
                                let snaps = match r.snapshots.as_ref().map(Vec::len) {
                                    Some(k) if k > 0 => format!(" · {k} snap"),
                                    _ => String::new(),
                                };
                                format!(
                                    "{n} PEX addr{}{blocks}{snaps}",
                                    if n == 1 { "" } else { "s" }
                                )
                            }
                            (s, _) => s.name().to_string(),
                        },
                    ),
                };
                let title = r
                    .and_then(|r| r.info.as_ref())
                    .map(|i| i.moniker.clone())
                    .filter(|m| !m.is_empty())
                    .unwrap_or_else(|| v.target.addr.clone());
                // The short ID when one was proven; an address box says
                // only how the dial ended (its title is the address, whole).
                let sub = match proven {
                    Some(id) => format!("{} · {status}", short(&id.to_string())),
                    None => status,
                };
                let tip = match (proven, v.target.id) {
                    (Some(id), _) => id.to_string(),
                    (None, Some(id)) => format!("{} (dialed as {id}, no ID proven)", v.target.addr),
                    (None, None) => v.target.addr.clone(),
                };
                index.insert(key, vertices.len());
                of_visit[i] = Some(vertices.len());
                vertices.push(Vertex {
                    tip,
                    title,
                    sub,
                    kind,
                    depth: v.target.depth,
                });
            }
        }
        // A reported ID that no dial proved points at the box of a failed
        // dial made under that ID, if there is one.
        for (i, v) in crawl.visits.iter().enumerate() {
            if let (Some(id), Some(at)) = (v.target.id, of_visit[i]) {
                index.entry(id.to_string()).or_insert(at);
            }
        }
        let mut arrows: Vec<(usize, usize)> = Vec::new();
        for e in crawl.edges.iter().filter(|e| e.invalid.is_none()) {
            let Some(from) = of_visit[e.from] else {
                continue;
            };
            let to = match index.get(&e.addr.id) {
                Some(&to) => to,
                None => {
                    index.insert(e.addr.id.clone(), vertices.len());
                    vertices.push(Vertex {
                        tip: e.addr.id.clone(),
                        title: format!("{}:{}", e.addr.ip, e.addr.port),
                        sub: format!("{} · not dialed", short(&e.addr.id)),
                        kind: Kind::NotDialed,
                        depth: vertices[from].depth + 1,
                    });
                    vertices.len() - 1
                }
            };
            if from != to && !arrows.contains(&(from, to)) {
                arrows.push((from, to));
            }
        }
        // A pair that know each other is one line with two heads.
        let mut edges: Vec<Edge> = Vec::new();
        for &(a, b) in &arrows {
            if let Some(e) = edges.iter_mut().find(|e| e.from == b && e.to == a) {
                e.both = true;
            } else {
                edges.push(Edge {
                    from: a,
                    to: b,
                    both: false,
                });
            }
        }
        Graph {
            vertices,
            edges,
            caption: String::new(),
        }
    }

    /// The same with a caption (drawn above the picture).
    pub fn with_caption(mut self, caption: String) -> Graph {
        self.caption = caption;
        self
    }

    /// Graphviz DOT.
    pub fn dot(&self) -> String {
        let mut out = String::from(
            "digraph crawl {\n  rankdir=LR;\n  node [shape=box, style=filled, fontname=\"sans-serif\"];\n",
        );
        for (i, v) in self.vertices.iter().enumerate() {
            let (fill, stroke, _, style) = v.kind.style();
            let _ = writeln!(
                out,
                "  n{i} [label=\"{}\\n{}\", fillcolor=\"{fill}\", color=\"{stroke}\", style=\"{style}\", tooltip=\"{}\"];",
                dot_escape(&v.title),
                dot_escape(&v.sub),
                dot_escape(&v.tip),
            );
        }
        for e in &self.edges {
            let both = if e.both { " [dir=both]" } else { "" };
            let _ = writeln!(out, "  n{} -> n{}{both};", e.from, e.to);
        }
        if !self.caption.is_empty() {
            let _ = writeln!(
                out,
                "  labelloc=t;\n  label=\"{}\";",
                dot_escape(&self.caption)
            );
        }
        out.push_str("}\n");
        out
    }
}

fn dot_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| match c {
            '"' => vec!['\\', '"'],
            '\\' => vec!['\\', '\\'],
            c if c.is_control() => vec![' '],
            c => vec![c],
        })
        .collect()
}

mod svg;

#[cfg(test)]
mod tests;
