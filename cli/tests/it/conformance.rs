//! The real agents are the oracle: what `agentpack sync` stages is loaded by Claude Code, Codex and
//! OpenCode themselves (pinned npm versions, offline, no login).
//!
//! The clients come from `AGENTPACK_TEST_AGENTS_BIN` (a `node_modules/.bin`; `.ci/run` installs them).
//! Outside CI the tests skip with a printed reason when it is unset; in CI (`CI` set) they fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // test code: a panic is a failure; skips are printed

use agentpack_test_support::{
    agents_bin, claude_init_stream, run_pinned, writable_layer, IsolatedHome,
};
use std::path::{Path, PathBuf};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// A project with the two example packages and a third with a rule and a second agent, synced.
fn synced_project() -> IsolatedHome {
    let home = IsolatedHome::new();
    let extra = home.project.parent().unwrap().join("team-rules");
    std::fs::create_dir_all(extra.join("rules")).unwrap();
    std::fs::create_dir_all(extra.join("agents")).unwrap();
    std::fs::write(
        extra.join("rules/style.mdc"),
        "---\ndescription: House style for Rust code\nglobs: \"**/*.rs\"\nalwaysApply: false\n---\n\nPrefer `thiserror` enums in libraries.\n",
    )
    .unwrap();
    std::fs::write(
        extra.join("agents/planner.md"),
        "---\nname: planner\ndescription: Plans a change before it is written.\ntools: Read, Grep\nmodel: sonnet\ncolor: green\n---\n\nWrite a short plan first.\n",
    )
    .unwrap();
    // A directory with a root SKILL.md is one skill (issue 13), so the skill sits in skills/.
    std::fs::create_dir_all(extra.join("skills/team-rules")).unwrap();
    std::fs::write(
        extra.join("skills/team-rules/SKILL.md"),
        "---\nname: team-rules\ndescription: The team's rules.\n---\n\nFollow them.\n",
    )
    .unwrap();
    let bin = assert_cmd::cargo::cargo_bin("agentpack");
    let run = |args: &[&str]| {
        let output = home.command(&bin, None).args(args).output().unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    run(&["init", "--name", "conformance"]);
    for package in [
        examples().join("hello-skill"),
        examples().join("review-plugin"),
        extra,
    ] {
        run(&["add", package.to_str().unwrap(), "--no-sync"]);
    }
    run(&["sync"]);
    home
}

fn staged(home: &IsolatedHome, tree: &str) -> PathBuf {
    home.staging_root.join("modes/default").join(tree)
}

#[test]
fn claude_code_validates_and_loads_the_staged_bundle() {
    let Some(bin) = agents_bin() else { return };
    let home = synced_project();
    let bundle = staged(&home, "plugins/agentpack-bundle");
    let out = run_pinned(
        &bin,
        &home,
        "claude",
        &["plugin", "validate", bundle.to_str().unwrap()],
        &[],
    );
    assert!(out.contains("Validation passed"), "{out}");
    // An unchanged skill directory is a link into its package. The validator does not follow it
    // and says so (it then lists no components); a --plugin-dir session does follow it.
    let linked = bundle.join("skills/hello-skill");
    assert!(
        std::fs::symlink_metadata(&linked)
            .unwrap()
            .file_type()
            .is_symlink(),
        "{} is not a link",
        linked.display()
    );
    assert!(out.contains("not read"), "{out}");

    // What a session loads: the init event names every skill, command and agent.
    let events = claude_init_stream(&bin, &home.home, &home.project, &bundle);
    let init = events.iter().find(|e| e["subtype"] == "init").unwrap();
    let listed = |key: &str| -> Vec<String> {
        init[key]
            .as_array()
            .unwrap_or_else(|| panic!("no {key} in {init}"))
            .iter()
            .filter_map(|name| name.as_str().map(str::to_owned))
            .collect()
    };
    let skills = listed("skills");
    for skill in ["hello-skill", "team-rules", "style"] {
        let name = format!("agentpack-bundle:{skill}");
        assert!(skills.contains(&name), "init lists no {name}: {skills:?}");
    }
    let commands = listed("slash_commands");
    assert!(
        commands.contains(&"agentpack-bundle:review".to_owned()),
        "{commands:?}"
    );
    let agents = listed("agents");
    for agent in ["reviewer", "planner"] {
        let name = format!("agentpack-bundle:{agent}");
        assert!(agents.contains(&name), "init lists no {name}: {agents:?}");
    }
}

#[test]
fn codex_lists_every_staged_skill() {
    let Some(bin) = agents_bin() else { return };
    let home = synced_project();
    let codex_home = home.home.join("codex-layer");
    writable_layer(&staged(&home, "codex-home"), &codex_home);
    let out = run_pinned(
        &bin,
        &home,
        "codex",
        &["debug", "prompt-input", "hi"],
        &[("CODEX_HOME", &codex_home)],
    );
    // Skills, commands (as skills), agents (as skills too) and the rule (as a skill).
    for expected in [
        "hello-skill",
        "team-rules",
        "review",
        "reviewer",
        "planner",
        "style",
    ] {
        // Codex lists each skill as `- <name>: <description> (file: <root>/<name>/SKILL.md)`.
        assert!(
            out.contains(&format!("- {expected}: "))
                && out.contains(&format!("/{expected}/SKILL.md)")),
            "codex does not list {expected}"
        );
    }
}

#[test]
fn opencode_loads_every_skill_agent_and_the_config() {
    let Some(bin) = agents_bin() else { return };
    let home = synced_project();
    let root = home.home.join("opencode-layer");
    writable_layer(&staged(&home, "opencode"), &root);
    let env = [("OPENCODE_CONFIG_DIR", root.as_path())];
    let skills = run_pinned(&bin, &home, "opencode", &["debug", "skill"], &env);
    for expected in ["hello-skill", "team-rules", "style"] {
        assert!(
            skills.contains(&format!("\"name\": \"{expected}\"")),
            "opencode does not load skill {expected}:\n{skills}"
        );
    }
    for agent in ["reviewer", "planner"] {
        let out = run_pinned(&bin, &home, "opencode", &["debug", "agent", agent], &env);
        assert!(out.contains(agent), "{out}");
    }
    let config = run_pinned(&bin, &home, "opencode", &["debug", "config"], &env);
    assert!(config.contains("agentpack-no-attribution.md"), "{config}");
}
