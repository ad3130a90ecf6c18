//! When `bench`'s figures are not fit to compare: runs too short, repeats
//! that disagree, or a ratio from a single pair of runs. `bench` prints
//! these notes after its summary (on stderr with `--json`).
//!
//! The thresholds come from runs on the project's 2-core machine while
//! other work shared it (docs/performance.md, "How stable is one `bench`
//! run"): single pairs of 64 KiB runs against Go v1.0.1 gave ratios from
//! 1.08x to 3.62x, and medians of 5 from 1.53x to 2.09x; the repeats of one
//! implementation in one invocation spread by 23-121% (max - min over the
//! median).

use std::time::Duration;

use super::measure::Row;
use super::report::median;

/// Runs shorter than this are too short to compare. Below it, fixed costs
/// (connection setup, the TCP window's growth, first-touch page faults) and
/// one stall of a few tens of milliseconds from whatever else runs on the
/// machine are a large part of the run; 1 GiB of 64 KiB messages takes
/// about 0.7 s at the 1.6 GB/s of a quiet run.
pub const MIN_RUN: Duration = Duration::from_millis(500);

/// Repeats of one implementation whose throughput spreads by more than this
/// (max - min, over the median) disagree too much for a ratio. In the
/// headline's sittings (docs/performance.md), 5 consecutive runs of one
/// implementation spread by more than 35% in 11% of the cases in the
/// quieter sitting, whose medians agreed (three Go lines with the same
/// code within 3-9%), and in 75% of them in a busy one, whose medians did
/// not (those lines up to 27% apart).
pub const MAX_SPREAD: f64 = 0.35;

/// How the note on a ratio from a single pair of runs starts.
const SINGLE_PAIR: &str = "note: one run each";

/// What the notes suggest, from the invocation's flags.
pub struct Flags {
    /// `--mib` (transfers) or `--handshakes` (handshakes): the amount per run.
    pub amount: u64,
    pub handshakes: bool,
    pub repeat: usize,
}

