//! `cargo xtask list`: each stage, what it checks and what it needs, then
//! where each need comes from; as text, or as the Markdown tables of
//! CONTRIBUTING.md (`--markdown`), which a test holds to this output.

use crate::needs;
use crate::stages::STAGES;

/// The plain list, for a terminal.
pub fn text(rust: &str) -> String {
    let mut out = format!(
        "cargo xtask STAGE... | ci | list [--markdown]\n\n\
         stages, in CI's order (each needs Rust {rust} or later with rustfmt and clippy, \
         and a C compiler; `needs` is what else):\n"
    );
    for s in STAGES {
        out += &format!("  {:<13} {}\n", s.name, s.about);
        if !s.needs.is_empty() {
            out += &format!("  {:<13} needs: {}\n", "", needs_of(s.needs));
        }
        if let Some(ci) = in_background(s) {
            out += &format!("  {:<13} ci: {ci}\n", "");
        }
    }
    out += "\nwhere each need comes from (.ci/run installs the Debian packages itself):\n";
    for n in needs::ALL {
        out += &format!("  {:<20} {}\n", n.name, n.how);
    }
    out
}

/// The same as two Markdown tables.
pub fn markdown(rust: &str) -> String {
    let cell = |s: &str| s.replace('|', "\\|");
    let mut out = format!(
        "Every stage needs Rust {rust} or later with rustfmt and clippy, and a C \
         compiler; the table says what else.\n\n\
         | stage | what it checks | needs |\n|---|---|---|\n"
    );
    for s in STAGES {
        let mut needs = needs_of(s.needs);
        if let Some(ci) = in_background(s) {
            needs += &format!(
                "{}under `ci`, {ci}",
                if needs.is_empty() { "" } else { "; " }
            );
        }
        out += &format!("| `{}` | {} | {} |\n", s.name, cell(s.about), cell(&needs));
    }
    out += "\n| need | where it comes from |\n|---|---|\n";
    for n in needs::ALL {
        out += &format!("| {} | {} |\n", cell(n.name), cell(n.how));
    }
    out
}

fn needs_of(needs: &[&needs::Need]) -> String {
    needs.iter().map(|n| n.name).collect::<Vec<_>>().join(", ")
}

/// What `ci` runs of the stage in the background, and from when.
fn in_background(s: &crate::stages::Stage) -> Option<String> {
    let each: Vec<String> = s
        .background
        .iter()
        .map(|bg| {
            let when = bg
                .after
                .map_or("from the start".to_string(), |a| format!("once {a} passed"));
            format!("{} in the background {when}", bg.what)
        })
        .collect();
    (!each.is_empty()).then(|| each.join("; then "))
}

#[cfg(test)]
mod tests {
    /// CONTRIBUTING.md's tables are `cargo xtask list --markdown`'s, between
    /// its two markers.
    #[test]
    fn contributing_lists_the_stages_as_xtask_does() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = std::fs::read_to_string(root.join("CONTRIBUTING.md")).unwrap();
        let (begin, end) = (
            "<!-- cargo xtask list --markdown -->\n",
            "<!-- end of the list -->",
        );
        let start = text
            .find(begin)
            .expect("CONTRIBUTING.md has the begin marker")
            + begin.len();
        let stop = start + text[start..].find(end).expect("and the end marker");
        let rust =
            crate::manifest::workspace_setting(&root, "workspace.package", "rust-version").unwrap();
        assert!(
            text[start..stop] == super::markdown(&rust),
            "CONTRIBUTING.md's stage tables differ from `cargo xtask list --markdown`: paste its output between the markers"
        );
    }
}
