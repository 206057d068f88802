//! `source_digest` and `rendered_digest` of rules and of `./.agents/` artifacts, through the real
//! binary. The expected digests are computed here from the bytes the test wrote (sources) or from
//! the files `agentpack sync` staged (rendered), with the encoding docs/src/preflight.md gives,
//! independently of the implementation; and every preflight changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::path::{Path, PathBuf};

use agentpack_test_support::{agentpack_bin, write, IsolatedHome};

// The digest encoding of docs/src/preflight.md, written independently of the implementation.
use crate::preflight::framed_digest as framed;
use crate::preflight::unchanged;
use serde_json::{json, Value};

const RULE: &str =
    "---\ndescription: House style\nalwaysApply: true\n---\nWrite short sentences.\n";
const LOCAL_SKILL: &str =
    "---\nname: local-notes\ndescription: Notes kept in the checkout.\n---\nTake notes.\n";
const LOCAL_SCRIPT: &str = "#!/bin/sh\necho notes\n";

struct Fixture {
    home: IsolatedHome,
}

impl Fixture {
    /// A path package with the rule `style` and the skill `lint`, and a `.agents/` overlay with the
    /// skill `local-notes`; locked and synced.
    fn synced() -> Self {
        let home = IsolatedHome::new();
        let pkg = home.project.join("pkg");
        write(&pkg.join("rules/style.mdc"), RULE);
        write(
            &pkg.join("skills/lint/SKILL.md"),
            "---\nname: lint\ndescription: Lint the code.\n---\nLint.\n",
        );
        write(
            &home.project.join(".agents/skills/local-notes/SKILL.md"),
            LOCAL_SKILL,
        );
        write(
            &home
                .project
                .join(".agents/skills/local-notes/scripts/notes.sh"),
            LOCAL_SCRIPT,
        );
        write(
            &home.project.join("agentpack.toml"),
            "name = \"sources\"\nversion = \"0.1.0\"\n\n[dependencies]\n\"house\" = { path = \"pkg\" }\n",
        );
        let fixture = Self { home };
        let sync = fixture.agentpack(&["sync"]);
        assert!(
            sync.status.success(),
            "{}",
            String::from_utf8_lossy(&sync.stderr)
        );
        fixture
    }

    fn agentpack(&self, args: &[&str]) -> std::process::Output {
        self.home
            .command(&agentpack_bin(), None)
            .args(args)
            .output()
            .unwrap()
    }

    /// `preflight --agent AGENT --json` with `contract`: the exit code and the report; asserts it
    /// changed nothing.
    fn preflight(&self, agent: &str, contract: &Value) -> (i32, Value) {
        std::fs::write(
            self.home.project.join("contract.json"),
            serde_json::to_vec(contract).unwrap(),
        )
        .unwrap();
        let output = unchanged(&self.home, &[], || {
            self.agentpack(&["preflight", "--agent", agent, "--json"])
        });
        let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!("no JSON ({e}): {}", String::from_utf8_lossy(&output.stderr))
        });
        (output.status.code().unwrap(), report)
    }

    /// The staged generation of the default mode.
    fn generation(&self) -> PathBuf {
        let pointer = self.home.staging_root.join("modes/default");
        let target = std::fs::read_link(&pointer).unwrap();
        pointer.parent().unwrap().join(target)
    }
}

/// The staged files below `generation` whose relative path satisfies `wanted`.
fn staged(generation: &Path, wanted: &dyn Fn(&str) -> bool) -> Vec<(String, Vec<u8>)> {
    let mut found = Vec::new();
    let mut pending = vec![generation.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let relative = path
                .strip_prefix(generation)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if wanted(&relative) {
                found.push((relative, std::fs::read(&path).unwrap()));
            }
        }
    }
    found
}

fn requirement(id: &str, category: &str, name: &str, property: &str, expected: &str) -> Value {
    json!({"id": id, "target": "TARGET", "predicate": "equals",
        "selector": {"category": category, "name": name, "property": property},
        "expected": expected,
        // Sources are declared evidence (a rule's source too); the plan's bytes are generated.
        "minimum_evidence": if property.starts_with("source") { "declared" } else { "generated" }})
}

fn contract(agent: &str, requirements: Vec<Value>) -> Value {
    let requirements: Vec<Value> = requirements
        .into_iter()
        .map(|mut r| {
            r["target"] = json!(agent);
            r
        })
        .collect();
    json!({"schema_version": 1, "requirements": requirements})
}

