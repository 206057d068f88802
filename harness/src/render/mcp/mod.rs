//! MCP servers: reading plugin definitions, the three-source merge, and each agent's native format.
//!
//! Owns where a plugin's servers are read from (in order, a later definition of a name wins):
//! `.mcp.json`, `mcp.json`, then the `mcpServers` field of `.claude-plugin/plugin.json`,
//! `.cursor-plugin/plugin.json` and `.codex-plugin/plugin.json` (a path, an inline map, or an array of
//! them); both the `{"mcpServers": {...}}` and the bare map shape. The merge order is plugins (by
//! cache_key), the manifest's `[mcp.servers]`, then `./.agents/mcp.json`; later wins.
//!
//! It must never put a secret into a staged file: `env` values, header values and the OAuth client
//! secret are staged in their [`StagedValue`] form: a reference to an environment variable
//! (`${VAR}`) or a template whose text cannot carry a secret (`Bearer ${TOKEN}`) is kept in the
//! agent's own syntax; anything else (a literal, or a template such as `postgres://app:pw@${HOST}`)
//! is moved to the plan's [`SecretLayer`] as written and referenced by name, and the launcher
//! expands a template's references at each launch ([`expand_references`]). A `url` with userinfo
//! and each argument that holds a credential (the rule of [`crate::render::credentials`]) are handled the
//! same way: staged as `${AGENTPACK_MCP_<SERVER>_URL}` / `${AGENTPACK_MCP_<SERVER>_ARG_<i>}` (for
//! Codex and Grok, which expand nothing, as that text, with the real values in the home layer's
//! `config.toml`).

use indexmap::IndexMap;
use serde_json::Value;

mod json;
mod staged;
#[cfg(test)]
mod tests;
mod toml_servers;

pub use json::{render_json_servers, render_opencode};
pub(crate) use staged::map_references;
pub use staged::{
    arg_secret, expand_references, plugin_data_prefix, secret_var, staged_args, staged_form,
    staged_url, staged_value, template_is_store_safe, StagedValue, TEMPLATE_SCHEME_WORDS,
    URL_SECRET,
};
pub use toml_servers::render_toml_servers;

/// An MCP server definition as carried between sources and agents: the manifest's own type, so a
/// `[mcp.servers]` entry and a plugin's `.mcp.json` entry are the same value.
pub use agentpack_lockfile::{McpOAuth, McpServer};

/// What runs instead of the written command, decided by the lock (a pinned npm version, or
/// `agentpack mcp-exec` for a locked tree). Supplied by the generation builder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpLaunch {
    pub command: String,
    pub args: Vec<String>,
}

/// Where a merged server came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpSource {
    Plugin { module: String, file: String },
    Manifest,
    DotAgents,
}

impl McpSource {
    pub fn describe(&self) -> String {
        match self {
            McpSource::Plugin { module, file } => format!("{module} ({file})"),
            McpSource::Manifest => "agentpack.toml".into(),
            McpSource::DotAgents => ".agents/mcp.json".into(),
        }
    }
}

/// One server after the merge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergedServer {
    pub name: String,
    pub server: McpServer,
    pub source: McpSource,
}

/// The plugin definition files, in the order they are read.
pub const PLUGIN_MCP_FILES: [&str; 2] = [".mcp.json", "mcp.json"];
/// The plugin manifests whose `mcpServers` field is read after [`PLUGIN_MCP_FILES`].
pub const PLUGIN_MANIFESTS: [&str; 3] = [
    ".claude-plugin/plugin.json",
    ".cursor-plugin/plugin.json",
    ".codex-plugin/plugin.json",
];

const KNOWN_FIELDS: [&str; 13] = [
    "type",
    "command",
    "args",
    "env",
    "url",
    "disabled",
    "headers",
    "cwd",
    "oauth",
    "auth",
    "scopes",
    "serverUrl",
    "httpUrl",
];

/// Reads a definition document: `{"mcpServers": {...}}` or a bare name -> server map. `label`
/// names the file in warnings.
pub fn parse_servers(
    value: &Value,
    label: &str,
    warnings: &mut Vec<String>,
) -> IndexMap<String, McpServer> {
    let map = match value.get("mcpServers") {
        Some(Value::Object(map)) => map,
        Some(_) => {
            warnings.push(format!(
                "{label}: `mcpServers` is not an object; its servers are skipped"
            ));
            return IndexMap::new();
        }
        None => match value {
            Value::Object(map) => map,
            _ => {
                warnings.push(format!(
                    "{label}: not a JSON object; its servers are skipped"
                ));
                return IndexMap::new();
            }
        },
    };
    let mut servers = IndexMap::new();
    for (name, definition) in map {
        if let Some(server) = parse_server(name, definition, label, warnings) {
            servers.insert(name.clone(), server);
        }
    }
    servers
}

fn string_list(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(s)) => s
            .split([' ', ','])
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

fn string_map(value: Option<&Value>) -> IndexMap<String, String> {
    let mut map = IndexMap::new();
    if let Some(Value::Object(object)) = value {
        for (key, value) in object {
            let text = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            map.insert(key.clone(), normalize_references(&text));
        }
    }
    map
}

