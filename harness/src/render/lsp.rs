//! Language servers: the per-agent outputs of the servers [`crate::input::lsp`] read from Claude
//! Code's `.lsp.json` / `lspServers`.
//!
//! | Agent | Where the servers go |
//! |---|---|
//! | Claude Code | `.lsp.json` at the root of the staged bundle |
//! | Grok | `lsp.json` for the home layer, and `[features] lsp_tools = true` |
//! | OpenCode | the `lsp` map of `opencode.json` (command list, extensions, env, initialization) |
//! | Codex, Cursor, Antigravity | not written; a warning names them |
//!
//! It never installs or starts a language server.

use indexmap::IndexMap;
use serde_json::{json, Map, Value};

use crate::agent::{Agent, Lsp};

/// Claude Code's `.lsp.json` (and Grok's `lsp.json`, the same shape): the definitions as written.
pub(crate) fn servers_object(servers: &IndexMap<String, Value>) -> Value {
    Value::Object(servers.clone().into_iter().collect())
}

/// OpenCode's `lsp` map from Claude Code definitions. Fields OpenCode has no place for are left
/// out with a warning.
pub fn render_opencode(servers: &IndexMap<String, Value>, warnings: &mut Vec<String>) -> Value {
    let mut out = Map::new();
    for (name, definition) in servers {
        let Some(object) = definition.as_object() else {
            warnings.push(format!(
                "language server `{name}` is not an object; not staged for OpenCode"
            ));
            continue;
        };
        let Some(command) = object.get("command").and_then(Value::as_str) else {
            warnings.push(format!(
                "language server `{name}` has no command; not staged for OpenCode"
            ));
            continue;
        };
        let mut entry = Map::new();
        let mut list = vec![json!(command)];
        if let Some(Value::Array(args)) = object.get("args") {
            list.extend(args.iter().cloned());
        }
        entry.insert("command".into(), Value::Array(list));
        if let Some(Value::Object(map)) = object.get("extensionToLanguage") {
            let extensions: Vec<Value> = map.keys().map(|k| json!(k)).collect();
            entry.insert("extensions".into(), Value::Array(extensions));
        }
        if let Some(env) = object.get("env") {
            entry.insert("env".into(), env.clone());
        }
        if let Some(init) = object.get("initializationOptions") {
            entry.insert("initialization".into(), init.clone());
        }
        for key in object.keys() {
            if !matches!(
                key.as_str(),
                "command" | "args" | "extensionToLanguage" | "env" | "initializationOptions"
            ) {
                warnings.push(format!(
                    "language server `{name}`: field `{key}` has no OpenCode equivalent; left out"
                ));
            }
        }
        out.insert(name.clone(), Value::Object(entry));
    }
    Value::Object(out)
}

/// The warning for agents that get no language servers.
pub fn not_staged_warning(agent: Agent, servers: &IndexMap<String, Value>) -> Option<String> {
    if servers.is_empty() {
        return None;
    }
    let names: Vec<&str> = servers.keys().map(String::as_str).collect();
    let Lsp::NotStaged(reason) = agent.profile().lsp else {
        return None;
    };
    Some(format!(
        "language servers {} are not staged for {}: {reason}",
        names.join(", "),
        agent.display_name()
    ))
}
