//! The picture's vertices and lines, its SVG (parsed back) and its DOT.

use std::time::Duration;

use super::svg::{BOX_H, BOX_W};
use super::*;
use crate::visit::report::Target;
use crate::visit::scheduler::fake::{addr_of, opts, run, Fake};
use crate::visit::scheduler::Options;

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
