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

use super::scheduler::{Crawl, Status};
use crate::output::svg::xml_escape;

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
        let phase = |r: Option<&super::scheduler::Report>| match r {
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

    /// Positions: (x, y) of each vertex's centre, and the picture's size.
    ///
    /// A column per depth; a depth with more vertices than `rows` (about
    /// the square root of the count, so the picture comes out wider than
    /// tall rather than one tall strip) wraps into several columns.
    fn layout(&self) -> (Vec<(f64, f64)>, f64, f64) {
        let n = self.vertices.len();
        // Columns of `rows` boxes, as many as it takes for a picture about
        // 1.6 times as wide as tall: n / rows * COL_W = 1.6 * rows * ROW_H.
        let rows = ((n as f64 * COL_W / (1.6 * ROW_H)).sqrt().ceil() as usize).max(4);
        let mut depths: Vec<u32> = self.vertices.iter().map(|v| v.depth).collect();
        depths.sort_unstable();
        depths.dedup();
        // The first column of each depth.
        let mut first_col: HashMap<u32, usize> = HashMap::new();
        let mut cols = 0;
        for d in &depths {
            first_col.insert(*d, cols);
            let count = self.vertices.iter().filter(|v| v.depth == *d).count();
            cols += count.div_ceil(rows).max(1);
        }
        let mut placed: HashMap<u32, usize> = HashMap::new();
        let mut most_rows = 1;
        let pos: Vec<(f64, f64)> = self
            .vertices
            .iter()
            .map(|v| {
                let k = placed.entry(v.depth).or_default();
                let (col, row) = (first_col[&v.depth] + *k / rows, *k % rows);
                *k += 1;
                most_rows = most_rows.max(row + 1);
                (
                    MARGIN + BOX_W / 2.0 + col as f64 * COL_W,
                    TOP + MARGIN + BOX_H / 2.0 + row as f64 * ROW_H,
                )
            })
            .collect();
        let w = 2.0 * MARGIN + BOX_W + (cols.max(1) - 1) as f64 * COL_W;
        let h = TOP + 2.0 * MARGIN + BOX_H + (most_rows - 1) as f64 * ROW_H + LEGEND_H;
        (pos, w.max(LEGEND_W), h)
    }

    /// Each line's ends and control point (a quadratic curve), for the
    /// boxes at `pos`.
    fn curves(&self, pos: &[(f64, f64)]) -> Vec<[(f64, f64); 3]> {
        // Each line: its ends on the boxes' borders and its control point.
        // A line between neighbours (next column, next row, or a diagonal)
        // is straight, centre to centre; one along a row or a column that
        // would run through the boxes in between leaves from the boxes'
        // bottom (right) edges and bends below (right of) them, through the
        // gap beside them, the further the longer it is (so that lines of
        // different lengths stay apart). A quadratic curve's farthest point
        // from its chord is half its control point's offset.
        self.edges
            .iter()
            .map(|e| {
                let (a, b) = (pos[e.from], pos[e.to]);
                let cols = ((a.0 - b.0).abs() / COL_W).round();
                let rows = ((a.1 - b.1).abs() / ROW_H).round();
                // The farthest point lies in the gap beside the boxes it
                // passes: 15 px past their edge for a skip of one, 7 px
                // more per box skipped, short of the next row or column.
                let reach = |gap: f64, skip: f64| (8.0 + 7.0 * skip).min(gap - 6.0);
                if rows == 0.0 && cols > 1.0 {
                    // From the bottom edge to the bottom edge, a quarter
                    // of the way in, below the boxes in between.
                    let side = (b.0 - a.0).signum() * BOX_W / 4.0;
                    let p1 = (a.0 + side, a.1 + BOX_H / 2.0);
                    let p2 = (b.0 - side, b.1 + BOX_H / 2.0);
                    let bend = 2.0 * reach(ROW_H - BOX_H, cols - 1.0);
                    return [p1, ((p1.0 + p2.0) / 2.0, p1.1 + bend), p2];
                }
                if cols == 0.0 && rows > 1.0 {
                    // From the right edge to the right edge, right of them.
                    let side = (b.1 - a.1).signum() * BOX_H / 4.0;
                    let p1 = (a.0 + BOX_W / 2.0, a.1 + side);
                    let p2 = (b.0 + BOX_W / 2.0, b.1 - side);
                    let bend = 2.0 * reach(COL_W - BOX_W, rows - 1.0);
                    return [p1, (p1.0 + bend, (p1.1 + p2.1) / 2.0), p2];
                }
                let p1 = border(a, b);
                let p2 = border(b, a);
                let c = ((p1.0 + p2.0) / 2.0, (p1.1 + p2.1) / 2.0);
                [p1, c, p2]
            })
            .collect()
    }

    /// An SVG picture, laid out as the module docs say.
    pub fn svg(&self) -> String {
        let (pos, w, h) = self.layout();
        let curves = self.curves(&pos);
        // Room for the bends, to the right and below (the legend moves
        // down with them).
        let right = curves
            .iter()
            .map(|c| c[1].0 / 2.0 + (c[0].0 + c[2].0) / 4.0)
            .fold(w - MARGIN, f64::max);
        let bottom = curves
            .iter()
            .map(|c| c[1].1 / 2.0 + (c[0].1 + c[2].1) / 4.0)
            .fold(h - LEGEND_H - MARGIN, f64::max);
        // And for the caption (bold 14 px: about 8.5 px a character).
        let caption_w = 2.0 * MARGIN + 8.5 * self.caption.chars().count() as f64;
        let (w, h) = ((right + MARGIN).max(caption_w), bottom + MARGIN + LEGEND_H);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" font-family=\"sans-serif\" font-size=\"12\">"
        );
        let _ = writeln!(
            out,
            "<rect x=\"0\" y=\"0\" width=\"{w:.0}\" height=\"{h:.0}\" fill=\"white\"/>"
        );
        if !self.caption.is_empty() {
            let _ = writeln!(
                out,
                "<text id=\"caption\" x=\"{MARGIN:.0}\" y=\"{:.0}\" font-size=\"14\" font-weight=\"bold\">{}</text>",
                MARGIN,
                xml_escape(&self.caption)
            );
        }
        out.push_str("<g>\n");
        out.push_str("<g id=\"edges\" fill=\"none\" stroke=\"#555\" stroke-width=\"1.2\">\n");
        for (e, [(x1, y1), (cx, cy), (x2, y2)]) in self.edges.iter().zip(&curves) {
            let (a, b) = (
                xml_escape(&self.vertices[e.from].title),
                xml_escape(&self.vertices[e.to].title),
            );
            let says = if e.both {
                format!("{a} and {b} know each other")
            } else {
                format!("{a} knows {b}")
            };
            // Heads drawn as triangles along the curve's tangent at each
            // end (not markers, which renderers orient differently).
            let mut heads = head((*cx, *cy), (*x2, *y2));
            if e.both {
                heads.push(' ');
                heads.push_str(&head((*cx, *cy), (*x1, *y1)));
            }
            let _ = writeln!(
                out,
                "<g><title>{says}</title><path d=\"M {x1:.1} {y1:.1} Q {cx:.1} {cy:.1} {x2:.1} {y2:.1}\"/><path d=\"{heads}\" fill=\"#555\" stroke=\"none\"/></g>",
            );
        }
        out.push_str("</g>\n<g id=\"nodes\">\n");
        for (v, &(x, y)) in self.vertices.iter().zip(&pos) {
            node_svg(&mut out, v.kind, x, y, &v.title, &v.sub, &v.tip);
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
/// Room for the caption.
const TOP: f64 = 20.0;
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

fn node_svg(out: &mut String, kind: Kind, x: f64, y: f64, title: &str, sub: &str, tip: &str) {
    let (fill, stroke, dash, _) = kind.style();
    let _ = writeln!(
        out,
        "<g><title>{}</title><rect x=\"{:.1}\" y=\"{:.1}\" width=\"{BOX_W:.0}\" height=\"{BOX_H:.0}\" rx=\"6\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"1.5\"{}/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-weight=\"bold\">{}</text><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\" fill=\"#333\">{}</text></g>",
        xml_escape(tip),
        x - BOX_W / 2.0,
        y - BOX_H / 2.0,
        dash_attr(dash),
        y - 3.0,
        xml_escape(&clip(title, 28)),
        y + 13.0,
        xml_escape(&clip(sub, 34)),
    );
}

/// An arrowhead, as path data: a triangle with its tip at `tip`, pointing
/// away from `from` (the curve's control point: the tangent's direction).
fn head(from: (f64, f64), tip: (f64, f64)) -> String {
    let (dx, dy) = (tip.0 - from.0, tip.1 - from.1);
    let len = (dx * dx + dy * dy).sqrt().max(1e-9);
    let (ux, uy) = (dx / len, dy / len);
    let (l, hw) = (9.0, 4.0);
    let base = (tip.0 - ux * l, tip.1 - uy * l);
    format!(
        "M {:.1} {:.1} L {:.1} {:.1} L {:.1} {:.1} Z",
        tip.0,
        tip.1,
        base.0 - uy * hw,
        base.1 + ux * hw,
        base.0 + uy * hw,
        base.1 - ux * hw
    )
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
    use crate::crawl::scheduler::tests::{addr_of, opts, run, Fake};
    use crate::crawl::scheduler::{Options, Target};
    use std::time::Duration;

    /// Whether `v` is the box of the node ID or address `key`.
    fn stands_for(v: &Vertex, key: &str) -> bool {
        v.tip == key || v.tip.starts_with(&format!("{key} ("))
    }

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
            ..opts()
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
        let mut heads = 0;
        let mut titles = Vec::new();
        let mut in_title = false;
        loop {
            match reader.read_event() {
                Ok(quick_xml::events::Event::Start(e)) => {
                    depth += 1;
                    in_title = e.name().as_ref() == b"title";
                }
                Ok(quick_xml::events::Event::Empty(e)) => {
                    if e.name().as_ref() == b"rect" {
                        rects += 1;
                    }
                    if e.name().as_ref() == b"path" {
                        // A line, or a line's heads (filled).
                        let filled = e.attributes().flatten().any(|a| a.key.as_ref() == b"fill");
                        if filled {
                            heads += String::from_utf8_lossy(
                                &e.try_get_attribute("d").unwrap().unwrap().value,
                            )
                            .matches('Z')
                            .count();
                        } else {
                            paths += 1;
                        }
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
        // Every node by its ID in a title (the hanging one, 5, proved
        // none: its box is its address, dialed as its ID). Each link both
        // ways, but the other-network node (3) and the hanging one
        // reported nothing: 0-1, 1-2, 1-4 two-way lines, 2->3 and 4->5.
        for n in &f.nodes {
            assert!(
                titles.iter().any(|t| t.contains(&n.id.to_string())),
                "{} missing",
                n.id
            );
        }
        let mut lines: Vec<(String, String, bool)> = g
            .edges
            .iter()
            .map(|e| {
                (
                    g.vertices[e.from].title.clone(),
                    g.vertices[e.to].title.clone(),
                    e.both,
                )
            })
            .collect();
        lines.sort();
        let t = |s: &str| s.to_string();
        let n2 = t("<n2 & \"friends\">\u{1}");
        let mut want = vec![
            (t("n0"), t("n1"), true),
            (t("n1"), n2.clone(), true),
            (t("n1"), t("n4"), true),
            (n2, t("n3"), false),
            (t("n4"), addr_of(5), false),
        ];
        want.sort();
        assert_eq!(lines, want);
        // One path element per line, a head at both ends of the two-way
        // ones.
        assert_eq!(paths, 5);
        assert_eq!(heads, 3 * 2 + 2);
        assert!(titles.iter().any(|t| t.contains("<n2 & \"friends\">")));
        let kinds: Vec<Kind> = g.vertices.iter().map(|v| v.kind).collect();
        let kind_of = |i: usize| {
            g.vertices
                .iter()
                .find(|v| stands_for(v, &f.nodes[i].id.to_string()) || stands_for(v, &addr_of(i)))
                .unwrap()
                .kind
        };
        assert_eq!(kind_of(0), Kind::Answered, "{kinds:?}");
        // Node 0 reported node 1: its box counts the answer.
        let v0 = g
            .vertices
            .iter()
            .find(|v| stands_for(v, &f.nodes[0].id.to_string()))
            .unwrap();
        assert!(v0.sub.ends_with("· 1 PEX addr"), "{}", v0.sub);
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
            assert!(dot.contains(&n.id.to_string()), "{dot}");
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
            ..opts()
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

    /// The mistake of issue #31: a node's ID given at a wrong address (its
    /// RPC port) as well as its p2p address without an ID. The node that
    /// answered has its own green box under its ID; the wrong address is a
    /// grey box of its own; the lines leave the green box.
    #[test]
    fn a_wrong_address_given_with_a_node_id_does_not_take_its_box() {
        let mut f = Fake::new(2);
        f.link(0, 1);
        let wrong = Target {
            addr: "127.0.0.1:26657".into(),
            id: Some(f.nodes[0].id),
            depth: 0,
        };
        let right = Target {
            addr: addr_of(0),
            id: None,
            depth: 0,
        };
        let o = Options {
            concurrency: 1,
            timeout: Duration::from_secs(1),
            max_nodes: 10,
            ..opts()
        };
        let (c, _, _) = run(&f, vec![wrong, right], o);
        let g = Graph::of(&c);
        let id0 = f.nodes[0].id.to_string();
        let of = |key: &str| {
            g.vertices
                .iter()
                .find(|v| stands_for(v, key))
                .unwrap_or_else(|| panic!("no box for {key}: {:#?}", g.vertices))
        };
        assert_eq!(of(&id0).kind, Kind::Answered, "{:#?}", g.vertices);
        assert_eq!(of(&id0).title, "n0");
        assert_eq!(of("127.0.0.1:26657").kind, Kind::Unreachable);
        assert_eq!(of(&f.nodes[1].id.to_string()).kind, Kind::Answered);
        assert_eq!(g.vertices.len(), 3, "{:#?}", g.vertices);
    }

    /// Many nodes at one depth wrap into columns: the picture is wider
    /// than tall, and no two boxes overlap. The caption is drawn.
    #[test]
    fn a_wide_depth_wraps_into_columns() {
        let mut f = Fake::new(61);
        for i in 1..61 {
            f.nodes[0].knows.push(i);
        }
        let o = Options {
            concurrency: 4,
            timeout: Duration::from_secs(1),
            max_nodes: 100,
            ..opts()
        };
        let (c, _, _) = run(&f, vec![f.seed(0)], o);
        let g = Graph::of(&c).with_caption("crawl of chain-a <&>".into());
        let (pos, w, h) = g.layout();
        assert_eq!(pos.len(), 61);
        assert!(w > h, "{w} x {h}");
        for (i, a) in pos.iter().enumerate() {
            for b in &pos[i + 1..] {
                assert!(
                    (a.0 - b.0).abs() >= BOX_W || (a.1 - b.1).abs() >= BOX_H,
                    "overlap at {a:?} {b:?}"
                );
            }
        }
        let svg = g.svg();
        assert!(
            svg.contains(">crawl of chain-a &lt;&amp;&gt;</text>"),
            "{svg}"
        );
        assert!(g.dot().contains("label=\"crawl of chain-a <&>\""));
    }

    /// A line of five nodes where some report nodes two or three steps
    /// back (as the test suite's real network does): every line misses
    /// every box but its two ends.
    #[test]
    fn lines_go_around_the_boxes_they_pass() {
        let mut f = Fake::new(5);
        for i in 0..4 {
            f.link(i, i + 1);
        }
        f.nodes[2].knows.push(0);
        f.nodes[3].knows.extend([0, 1]);
        f.nodes[4].knows.push(2);
        let o = Options {
            concurrency: 1,
            timeout: Duration::from_secs(1),
            max_nodes: 10,
            ..opts()
        };
        let (c, _, _) = run(&f, vec![f.seed(0)], o);
        let g = Graph::of(&c);
        let (pos, _, _) = g.layout();
        // All in one row: the picture is one depth per column.
        assert!(pos.iter().all(|p| p.1 == pos[0].1), "{pos:?}");
        let curves = g.curves(&pos);
        assert_eq!(curves.len(), g.edges.len());
        assert!(g.edges.len() >= 7, "{:?}", g.edges);
        for (e, [p0, c, p2]) in g.edges.iter().zip(&curves) {
            for step in 1..100 {
                let t = step as f64 / 100.0;
                let at = |a: f64, b: f64, d: f64| {
                    (1.0 - t) * (1.0 - t) * a + 2.0 * (1.0 - t) * t * b + t * t * d
                };
                let (x, y) = (at(p0.0, c.0, p2.0), at(p0.1, c.1, p2.1));
                for (k, b) in pos.iter().enumerate() {
                    if k == e.from || k == e.to {
                        continue;
                    }
                    let inside = (x - b.0).abs() < BOX_W / 2.0 && (y - b.1).abs() < BOX_H / 2.0;
                    assert!(
                        !inside,
                        "line {e:?} runs through box {k} at ({x:.0}, {y:.0})"
                    );
                }
            }
        }
    }
}
