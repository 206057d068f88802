//! `agentpack probe --all` and `agentpack sync --probe` through the real binary: the pinned real
//! clients probed in parallel observe the staged skills (and Claude Code's failing `SessionStart`
//! hook) in one table; stand-in executables for a failing and an unknown client; no installed
//! client is an error naming what to install.
//!
//! The real clients come from `AGENTPACK_TEST_AGENTS_BIN`; outside CI those tests skip with a
//! printed reason when it is unset, in CI (`CI` set) they fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // test code; skips are printed

use agentpack_test_support::{agents_bin, write, write_executable, IsolatedHome};
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

const SENTINEL: &str = "probe-all-sentinel-2c9e";

struct Fixture {
    home: IsolatedHome,
    envs: Vec<(String, String)>,
}

impl Fixture {
    /// A project with one path package (the sentinel skill, a second skill, a `SessionStart`
    /// hook that exits 7), added but not synced.
    fn added() -> Self {
        let home = IsolatedHome::new();
        let package = home.project.parent().unwrap().join("probe-all-pkg");
        write(
            &package.join(format!("skills/{SENTINEL}/SKILL.md")),
            &format!("---\nname: {SENTINEL}\ndescription: The sentinel skill.\n---\n\nSentinel.\n"),
        );
        write(
            &package.join("skills/steady/SKILL.md"),
            "---\nname: steady\ndescription: A skill that stays.\n---\n\nSteady.\n",
        );
        write(
            &package.join("agents/probe-all-helper.md"),
            "---\nname: probe-all-helper\ndescription: A staged agent.\n---\n\nYou help.\n",
        );
        write(
            &package.join("hooks/hooks.json"),
            r#"{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "exit 7"}]}]}}"#,
        );
        let fixture = Fixture {
            home,
            // Fewer OpenCode samples than the default 60 when a skill name has a choice: the
            // tests stay fast on a loaded machine.
            envs: vec![(
                "AGENTPACK_PROBE_OPENCODE_SAMPLES".to_owned(),
                "4".to_owned(),
            )],
        };
        fixture.ok(&["init", "--name", "probe-all-fixture"]);
        fixture.ok(&["add", package.to_str().unwrap(), "--no-sync"]);
        fixture
    }

    fn synced() -> Self {
        let fixture = Self::added();
        fixture.ok(&["sync"]);
        fixture
    }

    fn path_with(&mut self, dir: Option<&Path>) {
        let system = "/usr/local/bin:/usr/bin:/bin".to_owned();
        let path = match dir {
            Some(dir) => format!("{}:{system}", dir.display()),
            None => system,
        };
        self.envs.push(("PATH".to_owned(), path));
    }

    /// The pinned real clients in `bin` on `PATH`, with a per-call timeout far beyond what they
    /// need: a loaded machine must not turn these tests into timeouts (speed is checked apart).
    fn real_clients(&mut self, bin: &Path) {
        self.path_with(Some(bin));
        self.envs
            .push(("AGENTPACK_PROBE_TIMEOUT_SECS".to_owned(), "180".to_owned()));
    }

    fn stand_in(&mut self, var: &str, script: &str) {
        let path = self.home.home.join(format!("stand-in-{var}"));
        write_executable(&path, script);
        self.envs.push((var.to_owned(), path.display().to_string()));
    }

    fn run(&self, args: &[&str]) -> Output {
        let envs = self.envs.iter().map(|(key, value)| (key, value));
        self.home.agentpack(args).envs(envs).output().unwrap()
    }

    fn ok(&self, args: &[&str]) {
        let output = self.run(args);
        assert!(output.status.success(), "{args:?}: {}", text(&output));
    }

    fn json(&self, args: &[&str]) -> (i32, Value) {
        let output = self.run(args);
        let value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {}", text(&output)));
        (output.status.code().unwrap(), value)
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn row<'v>(probes: &'v Value, agent: &str) -> &'v Value {
    probes
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["agent"] == agent)
        .unwrap_or_else(|| panic!("no {agent} row: {probes:#}"))
}

