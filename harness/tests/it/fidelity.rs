//! Staged packages work like a native install (issue 13): the fidelity corpus
//! (`tests/fixtures/fidelity/`) rendered for every agent, one package per bullet of the issue:
//! `rooted` (plugin-root references, an executable script), `first` and `second` (collisions of
//! every kind, hooks for Grok), `creator` and `rootskill` (a skill's own subdirectories), `small`
//! (the smaller conversion defects). Each agent's plan is snapshotted; the tests below name what
//! each bullet requires.

#![allow(clippy::unwrap_used)] // tests may unwrap (HELPERS.md)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use agentpack_harness::{
    render_generation, Agent, GenerationPlan, ModeBase, ModeFilter, PackageInput, PlanEntry,
    RenderOptions, StageInputs,
};
use indexmap::IndexMap;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fidelity");
const GENERATION: &str = "/store/gen-1";

fn package(name: &str, key: char, kind: &str, executables: &[&str]) -> PackageInput {
    let module = format!("github.com/acme/{name}");
    PackageInput {
        module: module.clone(),
        cache_key: key.to_string().repeat(64),
        owner: "acme".into(),
        repo: name.into(),
        path: String::new(),
        commit: "1".repeat(40),
        kind: kind.into(),
        root: Path::new(FIXTURES).join(name),
        filter: ModeFilter::new(ModeBase::All, &[], &[])
            .unwrap()
            .package_filter(&module),
        executables: executables.iter().map(|s| s.to_string()).collect(),
    }
}

fn inputs(packages: Vec<PackageInput>) -> StageInputs {
    StageInputs {
        packages,
        overlay: None,
        mcp_servers: IndexMap::new(),
        mcp_launch: BTreeMap::new(),
        mode: ModeFilter::new(ModeBase::All, &[], &[]).unwrap(),
        listings: Default::default(),
        options: RenderOptions {
            keep_attribution: true,
            dot_agents_enabled: false,
            yolo: false,
            agentpack_exe: PathBuf::from("/opt/agentpack/bin/agentpack"),
            generation_root: PathBuf::from(GENERATION),
            plugin_data_root: PathBuf::from("/home/u/.agentpack/projects/p/plugin-data"),
        },
    }
}

/// The whole corpus, layered `first` before `second`.
fn corpus() -> StageInputs {
    inputs(vec![
        package("first", '1', "plugin", &["hooks/start.sh"]),
        package("second", '2', "plugin", &["hooks/start.sh"]),
        package("creator", '3', "plugin", &[]),
        package("rootskill", '4', "skill", &[]),
        package("small", '5', "plugin", &[]),
        package("rooted", '6', "plugin", &["scripts/x.sh"]),
    ])
}

fn render(inputs: &StageInputs) -> GenerationPlan {
    render_generation(inputs, &Agent::ALL).unwrap()
}

fn text(plan: &GenerationPlan, agent: Agent, path: &str) -> String {
    let entries = &plan.agents[&agent].entries;
    match entries
        .get(path)
        .unwrap_or_else(|| panic!("{agent:?} has no {path}: {:#?}", entries.keys()))
    {
        PlanEntry::Bytes(bytes) => String::from_utf8(bytes.clone()).unwrap(),
        PlanEntry::FromFile { source, .. } => fs_err::read_to_string(source).unwrap(),
        PlanEntry::Symlink(target) => panic!("{path} is a link to {}", target.display()),
    }
}

fn describe(plan: &GenerationPlan, agent: Agent) -> String {
    let agent_plan = &plan.agents[&agent];
    let mut out = String::new();
    for (path, entry) in &agent_plan.entries {
        match entry {
            PlanEntry::FromFile { source, executable } => {
                let shown = source.strip_prefix(FIXTURES).unwrap_or(source);
                let x = if *executable { " (executable)" } else { "" };
                out.push_str(&format!("{path} <- {}{x}\n", shown.display()));
            }
            PlanEntry::Symlink(target) => {
                out.push_str(&format!("{path} -> {}\n", target.display()))
            }
            PlanEntry::Bytes(bytes) => {
                out.push_str(&format!("{path}:\n"));
                for line in String::from_utf8_lossy(bytes).lines() {
                    out.push_str(&format!("  | {line}\n"));
                }
            }
        }
    }
    out.push_str("warnings:\n");
    for warning in &agent_plan.warnings {
        out.push_str(&format!("  - {warning}\n"));
    }
    out.push_str("collisions:\n");
    for collision in &agent_plan.collisions {
        out.push_str(&format!(
            "  - {} {}: kept by {}, {} renamed to {}\n",
            collision.clash,
            collision.path,
            collision.kept_by,
            collision.renamed_from,
            collision.renamed_to
        ));
    }
    out.replace(FIXTURES, "<fidelity>")
}

