//! Tests of hook parsing, event mapping and rendering.

use serde_json::json;

use super::render::{codex_spec_name, spec_bytes};
use super::*;

#[test]
fn event_tables() {
    use Agent::{Antigravity, Claude, Codex, Cursor, Grok, OpenCode};
    use HookFormat as F;
    let table: [(Agent, HookFormat, &str, Option<&str>); 16] = [
        (Cursor, F::Claude, "PermissionRequest", Some("preToolUse")),
        (
            Cursor,
            F::Claude,
            "UserPromptSubmit",
            Some("beforeSubmitPrompt"),
        ),
        (Cursor, F::Claude, "Notification", None),
        (
            Cursor,
            F::Cursor,
            "beforeShellExecution",
            Some("beforeShellExecution"),
        ),
        (
            Claude,
            F::Cursor,
            "beforeSubmitPrompt",
            Some("UserPromptSubmit"),
        ),
        (Claude, F::Cursor, "beforeShellExecution", None),
        (Codex, F::Claude, "PostCompact", Some("PostCompact")),
        (Codex, F::Claude, "Notification", None),
        (Codex, F::Cursor, "stop", Some("Stop")),
        (OpenCode, F::Claude, "PreCompact", Some("PreCompact")),
        (OpenCode, F::Claude, "Stop", None),
        (
            Antigravity,
            F::Claude,
            "UserPromptSubmit",
            Some("PreInvocation"),
        ),
        (
            Antigravity,
            F::Claude,
            "PermissionRequest",
            Some("PreToolUse"),
        ),
        (Antigravity, F::Claude, "SessionEnd", None),
        (Grok, F::Claude, "Stop", None),
        (Claude, F::Claude, "Notification", Some("Notification")),
    ];
    for (agent, format, event, expected) in table {
        assert_eq!(
            target_event(agent, format, event).as_deref(),
            expected,
            "{agent} {event}"
        );
    }
    assert_eq!(CLAUDE_EVENTS.len(), 33);
    assert_eq!(CURSOR_EVENTS.len(), 21);
}

#[test]
fn format_follows_event_names() {
    let mut warnings = Vec::new();
    let cursor = parse_hook_value(
        &json!({"version": 1, "hooks": {"stop": [{"command": "x"}], "bogus": []}}),
        "f",
        false,
        &mut warnings,
    )
    .unwrap();
    assert_eq!(cursor.format, HookFormat::Cursor);
    assert_eq!(cursor.entries.len(), 1);
    assert!(warnings[0].contains("`bogus`"));
    let claude = parse_hook_value(
        &json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}}),
        "f",
        true,
        &mut warnings,
    )
    .unwrap();
    assert_eq!(claude.format, HookFormat::Codex);
}

#[test]
fn quoting() {
    assert_eq!(shell_quote("/opt/bin/agentpack"), "/opt/bin/agentpack");
    assert_eq!(shell_quote("/a b/it's"), r"'/a b/it'\''s'");
}

fn codex_spec(generation: &str, package: &str, command: &str) -> Vec<u8> {
    let root = format!("{generation}/plugin-roots/{package}");
    spec_bytes(&HookSpec {
        version: 1,
        agent: "codex".into(),
        event: "Stop".into(),
        handlers: vec![HookSpecHandler {
            module: "github.com/acme/guard".into(),
            source: "hooks/hooks.json".into(),
            source_event: "Stop".into(),
            matcher: None,
            plugin_root: root.clone(),
            plugin_data: format!("/data/{package}"),
            command: command.replace("${CLAUDE_PLUGIN_ROOT}", &root),
            args: None,
            timeout: None,
            fail_closed: None,
        }],
    })
}

#[test]
fn a_codex_spec_is_named_by_its_hook_not_by_where_it_is_staged() {
    let hook = "sh ${CLAUDE_PLUGIN_ROOT}/stop.sh";
    let first = codex_spec_name(
        &codex_spec("/s/aaaa-gen", "guard-1111", hook),
        "/s/aaaa-gen",
    );
    let moved = codex_spec_name(
        &codex_spec("/s/bbbb-gen", "guard-2222", hook),
        "/s/bbbb-gen",
    );
    assert_eq!(
        first, moved,
        "another generation, another staged copy: same hook"
    );
    let changed = codex_spec_name(
        &codex_spec(
            "/s/aaaa-gen",
            "guard-1111",
            "sh ${CLAUDE_PLUGIN_ROOT}/other.sh",
        ),
        "/s/aaaa-gen",
    );
    assert_ne!(first, changed, "a changed hook is a new name");
    assert!(first.ends_with(".json") && first.len() == 21, "{first}");
}

#[test]
fn a_codex_home_spec_resolves_under_codex_home_only() {
    use std::path::Path;
    let spec = Path::new("codex-home:hook-specs/abc.json");
    assert_eq!(
        resolve_spec_arg(spec, Some(Path::new("/h"))),
        Some(Path::new("/h/hook-specs/abc.json").to_path_buf())
    );
    assert_eq!(resolve_spec_arg(spec, None), None);
    let plain = Path::new("/gen/hook-specs/claude/001.json");
    assert_eq!(resolve_spec_arg(plain, None), Some(plain.to_path_buf()));
}
