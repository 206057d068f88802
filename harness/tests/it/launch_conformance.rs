//! The real agents see what a home layer stages: Claude Code 2.1.328 validates the bundle the
//! command points `--plugin-dir` at, Codex 0.171 lists the pack's skill from the prepared
//! `CODEX_HOME`, OpenCode 1.18.33 lists it from the prepared `OPENCODE_CONFIG_DIR`. Each runs the
//! exact command [`launch::build_command`] builds, with the probe as the user's arguments.
//!
//! The clients come from `AGENTPACK_TEST_AGENTS_BIN` (a `node_modules/.bin` directory). Without it
//! the tests are skipped with a printed reason, unless `CI` is set, where they fail.

#![allow(clippy::unwrap_used, clippy::print_stderr)] // tests may unwrap and say why they skip

use crate::launch_common;

use agentpack_test_support::agents_bin;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use agentpack_harness::launch::command::{self as launch, LaunchRequest};
use agentpack_harness::launch::home_layer::{self, HomeLayerRequest};
use agentpack_harness::Agent;

/// Prepares `agent`'s layer and runs its real binary through the launch command with `probe`.
fn run_probe(
    agent: Agent,
    probe: &[&str],
    extra: &[&str],
) -> Option<(String, launch_common::World)> {
    let bin = agents_bin()?;
    let w = launch_common::world(&PathBuf::from("/usr/local/bin/agentpack"));
    let user = w.user_env();
    let request = HomeLayerRequest {
        agent,
        generation: &w.generation,
        project_root: &w.project,
        project_hash: "0123456789abcdef",
        mode_dir: "default",
        agentpack_home: &w.agentpack_home,
        staging_root_override: Some(&w.staging_root),
        state_dir: &w.state_dir,
        user: &user,
        secrets: &w.secrets[&agent],
        keep_attribution: false,
        yolo: false,
        workspace: &w.project,
        keychain: None,
    };
    let prepared = home_layer::prepare(&request).unwrap();
    let program = launch::resolve_binary(agent, None, Some(bin.as_os_str())).unwrap();
    let settings = std::fs::read_to_string(
        launch::claude_bundle(&w.generation).join("agentpack-settings.json"),
    )
    .ok()
    .and_then(|t| launch::inline_settings(&t));
    let mut args: Vec<OsString> = probe.iter().map(OsString::from).collect();
    args.extend(
        extra
            .iter()
            .map(|a| OsString::from(a.replace("{gen}", &w.generation.to_string_lossy()))),
    );
    let command = launch::build_command(&LaunchRequest {
        agent,
        program,
        generation: &w.generation,
        prepared: &prepared,
        yolo: false,
        user_args: &args,
        workspace: &w.project,
        claude_settings: settings.as_deref(),
    });
    let scratch = w.root.join("scratch");
    let output = Command::new(&command.program)
        .args(&command.args)
        .env("HOME", &w.home)
        .env("XDG_DATA_HOME", scratch.join("data"))
        .env("XDG_CACHE_HOME", scratch.join("cache"))
        .env("XDG_STATE_HOME", scratch.join("state"))
        .env("XDG_CONFIG_HOME", w.home.join(".config"))
        .envs(&command.env)
        .current_dir(&w.project)
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{:?} {:?} failed:\n{text}",
        command.program,
        command.args
    );
    Some((text, w))
}

#[test]
fn claude_validates_the_bundle_the_launcher_points_at() {
    let Some((text, _w)) = run_probe(
        Agent::Claude,
        &["plugin", "validate"],
        &["{gen}/plugins/agentpack-bundle"],
    ) else {
        return;
    };
    assert!(text.contains("agentpack-bundle:demo-skill"), "{text}");
    assert!(text.contains("Validation passed"), "{text}");
}

#[test]
fn codex_lists_the_pack_skill_and_the_user_skill_from_the_prepared_home() {
    let Some((text, _w)) = run_probe(Agent::Codex, &["debug", "prompt-input", "hi"], &[]) else {
        return;
    };
    assert!(text.contains("demo-skill"), "{text}");
    assert!(text.contains("The user's own Codex skill."), "{text}");
}

#[test]
fn opencode_lists_the_pack_skill_from_the_prepared_root() {
    let Some((text, w)) = run_probe(Agent::OpenCode, &["debug", "skill"], &[]) else {
        return;
    };
    assert!(text.contains("demo-skill"), "{text}");
    assert!(text.contains("A demo skill staged by agentpack"), "{text}");
    assert!(
        text.contains(&*w.state_dir.join("homes").to_string_lossy()),
        "read from the home layer: {text}"
    );
}
