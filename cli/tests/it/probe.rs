//! `agentpack probe` and `preflight --receipt` through the real binary: the pinned real clients
//! observe a sentinel skill (and a failing `SessionStart` hook), a receipt made before the sentinel
//! was removed no longer satisfies an `observed` contract, and the checkout never changes; stand-in
//! executables (shell scripts) for invalid output, a non-zero exit, unknown and empty versions,
//! output beyond the capture bound and a hang killed by the timeout with its child.
//!
//! The real clients come from `AGENTPACK_TEST_AGENTS_BIN`; outside CI those tests skip with a
//! printed reason when it is unset, in CI (`CI` set) they fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // test code; skips are printed

use agentpack_test_support::{agents_bin, tree_digest, write, write_executable, IsolatedHome};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};

const SENTINEL: &str = "probe-sentinel-7f3a";

struct Fixture {
    home: IsolatedHome,
    package: PathBuf,
    /// `CLAUDE_PATH` / `CODEX_PATH` and other variables for every run.
    envs: Vec<(String, String)>,
}

impl Fixture {
    /// A project with one path package: the sentinel skill, a second skill and a `SessionStart`
    /// hook that exits 7; synced.
    fn synced() -> Self {
        let home = IsolatedHome::new();
        let package = home.project.parent().unwrap().join("sentinel-pkg");
        write(
            &package.join(format!("skills/{SENTINEL}/SKILL.md")),
            &format!("---\nname: {SENTINEL}\ndescription: The probe's sentinel skill.\n---\n\nSentinel.\n"),
        );
        write(
            &package.join("skills/steady/SKILL.md"),
            "---\nname: steady\ndescription: A skill that stays.\n---\n\nSteady.\n",
        );
        write(
            &package.join("hooks/hooks.json"),
            r#"{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "exit 7"}]}]}}"#,
        );
        let fixture = Fixture {
            home,
            package,
            // Fewer OpenCode samples than the default 60: the tests stay fast on a loaded machine.
            envs: vec![(
                "AGENTPACK_PROBE_OPENCODE_SAMPLES".to_owned(),
                "4".to_owned(),
            )],
        };
        fixture.ok(&["init", "--name", "probe-fixture"]);
        fixture.ok(&["add", fixture.package.to_str().unwrap(), "--no-sync"]);
        fixture.ok(&["sync"]);
        fixture
    }

    /// [`Fixture::synced`], with the pinned real clients in `agents` first on every run's `PATH`.
    fn synced_with_agents(agents: &Path) -> Self {
        let mut fixture = Self::synced();
        let path = format!(
            "{}:{}",
            agents.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        fixture.envs.push(("PATH".to_owned(), path));
        fixture
    }

    fn run(&self, args: &[&str]) -> Output {
        let envs = self.envs.iter().map(|(key, value)| (key, value));
        self.home.agentpack(args).envs(envs).output().unwrap()
    }

    fn ok(&self, args: &[&str]) {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "{args:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// `probe --agent AGENT --json`: the exit code and the receipt.
    fn probe(&self, agent: &str) -> (i32, Value) {
        let output = self.run(&["probe", "--agent", agent, "--json"]);
        let receipt = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "probe printed no JSON ({e}):\n{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
        (output.status.code().unwrap(), receipt)
    }

    fn preflight(&self, agent: &str, receipt: &str) -> (i32, Value) {
        self.preflight_with(agent, receipt, &[])
    }

    fn preflight_with(&self, agent: &str, receipt: &str, extra: &[&str]) -> (i32, Value) {
        let mut args = vec![
            "--json",
            "preflight",
            "--agent",
            agent,
            "--receipt",
            receipt,
        ];
        args.extend_from_slice(extra);
        let output = self.run(&args);
        let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "preflight printed no JSON ({e}):\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
        (output.status.code().unwrap(), report)
    }

    /// contract.json: the sentinel is present, observed in each probe's scope.
    fn contract(&self) {
        let requirement = |agent: &str, scope: &str| {
            json!({"id": format!("sentinel-{agent}"), "target": agent,
                "selector": {"category": "skill", "name": SENTINEL, "scope": scope},
                "predicate": "present", "minimum_evidence": "observed"})
        };
        std::fs::write(
            self.home.project.join("contract.json"),
            serde_json::to_vec(&json!({"schema_version": 1,
                "requirements": [requirement("claude", "workspace_session"),
                    requirement("codex", "controlled_projection"),
                    requirement("opencode", "controlled_projection")]}))
            .unwrap(),
        )
        .unwrap();
    }

    /// A stand-in executable for `agent` (its `*_PATH` override).
    fn stand_in(&mut self, agent: &str, script: &str) -> PathBuf {
        let path = self.home.home.join(format!("stand-in-{agent}"));
        write_executable(&path, script);
        let var = match agent {
            "claude" => "CLAUDE_PATH",
            "codex" => "CODEX_PATH",
            _ => "OPENCODE_PATH",
        };
        self.envs.push((var.to_owned(), path.display().to_string()));
        path
    }
}

fn finding<'r>(report: &'r Value, code: &str) -> Option<&'r Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == code)
}

