//! The real agents, launched through `agentpack`, see what was staged and accept the flags the
//! launcher adds (`--yolo` included): `agentpack claude plugin validate <bundle>` (Claude Code
//! 2.1.328), `agentpack codex debug prompt-input hi` (Codex 0.171), `agentpack opencode debug skill`
//! (OpenCode 1.18.33). Offline probes, no login needed.
//!
//! The clients come from `AGENTPACK_TEST_AGENTS_BIN` (a `node_modules/.bin` directory, set by CI
//! after `npm install`). Without it the tests are skipped with a printed reason, unless `CI` is
//! set, where they fail.

#![allow(clippy::unwrap_used, clippy::print_stderr)] // tests may unwrap and say why they skip (HELPERS.md)

use std::path::{Path, PathBuf};
use std::process::Output;

use agentpack_test_support::IsolatedHome;

fn agents_bin() -> Option<PathBuf> {
    match std::env::var_os("AGENTPACK_TEST_AGENTS_BIN").filter(|v| !v.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None if std::env::var_os("CI").is_some() => {
            panic!("AGENTPACK_TEST_AGENTS_BIN is not set, and CI is: install the agents with npm and set it")
        }
        None => {
            eprintln!("skipped: set AGENTPACK_TEST_AGENTS_BIN to a node_modules/.bin with claude, codex and opencode");
            None
        }
    }
}

fn wired() -> bool {
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentpack"))
        .arg("--help")
        .output()
        .unwrap();
    if String::from_utf8_lossy(&output.stdout).contains("claude") {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "the launcher subcommands are not wired into the binary"
    );
    eprintln!("skipped: the launcher subcommands are not wired into the binary yet");
    false
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A project with one local package holding a skill, and the agents on PATH.
fn project() -> Option<(IsolatedHome, PathBuf)> {
    let bin = agents_bin()?;
    if !wired() {
        return None;
    }
    let iso = IsolatedHome::new();
    let pkg = iso.project.join("pkg");
    write(
        &pkg.join(".claude-plugin/plugin.json"),
        r#"{"name": "demo", "version": "1.0.0"}"#,
    );
    write(
        &pkg.join("skills/demo-skill/SKILL.md"),
        "---\nname: demo-skill\ndescription: A demo skill staged by agentpack for the conformance tests.\n---\nSay DEMO.\n",
    );
    write(
        &iso.project.join("agentpack.toml"),
        "name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\n\"demo\" = { path = \"pkg\" }\n",
    );
    Some((iso, bin))
}

fn launch(iso: &IsolatedHome, bin: &Path, args: &[&str]) -> String {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output: Output = iso
        .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
        .env("PATH", path)
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "agentpack {args:?} failed:\n{text}"
    );
    text
}

#[test]
fn claude_validates_the_bundle_it_was_launched_with() {
    let Some((iso, bin)) = project() else { return };
    let bundle = iso
        .staging_root
        .join("modes/default/plugins/agentpack-bundle");
    let text = launch(
        &iso,
        &bin,
        &[
            "--yolo",
            "claude",
            "plugin",
            "validate",
            &bundle.to_string_lossy(),
        ],
    );
    assert!(text.contains("agentpack-bundle:demo-skill"), "{text}");
    assert!(text.contains("Validation passed"), "{text}");
}

#[test]
fn codex_shows_the_model_the_staged_skill() {
    let Some((iso, bin)) = project() else { return };
    let text = launch(
        &iso,
        &bin,
        &["--yolo", "codex", "debug", "prompt-input", "hi"],
    );
    assert!(text.contains("demo-skill"), "{text}");
    assert!(text.contains("A demo skill staged by agentpack"), "{text}");
}

#[test]
fn opencode_lists_the_staged_skill() {
    let Some((iso, bin)) = project() else { return };
    let text = launch(&iso, &bin, &["--yolo", "opencode", "debug", "skill"]);
    assert!(text.contains("demo-skill"), "{text}");
    assert!(text.contains("A demo skill staged by agentpack"), "{text}");
}
