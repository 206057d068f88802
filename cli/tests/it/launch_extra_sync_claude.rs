//! `agentpack extra sync-claude` through the real binary: skills on one side are copied to the
//! other, differing skills follow the newer copy, `--dry-run` writes nothing, `--json` reports.

#![allow(clippy::unwrap_used, clippy::print_stderr)] // tests may unwrap and say why they skip (HELPERS.md)

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use agentpack_test_support::IsolatedHome;

fn write(path: &Path, text: &str, age_secs: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(age_secs))
        .unwrap();
}

#[test]
fn skills_reach_both_directories_and_the_newer_copy_wins() {
    let iso = IsolatedHome::new();
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

fn run_in(iso: &IsolatedHome, args: &[&str]) -> std::process::Output {
    iso.command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
        .args(args)
        .output()
        .unwrap()
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The reviewer's case: the older copy has a file the newer one lacks. The update still makes the
/// older copy equal to the newer one, but names the file (also with --dry-run) and keeps the
/// replaced copy outside the project.
#[test]
fn an_update_names_the_files_it_removes_and_keeps_the_replaced_copy() {
    let iso = IsolatedHome::new();
    let p = &iso.project;
    let six_years = 6 * 365 * 24 * 3600;
    write(
        &p.join(".claude/skills/s/SKILL.md"),
        "old skill\n",
        six_years,
    );
    write(
        &p.join(".claude/skills/s/notes.md"),
        "my notes\n",
        six_years,
    );
    write(&p.join(".agents/skills/s/SKILL.md"), "new skill\n", 10);

    let dry = run_in(&iso, &["extra", "sync-claude", "--dry-run"]);
    assert!(dry.status.success());
    let said = String::from_utf8_lossy(&dry.stdout);
    assert!(
        said.contains("would update .agents/skills/s -> .claude/skills/s"),
        "{said}"
    );
    assert!(
        said.contains("would remove .claude/skills/s/notes.md (.agents/skills/s does not have it)"),
        "{said}"
    );
    let dry = run_in(&iso, &["--json", "extra", "sync-claude", "--dry-run"]);
    let report: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
    let action = &report["actions"][0];
    assert_eq!(action["action"], "update");
    assert_eq!(
        action["removes"],
        serde_json::json!([p.join(".claude/skills/s/notes.md")])
    );
    assert_eq!(action["kept"], serde_json::Value::Null);
    assert!(
        p.join(".claude/skills/s/notes.md").is_file(),
        "--dry-run writes nothing"
    );

    let run = run_in(&iso, &["--json", "extra", "sync-claude"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let warned = String::from_utf8_lossy(&run.stderr);
    assert!(
        warned.contains(
            "warning: removed .claude/skills/s/notes.md (.agents/skills/s does not have it); the replaced copy is kept in "
        ),
        "{warned}"
    );
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let kept = PathBuf::from(report["actions"][0]["kept"].as_str().unwrap());
    assert!(warned.contains(&*kept.to_string_lossy()), "{warned}");
    assert!(
        kept.starts_with(iso.agentpack_home.join("projects")),
        "kept outside the project: {}",
        kept.display()
    );
    assert!(kept.ends_with(".claude/skills/s"));
    assert_eq!(
        std::fs::read_to_string(kept.join("notes.md")).unwrap(),
        "my notes\n"
    );
    assert_eq!(
        std::fs::read_to_string(kept.join("SKILL.md")).unwrap(),
        "old skill\n"
    );
    // The documented semantics: the older copy now equals the newer one.
    assert_eq!(names(&p.join(".claude/skills/s")), ["SKILL.md"]);
    assert_eq!(
        std::fs::read_to_string(p.join(".claude/skills/s/SKILL.md")).unwrap(),
        "new skill\n"
    );
    assert_eq!(names(&p.join(".claude/skills")), ["s"], "no temporary left");
    let again = run_in(&iso, &["--json", "extra", "sync-claude"]);
    let report: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(report["actions"], serde_json::json!([]));
}

/// A run that fails part-way (here: the replaced copy cannot be kept, after the first skill's copy
/// was already built) changes nothing.
#[test]
fn a_failed_run_leaves_both_directories_as_they_were() {
    let iso = IsolatedHome::new();
    let p = &iso.project;
    write(&p.join(".claude/skills/a/SKILL.md"), "only claude\n", 100);
    write(&p.join(".claude/skills/b/SKILL.md"), "newer\n", 10);
    write(&p.join(".agents/skills/b/SKILL.md"), "older\n", 500);
    write(&p.join(".agents/skills/b/extra.md"), "extra\n", 500);
    // Where replaced copies go cannot be created.
    std::fs::write(iso.agentpack_home.join("projects"), "in the way\n").unwrap();

    let run = run_in(&iso, &["extra", "sync-claude"]);
    assert!(!run.status.success());
    assert!(run.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&run.stderr).starts_with("error: "),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(names(&p.join(".agents/skills")), ["b"], "a was not copied");
    assert_eq!(names(&p.join(".agents/skills/b")), ["SKILL.md", "extra.md"]);
    assert_eq!(
        std::fs::read_to_string(p.join(".agents/skills/b/SKILL.md")).unwrap(),
        "older\n"
    );
    assert_eq!(names(&p.join(".claude/skills")), ["a", "b"]);
}