fn observed(receipt: &Value, category: &str, name: &str) -> Option<Value> {
    receipt["catalog"]["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["category"] == category && a["name"] == name)
        .cloned()
}

#[test]
fn the_real_clients_observe_the_sentinel_and_an_old_receipt_goes_stale() {
    let Some(bin) = agents_bin() else { return };
    let _one_at_a_time = agentpack_test_support::one_timed_client_run();
    let fixture = Fixture::synced_with_agents(&bin);
    fixture.contract();
    let checkout = tree_digest(&[&fixture.home.project]);

    let started = std::time::Instant::now();
    let (code, claude) = fixture.probe("claude");
    assert_eq!(code, 0, "{claude:#}");
    assert!(
        started.elapsed().as_secs() < 10,
        "a Claude probe takes under 10 s"
    );
    assert_eq!(claude["status"], "complete");
    assert_eq!(claude["client"]["version"], "2.1.328");
    assert!(claude["client"]["sha256"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    let sentinel = observed(&claude, "skill", SENTINEL).expect("claude lists the sentinel");
    assert_eq!(sentinel["winner"], "package");
    assert_eq!(sentinel["scope"], "workspace_session");
    let hooks = claude["catalog"]["hooks"].as_array().unwrap();
    assert!(
        hooks.iter().any(|h| h["event"] == "SessionStart"
            && h["exit_code"] == 7
            && h["outcome"] == "error"),
        "the failing SessionStart hook is reported with its exit code: {hooks:?}"
    );
    // `plugin details`: the loader's inventory lists the sentinel, and so the controlled
    // projection observes it.
    let details = &claude["catalog"]["properties"][0];
    assert_eq!(details["name"], "plugin_details", "{claude:#}");
    assert_eq!(details["status"], "observed", "{details}");
    assert!(
        details["value"]["inventory"]["skills_and_commands"]
            .as_array()
            .unwrap()
            .contains(&json!(SENTINEL)),
        "{details}"
    );
    assert_eq!(
        details["value"]["inventory"]["hooks"],
        json!(["SessionStart"])
    );
    assert!(
        claude["catalog"]["other_scopes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["name"] == SENTINEL && a["scope"] == "controlled_projection"),
        "{claude:#}"
    );
    // 0700 directory, 0600 file.
    let path = PathBuf::from(claude["path"].as_str().unwrap());
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );

    let (code, codex) = fixture.probe("codex");
    assert_eq!(code, 0, "{codex:#}");
    assert_eq!(codex["client"]["version"], "0.171.0");
    let sentinel = observed(&codex, "skill", SENTINEL).expect("codex lists the sentinel");
    assert_eq!(sentinel["scope"], "controlled_projection");
    assert_eq!(sentinel["winner"], "package");
    // The workspace session, in the checkout, holds the staged copy's name too.
    assert!(
        codex["catalog"]["other_scopes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["name"] == SENTINEL
                && a["scope"] == "workspace_session"
                && a["winner"] == "package"),
        "{codex:#}"
    );
    assert!(observed(&codex, "skill", "steady").is_some());

    let (code, opencode) = fixture.probe("opencode");
    assert_eq!(code, 0, "{opencode:#}");
    assert_eq!(opencode["client"]["version"], "1.18.33");
    let sentinel = observed(&opencode, "skill", SENTINEL).expect("opencode lists the sentinel");
    assert_eq!(sentinel["winner"], "package");

    for agent in ["claude", "codex", "opencode"] {
        let (code, report) = fixture.preflight(agent, "latest");
        assert_eq!(code, 0, "{report:#}");
        assert!(finding(&report, "RECEIPT_ATTACHED").is_some(), "{report:#}");
        let outcome = &report["requirements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == format!("sentinel-{agent}"))
            .unwrap()
            .clone();
        assert_eq!(outcome["status"], "satisfied", "{outcome}");
        assert_eq!(outcome["evidence"], "observed");
    }
    assert_eq!(
        tree_digest(&[&fixture.home.project]),
        checkout,
        "probes change nothing in the checkout"
    );

    // The sentinel goes; the project is re-synced.
    std::fs::remove_dir_all(fixture.package.join(format!("skills/{SENTINEL}"))).unwrap();
    fixture.ok(&["sync"]);
    let old = claude["path"].as_str().unwrap();
    let (code, report) = fixture.preflight("claude", old);
    assert_eq!(code, 4, "an old receipt satisfies nothing: {report:#}");
    let stale = finding(&report, "RECEIPT_STALE").expect("the stale receipt is a finding");
    assert!(
        stale["message"].as_str().unwrap().contains("generation"),
        "{stale}"
    );
    assert!(
        stale["remedy"]
            .as_str()
            .unwrap()
            .contains("agentpack probe --agent claude"),
        "{stale}"
    );
    // `latest` is still that old receipt: it does not fall back to anything else either.
    let (code, _) = fixture.preflight("claude", "latest");
    assert_eq!(code, 4);

    // Re-probed: no client lists the sentinel. In a bounded scope its absence stays unknown; a
    // requirement the observed catalog contradicts is violated (exit 3). The contract is part of
    // the policy identity a receipt is bound to, so it is written before the probes.
    let mut requirements = Vec::new();
    for (agent, scope) in [
        ("claude", "workspace_session"),
        ("codex", "controlled_projection"),
        ("opencode", "controlled_projection"),
    ] {
        requirements.push(json!({"id": format!("sentinel-{agent}"), "target": agent,
            "selector": {"category": "skill", "name": SENTINEL, "scope": scope},
            "predicate": "present", "minimum_evidence": "observed"}));
        requirements.push(json!({"id": format!("no-steady-{agent}"), "target": agent,
            "selector": {"category": "skill", "name": "steady", "scope": scope},
            "predicate": "absent", "minimum_evidence": "observed"}));
    }
    std::fs::write(
        fixture.home.project.join("contract.json"),
        serde_json::to_vec(&json!({"schema_version": 1, "requirements": requirements})).unwrap(),
    )
    .unwrap();
    let checkout = tree_digest(&[&fixture.home.project]);
    for agent in ["claude", "codex", "opencode"] {
        let (code, receipt) = fixture.probe(agent);
        assert_eq!(code, 0, "{receipt:#}");
        assert!(
            observed(&receipt, "skill", SENTINEL).is_none(),
            "{agent} no longer lists it"
        );
        assert!(observed(&receipt, "skill", "steady").is_some());
        let (code, report) = fixture.preflight(agent, "latest");
        assert_eq!(code, 3, "{report:#}");
        assert!(finding(&report, "RECEIPT_ATTACHED").is_some(), "{report:#}");
        let outcome = |id: String| {
            report["requirements"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["id"] == id)
                .unwrap()
                .clone()
        };
        assert_eq!(
            outcome(format!("sentinel-{agent}"))["status"],
            "unknown",
            "{report:#}"
        );
        let steady = outcome(format!("no-steady-{agent}"));
        assert_eq!(steady["status"], "violated", "{report:#}");
        assert_eq!(steady["evidence"], "observed");
    }
    assert_eq!(
        tree_digest(&[&fixture.home.project]),
        checkout,
        "the checkout is unchanged"
    );
}

fn probe_with(agent: &str, script: &str, envs: &[(&str, &str)]) -> (Fixture, i32, Value) {
    let mut fixture = Fixture::synced();
    fixture.stand_in(agent, script);
    for (key, value) in envs {
        fixture.envs.push(((*key).to_owned(), (*value).to_owned()));
    }
    let (code, receipt) = fixture.probe(agent);
    (fixture, code, receipt)
}

const CODEX_VERSION: &str =
    "if [ \"$1\" = --version ]; then echo 'codex-cli 0.171.0'; exit 0; fi\n";

#[test]
fn invalid_output_and_a_non_zero_exit_are_failures_never_an_empty_catalog() {
    let (_, code, receipt) = probe_with("claude", "#!/bin/sh\necho 'this is not a stream'\n", &[]);
    assert_eq!(code, 5, "{receipt:#}");
    assert_eq!(receipt["status"], "failed");
    assert!(receipt["catalog"].is_null());
    assert!(
        receipt["reason"].as_str().unwrap().contains("not JSON"),
        "{receipt:#}"
    );

    let (fixture, code, receipt) = probe_with(
        "codex",
        &format!("#!/bin/sh\n{CODEX_VERSION}echo '[{{\"content\":[{{\"text\":\"<skills_instructions>\\n</skills_instructions>\"}}]}}]'\nexit 3\n"),
        &[],
    );
    assert_eq!(code, 5, "{receipt:#}");
    assert_eq!(receipt["status"], "failed");
    assert_eq!(receipt["termination"]["exit_code"], 3);
    assert!(receipt["catalog"].is_null());
    // A failed receipt satisfies no contract: named, it is a diagnostic; `latest` passes over it.
    fixture.contract();
    let (code, report) = fixture.preflight("codex", receipt["path"].as_str().unwrap());
    assert_eq!(code, 4, "{report:#}");
    let unusable = finding(&report, "RECEIPT_UNUSABLE").expect("a diagnostic");
    assert!(
        unusable["message"].as_str().unwrap().contains("failed"),
        "{unusable}"
    );
    let (code, report) = fixture.preflight("codex", "latest");
    assert_eq!(code, 4, "{report:#}");
    let missing = finding(&report, "RECEIPT_MISSING").expect("no successful receipt");
    assert!(
        missing["message"].as_str().unwrap().contains("failed"),
        "{missing}"
    );

    let (_, code, receipt) = probe_with(
        "codex",
        "#!/bin/sh\n[ \"$1\" = --version ] && exit 0\necho '[]'\n",
        &[],
    );
    assert_eq!(code, 5, "an empty version: {receipt:#}");
    assert!(receipt["catalog"].is_null());

    let (_, code, receipt) = probe_with(
        "codex",
        &format!("#!/bin/sh\n{CODEX_VERSION}head -c 5000000 /dev/zero\n"),
        &[],
    );
    assert_eq!(code, 5, "{receipt:#}");
    assert!(
        receipt["termination"]["truncated"].as_bool().unwrap(),
        "{receipt:#}"
    );
    assert!(receipt["catalog"].is_null());
}

#[test]
fn an_unknown_version_is_unknown_never_a_guess() {
    let init = r#"{"type":"system","subtype":"init","claude_code_version":"9.9.9","skills":[],"slash_commands":[],"agents":[]}"#;
    let (_, code, receipt) = probe_with(
        "claude",
        &format!("#!/bin/sh\necho '{init}'\nsleep 5\n"),
        &[],
    );
    assert_eq!(code, 4, "{receipt:#}");
    assert_eq!(receipt["status"], "unknown");
    assert_eq!(receipt["client"]["version"], "9.9.9");
    assert!(receipt["catalog"].is_null());
    assert!(receipt["reason"].as_str().unwrap().contains("2.1.328"));

    let (_, code, receipt) = probe_with(
        "codex",
        "#!/bin/sh\n[ \"$1\" = --version ] && echo 'codex-cli 0.1.0' && exit 0\necho '[]'\n",
        &[],
    );
    assert_eq!(code, 4, "{receipt:#}");
    assert_eq!(receipt["status"], "unknown");
}

#[test]
fn a_hang_is_killed_by_the_timeout_with_its_children() {
    let pids = tempfile::tempdir().unwrap();
    let pidfile = pids.path().join("child");
    let script = format!(
        "#!/bin/sh\nsleep 300 &\necho $! > {}\nsleep 300\n",
        pidfile.display()
    );
    let started = std::time::Instant::now();
    let (_, code, receipt) =
        probe_with("claude", &script, &[("AGENTPACK_PROBE_TIMEOUT_SECS", "1")]);
    assert!(started.elapsed().as_secs() < 20);
    assert_eq!(code, 5, "{receipt:#}");
    assert_eq!(receipt["status"], "timed_out");
    assert_eq!(receipt["termination"]["how"], "timed_out");
    let child: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Gone, or a zombie waiting for a reaper: never still sleeping.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let state = std::fs::read_to_string(format!("/proc/{child}/stat")).ok();
        let alive = state.as_deref().is_some_and(|s| {
            s.rsplit(')')
                .next()
                .map(str::trim_start)
                .is_some_and(|rest| !rest.starts_with('Z'))
        });
        if !alive {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the hung client's child survived"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_probe_never_stages() {
    let home = IsolatedHome::new();
    let bin = assert_cmd::cargo::cargo_bin("agentpack");
    let ok = home
        .command(&bin, None)
        .args(["init", "--name", "unsynced"])
        .output()
        .unwrap();
    assert!(ok.status.success());
    let output = home
        .command(&bin, None)
        .args(["probe", "--agent", "claude"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("agentpack sync"), "{stderr}");
    assert!(
        !home.staging_root.join("modes/default").exists(),
        "nothing was staged"
    );
}

/// A stand-in Claude Code 2.1.328 that lists the sentinel from the bundle, as the real one does.
fn claude_stand_in() -> String {
    let init = json!({"type": "system", "subtype": "init", "claude_code_version": "2.1.328",
        "skills": [format!("agentpack-bundle:{SENTINEL}"), "builtin"],
        "slash_commands": [format!("agentpack-bundle:{SENTINEL}"), "compact"],
        "agents": ["Explore"]});
    // `plugin validate --json BUNDLE`, the controlled projection beside the session.
    let validated = json!({"success": true, "provides": {
        "skills": [format!("agentpack-bundle:{SENTINEL}")], "commands": [], "agents": []}});
    // `--plugin-dir BUNDLE plugin details NAME`: a Claude Code without the command.
    format!("#!/bin/sh\nif [ \"$3\" = plugin ] && [ \"$4\" = details ]; then echo \"error: unknown command 'details'\" >&2; exit 1; fi\nif [ \"$1\" = plugin ]; then echo '{validated}'; exit 0; fi\necho '{init}'\nsleep 30\n")
}

#[test]
fn a_receipt_is_attached_only_while_its_inputs_and_evidence_are_unchanged() {
    let mut fixture = Fixture::synced();
    fixture.stand_in("claude", &claude_stand_in());
    fixture.contract();
    // A receipt is bound to the contract beside the definition (part of the policy identity):
    // the controlled-projection requirement is in it before the probe.
    let contract_path = fixture.home.project.join("contract.json");
    let mut contract: Value =
        serde_json::from_slice(&std::fs::read(&contract_path).unwrap()).unwrap();
    contract["requirements"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "projected",
            "target": "claude", "selector": {"category": "skill", "name": SENTINEL,
            "scope": "controlled_projection"},
            "predicate": "present", "minimum_evidence": "observed"}));
    std::fs::write(&contract_path, serde_json::to_vec(&contract).unwrap()).unwrap();
    let (code, receipt) = fixture.probe("claude");
    assert_eq!(code, 0, "{receipt:#}");
    assert_eq!(receipt["termination"]["how"], "stopped");
    assert_eq!(
        observed(&receipt, "command", "compact").unwrap()["winner"],
        "other"
    );
    let (code, report) = fixture.preflight("claude", "latest");
    assert_eq!(code, 0, "{report:#}");
    // A client without `plugin details`: that property is unknown, never guessed, and what
    // `plugin validate` provides stays the controlled projection's observation.
    let details = &receipt["catalog"]["properties"][0];
    assert_eq!(details["name"], "plugin_details", "{receipt:#}");
    assert_eq!(details["status"], "unknown", "{details}");
    assert!(details["value"].is_null());
    assert!(
        details["reason"]
            .as_str()
            .unwrap()
            .contains("plugin details"),
        "{details}"
    );
    let projected = receipt["catalog"]["other_scopes"].as_array().unwrap();
    assert!(projected
        .iter()
        .any(|a| a["name"] == SENTINEL && a["scope"] == "controlled_projection"));
    // A requirement in that scope is answered from it.
    let (code, report) = fixture.preflight("claude", "latest");
    assert_eq!(code, 0, "{report:#}");
    let projected = report["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "projected")
        .unwrap()
        .clone();
    assert_eq!(projected["status"], "satisfied", "{projected}");
    assert_eq!(projected["evidence"], "observed", "{projected}");
    // Another contract is another policy identity: not attached.
    let elsewhere = fixture.home.home.join("elsewhere.json");
    std::fs::write(&elsewhere, b"{\"schema_version\": 1, \"requirements\": []}").unwrap();
    let (_, report) = fixture.preflight_with(
        "claude",
        "latest",
        &["--contract", elsewhere.to_str().unwrap()],
    );
    assert!(finding(&report, "RECEIPT_STALE").is_some(), "{report:#}");

    // Made without `--policy`, the receipt is bound to the default policy (`local`): a
    // preflight under another policy does not attach it.
    let (code, report) = fixture.preflight_with("claude", "latest", &["--policy", "ci"]);
    assert_eq!(code, 4, "{report:#}");
    let stale = finding(&report, "RECEIPT_STALE").expect("another policy");
    assert!(
        stale["message"].as_str().unwrap().contains("policy"),
        "{stale}"
    );

    // A receipt of an older capability revision is stale, with the revisions named.
    let path = PathBuf::from(receipt["path"].as_str().unwrap());
    let older = fixture.home.home.join("older-capability.json");
    let mut value: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert!(value["capability"].as_u64().unwrap() >= 2, "{value:#}");
    value["capability"] = json!(1);
    std::fs::write(&older, serde_json::to_vec(&value).unwrap()).unwrap();
    std::fs::copy(
        path.with_extension("evidence"),
        older.with_extension("evidence"),
    )
    .unwrap();
    let (code, report) = fixture.preflight("claude", older.to_str().unwrap());
    assert_eq!(code, 4, "{report:#}");
    let stale = finding(&report, "RECEIPT_STALE").expect("an older capability revision");
    assert!(
        stale["message"]
            .as_str()
            .unwrap()
            .contains("capability revision 1"),
        "{stale}"
    );
    // A receipt written before policies were always bound attaches under no policy.
    value["capability"] = receipt["capability"].clone();
    value["identities"]
        .as_object_mut()
        .unwrap()
        .remove("policy");
    std::fs::write(&older, serde_json::to_vec(&value).unwrap()).unwrap();
    let (code, report) = fixture.preflight("claude", older.to_str().unwrap());
    assert_eq!(code, 4, "{report:#}");
    assert!(finding(&report, "RECEIPT_STALE").is_some(), "{report:#}");

    // The retained evidence is checked against its digest.
    let path = PathBuf::from(receipt["path"].as_str().unwrap());
    let evidence = path.with_extension("evidence");
    let kept = std::fs::read(&evidence).unwrap();
    std::fs::write(&evidence, b"edited").unwrap();
    let (code, report) = fixture.preflight("claude", "latest");
    assert_eq!(code, 4, "{report:#}");
    let unusable = finding(&report, "RECEIPT_UNUSABLE").unwrap();
    assert!(
        unusable["message"].as_str().unwrap().contains("evidence"),
        "{unusable}"
    );
    std::fs::write(&evidence, kept).unwrap();

    // A skill the checkout adds changes the workspace inputs: stale until it goes again.
    let extra = fixture.home.project.join(".claude/skills/local/SKILL.md");
    write(&extra, "---\nname: local\ndescription: d\n---\n");
    let (code, report) = fixture.preflight("claude", "latest");
    assert_eq!(code, 4, "{report:#}");
    let stale = finding(&report, "RECEIPT_STALE").unwrap();
    assert!(
        stale["message"]
            .as_str()
            .unwrap()
            .contains("workspace inputs"),
        "{stale}"
    );
    std::fs::remove_dir_all(fixture.home.project.join(".claude")).unwrap();
    let (code, report) = fixture.preflight("claude", "latest");
    assert_eq!(code, 0, "{report:#}");

    // Another receipt's agent, or an old format, never answers.
    let (code, report) = fixture.preflight("codex", path.to_str().unwrap());
    assert_eq!(code, 4, "{report:#}");
    assert!(finding(&report, "RECEIPT_UNUSABLE").is_some(), "{report:#}");
    let old = fixture.home.home.join("old.json");
    let mut value: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    value["format"] = json!(0);
    std::fs::write(&old, serde_json::to_vec(&value).unwrap()).unwrap();
    let (code, report) = fixture.preflight("claude", old.to_str().unwrap());
    assert_eq!(code, 4, "{report:#}");
    assert!(finding(&report, "RECEIPT_UNUSABLE").is_some(), "{report:#}");

    // A probe bound to a policy fits only a preflight under that policy.
    let output = fixture.run(&["--json", "probe", "--agent", "claude", "--policy", "ci"]);
    assert!(output.status.success());
    let (code, report) = fixture.preflight("claude", "latest");
    assert_eq!(code, 4, "{report:#}");
    let stale = finding(&report, "RECEIPT_STALE").unwrap();
    assert!(
        stale["message"].as_str().unwrap().contains("policy"),
        "{stale}"
    );
    let (_, report) = fixture.preflight_with("claude", "latest", &["--policy", "ci"]);
    assert!(finding(&report, "RECEIPT_ATTACHED").is_some(), "{report:#}");

    // Unscoped means the native catalog, which no probe observes: unknown, never promoted.
    std::fs::write(
        fixture.home.project.join("contract.json"),
        serde_json::to_vec(
            &json!({"schema_version": 1, "requirements": [{"id": "unscoped",
            "target": "claude", "selector": {"category": "skill", "name": SENTINEL},
            "predicate": "present", "minimum_evidence": "observed"}]}),
        )
        .unwrap(),
    )
    .unwrap();
    let (code, receipt) = fixture.probe("claude");
    assert_eq!(code, 0, "{receipt:#}");
    let (code, report) = fixture.preflight("claude", "latest");
    assert_eq!(code, 4, "{report:#}");
    assert!(finding(&report, "RECEIPT_ATTACHED").is_some(), "{report:#}");
    assert!(report["requirements"][0]["message"]
        .as_str()
        .unwrap()
        .contains("native_catalog"));

    // A timeout that is not a number is refused, not replaced.
    fixture
        .envs
        .push(("AGENTPACK_PROBE_TIMEOUT_SECS".to_owned(), "soon".to_owned()));
    let output = fixture.run(&["probe", "--agent", "claude"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("AGENTPACK_PROBE_TIMEOUT_SECS"));
}

/// A stand-in OpenCode 1.18.33: `debug skill` lists the sentinel from `OPENCODE_CONFIG_DIR`
/// (each call appends a line to `calls`; with a `delay`, the one call that first creates the
/// `calls.hang` directory sleeps that long first), `debug config` an empty configuration.
/// Samples run concurrently, so the hanging call is chosen by an atomic `mkdir`, never by a
/// count that two calls could read at once.
fn opencode_stand_in(calls: &Path, delay: u32) -> String {
    format!(
        r#"#!/bin/sh
if [ "$1" = --version ]; then echo 1.18.33; exit 0; fi
if [ "$2" = config ]; then echo '{{"agent":{{}},"command":{{}}}}'; exit 0; fi
echo x >> {calls}
if [ {delay} -gt 0 ] && mkdir {calls}.hang 2>/dev/null; then sleep {delay}; fi
echo "[{{\"name\":\"{SENTINEL}\",\"location\":\"$OPENCODE_CONFIG_DIR/skills/{SENTINEL}/SKILL.md\"}}]"
"#,
        calls = calls.display()
    )
}

#[test]
fn opencode_samples_run_bounded_and_a_timed_out_sample_is_unknown() {
    let counts = tempfile::tempdir().unwrap();
    // Every sample answers: the receipt records each over the samples asked for.
    let calls = counts.path().join("fast");
    let (mut fixture, code, receipt) = probe_with(
        "opencode",
        &opencode_stand_in(&calls, 0),
        &[("AGENTPACK_PROBE_OPENCODE_SAMPLES", "12")],
    );
    assert_eq!(code, 0, "{receipt:#}");
    assert_eq!(
        std::fs::read_to_string(&calls).unwrap().lines().count(),
        12,
        "12 `debug skill` samples"
    );
    let seen = &receipt["catalog"]["winners_seen"][0];
    assert_eq!(seen["samples"], 12, "{receipt:#}");
    assert_eq!(seen["winners"], json!([["package", 12]]));
    assert_eq!(
        observed(&receipt, "skill", SENTINEL).unwrap()["winner"],
        "package"
    );
    assert!(receipt["capability"].as_u64().unwrap() >= 2);

    // One sample hangs past the per-call timeout: killed, and the receipt is `timed_out` with
    // no catalog (its winner is unknown, never guessed from the others).
    let calls = counts.path().join("slow");
    fixture.stand_in("opencode", &opencode_stand_in(&calls, 60));
    fixture
        .envs
        .push(("AGENTPACK_PROBE_TIMEOUT_SECS".to_owned(), "2".to_owned()));
    let started = std::time::Instant::now();
    let (code, receipt) = fixture.probe("opencode");
    assert!(
        started.elapsed().as_secs() < 30,
        "the timeout bounds the sampling"
    );
    assert_eq!(code, 5, "{receipt:#}");
    assert_eq!(receipt["status"], "timed_out", "{receipt:#}");
    assert!(receipt["catalog"].is_null());
    assert!(
        receipt["reason"].as_str().unwrap().contains("unknown"),
        "{receipt:#}"
    );

    // A sample count that is not a number is refused, not replaced.
    fixture.envs.push((
        "AGENTPACK_PROBE_OPENCODE_SAMPLES".to_owned(),
        "many".to_owned(),
    ));
    let output = fixture.run(&["probe", "--agent", "opencode"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("AGENTPACK_PROBE_OPENCODE_SAMPLES"));
}

#[test]
fn the_codex_settings_are_ones_the_pinned_codex_parses() {
    let Some(bin) = agents_bin() else { return };
    let home = tempfile::tempdir().unwrap();
    let codex = |setting: &str| {
        std::process::Command::new(bin.join("codex"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("CODEX_HOME", home.path().join("codex"))
            .current_dir(home.path())
            .args(["-c", setting, "debug", "prompt-input", "hi"])
            .output()
            .unwrap()
    };
    std::fs::create_dir_all(home.path().join("codex")).unwrap();
    // Each key is read and type-checked: a wrong value is refused naming the key, the probe's
    // value is accepted.
    for (key, good) in [
        ("cloud.skills.enabled", "false"),
        ("cli_auth_credentials_store", "\"file\""),
        ("mcp_oauth_credentials_store", "\"file\""),
    ] {
        let wrong = codex(&format!("{key}=\"not-a-value\""));
        assert!(!wrong.status.success(), "{key}");
        assert!(
            String::from_utf8_lossy(&wrong.stderr).contains(key),
            "{key}: {}",
            String::from_utf8_lossy(&wrong.stderr)
        );
        let right = codex(&format!("{key}={good}"));
        assert!(
            right.status.success(),
            "{key}: {}",
            String::from_utf8_lossy(&right.stderr)
        );
    }
}

#[test]
fn the_codex_workspace_session_records_which_copy_wins() {
    let Some(bin) = agents_bin() else { return };
    let _one_at_a_time = agentpack_test_support::one_timed_client_run();
    let fixture = Fixture::synced_with_agents(&bin);
    // The checkout provides its own `steady`, which a session started there lists too.
    write(
        &fixture.home.project.join(".codex/skills/steady/SKILL.md"),
        "---\nname: steady\ndescription: The checkout's copy.\n---\n\nMine.\n",
    );
    // The contract is part of the policy identity the receipt is bound to: written first.
    let winner = |name: &str| {
        json!({"id": format!("{name}-wins"), "target": "codex",
            "selector": {"category": "skill", "name": name, "property": "winner",
                "scope": "workspace_session"},
            "predicate": "source_allowed", "expected": "package", "minimum_evidence": "observed"})
    };
    std::fs::write(
        fixture.home.project.join("contract.json"),
        serde_json::to_vec(&json!({"schema_version": 1,
            "requirements": [winner(SENTINEL), winner("steady")]}))
        .unwrap(),
    )
    .unwrap();
    let checkout = tree_digest(&[&fixture.home.project]);
    let (code, codex) = fixture.probe("codex");
    assert_eq!(code, 0, "{codex:#}");
    assert_eq!(
        observed(&codex, "skill", "steady").unwrap()["winner"],
        "package",
        "the controlled projection holds only the staged copy"
    );
    let session = |name: &str| {
        codex["catalog"]["other_scopes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name && a["scope"] == "workspace_session")
            .cloned()
    };
    assert_eq!(session(SENTINEL).unwrap()["winner"], "package", "{codex:#}");
    // Codex lists both copies of the name (the model sees both): neither reliably wins.
    assert_eq!(session("steady").unwrap()["winner"], "varied", "{codex:#}");
    let (code, report) = fixture.preflight("codex", "latest");
    assert_eq!(
        code, 3,
        "the checkout's copy competes for the name: {report:#}"
    );
    let status = |id: &str| {
        report["requirements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .map(|r| r["status"].clone())
    };
    assert_eq!(
        status(&format!("{SENTINEL}-wins")),
        Some(json!("satisfied")),
        "{report:#}"
    );
    assert_eq!(status("steady-wins"), Some(json!("violated")), "{report:#}");
    assert_eq!(
        tree_digest(&[&fixture.home.project]),
        checkout,
        "the checkout is unchanged"
    );
}
