//! The real agents, launched through `agentpack`, see what was staged and accept the flags the
//! launcher adds (`--yolo` included): `agentpack claude plugin validate <bundle>` (Claude Code
//! 2.1.328), `agentpack codex debug prompt-input hi` (Codex 0.171), `agentpack opencode debug skill`
//! (OpenCode 1.18.33). Offline probes, no login needed.
//!
//! The clients come from `AGENTPACK_TEST_AGENTS_BIN` (a `node_modules/.bin` directory, set by CI
//! after `npm install`). Without it the tests are skipped with a printed reason, unless `CI` is
//! set, where they fail.

#![allow(clippy::unwrap_used, clippy::print_stderr)] // tests may unwrap and say why they skip (HELPERS.md)

use agentpack_test_support::{agents_bin, demo_plugin, write, IsolatedHome};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A project with one local package holding a skill, and the agents on PATH.
fn project() -> Option<(IsolatedHome, PathBuf)> {
    let bin = agents_bin()?;
    let iso = IsolatedHome::new();
    let pkg = iso.project.join("pkg");
    demo_plugin(
        &pkg,
        "A demo skill staged by agentpack for the conformance tests.",
    );
    write(
        &iso.project.join("agentpack.toml"),
        "name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\n\"demo\" = { path = \"pkg\" }\n",
    );
    Some((iso, bin))
}

/// `agentpack <args>` in the isolated home, with the agents first on `PATH`.
fn agentpack(iso: &IsolatedHome, bin: &Path, args: &[&str]) -> std::process::Command {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = iso.command(&assert_cmd::cargo::cargo_bin("agentpack"), None);
    command.env("PATH", path).args(args);
    command
}

/// Asks the app server `agentpack codex app-server` starts (in the generation's Codex home).
fn ask_launched_codex(
    iso: &IsolatedHome,
    bin: &Path,
    method: &str,
    params: serde_json::Value,
) -> serde_json::Value {
    agentpack_test_support::codex_daemon::ask_app_server(
        agentpack(iso, bin, &["codex", "app-server"]),
        method,
        params,
    )
}

/// A package hook Codex lists as `stop`.
const STOP_HOOK: &str =
    r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo stopped"}]}]}}"#;

fn launch(iso: &IsolatedHome, bin: &Path, args: &[&str]) -> String {
    let output: Output = agentpack(iso, bin, args).output().unwrap();
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

#[test]
fn claude_validates_the_bundle_it_was_launched_with() {
    let Some((iso, bin)) = project() else { return };
    let bundle = iso
        .staging_root
        .join("modes/default/plugins/agentpack-bundle");
    let text = launch(
        &iso,
        &bin,
        &[
            "--yolo",
            "claude",
            "plugin",
            "validate",
            &bundle.to_string_lossy(),
        ],
    );
    assert!(text.contains("Validation passed"), "{text}");
    // The unchanged skill is a link into its package: the validator says it did not follow it
    // (a --plugin-dir session does; `conformance.rs` reads Claude's init event for that).
    let skill = bundle.join("skills/demo-skill");
    assert!(
        std::fs::symlink_metadata(&skill)
            .unwrap()
            .file_type()
            .is_symlink(),
        "{}",
        skill.display()
    );
    assert!(text.contains("not read"), "{text}");

    // What the launcher passed with --plugin-dir (and the inline --settings beside it) is the
    // session's plugin, loaded from the generation the pointer selects.
    let listed = launch(&iso, &bin, &["claude", "plugin", "list"]);
    let generation = std::fs::canonicalize(iso.staging_root.join("modes/default")).unwrap();
    assert!(listed.contains("agentpack-bundle@inline"), "{listed}");
    assert!(
        listed.contains(&format!(
            "Path: {}",
            generation.join("plugins/agentpack-bundle").display()
        )),
        "{listed}"
    );
    assert!(listed.contains("loaded"), "{listed}");
}

#[test]
fn codex_shows_the_model_the_staged_skill() {
    let Some((iso, bin)) = project() else { return };
    let text = launch(
        &iso,
        &bin,
        &["--yolo", "codex", "debug", "prompt-input", "hi"],
    );
    assert!(text.contains("demo-skill"), "{text}");
    assert!(text.contains("A demo skill staged by agentpack"), "{text}");
}

#[test]
fn opencode_lists_the_staged_skill() {
    let Some((iso, bin)) = project() else { return };
    let text = launch(&iso, &bin, &["--yolo", "opencode", "debug", "skill"]);
    assert!(text.contains("demo-skill"), "{text}");
    assert!(text.contains("A demo skill staged by agentpack"), "{text}");
}

/// The Codex home `codex app-server daemon start` reported (from its `socketPath`).
fn started_daemon_home(output: &str) -> PathBuf {
    let line = output
        .lines()
        .find(|l| l.contains("\"status\":\"started\""))
        .unwrap_or_else(|| panic!("no started daemon in:\n{output}"));
    let status: serde_json::Value = serde_json::from_str(line).unwrap();
    let socket = PathBuf::from(status["socketPath"].as_str().unwrap());
    socket.parent().unwrap().parent().unwrap().to_path_buf()
}

/// Processes whose executable lives under `dir` (Codex's daemon and its update loop run from the
/// managed copy of Codex in the home).
fn processes_running_from(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(exe) = std::fs::read_link(entry.path().join("exe")) {
            if exe.starts_with(dir) {
                found.push(format!(
                    "{} {}",
                    entry.file_name().to_string_lossy(),
                    exe.display()
                ));
            }
        }
    }
    found
}

