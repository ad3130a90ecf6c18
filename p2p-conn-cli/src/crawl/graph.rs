//! `--graph`: who knows whom, drawn by p2p-conn itself, as DOT (for
//! Graphviz, if one has it) or as SVG with a layout of our own.
//!
//! One vertex per node: every dial (keyed by the ID it was dialed under,
//! else the ID that answered, else its address; a second address of a node
//! already drawn is left out) and every reported ID that was never dialed.
//! One arrow from each node to each valid address it reported (invalid
//! ones are counted in the JSON, not drawn).
//!
//! The SVG layout is breadth-first layers: a column per depth (seeds at the
//! left), the nodes of a depth stacked in dial order. Arrows are quadratic
//! curves bent to one side, so that arrows within a column and the two
//! directions of a pair stay apart. Styles: answered PEX (green),
//! reachable but not asked or no answer (yellow), another network
//! (orange), unreachable (grey, dashed), never dialed (white, dotted).

use std::collections::HashMap;
use std::fmt::Write;

use super::scheduler::{Crawl, Status};

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
    /// The node ID (or address) it stands for.
    pub key: String,
    /// First line: the moniker, else the address.
    pub title: String,
    /// Second line: the short ID and the status.
    pub sub: String,
    pub kind: Kind,
    pub depth: u32,
}

/// The picture's data.
#[derive(Clone, Debug)]
pub struct Graph {
    pub vertices: Vec<Vertex>,
    /// Indexes into `vertices`, deduplicated.
    pub edges: Vec<(usize, usize)>,
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

impl Graph {
    /// The graph of a crawl.
    pub fn of(crawl: &Crawl) -> Graph {
        let mut vertices: Vec<Vertex> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        // The vertex of each visit (None: a duplicate left out).
        let mut of_visit: Vec<Option<usize>> = Vec::new();
        for v in &crawl.visits {
            let r = v.report.as_ref();
            let key = v
                .target
                .id
                .or(r.and_then(|r| r.node_id))
                .map_or_else(|| v.target.addr.clone(), |id| id.to_string());
            if index.contains_key(&key) || r.is_some_and(|r| r.status == Status::Duplicate) {
                of_visit.push(index.get(&key).copied());
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
                            let n = r.addrs.as_ref().map_or(0, Vec::len);
                            format!("{n} peer{}", if n == 1 { "" } else { "s" })
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
            index.insert(key.clone(), vertices.len());
            of_visit.push(Some(vertices.len()));
            vertices.push(Vertex {
                sub: format!("{} · {status}", short(&key)),
                key,
                title,
                kind,
                depth: v.target.depth,
            });
        }
        let mut edges = Vec::new();
        for e in crawl.edges.iter().filter(|e| e.invalid.is_none()) {
            let Some(from) = of_visit[e.from] else {
                continue;
            };
            let to = match index.get(&e.addr.id) {
                Some(&to) => to,
                None => {
                    index.insert(e.addr.id.clone(), vertices.len());
                    vertices.push(Vertex {
                        key: e.addr.id.clone(),
                        title: format!("{}:{}", e.addr.ip, e.addr.port),
                        sub: format!("{} · not dialed", short(&e.addr.id)),
                        kind: Kind::NotDialed,
                        depth: vertices[from].depth + 1,
                    });
                    vertices.len() - 1
                }
            };
            if from != to && !edges.contains(&(from, to)) {
                edges.push((from, to));
            }
        }
        Graph { vertices, edges }
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
                dot_escape(&v.key),
            );
        }
        for (a, b) in &self.edges {
            let _ = writeln!(out, "  n{a} -> n{b};");
        }
        out.push_str("}\n");
        out
    }

    /// Positions: (x, y) of each vertex's centre, and the picture's size.
    fn layout(&self) -> (Vec<(f64, f64)>, f64, f64) {
        let mut rows: HashMap<u32, usize> = HashMap::new();
        let mut depths: Vec<u32> = self.vertices.iter().map(|v| v.depth).collect();
        depths.sort_unstable();
        depths.dedup();
        let col: HashMap<u32, usize> = depths.iter().enumerate().map(|(i, &d)| (d, i)).collect();
        let pos: Vec<(f64, f64)> = self
            .vertices
            .iter()
            .map(|v| {
                let row = rows.entry(v.depth).or_default();
                let p = (
                    MARGIN + BOX_W / 2.0 + col[&v.depth] as f64 * COL_W,
                    MARGIN + BOX_H / 2.0 + *row as f64 * ROW_H,
                );
                *row += 1;
                p
            })
            .collect();
        let most_rows = rows.values().copied().max().unwrap_or(0).max(1);
        let w = 2.0 * MARGIN + BOX_W + (depths.len().max(1) - 1) as f64 * COL_W;
        let h = 2.0 * MARGIN + BOX_H + (most_rows - 1) as f64 * ROW_H + LEGEND_H;
        (pos, w.max(LEGEND_W), h)
    }

