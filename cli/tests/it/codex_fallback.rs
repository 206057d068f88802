//! Codex gets an agent once: as the custom agent `agents/<name>.toml`, which the launched Codex
//! loads, while the agent's skill fallback stays in the generation and out of the launch's home.
//! And a sync says once, with the count, when the skills staged for Codex overflow the budget
//! Codex gives skill descriptions (it would shorten them).
//!
//! The real-client tests use Codex 0.171.0 from `AGENTPACK_TEST_AGENTS_BIN` (a `node_modules/.bin`
//! directory, set by CI after `npm install`): `agentpack --yolo codex debug prompt-input hi`, an
//! offline probe. Without it they are skipped with a printed reason, unless `CI` is set, where
//! they fail.

#![allow(clippy::unwrap_used, clippy::print_stderr)] // tests may unwrap and say why they skip (HELPERS.md)

use agentpack_test_support::{agents_bin, demo_plugin, write, IsolatedHome};
use std::path::Path;

/// A 220-character description, like the ones the budget was measured with.
fn long_description(i: usize) -> String {
    let text = format!("Skill number {i:03} of the budget fixture. ");
    let mut description: String = text.repeat(8).chars().take(219).collect();
    description.push('.');
    description
}

/// A project with one local package: `skills` skills with 220-character descriptions, a skill
/// `demo-skill` and, when `with_agent`, the agent `zeta-reviewer`.
fn project(skills: usize, with_agent: bool) -> IsolatedHome {
    let iso = IsolatedHome::new();
    let pkg = iso.project.join("pkg");
    demo_plugin(&pkg, "A demo skill staged by agentpack.");
    for i in 1..=skills {
        write(
            &pkg.join(format!("skills/s-{i:03}/SKILL.md")),
            &format!(
                "---\nname: s-{i:03}\ndescription: {}\n---\nBody.\n",
                long_description(i)
            ),
        );
    }
    if with_agent {
        write(
            &pkg.join("agents/zeta-reviewer.md"),
            "---\nname: zeta-reviewer\ndescription: Reviews code for the zeta fixture.\n---\nReview carefully.\n",
        );
    }
    write(
        &iso.project.join("agentpack.toml"),
        "name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\n\"demo\" = { path = \"pkg\" }\n",
    );
    iso
}

/// `agentpack <args>` in the isolated home, with `bin` (if any) first on `PATH`.
fn agentpack(iso: &IsolatedHome, bin: Option<&Path>, args: &[&str]) -> String {
    let path = match bin {
        Some(bin) => format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
        None => std::env::var("PATH").unwrap_or_default(),
    };
    let output = iso
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

const SHORTENING: &str = "so Codex will shorten them";

#[test]
fn a_sync_says_once_with_the_count_when_codex_will_shorten_descriptions() {
    // 160 skills of 220 characters (+ demo-skill): Codex 0.171.0 shortens them (measured).
    let big = project(160, false);
    let out = agentpack(&big, None, &["sync"]);
    assert_eq!(out.matches(SHORTENING).count(), 1, "{out}");
    assert!(
        out.contains("codex: 161 skills are staged for Codex"),
        "{out}"
    );

    // 100 of them fit whole, and an agent's fallback skill does not count (a launch leaves it out).
    let small = project(100, true);
    let out = agentpack(&small, None, &["sync"]);
    assert_eq!(out.matches(SHORTENING).count(), 0, "{out}");
}

#[test]
fn the_generation_keeps_the_fallback_skill_and_lists_it() {
    let iso = project(0, true);
    agentpack(&iso, None, &["sync"]);
    let codex_home = iso.staging_root.join("modes/default/codex-home");
    assert!(codex_home.join("agents/zeta-reviewer.toml").is_file());
    let fallback =
        std::fs::read_to_string(codex_home.join("skills/zeta-reviewer/SKILL.md")).unwrap();
    assert!(
        fallback.contains("from the subagent `zeta-reviewer`"),
        "{fallback}"
    );
    let list = std::fs::read_to_string(codex_home.join(".agentpack-agent-fallbacks")).unwrap();
    assert_eq!(list, "zeta-reviewer\n");
}

#[test]
fn a_launched_codex_loads_the_custom_agent_and_not_its_fallback_skill() {
    let Some(bin) = agents_bin() else { return };
    let iso = project(0, true);
    let out = agentpack(
        &iso,
        Some(&bin),
        &["--yolo", "codex", "debug", "prompt-input", "hi"],
    );
    // The custom agent is a role of Codex's `spawn_agent` tool...
    assert!(
        out.contains("zeta-reviewer: {\\nReviews code for the zeta fixture."),
        "codex does not load the custom agent:\n{out}"
    );
    // ...and not a skill too, while the package's skill is listed.
    assert!(out.contains("- demo-skill: "), "{out}");
    assert!(
        !out.contains("- zeta-reviewer: ") && !out.contains("zeta-reviewer/SKILL.md"),
        "the fallback skill is listed too:\n{out}"
    );
}

#[test]
fn a_launched_codex_shortens_descriptions_exactly_when_the_sync_said_so() {
    let Some(bin) = agents_bin() else { return };
    // Near the edge of the budget (with demo-skill): 150 fit whole, 154 do not.
    for (skills, shortened) in [(150, false), (154, true)] {
        let iso = project(skills, false);
        let out = agentpack(
            &iso,
            Some(&bin),
            &["--yolo", "codex", "debug", "prompt-input", "hi"],
        );
        assert_eq!(
            out.contains(SHORTENING),
            shortened,
            "{skills} skills:\n{out}"
        );
        let whole = (1..=skills)
            .filter(|&i| out.contains(&format!("- s-{i:03}: {} (file: ", long_description(i))))
            .count();
        if shortened {
            assert!(
                whole < skills,
                "codex kept every description of {skills} skills"
            );
        } else {
            assert_eq!(
                whole, skills,
                "codex shortened some of {skills} descriptions"
            );
        }
    }
}