/// A new generation: the package gains a skill.
fn change_the_package(iso: &IsolatedHome, name: &str) {
    write(
        &iso.project.join(format!("pkg/skills/{name}/SKILL.md")),
        &format!("---\nname: {name}\ndescription: Another skill.\n---\nSay {name}.\n"),
    );
}

#[test]
fn a_retired_codex_daemon_is_stopped_when_idle_and_kept_while_it_has_loaded_threads() {
    let Some((iso, bin)) = project() else { return };

    // Generation 1 starts a daemon in its home and nothing loads a thread: once a sync retires the
    // generation, the daemon is stopped and the home removed.
    let started = launch(&iso, &bin, &["codex", "app-server", "daemon", "start"]);
    let first = started_daemon_home(&started);
    assert!(first.join("config.toml").is_file(), "{}", first.display());
    change_the_package(&iso, "second-skill");
    let synced = launch(&iso, &bin, &["sync"]);
    assert!(
        synced.contains("Stopped the idle Codex daemon of a retired generation"),
        "{synced}"
    );
    assert!(!first.exists(), "the idle generation's home is removed");
    assert!(
        processes_running_from(&first).is_empty(),
        "{:?}",
        processes_running_from(&first)
    );

    // Generation 2's daemon holds a thread, as an IDE session would: a later sync keeps it.
    let started = launch(&iso, &bin, &["codex", "app-server", "daemon", "start"]);
    let second = started_daemon_home(&started);
    assert_ne!(first, second);
    let mut client = agentpack_test_support::codex_daemon::DaemonClient::connect(&second);
    let thread = client.call(
        "thread/start",
        serde_json::json!({"cwd": iso.project.display().to_string()}),
    );
    let thread_id = thread["thread"]["id"].as_str().unwrap().to_owned();
    drop(client);
    change_the_package(&iso, "third-skill");
    let synced = launch(&iso, &bin, &["sync"]);
    assert!(
        !synced.contains("Stopped the idle Codex daemon"),
        "{synced}"
    );
    assert!(
        second.join("config.toml").is_file(),
        "a busy daemon keeps its home"
    );
    let mut client = agentpack_test_support::codex_daemon::DaemonClient::connect(&second);
    let loaded = client.call("thread/loaded/list", serde_json::json!({}));
    assert_eq!(loaded["data"], serde_json::json!([thread_id]));
    drop(client);

    // Once that daemon is gone (here: stopped by hand), the next sync removes the home.
    agentpack_harness::launch::home_layer::codex_daemon::stop(&second, None).unwrap();
    launch(&iso, &bin, &["sync"]);
    assert!(!second.exists(), "the home goes once no daemon uses it");
    assert!(processes_running_from(&second).is_empty());
}

