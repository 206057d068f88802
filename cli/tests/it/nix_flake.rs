//! The flake (flake.nix, nix/home-module.nix) evaluates offline: `tests/nix/check-flake.sh` parses it,
//! runs `nix flake check --no-build` against the stub nixpkgs and evaluates the home-manager module.
//! In CI (`CI=true`) nix must be installed (.ci/run installs it); elsewhere the test skips, saying why.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // test code: a panic is a failure; skips are printed

use agentpack_test_support::skip;
use std::path::Path;
use std::process::Command;

#[test]
fn the_flake_checks_offline() {
    let has_nix = Command::new("nix")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !has_nix {
        skip("nix is not installed (apt-get install nix-bin), so flake.nix cannot be checked");
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/nix/check-flake.sh");
    let output = Command::new("bash").arg(&script).output().unwrap();
    assert!(
        output.status.success(),
        "check-flake.sh failed\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("nix flake check --no-build passed"),
        "{stdout}"
    );
    assert!(stdout.contains("home-manager module sets"), "{stdout}");
}
