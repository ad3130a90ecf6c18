//! The SVG picture: breadth-first layers, lines bent around the boxes
//! they pass, a caption and a legend (the layout the module docs of
//! [`super`] describe).

use std::collections::HashMap;
use std::fmt::Write;

use super::{Graph, Kind};
use crate::output::svg::xml_escape;

impl Graph {
    /// Positions: (x, y) of each vertex's centre, and the picture's size.
    ///
    /// A column per depth; a depth with more vertices than `rows` (about
    /// the square root of the count, so the picture comes out wider than
    /// tall rather than one tall strip) wraps into several columns.
    pub(super) fn layout(&self) -> (Vec<(f64, f64)>, f64, f64) {
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
    pub(super) fn curves(&self, pos: &[(f64, f64)]) -> Vec<[(f64, f64); 3]> {
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
pub(super) const BOX_W: f64 = 190.0;
pub(super) const BOX_H: f64 = 44.0;
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
