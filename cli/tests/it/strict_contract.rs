//! Contracts at launch and declared inheritance, through the real `agentpack` binary: a strict
//! external launch evaluates `contract.json` beside the definition for its agent after staging and
//! refuses to start the agent on a violation (exit 3) or a required unknown (exit 4), naming the
//! requirement; without a contract, or without `--strict-external`, it launches as before. The
//! agent is a stand-in script (`CLAUDE_PATH`) that records that it ran. And `inheritance.allow` in
//! a contract turns a declared inherited place into an info finding, never a violation.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::Output;

use agentpack_test_support::{write, IsolatedHome};

use crate::preflight::unchanged;
use serde_json::{json, Value};

/// The stand-in Claude Code: records that it ran, and with which arguments.
const STANDIN: &str = "#!/bin/sh\nprintf 'ran %s\\n' \"$*\" >> \"$STANDIN_MARK\"\nexit 0\n";

struct Fixture {
    iso: IsolatedHome,
    standin: PathBuf,
    mark: PathBuf,
}

impl Fixture {
    /// A project with one path package (the skill `demo-skill`), and a stand-in agent.
    fn new() -> Self {
        let iso = IsolatedHome::new();
        let root = iso.project.parent().unwrap().to_path_buf();
        let standin = root.join("bin/claude-standin");
        write(&standin, STANDIN);
        std::fs::set_permissions(&standin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mark = root.join("ran.txt");
        write(
            &iso.project.join("pkg/skills/demo-skill/SKILL.md"),
            "---\nname: demo-skill\ndescription: A demo skill for the strict contract tests.\n---\nSay DEMO.\n",
        );
        write(
            &iso.project.join("agentpack.toml"),
            "name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\n\"demo\" = { path = \"pkg\" }\n",
        );
        Self { iso, standin, mark }
    }

    fn agentpack(&self, args: &[&str]) -> Output {
        self.iso
            .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
            .env("CLAUDE_PATH", &self.standin)
            .env("STANDIN_MARK", &self.mark)
            .args(args)
            .output()
            .unwrap()
    }

    fn write_contract(&self, contract: &Value) {
        std::fs::write(
            self.iso.project.join("contract.json"),
            serde_json::to_vec_pretty(contract).unwrap(),
        )
        .unwrap();
    }

    /// Runs `agentpack ARGS` (a preflight) and asserts it changed nothing: the definition and
    /// checkout, HOME, `AGENTPACK_HOME` and the staging root hash the same before and after.
    fn preflight(&self, args: &[&str]) -> Output {
        unchanged(&self.iso, &[], || self.agentpack(args))
    }

    /// Whether the stand-in agent ran.
    fn agent_ran(&self) -> bool {
        self.mark.exists()
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A requirement on the packaged skill `demo-skill` for Claude, with `predicate`.
fn skill_contract(id: &str, predicate: &str) -> Value {
    json!({
        "schema_version": 1,
        "requirements": [{
            "id": id,
            "target": "claude",
            "selector": {"category": "skill", "name": "demo-skill", "property": "presence"},
            "predicate": predicate
        }]
    })
}

#[test]
fn a_strict_launch_with_a_passing_contract_starts_the_agent() {
    let fixture = Fixture::new();
    fixture.write_contract(&skill_contract("demo-skill-loads", "present"));
    let output = fixture.agentpack(&["--strict-external", "claude", "--", "hello"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(fixture.agent_ran(), "the agent did not start");
    assert!(std::fs::read_to_string(&fixture.mark)
        .unwrap()
        .contains("hello"));
    // The contract is one preflight evaluates as satisfied (not merely unknown or inapplicable).
    let preflight = fixture.preflight(&[
        "--strict-external",
        "preflight",
        "--agent",
        "claude",
        "--json",
    ]);
    let report: Value = serde_json::from_slice(&preflight.stdout).unwrap();
    assert_eq!(
        report["requirements"][0]["status"], "satisfied",
        "{report:#}"
    );
}

#[test]
fn a_strict_launch_with_a_violated_contract_does_not_start_the_agent_and_names_it() {
    let fixture = Fixture::new();
    fixture.write_contract(&skill_contract("no-demo-skill", "absent"));
    let output = fixture.agentpack(&["--strict-external", "claude"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(3), "{err}");
    assert!(
        !fixture.agent_ran(),
        "the agent started despite the violation"
    );
    assert!(
        err.contains("no-demo-skill"),
        "names the requirement: {err}"
    );
    assert!(err.contains("REQUIREMENT_VIOLATED"), "{err}");
    assert!(err.contains("fix"), "gives a remedy: {err}");
    // The lease taken for the evaluation is released.
    let leases = std::fs::read_dir(fixture.iso.agentpack_home.join("cache/store/v1/leases"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(leases, 0, "the launch left a lease behind");
}

#[test]
fn a_strict_launch_with_a_required_observation_and_no_receipt_exits_4() {
    let fixture = Fixture::new();
    fixture.write_contract(&json!({
        "schema_version": 1,
        "unknown_required": "fail",
        "requirements": [{
            "id": "demo-skill-observed",
            "target": "claude",
            "selector": {"category": "skill", "name": "demo-skill", "property": "presence", "scope": "controlled_projection"},
            "predicate": "present",
            "minimum_evidence": "observed"
        }]
    }));
    let output = fixture.agentpack(&["--strict-external", "claude"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(4), "{err}");
    assert!(!fixture.agent_ran());
    assert!(err.contains("demo-skill-observed"), "{err}");
}

#[test]
fn a_strict_launch_without_a_contract_launches_as_before() {
    let fixture = Fixture::new();
    let output = fixture.agentpack(&["--strict-external", "claude"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(fixture.agent_ran());
}

#[test]
fn a_contract_written_after_a_launch_is_evaluated_by_the_next_fast_path_launch() {
    let fixture = Fixture::new();
    let first = fixture.agentpack(&["--strict-external", "claude"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    std::fs::remove_file(&fixture.mark).unwrap();
    // Nothing the fast path fingerprints changed: the contract is evaluated all the same.
    fixture.write_contract(&skill_contract("no-demo-skill", "absent"));
    let second = fixture.agentpack(&["--strict-external", "claude"]);
    let err = stderr(&second);
    assert_eq!(second.status.code(), Some(3), "{err}");
    assert!(err.contains("no-demo-skill"), "{err}");
    assert!(!fixture.agent_ran());
}

#[test]
fn without_strict_external_the_contract_is_not_evaluated_at_launch() {
    let fixture = Fixture::new();
    fixture.write_contract(&skill_contract("no-demo-skill", "absent"));
    let output = fixture.agentpack(&["claude"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(fixture.agent_ran());
    assert!(!err.contains("no-demo-skill"), "{err}");
    // The same contract does not hold under preflight: the launch simply did not evaluate it.
    let preflight = fixture.preflight(&["preflight", "--agent", "claude"]);
    assert_eq!(preflight.status.code(), Some(3));
}

fn preflight_ci_strict(fixture: &Fixture) -> (i32, Value) {
    let output = fixture.preflight(&[
        "--strict-external",
        "preflight",
        "--agent",
        "claude",
        "--policy",
        "ci",
        "--json",
    ]);
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stderr(&output)));
    (output.status.code().unwrap(), report)
}

fn inherited_findings(report: &Value) -> Vec<Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["code"]
                .as_str()
                .is_some_and(|c| c.starts_with("INHERITED_"))
        })
        .cloned()
        .collect()
}

#[test]
fn undeclared_inheritance_is_a_violation_and_declared_inheritance_is_info() {
    let fixture = Fixture::new();
    assert_eq!(fixture.agentpack(&["sync"]).status.code(), Some(0));
    write(
        &fixture.iso.home.join(".claude/settings.json"),
        "{\"model\": \"x\"}\n",
    );
    write(
        &fixture.iso.home.join(".claude/skills/demo-skill/SKILL.md"),
        "---\nname: demo-skill\ndescription: mine\n---\nmine\n",
    );
    write(&fixture.iso.project.join("CLAUDE.md"), "# Notes\n");

    // Undeclared: a contract without `inheritance`.
    fixture.write_contract(&json!({"schema_version": 1}));
    let (code, report) = preflight_ci_strict(&fixture);
    assert_eq!(code, 3, "{report:#}");
    let inherited = inherited_findings(&report);
    assert!(
        inherited.len() >= 3,
        "settings, the shadowed skill and CLAUDE.md: {inherited:?}"
    );
    assert!(
        inherited.iter().all(|f| f["severity"] == "violation"),
        "{inherited:?}"
    );

    // Declared: every one of them is info, and the environment is ready.
    fixture.write_contract(&json!({
        "schema_version": 1,
        "inheritance": {"allow": ["user:~/.claude", "workspace:CLAUDE.md"]}
    }));
    let (code, report) = preflight_ci_strict(&fixture);
    assert_eq!(code, 0, "{report:#}");
    let inherited = inherited_findings(&report);
    assert_eq!(inherited.len(), 3, "{inherited:?}");
    assert!(
        inherited.iter().all(|f| f["severity"] == "info"),
        "{inherited:?}"
    );
    assert!(inherited.iter().any(|f| f["code"] == "INHERITED_SHADOW"));

    // Declaring only one place leaves the others violations.
    fixture.write_contract(&json!({
        "schema_version": 1,
        "inheritance": {"allow": ["workspace:CLAUDE.md"]}
    }));
    let (code, report) = preflight_ci_strict(&fixture);
    assert_eq!(code, 3, "{report:#}");
    let inherited = inherited_findings(&report);
    let claude_md = inherited
        .iter()
        .find(|f| f["source"].as_str().unwrap().ends_with("CLAUDE.md"))
        .unwrap_or_else(|| panic!("{inherited:?}"));
    assert_eq!(claude_md["severity"], "info");
    assert!(inherited
        .iter()
        .any(|f| f["severity"] == "violation"
            && f["source"].as_str().unwrap().contains("settings.json")));
}

#[test]
fn an_invalid_inheritance_declaration_names_its_json_path() {
    let fixture = Fixture::new();
    let cases = [
        (json!({"inheritance": []}), "$.inheritance"),
        (json!({"inheritance": {"deny": []}}), "$.inheritance.deny"),
        (
            json!({"inheritance": {"allow": "user:~/.claude"}}),
            "$.inheritance.allow",
        ),
        (
            json!({"inheritance": {"allow": [3]}}),
            "$.inheritance.allow[0]",
        ),
        (
            json!({"inheritance": {"allow": ["workspace:CLAUDE.md", "~/.claude"]}}),
            "$.inheritance.allow[1]",
        ),
        (
            json!({"inheritance": {"allow": ["system:/etc"]}}),
            "$.inheritance.allow[0]",
        ),
        (
            json!({"inheritance": {"allow": ["user:~/.nowhere"]}}),
            "$.inheritance.allow[0]",
        ),
    ];
    for (mut contract, path) in cases {
        contract["schema_version"] = json!(1);
        fixture.write_contract(&contract);
        let output = fixture.preflight(&["preflight", "--agent", "claude"]);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{contract}: {err}");
        assert!(
            err.contains(&format!("{path}:")),
            "{contract} names {path}: {err}"
        );
    }
}

/// A stand-in Claude Code that a probe can read (`plugin validate`, and the init event of a
/// `-p hi` session listing `demo-skill` from the bundle) and that records a launch.
pub(crate) fn probed_standin() -> String {
    let init = json!({"type": "system", "subtype": "init", "claude_code_version": "2.1.328",
        "skills": ["agentpack-bundle:demo-skill"], "slash_commands": [], "agents": []});
    let validated = json!({"success": true, "provides": {
        "skills": ["agentpack-bundle:demo-skill"], "commands": [], "agents": []}});
    format!(
        "#!/bin/sh\nif [ \"$3\" = plugin ] && [ \"$4\" = details ]; then echo \"error: unknown command 'details'\" >&2; exit 1; fi\nif [ \"$1\" = plugin ]; then echo '{validated}'; exit 0; fi\nif [ \"$1\" = -p ] && [ \"$2\" = hi ]; then echo '{init}'; sleep 30; exit 0; fi\nprintf 'ran %s\\n' \"$*\" >> \"$STANDIN_MARK\"\nexit 0\n"
    )
}

/// A requirement only a receipt answers: `demo-skill` observed in the workspace session.
pub(crate) fn observed_contract() -> Value {
    json!({
        "schema_version": 1,
        "requirements": [{
            "id": "demo-skill-observed",
            "target": "claude",
            "selector": {"category": "skill", "name": "demo-skill", "property": "presence", "scope": "workspace_session"},
            "predicate": "present",
            "minimum_evidence": "observed"
        }]
    })
}

#[test]
fn a_strict_launch_attaches_the_newest_current_receipt_and_refuses_a_stale_one() {
    let fixture = Fixture::new();
    write(&fixture.standin, &probed_standin());
    fixture.write_contract(&observed_contract());
    // No receipt yet: unknown, exit 4, not started, and the missing receipt is named.
    let output = fixture.agentpack(&["--strict-external", "claude"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(4), "{err}");
    assert!(!fixture.agent_ran());
    assert!(err.contains("demo-skill-observed"), "{err}");
    assert!(err.contains("RECEIPT_MISSING"), "{err}");

    // A probe bound to the launch's policy (`local`, strict, this contract): the launch attaches
    // it and starts the agent.
    let probe = fixture.agentpack(&["--strict-external", "probe", "--agent", "claude", "--json"]);
    assert_eq!(probe.status.code(), Some(0), "{}", stderr(&probe));
    let output = fixture.agentpack(&["--strict-external", "claude", "--", "go"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        fixture.agent_ran(),
        "the agent did not start with a current receipt"
    );
    std::fs::remove_file(&fixture.mark).unwrap();

    // A newer receipt bound to another policy (`ci`) is the newest: stale for the launch, which
    // never falls back to the older one.
    let probe = fixture.agentpack(&[
        "--strict-external",
        "probe",
        "--agent",
        "claude",
        "--policy",
        "ci",
        "--json",
    ]);
    assert_eq!(probe.status.code(), Some(0), "{}", stderr(&probe));
    let output = fixture.agentpack(&["--strict-external", "claude"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(4), "{err}");
    assert!(!fixture.agent_ran());
    assert!(err.contains("RECEIPT_STALE"), "{err}");
    assert!(err.contains("policy"), "{err}");
}

#[test]
fn a_strict_launch_evaluates_the_rendered_bytes_it_will_run() {
    let fixture = Fixture::new();
    let first = fixture.agentpack(&["--strict-external", "claude"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    std::fs::remove_file(&fixture.mark).unwrap();
    // A contract on the rendered bytes the plan gives the skill: the launch that runs those bytes
    // passes it.
    let report = fixture.preflight(&["preflight", "--agent", "claude", "--json"]);
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    let digest = report["plan"]["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "demo-skill")
        .unwrap()["rendered_digest"]
        .clone();
    fixture.write_contract(&json!({
        "schema_version": 1,
        "requirements": [{
            "id": "demo-bytes", "target": "claude", "predicate": "equals",
            "selector": {"category": "skill", "name": "demo-skill", "property": "rendered_digest"},
            "expected": digest
        }]
    }));
    let output = fixture.agentpack(&["--strict-external", "claude"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(fixture.agent_ran());
    std::fs::remove_file(&fixture.mark).unwrap();
    // A changed source is restaged by the launch and the contract on the old bytes fails, naming
    // the requirement; the agent does not start.
    write(
        &fixture.iso.project.join("pkg/skills/demo-skill/SKILL.md"),
        "---\nname: demo-skill\ndescription: A demo skill for the strict contract tests.\n---\nSay OTHER.\n",
    );
    let output = fixture.agentpack(&["--strict-external", "claude"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(3), "{err}");
    assert!(err.contains("demo-bytes"), "{err}");
    assert!(!fixture.agent_ran());
}

#[test]
fn complete_coverage_and_observed_absence_stay_unknown_with_a_current_receipt() {
    let fixture = Fixture::new();
    write(&fixture.standin, &probed_standin());
    let mut contract = observed_contract();
    let requirements = contract["requirements"].as_array_mut().unwrap();
    requirements.push(json!({
        "id": "skills-complete", "target": "claude", "predicate": "coverage_complete",
        "selector": {"category": "skill", "scope": "workspace_session"},
        "minimum_evidence": "observed"
    }));
    requirements.push(json!({
        "id": "no-ghost", "target": "claude", "predicate": "absent",
        "selector": {"category": "skill", "name": "ghost", "scope": "workspace_session"},
        "minimum_evidence": "observed"
    }));
    fixture.write_contract(&contract);
    assert_eq!(fixture.agentpack(&["sync"]).status.code(), Some(0));
    let probe = fixture.agentpack(&["probe", "--agent", "claude", "--json"]);
    assert_eq!(probe.status.code(), Some(0), "{}", stderr(&probe));
    let output = fixture.preflight(&[
        "preflight",
        "--agent",
        "claude",
        "--receipt",
        "latest",
        "--json",
    ]);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(4), "{report:#}");
    let status = |id: &str| {
        report["requirements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap()["status"]
            .clone()
    };
    // The receipt is current and answers the positive observation ...
    assert_eq!(status("demo-skill-observed"), "satisfied", "{report:#}");
    // ... but a session catalog is never complete (it leaves out user-level configuration), so
    // complete coverage and the absence of a name it does not list stay unknown.
    assert_eq!(status("skills-complete"), "unknown", "{report:#}");
    assert_eq!(status("no-ghost"), "unknown", "{report:#}");
}
