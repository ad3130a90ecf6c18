//! The workspace's Cargo.toml, read as far as xtask needs it (std only: no
//! TOML parser).

use std::path::Path;

/// `key`'s value in `[section]` of a TOML file, its quotes removed: enough
/// for the one-line strings and numbers of Cargo.toml's `[workspace.package]`
/// and `[profile.*]`.
pub fn setting(toml: &str, section: &str, key: &str) -> Option<String> {
    let mut current = "";
    for line in toml.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.trim();
        } else if current == section {
            if let Some((k, v)) = line.split_once('=') {
                if k.trim() == key {
                    let v = v.split('#').next().unwrap_or("").trim();
                    return Some(v.trim_matches('"').to_string());
                }
            }
        }
    }
    None
}

/// [`setting`] in the workspace's own Cargo.toml under `root`.
pub fn workspace_setting(root: &Path, section: &str, key: &str) -> Option<String> {
    let toml = std::fs::read_to_string(root.join("Cargo.toml")).ok()?;
    setting(&toml, section, key)
}

#[cfg(test)]
mod tests {
    use super::setting;

    #[test]
    fn reads_a_setting_of_a_section() {
        let toml = "[workspace]\ndebug = 2\n\n[workspace.package]\nrust-version = \"1.89\"\n\n\
                    [profile.dev]\nopt-level = 0\ndebug = \"line-tables-only\" # why\n\n\
                    [profile.release]\ndebug = 1\n";
        let get = |section, key| setting(toml, section, key);
        assert_eq!(
            get("profile.dev", "debug").as_deref(),
            Some("line-tables-only")
        );
        assert_eq!(get("profile.release", "debug").as_deref(), Some("1"));
        assert_eq!(
            get("workspace.package", "rust-version").as_deref(),
            Some("1.89")
        );
        assert_eq!(get("profile.bench", "debug"), None);
    }
}
