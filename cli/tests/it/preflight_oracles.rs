//! The six oracles of the docs' "ICSE evaluation and demonstration", through the real binary on a
//! disposable external definition (`agentpack env init`) and two relocated checkouts. Every
//! expected outcome is written here, from the docs, before reading any report: an exit code, a
//! requirement status, a finding code. And on every preflight: a digest of the definition, both
//! checkouts, the native homes (HOME, XDG config), `AGENTPACK_HOME` and the staging root (contents,
//! modes, directories, symlink targets) is the same before and after.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::path::PathBuf;

use agentpack_test_support::{
    agentpack_bin, copy_dir, examples_dir, tree_digest, write, IsolatedHome,
};

use crate::preflight::unchanged;
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

struct Oracles {
    home: IsolatedHome,
    /// Holds the packages and the checkouts.
    dir: tempfile::TempDir,
    definition: PathBuf,
    checkouts: [PathBuf; 2],
}

struct Run {
    code: i32,
    report: Value,
}

impl Run {
    fn status(&self, id: &str) -> &Value {
        &self.report["requirements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no requirement {id}: {:#}", self.report))["status"]
    }

    fn has(&self, code: &str) -> bool {
        self.report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == code)
    }
}

impl Oracles {
    /// The environment `team` (one path package: the skill `hello-skill`, and a plugin with the
    /// command `review` and the sub-agent `reviewer`), locked and restored; two checkouts, the
    /// second deeper and elsewhere.
    fn new() -> Self {
        let home = IsolatedHome::new();
        let dir = tempfile::tempdir().unwrap();
        let examples = examples_dir();
        for name in ["hello-skill", "review-plugin"] {
            copy_dir(
                &examples.join(name),
                &dir.path().join("packages").join(name),
            );
        }
        let checkouts = [
            dir.path().join("checkout-one"),
            dir.path().join("elsewhere/deeper/checkout-two"),
        ];
        for checkout in &checkouts {
            std::fs::create_dir_all(checkout).unwrap();
        }
        let definition = home.agentpack_home.join("environments/team");
        let oracles = Self {
            home,
            dir,
            definition,
            checkouts,
        };
        oracles.ok(&["env", "init", "team"]);
        let packages = oracles.dir.path().join("packages");
        let mut manifest =
            std::fs::read_to_string(oracles.definition.join("agentpack.toml")).unwrap();
        if !manifest.contains("[dependencies]") {
            manifest.push_str("\n[dependencies]\n");
        }
        for name in ["hello-skill", "review-plugin"] {
            manifest = manifest.replace(
                "[dependencies]\n",
                &format!(
                    "[dependencies]\n\"{name}\" = {{ path = \"{}\" }}\n",
                    packages.join(name).display()
                ),
            );
        }
        std::fs::write(oracles.definition.join("agentpack.toml"), manifest).unwrap();
        oracles.ok_in(0, &["lock"]);
        oracles.ok_in(0, &["env", "restore"]);
        oracles
    }

    fn agentpack(&self, checkout: usize, args: &[&str]) -> std::process::Output {
        let mut full = vec![
            "--env",
            "team",
            "--workspace",
            self.checkouts[checkout].to_str().unwrap(),
        ];
        full.extend_from_slice(args);
        self.home
            .command(&agentpack_bin(), None)
            .args(&full)
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) {
        let output = self
            .home
            .command(&agentpack_bin(), None)
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    fn ok_in(&self, checkout: usize, args: &[&str]) {
        let output = self.agentpack(checkout, args);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// `preflight --agent AGENT --json EXTRA…` in `checkout`; asserts nothing changed anywhere.
    fn preflight(&self, checkout: usize, agent: &str, extra: &[&str]) -> Run {
        let mut args = vec!["preflight", "--agent", agent, "--json"];
        args.extend_from_slice(extra);
        // The definition is under AGENTPACK_HOME; the checkouts are beside.
        let checkouts = [self.checkouts[0].as_path(), self.checkouts[1].as_path()];
        let output = unchanged(&self.home, &checkouts, || self.agentpack(checkout, &args));
        let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!("no JSON ({e}): {}", String::from_utf8_lossy(&output.stderr))
        });
        Run {
            code: output.status.code().unwrap(),
            report,
        }
    }

    fn contract(&self, requirements: Value) {
        std::fs::write(
            self.definition.join("contract.json"),
            serde_json::to_vec_pretty(&json!({"schema_version": 1, "requirements": requirements}))
                .unwrap(),
        )
        .unwrap();
    }

    /// SHA-256 of pack.lock's bytes, computed here.
    fn lock_hash(&self) -> String {
        hex::encode(Sha256::digest(
            std::fs::read(self.definition.join("pack.lock")).unwrap(),
        ))
    }
}