#[test]
fn codex_lists_the_hooks_of_the_generation_it_was_launched_with() {
    let Some((iso, bin)) = project() else { return };
    write(&iso.project.join("pkg/hooks/hooks.json"), STOP_HOOK);
    let root = iso.project.canonicalize().unwrap();
    let listed = ask_launched_codex(
        &iso,
        &bin,
        "hooks/list",
        serde_json::json!({"cwds": [root.display().to_string()]}),
    );
    let entry = &listed["data"][0];
    assert!(entry["errors"].as_array().unwrap().is_empty(), "{listed}");
    let hooks = entry["hooks"].as_array().unwrap();
    assert_eq!(hooks.len(), 1, "{listed}");
    assert_eq!(hooks[0]["source"], "user");
    assert_eq!(hooks[0]["eventName"], "stop");
    let source = hooks[0]["sourcePath"].as_str().unwrap();
    assert!(
        source.contains("/ap-c/") && source.ends_with("/hooks.json"),
        "the hooks come from the generation's Codex home: {source}"
    );
    assert!(hooks[0]["command"]
        .as_str()
        .unwrap()
        .contains("hook-exec dispatch --agent codex --event Stop"));
}

#[test]
fn a_project_trusted_in_a_launched_codex_stays_trusted_in_later_generations() {
    let Some((iso, bin)) = project() else { return };
    let real_config = iso.home.join(".codex/config.toml");
    write(&real_config, "model = \"o3\"\n");
    let root = iso.project.canonicalize().unwrap().display().to_string();
    // Codex records the user's decision in its CODEX_HOME/config.toml (the layer's).
    ask_launched_codex(
        &iso,
        &bin,
        "config/value/write",
        serde_json::json!({
            "keyPath": "projects",
            "value": {root.clone(): {"trust_level": "trusted"}},
            "mergeStrategy": "upsert",
        }),
    );
    change_the_package(&iso, "second-skill");
    let config = ask_launched_codex(&iso, &bin, "config/read", serde_json::json!({}));
    assert_eq!(
        config["config"]["projects"][&root]["trust_level"], "trusted",
        "{config}"
    );
    assert_eq!(config["config"]["model"], "o3", "{config}");
    assert_eq!(
        std::fs::read_to_string(&real_config).unwrap(),
        "model = \"o3\"\n",
        "the user's real config is not written"
    );
}

#[test]
fn a_hook_trusted_in_a_launched_codex_stays_trusted_until_the_hook_changes() {
    let Some((iso, bin)) = project() else { return };
    write(&iso.project.join("pkg/hooks/hooks.json"), STOP_HOOK);
    let root = iso.project.canonicalize().unwrap().display().to_string();
    let ask =
        |method: &str, params: serde_json::Value| ask_launched_codex(&iso, &bin, method, params);
    let list = || {
        let listed = ask("hooks/list", serde_json::json!({"cwds": [root.clone()]}));
        listed["data"][0]["hooks"][0].clone()
    };
    let hook = list();
    assert_eq!(hook["trustStatus"], "untrusted", "{hook}");
    // The user trusts the hook in Codex, which records it in the layer's config.toml.
    let key = hook["key"].as_str().unwrap();
    ask(
        "config/value/write",
        serde_json::json!({
            "keyPath": "hooks",
            "value": {"state": {key: {"trusted_hash": hook["currentHash"]}}},
            "mergeStrategy": "upsert",
        }),
    );
    let again = list();
    assert_eq!(again["key"], hook["key"], "same generation, same home");
    assert_eq!(again["trustStatus"], "trusted", "{again}");

    // A new generation (another skill) has a new home, but the hook did not change: still trusted.
    change_the_package(&iso, "second-skill");
    let later = list();
    assert_ne!(later["key"], hook["key"], "a new generation, a new home");
    assert_eq!(later["currentHash"], hook["currentHash"], "{later}");
    assert_eq!(later["trustStatus"], "trusted", "{later}");

    // A changed hook is a new decision for the user.
    write(
        &iso.project.join("pkg/hooks/hooks.json"),
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo changed"}]}]}}"#,
    );
    let changed = list();
    assert_ne!(changed["trustStatus"], "trusted", "{changed}");
}
