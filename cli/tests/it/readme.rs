//! The README's "install and run" command works: everything after `cargo install` runs against the
//! binary under test, from the repository root, offline.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::path::Path;
use std::process::Command;

#[test]
fn the_readme_quick_start_runs_offline() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let line = readme
        .lines()
        .find(|line| line.starts_with("cargo install --locked --path cli && "))
        .expect("the README's install-and-run command");
    let after_install = line.trim_start_matches("cargo install --locked --path cli && ");
    let bin_dir = assert_cmd::cargo::cargo_bin("agentpack")
        .parent()
        .unwrap()
        .to_path_buf();
    let tmp = tempfile::tempdir().unwrap();
    let output = Command::new("bash")
        .arg("-c")
        .arg(after_install)
        .current_dir(root)
        .env_clear()
        .env(
            "PATH",
            format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap()),
        )
        .env("HOME", tmp.path())
        .env("TMPDIR", tmp.path())
        .env("AGENTPACK_GITHUB_API_URL", "http://127.0.0.1:9")
        .env("AGENTPACK_GITHUB_URL", "http://127.0.0.1:9")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{after_install}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("[dependencies]") && stdout.contains("lockfile_version = 3"),
        "{stdout}"
    );
    let staged = stderr
        .lines()
        .find_map(|line| line.strip_prefix("Staged mode `default` at "))
        .expect("sync names the staged tree");
    let bundle = Path::new(staged).join("plugins/agentpack-bundle");
    assert!(bundle.join("skills/hello-skill/SKILL.md").is_file());
    assert!(bundle.join("commands/review.md").is_file());
    assert!(bundle.join("agents/reviewer.md").is_file());
}
