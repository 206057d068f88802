//! `agentpack hook-exec dispatch` through the real binary: a spec runs its handler in the staged
//! package with the payload on stdin, and the handler's answer (stdout, stderr, exit code 2 to
//! block) comes back unchanged.

#![allow(clippy::unwrap_used, clippy::print_stderr)] // tests may unwrap and say why they skip (HELPERS.md)

use std::io::Write as _;
use std::process::{Command, Stdio};

fn dispatch(
    agent: &str,
    event: &str,
    spec: &std::path::Path,
    payload: &str,
) -> std::process::Output {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("agentpack"))
        .args([
            "hook-exec",
            "dispatch",
            "--agent",
            agent,
            "--event",
            event,
            "--spec",
        ])
        .arg(spec)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// A project whose one path package ("guard") ships `hooks_json` and `scripts`.
fn guard_project(
    hooks_json: &str,
    scripts: &[(&str, &str)],
) -> agentpack_test_support::IsolatedHome {
    let iso = agentpack_test_support::IsolatedHome::new();
    let pkg = iso.project.join("pkg");
    let write = |path: std::path::PathBuf, text: &str| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        pkg.join(".claude-plugin/plugin.json"),
        r#"{"name": "guard", "version": "1.0.0"}"#,
    );
    write(pkg.join("hooks/hooks.json"), hooks_json);
    for (path, text) in scripts {
        write(pkg.join(path), text);
    }
    write(
        iso.project.join("agentpack.toml"),
        "name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\n\"guard\" = { path = \"pkg\" }\n",
    );
    iso
}

/// An executable stand-in agent `name` beside the project, running `script`.
fn stand_in(
    iso: &agentpack_test_support::IsolatedHome,
    name: &str,
    script: &str,
) -> std::path::PathBuf {
    let bin = iso.project.parent().unwrap().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let path = bin.join(name);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(
        &path,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
    path
}

/// Runs a staged hook's command line the way an agent does (`/bin/sh -c`), with `payload` on stdin.
fn run_hook(
    command: &str,
    env: &[(&str, Option<&std::path::Path>)],
    payload: &str,
) -> std::process::Output {
    let mut shell = Command::new("/bin/sh");
    shell
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        match value {
            Some(value) => shell.env(name, value),
            None => shell.env_remove(name),
        };
    }
    let mut child = shell.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn a_handler_answers_through_dispatch() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("plugin-root");
    std::fs::create_dir_all(root.join("scripts")).unwrap();
    std::fs::write(
        root.join("scripts/check.sh"),
        "#!/bin/sh\ninput=$(cat)\ncase \"$input\" in *rm*) echo \"no rm in $PLUGIN_ROOT\" >&2; exit 2;; esac\necho '{\"ok\":true}'\n",
    )
    .unwrap();
    let spec = dir.path().join("001.json");
    std::fs::write(
        &spec,
        serde_json::json!({
            "version": 1,
            "agent": "claude",
            "event": "PreToolUse",
            "handlers": [{
                "module": "github.com/acme/guard",
                "source": "hooks/hooks.json",
                "source_event": "PreToolUse",
                "plugin_root": root,
                "plugin_data": dir.path().join("data"),
                "command": "sh \"$CLAUDE_PLUGIN_ROOT/scripts/check.sh\"",
            }],
        })
        .to_string(),
    )
    .unwrap();
    let allowed = dispatch(
        "claude",
        "PreToolUse",
        &spec,
        r#"{"tool_name":"Bash","tool_input":{"command":"ls"}}"#,
    );
    assert_eq!(allowed.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&allowed.stdout), "{\"ok\":true}\n");
    let blocked = dispatch(
        "claude",
        "PreToolUse",
        &spec,
        r#"{"tool_name":"Bash","tool_input":{"command":"rm -rf /"}}"#,
    );
    assert_eq!(blocked.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&blocked.stderr),
        format!("no rm in {}\n", root.display())
    );
    assert!(dir.path().join("data").is_dir());
    let wrong = dispatch("claude", "Stop", &spec, "{}");
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("agentpack sync"));
}

/// A package's hook, staged by a launch, runs through the command the generation wrote.
#[test]
fn a_staged_hook_calls_back_into_agentpack() {
    let iso = guard_project(
        r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "sh ${CLAUDE_PLUGIN_ROOT}/scripts/guard.sh"}]}]}}"#,
        &[(
            "scripts/guard.sh",
            "input=$(cat)\ncase \"$input\" in *rm*) echo blocked >&2; exit 2;; esac\necho \"{\\\"root\\\":\\\"$PWD\\\"}\"\n",
        )],
    );
    let claude = stand_in(&iso, "claude", "#!/bin/sh\nexit 0\n");
    let output = iso
        .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
        .env("CLAUDE_PATH", &claude)
        .arg("claude")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let generation = std::fs::canonicalize(iso.staging_root.join("modes/default")).unwrap();
    let hooks: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(generation.join("plugins/agentpack-bundle/hooks/hooks.json"))
            .unwrap(),
    )
    .unwrap();
    let command = hooks["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        command.contains("hook-exec dispatch --agent claude --event PreToolUse"),
        "{command}"
    );
    let run = |payload: &str| run_hook(&command, &[], payload);
    let allowed = run(r#"{"tool_name":"Bash","tool_input":{"command":"ls"}}"#);
    assert_eq!(
        allowed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&allowed.stdout).unwrap();
    assert!(
        answer["root"]
            .as_str()
            .unwrap()
            .starts_with(&*generation.join("plugin-roots").to_string_lossy()),
        "runs in the staged copy: {answer}"
    );
    let blocked = run(r#"{"tool_name":"Bash","tool_input":{"command":"rm -rf /"}}"#);
    assert_eq!(blocked.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&blocked.stderr), "blocked\n");
}

/// A Codex hook names its spec relative to `CODEX_HOME` (so its command, and the trust the user
/// gave it in Codex, survive new generations): it runs from the launched home and says what to do
/// without one.
#[test]
fn a_staged_codex_hook_finds_its_spec_in_the_codex_home() {
    let iso = guard_project(
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo \"{\\\"stopped\\\":\\\"$PLUGIN_ROOT\\\"}\""}]}]}}"#,
        &[],
    );
    // A stand-in Codex that says which home it was given.
    let seen = iso.project.parent().unwrap().join("codex-home.txt");
    let codex = stand_in(
        &iso,
        "codex",
        &format!(
            "#!/bin/sh\nprintf %s \"$CODEX_HOME\" > {}\n",
            seen.display()
        ),
    );
    let output = iso
        .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
        .env("CODEX_PATH", &codex)
        .arg("codex")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let home = std::path::PathBuf::from(std::fs::read_to_string(&seen).unwrap());
    let hooks: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("hooks.json")).unwrap()).unwrap();
    let command = hooks["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        command.contains("--spec codex-home:hook-specs/")
            && !command.contains(&*home.to_string_lossy()),
        "the command names neither the generation nor the home: {command}"
    );
    let run = |codex_home: Option<&std::path::Path>| {
        run_hook(&command, &[("CODEX_HOME", codex_home)], "{}")
    };
    let ran = run(Some(&home));
    assert_eq!(
        ran.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert!(
        answer["stopped"]
            .as_str()
            .unwrap()
            .contains("/plugin-roots/"),
        "runs in the staged copy: {answer}"
    );
    let lost = run(None);
    assert!(!lost.status.success());
    let stderr = String::from_utf8_lossy(&lost.stderr);
    assert!(
        stderr.contains("CODEX_HOME") && stderr.contains("agentpack codex"),
        "{stderr}"
    );
}
