//! The release line of the version a node announces, as far as the lines
//! p2p-conn is tested against tell ([`p2p_conn_releases::ALL`]): `probe`
//! prints it, `check` reports it for each entry.

/// What the version a node announces says about its release, as far as the
/// lines p2p-conn is tested against ([`p2p_conn_releases::ALL`]) tell.
#[derive(Debug, PartialEq, Eq)]
pub struct ReleaseLine {
    /// The lines whose nodes announce this version, oldest first (`v0.38`,
    /// `v1`): the line its number names, and any line whose release
    /// announces it though it is another (v0.40.0 announces `0.39.0`).
    /// Empty when no tested line does.
    pub lines: Vec<&'static str>,
    /// The tested releases that announce this version though they are
    /// another: `v0.40.0 announces 0.39.0`.
    pub stale: Vec<String>,
}

impl ReleaseLine {
    /// What `version` (as a node announces it: `0.38.26`) says.
    pub fn of(version: &str) -> ReleaseLine {
        let mut lines = Vec::new();
        let mut stale = Vec::new();
        for r in &p2p_conn_releases::ALL {
            let announced_by_it = r.announces == version;
            if r.names(version) || announced_by_it {
                lines.push(r.line);
            }
            if announced_by_it && r.announces_stale() {
                stale.push(format!("{} announces {version}", r.label));
            }
        }
        ReleaseLine { lines, stale }
    }

    /// For the text report: `release line v0.39 or v0.40: v0.40.0
    /// announces 0.39.0`.
    pub fn text(&self) -> String {
        let lines = match &self.lines[..] {
            [] => "release line unknown: not one p2p-conn is tested against".to_string(),
            [one] => format!("release line {one}"),
            many => format!("release line {}", many.join(" or ")),
        };
        let sep = if self.lines.len() > 1 { ": " } else { "; " };
        if self.stale.is_empty() {
            lines
        } else {
            format!("{lines}{sep}{}", self.stale.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ReleaseLine;

    fn of(version: &str) -> (Vec<&'static str>, String) {
        let r = ReleaseLine::of(version);
        let text = r.text();
        (r.lines, text)
    }

    #[test]
    fn release_lines_of_announced_versions() {
        assert_eq!(of("0.38.26"), (vec!["v0.38"], "release line v0.38".into()));
        assert_eq!(of("0.34.35"), (vec!["v0.34"], "release line v0.34".into()));
        assert_eq!(of("0.39.4"), (vec!["v0.39"], "release line v0.39".into()));
        assert_eq!(of("1.0.1"), (vec!["v1"], "release line v1".into()));
        assert_eq!(of("0.40.0"), (vec!["v0.40"], "release line v0.40".into()));
        // v0.37.18 announces 0.37.16: still the v0.37 line.
        assert_eq!(
            of("0.37.16"),
            (
                vec!["v0.37"],
                "release line v0.37; v0.37.18 announces 0.37.16".into()
            )
        );
        // v0.40.0 announces 0.39.0, as v0.39.0 does.
        assert_eq!(
            of("0.39.0"),
            (
                vec!["v0.39", "v0.40"],
                "release line v0.39 or v0.40: v0.40.0 announces 0.39.0".into()
            )
        );
        for unknown in ["", "2.0.0", "0.33.9", "0.380.1", "10.0.0"] {
            let (lines, text) = of(unknown);
            assert!(lines.is_empty(), "{unknown:?}: {lines:?}");
            assert!(text.contains("unknown"), "{unknown:?}: {text}");
        }
    }
}