fn outcome<'r>(report: &'r Value, id: &str) -> &'r Value {
    report["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no outcome {id}: {report:#}"))
}

#[test]
fn a_rules_source_digest_is_its_file_and_cursor_renders_it_as_a_rule() {
    let fixture = Fixture::synced();
    let source = framed(vec![("style.mdc".into(), RULE.as_bytes().to_vec())]);
    let rendered = framed(staged(&fixture.generation(), &|p| {
        p.starts_with("cursor/") && p.ends_with("/rules/style.mdc")
    }));
    assert!(rendered.starts_with("sha256:"));
    let requirements = vec![
        requirement("style-source", "rule", "style", "source_digest", &source),
        requirement(
            "style-rendered",
            "rule",
            "style",
            "rendered_digest",
            &rendered,
        ),
        requirement("style-from", "rule", "style", "source", "house"),
    ];
    let (code, report) = fixture.preflight("cursor", &contract("cursor", requirements.clone()));
    assert_eq!(code, 0, "{report:#}");
    for id in ["style-source", "style-rendered", "style-from"] {
        assert_eq!(outcome(&report, id)["status"], "satisfied", "{report:#}");
    }
    assert_eq!(outcome(&report, "style-source")["evidence"], "declared");
    assert_eq!(outcome(&report, "style-rendered")["evidence"], "generated");
    // Other bytes fail with exit 3.
    let wrong = vec![requirement(
        "style-source",
        "rule",
        "style",
        "source_digest",
        "sha256:00",
    )];
    let (code, report) = fixture.preflight("cursor", &contract("cursor", wrong));
    assert_eq!(code, 3, "{report:#}");
    // Claude Code has no rules: the source digest is the same, the rendered one is unknown
    // (exit 4), never a guess.
    let (code, report) = fixture.preflight("claude", &contract("claude", requirements));
    assert_eq!(code, 4, "{report:#}");
    assert_eq!(outcome(&report, "style-source")["status"], "satisfied");
    let unknown = outcome(&report, "style-rendered");
    assert_eq!(unknown["status"], "unknown", "{report:#}");
    assert!(
        unknown["message"].as_str().unwrap().contains("skill"),
        "{unknown}"
    );
}

#[test]
fn an_overlay_skill_has_a_source_digest_and_is_planned_only_where_staging_merges_it() {
    let fixture = Fixture::synced();
    let source = framed(vec![
        ("SKILL.md".into(), LOCAL_SKILL.as_bytes().to_vec()),
        ("scripts/notes.sh".into(), LOCAL_SCRIPT.as_bytes().to_vec()),
    ]);
    let rendered = framed(staged(&fixture.generation(), &|p| {
        p.starts_with("plugins/agentpack-bundle/skills/local-notes/")
    }));
    let requirements = vec![
        requirement(
            "notes-source",
            "skill",
            "local-notes",
            "source_digest",
            &source,
        ),
        requirement(
            "notes-rendered",
            "skill",
            "local-notes",
            "rendered_digest",
            &rendered,
        ),
    ];
    // Claude Code's bundle merges the overlay: both digests are known and hold, and the checkout
    // holds the name (the scan's `winner`).
    let mut claude = requirements.clone();
    claude.push(
        json!({"id": "notes-winner", "target": "claude", "predicate": "source_allowed",
        "selector": {"category": "skill", "name": "local-notes", "property": "winner"},
        "expected": "workspace"}),
    );
    let (code, report) = fixture.preflight("claude", &contract("claude", claude));
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(outcome(&report, "notes-source")["status"], "satisfied");
    assert_eq!(outcome(&report, "notes-rendered")["status"], "satisfied");
    assert_eq!(outcome(&report, "notes-winner")["status"], "satisfied");
    // OpenCode's launcher seeds .agents/ by its own route: the declared source digest is known,
    // its presence and rendered bytes in the plan are unknown, not false.
    let mut opencode = requirements;
    opencode.push(
        json!({"id": "notes-present", "target": "opencode", "predicate": "present",
        "selector": {"category": "skill", "name": "local-notes"}}),
    );
    let (code, report) = fixture.preflight("opencode", &contract("opencode", opencode));
    assert_eq!(code, 4, "{report:#}");
    assert_eq!(outcome(&report, "notes-source")["status"], "satisfied");
    assert_eq!(outcome(&report, "notes-rendered")["status"], "unknown");
    assert_eq!(outcome(&report, "notes-present")["status"], "unknown");
}
