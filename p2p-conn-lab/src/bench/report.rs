//! How `bench` reports: a text row or a JSON line per run, the medians of
//! repeated runs, the ratios against a baseline, and our side's
//! seal/write/queue breakdown.

use super::breakdown::{Breakdown, StatsJson};
use super::measure::{Latency, Row};
use super::workload::{Adapter, Workload, WorkloadArgs};
use crate::error::LabError;
use p2p_conn_cli::conn::WireArgs;

/// How one `bench` invocation prints its rows: text or JSON lines,
/// transfers or handshakes, and the workload and settings every JSON line
/// carries.
#[derive(Clone, Copy)]
pub struct Output<'a> {
    pub json: bool,
    /// `--handshakes`: rows count handshakes, not bytes.
    pub handshakes: bool,
    /// How many connections at once moved the rows' workload (1, or
    /// `--connections`): in every JSON line, and after the name in text
    /// (`p2p-conn (tokio) x4`).
    pub connections: usize,
    pub wire: &'a WireArgs,
    pub workload: &'a Workload,
}

/// After the result table: our side's seal/write/queue breakdown, summed
/// over our one-connection runs (`which` says so when there were others:
/// "one connection").
pub fn print_breakdown(args: &WorkloadArgs, ours: &[Row], which: Option<&str>) {
    let title = match (ours.first(), which) {
        (Some(row), None) => format!("breakdown, {}", row.name),
        (Some(row), Some(which)) => format!("breakdown, {}, {which}", row.name),
        (None, _) => return,
    };
    match Breakdown::sum(ours.iter().filter_map(|r| r.breakdown.as_ref())) {
        Some(b) => print!("{}", b.text(&title)),
        None if args.adapter == Adapter::Codec && args.producers == 0 => println!(
            "{title}: not measured (tokio-util's Framed makes the socket calls of the codec adapter)"
        ),
        None => {}
    }
}

/// The median of `values`: the middle one, or the mean of the two middle
/// ones for an even count. `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[mid]),
        _ => Some((v[mid - 1] + v[mid]) / 2.0),
    }
}

/// Medians of one implementation's runs.
struct Summary {
    name: String,
    runs: usize,
    mb_per_s: f64,
    msgs_per_s: f64,
    /// Median CPU seconds per GiB (per handshake for `--handshakes`), if
    /// every run measured its CPU.
    cpu_cost: Option<f64>,
    /// Medians of the runs' latency percentiles, for paced runs.
    latency: Option<Latency>,
}

impl Summary {
    fn of(rows: &[Row]) -> Option<Summary> {
        let mb: Vec<f64> = rows.iter().map(Row::mb_per_s).collect();
        let msgs: Vec<f64> = rows.iter().map(Row::msgs_per_s).collect();
        let cpu: Option<Vec<f64>> = rows.iter().map(Row::cpu_cost).collect();
        Some(Summary {
            name: rows.first()?.name.clone(),
            runs: rows.len(),
            mb_per_s: median(&mb)?,
            msgs_per_s: median(&msgs)?,
            cpu_cost: cpu.and_then(|c| median(&c)),
            latency: rows
                .iter()
                .map(|r| r.latency)
                .collect::<Option<Vec<Latency>>>()
                .and_then(|l| {
                    Some(Latency {
                        p50_us: median(&l.iter().map(|x| x.p50_us).collect::<Vec<_>>())?,
                        p99_us: median(&l.iter().map(|x| x.p99_us).collect::<Vec<_>>())?,
                    })
                }),
        })
    }
}

