//! A check that a crate's docs list its Cargo features as its Cargo.toml
//! declares them, so the two cannot drift apart.

/// The feature table of a crate's docs (`lib_rs`, its `src/lib.rs`)
/// against the `[features]` of its `cargo_toml`: each declared feature has
/// a row (`//! | \`name\` | yes |` or `| no |`), no row names an undeclared
/// one, and the rows marked `yes` are the `default` list. Panics naming
/// the difference.
pub fn check_feature_table(lib_rs: &str, cargo_toml: &str) {
    let (declared, defaults) = cargo_features(cargo_toml);
    let mut rows: Vec<(String, bool)> = Vec::new();
    for line in lib_rs.lines() {
        let Some(row) = line.strip_prefix("//! | `") else {
            continue;
        };
        let mut cells = row.split('|').map(str::trim);
        let (Some(name), Some(default)) = (cells.next(), cells.next()) else {
            continue;
        };
        let Some(name) = name.strip_suffix('`') else {
            continue;
        };
        match default {
            "yes" => rows.push((name.to_string(), true)),
            "no" => rows.push((name.to_string(), false)),
            _ => {}
        }
    }
    let mut listed: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
    listed.sort_unstable();
    let mut want: Vec<&str> = declared.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(
        listed, want,
        "the docs' feature table against Cargo.toml's [features]"
    );
    let mut on: Vec<&str> = rows.iter().filter(|r| r.1).map(|r| r.0.as_str()).collect();
    on.sort_unstable();
    let mut want_on: Vec<&str> = defaults.iter().map(String::as_str).collect();
    want_on.sort_unstable();
    assert_eq!(
        on, want_on,
        "the docs' default features against Cargo.toml's `default`"
    );
}

/// The features `[features]` declares (`default` left out), and the
/// `default` list.
fn cargo_features(cargo_toml: &str) -> (Vec<String>, Vec<String>) {
    let mut declared = Vec::new();
    let mut defaults = Vec::new();
    let mut inside = false;
    for line in cargo_toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[features]";
            continue;
        }
        if !inside || line.starts_with('#') {
            continue;
        }
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        let name = name.trim();
        if name == "default" {
            defaults = value
                .split('"')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect();
        } else {
            declared.push(name.to_string());
        }
    }
    (declared, defaults)
}
