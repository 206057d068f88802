//! `agentpack hook-exec dispatch` through the real binary: a spec runs its handler in the staged
//! package with the payload on stdin, and the handler's answer (stdout, stderr, exit code 2 to
//! block) comes back unchanged.

#![allow(clippy::unwrap_used, clippy::print_stderr)] // tests may unwrap and say why they skip (HELPERS.md)

use std::io::Write as _;
use std::process::{Command, Stdio};

fn wired() -> bool {
    let output = Command::new(assert_cmd::cargo::cargo_bin("agentpack"))
        .args(["hook-exec", "--help"])
        .output()
        .unwrap();
    if output.status.success() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "hook-exec is not wired into the binary"
    );
    eprintln!("skipped: hook-exec is not wired into the binary yet");
    false
}

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

#[test]
fn a_handler_answers_through_dispatch() {
    if !wired() {
        return;
    }
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
