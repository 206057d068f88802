//! Rendering each agent's hook document: the handlers a package's hooks name, as
//! `agentpack hook-exec dispatch` calls with a spec file each, in the document shape of the agent's
//! [`crate::agent::HookDocument`].

use indexmap::IndexMap;
use serde_json::{json, Map, Value};

use super::*;
use crate::agent::{Agent, HookDocument};

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

/// The dispatch spec of `entry` (of `file` in `package`): where it came from and the plugin
/// variables, with no command, arguments, timeout or fail-closed setting yet.
fn spec_handler(package: &PackageHooks, file: &HookFile, entry: &HookEntry) -> HookSpecHandler {
    HookSpecHandler {
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
    }
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
                let as_written = file.format != HookFormat::Cursor
                    && agent.profile().hooks.native_handler_types.contains(&kind);
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
                        spec_handler: spec_handler(package, file, entry),
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
                            || (file.format == HookFormat::Cursor
                                && agent.profile().hooks.native_format == Some(file.format))
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
                        command,
                        args,
                        timeout: entry.handler.get("timeout").cloned(),
                        fail_closed: entry.handler.get("failClosed").and_then(Value::as_bool),
                        ..spec_handler(package, file, entry)
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
    crate::render::mcp::substitute_plugin_vars(text, &package.plugin_root, &package.plugin_data).0
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
pub(super) fn codex_spec_name(spec: &[u8], generation_root: &str) -> String {
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

pub(super) fn spec_bytes(spec: &HookSpec) -> Vec<u8> {
    crate::json_bytes(&serde_json::to_value(spec).unwrap_or(Value::Null))
}

/// One handler in Claude Code's group shape: `{"matcher": ..., "hooks": [handler]}` (no
/// `matcher` when it has none).
fn matcher_group(matcher: Option<String>, handler: Map<String, Value>) -> Value {
    let mut group = Map::new();
    if let Some(matcher) = matcher {
        group.insert("matcher".into(), json!(matcher));
    }
    group.insert("hooks".into(), json!([handler]));
    Value::Object(group)
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
    let document = agent.profile().hooks.document;
    match document {
        HookDocument::Groups | HookDocument::GroupsWithHomeSpecs | HookDocument::Flat => {
            let mut events: IndexMap<String, Vec<Value>> = IndexMap::new();
            let mut index = 0;
            for item in planned {
                if let Some(handler) = item.passthrough {
                    events
                        .entry(item.event)
                        .or_default()
                        .push(matcher_group(item.matcher, handler));
                    continue;
                }
                index += 1;
                let spec = spec_bytes(&HookSpec {
                    version: 1,
                    agent: agent.as_str().into(),
                    event: item.event.clone(),
                    handlers: vec![item.spec_handler],
                });
                let (spec_path, spec_arg) = if document == HookDocument::GroupsWithHomeSpecs {
                    let name = codex_spec_name(&spec, context.generation_root);
                    (
                        format!("{}/{CODEX_SPEC_DIR}/{name}", crate::render::codex::ROOT),
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
                if document == HookDocument::Flat {
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
                    list.push(matcher_group(item.matcher, handler));
                }
            }
            let events: Map<String, Value> = events
                .into_iter()
                .map(|(k, v)| (k, Value::Array(v)))
                .collect();
            let document = if document == HookDocument::Flat {
                json!({"version": 1, "hooks": events})
            } else {
                json!({"hooks": events})
            };
            out.files
                .push((hook_file.to_string(), crate::json_bytes(&document)));
        }
        HookDocument::NamedGroup | HookDocument::OpenCodePlugin => {
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
            if document == HookDocument::NamedGroup {
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
        HookDocument::None => {}
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