#[test]
fn probe_all_observes_the_staged_skills_with_every_real_client() {
    let Some(bin) = agents_bin() else { return };
    let _one_at_a_time = agentpack_test_support::one_timed_client_run();
    let mut fixture = Fixture::synced();
    fixture.real_clients(&bin);

    let started = std::time::Instant::now();
    let (code, report) = fixture.json(&["--json", "probe", "--all"]);
    let (took, limit) = (started.elapsed(), crate::probe::time_limit(15));
    println!("probe --all took {took:?} (limit {limit:?})");
    assert_eq!(code, 0, "{report:#}");
    assert!(took < limit, "probe --all took {took:?}, over {limit:?}");
    assert_eq!(report["schema_version"], 1, "in the envelope: {report:#}");
    let probes = &report["probes"];
    assert_eq!(probes.as_array().unwrap().len(), 3, "{probes:#}");
    for agent in ["claude", "codex", "opencode"] {
        let r = row(probes, agent);
        assert_eq!(r["status"], "complete", "{r:#}");
        // The sentinel and `steady` (and the agent, for Claude Code and OpenCode), all listed by
        // the client itself.
        // (Codex gets the agent as a skill.)
        assert_eq!(r["expected"].as_u64().unwrap(), 3, "{r:#}");
        assert_eq!(r["observed"], r["expected"], "{r:#}");
        let receipt = PathBuf::from(r["receipt"].as_str().unwrap());
        let written: Value = serde_json::from_slice(&std::fs::read(&receipt).unwrap()).unwrap();
        assert_eq!(written["agent"], agent);
        if agent == "claude" {
            // `plugin validate` of the staged bundle: the controlled projection beside the session.
            let projected = written["catalog"]["other_scopes"].as_array().unwrap();
            assert!(
                projected.iter().any(|a| a["name"] == SENTINEL
                    && a["scope"] == "controlled_projection"
                    && a["winner"] == "package"),
                "{written:#}"
            );
            assert!(
                projected
                    .iter()
                    .any(|a| a["category"] == "agent" && a["name"] == "probe-all-helper"),
                "{written:#}"
            );
        }
        if agent == "opencode" {
            let seen = written["catalog"]["winners_seen"].as_array().unwrap();
            let sentinel = seen.iter().find(|w| w["name"] == SENTINEL).unwrap();
            // No name has a second candidate: one listing is the whole answer.
            assert_eq!(sentinel["samples"], 1, "{sentinel}");
            assert_eq!(sentinel["winners"], serde_json::json!([["package", 1]]));
            assert_eq!(written["sampling"]["samples"], 1, "{written:#}");
            assert!(
                written["catalog"]["artifacts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|a| a["category"] == "agent"
                        && a["name"] == "probe-all-helper"
                        && a["winner"] == "package"),
                "debug config and agent list: {written:#}"
            );
        }
        assert!(
            written["catalog"]["artifacts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["name"] == SENTINEL && a["winner"] == "package"),
            "{written:#}"
        );
    }
    assert!(
        row(probes, "claude")["hook_failures"].as_u64().unwrap() >= 1,
        "the SessionStart hook exits 7: {probes:#}"
    );

    let output = fixture.run(&["probe", "--all"]);
    let table = text(&output);
    assert!(output.status.success(), "{table}");
    let header = table.lines().next().unwrap();
    for column in ["agent", "version", "expected", "observed", "hook failures"] {
        assert!(header.contains(column), "{table}");
    }
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("opencode") && l.contains("1.18.33")),
        "{table}"
    );
}

#[test]
fn sync_probe_probes_after_a_successful_sync() {
    let Some(bin) = agents_bin() else { return };
    let _one_at_a_time = agentpack_test_support::one_timed_client_run();
    let mut fixture = Fixture::added();
    fixture.real_clients(&bin);
    let started = std::time::Instant::now();
    let (code, report) = fixture.json(&["--json", "sync", "--probe"]);
    println!("sync --probe took {:?}", started.elapsed());
    assert_eq!(code, 0, "{report:#}");
    assert!(
        report["generation"].is_string(),
        "the sync's own report: {report:#}"
    );
    for agent in ["claude", "codex", "opencode"] {
        let r = row(&report["probes"], agent);
        assert_eq!(r["status"], "complete", "{r:#}");
        assert_eq!(r["observed"], r["expected"], "{r:#}");
    }
    let (_, plain) = fixture.json(&["--json", "sync"]);
    assert!(
        plain.get("probes").is_none(),
        "no probe without --probe: {plain:#}"
    );
}

