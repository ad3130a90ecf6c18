//! The CometBFT release lines p2p-conn is tested against, listed once.
//!
//! One row per line, oldest first: the newest release of each line that
//! the test suite proves against CometBFT's own Go code and real nodes.
//! The CLI reads it to name the line of the version a node announces
//! (`probe`, `check`), the lab to name its Go baselines
//! (`--baseline cometbft-go-0.38`), and `p2p-conn-interop` keys its Go
//! builds (module files, build tags) by it. Adding a line is a row here
//! and its Go build's row in `interop/src/cometbft_go.rs`.

/// One CometBFT release: the newest of its line that the suite proves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    /// The CometBFT module version: `v0.38.26`.
    pub label: &'static str,
    /// The release line: `v0.34`, `v0.37`, `v0.38`, `v0.39`, `v0.40`, `v1`.
    pub line: &'static str,
    /// The version its node announces in its NodeInfo (and prints for
    /// `cometbft version`): the label without its `v`, except where the
    /// release left `version/version.go` unbumped (v0.37.18 says `0.37.16`,
    /// v0.40.0 says `0.39.0`).
    pub announces: &'static str,
    /// The P2P protocol version in its NodeInfo: 9 at v1.0.1, 8 before.
    pub p2p_protocol: u64,
}

/// Every release line the suite proves, oldest first.
pub const ALL: [Release; 6] = [
    Release {
        label: "v0.34.35",
        line: "v0.34",
        announces: "0.34.35",
        p2p_protocol: 8,
    },
    Release {
        label: "v0.37.18",
        line: "v0.37",
        // `version.TMCoreSemVer` was not bumped for the release.
        announces: "0.37.16",
        p2p_protocol: 8,
    },
    Release {
        label: "v0.38.26",
        line: "v0.38",
        announces: "0.38.26",
        p2p_protocol: 8,
    },
    Release {
        label: "v0.39.4",
        line: "v0.39",
        announces: "0.39.4",
        p2p_protocol: 8,
    },
    Release {
        label: "v0.40.0",
        line: "v0.40",
        // `version.TMCoreSemVer` was not bumped for the release.
        announces: "0.39.0",
        p2p_protocol: 8,
    },
    Release {
        label: "v1.0.1",
        line: "v1",
        announces: "1.0.1",
        p2p_protocol: 9,
    },
];

impl Release {
    /// Whether a node of this release announces a version other than its
    /// own (v0.37.18's `0.37.16`, v0.40.0's `0.39.0`).
    pub fn announces_stale(&self) -> bool {
        self.label.trim_start_matches('v') != self.announces
    }

    /// Whether `version` (as a node announces it, `0.38.26`) is of this
    /// line by its number: `v0.39` names 0.39.x, `v1` names 1.x.
    pub fn names(&self, version: &str) -> bool {
        version
            .strip_prefix(self.line.trim_start_matches('v'))
            .is_some_and(|rest| rest.starts_with('.'))
    }
}

#[cfg(test)]
mod tests {
    use super::ALL;

    #[test]
    fn each_line_once_oldest_first_and_its_label_of_its_line() {
        for (i, r) in ALL.iter().enumerate() {
            assert!(r.names(r.label.trim_start_matches('v')), "{r:?}");
            assert!(r.label.starts_with(r.line), "{r:?}");
            for later in &ALL[i + 1..] {
                assert_ne!(r.line, later.line);
            }
        }
        let stale: Vec<&str> = ALL
            .iter()
            .filter(|r| r.announces_stale())
            .map(|r| r.label)
            .collect();
        assert_eq!(stale, ["v0.37.18", "v0.40.0"]);
    }

    #[test]
    fn a_line_names_its_versions_only() {
        let v038 = &ALL[2];
        assert!(v038.names("0.38.0"));
        assert!(!v038.names("0.380.1"));
        assert!(!v038.names("0.3"));
        assert!(ALL[5].names("1.2.3"));
        assert!(!ALL[5].names("10.0.0"));
    }
}