#[test]
fn every_agent_plan_of_the_corpus_matches_its_snapshot() {
    let plan = render(&corpus());
    for agent in Agent::ALL {
        insta::assert_snapshot!(
            format!("fidelity_{}", agent.as_str()),
            describe(&plan, agent)
        );
    }
    let mut shared = String::new();
    for (path, entry) in &plan.shared.entries {
        if let PlanEntry::FromFile { executable, .. } = entry {
            let x = if *executable { " (executable)" } else { "" };
            shared.push_str(&format!("{path}{x}\n"));
        }
    }
    shared.push_str("warnings:\n");
    for warning in &plan.warnings {
        shared.push_str(&format!("  - {warning}\n"));
    }
    insta::assert_snapshot!("fidelity_shared", shared.replace(FIXTURES, "<fidelity>"));
}

// Build 1: executable files stay executable.
#[test]
fn source_executables_are_staged_executable_everywhere() {
    let plan = render(&corpus());
    let shared = &plan.shared.entries;
    let executable = |path: &str| match shared.get(path) {
        Some(PlanEntry::FromFile { executable, .. }) => *executable,
        other => panic!("{path}: {other:?}"),
    };
    assert!(executable(&format!(
        "plugin-roots/{}/scripts/x.sh",
        "6".repeat(16)
    )));
    assert!(executable(&format!(
        "plugin-roots/{}/hooks/start.sh",
        "1".repeat(16)
    )));
    assert!(!executable(&format!(
        "plugin-roots/{}/hooks/hooks.json",
        "1".repeat(16)
    )));
}

// Build 2: plugin-root references resolve to the package's own staged copy.
#[test]
fn plugin_root_references_name_the_packages_staged_copy_for_every_agent() {
    let plan = render(&corpus());
    let own = format!("{GENERATION}/plugin-roots/{}/scripts/x.sh", "6".repeat(16));
    let staged = [
        (
            Agent::Claude,
            "plugins/agentpack-bundle/skills/use-script/SKILL.md",
        ),
        (Agent::Claude, "plugins/agentpack-bundle/commands/go.md"),
        (Agent::Claude, "plugins/agentpack-bundle/agents/helper.md"),
        (
            Agent::Claude,
            "plugins/agentpack-bundle/skills/uses-script/SKILL.md",
        ),
        (Agent::Cursor, "cursor/agentpack-bundle/commands/go.md"),
        (
            Agent::Cursor,
            "cursor/agentpack-bundle/rules/uses-script.mdc",
        ),
        (Agent::OpenCode, "opencode/agents/helper.md"),
        (Agent::Codex, "codex-home/skills/go/SKILL.md"),
        (Agent::Codex, "codex-home/agents/helper.toml"),
        (
            Agent::Grok,
            "grok/agentpack-bundle/skills/use-script/SKILL.md",
        ),
        (
            Agent::Antigravity,
            "agy/agentpack-bundle/rules/uses-script.md",
        ),
    ];
    for (agent, path) in staged {
        let text = text(&plan, agent, path);
        assert!(text.contains(&own), "{agent:?} {path}:\n{text}");
        assert!(!text.contains("PLUGIN_ROOT}"), "{agent:?} {path}:\n{text}");
    }
    // The package's copy holds what the references reach.
    assert!(plan
        .shared
        .entries
        .contains_key(&format!("plugin-roots/{}/scripts/x.sh", "6".repeat(16))));
}

