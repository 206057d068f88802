//! `agentpack preflight` through the real binary: every finding class injected into a clean
//! fixture (and a clean control with no finding), the exit codes, contracts and evidence grades,
//! relocated definitions, and, on every test, that preflight changed nothing: a digest of the
//! definition, the checkout, the fake HOME, `AGENTPACK_HOME` and the staging root (contents, modes,
//! directories, symlink targets) is identical before and after.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use agentpack_test_support::{copy_dir, tree_digest, write, IsolatedHome};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// Runs `run` (a preflight) and asserts it changed nothing: a digest of the checkout (and
/// definition), HOME, `AGENTPACK_HOME`, the staging root and `extra` (contents, modes,
/// directories, symlink targets) is the same before and after. Every preflight test uses it.
pub(crate) fn unchanged<T>(home: &IsolatedHome, extra: &[&Path], run: impl FnOnce() -> T) -> T {
    let mut roots = vec![
        home.project.as_path(),
        home.home.as_path(),
        home.agentpack_home.as_path(),
        home.staging_root.as_path(),
    ];
    roots.extend_from_slice(extra);
    let before = tree_digest(&roots);
    let result = run();
    assert_eq!(
        tree_digest(&roots),
        before,
        "preflight changed the definition, the checkout, HOME, AGENTPACK_HOME or staging"
    );
    result
}

