//! Writes the committed seed corpus in `p2p-conn-fuzz/seeds/`:
//! `cargo run -p p2p-conn-fuzz-checks --example gen_seeds [TARGET...]`
//! (every target when none is named).
//!
//! Each target's seeds are built by its own module's `seeds()`, next to the
//! decoder whose layout they follow; this only writes them. A file in
//! `seeds/TARGET/` that `seeds()` no longer makes is removed, so the
//! directory is exactly what the code builds (`tests/seeds.rs` fails when it
//! is not). Every seed is then run through its check; the generator exits
//! non-zero naming each seed whose check failed (one that reproduces a bug
//! the code at hand still has).

use std::fs;
use std::panic;
use std::path::Path;

use p2p_conn_fuzz_checks::{target_of, TARGETS};

fn main() {
    let names: Vec<String> = std::env::args().skip(1).collect();
    let targets: Vec<_> = if names.is_empty() {
        TARGETS.iter().collect()
    } else {
        names
            .iter()
            .map(|n| target_of(n).unwrap_or_else(|| panic!("no target {n}")))
            .collect()
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../seeds");
    let mut failed = Vec::new();
    for target in targets {
        let dir = root.join(target.name);
        fs::create_dir_all(&dir).unwrap();
        let seeds = (target.seeds)();
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if seeds.iter().all(|(n, _)| n != name) {
                fs::remove_file(&path).unwrap();
                println!("removed {}/{name}", target.name);
            }
        }
        let mut count = 0;
        for (name, bytes) in seeds.iter() {
            fs::write(dir.join(name), bytes).unwrap();
            if panic::catch_unwind(|| (target.check)(bytes)).is_err() {
                failed.push(format!("{}/{name}", target.name));
            }
            count += 1;
        }
        println!("{}: {count} seeds", target.name);
    }
    if !failed.is_empty() {
        eprintln!(
            "seeds written; these fail their check: {}",
            failed.join(", ")
        );
        std::process::exit(1);
    }
}