// Build 3: collisions keep both.
#[test]
fn different_files_under_one_name_are_both_staged_and_identical_ones_once() {
    let plan = render(&corpus());
    for agent in [Agent::Claude, Agent::Grok, Agent::Antigravity] {
        let root = match agent {
            Agent::Claude => "plugins/agentpack-bundle",
            Agent::Grok => "grok/agentpack-bundle",
            Agent::Antigravity => "agy/agentpack-bundle",
            Agent::Cursor | Agent::OpenCode | Agent::Codex => unreachable!("not in the list"),
        };
        let kept = text(&plan, agent, &format!("{root}/agents/reviewer.md"));
        assert!(kept.contains("Find the bugs."), "{kept}");
        let renamed = text(&plan, agent, &format!("{root}/agents/first-reviewer.md"));
        assert!(renamed.contains("name: first-reviewer"), "{renamed}");
        assert!(renamed.contains("Check the style."), "{renamed}");
        // Identical bytes: one copy, no warning.
        assert!(plan.agents[&agent]
            .entries
            .contains_key(&format!("{root}/commands/same.md")));
        assert!(!plan.agents[&agent]
            .entries
            .keys()
            .any(|k| k.contains("first-same") || k.contains("second-same")));
        let warnings = &plan.agents[&agent].warnings;
        assert!(
            !warnings.iter().any(|w| w.contains("`same`")),
            "{warnings:?}"
        );
        let about_reviewer: Vec<_> = warnings
            .iter()
            .filter(|w| w.contains("`reviewer`"))
            .collect();
        assert_eq!(about_reviewer.len(), 1, "{warnings:?}");
        assert!(
            about_reviewer[0].contains("github.com/acme/first")
                && about_reviewer[0].contains("github.com/acme/second"),
            "{about_reviewer:?}"
        );
    }
    // Codex: the custom agent and its skill fallback are both kept on each side.
    let codex = &plan.agents[&Agent::Codex].entries;
    for path in [
        "codex-home/agents/reviewer.toml",
        "codex-home/agents/first-reviewer.toml",
        "codex-home/skills/reviewer/SKILL.md",
        "codex-home/skills/first-reviewer/SKILL.md",
    ] {
        assert!(codex.contains_key(path), "{path}: {:#?}", codex.keys());
    }
    assert!(
        text(&plan, Agent::Codex, "codex-home/agents/first-reviewer.toml")
            .contains("name = \"first-reviewer\"")
    );
    assert!(text(
        &plan,
        Agent::Codex,
        "codex-home/skills/first-reviewer/SKILL.md"
    )
    .contains("name: first-reviewer"));
    // OpenCode: the agent's file name is its name.
    assert!(
        text(&plan, Agent::OpenCode, "opencode/agents/first-reviewer.md")
            .contains("Check the style.")
    );
}

#[test]
fn a_skill_and_a_command_of_two_packages_under_one_name_are_both_kept() {
    let plan = render(&corpus());
    let claude = &plan.agents[&Agent::Claude];
    assert!(claude
        .entries
        .contains_key("plugins/agentpack-bundle/commands/configure.md"));
    let renamed = text(
        &plan,
        Agent::Claude,
        "plugins/agentpack-bundle/skills/first-configure/SKILL.md",
    );
    assert!(renamed.contains("name: first-configure"), "{renamed}");
    assert!(!claude
        .entries
        .contains_key("plugins/agentpack-bundle/skills/configure/SKILL.md"));
    let collision = claude
        .collisions
        .iter()
        .find(|c| c.clash == "invocation")
        .unwrap();
    assert_eq!(collision.path, "skills/configure");
    assert_eq!(collision.kept_by, "github.com/acme/second");
    assert_eq!(collision.renamed_from, "github.com/acme/first");
    assert_eq!(collision.renamed_to, "skills/first-configure");
    // Codex gets the command as a skill: the same path, resolved the same way.
    assert!(
        text(&plan, Agent::Codex, "codex-home/skills/configure/SKILL.md")
            .contains("Second's configure command.")
    );
    assert!(text(
        &plan,
        Agent::Codex,
        "codex-home/skills/first-configure/SKILL.md"
    )
    .contains("First's configure skill."));
}

