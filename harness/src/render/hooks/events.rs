//! The event tables: the events each agent fires, and the mapping between Claude Code's and
//! Cursor's names and Antigravity's.

use super::HookFormat;
use crate::agent::{Agent, HookEvents};

/// The 33 Claude Code hook events (read 2026-10-13).
pub const CLAUDE_EVENTS: [&str; 33] = [
    "SessionStart",
    "Setup",
    "UserPromptSubmit",
    "UserPromptExpansion",
    "PreToolUse",
    "PermissionRequest",
    "PermissionDenied",
    "PostToolUse",
    "PostToolUseFailure",
    "PostToolBatch",
    "Notification",
    "MessageDisplay",
    "SubagentStart",
    "SubagentStop",
    "TaskCreated",
    "TaskCompleted",
    "Stop",
    "StopFailure",
    "TeammateIdle",
    "InstructionsLoaded",
    "ConfigChange",
    "CwdChanged",
    "DirectoryAdded",
    "FileChanged",
    "WorktreeCreate",
    "WorktreeRemove",
    "PreCompact",
    "PostCompact",
    "PreModelSwitch",
    "PostModelSwitch",
    "Elicitation",
    "ElicitationResult",
    "SessionEnd",
];

/// The 21 Cursor hook events (read 2026-10-13).
pub const CURSOR_EVENTS: [&str; 21] = [
    "sessionStart",
    "sessionEnd",
    "preToolUse",
    "postToolUse",
    "postToolUseFailure",
    "subagentStart",
    "subagentStop",
    "beforeShellExecution",
    "afterShellExecution",
    "beforeMCPExecution",
    "afterMCPExecution",
    "beforeReadFile",
    "afterFileEdit",
    "beforeSubmitPrompt",
    "preCompact",
    "stop",
    "afterAgentResponse",
    "afterAgentThought",
    "beforeTabFileRead",
    "afterTabFileEdit",
    "workspaceOpen",
];

/// The ten events Claude Code and Cursor share: (Claude name, Cursor name).
const SHARED_CLAUDE_CURSOR: [[&str; 2]; 10] = [
    ["PreToolUse", "preToolUse"],
    ["PostToolUse", "postToolUse"],
    ["PostToolUseFailure", "postToolUseFailure"],
    ["UserPromptSubmit", "beforeSubmitPrompt"],
    ["Stop", "stop"],
    ["SubagentStart", "subagentStart"],
    ["SubagentStop", "subagentStop"],
    ["SessionStart", "sessionStart"],
    ["SessionEnd", "sessionEnd"],
    ["PreCompact", "preCompact"],
];

pub const CODEX_EVENTS: [&str; 11] = [
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PreCompact",
    "PostCompact",
    "UserPromptSubmit",
    "SubagentStart",
    "SubagentStop",
    "Stop",
    "SessionStart",
    "SessionEnd",
];

pub const OPENCODE_EVENTS: [&str; 5] = [
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "PermissionRequest",
    "PreCompact",
];

/// The event an agent fires for a hook written for `event` in `format`, if it has one.
pub fn target_event(agent: Agent, format: HookFormat, event: &str) -> Option<String> {
    let profile = &agent.profile().hooks;
    if format == HookFormat::Cursor && profile.events == HookEvents::Cursor {
        return Some(event.to_string());
    }
    let claude_name = match format {
        HookFormat::Cursor => SHARED_CLAUDE_CURSOR
            .iter()
            .find(|[_, c]| *c == event)
            .map(|[c, _]| *c)?,
        _ => event,
    };
    let found = |list: &[&str]| list.contains(&claude_name).then(|| claude_name.to_string());
    match profile.events {
        HookEvents::ClaudeNames(events) => found(events),
        HookEvents::Cursor => {
            if claude_name == "PermissionRequest" {
                return Some("preToolUse".into());
            }
            SHARED_CLAUDE_CURSOR
                .iter()
                .find(|[c, _]| *c == claude_name)
                .map(|[_, cursor]| cursor.to_string())
        }
        HookEvents::Antigravity => match claude_name {
            "SessionStart" | "PreToolUse" | "PostToolUse" | "Stop" => Some(claude_name.to_string()),
            "UserPromptSubmit" => Some("PreInvocation".into()),
            "PermissionRequest" => Some("PreToolUse".into()),
            _ => None,
        },
        HookEvents::None => None,
    }
}
