//! Hooks: reading every place the plugin formats define them, the per-agent event tables, and
//! rendering each agent's hook file.
//!
//! Every staged command hook calls `<agentpack_exe> hook-exec dispatch --agent <agent> --event
//! <event> --spec <file>`, by the absolute path of the executable that staged it; the spec file
//! ([`HookSpec`], JSON, in the generation) names the package's handlers and the staged copy of the
//! package they run in. This module renders that call; it never runs a hook.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::plan::Agent;
use crate::tree::{Node, PackageTree};
use crate::HarnessError;

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

const CODEX_EVENTS: [&str; 11] = [
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

const OPENCODE_EVENTS: [&str; 5] = [
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "PermissionRequest",
    "PreCompact",
];

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

/// Reads every hook definition of a tree: `hooks/hooks.json`, then the `hooks` field of each
/// plugin manifest (a path, an inline object, or an array of them).
pub fn read_hooks(
    tree: &PackageTree,
    label: &str,
    warnings: &mut Vec<String>,
) -> Result<Vec<HookFile>, HarnessError> {
    let mut files = Vec::new();
    let mut read_paths: Vec<String> = Vec::new();
    let mut read_file = |path: &str,
                         declared_codex: bool,
                         files: &mut Vec<HookFile>,
                         warnings: &mut Vec<String>|
     -> Result<(), HarnessError> {
        let clean = path.trim_start_matches("./").to_string();
        let resolved = match tree.resolve(&clean) {
            Ok(Node::File(resolved)) => resolved,
            Ok(Node::Dir(_)) => return Ok(()),
            Err(problem) => {
                if path != "hooks/hooks.json" {
                    warnings.push(format!(
                        "{label}: skipped hook file: {}",
                        problem.describe(path)
                    ));
                }
                return Ok(());
            }
        };
        if read_paths.contains(&resolved) {
            return Ok(());
        }
        read_paths.push(resolved.clone());
        let text = tree.read_text(&resolved)?;
        let source = format!("{label} {clean}");
        match serde_json::from_str::<Value>(&text) {
            Ok(value) => files.extend(parse_hook_value(&value, &source, declared_codex, warnings)),
            Err(error) => warnings.push(format!(
                "hook file {source} does not parse ({error}); skipped"
            )),
        }
        Ok(())
    };
    read_file("hooks/hooks.json", false, &mut files, warnings)?;
    for manifest in crate::mcp::PLUGIN_MANIFESTS {
        let Ok(Node::File(resolved)) = tree.resolve(manifest) else {
            continue;
        };
        let Ok(value) = serde_json::from_str::<Value>(&tree.read_text(&resolved)?) else {
            continue;
        };
        let codex = manifest.starts_with(".codex-plugin");
        let items = match value.get("hooks") {
            None => continue,
            Some(Value::Array(items)) => items.clone(),
            Some(other) => vec![other.clone()],
        };
        for item in items {
            match item {
                Value::String(path) => {
                    if path.starts_with('/') {
                        warnings.push(format!("{label}: skipped hook file `{path}` declared in {manifest}: it leaves the package"));
                    } else {
                        read_file(&path, codex, &mut files, warnings)?;
                    }
                }
                Value::Object(_) => {
                    let source = format!("{label} {manifest}#hooks");
                    files.extend(parse_hook_value(&item, &source, codex, warnings));
                }
                _ => warnings.push(format!(
                    "{label}: `hooks` in {manifest} is neither a path nor an object; skipped"
                )),
            }
        }
    }
    Ok(files)
}

/// The event an agent fires for a hook written for `event` in `format`, if it has one.
pub fn target_event(agent: Agent, format: HookFormat, event: &str) -> Option<String> {
    if agent == Agent::Cursor && format == HookFormat::Cursor {
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
    match agent {
        Agent::Claude => found(&CLAUDE_EVENTS),
        Agent::Cursor => {
            if claude_name == "PermissionRequest" {
                return Some("preToolUse".into());
            }
            SHARED_CLAUDE_CURSOR
                .iter()
                .find(|[c, _]| *c == claude_name)
                .map(|[_, cursor]| cursor.to_string())
        }
        Agent::Codex => found(&CODEX_EVENTS),
        Agent::OpenCode => found(&OPENCODE_EVENTS),
        Agent::Antigravity => match claude_name {
            "SessionStart" | "PreToolUse" | "PostToolUse" | "Stop" => Some(claude_name.to_string()),
            "UserPromptSubmit" => Some("PreInvocation".into()),
            "PermissionRequest" => Some("PreToolUse".into()),
            _ => None,
        },
        Agent::Grok => None,
    }
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
    let own = match agent {
        Agent::Claude => of(HookFormat::Claude),
        Agent::Cursor => of(HookFormat::Cursor),
        Agent::Codex => of(HookFormat::Codex),
        _ => Vec::new(),
    };
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

/// Everything the hook renderer needs that is not in the packages.
#[derive(Debug, Clone)]
pub struct HookContext<'a> {
    pub agentpack_exe: &'a str,
    pub generation_root: &'a str,
}

/// What rendering produced: files (path relative to the generation root -> bytes), messages.
#[derive(Debug, Clone, Default)]
pub struct HookRender {
    pub files: Vec<(String, Vec<u8>)>,
    pub warnings: Vec<String>,
    pub info: Vec<String>,
}

struct Planned {
    event: String,
    matcher: Option<String>,
    spec_handler: HookSpecHandler,
    /// Cursor fields carried as written (`timeout`, `loop_limit`, `failClosed`).
    outer: Map<String, Value>,
    /// A Claude Code handler that runs no command (`prompt`, `agent`, `http`), staged as written.
    passthrough: Option<Map<String, Value>>,
}

fn plan_handlers(agent: Agent, packages: &[PackageHooks], out: &mut HookRender) -> Vec<Planned> {
    let mut planned = Vec::new();
    for package in packages {
        for file in files_for(agent, &package.files) {
            for entry in &file.entries {
                let Some(event) = target_event(agent, file.format, &entry.event) else {
                    out.warnings.push(format!(
                        "hook for {agent} skipped: event `{}` in {} has no {} equivalent",
                        entry.event,
                        file.source,
                        agent.display_name()
                    ));
                    continue;
                };
                let kind = entry
                    .handler
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("command");
                let as_written = agent == Agent::Claude
                    && file.format != HookFormat::Cursor
                    && matches!(kind, "prompt" | "agent" | "http");
                if as_written {
                    out.info.push(format!(
                        "hook for {agent}: {} {} {} `{kind}` handler staged as written",
                        package.module,
                        file.source.rsplit(' ').next().unwrap_or(&file.source),
                        entry.event
                    ));
                    planned.push(Planned {
                        event,
                        matcher: entry.matcher.clone(),
                        spec_handler: HookSpecHandler {
                            module: package.module.clone(),
                            source: file.source.clone(),
                            source_event: entry.event.clone(),
                            matcher: None,
                            plugin_root: package.plugin_root.clone(),
                            plugin_data: package.plugin_data.clone(),
                            command: String::new(),
                            args: None,
                            timeout: None,
                            fail_closed: None,
                        },
                        outer: Map::new(),
                        passthrough: Some(entry.handler.clone()),
                    });
                    continue;
                }
                if kind != "command" {
                    out.warnings.push(format!(
                        "hook for {agent} skipped: {} `{}` handler in {} is of type `{kind}`, which agentpack cannot run for {}",
                        entry.event,
                        entry.matcher.as_deref().unwrap_or("*"),
                        file.source,
                        agent.display_name()
                    ));
                    continue;
                }
                let Some(command) = entry.handler.get("command").and_then(Value::as_str) else {
                    out.warnings.push(format!(
                        "hook for {agent} skipped: {} handler in {} has no command",
                        entry.event, file.source
                    ));
                    continue;
                };
                let args = entry
                    .handler
                    .get("args")
                    .and_then(Value::as_array)
                    .map(|items| {
                        items
                            .iter()
                            .filter_map(Value::as_str)
                            .map(|a| substitute(a, package))
                            .collect::<Vec<_>>()
                    });
                let command = if args.is_some() {
                    substitute(command, package)
                } else {
                    command.to_string()
                };
                let mut outer = Map::new();
                for key in ["timeout", "loop_limit", "failClosed"] {
                    if let Some(value) = entry.handler.get(key) {
                        if key == "timeout"
                            || (agent == Agent::Cursor && file.format == HookFormat::Cursor)
                        {
                            outer.insert(key.to_string(), value.clone());
                        }
                    }
                }
                out.info.push(format!(
                    "hook for {agent}: {} {} {}{} -> {event}",
                    package.module,
                    file.source.rsplit(' ').next().unwrap_or(&file.source),
                    entry.event,
                    entry
                        .matcher
                        .as_deref()
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default()
                ));
                planned.push(Planned {
                    event,
                    matcher: entry.matcher.clone(),
                    spec_handler: HookSpecHandler {
                        module: package.module.clone(),
                        source: file.source.clone(),
                        source_event: entry.event.clone(),
                        matcher: None,
                        plugin_root: package.plugin_root.clone(),
                        plugin_data: package.plugin_data.clone(),
                        command,
                        args,
                        timeout: entry.handler.get("timeout").cloned(),
                        fail_closed: entry.handler.get("failClosed").and_then(Value::as_bool),
                    },
                    outer,
                    passthrough: None,
                });
            }
        }
    }
    planned
}

fn substitute(text: &str, package: &PackageHooks) -> String {
    crate::mcp::substitute_plugin_vars(text, &package.plugin_root, &package.plugin_data).0
}

/// How a Codex hook names its spec: relative to `CODEX_HOME`, which Codex passes to its hooks.
///
/// Codex asks the user to trust each hook and keys that trust to a hash of the hook's command, so
/// the command must not change when nothing about the hook did: it names neither the generation nor
/// the home, only a spec whose name is a digest of its content with the generation's path left
/// out (see [`codex_spec_name`]). `hook-exec dispatch` resolves it with [`resolve_spec_arg`].
pub const CODEX_HOME_SPEC: &str = "codex-home:";

/// Where Codex hook specs are staged, inside the Codex home.
pub const CODEX_SPEC_DIR: &str = "hook-specs";

/// The file name of a Codex hook spec: a digest of the hook's definition (the spec without where
/// its package is staged, which changes with every generation and every change to the package), so
/// a hook keeps its name, its command and the user's trust in Codex until the hook itself changes.
fn codex_spec_name(spec: &[u8], generation_root: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut definition: Value = serde_json::from_slice(spec).unwrap_or(Value::Null);
    for handler in definition
        .get_mut("handlers")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        for (field, placeholder) in [
            ("plugin_root", "<plugin-root>"),
            ("plugin_data", "<plugin-data>"),
        ] {
            if let Some(Value::String(path)) = handler.get(field).cloned() {
                if let Some(object) = handler.as_object_mut() {
                    object.insert(field.into(), json!(placeholder));
                }
                // The package's paths also appear substituted into its command and arguments.
                let text = serde_json::to_string(&*handler).unwrap_or_default();
                *handler =
                    serde_json::from_str(&text.replace(&path, placeholder)).unwrap_or(Value::Null);
            }
        }
    }
    let mut text = serde_json::to_string(&definition).unwrap_or_default();
    if !generation_root.is_empty() {
        text = text.replace(generation_root, "<generation>");
    }
    let digest = hex::encode(Sha256::digest(text.as_bytes()));
    format!("{}.json", &digest[..16])
}

/// The spec file a `--spec` argument names: a path, or [`CODEX_HOME_SPEC`]`<relative>` under
/// `codex_home` (`None` when `CODEX_HOME` is not set, which the caller reports).
pub fn resolve_spec_arg(
    spec: &std::path::Path,
    codex_home: Option<&std::path::Path>,
) -> Option<std::path::PathBuf> {
    match spec.to_str().and_then(|s| s.strip_prefix(CODEX_HOME_SPEC)) {
        Some(relative) => codex_home.map(|home| home.join(relative)),
        None => Some(spec.to_path_buf()),
    }
}

fn spec_bytes(spec: &HookSpec) -> Vec<u8> {
    crate::json_bytes(&serde_json::to_value(spec).unwrap_or(Value::Null))
}

/// Renders the hook file of `agent` (and its spec files) at `hook_file` (relative to the
/// generation root). Grok is not rendered here (its bundle carries the package files unchanged).
pub fn render(
    agent: Agent,
    packages: &[PackageHooks],
    hook_file: &str,
    context: &HookContext<'_>,
) -> HookRender {
    let mut out = HookRender::default();
    let planned = plan_handlers(agent, packages, &mut out);
    if planned.is_empty() {
        return out;
    }
    let spec_dir = format!("hook-specs/{}", agent.as_str());
    match agent {
        Agent::Claude | Agent::Codex | Agent::Cursor => {
            let mut events: IndexMap<String, Vec<Value>> = IndexMap::new();
            let mut index = 0;
            for item in planned {
                if let Some(handler) = item.passthrough {
                    let mut group = Map::new();
                    if let Some(matcher) = item.matcher {
                        group.insert("matcher".into(), json!(matcher));
                    }
                    group.insert("hooks".into(), json!([handler]));
                    events
                        .entry(item.event)
                        .or_default()
                        .push(Value::Object(group));
                    continue;
                }
                index += 1;
                let spec = spec_bytes(&HookSpec {
                    version: 1,
                    agent: agent.as_str().into(),
                    event: item.event.clone(),
                    handlers: vec![item.spec_handler],
                });
                let (spec_path, spec_arg) = if agent == Agent::Codex {
                    let name = codex_spec_name(&spec, context.generation_root);
                    (
                        format!("{}/{CODEX_SPEC_DIR}/{name}", crate::codex::ROOT),
                        format!("{CODEX_HOME_SPEC}{CODEX_SPEC_DIR}/{name}"),
                    )
                } else {
                    let spec_path = format!("{spec_dir}/{index:03}.json");
                    let absolute = format!("{}/{spec_path}", context.generation_root);
                    (spec_path, absolute)
                };
                let command =
                    dispatch_command(context.agentpack_exe, agent, &item.event, &spec_arg);
                out.files.push((spec_path, spec));
                let list = events.entry(item.event).or_default();
                if agent == Agent::Cursor {
                    let mut entry = Map::new();
                    entry.insert("command".into(), json!(command));
                    if let Some(matcher) = item.matcher {
                        entry.insert("matcher".into(), json!(matcher));
                    }
                    entry.extend(item.outer);
                    list.push(Value::Object(entry));
                } else {
                    let mut handler = Map::new();
                    handler.insert("type".into(), json!("command"));
                    handler.insert("command".into(), json!(command));
                    handler.extend(item.outer);
                    let mut group = Map::new();
                    if let Some(matcher) = item.matcher {
                        group.insert("matcher".into(), json!(matcher));
                    }
                    group.insert("hooks".into(), json!([handler]));
                    list.push(Value::Object(group));
                }
            }
            let events: Map<String, Value> = events
                .into_iter()
                .map(|(k, v)| (k, Value::Array(v)))
                .collect();
            let document = if agent == Agent::Cursor {
                json!({"version": 1, "hooks": events})
            } else {
                json!({"hooks": events})
            };
            out.files
                .push((hook_file.to_string(), crate::json_bytes(&document)));
        }
        Agent::Antigravity | Agent::OpenCode => {
            let mut by_event: IndexMap<String, Vec<HookSpecHandler>> = IndexMap::new();
            for item in planned {
                let mut handler = item.spec_handler;
                handler.matcher = item.matcher;
                by_event.entry(item.event).or_default().push(handler);
            }
            let mut named = Map::new();
            let mut specs = Map::new();
            for (event, handlers) in by_event {
                let spec_path = format!("{spec_dir}/{event}.json");
                let absolute = format!("{}/{spec_path}", context.generation_root);
                let command = dispatch_command(context.agentpack_exe, agent, &event, &absolute);
                out.files.push((
                    spec_path,
                    spec_bytes(&HookSpec {
                        version: 1,
                        agent: agent.as_str().into(),
                        event: event.clone(),
                        handlers,
                    }),
                ));
                let handler = json!({"type": "command", "command": command});
                let entry = if matches!(event.as_str(), "PreToolUse" | "PostToolUse") {
                    json!([{"hooks": [handler]}])
                } else {
                    json!([handler])
                };
                named.insert(event.clone(), entry);
                specs.insert(event, json!(absolute));
            }
            if agent == Agent::Antigravity {
                out.files.push((
                    hook_file.to_string(),
                    crate::json_bytes(&json!({"agentpack": named})),
                ));
            } else {
                out.files.push((
                    hook_file.to_string(),
                    opencode_plugin(context.agentpack_exe, &specs).into_bytes(),
                ));
            }
        }
        Agent::Grok => {}
    }
    out
}

fn opencode_plugin(exe: &str, specs: &Map<String, Value>) -> String {
    let specs = serde_json::to_string_pretty(&Value::Object(specs.clone())).unwrap_or_default();
    let exe = serde_json::to_string(exe).unwrap_or_default();
    format!(
        r#"// Generated by agentpack: runs the pack's hooks through `agentpack hook-exec dispatch`.
import {{ spawnSync }} from "node:child_process";

const AGENTPACK = {exe};
const SPECS = {specs};

function dispatch(event, payload) {{
  const spec = SPECS[event];
  if (!spec) return;
  const result = spawnSync(AGENTPACK, ["hook-exec", "dispatch", "--agent", "opencode", "--event", event, "--spec", spec], {{
    input: JSON.stringify(payload),
    encoding: "utf8",
  }});
  if (result.status === 2) throw new Error(result.stderr || `blocked by a ${{event}} hook`);
}}

export const AgentpackHooks = async () => ({{
  "tool.execute.before": async (input, output) => dispatch("PreToolUse", {{ tool: input.tool, args: output.args }}),
  "tool.execute.after": async (input, output) => dispatch("PostToolUse", {{ tool: input.tool, output }}),
  "chat.message": async (input, output) => dispatch("UserPromptSubmit", {{ input, output }}),
  "permission.ask": async (input, output) => dispatch("PermissionRequest", {{ input, output }}),
  "experimental.session.compacting": async (input, output) => dispatch("PreCompact", {{ input }}),
}});
"#
    )
}

#[cfg(test)]
mod tests {
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
}
