//! The systemd unit in docs/deploy/: `systemd-analyze verify` finds no
//! mistake in it (with its ExecStart pointed at the binary under test,
//! as verify checks that it exists), and the operator manual shows it as
//! it is. Without `systemd-analyze` the verify step prints a notice.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_p2p-conn");

#[test]
fn the_signer_unit_verifies_and_is_in_the_manual() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let unit = std::fs::read_to_string(root.join("docs/deploy/p2p-conn-signer.service")).unwrap();
    let manual = std::fs::read_to_string(root.join("docs/operator-manual.md")).unwrap();
    assert!(
        manual.contains(&format!("```ini\n{unit}```\n")),
        "docs/operator-manual.md must show docs/deploy/p2p-conn-signer.service as it is"
    );
    assert!(unit.contains("ExecStart=/usr/local/bin/p2p-conn signer --config "));
    let dir = crate::common::process::scratch("signer-unit");
    let copy = dir.join("p2p-conn-signer.service");
    std::fs::write(&copy, unit.replace("/usr/local/bin/p2p-conn", BIN)).unwrap();
    let out = match Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!("notice: systemd-analyze not run ({e}); the unit is not verified");
            return;
        }
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Lines about the unit file itself (unknown keys, bad values); verify
    // also reports on the host's other units, which are not ours.
    let ours: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("p2p-conn-signer.service"))
        .collect();
    assert!(
        out.status.success() && ours.is_empty(),
        "systemd-analyze verify: {}: {stderr}",
        out.status
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