struct Fixture {
    home: IsolatedHome,
    /// Where the path packages' sources are.
    packages: tempfile::TempDir,
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", self.stdout, self.stderr))
    }

    fn codes(&self) -> Vec<String> {
        self.json()["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap().to_owned())
            .collect()
    }

    fn finding(&self, code: &str) -> Value {
        self.json()["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["code"] == code)
            .cloned()
            .unwrap_or_else(|| panic!("no {code} finding in {}", self.stdout))
    }
}

impl Fixture {
    /// A project with two path packages (a skill, and a plugin with a command and a sub-agent),
    /// locked and synced: the clean control.
    fn synced() -> Self {
        let home = IsolatedHome::new();
        let packages = tempfile::tempdir().unwrap();
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        for name in ["hello-skill", "review-plugin"] {
            copy_dir(&examples.join(name), &packages.path().join(name));
        }
        let fixture = Self { home, packages };
        fixture.ok(&["init", "--name", "preflight"]);
        for name in ["hello-skill", "review-plugin"] {
            let dir = fixture.packages.path().join(name);
            fixture.ok(&["add", dir.to_str().unwrap(), "--no-sync"]);
        }
        fixture.ok(&["sync"]);
        fixture
    }

    fn agentpack(&self, args: &[&str]) -> std::process::Output {
        let bin = assert_cmd::cargo::cargo_bin("agentpack");
        self.home.command(&bin, None).args(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) {
        let output = self.agentpack(args);
        assert!(
            output.status.success(),
            "agentpack {args:?} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Runs preflight and asserts it changed nothing (the package sources included).
    fn preflight(&self, args: &[&str]) -> Run {
        let mut full = vec!["preflight"];
        full.extend_from_slice(args);
        let output = unchanged(&self.home, &[self.packages.path()], || {
            self.agentpack(&full)
        });
        Run {
            code: output.status.code().unwrap(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    fn manifest(&self) -> PathBuf {
        self.home.project.join("agentpack.toml")
    }

    fn append_manifest(&self, text: &str) {
        let mut manifest = std::fs::read_to_string(self.manifest()).unwrap();
        manifest.push_str(text);
        std::fs::write(self.manifest(), manifest).unwrap();
    }

    fn write_contract(&self, json: &Value) -> PathBuf {
        let path = self.home.project.join("contract.json");
        std::fs::write(&path, serde_json::to_vec_pretty(json).unwrap()).unwrap();
        path
    }

    fn lock_text(&self) -> String {
        std::fs::read_to_string(self.home.project.join("pack.lock")).unwrap()
    }

    /// The cache slot of the package whose lock `name` is `name`.
    fn slot_of(&self, name: &str) -> PathBuf {
        let lock = self.lock_text();
        let block = lock
            .split("[[packages]]")
            .find(|block| block.contains(&format!("name = \"{name}\"")))
            .unwrap();
        let key = block
            .lines()
            .find_map(|line| line.strip_prefix("cache_key = \""))
            .unwrap()
            .trim_end_matches('"');
        self.home.agentpack_home.join("cache").join(key)
    }
}

#[test]
fn a_clean_fixture_has_no_finding_for_claude() {
    let fixture = Fixture::synced();
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let report = run.json();
    assert_eq!(report["findings"], serde_json::json!([]), "{}", run.stdout);
    assert_eq!(report["ready"], true);
    let names: Vec<&str> = report["plan"]["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"hello-skill") && names.contains(&"reviewer"),
        "{names:?}"
    );
    let human = fixture.preflight(&["--agent", "claude"]);
    assert_eq!(human.code, 0);
    assert!(human.stdout.contains("ready"), "{}", human.stdout);
    // Every other agent: nothing but the workspace links Cursor and Antigravity launches place.
    for (agent, expected) in [
        ("cursor", vec!["WORKSPACE_WRITE_PLANNED"]),
        ("opencode", vec![]),
        ("codex", vec![]),
        ("grok", vec![]),
        ("agy", vec!["WORKSPACE_WRITE_PLANNED"]),
    ] {
        let run = fixture.preflight(&["--agent", agent, "--json"]);
        assert_eq!(run.code, 0, "{agent}: {}", run.stdout);
        assert_eq!(run.codes(), expected, "{agent}: {}", run.stdout);
    }
}

#[test]
fn a_staged_tree_built_from_other_inputs_is_stale_and_a_sync_clears_it() {
    let fixture = Fixture::synced();
    fixture.append_manifest(
        "\n[mcp.servers.retrieval]\ncommand = \"uvx\"\nargs = [\"mcp-retrieval==1.0\"]\n",
    );
    fixture.ok(&["lock"]);
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    let stale = run.finding("STAGING_STALE");
    assert!(
        stale["message"].as_str().unwrap().contains(".mcp.json"),
        "{stale}"
    );
    fixture.ok(&["sync"]);
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.codes(), Vec::<String>::new(), "{}", run.stdout);
}

#[test]
fn unpinned_mcp_servers_warn_locally_and_violate_in_ci() {
    let fixture = Fixture::synced();
    fixture.append_manifest(
        "\n[mcp.servers.retrieval]\ncommand = \"uvx\"\nargs = [\"mcp-retrieval\"]\n",
    );
    fixture.ok(&["lock"]);
    fixture.ok(&["sync"]);
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(run.codes(), vec!["MCP_UNPINNED"], "{}", run.stdout);
    assert_eq!(run.finding("MCP_UNPINNED")["severity"], "warning");
    let ci = fixture.preflight(&["--agent", "claude", "--json", "--policy", "ci"]);
    assert_eq!(ci.code, 3);
    assert_eq!(ci.finding("MCP_UNPINNED")["severity"], "violation");
}

#[test]
fn lock_drift_is_a_violation() {
    let fixture = Fixture::synced();
    let extra = fixture.packages.path().join("extra-skill");
    write(
        &extra.join("SKILL.md"),
        "---\nname: extra-skill\ndescription: x\n---\nbody\n",
    );
    fixture.append_manifest("");
    let manifest = std::fs::read_to_string(fixture.manifest())
        .unwrap()
        .replace(
            "[dependencies]\n",
            &format!(
                "[dependencies]\nextra = {{ path = \"{}\" }}\n",
                extra.display()
            ),
        );
    std::fs::write(fixture.manifest(), manifest).unwrap();
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    let finding = run.finding("LOCK_DRIFT");
    assert_eq!(finding["severity"], "violation");
    assert_eq!(finding["target"], "extra");
    assert!(finding["remedy"]
        .as_str()
        .unwrap()
        .contains("agentpack lock"));
}

#[test]
fn a_changed_path_dependency_is_lock_drift() {
    let fixture = Fixture::synced();
    write(
        &fixture.packages.path().join("hello-skill/SKILL.md"),
        "---\nname: hello-skill\ndescription: changed\n---\nchanged\n",
    );
    let run = fixture.preflight(&["--agent", "codex", "--json"]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert!(run.finding("LOCK_DRIFT")["message"]
        .as_str()
        .unwrap()
        .contains("changed since it was locked"));
}

#[test]
fn a_package_without_content_hash_warns_locally_and_violates_in_ci() {
    let fixture = Fixture::synced();
    let lock = fixture.lock_text();
    let first = lock.find("content_hash = ").unwrap();
    let end = first + lock[first..].find('\n').unwrap() + 1;
    std::fs::write(
        fixture.home.project.join("pack.lock"),
        format!("{}{}", &lock[..first], &lock[end..]),
    )
    .unwrap();
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.finding("LOCK_UNVERIFIED")["severity"], "warning");
    let ci = fixture.preflight(&["--agent", "claude", "--json", "--policy", "ci"]);
    assert_eq!(ci.code, 3, "{}", ci.stdout);
    assert_eq!(ci.finding("LOCK_UNVERIFIED")["severity"], "violation");
}

#[test]
fn a_missing_cache_entry_is_a_finding_with_a_restore_remedy_never_a_fetch() {
    let fixture = Fixture::synced();
    std::fs::remove_file(fixture.slot_of("hello-skill")).unwrap();
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let finding = run.finding("CACHE_MISSING");
    assert!(finding["remedy"]
        .as_str()
        .unwrap()
        .contains("agentpack env restore"));
    assert!(run.codes().contains(&"PLAN_INCOMPLETE".to_owned()));
    assert_eq!(run.json()["plan"]["complete"], false);
}

#[test]
fn a_cache_entry_that_does_not_match_the_lock_is_a_violation() {
    let fixture = Fixture::synced();
    let hello = fixture.slot_of("hello-skill");
    let review_target = std::fs::read_link(fixture.slot_of("review-plugin")).unwrap();
    std::fs::remove_file(&hello).unwrap();
    std::os::unix::fs::symlink(review_target, &hello).unwrap();
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    let finding = run.finding("CACHE_MISMATCH");
    assert!(finding["remedy"].as_str().unwrap().contains("--repair"));
}

#[test]
fn a_missing_staged_tree_is_reported() {
    let fixture = Fixture::synced();
    std::fs::remove_file(fixture.home.staging_root.join("modes/default")).unwrap();
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 0);
    assert_eq!(run.codes(), vec!["STAGING_MISSING"], "{}", run.stdout);
}

#[test]
fn a_staged_tree_older_than_its_overlay_is_stale() {
    let fixture = Fixture::synced();
    let file = fixture.home.project.join(".agents/skills/local/SKILL.md");
    write(&file, "---\nname: local\ndescription: x\n---\nx\n");
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(30);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 0);
    assert!(
        run.codes().contains(&"STAGING_STALE".to_owned()),
        "{}",
        run.stdout
    );
}

#[test]
fn unlocked_mcp_servers_warn_locally_and_violate_in_ci() {
    let fixture = Fixture::synced();
    fixture.append_manifest(
        "\n[mcp.servers.files]\ncommand = \"npx\"\nargs = [\"-y\", \"@scope/files\"]\n",
    );
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.finding("MCP_UNLOCKED")["severity"], "warning");
    assert_eq!(run.finding("MCP_UNLOCKED")["target"], "mcp:files");
    let ci = fixture.preflight(&["--agent", "claude", "--json", "--policy", "ci"]);
    assert_eq!(ci.code, 3);
    assert_eq!(ci.finding("MCP_UNLOCKED")["severity"], "violation");
}

#[test]
fn inline_secrets_in_the_manifest_are_reported() {
    let fixture = Fixture::synced();
    fixture.append_manifest(
        "\n[mcp.servers.db]\ncommand = \"db-mcp\"\nenv = { DB_TOKEN = \"s3cr3t-value\", HOST = \"${DB_HOST}\" }\n",
    );
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    let finding = run.finding("SECRET_INLINE");
    assert_eq!(finding["target"], "[mcp.servers.db].env.DB_TOKEN");
    assert!(
        !run.stdout.contains("s3cr3t-value"),
        "a secret is never printed"
    );
    let secrets = run.codes().iter().filter(|c| *c == "SECRET_INLINE").count();
    assert_eq!(secrets, 1, "a ${{VAR}} reference is not inline");
}

#[test]
fn inherited_configuration_is_per_agent_and_names_what_it_shadows() {
    let fixture = Fixture::synced();
    write(
        &fixture
            .home
            .home
            .join(".claude/skills/hello-skill/SKILL.md"),
        "---\nname: hello-skill\ndescription: mine\n---\nmine\n",
    );
    write(&fixture.home.home.join(".claude/settings.json"), "{}\n");
    write(
        &fixture.home.project.join(".cursor/commands/review.md"),
        "review\n",
    );
    let claude = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(claude.code, 0, "inheritance is not a violation under local");
    let shadow = claude.finding("INHERITED_SHADOW");
    assert_eq!(shadow["target"], "skill:hello-skill");
    assert_eq!(shadow["severity"], "warning");
    assert!(shadow["message"].as_str().unwrap().contains("hello-skill"));
    let configs: Vec<Value> = claude.json()["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "INHERITED_CONFIG")
        .cloned()
        .collect();
    assert!(
        configs.iter().any(|f| f["message"]
            .as_str()
            .unwrap()
            .contains("~/.claude/settings.json")),
        "{configs:?}"
    );
    assert!(
        !claude.stdout.contains(".cursor"),
        "Claude does not read .cursor/: {}",
        claude.stdout
    );
    // Codex reads none of these places.
    let codex = fixture.preflight(&["--agent", "codex", "--json"]);
    assert_eq!(codex.codes(), Vec::<String>::new(), "{}", codex.stdout);
    // Cursor reads its workspace commands, and the packaged `review` command clashes.
    let cursor = fixture.preflight(&["--agent", "cursor", "--json"]);
    assert_eq!(
        cursor.finding("INHERITED_SHADOW")["target"],
        "command:review"
    );
}

#[test]
fn planned_workspace_writes_and_the_no_workspace_write_contract() {
    let fixture = Fixture::synced();
    let cursor = fixture.preflight(&["--agent", "cursor", "--json"]);
    assert_eq!(cursor.code, 0);
    assert!(cursor.finding("WORKSPACE_WRITE_PLANNED")["target"]
        .as_str()
        .unwrap()
        .ends_with(".cursor/agents"));
    let contract = serde_json::json!({
        "schema_version": 1,
        "requirements": [
            {"id": "claude-no-write", "target": "claude", "predicate": "no_workspace_write"},
            {"id": "cursor-no-write", "target": "cursor", "predicate": "no_workspace_write"}
        ]
    });
    fixture.write_contract(&contract);
    let claude = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(claude.code, 0, "{}", claude.stdout);
    let outcome = &claude.json()["requirements"][0];
    assert_eq!(outcome["status"], "satisfied");
    assert_eq!(outcome["evidence"], "generated");
    let cursor = fixture.preflight(&["--agent", "cursor", "--json"]);
    assert_eq!(cursor.code, 3, "{}", cursor.stdout);
    assert_eq!(
        cursor.finding("REQUIREMENT_VIOLATED")["severity"],
        "violation"
    );
    let human = fixture.preflight(&["--agent", "cursor"]);
    assert_eq!(human.code, 3);
    assert!(
        human.stdout.contains("REQUIREMENT_VIOLATED"),
        "{}",
        human.stdout
    );
}

#[test]
fn an_allowance_records_allowed_instead_of_violated() {
    let fixture = Fixture::synced();
    fixture.write_contract(&serde_json::json!({
        "schema_version": 1,
        "requirements": [{"id": "no-write", "target": "cursor", "predicate": "no_workspace_write"}],
        "allowances": [{"requirement": "no-write", "rationale": "Cursor reads sub-agents only from the workspace"}]
    }));
    let run = fixture.preflight(&["--agent", "cursor", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(run.json()["requirements"][0]["status"], "allowed");
    assert!(run.codes().contains(&"REQUIREMENT_ALLOWED".to_owned()));
}

#[test]
fn an_observed_requirement_without_a_receipt_is_unknown_with_exit_4() {
    let fixture = Fixture::synced();
    let mut contract = serde_json::json!({
        "schema_version": 1,
        "unknown_required": "fail",
        "requirements": [{
            "id": "hello-loads",
            "target": "claude",
            "selector": {"category": "skill", "name": "hello-skill", "property": "presence", "scope": "controlled_projection"},
            "predicate": "present",
            "minimum_evidence": "observed",
            "severity": "error"
        }],
        "allowances": []
    });
    fixture.write_contract(&contract);
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 4, "{}", run.stdout);
    assert!(run.codes().contains(&"RECEIPT_MISSING".to_owned()));
    assert_eq!(run.json()["requirements"][0]["status"], "unknown");
    // Generated evidence of the same skill is never promoted to observed; `allow` relaxes it.
    contract["unknown_required"] = "allow".into();
    fixture.write_contract(&contract);
    assert_eq!(fixture.preflight(&["--agent", "claude", "--json"]).code, 0);
}

#[test]
fn evidence_grades_are_never_promoted() {
    let fixture = Fixture::synced();
    fixture.write_contract(&serde_json::json!({
        "schema_version": 1,
        "requirements": [
            {"id": "skill-planned", "target": "claude", "predicate": "present",
             "selector": {"category": "skill", "name": "hello-skill"}},
            {"id": "locked-declared", "target": "claude", "predicate": "present",
             "selector": {"category": "package", "name": "hello-skill"}, "minimum_evidence": "declared"},
            {"id": "locked-generated", "target": "claude", "predicate": "present",
             "selector": {"category": "package", "name": "hello-skill"}},
            {"id": "no-ghost", "target": "claude", "predicate": "absent",
             "selector": {"category": "skill", "name": "ghost"}}
        ]
    }));
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    let statuses: Vec<String> = run.json()["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            format!(
                "{}={}",
                o["id"].as_str().unwrap(),
                o["status"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        statuses,
        vec![
            "skill-planned=satisfied",
            "locked-declared=satisfied",
            "locked-generated=unknown",
            "no-ghost=satisfied"
        ]
    );
    assert_eq!(
        run.code, 4,
        "a declared property never satisfies a generated requirement"
    );
}

#[test]
fn an_invalid_contract_is_a_usage_error_naming_the_json_path() {
    let fixture = Fixture::synced();
    let cases = [
        (
            serde_json::json!({"schema_version": 1, "requirements": [{"id": "a", "target": "claude", "predicate": "present", "selector": {"category": "widget", "name": "x"}}]}),
            "$.requirements[0].selector.category",
        ),
        (
            serde_json::json!({"schema_version": 1, "requirements": [{"id": "a", "target": "claude", "predicate": "present", "selector": {"category": "skill", "name": "x", "colour": "red"}}]}),
            "$.requirements[0].selector.colour",
        ),
        (
            serde_json::json!({"schema_version": 1, "requirements": [{"id": "a", "target": "claude", "predicate": "present", "selector": {"category": "skill", "name": "x", "property": "size"}}]}),
            "$.requirements[0].selector.property",
        ),
        (
            serde_json::json!({"schema_version": 1, "requirements": [{"id": "a", "target": "vim", "predicate": "no_workspace_write"}]}),
            "$.requirements[0].target",
        ),
        (
            serde_json::json!({"schema_version": 1, "requirements": [{"id": "a", "target": "claude", "predicate": "no_workspace_write", "minimum_evidence": "rumour"}]}),
            "$.requirements[0].minimum_evidence",
        ),
        (
            serde_json::json!({"schema_version": 1, "requirements": [{"id": "a", "target": "claude", "predicate": "no_workspace_write"}, {"id": "a", "target": "cursor", "predicate": "no_workspace_write"}]}),
            "$.requirements[1].id",
        ),
        (
            serde_json::json!({"schema_version": 1, "requirements": [], "allowances": [{"requirement": "nope", "rationale": "r"}]}),
            "$.allowances[0].requirement",
        ),
        (
            serde_json::json!({"schema_version": 1, "requirements": [{"id": "a", "target": "claude", "predicate": "no_workspace_write"}], "allowances": [{"requirement": "a"}]}),
            "$.allowances[0].rationale",
        ),
    ];
    for (contract, path) in cases {
        let file = fixture.packages.path().join("contract.json");
        std::fs::write(&file, serde_json::to_vec(&contract).unwrap()).unwrap();
        let run = fixture.preflight(&[
            "--agent",
            "claude",
            "--json",
            "--contract",
            file.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 2, "{contract}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "a refusal is never JSON");
        assert!(run.stderr.contains(path), "{path} in {}", run.stderr);
    }
    // An unknown mode and an unknown agent are usage errors too.
    assert_eq!(
        fixture
            .preflight(&["--agent", "claude", "--mode", "nope"])
            .code,
        2
    );
    assert_eq!(fixture.preflight(&["--agent", "vim"]).code, 2);
}

#[test]
fn a_link_cycle_in_the_workspace_inputs_is_an_operational_failure() {
    let fixture = Fixture::synced();
    std::fs::create_dir_all(fixture.home.project.join(".claude/skills")).unwrap();
    std::os::unix::fs::symlink("..", fixture.home.project.join(".claude/skills/loop")).unwrap();
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 5, "{}{}", run.stdout, run.stderr);
    assert!(run.codes().contains(&"WORKSPACE_UNREADABLE".to_owned()));
}

#[test]
fn two_relocated_copies_of_one_definition_have_equal_source_identities() {
    let home = IsolatedHome::new();
    let bin = assert_cmd::cargo::cargo_bin("agentpack");
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("a/def"), dir.path().join("elsewhere/b/def"));
    std::fs::create_dir_all(&first).unwrap();
    let init = home
        .command(&bin, None)
        .args([
            "--project-root",
            first.to_str().unwrap(),
            "init",
            "--name",
            "team",
        ])
        .output()
        .unwrap();
    assert!(init.status.success());
    copy_dir(&first, &second);
    let mut identities = Vec::new();
    for (definition, workspace) in [(&first, "ws-one"), (&second, "ws-two")] {
        let workspace = dir.path().join(workspace);
        std::fs::create_dir_all(&workspace).unwrap();
        let roots = [
            definition.as_path(),
            workspace.as_path(),
            home.home.as_path(),
            home.agentpack_home.as_path(),
        ];
        let before = tree_digest(&roots);
        let output = home
            .command(&bin, None)
            .args([
                "--definition-root",
                definition.to_str().unwrap(),
                "--workspace",
                workspace.to_str().unwrap(),
                "preflight",
                "--agent",
                "claude",
                "--json",
            ])
            .output()
            .unwrap();
        assert_eq!(tree_digest(&roots), before, "preflight wrote something");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        identities.push(report["identities"].clone());
    }
    assert_eq!(identities[0]["source"], identities[1]["source"]);
    assert_eq!(identities[0]["lock"], identities[1]["lock"]);
    assert_eq!(
        identities[0]["workspace_inputs"],
        identities[1]["workspace_inputs"]
    );
    assert!(identities[0]["source"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
}

#[test]
fn collisions_and_conversion_notes_of_the_plan_are_reported() {
    let fixture = Fixture::synced();
    let copy = fixture.packages.path().join("hello-copy");
    write(
        &copy.join("SKILL.md"),
        "---\nname: hello-skill\ndescription: other\n---\nother body\n",
    );
    fixture.ok(&["add", copy.to_str().unwrap()]);
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let collision = run.finding("PLAN_COLLISION");
    assert_eq!(collision["severity"], "info");
    assert!(
        collision["message"]
            .as_str()
            .unwrap()
            .contains("hello-copy"),
        "{collision}"
    );
}

#[test]
fn a_conversion_that_loses_something_is_a_plan_warning_for_that_agent_only() {
    let fixture = Fixture::synced();
    // The clean control: no conversion note for OpenCode.
    let clean = fixture.preflight(&["--agent", "opencode", "--json"]);
    assert!(
        !clean.codes().contains(&"PLAN_WARNING".to_owned()),
        "{}",
        clean.stdout
    );
    let odd = fixture.packages.path().join("odd-agent");
    write(
        &odd.join("agents/sideways.md"),
        "---\nname: sideways\ndescription: An agent OpenCode cannot take whole.\nmode: sideways\n---\nWork.\n",
    );
    fixture.ok(&["add", odd.to_str().unwrap()]);
    let run = fixture.preflight(&["--agent", "opencode", "--json"]);
    assert_eq!(run.code, 0, "a conversion note is info: {}", run.stdout);
    let warning = run.finding("PLAN_WARNING");
    assert_eq!(warning["severity"], "info");
    let message = warning["message"].as_str().unwrap();
    assert!(
        message.contains("sideways") && message.contains("left out"),
        "{warning}"
    );
    // Claude Code takes the agent as written: no note.
    let claude = fixture.preflight(&["--agent", "claude", "--json"]);
    assert!(
        !claude.codes().contains(&"PLAN_WARNING".to_owned()),
        "{}",
        claude.stdout
    );
}

#[test]
fn the_digest_sees_contents_modes_directories_and_link_targets() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(&root.join("a/file"), "x");
    std::os::unix::fs::symlink("a/file", root.join("link")).unwrap();
    let base = tree_digest(&[root]);
    let changes: [&dyn Fn(); 4] = [
        &|| std::fs::write(root.join("a/file"), "y").unwrap(),
        &|| {
            std::fs::set_permissions(root.join("a/file"), std::fs::Permissions::from_mode(0o600))
                .unwrap()
        },
        &|| std::fs::create_dir(root.join("b")).unwrap(),
        &|| {
            std::fs::remove_file(root.join("link")).unwrap();
            std::os::unix::fs::symlink("a", root.join("link")).unwrap();
        },
    ];
    let mut seen = vec![base];
    for change in changes {
        change();
        let now = tree_digest(&[root]);
        assert!(!seen.contains(&now), "a change the digest did not see");
        seen.push(now);
    }
}

/// The issue's benchmark, bounded for a debug build on a shared machine: a 100-package locked and
/// staged project preflights in well under a second in release (about 0.1 s in debug here).
#[test]
fn a_hundred_package_locked_project_preflights_quickly() {
    let home = IsolatedHome::new();
    let bin = assert_cmd::cargo::cargo_bin("agentpack");
    let run = |args: &[&str]| home.command(&bin, None).args(args).output().unwrap();
    assert!(run(&["init", "--name", "big"]).status.success());
    let packages = tempfile::tempdir().unwrap();
    let mut deps = String::from("\n[dependencies]\n");
    for i in 0..100 {
        let dir = packages.path().join(format!("s{i:03}"));
        write(
            &dir.join("SKILL.md"),
            &format!("---\nname: s{i:03}\ndescription: skill {i}\n---\nbody {i}\n"),
        );
        deps.push_str(&format!("s{i:03} = {{ path = \"{}\" }}\n", dir.display()));
    }
    let manifest = home.project.join("agentpack.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let text = if text.contains("[dependencies]\n") {
        text.replace("[dependencies]\n", &deps[1..])
    } else {
        text + &deps
    };
    std::fs::write(&manifest, text).unwrap();
    assert!(run(&["lock"]).status.success());
    assert!(run(&["sync"]).status.success());
    let roots = [
        home.project.as_path(),
        home.agentpack_home.as_path(),
        home.home.as_path(),
    ];
    let before = tree_digest(&roots);
    let started = std::time::Instant::now();
    let output = run(&["preflight", "--agent", "claude", "--json"]);
    let elapsed = started.elapsed();
    assert_eq!(tree_digest(&roots), before);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["plan"]["artifacts"].as_array().unwrap().len(), 100);
    assert_eq!(report["findings"], serde_json::json!([]));
    assert!(
        elapsed < std::time::Duration::from_secs(5),
        "preflight took {elapsed:?}"
    );
}

#[test]
fn no_project_is_a_usage_error_and_creates_nothing() {
    let home = IsolatedHome::new();
    let bin = assert_cmd::cargo::cargo_bin("agentpack");
    let roots = [
        home.project.as_path(),
        home.home.as_path(),
        home.agentpack_home.as_path(),
    ];
    let before = tree_digest(&roots);
    let output = home
        .command(&bin, None)
        .args(["preflight", "--agent", "claude", "--json"])
        .output()
        .unwrap();
    assert_eq!(tree_digest(&roots), before);
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    assert!(String::from_utf8_lossy(&output.stderr).contains("agentpack.toml"));
}

#[test]
fn strict_external_refuses_workspace_writes_and_in_ci_inherited_configuration() {
    let fixture = Fixture::synced();
    fixture.write_contract(&serde_json::json!({
        "schema_version": 1,
        "requirements": [
            {"id": "claude-no-write", "target": "claude", "predicate": "no_workspace_write"},
            {"id": "cursor-no-write", "target": "cursor", "predicate": "no_workspace_write"}
        ]
    }));
    let claude = fixture.preflight(&["--agent", "claude", "--strict-external", "--json"]);
    assert_eq!(claude.code, 0, "{}", claude.stdout);
    let cursor = fixture.preflight(&["--agent", "cursor", "--strict-external", "--json"]);
    assert_eq!(cursor.code, 3, "{}", cursor.stdout);
    assert_eq!(
        cursor.finding("WORKSPACE_WRITE_PLANNED")["severity"],
        "violation"
    );
    assert_ne!(
        claude.json()["identities"]["policy"],
        fixture.preflight(&["--agent", "claude", "--json"]).json()["identities"]["policy"],
        "the strict flag is part of the policy identity"
    );
    // Authored inherited user settings: info locally, a violation for a strict external CI check,
    // and the lock's bytes stay what they were.
    let lock_before = fixture.lock_text();
    write(
        &fixture.home.home.join(".claude/settings.json"),
        "{\"model\": \"x\"}\n",
    );
    let local = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(local.code, 0);
    assert_eq!(local.finding("INHERITED_CONFIG")["severity"], "info");
    let ci = fixture.preflight(&[
        "--agent",
        "claude",
        "--json",
        "--policy",
        "ci",
        "--strict-external",
    ]);
    assert_eq!(ci.code, 3, "{}", ci.stdout);
    assert_eq!(ci.finding("INHERITED_CONFIG")["severity"], "violation");
    assert_eq!(fixture.lock_text(), lock_before);
}

#[test]
fn a_mismatched_named_skill_is_rejected_and_the_lock_stays_unchanged() {
    let fixture = Fixture::synced();
    let report = fixture.preflight(&["--agent", "claude", "--json"]).json();
    let digest = report["plan"]["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "hello-skill")
        .unwrap()["rendered_digest"]
        .clone();
    assert!(report["identities"]["generation"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    let contract = |expected: &Value| {
        serde_json::json!({
            "schema_version": 1,
            "requirements": [{
                "id": "hello-bytes", "target": "claude", "predicate": "equals",
                "selector": {"category": "skill", "name": "hello-skill", "property": "rendered_digest"},
                "expected": expected
            }, {
                "id": "hello-holds-its-name", "target": "claude", "predicate": "source_allowed",
                "selector": {"category": "skill", "name": "hello-skill", "property": "winner"},
                "expected": "package"
            }]
        })
    };
    fixture.write_contract(&contract(&digest));
    assert_eq!(fixture.preflight(&["--agent", "claude", "--json"]).code, 0);
    let lock_before = fixture.lock_text();
    // A same-named skill in the checkout takes the name: the planned winner is the workspace.
    write(
        &fixture
            .home
            .project
            .join(".claude/skills/hello-skill/SKILL.md"),
        "---\nname: hello-skill\ndescription: impostor\n---\nimpostor\n",
    );
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    let outcomes = run.json()["requirements"].clone();
    assert_eq!(outcomes[0]["status"], "satisfied");
    assert_eq!(outcomes[1]["status"], "violated");
    std::fs::remove_dir_all(fixture.home.project.join(".claude")).unwrap();
    // Other bytes than the contract expects.
    fixture.write_contract(&contract(&Value::String("sha256:0000".into())));
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert!(run.finding("REQUIREMENT_VIOLATED")["message"]
        .as_str()
        .unwrap()
        .contains("hello-bytes"));
    assert_eq!(fixture.lock_text(), lock_before);
}

/// SHA-256 over `(path, bytes)` pairs in path order, each as its length (u64 LE) and bytes: the
/// encoding docs/src/preflight.md gives for `source_digest` and `rendered_digest`, written here
/// independently of the implementation.
pub(crate) fn framed_digest(mut files: Vec<(String, Vec<u8>)>) -> String {
    files.sort();
    let mut digest = Sha256::new();
    for (path, bytes) in &files {
        digest.update((path.len() as u64).to_le_bytes());
        digest.update(path.as_bytes());
        digest.update((bytes.len() as u64).to_le_bytes());
        digest.update(bytes);
    }
    format!("sha256:{}", hex::encode(digest.finalize()))
}

/// A contract of `equals` requirements for claude: (id, category, name, property, expected), at
/// declared evidence (what `source_digest` is known at).
fn digest_contract(requirements: &[(&str, &str, &str, &str, &str)]) -> Value {
    let requirements: Vec<Value> = requirements
        .iter()
        .map(|(id, category, name, property, expected)| {
            serde_json::json!({
                "id": id, "target": "claude", "predicate": "equals",
                "selector": {"category": category, "name": name, "property": property},
                "expected": expected, "minimum_evidence": "declared"
            })
        })
        .collect();
    serde_json::json!({"schema_version": 1, "requirements": requirements})
}

/// The outcome of requirement `id` in a report.
fn outcome(run: &Run, id: &str) -> Value {
    run.json()["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no outcome {id} in {}", run.stdout))
}

#[test]
fn a_correct_source_digest_passes_and_a_wrong_one_fails_with_exit_3() {
    let fixture = Fixture::synced();
    let sources = fixture.packages.path();
    let skill = framed_digest(vec![(
        "SKILL.md".to_owned(),
        std::fs::read(sources.join("hello-skill/SKILL.md")).unwrap(),
    )]);
    let command = framed_digest(vec![(
        "review.md".to_owned(),
        std::fs::read(sources.join("review-plugin/commands/review.md")).unwrap(),
    )]);
    let agent = framed_digest(vec![(
        "reviewer.md".to_owned(),
        std::fs::read(sources.join("review-plugin/agents/reviewer.md")).unwrap(),
    )]);
    fixture.write_contract(&digest_contract(&[
        (
            "skill-source",
            "skill",
            "hello-skill",
            "source_digest",
            &skill,
        ),
        (
            "command-source",
            "command",
            "review",
            "source_digest",
            &command,
        ),
        ("agent-source", "agent", "reviewer", "source_digest", &agent),
    ]));
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    for (id, expected) in [
        ("skill-source", &skill),
        ("command-source", &command),
        ("agent-source", &agent),
    ] {
        let outcome = outcome(&run, id);
        assert_eq!(outcome["status"], "satisfied", "{outcome}");
        assert_eq!(outcome["evidence"], "declared", "{outcome}");
        assert_eq!(outcome["value"], expected.as_str(), "{outcome}");
    }
    // A wrong digest is a violation.
    let wrong = format!("sha256:{}", "0".repeat(64));
    fixture.write_contract(&digest_contract(&[(
        "skill-source",
        "skill",
        "hello-skill",
        "source_digest",
        &wrong,
    )]));
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert_eq!(outcome(&run, "skill-source")["status"], "violated");
    assert_eq!(outcome(&run, "skill-source")["value"], skill.as_str());
    assert!(run.finding("REQUIREMENT_VIOLATED")["message"]
        .as_str()
        .unwrap()
        .contains("skill-source"));
    // Declared evidence never satisfies a generated requirement (the default minimum).
    let mut contract = digest_contract(&[(
        "skill-source",
        "skill",
        "hello-skill",
        "source_digest",
        &skill,
    )]);
    contract["requirements"][0]
        .as_object_mut()
        .unwrap()
        .remove("minimum_evidence");
    fixture.write_contract(&contract);
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 4, "{}", run.stdout);
    assert_eq!(outcome(&run, "skill-source")["status"], "unknown");
}

#[test]
fn rendered_digests_differ_between_agents_and_match_the_staged_files() {
    let fixture = Fixture::synced();
    let mut digests = Vec::new();
    for agent in ["claude", "opencode"] {
        let run = fixture.preflight(&["--agent", agent, "--json"]);
        assert_eq!(run.code, 0, "{agent}: {}", run.stdout);
        let report = run.json();
        let artifact = report["plan"]["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["category"] == "command" && a["name"] == "review")
            .cloned()
            .unwrap_or_else(|| panic!("{agent}: no command review in {}", run.stdout));
        // What `sync` staged for the agent, read and hashed here.
        let staged: Vec<(String, Vec<u8>)> = artifact["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|path| {
                let path = path.as_str().unwrap().to_owned();
                let bytes =
                    std::fs::read(fixture.home.staging_root.join("modes/default").join(&path))
                        .unwrap_or_else(|e| panic!("{agent}: staged {path}: {e}"));
                (path, bytes)
            })
            .collect();
        assert!(!staged.is_empty(), "{agent}: {artifact}");
        let planned = match agent {
            "claude" => "plugins/agentpack-bundle/commands/review.md",
            _ => "opencode/commands/review.md",
        };
        assert_eq!(artifact["files"], serde_json::json!([planned]), "{agent}");
        let expected = framed_digest(staged);
        assert_eq!(artifact["rendered_digest"], expected.as_str(), "{agent}");
        digests.push(expected);
    }
    assert_ne!(
        digests[0], digests[1],
        "claude and opencode render the command differently"
    );
    // The staged bytes' digest satisfies an `equals` requirement on rendered_digest (generated).
    let mut contract = digest_contract(&[(
        "review-rendered",
        "command",
        "review",
        "rendered_digest",
        &digests[0],
    )]);
    contract["requirements"][0]["minimum_evidence"] = "generated".into();
    fixture.write_contract(&contract);
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let outcome = outcome(&run, "review-rendered");
    assert_eq!(outcome["status"], "satisfied", "{outcome}");
    assert_eq!(outcome["evidence"], "generated", "{outcome}");
    // OpenCode's rendering is another digest: the same expectation is violated there.
    contract["requirements"][0]["target"] = "opencode".into();
    fixture.write_contract(&contract);
    assert_eq!(
        fixture.preflight(&["--agent", "opencode", "--json"]).code,
        3
    );
}

#[test]
fn a_changed_and_relocked_package_source_fails_the_old_source_digest() {
    let fixture = Fixture::synced();
    let source = fixture
        .packages
        .path()
        .join("review-plugin/commands/review.md");
    let old = framed_digest(vec![(
        "review.md".to_owned(),
        std::fs::read(&source).unwrap(),
    )]);
    fixture.write_contract(&digest_contract(&[(
        "command-source",
        "command",
        "review",
        "source_digest",
        &old,
    )]));
    assert_eq!(fixture.preflight(&["--agent", "claude", "--json"]).code, 0);
    let changed = "---\ndescription: Review only the tests.\n---\n\nReview the tests.\n";
    write(&source, changed);
    fixture.ok(&["sync"]);
    let run = fixture.preflight(&["--agent", "claude", "--json"]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    let outcome = outcome(&run, "command-source");
    assert_eq!(outcome["status"], "violated", "{outcome}");
    let new = framed_digest(vec![("review.md".to_owned(), changed.as_bytes().to_vec())]);
    assert_eq!(outcome["value"], new.as_str(), "{outcome}");
    assert_ne!(new, old);
}