    /// An SVG picture, laid out as the module docs say.
    pub fn svg(&self) -> String {
        let (pos, w, h) = self.layout();
        // Each arrow: its ends on the boxes' borders and its control point,
        // bent to the left of the direction of travel (so the two
        // directions of a pair stay apart). The picture grows to hold the
        // bends: a quadratic curve stays within its control polygon.
        let curves: Vec<[(f64, f64); 3]> = self
            .edges
            .iter()
            .map(|&(a, b)| {
                let p1 = border(pos[a], pos[b]);
                let p2 = border(pos[b], pos[a]);
                let (dx, dy) = (p2.0 - p1.0, p2.1 - p1.1);
                let c = (
                    (p1.0 + p2.0) / 2.0 - dy * 0.15,
                    (p1.1 + p2.1) / 2.0 + dx * 0.15,
                );
                [p1, c, p2]
            })
            .collect();
        let top = curves.iter().map(|c| c[1].1).fold(0.0f64, f64::min);
        let bottom = curves.iter().map(|c| c[1].1).fold(h - LEGEND_H, f64::max);
        let (shift, h) = (-top, h - top + (bottom - (h - LEGEND_H)));
        let mut out = String::new();
        let _ = writeln!(
            out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" font-family=\"sans-serif\" font-size=\"12\">"
        );
        out.push_str(
            "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#555\"/></marker></defs>\n",
        );
        let _ = writeln!(
            out,
            "<rect x=\"0\" y=\"0\" width=\"{w:.0}\" height=\"{h:.0}\" fill=\"white\"/>\n<g transform=\"translate(0 {shift:.1})\">"
        );
        out.push_str("<g id=\"edges\" fill=\"none\" stroke=\"#555\" stroke-width=\"1.2\">\n");
        for (&(a, b), [(x1, y1), (cx, cy), (x2, y2)]) in self.edges.iter().zip(&curves) {
            let _ = writeln!(
                out,
                "<path d=\"M {x1:.1} {y1:.1} Q {cx:.1} {cy:.1} {x2:.1} {y2:.1}\" marker-end=\"url(#arrow)\"><title>{} knows {}</title></path>",
                xml_escape(&self.vertices[a].title),
                xml_escape(&self.vertices[b].title),
            );
        }
        out.push_str("</g>\n<g id=\"nodes\">\n");
        for (v, &(x, y)) in self.vertices.iter().zip(&pos) {
            node_svg(&mut out, v.kind, x, y, &v.title, &v.sub, &v.key);
        }
        out.push_str("</g>\n</g>\n<g id=\"legend\">\n");
        let ly = h - LEGEND_H + 20.0;
        for (i, k) in Kind::ALL.iter().enumerate() {
            let x = MARGIN + i as f64 * LEGEND_STEP;
            let (fill, stroke, dash, _) = k.style();
            let _ = writeln!(
                out,
                "<rect x=\"{x:.0}\" y=\"{ly:.0}\" width=\"14\" height=\"14\" fill=\"{fill}\" stroke=\"{stroke}\"{}/><text x=\"{:.0}\" y=\"{:.0}\">{}</text>",
                dash_attr(dash),
                x + 20.0,
                ly + 12.0,
                k.name()
            );
        }
        out.push_str("</g>\n</svg>\n");
        out
    }
}

const MARGIN: f64 = 30.0;
const BOX_W: f64 = 190.0;
const BOX_H: f64 = 44.0;
const COL_W: f64 = 280.0;
const ROW_H: f64 = 80.0;
const LEGEND_H: f64 = 50.0;
const LEGEND_STEP: f64 = 185.0;
const LEGEND_W: f64 = 2.0 * MARGIN + 5.0 * LEGEND_STEP;

fn dash_attr(dash: &str) -> String {
    if dash.is_empty() {
        String::new()
    } else {
        format!(" stroke-dasharray=\"{dash}\"")
    }
}

fn node_svg(out: &mut String, kind: Kind, x: f64, y: f64, title: &str, sub: &str, key: &str) {
    let (fill, stroke, dash, _) = kind.style();
    let _ = writeln!(
        out,
        "<g><title>{}</title><rect x=\"{:.1}\" y=\"{:.1}\" width=\"{BOX_W:.0}\" height=\"{BOX_H:.0}\" rx=\"6\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"1.5\"{}/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-weight=\"bold\">{}</text><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\" fill=\"#333\">{}</text></g>",
        xml_escape(key),
        x - BOX_W / 2.0,
        y - BOX_H / 2.0,
        dash_attr(dash),
        y - 3.0,
        xml_escape(&clip(title, 28)),
        y + 13.0,
        xml_escape(&clip(sub, 34)),
    );
}

/// Where the segment from `a`'s centre towards `b`'s leaves `a`'s box.
fn border(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    if dx == 0.0 && dy == 0.0 {
        return a;
    }
    let tx = if dx == 0.0 {
        f64::INFINITY
    } else {
        (BOX_W / 2.0) / dx.abs()
    };
    let ty = if dy == 0.0 {
        f64::INFINITY
    } else {
        (BOX_H / 2.0) / dy.abs()
    };
    let t = tx.min(ty);
    (a.0 + dx * t, a.1 + dy * t)
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut c: String = s.chars().take(n - 1).collect();
        c.push('…');
        c
    }
}

