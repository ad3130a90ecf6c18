//! The dependency trees `lint` holds to: the library crates' lean builds
//! pull in no runtime or heavy crate, and the operator binary none of the
//! lab's.

use super::refuse_in_tree;
use crate::ctx::Ctx;

/// The crates the operator binary (`p2p-conn-cli`) never depends on: the
/// test and benchmark crates, which belong to the lab.
const NOT_IN_CLI: &[&str] = &["p2p-conn-interop", "tendermint-p2p", "pprof", "proptest"];

/// At most this many distinct crates in the operator binary's normal
/// dependency tree, itself and the library crates included (109 when the
/// lab's crates left it; 116 before threshold signing).
///
/// 125 with `p2p-conn-privval/threshold` (`p2p-conn threshold`: a
/// validator key's shares; its cosigners run from the same binary, so the
/// feature is not optional in the CLI). Its 9 crates: 5 in the binary
/// (`frost-ed25519`, `frost-core`, `frost-rerandomized`,
/// `const-crc32-nostd`, `itertools`) and 4 that run only at build time
/// (the proc macros `derive-getters`, `document-features` and
/// `visibility`, and `litrs`, which `document-features` parses with).
/// With them and the command, the stripped release binary grew by about
/// 6 % (240 KiB). `cosign-net` adds no crate. The cap leaves 3 of room.
const CLI_MAX_CRATES: usize = 128;

pub fn check(ctx: &Ctx) -> Result<(), String> {
    // The lean builds pull in none of the heavy or runtime crates.
    let lean = ctx.output(
        "cargo",
        &[
            "tree",
            "-e",
            "normal",
            "-p",
            "p2p-conn",
            "--no-default-features",
            "--prefix",
            "none",
        ],
    )?;
    refuse_in_tree(
        &lean,
        &[
            "tokio",
            "tokio-util",
            "clap",
            "tendermint-p2p",
            "ring",
            "serde",
            "serde_json",
            "futures-util",
            "tracing",
            "bytes",
            "prost",
        ],
        "p2p-conn with no default features",
    )?;
    for krate in ["p2p-conn-mconn", "p2p-conn-privval"] {
        let lean = ctx.output(
            "cargo",
            &[
                "tree",
                "-e",
                "normal",
                "-p",
                krate,
                "--no-default-features",
                "--prefix",
                "none",
            ],
        )?;
        refuse_in_tree(
            &lean,
            &[
                "tokio",
                "tokio-util",
                "clap",
                "tendermint-p2p",
                "ring",
                "futures-util",
                "tracing",
            ],
            &format!("{krate} with no default features"),
        )?;
    }
    let cli = ctx.output(
        "cargo",
        &[
            "tree",
            "-e",
            "normal",
            "-p",
            "p2p-conn-cli",
            "--prefix",
            "none",
        ],
    )?;
    cli_tree(&cli)
}

/// The distinct crates of a `cargo tree --prefix none` (what `sed 's/
/// (\*)//' | sort -u` leaves): one line each, name, version and source.
fn distinct_crates(tree: &str) -> Vec<&str> {
    let mut crates: Vec<&str> = tree
        .lines()
        .map(|l| l.trim_end().trim_end_matches(" (*)"))
        .filter(|l| !l.is_empty())
        .collect();
    crates.sort_unstable();
    crates.dedup();
    crates
}

/// The operator binary's tree (`cargo tree -e normal -p p2p-conn-cli
/// --prefix none`) names none of [`NOT_IN_CLI`] and at most
/// [`CLI_MAX_CRATES`] distinct crates; the error names both failures.
fn cli_tree(tree: &str) -> Result<(), String> {
    let crates = distinct_crates(tree);
    let lab: Vec<&str> = crates
        .iter()
        .copied()
        .filter(|l| NOT_IN_CLI.iter().any(|c| l.starts_with(&format!("{c} "))))
        .collect();
    let mut wrong = Vec::new();
    if !lab.is_empty() {
        wrong.push(format!("depends on the lab's {}", lab.join(", ")));
    }
    if crates.len() > CLI_MAX_CRATES {
        wrong.push(format!(
            "counts {} distinct crates in its normal dependency tree (at most {CLI_MAX_CRATES})",
            crates.len()
        ));
    }
    if wrong.is_empty() {
        println!(
            "-- the operator CLI: {} distinct crates, none of {}",
            crates.len(),
            NOT_IN_CLI.join(", ")
        );
        Ok(())
    } else {
        Err(format!(
            "the operator CLI (p2p-conn-cli) {} (cargo tree -p p2p-conn-cli -e normal)",
            wrong.join(", and ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(n: usize, extra: &[&str]) -> String {
        let mut lines = vec!["p2p-conn-cli v0.1.0 (/w/p2p-conn-cli)".to_string()];
        for i in 1..n {
            lines.push(format!("dep{i} v1.0.{i}"));
            // A crate seen again is listed with (*): counted once.
            lines.push(format!("dep{i} v1.0.{i} (*)"));
        }
        lines.extend(extra.iter().map(|s| s.to_string()));
        lines.join("\n") + "\n"
    }

    #[test]
    fn counts_each_crate_once() {
        assert_eq!(distinct_crates(&tree(5, &[])).len(), 5);
        assert!(cli_tree(&tree(CLI_MAX_CRATES, &[])).is_ok());
    }

    #[test]
    fn names_the_lab_crates_and_the_count() {
        let e = cli_tree(&tree(CLI_MAX_CRATES + 1, &[])).unwrap_err();
        assert!(
            e.contains(&format!("counts {} distinct crates", CLI_MAX_CRATES + 1)),
            "{e}"
        );
        assert!(!e.contains("lab's"), "{e}");
        let e = cli_tree(&tree(
            10,
            &[
                "pprof v0.15.0",
                "pprof v0.15.0 (*)",
                "proptest-derive v0.5.0",
                "proptest v1.12.0",
            ],
        ))
        .unwrap_err();
        assert!(
            e.contains("depends on the lab's pprof v0.15.0, proptest v1.12.0 (cargo tree"),
            "{e}"
        );
        assert!(!e.contains("distinct"), "{e}");
    }
}