/// Reads one server object. `None` (with a warning) when it has neither command nor url.
pub fn parse_server(
    name: &str,
    value: &Value,
    label: &str,
    warnings: &mut Vec<String>,
) -> Option<McpServer> {
    let Value::Object(object) = value else {
        warnings.push(format!(
            "{label}: MCP server `{name}` is not an object; skipped"
        ));
        return None;
    };
    let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_string);
    let url = text("url")
        .or_else(|| text("serverUrl"))
        .or_else(|| text("httpUrl"));
    let command = text("command");
    if command.is_none() && url.is_none() {
        warnings.push(format!(
            "{label}: MCP server `{name}` has neither command nor url; skipped"
        ));
        return None;
    }
    for key in object.keys() {
        if !KNOWN_FIELDS.contains(&key.as_str()) {
            warnings.push(format!(
                "{label}: field `{key}` of MCP server `{name}` is not staged"
            ));
        }
    }
    let oauth_object = object.get("oauth").or_else(|| object.get("auth"));
    let oauth = oauth_object.and_then(Value::as_object).map(|o| {
        let pick = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| o.get(*k).and_then(Value::as_str).map(str::to_string))
        };
        let mut scopes = string_list(o.get("scopes").or_else(|| o.get("scope")));
        if scopes.is_empty() {
            scopes = string_list(object.get("scopes"));
        }
        McpOAuth {
            client_id: pick(&["clientId", "client_id", "CLIENT_ID"]),
            client_secret: pick(&["clientSecret", "client_secret", "CLIENT_SECRET"]),
            callback_port: ["callbackPort", "callback_port"]
                .iter()
                .find_map(|k| o.get(*k).and_then(Value::as_u64))
                .and_then(|p| u16::try_from(p).ok()),
            scopes,
            metadata_url: pick(&["authServerMetadataUrl", "metadata_url", "metadataUrl"]),
        }
    });
    Some(McpServer {
        server_type: text("type"),
        args: string_list(object.get("args"))
            .iter()
            .map(|a| normalize_references(a))
            .collect(),
        command: command.map(|c| normalize_references(&c)),
        env: string_map(object.get("env")),
        url: url.map(|u| normalize_references(&u)),
        disabled: object
            .get("disabled")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        headers: string_map(object.get("headers")),
        cwd: text("cwd"),
        oauth,
    })
}

/// Rewrites Cursor's `${env:VAR}` into the common `${VAR}` form.
fn normalize_references(text: &str) -> String {
    text.replace("${env:", "${")
}

/// Substitutes the plugin-root and plugin-data variables. Returns the text and whether it changed.
pub fn substitute_plugin_vars(text: &str, plugin_root: &str, plugin_data: &str) -> (String, bool) {
    let mut out = text.to_string();
    for var in [
        "${CLAUDE_PLUGIN_ROOT}",
        "${CURSOR_PLUGIN_ROOT}",
        "${PLUGIN_ROOT}",
    ] {
        out = out.replace(var, plugin_root);
    }
    for var in ["${CLAUDE_PLUGIN_DATA}", "${PLUGIN_DATA}"] {
        out = out.replace(var, plugin_data);
    }
    let changed = out != text;
    (out, changed)
}

/// Whether `text` names its plugin's directory (`${CLAUDE_PLUGIN_ROOT}`, `${CURSOR_PLUGIN_ROOT}`
/// or `${PLUGIN_ROOT}`).
pub fn names_plugin_root(text: &str) -> bool {
    [
        "${CLAUDE_PLUGIN_ROOT}",
        "${CURSOR_PLUGIN_ROOT}",
        "${PLUGIN_ROOT}",
    ]
    .iter()
    .any(|v| text.contains(v))
}

/// Whether a server names its plugin's directory (and so needs a staged copy of the package).
pub fn uses_plugin_root(server: &McpServer) -> bool {
    let names = names_plugin_root;
    server.command.as_deref().is_some_and(names)
        || server.args.iter().any(|a| names(a))
        || server.env.values().any(|v| names(v))
        || server
            .cwd
            .as_deref()
            .is_some_and(|c| names(c) || !c.starts_with('/'))
}

/// Rewrites a plugin server to run from its staged copy and data directory.
pub fn localize_plugin_server(server: &mut McpServer, plugin_root: &str, plugin_data: &str) {
    let sub = |s: &str| substitute_plugin_vars(s, plugin_root, plugin_data).0;
    server.command = server.command.as_deref().map(sub);
    server.args = server.args.iter().map(|a| sub(a)).collect();
    for value in server.env.values_mut() {
        *value = sub(value);
    }
    server.cwd = server.cwd.as_deref().map(|cwd| {
        let cwd = sub(cwd);
        if cwd.starts_with('/') {
            cwd
        } else {
            let relative = cwd.trim_start_matches("./");
            if relative.is_empty() || relative == "." {
                plugin_root.to_string()
            } else {
                format!("{plugin_root}/{relative}")
            }
        }
    });
}

/// The three-source merge. `plugins` are in cache_key order; each plugin's servers already in
/// file order. A server whose name appears again replaces the earlier one, with an info line.
pub fn merge(
    plugins: Vec<MergedServer>,
    manifest: &IndexMap<String, McpServer>,
    overlay: Vec<MergedServer>,
    info: &mut Vec<String>,
) -> Vec<MergedServer> {
    let mut merged: IndexMap<String, MergedServer> = IndexMap::new();
    let manifest = manifest.iter().map(|(name, server)| MergedServer {
        name: name.clone(),
        server: server.clone(),
        source: McpSource::Manifest,
    });
    for server in plugins.into_iter().chain(manifest).chain(overlay) {
        if let Some(previous) = merged.get(&server.name) {
            info.push(format!(
                "MCP server `{}` from {} replaces the one from {}",
                server.name,
                server.source.describe(),
                previous.source.describe()
            ));
        }
        merged.insert(server.name.clone(), server);
    }
    let mut list: Vec<MergedServer> = merged.into_values().collect();
    list.sort_by(|a, b| a.name.cmp(&b.name));
    list
}
