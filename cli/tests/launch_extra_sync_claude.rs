//! `agentpack extra sync-claude` through the real binary: skills on one side are copied to the
//! other, differing skills follow the newer copy, `--dry-run` writes nothing, `--json` reports.

#![allow(clippy::unwrap_used, clippy::print_stderr)] // tests may unwrap and say why they skip (HELPERS.md)

use std::path::Path;
use std::time::{Duration, SystemTime};

use agentpack_test_support::IsolatedHome;

fn write(path: &Path, text: &str, age_secs: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(age_secs))
        .unwrap();
}

fn wired(iso: &IsolatedHome) -> bool {
    let output = iso
        .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
        .args(["extra", "--help"])
        .output()
        .unwrap();
    if output.status.success() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "`extra sync-claude` is not wired into the binary"
    );
    eprintln!("skipped: `extra sync-claude` is not wired into the binary yet");
    false
}

#[test]
fn skills_reach_both_directories_and_the_newer_copy_wins() {
    let iso = IsolatedHome::new();
    if !wired(&iso) {
        return;
    }
    let p = &iso.project;
    write(
        &p.join("agentpack.toml"),
        "name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\n",
        0,
    );
    write(
        &p.join(".claude/skills/only-claude/SKILL.md"),
        "claude side\n",
        100,
    );
    write(
        &p.join(".agents/skills/only-agents/SKILL.md"),
        "agents side\n",
        100,
    );
    write(&p.join(".claude/skills/both/SKILL.md"), "old\n", 500);
    write(&p.join(".agents/skills/both/SKILL.md"), "new\n", 10);
    write(&p.join(".claude/skills/same/SKILL.md"), "same\n", 10);
    write(&p.join(".agents/skills/same/SKILL.md"), "same\n", 20);

    let run = |args: &[&str]| {
        let output = iso
            .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    };
    let dry = run(&["--json", "extra", "sync-claude", "--dry-run"]);
    let report: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
    let actions: Vec<(String, String)> = report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["action"].as_str().unwrap().to_string(),
                a["skill"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("update".to_string(), "both".to_string()),
            ("copy".to_string(), "only-agents".to_string()),
            ("copy".to_string(), "only-claude".to_string()),
        ]
    );
    assert!(
        !p.join(".agents/skills/only-claude").exists(),
        "--dry-run writes nothing"
    );

    run(&["extra", "sync-claude"]);
    assert_eq!(
        std::fs::read_to_string(p.join(".agents/skills/only-claude/SKILL.md")).unwrap(),
        "claude side\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.join(".claude/skills/only-agents/SKILL.md")).unwrap(),
        "agents side\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.join(".claude/skills/both/SKILL.md")).unwrap(),
        "new\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.join(".agents/skills/both/SKILL.md")).unwrap(),
        "new\n"
    );
    let again = run(&["--json", "extra", "sync-claude"]);
    let report: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(
        report["actions"],
        serde_json::json!([]),
        "in sync afterwards"
    );
}