#[test]
fn oracle_1_relocated_checkouts_have_equal_portable_source_identities() {
    let oracles = Oracles::new();
    let one = oracles.preflight(0, "claude", &[]);
    let two = oracles.preflight(1, "claude", &[]);
    assert_eq!(one.code, 0, "{:#}", one.report);
    assert_eq!(two.code, 0, "{:#}", two.report);
    assert_ne!(one.report["workspace"], two.report["workspace"]);
    // (The generation is the checkout's own staging: the second was never restored.)
    for identity in ["source", "lock", "mode", "workspace_inputs"] {
        assert_eq!(
            one.report["identities"][identity], two.report["identities"][identity],
            "{identity}"
        );
    }
    assert!(one.report["identities"]["source"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
}

#[test]
fn oracle_2_no_workspace_write_succeeds_for_claude_planning() {
    let oracles = Oracles::new();
    oracles.contract(
        json!([{"id": "no-write", "target": "claude", "predicate": "no_workspace_write"}]),
    );
    let run = oracles.preflight(0, "claude", &["--strict-external"]);
    assert_eq!(run.code, 0, "{:#}", run.report);
    assert_eq!(run.status("no-write"), "satisfied");
}

#[test]
fn oracle_3_observed_skill_presence_without_a_receipt_is_unknown_with_exit_4() {
    let oracles = Oracles::new();
    oracles.contract(json!([{"id": "hello-observed", "target": "claude",
        "selector": {"category": "skill", "name": "hello-skill", "scope": "workspace_session"},
        "predicate": "present", "minimum_evidence": "observed"}]));
    let run = oracles.preflight(0, "claude", &[]);
    assert_eq!(run.code, 4, "{:#}", run.report);
    assert_eq!(run.status("hello-observed"), "unknown");
    assert!(run.has("RECEIPT_MISSING"));
}

#[test]
fn oracle_4_a_strict_cursor_workspace_overlay_requirement_fails_with_exit_3() {
    let oracles = Oracles::new();
    oracles.contract(
        json!([{"id": "no-write", "target": "cursor", "predicate": "no_workspace_write"}]),
    );
    let run = oracles.preflight(0, "cursor", &["--strict-external"]);
    assert_eq!(run.code, 3, "{:#}", run.report);
    assert_eq!(run.status("no-write"), "violated");
    assert!(run.has("WORKSPACE_WRITE_PLANNED"));
}

#[test]
fn oracle_5_nothing_changes_during_preflight_in_any_outcome() {
    // Every preflight of every oracle asserts it (`Oracles::preflight`); here, the outcomes the
    // other oracles do not reach: a usage error, an operational failure and every agent.
    let oracles = Oracles::new();
    for agent in ["claude", "cursor", "opencode", "codex", "grok", "agy"] {
        let run = oracles.preflight(1, agent, &["--policy", "ci", "--strict-external"]);
        assert!(matches!(run.code, 0 | 3), "{agent}: {:#}", run.report);
    }
    std::fs::write(
        oracles.definition.join("contract.json"),
        "{\"schema_version\": 2}",
    )
    .unwrap();
    let roots = [
        oracles.definition.as_path(),
        oracles.home.agentpack_home.as_path(),
    ];
    let before = tree_digest(&roots);
    let output = oracles.agentpack(0, &["preflight", "--agent", "claude"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(tree_digest(&roots), before);
    std::fs::remove_file(oracles.definition.join("contract.json")).unwrap();
    std::fs::create_dir_all(oracles.checkouts[0].join(".claude/skills")).unwrap();
    std::os::unix::fs::symlink("..", oracles.checkouts[0].join(".claude/skills/loop")).unwrap();
    let run = oracles.preflight(0, "claude", &[]);
    assert_eq!(run.code, 5, "{:#}", run.report);
}

#[test]
fn oracle_6_inherited_settings_a_mismatched_skill_and_an_incomplete_receipt_are_rejected() {
    let oracles = Oracles::new();
    let lock = oracles.lock_hash();

    // Authored inherited user settings: a violation for a strict external CI check.
    write(
        &oracles.home.home.join(".claude/settings.json"),
        "{\"model\": \"other\"}\n",
    );
    let run = oracles.preflight(0, "claude", &["--policy", "ci", "--strict-external"]);
    assert_eq!(run.code, 3, "{:#}", run.report);
    assert!(run.has("INHERITED_CONFIG"));
    std::fs::remove_file(oracles.home.home.join(".claude/settings.json")).unwrap();

    // A same-named skill in the checkout takes the packaged skill's name.
    oracles.contract(json!([{"id": "hello-holds-its-name", "target": "claude",
        "selector": {"category": "skill", "name": "hello-skill", "property": "winner"},
        "predicate": "source_allowed", "expected": "package"}]));
    assert_eq!(oracles.preflight(0, "claude", &[]).code, 0);
    write(
        &oracles.checkouts[0].join(".claude/skills/hello-skill/SKILL.md"),
        "---\nname: hello-skill\ndescription: impostor\n---\nImpostor.\n",
    );
    let run = oracles.preflight(0, "claude", &[]);
    assert_eq!(run.code, 3, "{:#}", run.report);
    assert_eq!(run.status("hello-holds-its-name"), "violated");
    // The other checkout has no such skill.
    assert_eq!(oracles.preflight(1, "claude", &[]).code, 0);

    // An incomplete receipt (an old record without identities) answers nothing.
    oracles.contract(json!([{"id": "hello-observed", "target": "claude",
        "selector": {"category": "skill", "name": "hello-skill", "scope": "workspace_session"},
        "predicate": "present", "minimum_evidence": "observed"}]));
    let receipt = oracles.dir.path().join("incomplete-receipt.json");
    std::fs::write(
        &receipt,
        serde_json::to_vec(&json!({"format": 1, "id": "old-claude", "agent": "claude",
            "status": "complete", "scope": "workspace_session",
            "catalog": {"artifacts": [{"category": "skill", "name": "hello-skill"}]}}))
        .unwrap(),
    )
    .unwrap();
    let run = oracles.preflight(1, "claude", &["--receipt", receipt.to_str().unwrap()]);
    assert_eq!(run.code, 4, "{:#}", run.report);
    assert_eq!(run.status("hello-observed"), "unknown");
    assert!(run.has("RECEIPT_UNUSABLE"), "{:#}", run.report);
    assert!(!run.has("RECEIPT_ATTACHED"));

    assert_eq!(oracles.lock_hash(), lock, "the lock's bytes changed");
}