/// Text safe in XML content and attribute values; control characters
/// (which XML 1.0 forbids) become U+FFFD.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crawl::scheduler::tests::{addr_of, run, Fake};
    use crate::crawl::scheduler::Options;
    use p2p_conn_mconn::pex::AddrPolicy;
    use std::time::Duration;

    fn crawl() -> (Fake, Crawl) {
        let mut f = Fake::new(6);
        f.link(0, 1);
        f.link(1, 2);
        f.link(2, 3);
        f.link(1, 4);
        f.link(4, 5);
        f.nodes[3].network = "chain-b".into();
        f.nodes[5].hangs = true;
        // Hostile text in a moniker.
        f.nodes[2].moniker = "<n2 & \"friends\">\u{1}".into();
        let o = Options {
            concurrency: 2,
            timeout: Duration::from_secs(1),
            max_nodes: 100,
            network: None,
            addr_policy: AddrPolicy::AcceptUnroutable,
        };
        let (c, _, _) = run(&f, vec![f.seed(0)], o);
        (f, c)
    }

    #[test]
    fn svg_is_well_formed_and_has_every_node() {
        let (f, c) = crawl();
        let g = Graph::of(&c);
        assert_eq!(g.vertices.len(), 6);
        let svg = g.svg();
        let mut reader = quick_xml::Reader::from_str(&svg);
        let mut depth = 0i32;
        let mut rects = 0;
        let mut paths = 0;
        let mut titles = Vec::new();
        let mut in_title = false;
        loop {
            match reader.read_event() {
                Ok(quick_xml::events::Event::Start(e)) => {
                    depth += 1;
                    in_title = e.name().as_ref() == b"title";
                    if e.name().as_ref() == b"path" {
                        paths += 1;
                    }
                }
                Ok(quick_xml::events::Event::Empty(e)) => {
                    if e.name().as_ref() == b"rect" {
                        rects += 1;
                    }
                }
                Ok(quick_xml::events::Event::Text(t)) if in_title => {
                    titles.push(t.unescape().expect("escaped text").into_owned());
                }
                Ok(quick_xml::events::Event::End(_)) => {
                    depth -= 1;
                    in_title = false;
                }
                Ok(quick_xml::events::Event::Eof) => break,
                Ok(_) => {}
                Err(e) => panic!(
                    "not well-formed at {}: {e}\n{svg}",
                    reader.buffer_position()
                ),
            }
        }
        assert_eq!(depth, 0, "unbalanced");
        // Background, 6 nodes, 5 legend boxes.
        assert_eq!(rects, 1 + 6 + 5);
        // Every node by its ID in a title; each link both ways, but the
        // other-network node (3) and the hanging one (5) reported nothing:
        // 0-1, 1-2, 1-4 both ways, 2->3, 4->5.
        for n in &f.nodes {
            assert!(titles.contains(&n.id.to_string()), "{} missing", n.id);
        }
        assert_eq!(g.edges.len(), 8);
        // One path element per edge (the arrow marker's is empty).
        assert_eq!(paths, 8);
        assert!(titles.iter().any(|t| t.contains("<n2 & \"friends\">")));
        let kinds: Vec<Kind> = g.vertices.iter().map(|v| v.kind).collect();
        let kind_of = |i: usize| {
            g.vertices
                .iter()
                .find(|v| v.key == f.nodes[i].id.to_string())
                .unwrap()
                .kind
        };
        assert_eq!(kind_of(0), Kind::Answered, "{kinds:?}");
        assert_eq!(kind_of(3), Kind::OtherNetwork);
        assert_eq!(kind_of(5), Kind::Unreachable);
    }

    #[test]
    fn dot_names_every_node_and_edge() {
        let (f, c) = crawl();
        let g = Graph::of(&c);
        let dot = g.dot();
        assert!(dot.starts_with("digraph crawl {") && dot.trim_end().ends_with('}'));
        for n in &f.nodes {
            assert!(dot.contains(&format!("tooltip=\"{}\"", n.id)), "{dot}");
        }
        assert_eq!(dot.matches(" -> ").count(), g.edges.len());
        assert!(dot.contains("\\\"friends\\\""), "{dot}");
        // Reported but never dialed: drawn as such.
        let mut f2 = Fake::new(3);
        f2.link(0, 1);
        f2.link(0, 2);
        let o = Options {
            concurrency: 1,
            timeout: Duration::from_secs(1),
            max_nodes: 1,
            network: None,
            addr_policy: AddrPolicy::AcceptUnroutable,
        };
        let (c2, _, _) = run(&f2, vec![f2.seed(0)], o);
        let g2 = Graph::of(&c2);
        assert_eq!(g2.vertices.len(), 3);
        assert_eq!(
            g2.vertices
                .iter()
                .filter(|v| v.kind == Kind::NotDialed)
                .count(),
            2
        );
        assert!(g2.vertices.iter().any(|v| v.title == addr_of(1)));
    }
}