/// The notes on the runs of an invocation, one group per implementation
/// and connection count (ours, then the baseline's; with `--connections`
/// the same over N connections), empty when none applies. Groups without
/// runs are left out.
pub fn notes(groups: &[&[Row]], flags: &Flags) -> Vec<String> {
    let mut notes = Vec::new();
    let groups: Vec<&[Row]> = groups.iter().copied().filter(|g| !g.is_empty()).collect();
    let (amount_flag, unit) = if flags.handshakes {
        ("--handshakes", "handshakes")
    } else {
        ("--mib", "MiB")
    };
    // The shortest of the groups' median run times.
    let shortest = groups
        .iter()
        .filter_map(|g| {
            median(
                &g.iter()
                    .map(|r| r.elapsed.as_secs_f64())
                    .collect::<Vec<_>>(),
            )
        })
        .reduce(f64::min);
    if let Some(s) = shortest.filter(|s| *s < MIN_RUN.as_secs_f64()) {
        // Enough for a run of about 1 s at this rate, in a power of two.
        let scale = (1.0 / s.max(1e-6)).ceil() as u64;
        let suggest = flags
            .amount
            .max(1)
            .saturating_mul(scale)
            .next_power_of_two();
        notes.push(format!(
            "note: runs of {s:.2} s are too short to compare (under {:.1} s, setup costs and a single stall of the machine move them by several percent): use {amount_flag} {suggest} or more ({} {unit} now)",
            MIN_RUN.as_secs_f64(),
            flags.amount
        ));
    }
    let worst = groups
        .iter()
        .filter(|g| g.len() >= 2)
        .filter_map(|g| {
            let rates: Vec<f64> = g.iter().map(|r| rate(r, flags.handshakes)).collect();
            let (min, max) = rates
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            let m = median(&rates)?;
            (m > 0.0).then(|| ((max - min) / m, g[0].name.as_str(), min, max, g.len()))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((spread, name, min, max, n)) = worst.filter(|w| w.0 > MAX_SPREAD) {
        let what = if flags.handshakes {
            "handshakes/s"
        } else {
            "MB/s"
        };
        notes.push(format!(
            "note: runs disagree by {:.0}% ({name}: {min:.1} to {max:.1} {what} over {n} runs, more than the {:.0}% that marks a busy machine): compare nothing closer than that; use --repeat {} or {amount_flag} {}, on a quieter machine. CPU per {} (it leaves out time spent waiting for a core) is steadier than throughput",
            spread * 100.0,
            MAX_SPREAD * 100.0,
            (flags.repeat * 2).max(5),
            flags.amount.max(1).saturating_mul(4),
            if flags.handshakes { "handshake" } else { "GiB" },
        ));
    }
    // A ratio (against a baseline, or N connections over one) from single
    // runs.
    if groups.len() >= 2 && groups.iter().all(|g| g.len() == 1) {
        notes.push(format!(
            "{SINGLE_PAIR}: a single pair's ratio can be off by tens of percent on a shared machine, and its spread is unknown; use --repeat 5 (the default with --baseline or --connections)"
        ));
    }
    notes
}

/// Print `notes(groups, flags)`: on stdout after the text report, on
/// stderr with `--json` (stdout stays one JSON object per line). `--json`
/// runs leave out the single-pair note: scripts that pass `--repeat 1`
/// alternate the pairs themselves and take their own medians.
pub fn print_notes(groups: &[&[Row]], flags: &Flags, json: bool) {
    for n in notes(groups, flags) {
        if json {
            if !n.starts_with(SINGLE_PAIR) {
                eprintln!("{n}");
            }
        } else {
            println!("{n}");
        }
    }
}

/// What a row is compared by: MB/s, or handshakes per second.
fn rate(r: &Row, handshakes: bool) -> f64 {
    if handshakes {
        r.msgs_per_s()
    } else {
        r.mb_per_s()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of 1 GiB (or 1000 handshakes) in `secs` seconds.
    fn row(name: &str, secs: f64) -> Row {
        Row {
            name: name.into(),
            bytes: 1 << 30,
            messages: 1000,
            elapsed: Duration::from_secs_f64(secs),
            cpu: None,
            latency: None,
            breakdown: None,
        }
    }

    fn flags(repeat: usize) -> Flags {
        Flags {
            amount: 1024,
            handshakes: false,
            repeat,
        }
    }

    #[test]
    fn steady_long_runs_have_no_note() {
        let ours = [row("us", 1.0), row("us", 1.1), row("us", 1.05)];
        let base = [row("go", 2.0), row("go", 2.1), row("go", 1.95)];
        assert_eq!(notes(&[&ours, &base], &flags(3)), Vec::<String>::new());
        assert!(notes(&[&ours[..1], &[]], &flags(1)).is_empty());
    }

    #[test]
    fn short_runs_are_noted_with_a_size_to_use() {
        let n = notes(&[&[row("us", 0.1)]], &flags(1));
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(n[0].contains("too short to compare"), "{n:?}");
        // 0.1 s: 10 times more, rounded up to a power of two.
        assert!(n[0].contains("--mib 16384 or more"), "{n:?}");
        let h = Flags {
            amount: 100,
            handshakes: true,
            repeat: 1,
        };
        let n = notes(&[&[row("us", 0.25)]], &h);
        assert!(n[0].contains("--handshakes 512 or more"), "{n:?}");
    }

    #[test]
    fn spread_above_the_threshold_is_noted() {
        // 1 GiB in 1.0 s and 1.5 s: 1074 and 716 MB/s, 40% apart over
        // their median (895).
        let ours = [row("us", 1.0), row("us", 1.5)];
        let base = [row("go", 2.0), row("go", 2.1)];
        let n = notes(&[&ours, &base], &flags(2));
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].starts_with("note: runs disagree by 40% (us: "),
            "{n:?}"
        );
        assert!(n[0].contains("--repeat 5 or --mib 4096"), "{n:?}");
        // 30% apart (1.0 s and 1.35 s): no note.
        let ours = [row("us", 1.0), row("us", 1.35)];
        assert!(notes(&[&ours, &base], &flags(2)).is_empty());
    }

    #[test]
    fn a_single_pair_is_noted() {
        let n = notes(&[&[row("us", 1.0)], &[row("go", 1.5)]], &flags(1));
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(n[0].contains("one run each"), "{n:?}");
        // One connection and N, one run each: their ratio is a single pair's.
        let n = notes(&[&[row("us", 1.0)], &[], &[row("us", 0.6)], &[]], &flags(1));
        assert!(n.iter().any(|n| n.contains("one run each")), "{n:?}");
        // Repeated: none.
        let two = [row("us", 1.0), row("us", 1.05)];
        assert!(notes(&[&two, &two], &flags(2)).is_empty());
    }
}