#[test]
fn probe_all_reports_each_client_and_exits_with_the_worst_status() {
    let mut fixture = Fixture::synced();
    // No real client on PATH: only the two stand-ins (overrides, found like the launchers do).
    fixture.path_with(None);
    let init = r#"{"type":"system","subtype":"init","claude_code_version":"9.9.9","skills":[],"slash_commands":[],"agents":[]}"#;
    fixture.stand_in(
        "CLAUDE_PATH",
        &format!("#!/bin/sh\necho '{init}'\nsleep 5\n"),
    );
    fixture.stand_in(
        "CODEX_PATH",
        "#!/bin/sh\n[ \"$1\" = --version ] && echo 'codex-cli 0.171.0' && exit 0\necho boom >&2\nexit 3\n",
    );
    let (code, report) = fixture.json(&["--json", "probe", "--all"]);
    assert_eq!(code, 5, "a failed client: {report:#}");
    let probes = &report["probes"];
    assert_eq!(
        probes.as_array().unwrap().len(),
        2,
        "opencode is not installed: {probes:#}"
    );
    assert_eq!(row(probes, "claude")["status"], "unknown");
    assert_eq!(row(probes, "claude")["version"], "9.9.9");
    assert_eq!(row(probes, "codex")["status"], "failed");
    assert!(row(probes, "codex")["observed"].is_null());
    for r in probes.as_array().unwrap() {
        assert!(
            PathBuf::from(r["receipt"].as_str().unwrap()).is_file(),
            "{r:#}"
        );
    }
}

#[test]
fn probe_all_without_any_installed_client_says_what_to_install() {
    let mut fixture = Fixture::synced();
    fixture.path_with(None);
    let output = fixture.run(&["probe", "--all"]);
    assert!(!output.status.success(), "{}", text(&output));
    let message = text(&output);
    assert!(
        message.contains("no supported agent is installed"),
        "{message}"
    );
    assert!(message.contains("CODEX_PATH"), "{message}");
    let output = fixture.run(&["probe"]);
    assert!(
        !output.status.success(),
        "neither --agent nor --all: {}",
        text(&output)
    );
}

#[test]
fn sync_probe_binds_the_receipts_to_the_policy_given() {
    let mut fixture = Fixture::added();
    fixture.path_with(None);
    fixture.stand_in("CLAUDE_PATH", &crate::probe::claude_stand_in());
    let (code, report) = fixture.json(&["--json", "sync", "--probe", "--policy", "ci"]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(row(&report["probes"], "claude")["status"], "complete");
    let preflight = |extra: &[&str]| {
        let mut args = vec![
            "--json",
            "preflight",
            "--agent",
            "claude",
            "--receipt",
            "latest",
        ];
        args.extend_from_slice(extra);
        fixture.json(&args).1
    };
    let finding = |report: &Value, code: &str| {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["code"] == code)
            .cloned()
    };
    let ci = preflight(&["--policy", "ci"]);
    assert!(finding(&ci, "RECEIPT_ATTACHED").is_some(), "{ci:#}");
    // Under the default policy (`local`) the receipt made under `ci` is stale, naming the policy.
    let local = preflight(&[]);
    let stale = finding(&local, "RECEIPT_STALE").unwrap_or_else(|| panic!("{local:#}"));
    assert!(
        stale["message"].as_str().unwrap().contains("policy"),
        "{stale}"
    );
    // `--policy` belongs to `--probe`.
    let output = fixture.run(&["sync", "--policy", "ci"]);
    assert!(!output.status.success(), "{}", text(&output));
}
