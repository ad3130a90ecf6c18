//! Throughput against message size, drawn from `p2p-conn-lab bench --json`
//! lines: one line per implementation (p2p-conn, and each baseline), the
//! median MB/s of all its measured runs at each size, on log-log axes.
//! SVG only (plotters' SVG backend writes text as `<text>` elements, so no
//! font files or system libraries are needed).
//!
//! `cargo run -p p2p-conn-lab --example plot_throughput -- IN.jsonl OUT.svg`
//!
//! `p2p-conn-lab/scripts/plot.sh` runs the benchmarks and then this.

use std::collections::BTreeMap;

use plotters::coord::combinators::{BindKeyPoints, IntoLogRange};
use plotters::prelude::*;

/// One implementation's runs: message size -> MB/s of each run.
type Series = BTreeMap<u64, Vec<f64>>;

/// One implementation's points: (message size, median MB/s, runs).
type Medians = (String, Vec<(u64, f64, usize)>);

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// "200 B", "1 KiB", "64 KiB", "1 MiB".
fn size_label(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// 1, 2, 5, 10, 20, 50, ... within `lo..=hi`: the MB/s axis's labels.
fn one_two_five(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let v = m * decade;
            if (lo..=hi).contains(&v) {
                out.push(v);
            }
        }
        decade *= 10.0;
    }
    out
}

/// The measured transfer runs in `text` (JSON lines), by implementation.
fn read_runs(text: &str) -> Result<BTreeMap<String, Series>, String> {
    let mut all: BTreeMap<String, Series> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        if v["kind"] != "run" || v["mode"] != "transfer" {
            continue;
        }
        let (Some(name), Some(size), Some(mb)) = (
            v["impl"].as_str(),
            v["size"].as_u64(),
            v["mb_per_s"].as_f64(),
        ) else {
            return Err(format!(
                "line {}: a run without impl, size or mb_per_s",
                i + 1
            ));
        };
        all.entry(name.to_string())
            .or_default()
            .entry(size)
            .or_default()
            .push(mb);
    }
    if all.is_empty() {
        return Err("no transfer runs in the input".into());
    }
    Ok(all)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (input, output) = match &args[1..] {
        [i, o] => (i.clone(), o.clone()),
        _ => return Err("usage: plot_throughput IN.jsonl OUT.svg".into()),
    };
    let runs = read_runs(&std::fs::read_to_string(&input)?)?;

    let sizes: Vec<u64> = {
        let mut s: Vec<u64> = runs.values().flat_map(|r| r.keys().copied()).collect();
        s.sort_unstable();
        s.dedup();
        s
    };
    let medians: Vec<Medians> = runs
        .iter()
        .map(|(name, series)| {
            let points = series
                .iter()
                .map(|(&size, mb)| (size, median(mb), mb.len()))
                .collect();
            (name.clone(), points)
        })
        .collect();
    for (name, points) in &medians {
        for (size, mb, n) in points {
            println!(
                "{name:<28} {:>8} {mb:>9.1} MB/s (median of {n})",
                size_label(*size)
            );
        }
    }
    let lo = medians
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.1))
        .fold(f64::INFINITY, f64::min);
    let hi = medians
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.1))
        .fold(0.0, f64::max);
    let (x0, x1) = (
        *sizes.first().unwrap() as f64 / 1.6,
        *sizes.last().unwrap() as f64 * 1.6,
    );

    let root = SVGBackend::new(&output, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Throughput against message size (loopback TCP, one write per message)",
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (x0..x1)
                .log_scale()
                .with_key_points(sizes.iter().map(|&s| s as f64).collect()),
            ((lo / 1.5)..(hi * 1.5))
                .log_scale()
                .with_key_points(one_two_five(lo / 1.5, hi * 1.5)),
        )?;
    chart
        .configure_mesh()
        .x_desc("message size")
        .y_desc("MB/s (median of runs)")
        .x_label_formatter(&|x| size_label(x.round() as u64))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;

    let colors = [
        RGBColor(0xd6, 0x27, 0x28),
        RGBColor(0x1f, 0x77, 0xb4),
        RGBColor(0x2c, 0xa0, 0x2c),
        RGBColor(0x94, 0x67, 0xbd),
        RGBColor(0xff, 0x7f, 0x0e),
    ];
    // p2p-conn first, so it takes the first color.
    let mut order: Vec<&Medians> = medians.iter().collect();
    order.sort_by_key(|(name, _)| (!name.starts_with("p2p-conn"), name.clone()));
    for (k, (name, points)) in order.into_iter().enumerate() {
        let color = colors[k % colors.len()];
        let xy: Vec<(f64, f64)> = points.iter().map(|&(s, mb, _)| (s as f64, mb)).collect();
        chart
            .draw_series(LineSeries::new(xy.clone(), color.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(xy.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    root.present()?;
    println!("wrote {output}");
    Ok(())
}