/// One `--json` line. Every line has every key, so scripts can filter on
/// `kind`; a field that does not apply to a kind is null.
#[derive(serde::Serialize)]
struct JsonLine<'a> {
    /// "run" (one measured run), "median" (of `runs` runs), "ratio" (of
    /// the two medians, or of the two runs when `runs` is 1), or, with
    /// `--connections`, "scaling" (one implementation's `connections`
    /// connections over its one connection).
    kind: &'static str,
    /// "transfer", or "handshakes" for `--handshakes` (then `messages` is
    /// the handshake count, `msgs_per_s` handshakes per second).
    mode: &'static str,
    /// 0-based index of a measured run; null for summary rows.
    run: Option<usize>,
    /// How many runs the row stands for.
    runs: usize,
    /// How many connections at once moved the workload (`--connections`;
    /// 1 otherwise). Their MB/s and msg/s are aggregates over the run's
    /// wall time, their CPU the whole process's.
    connections: usize,
    #[serde(rename = "impl")]
    implementation: &'a str,
    /// "ratio" only: the implementation `impl` is compared with ("scaling":
    /// `impl` again, over one connection).
    over: Option<&'a str>,
    /// "ratio" only: `impl` MB/s over `over` MB/s (handshakes per second
    /// for "handshakes"). "scaling": `impl`'s MB/s over `connections`
    /// connections over its MB/s over one.
    ratio: Option<f64>,
    /// "ratio" only: `over` CPU per GiB over `impl` CPU per GiB (per
    /// handshake for "handshakes"; above 1: `impl` uses less CPU).
    /// "scaling": one connection's CPU per GiB over that of `connections`
    /// (above 1: less CPU per GiB with all of them).
    cpu_ratio: Option<f64>,
    mb_per_s: Option<f64>,
    msgs_per_s: Option<f64>,
    /// "run" only: from the sender's first byte to the receiver's last.
    seconds: Option<f64>,
    /// "run" only: process CPU seconds (user, sys) over `seconds`.
    cpu_user: Option<f64>,
    cpu_sys: Option<f64>,
    /// CPU seconds (user + sys) per GiB moved ("transfer").
    cpu_s_per_gib: Option<f64>,
    /// CPU seconds (user + sys) per handshake ("handshakes").
    cpu_s_per_handshake: Option<f64>,
    /// Paced runs (`--rate`): send-to-receive latency percentiles, µs.
    latency_p50_us: Option<f64>,
    latency_p99_us: Option<f64>,
    size: usize,
    messages: u64,
    bytes: u64,
    frame_size: usize,
    flush_size: usize,
    read_buffer: usize,
    backend: String,
    /// Why that backend ran: `avx2 (default: this CPU has AVX2 but not
    /// AVX-512 IFMA)`, `ring (--backend)`.
    backend_reason: String,
    /// Our "run" lines: the seal/write/queue breakdown (see `StatsJson`);
    /// null elsewhere.
    #[serde(flatten)]
    stats: StatsJson,
}

