//! Hooks: reading every place the plugin formats define them, the per-agent event tables, and
//! rendering each agent's hook file.
//!
//! Every staged command hook calls `<agentpack_exe> hook-exec dispatch --agent <agent> --event
//! <event> --spec <file>`, by the absolute path of the executable that staged it; the spec file
//! ([`HookSpec`], JSON, in the generation) names the package's handlers and the staged copy of the
//! package they run in. This module renders that call; it never runs a hook.
//!
//! Here: the hook model and its parser; [`events`]: which event each agent fires for one written
//! for another (the agent's [`crate::agent::Hooks`] row picks the table); `render`: each agent's
//! hook document in the shape its row names.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::agent::Agent;

mod events;
mod render;
#[cfg(test)]
mod tests;

pub use events::{target_event, CLAUDE_EVENTS, CODEX_EVENTS, CURSOR_EVENTS, OPENCODE_EVENTS};
pub use render::{
    render, resolve_spec_arg, HookContext, HookRender, CODEX_HOME_SPEC, CODEX_SPEC_DIR,
};
/// The format a hook file is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HookFormat {
    Claude,
    Cursor,
    Codex,
}

/// One handler of one event.
#[derive(Debug, Clone, PartialEq)]
pub struct HookEntry {
    pub event: String,
    pub matcher: Option<String>,
    /// The handler object as written (Claude: one of `hooks`; Cursor: the entry itself).
    pub handler: Map<String, Value>,
}

/// One parsed hook file (or inline `hooks` value).
#[derive(Debug, Clone, PartialEq)]
pub struct HookFile {
    pub format: HookFormat,
    /// Where it was read, for messages (`hooks/hooks.json`, `.cursor-plugin/plugin.json#hooks`).
    pub source: String,
    pub entries: Vec<HookEntry>,
}

/// A package's hooks with where they run.
#[derive(Debug, Clone, PartialEq)]
pub struct PackageHooks {
    pub module: String,
    /// The staged copy of the package (`<generation>/plugin-roots/<prefix>`).
    pub plugin_root: String,
    pub plugin_data: String,
    pub files: Vec<HookFile>,
}

/// The spec file `hook-exec dispatch` reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookSpec {
    pub version: u32,
    pub agent: String,
    /// The event the agent fires, in its own name.
    pub event: String,
    pub handlers: Vec<HookSpecHandler>,
}

/// One handler to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookSpecHandler {
    pub module: String,
    pub source: String,
    pub source_event: String,
    /// Only set where the agent's own file cannot carry it (Antigravity, OpenCode): dispatch filters.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub matcher: Option<String>,
    /// Set as `CLAUDE_PLUGIN_ROOT`, `CURSOR_PLUGIN_ROOT` and `PLUGIN_ROOT`; the working directory.
    pub plugin_root: String,
    /// Set as `CLAUDE_PLUGIN_DATA` and `PLUGIN_DATA`.
    pub plugin_data: String,
    /// The shell command (shell form), or the program (exec form, variables substituted).
    pub command: String,
    /// Exec form: the arguments, variables substituted; the program runs without a shell.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub args: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub timeout: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fail_closed: Option<bool>,
}

fn format_of(events: &[&String], declared_codex: bool) -> HookFormat {
    let claude = events
        .iter()
        .filter(|e| CLAUDE_EVENTS.contains(&e.as_str()))
        .count();
    let cursor = events
        .iter()
        .filter(|e| CURSOR_EVENTS.contains(&e.as_str()))
        .count();
    if cursor > claude {
        HookFormat::Cursor
    } else if declared_codex {
        HookFormat::Codex
    } else {
        HookFormat::Claude
    }
}

/// Parses a hook document (`{"hooks": {...}}`, with or without Cursor's `version`).
pub fn parse_hook_value(
    value: &Value,
    source: &str,
    declared_codex: bool,
    warnings: &mut Vec<String>,
) -> Option<HookFile> {
    let events = match value.get("hooks").unwrap_or(value) {
        Value::Object(events) => events,
        _ => {
            warnings.push(format!(
                "hook file {source} does not parse: `hooks` is not an object; skipped"
            ));
            return None;
        }
    };
    let names: Vec<&String> = events.keys().collect();
    let format = format_of(&names, declared_codex);
    let mut entries = Vec::new();
    for (event, list) in events {
        let known = match format {
            HookFormat::Cursor => CURSOR_EVENTS.contains(&event.as_str()),
            _ => CLAUDE_EVENTS.contains(&event.as_str()),
        };
        if !known {
            warnings.push(format!(
                "hook event `{event}` in {source} is not an event any agent documents; skipped"
            ));
            continue;
        }
        let Some(list) = list.as_array() else {
            warnings.push(format!(
                "hook event `{event}` in {source} is not a list; skipped"
            ));
            continue;
        };
        for item in list {
            let Some(object) = item.as_object() else {
                continue;
            };
            match format {
                HookFormat::Cursor => entries.push(HookEntry {
                    event: event.clone(),
                    matcher: object
                        .get("matcher")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    handler: object.clone(),
                }),
                _ => {
                    let matcher = object
                        .get("matcher")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    let handlers = object
                        .get("hooks")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    for handler in handlers {
                        if let Value::Object(handler) = handler {
                            entries.push(HookEntry {
                                event: event.clone(),
                                matcher: matcher.clone().filter(|m| !m.is_empty()),
                                handler,
                            });
                        }
                    }
                }
            }
        }
    }
    Some(HookFile {
        format,
        source: source.to_string(),
        entries,
    })
}

/// Picks the hook files an agent gets from one package: its own format, else Claude Code's,
/// else Cursor's, else Codex's.
pub fn files_for(agent: Agent, files: &[HookFile]) -> Vec<&HookFile> {
    let of = |format: HookFormat| {
        files
            .iter()
            .filter(|f| f.format == format)
            .collect::<Vec<_>>()
    };
    let own = agent
        .profile()
        .hooks
        .native_format
        .map(of)
        .unwrap_or_default();
    if !own.is_empty() {
        return own;
    }
    for format in [HookFormat::Claude, HookFormat::Cursor, HookFormat::Codex] {
        let list = of(format);
        if !list.is_empty() {
            return list;
        }
    }
    Vec::new()
}

/// Quotes a word for a POSIX shell when it needs it.
pub fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The command line a staged hook runs.
pub fn dispatch_command(exe: &str, agent: Agent, event: &str, spec: &str) -> String {
    format!(
        "{} hook-exec dispatch --agent {} --event {} --spec {}",
        shell_quote(exe),
        agent.as_str(),
        shell_quote(event),
        shell_quote(spec)
    )
}
