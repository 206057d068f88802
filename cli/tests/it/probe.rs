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
        Self::synced_with(&[])
    }

    /// [`Fixture::synced`] with more files (`(path in the package, text)`) in the package.
    fn synced_with(extra: &[(&str, &str)]) -> Self {
        let home = IsolatedHome::new();
        let package = home.project.parent().unwrap().join("sentinel-pkg");
        for (path, text) in extra {
            write(&package.join(path), text);
        }
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
            // Fewer OpenCode samples than the default 60 when a skill name has a choice: the
            // tests stay fast on a loaded machine.
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
        Self::with_agents(Self::synced(), agents)
    }

    /// `fixture` with the pinned real clients in `agents` first on every run's `PATH`, and a
    /// per-call timeout far beyond what a client needs: these tests are about what the clients
    /// list, and a loaded machine must not turn them into timeouts (speed is checked apart,
    /// against [`time_limit`]).
    fn with_agents(mut fixture: Self, agents: &Path) -> Self {
        let path = format!(
            "{}:{}",
            agents.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        fixture.envs.push(("PATH".to_owned(), path));
        fixture
            .envs
            .push(("AGENTPACK_PROBE_TIMEOUT_SECS".to_owned(), "180".to_owned()));
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
        // A preflight changes nothing: the checkout, HOME, AGENTPACK_HOME (the receipts
        // included) and the staging root are the same after it.
        let output = crate::preflight::unchanged(&self.home, &[], || self.run(&args));
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
        let requirement = |agent: &str, scope| {
            present(
                &format!("sentinel-{agent}"),
                agent,
                ("skill", SENTINEL, scope),
            )
        };
        self.write_contract(&[
            requirement("claude", "workspace_session"),
            requirement("codex", "controlled_projection"),
            requirement("opencode", "controlled_projection"),
        ]);
    }

    /// contract.json beside the definition, holding `requirements`.
    fn write_contract(&self, requirements: &[Value]) {
        std::fs::write(
            self.home.project.join("contract.json"),
            serde_json::to_vec(&json!({"schema_version": 1, "requirements": requirements}))
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

/// The requirement `id` of `target`: the artifact `(category, name, scope)` is present, observed.
fn present(id: &str, target: &str, (category, name, scope): (&str, &str, &str)) -> Value {
    json!({"id": id, "target": target,
        "selector": {"category": category, "name": name, "scope": scope},
        "predicate": "present", "minimum_evidence": "observed"})
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

/// `secs` on an idle machine, scaled by how loaded this one is (the 1-minute load average per
/// core, when above 1): the speed the docs promise is measured on a machine the other test
/// binaries share, and a figure far beyond it still fails.
pub fn time_limit(secs: u64) -> std::time::Duration {
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let factor = (load / cores as f64).max(1.0);
    std::time::Duration::from_secs_f64(secs as f64 * factor)
}

/// Asserts that `probe` (started at `started`) took under `secs` (scaled by [`time_limit`]).
fn assert_fast(what: &str, started: std::time::Instant, secs: u64) {
    let (took, limit) = (started.elapsed(), time_limit(secs));
    println!("{what} took {took:?} (limit {limit:?})");
    assert!(took < limit, "{what} took {took:?}, over {limit:?}");
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
    assert_fast("a Claude Code probe", started, 10);
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

    let started = std::time::Instant::now();
    let (code, codex) = fixture.probe("codex");
    assert_eq!(code, 0, "{codex:#}");
    assert_fast("a Codex probe", started, 10);
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

    let started = std::time::Instant::now();
    let (code, opencode) = fixture.probe("opencode");
    assert_eq!(code, 0, "{opencode:#}");
    assert_fast("an OpenCode probe", started, 10);
    assert_eq!(opencode["client"]["version"], "1.18.33");
    // No skill name has a second candidate: one listing is the complete answer.
    assert_eq!(
        opencode["sampling"],
        json!({"samples": 1, "reason": "no skill name has more than one candidate"}),
        "{opencode:#}"
    );
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
        requirements.push(present(
            &format!("sentinel-{agent}"),
            agent,
            ("skill", SENTINEL, scope),
        ));
        requirements.push(json!({"id": format!("no-steady-{agent}"), "target": agent,
            "selector": {"category": "skill", "name": "steady", "scope": scope},
            "predicate": "absent", "minimum_evidence": "observed"}));
    }
    fixture.write_contract(&requirements);
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
    let pidfile = pids.path().join("children");
    // Every run of the client (the session and the projection's runs beside it) starts a child
    // and hangs; each appends its child's pid.
    let script = format!(
        "#!/bin/sh\nsleep 300 &\necho $! >> {}\nsleep 300\n",
        pidfile.display()
    );
    let mut fixture = Fixture::synced();
    fixture.stand_in("claude", &script);
    // Far above what starting a shell takes on a loaded machine, far below the hang.
    fixture
        .envs
        .push(("AGENTPACK_PROBE_TIMEOUT_SECS".to_owned(), "10".to_owned()));
    let started = std::time::Instant::now();
    let (code, receipt) = fixture.probe("claude");
    assert!(
        started.elapsed().as_secs() < 150,
        "killed by the timeout, not the 300 s hang"
    );
    assert_eq!(code, 5, "{receipt:#}");
    assert_eq!(receipt["status"], "timed_out");
    assert_eq!(receipt["termination"]["how"], "timed_out");
    let children: Vec<i32> = std::fs::read_to_string(&pidfile)
        .unwrap()
        .lines()
        .map(|line| line.trim().parse().unwrap())
        .collect();
    assert!(!children.is_empty());
    // Gone, or a zombie waiting for a reaper: never still sleeping.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    for child in children {
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
                "the hung client's child {child} survived"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
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
pub fn claude_stand_in() -> String {
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
fn preflight_answers_mcp_servers_from_the_plugin_details_inventory() {
    let mut fixture = Fixture::synced();
    let server = |id, name, scope| present(id, "claude", ("mcp_server", name, scope));
    fixture.write_contract(&[
        server("listed", "probe-mcp", "controlled_projection"),
        server("unlisted", "other-mcp", "controlled_projection"),
        server("session", "probe-mcp", "workspace_session"),
    ]);
    // `plugin details` in the layout Claude Code 2.1.328 prints, listing one MCP server.
    let inventory = format!(
        "agentpack-bundle 0.0.0\n  Description: staged\n\nComponent inventory\n  Skills (1)  {SENTINEL}\n  Agents (0)\n  Hooks (0)\n  MCP servers (1)  probe-mcp  (tool schemas resolved at runtime; not counted)\n  LSP servers (0)\n"
    );
    let script = claude_stand_in().replace(
        "echo \"error: unknown command 'details'\" >&2; exit 1;",
        &format!("cat <<'INVENTORY'\n{inventory}INVENTORY\nexit 0;"),
    );
    assert_ne!(script, claude_stand_in());
    fixture.stand_in("claude", &script);
    let (code, receipt) = fixture.probe("claude");
    assert_eq!(code, 0, "{receipt:#}");
    assert_eq!(
        receipt["catalog"]["properties"][0]["value"]["inventory"]["mcp_servers"],
        json!(["probe-mcp"]),
        "{receipt:#}"
    );
    let (code, report) = fixture.preflight("claude", "latest");
    assert!(finding(&report, "RECEIPT_ATTACHED").is_some(), "{report:#}");
    assert_eq!(
        requirement_status(&report, "listed"),
        "satisfied",
        "{report:#}"
    );
    // Unlisted, or another scope: unknown, never guessed.
    assert_eq!(
        requirement_status(&report, "unlisted"),
        "unknown",
        "{report:#}"
    );
    assert_eq!(
        requirement_status(&report, "session"),
        "unknown",
        "{report:#}"
    );
    assert_eq!(code, 4, "{report:#}");
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
if [ "$2" = config ]; then echo x >> {calls}.config; echo '{{"agent":{{}},"command":{{}}}}'; exit 0; fi
echo x >> {calls}
if [ {delay} -gt 0 ] && mkdir {calls}.hang 2>/dev/null; then sleep {delay}; fi
echo "[{{\"name\":\"{SENTINEL}\",\"location\":\"$OPENCODE_CONFIG_DIR/skills/{SENTINEL}/SKILL.md\"}}]"
"#,
        calls = calls.display()
    )
}

/// A temporary directory holding `.agents/skills/<SENTINEL>`: as the probe's `TMPDIR`, a
/// directory above every run's, it gives OpenCode a second candidate for the sentinel's name.
fn inherited_sentinel() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path()
            .join(format!(".agents/skills/{SENTINEL}/SKILL.md")),
        &format!("---\nname: {SENTINEL}\ndescription: An inherited copy.\n---\n\nTheirs.\n"),
    );
    dir
}

#[test]
fn opencode_samples_only_a_choice_run_bounded_and_a_timed_out_sample_is_unknown() {
    let counts = tempfile::tempdir().unwrap();
    // No second candidate for any name: one listing, whatever the sample count says.
    let calls = counts.path().join("alone");
    let (mut fixture, code, receipt) = probe_with(
        "opencode",
        &opencode_stand_in(&calls, 0),
        &[("AGENTPACK_PROBE_OPENCODE_SAMPLES", "12")],
    );
    assert_eq!(code, 0, "{receipt:#}");
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 1);
    assert_eq!(receipt["sampling"]["samples"], 1, "{receipt:#}");
    // No agent and no command is staged: the resolved configuration is not asked.
    assert!(!calls.with_extension("config").exists(), "{receipt:#}");

    // An inherited copy of the sentinel's name (which the listing does not show): OpenCode has a
    // choice, and every sample asked for is taken, the reason naming the name.
    let inherited = inherited_sentinel();
    fixture
        .envs
        .push(("TMPDIR".to_owned(), inherited.path().display().to_string()));
    let calls = counts.path().join("fast");
    fixture.stand_in("opencode", &opencode_stand_in(&calls, 0));
    let (code, receipt) = fixture.probe("opencode");
    assert_eq!(code, 0, "{receipt:#}");
    assert_eq!(
        std::fs::read_to_string(&calls).unwrap().lines().count(),
        12,
        "12 `debug skill` samples"
    );
    assert_eq!(receipt["sampling"]["samples"], 12, "{receipt:#}");
    assert!(
        receipt["sampling"]["reason"]
            .as_str()
            .unwrap()
            .contains(&format!("`{SENTINEL}` has 2 candidates")),
        "{receipt:#}"
    );
    let seen = &receipt["catalog"]["winners_seen"][0];
    assert_eq!(seen["samples"], 12, "{receipt:#}");
    assert_eq!(seen["winners"], json!([["package", 12]]));
    assert_eq!(
        observed(&receipt, "skill", SENTINEL).unwrap()["winner"],
        "package"
    );
    assert!(receipt["capability"].as_u64().unwrap() >= 3);

    // One sample hangs past the per-call timeout: killed, and the receipt is `timed_out` with
    // no catalog (its winner is unknown, never guessed from the others). The timeout is far
    // above what a stand-in needs even on a loaded machine, and far below the hang.
    let calls = counts.path().join("slow");
    fixture.stand_in("opencode", &opencode_stand_in(&calls, 600));
    fixture
        .envs
        .push(("AGENTPACK_PROBE_TIMEOUT_SECS".to_owned(), "15".to_owned()));
    let started = std::time::Instant::now();
    let (code, receipt) = fixture.probe("opencode");
    assert!(
        started.elapsed().as_secs() < 300,
        "the timeout bounds the sampling, not the 600 s hang"
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

/// The package's agent and command beside the sentinel skill.
const AGENT_AND_COMMAND: [(&str, &str); 2] = [
    (
        "agents/probe-helper.md",
        "---\ndescription: A staged agent.\n---\n\nYou help.\n",
    ),
    (
        "commands/probe-cmd.md",
        "---\ndescription: A staged command.\n---\n\nDo the probe thing.\n",
    ),
];

/// contract.json: OpenCode's controlled projection holds the staged agent and command, and a
/// command named like the sentinel skill.
fn agent_and_command_contract(fixture: &Fixture) {
    let projected =
        |id, category, name| present(id, "opencode", (category, name, "controlled_projection"));
    fixture.write_contract(&[
        projected("agent", "agent", "probe-helper"),
        projected("command", "command", "probe-cmd"),
        projected("skill-as-command", "command", SENTINEL),
    ]);
}

/// The status of the requirement `id` in a preflight report.
fn requirement_status(report: &Value, id: &str) -> Value {
    report["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .map_or(Value::Null, |r| r["status"].clone())
}

/// The staged agent and command of [`agent_and_command_contract`] are satisfied; a skill answers
/// no command requirement (OpenCode lists commands itself).
fn assert_agent_and_command_answered(report: &Value) {
    for (id, status) in [
        ("agent", "satisfied"),
        ("command", "satisfied"),
        ("skill-as-command", "unknown"),
    ] {
        assert_eq!(requirement_status(report, id), status, "{id}: {report:#}");
    }
}

#[test]
fn opencode_agents_and_commands_are_answered_from_its_resolved_configuration() {
    let mut fixture = Fixture::synced_with(&AGENT_AND_COMMAND);
    agent_and_command_contract(&fixture);
    // The configuration lists the staged agent and command, `agent list` lists the agent;
    // `debug skill` lists the sentinel only.
    fixture.stand_in(
        "opencode",
        &format!(
            r#"#!/bin/sh
if [ "$1" = --version ]; then echo 1.18.33; exit 0; fi
if [ "$2" = config ]; then echo '{{"agent":{{"probe-helper":{{}},"build":{{}}}},"command":{{"probe-cmd":{{}}}}}}'; exit 0; fi
if [ "$1" = agent ]; then printf 'build (primary)\n  [\n]\nprobe-helper (subagent)\n  [\n]\n'; exit 0; fi
echo "[{{\"name\":\"{SENTINEL}\",\"location\":\"$OPENCODE_CONFIG_DIR/skills/{SENTINEL}/SKILL.md\"}}]"
"#
        ),
    );
    let (code, receipt) = fixture.probe("opencode");
    assert_eq!(code, 0, "{receipt:#}");
    assert_eq!(
        observed(&receipt, "agent", "probe-helper").unwrap()["winner"],
        "package"
    );
    assert_eq!(
        observed(&receipt, "agent", "build").unwrap()["winner"],
        "other"
    );
    let (code, report) = fixture.preflight("opencode", "latest");
    assert_agent_and_command_answered(&report);
    assert_eq!(code, 4, "an unknown required observation: {report:#}");

    // A staged agent `agent list` does not list is not observed, whatever the configuration
    // lists.
    let script = std::fs::read_to_string(fixture.home.home.join("stand-in-opencode")).unwrap();
    let unresolved = script.replace("probe-helper (subagent)", "other (subagent)");
    assert_ne!(unresolved, script);
    fixture.stand_in("opencode", &unresolved);
    let (code, receipt) = fixture.probe("opencode");
    assert_eq!(code, 0, "{receipt:#}");
    assert!(
        observed(&receipt, "agent", "probe-helper").is_none(),
        "{receipt:#}"
    );
    let (_, report) = fixture.preflight("opencode", "latest");
    assert_eq!(
        requirement_status(&report, "agent"),
        "unknown",
        "{report:#}"
    );
}

#[test]
fn the_real_opencode_lists_agents_and_commands_and_is_sampled_only_for_a_choice() {
    let Some(bin) = agents_bin() else { return };
    let _one_at_a_time = agentpack_test_support::one_timed_client_run();
    let mut fixture = Fixture::with_agents(Fixture::synced_with(&AGENT_AND_COMMAND), &bin);
    agent_and_command_contract(&fixture);
    let (code, receipt) = fixture.probe("opencode");
    assert_eq!(code, 0, "{receipt:#}");
    assert_eq!(receipt["sampling"]["samples"], 1, "{receipt:#}");
    for (category, name) in [("agent", "probe-helper"), ("command", "probe-cmd")] {
        assert_eq!(
            observed(&receipt, category, name).map(|o| o["winner"].clone()),
            Some(json!("package")),
            "{category} {name}: {receipt:#}"
        );
    }
    let (_, report) = fixture.preflight("opencode", "latest");
    assert_agent_and_command_answered(&report);

    // A copy of the sentinel's name in a directory above the run's: the real client has a choice
    // (the listing shows only one of the two), so it is sampled (4 times, the fixture's count).
    let inherited = inherited_sentinel();
    fixture
        .envs
        .push(("TMPDIR".to_owned(), inherited.path().display().to_string()));
    let (code, receipt) = fixture.probe("opencode");
    assert_eq!(code, 0, "{receipt:#}");
    assert_eq!(receipt["sampling"]["samples"], 4, "{receipt:#}");
    let seen = receipt["catalog"]["winners_seen"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == SENTINEL)
        .cloned()
        .unwrap();
    assert_eq!(
        (seen["samples"].clone(), seen["listed_in"].clone()),
        (json!(4), json!(4))
    );
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
    assert_eq!(
        requirement_status(&report, &format!("{SENTINEL}-wins")),
        "satisfied",
        "{report:#}"
    );
    assert_eq!(
        requirement_status(&report, "steady-wins"),
        "violated",
        "{report:#}"
    );
    assert_eq!(
        tree_digest(&[&fixture.home.project]),
        checkout,
        "the checkout is unchanged"
    );
}