impl Output<'_> {
    /// A line with the workload's fields and everything else empty.
    fn line(&self) -> JsonLine<'_> {
        let (handshakes, w, wire) = (self.handshakes, self.workload, self.wire);
        JsonLine {
            kind: "run",
            mode: if handshakes { "handshakes" } else { "transfer" },
            run: None,
            runs: 1,
            connections: self.connections,
            implementation: "",
            over: None,
            ratio: None,
            cpu_ratio: None,
            mb_per_s: None,
            msgs_per_s: None,
            seconds: None,
            cpu_user: None,
            cpu_sys: None,
            cpu_s_per_gib: None,
            cpu_s_per_handshake: None,
            latency_p50_us: None,
            latency_p99_us: None,
            size: w.size,
            messages: w.messages,
            bytes: w.bytes(),
            frame_size: wire.frame_size,
            flush_size: wire.flush_size,
            read_buffer: wire.read_buffer,
            backend: wire.backend().to_string(),
            backend_reason: wire.backend_choice(),
            stats: StatsJson::default(),
        }
    }

    /// Medians of both implementations' runs and their ratios.
    pub fn summarize(&self, ours: &[Row], base: &[Row]) -> Result<(), LabError> {
        let ours_m = Summary::of(ours);
        let base_m = Summary::of(base);
        if ours.len() > 1 {
            if !self.json {
                match self.connections {
                    1 => println!("median of {} runs:", ours.len()),
                    n => println!("median of {} runs, {n} connections at once:", ours.len()),
                }
            }
            for m in ours_m.iter().chain(&base_m) {
                self.median(m)?;
            }
        }
        let (Some(ours), Some(base)) = (ours_m, base_m) else {
            return Ok(());
        };
        let ratio = if self.handshakes {
            ours.msgs_per_s / base.msgs_per_s
        } else {
            ours.mb_per_s / base.mb_per_s
        };
        // How many times less CPU per GiB (per handshake) than the baseline
        // (> 1: ours is cheaper).
        let cpu_ratio = times_less(ours.cpu_cost, base.cpu_cost);
        if self.json {
            return print_json(&JsonLine {
                kind: "ratio",
                runs: ours.runs,
                implementation: &ours.name,
                over: Some(&base.name),
                ratio: Some(ratio),
                cpu_ratio,
                ..self.line()
            });
        }
        let what = if self.handshakes {
            "handshakes/s"
        } else {
            "throughput"
        };
        let (what, cpu) = (self.name(what), self.name("CPU"));
        let (ours_name, base_name) = (self.name(&ours.name), self.name(&base.name));
        println!("ratio {what:<18} {ratio:>9.2}x  ({ours_name} / {base_name})");
        if let Some(c) = cpu_ratio {
            let per = if self.handshakes { "handshake" } else { "GiB" };
            println!(
                "ratio {cpu:<18} {c:>9.2}x  less CPU per {per} for {ours_name} than {base_name}"
            );
        }
        Ok(())
    }

    /// With `--connections`: one implementation's runs over this many
    /// connections (`many`) beside its runs over one (`one`), as the
    /// medians' ratios: "scaling x4 p2p-conn (tokio): 3.10x throughput
    /// (4800.0 over 1548.4 MB/s), 0.95x CPU per GiB (0.840 s over 0.800
    /// s)". Nothing when either side has no runs.
    pub fn scaling(&self, one: &[Row], many: &[Row]) -> Result<(), LabError> {
        let (Some(one), Some(many)) = (Summary::of(one), Summary::of(many)) else {
            return Ok(());
        };
        let ratio = many.mb_per_s / one.mb_per_s;
        let (one_cpu, many_cpu) = (one.cpu_cost, many.cpu_cost);
        let cpu_ratio = times_less(many_cpu, one_cpu);
        if self.json {
            return print_json(&JsonLine {
                kind: "scaling",
                runs: many.runs,
                implementation: &many.name,
                over: Some(&one.name),
                ratio: Some(ratio),
                cpu_ratio,
                ..self.line()
            });
        }
        let cpu = match (one_cpu, many_cpu) {
            (Some(o), Some(m)) => format!(
                ", CPU per GiB {:.2}x one connection's ({m:.3} s over {o:.3} s)",
                m / o
            ),
            _ => String::new(),
        };
        println!(
            "scaling {} connections over 1, {}: {ratio:.2}x throughput ({:.1} over {:.1} MB/s){cpu}",
            self.connections, many.name, many.mb_per_s, one.mb_per_s
        );
        Ok(())
    }

    /// `name` as text rows show it: with " xN" after it for N connections.
    fn name(&self, name: &str) -> String {
        match self.connections {
            1 => name.to_string(),
            n => format!("{name} x{n}"),
        }
    }

    /// One measured run (`run` counts from 0): a text row or a JSON line.
    pub fn run(&self, run: usize, row: &Row) -> Result<(), LabError> {
        let handshakes = self.handshakes;
        if self.json {
            return print_json(&JsonLine {
                kind: "run",
                run: Some(run),
                implementation: &row.name,
                mb_per_s: (!handshakes).then(|| row.mb_per_s()),
                msgs_per_s: Some(row.msgs_per_s()),
                seconds: Some(row.elapsed.as_secs_f64()),
                cpu_user: row.cpu.map(|c| c.user),
                cpu_sys: row.cpu.map(|c| c.sys),
                cpu_s_per_gib: row.cpu_s_per_gib(),
                cpu_s_per_handshake: row.cpu_s_per_message().filter(|_| handshakes),
                latency_p50_us: row.latency.map(|l| l.p50_us),
                latency_p99_us: row.latency.map(|l| l.p99_us),
                messages: row.messages,
                stats: StatsJson::of(row.breakdown.as_ref()),
                ..self.line()
            });
        }
        if handshakes {
            let cpu = row
                .cpu
                .map(|c| format!(", {:.0} µs CPU each", c.total() * 1e6 / row.messages as f64))
                .unwrap_or_default();
            println!(
                "{:<34} {:>10.0} handshakes/s   ({} handshakes, wall {:.3} s{cpu})",
                row.name,
                row.msgs_per_s(),
                row.messages,
                row.elapsed.as_secs_f64()
            );
        } else {
            let note = match self.connections {
                1 => "content verified".to_string(),
                n => format!("{n} connections, content verified"),
            };
            println!("{}", named_row_text(&self.name(&row.name), row, &note));
        }
        Ok(())
    }

    /// The medians of one implementation's runs.
    fn median(&self, m: &Summary) -> Result<(), LabError> {
        let handshakes = self.handshakes;
        if self.json {
            return print_json(&JsonLine {
                kind: "median",
                runs: m.runs,
                implementation: &m.name,
                mb_per_s: (!handshakes).then_some(m.mb_per_s),
                msgs_per_s: Some(m.msgs_per_s),
                cpu_s_per_gib: m.cpu_cost.filter(|_| !handshakes),
                cpu_s_per_handshake: m.cpu_cost.filter(|_| handshakes),
                latency_p50_us: m.latency.map(|l| l.p50_us),
                latency_p99_us: m.latency.map(|l| l.p99_us),
                ..self.line()
            });
        }
        if handshakes {
            let cpu = m
                .cpu_cost
                .map(|c| format!(", {:.0} µs CPU each", c * 1e6))
                .unwrap_or_default();
            println!(
                "{:<34} {:>10.0} handshakes/s   (median of {} runs{cpu})",
                m.name, m.msgs_per_s, m.runs
            );
        } else {
            println!(
                "{:<24} {:>10.1} MB/s {:>12.0} msg/s{}{}   (median of {} runs)",
                self.name(&m.name),
                m.mb_per_s,
                m.msgs_per_s,
                cpu_text(m.cpu_cost),
                latency_text(m.latency),
                m.runs
            );
        }
        Ok(())
    }
}