#[test]
fn the_overlay_replacing_a_package_file_is_an_override_not_a_collision() {
    let dir = tempfile::tempdir().unwrap();
    let overlay = dir.path().join(".agents");
    fs_err::create_dir_all(overlay.join("agents")).unwrap();
    fs_err::write(
        overlay.join("agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Ours.\n---\n\nOur review.\n",
    )
    .unwrap();
    let mut inputs = inputs(vec![package("second", '2', "plugin", &[])]);
    inputs.overlay = Some(agentpack_harness::OverlayInput {
        root: overlay,
        filter: inputs.mode.overlay_filter(),
    });
    inputs.options.dot_agents_enabled = true;
    let plan = render(&inputs);
    let claude = &plan.agents[&Agent::Claude];
    assert!(claude.collisions.is_empty(), "{:?}", claude.collisions);
    assert!(text(
        &plan,
        Agent::Claude,
        "plugins/agentpack-bundle/agents/reviewer.md"
    )
    .contains("Our review."));
    assert!(!claude.entries.keys().any(|k| k.contains("second-reviewer")));
}

// Build 4: a directory with a root SKILL.md is one skill.
#[test]
fn a_skills_own_subdirectories_are_its_files_never_artifacts() {
    let plan = render(&corpus());
    for agent in Agent::ALL {
        let keys: BTreeSet<&String> = plan.agents[&agent].entries.keys().collect();
        for artifact in ["analyzer", "grader", "run"] {
            assert!(
                !keys.iter().any(|k| {
                    let leaf = k.rsplit('/').next().unwrap();
                    (k.contains("/agents/") || k.contains("/commands/"))
                        && !k.contains("/skills/")
                        && leaf.starts_with(artifact)
                }),
                "{agent:?} stages {artifact} as an artifact: {keys:#?}"
            );
        }
    }
    let claude = &plan.agents[&Agent::Claude].entries;
    for path in [
        "plugins/agentpack-bundle/skills/rootskill/agents/analyzer.md",
        "plugins/agentpack-bundle/skills/rootskill/commands/run.md",
        "plugins/agentpack-bundle/skills/skill-creator/agents/grader.md",
    ] {
        assert!(claude.contains_key(path), "{path}: {:#?}", claude.keys());
    }
}

// Build 9: the smaller conversion defects.
#[test]
fn a_name_a_skill_cannot_hold_is_changed_with_a_warning() {
    let plan = render(&corpus());
    let codex = &plan.agents[&Agent::Codex];
    assert!(codex
        .entries
        .contains_key("codex-home/skills/clean-gone/SKILL.md"));
    assert!(
        codex
            .warnings
            .iter()
            .any(|w| w.contains("`clean_gone`") && w.contains("`clean-gone`")),
        "{:?}",
        codex.warnings
    );
}

#[test]
fn opencode_keeps_css_colour_names_and_parenthesised_tool_lists() {
    let plan = render(&corpus());
    let painter = text(&plan, Agent::OpenCode, "opencode/agents/painter.md");
    assert!(painter.contains("color: '#ff00ff'"), "{painter}");
    assert!(
        painter.contains("task: true") && painter.contains("read: true"),
        "{painter}"
    );
    let warnings = &plan.agents[&Agent::OpenCode].warnings;
    assert!(
        !warnings
            .iter()
            .any(|w| w.contains("painter") && (w.contains("planner)") || w.contains("magenta"))),
        "{warnings:?}"
    );
}

#[test]
fn antigravity_markdown_rules_with_always_apply_are_always_on() {
    let plan = render(&corpus());
    let rule = text(
        &plan,
        Agent::Antigravity,
        "agy/agentpack-bundle/rules/always.md",
    );
    assert!(rule.contains("trigger: always_on"), "{rule}");
    assert!(!rule.contains("alwaysApply"), "{rule}");
    assert!(rule.ends_with("Always.\n"), "{rule}");
}

#[test]
fn a_manifests_conventional_default_and_a_copied_mcp_json_warn_nothing() {
    let plan = render(&corpus());
    let all: Vec<&String> = plan
        .warnings
        .iter()
        .chain(plan.agents.values().flat_map(|p| p.warnings.iter()))
        .collect();
    assert!(
        !all.iter()
            .any(|w| w.contains("does not exist in the package")),
        "{all:#?}"
    );
    let broken: Vec<_> = all.iter().filter(|w| w.contains("`broken`")).collect();
    assert_eq!(broken.len(), 1, "{all:#?}");
    // A declared path that is not the default still warns when it is missing.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("declared");
    fs_err::create_dir_all(root.join(".claude-plugin")).unwrap();
    fs_err::write(
        root.join(".claude-plugin/plugin.json"),
        r#"{"name": "declared", "skills": "./custom-skills/"}"#,
    )
    .unwrap();
    let mut declared = package("declared", '7', "plugin", &[]);
    declared.root = root;
    let plan = render(&inputs(vec![declared]));
    assert!(
        plan.warnings
            .iter()
            .any(|w| w.contains("`custom-skills` does not exist")),
        "{:?}",
        plan.warnings
    );
}

// Build 6: Grok gets the hooks of every package.
#[test]
fn grok_gets_the_hooks_of_every_package_merged_with_their_own_roots() {
    let plan = render(&corpus());
    let hooks: serde_json::Value = serde_json::from_str(&text(
        &plan,
        Agent::Grok,
        "grok/agentpack-bundle/hooks/hooks.json",
    ))
    .unwrap();
    let session_start = hooks["hooks"]["SessionStart"].as_array().unwrap();
    let commands: Vec<&str> = session_start
        .iter()
        .map(|group| group["hooks"][0]["command"].as_str().unwrap())
        .collect();
    assert_eq!(
        commands,
        vec![
            format!(
                "{GENERATION}/plugin-roots/{}/hooks/start.sh first",
                "1".repeat(16)
            ),
            format!(
                "{GENERATION}/plugin-roots/{}/hooks/start.sh second",
                "2".repeat(16)
            ),
        ],
        "{hooks:#}"
    );
    assert_eq!(
        hooks["hooks"]["Stop"][0]["hooks"][0]["command"],
        "echo stop"
    );
    assert!(!plan.agents[&Agent::Grok]
        .warnings
        .iter()
        .any(|w| w.contains("replaces")));
    // The scripts they call are staged, executable, in each package's copy.
    for key in ['1', '2'] {
        let script = format!("plugin-roots/{}/hooks/start.sh", key.to_string().repeat(16));
        assert!(matches!(
            plan.shared.entries.get(&script),
            Some(PlanEntry::FromFile {
                executable: true,
                ..
            })
        ));
    }
}
