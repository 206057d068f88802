//! `AGENTPACK_LINK_MODE` asking for a mode the store's filesystem cannot do, through the real
//! `agentpack` binary: the files are copied and stderr carries one warning that names the variable
//! (docs/src/store.md, "a mode the filesystem cannot do falls back to copy with a warning that names the
//! variable"); `auto` falls back silently.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::path::Path;

use agentpack_test_support::{skill_md, skip, write_in, IsolatedHome, Run};

fn run(home: &IsolatedHome, mode: &str, args: &[&str]) -> String {
    let output = home
        .agentpack(args)
        .env("AGENTPACK_LINK_MODE", mode)
        .output()
        .unwrap();
    Run::new(args, output).assert_ok().stderr
}

/// Whether `dir`'s filesystem can clone files (then nothing falls back and the test has no subject).
fn reflink_works_in(dir: &Path) -> bool {
    let a = dir.join("probe-a");
    std::fs::write(&a, b"probe").unwrap();
    let works = std::process::Command::new("cp")
        .arg("--reflink=always")
        .arg(&a)
        .arg(dir.join("probe-b"))
        .output()
        .is_ok_and(|out| out.status.success());
    let _ = std::fs::remove_file(dir.join("probe-b"));
    std::fs::remove_file(a).unwrap();
    works
}

const WARNING: &str = "AGENTPACK_LINK_MODE=reflink";

#[test]
fn reflink_on_a_filesystem_without_clones_warns_once_naming_the_variable() {
    let home = IsolatedHome::new();
    if reflink_works_in(&home.agentpack_home) {
        skip("the temp dir's filesystem supports reflinks, so nothing falls back");
        return;
    }
    let package = home.project.parent().unwrap().join("pkg");
    for name in ["one", "two", "three"] {
        write_in(
            &package,
            &format!("skills/{name}/SKILL.md"),
            &skill_md(name),
        );
    }
    run(&home, "auto", &["init", "--name", "demo"]);
    // `add` locks and syncs: the package and the generation are published by reflink, which ext4
    // cannot do, so they are copied; one warning says so and names the variable.
    let stderr = run(&home, "reflink", &["add", "../pkg"]);
    assert_eq!(stderr.matches(WARNING).count(), 1, "{stderr}");
    assert!(
        stderr.contains("cannot reflink") && stderr.contains("AGENTPACK_LINK_MODE=auto or copy"),
        "{stderr}"
    );
    let slot_file = home
        .staging_root
        .join("modes/default/plugins/agentpack-bundle/skills/one/SKILL.md");
    assert_eq!(
        std::fs::read_to_string(&slot_file).unwrap(),
        skill_md("one")
    );

    // A change publishes again: the warning comes again in the next command, once.
    write_in(&package, "skills/four/SKILL.md", &skill_md("four"));
    let stderr = run(&home, "reflink", &["sync"]);
    assert_eq!(stderr.matches(WARNING).count(), 1, "{stderr}");

    // `auto` falls back from reflink silently (hard links are what it settles on).
    write_in(&package, "skills/five/SKILL.md", &skill_md("five"));
    let stderr = run(&home, "auto", &["sync"]);
    assert!(!stderr.contains("AGENTPACK_LINK_MODE"), "{stderr}");
}