fn print_json(line: &JsonLine<'_>) -> Result<(), LabError> {
    println!("{}", serde_json::to_string(line)?);
    Ok(())
}

/// "  latency p50 12 µs p99 80 µs" for paced runs, else nothing.
fn latency_text(l: Option<Latency>) -> String {
    l.map(|l| format!("  latency p50 {:.0} µs p99 {:.0} µs", l.p50_us, l.p99_us))
        .unwrap_or_default()
}

/// " 1.234 s CPU/GiB" or nothing when the CPU time is unknown.
fn cpu_text(cpu_s_per_gib: Option<f64>) -> String {
    cpu_s_per_gib
        .map(|c| format!("  {c:>6.3} s CPU/GiB"))
        .unwrap_or_default()
}

/// One transfer row as text (what `bench` prints per run), with `note`
/// after the wall time: `(wall 2.740 s, content verified)`.
pub fn print_row(row: &Row, note: &str) {
    println!("{}", row_text(row, note));
}

/// The line [`print_row`] prints.
pub fn row_text(row: &Row, note: &str) -> String {
    named_row_text(&row.name, row, note)
}

/// [`row_text`] with `name` for the row's.
fn named_row_text(name: &str, row: &Row, note: &str) -> String {
    format!(
        "{:<24} {:>10.1} MB/s {:>12.0} msg/s{}{}   (wall {:.3} s, {note})",
        name,
        row.mb_per_s(),
        row.msgs_per_s(),
        cpu_text(row.cpu_s_per_gib()),
        latency_text(row.latency),
        row.elapsed.as_secs_f64()
    )
}

/// How many times less CPU `ours` costs than `base` (> 1: ours is
/// cheaper), when both are known and ours is above zero.
fn times_less(ours: Option<f64>, base: Option<f64>) -> Option<f64> {
    match (ours, base) {
        (Some(o), Some(b)) if o > 0.0 => Some(b / o),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::bench::measure::Cpu;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[5.0]), Some(5.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        // Even: the mean of the two middle values, not the upper one.
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[10.0, 20.0]), Some(15.0));
        assert_eq!(median(&[1.0, 100.0, 2.0, 3.0, 4.0, 5.0]), Some(3.5));
    }

    #[test]
    fn summary_takes_the_median_throughput() {
        // 1, 2, 3 and 4 MB/s: 1 MB in 1, 1/2, 1/3 and 1/4 s.
        let rows: Vec<Row> = [1.0f64, 4.0, 2.0, 3.0]
            .iter()
            .map(|rate| Row {
                name: "x".into(),
                bytes: 1_000_000,
                messages: 10,
                elapsed: Duration::from_secs_f64(1.0 / rate),
                // 1 MB is 1e6 / 2^30 GiB: 0.1 s CPU is 107.37 s per GiB.
                cpu: Some(Cpu {
                    user: 0.1 * rate,
                    sys: 0.0,
                }),
                latency: None,
                breakdown: None,
            })
            .collect();
        let m = Summary::of(&rows).unwrap();
        assert!((m.mb_per_s - 2.5).abs() < 1e-6, "{}", m.mb_per_s);
        assert!((m.msgs_per_s - 25.0).abs() < 1e-6, "{}", m.msgs_per_s);
        assert_eq!(m.runs, 4);
        // Median of 0.1, 0.2, 0.3 and 0.4 s CPU per MB.
        let gib = (1u64 << 30) as f64 / 1e6;
        let cpu = m.cpu_cost.unwrap();
        assert!((cpu - 0.25 * gib).abs() < 1e-6, "{cpu}");
        assert!(Summary::of(&[]).is_none());
    }
}
