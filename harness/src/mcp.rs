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
//! and each argument that holds a credential (the rule of [`crate::credentials`]) are handled the
//! same way: staged as `${AGENTPACK_MCP_<SERVER>_URL}` / `${AGENTPACK_MCP_<SERVER>_ARG_<i>}` (for
//! Codex and Grok, which expand nothing, as that text, with the real values in the home layer's
//! `config.toml`).

use indexmap::IndexMap;
use serde_json::{json, Map, Value};

use crate::plan::{Agent, SecretLayer};

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

/// How one secret-bearing value (an `env` value, a header value, an OAuth client secret) is staged:
/// its store-safe form. Rendering stages exactly this, and the generation digest
/// ([`staged_form`]) hashes exactly this, so the two cannot disagree. A [`StagedValue::Secret`]
/// carries nothing of the value: neither its bytes nor a hash of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StagedValue {
    /// Written as it stands: empty, or a path under the generation's `plugin-roots/` or the
    /// project's plugin-data directory.
    Plain(String),
    /// Exactly `${VAR}`: a reference in the agent's own syntax.
    Reference(String),
    /// `${VAR}` references in text that cannot carry a secret ([`template_is_store_safe`]), such as
    /// `Bearer ${TOKEN}`: written in the agent's own syntax.
    Template(String),
    /// A literal value, or a template whose text could carry a secret: never staged. The agent
    /// reads it from `AGENTPACK_MCP_<SERVER>_<KEY>` (or the home layer's `config.toml`), which the
    /// launcher fills in, expanding a template's `${VAR}` references at each launch.
    Secret,
}

/// The words a store-safe template may contain besides its references, whitespace and
/// punctuation: the authorization schemes that precede a token.
pub const TEMPLATE_SCHEME_WORDS: [&str; 4] = ["Bearer", "Basic", "Token", "token"];

/// Whether `value`, once each well-formed `${VAR}` reference is taken out, holds nothing that can
/// carry a secret: only whitespace, ASCII punctuation and the words of [`TEMPLATE_SCHEME_WORDS`]
/// (a digit, a letter outside those words, or any other character makes it secret-bearing).
/// `${VAR:-default}` and other non-references count as text, so their default is covered too.
pub fn template_is_store_safe(value: &str) -> bool {
    let mut literal = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        literal.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) if is_var_name(&after[..end]) => {
                literal.push(' ');
                rest = &after[end + 1..];
            }
            _ => {
                literal.push_str("${");
                rest = after;
            }
        }
    }
    literal.push_str(rest);
    literal
        .split(|c: char| c.is_whitespace() || c.is_ascii_punctuation())
        .filter(|word| !word.is_empty())
        .all(|word| TEMPLATE_SCHEME_WORDS.contains(&word))
}

/// The store-safe form of one secret-bearing value. `plugin_paths` are the path prefixes this
/// generation writes itself (see [`plugin_data_prefix`]).
pub fn staged_value(value: &str, plugin_paths: &[&str]) -> StagedValue {
    if let Some(name) = value.strip_prefix("${").and_then(|v| v.strip_suffix('}')) {
        if is_var_name(name) {
            return StagedValue::Reference(name.to_string());
        }
    }
    if value.contains("${") {
        return if template_is_store_safe(value) {
            StagedValue::Template(value.to_string())
        } else {
            StagedValue::Secret
        };
    }
    if value.is_empty()
        || plugin_paths
            .iter()
            .any(|p| !p.is_empty() && value.starts_with(p))
    {
        return StagedValue::Plain(value.to_string());
    }
    StagedValue::Secret
}

/// The prefix of the project's plugin-data directories, which a value may name without being a
/// secret (it is a path agentpack chose).
pub fn plugin_data_prefix(plugin_data_root: &std::path::Path) -> String {
    format!("{}/", crate::path_text(plugin_data_root))
}

fn staged_json(value: &str, plugin_paths: &[&str]) -> Value {
    match staged_value(value, plugin_paths) {
        StagedValue::Plain(text) => json!(["plain", text]),
        StagedValue::Reference(name) => json!(["reference", name]),
        StagedValue::Template(text) => json!(["template", text]),
        StagedValue::Secret => json!(["secret"]),
    }
}

/// Everything rendering writes into the store about a `[mcp.servers]` entry, for the generation
/// digest: the server as written, with each `env` value, header value and OAuth client secret in
/// its [`StagedValue`] form (a secret only as the fact that it is one). `plugin_data_root` is the
/// generation's; the generation's own `plugin-roots/` cannot be named here, and a manifest value
/// cannot name it either (its path is the hash of this very form).
pub fn staged_form(server: &McpServer, plugin_data_root: &std::path::Path) -> Value {
    let prefix = plugin_data_prefix(plugin_data_root);
    let paths = [prefix.as_str()];
    let pairs = |map: &IndexMap<String, String>| -> Vec<Value> {
        map.iter()
            .map(|(key, value)| json!([key, staged_json(value, &paths)]))
            .collect()
    };
    json!({
        "type": server.server_type,
        "command": server.command,
        "args": staged_args(&server.args),
        "env": pairs(&server.env),
        "url": server.url.as_deref().map(staged_url),
        "disabled": server.disabled,
        "headers": pairs(&server.headers),
        "cwd": server.cwd,
        "oauth": server.oauth.as_ref().map(|oauth| json!({
            "client_id": oauth.client_id,
            "client_secret": oauth.client_secret.as_deref().map(|s| staged_json(s, &paths)),
            "callback_port": oauth.callback_port,
            "scopes": oauth.scopes,
            "metadata_url": oauth.metadata_url,
        })),
    })
}

/// A server's arguments as the generation digest sees them: each one that holds a credential
/// ([`crate::credentials::credential_args`]) only as `["secret"]`, the others as written.
pub fn staged_args(args: &[String]) -> Value {
    let credentials = crate::credentials::credential_args(args);
    Value::Array(
        args.iter()
            .enumerate()
            .map(|(index, arg)| {
                if credentials.contains(&index) {
                    json!(["secret"])
                } else {
                    json!(arg)
                }
            })
            .collect(),
    )
}

/// A server's URL as the generation digest sees it: `["secret"]` when it carries userinfo, else
/// as written.
pub fn staged_url(url: &str) -> Value {
    if crate::credentials::has_url_credentials(url) {
        json!(["secret"])
    } else {
        json!(url)
    }
}

/// Expands the `${VAR}` and `${VAR:-default}` references of a secret template from `lookup` (the
/// launching environment), as a shell would: an unset variable becomes empty (its default when it
/// has one, also when it is set but empty). Returns the text and the variables that were unset
/// without a default. Text that is not a reference stays as written.
pub fn expand_references(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut unset = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str("${");
            rest = after;
            continue;
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if !is_var_name(name) {
            out.push_str("${");
            rest = after;
            continue;
        }
        match (
            lookup(name).filter(|v| !v.is_empty() || default.is_none()),
            default,
        ) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => unset.push(name.to_string()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    (out, unset)
}

fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The `<WHAT>` of [`secret_var`] for a server's URL that carries credentials.
pub const URL_SECRET: &str = "URL";

/// The `<WHAT>` of [`secret_var`] for a server's argument (0-based, as staged) that holds a
/// credential: `ARG_<index>`.
pub fn arg_secret(index: usize) -> String {
    format!("ARG_{index}")
}

/// The variable a secret is exported as: `AGENTPACK_MCP_<SERVER>_<WHAT>`.
pub fn secret_var(server: &str, what: &str) -> String {
    let clean = |s: &str| {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect::<String>()
    };
    format!("AGENTPACK_MCP_{}_{}", clean(server), clean(what))
}

/// Rewrites `${VAR}` references into an agent's interpolation syntax.
fn reference_syntax(agent: Agent, text: &str) -> String {
    match agent {
        Agent::Cursor => text.replace("${", "${env:"),
        Agent::OpenCode => {
            let mut out = String::new();
            let mut rest = text;
            while let Some(start) = rest.find("${") {
                out.push_str(&rest[..start]);
                let after = &rest[start + 2..];
                match after.find('}') {
                    Some(end) if is_var_name(&after[..end]) => {
                        out.push_str("{env:");
                        out.push_str(&after[..end]);
                        out.push('}');
                        rest = &after[end + 1..];
                    }
                    _ => {
                        out.push_str("${");
                        rest = after;
                    }
                }
            }
            out.push_str(rest);
            out
        }
        _ => text.to_string(),
    }
}

struct Ctx<'a> {
    agent: Agent,
    name: &'a str,
    warnings: &'a mut Vec<String>,
    secrets: &'a mut SecretLayer,
    plugin_paths: Vec<&'a str>,
}

impl Ctx<'_> {
    fn skip(&mut self, setting: &str) {
        self.warnings.push(format!(
            "MCP server `{}`: {} has no setting for {setting}; staged without it",
            self.name,
            self.agent.display_name()
        ));
    }

    /// A value in an agent that interpolates environment variables.
    fn interpolated(&mut self, value: &str, what: &str) -> String {
        match staged_value(value, &self.plugin_paths) {
            StagedValue::Plain(v) => v,
            StagedValue::Reference(_) | StagedValue::Template(_) => {
                reference_syntax(self.agent, value)
            }
            StagedValue::Secret => {
                // A secret template is kept as written: the launcher expands it at each launch.
                let var = secret_var(self.name, what);
                self.secrets.env.insert(var.clone(), value.to_string());
                reference_syntax(self.agent, &format!("${{{var}}}"))
            }
        }
    }

    /// A command: not secret, references converted to the agent's syntax.
    fn interpolated_plain(&mut self, value: &str) -> String {
        reference_syntax(self.agent, value)
    }

    /// A credential in a URL or an argument ([`crate::credentials`]): kept as written in the
    /// secret layer as `AGENTPACK_MCP_<SERVER>_<WHAT>` (the launcher expands its references at
    /// each launch) and staged as a reference to that variable.
    fn given_at_launch(&mut self, value: &str, what: &str) -> String {
        let var = secret_var(self.name, what);
        self.secrets.env.insert(var.clone(), value.to_string());
        reference_syntax(self.agent, &format!("${{{var}}}"))
    }

    /// A URL: staged with references in the agent's syntax, or given at launch when it carries
    /// userinfo ([`crate::credentials::has_url_credentials`]).
    fn interpolated_url(&mut self, url: &str) -> String {
        if crate::credentials::has_url_credentials(url) {
            self.given_at_launch(url, URL_SECRET)
        } else {
            reference_syntax(self.agent, url)
        }
    }

    /// Arguments: staged with references in the agent's syntax; each one that holds a credential
    /// ([`crate::credentials::credential_args`]) is given at launch.
    fn interpolated_args(&mut self, args: &[String]) -> Vec<String> {
        let credentials = crate::credentials::credential_args(args);
        args.iter()
            .enumerate()
            .map(|(index, arg)| {
                if credentials.contains(&index) {
                    self.given_at_launch(arg, &arg_secret(index))
                } else {
                    reference_syntax(self.agent, arg)
                }
            })
            .collect()
    }

    /// `env` values as a JSON object, literal ones moved to the secret layer as `<SERVER>_<KEY>`.
    fn interpolated_env(&mut self, env: &IndexMap<String, String>) -> Value {
        Value::Object(
            env.iter()
                .map(|(k, v)| (k.clone(), Value::String(self.interpolated(v, k))))
                .collect(),
        )
    }

    /// Header values as a JSON object, literal ones moved to the secret layer as
    /// `<SERVER>_HEADER_<NAME>`.
    fn interpolated_headers(&mut self, headers: &IndexMap<String, String>) -> Value {
        Value::Object(
            headers
                .iter()
                .map(|(k, v)| {
                    let value = self.interpolated(v, &format!("HEADER_{k}"));
                    (k.clone(), Value::String(value))
                })
                .collect(),
        )
    }

    /// Warns for the OAuth settings neither Cursor nor OpenCode has: a callback port and a
    /// metadata URL.
    fn skip_oauth_port_and_metadata(&mut self, oauth: &McpOAuth) {
        if oauth.callback_port.is_some() {
            self.skip("an OAuth callback port");
        }
        if oauth.metadata_url.is_some() {
            self.skip("an OAuth metadata URL");
        }
    }
}

/// The servers as a JSON map by name for `agent`, each rendered by `render` (`None` leaves it out).
fn json_server_map(
    agent: Agent,
    servers: &[MergedServer],
    plugin_paths: &[&str],
    warnings: &mut Vec<String>,
    secrets: &mut SecretLayer,
    mut render: impl FnMut(&mut Ctx<'_>, &McpServer) -> Option<Map<String, Value>>,
) -> Value {
    let mut out = Map::new();
    for merged in servers {
        let mut ctx = Ctx {
            agent,
            name: &merged.name,
            warnings,
            secrets,
            plugin_paths: plugin_paths.to_vec(),
        };
        if let Some(object) = render(&mut ctx, &merged.server) {
            out.insert(merged.name.clone(), Value::Object(object));
        }
    }
    Value::Object(out)
}

/// The JSON `mcpServers` map for Claude Code, Cursor or Antigravity.
pub fn render_json_servers(
    agent: Agent,
    servers: &[MergedServer],
    plugin_paths: &[&str],
    warnings: &mut Vec<String>,
    secrets: &mut SecretLayer,
) -> Value {
    json_server_map(agent, servers, plugin_paths, warnings, secrets, json_server)
}

/// One server for Claude Code, Cursor or Antigravity (the context's agent); `None` when it is
/// not staged.
fn json_server(ctx: &mut Ctx<'_>, server: &McpServer) -> Option<Map<String, Value>> {
    let agent = ctx.agent;
    let mut object = Map::new();
    if server.disabled && agent != Agent::Antigravity {
        ctx.warnings.push(format!(
            "MCP server `{}` is disabled; not staged for {}",
            ctx.name,
            agent.display_name()
        ));
        return None;
    }
    let remote = server.command.is_none();
    if let Some(kind) = &server.server_type {
        if agent != Agent::Antigravity {
            object.insert("type".into(), json!(kind));
        }
    } else if remote && agent == Agent::Claude {
        object.insert("type".into(), json!("http"));
    }
    if let Some(command) = &server.command {
        object.insert("command".into(), json!(ctx.interpolated_plain(command)));
        if !server.args.is_empty() {
            let args = ctx.interpolated_args(&server.args);
            object.insert("args".into(), json!(args));
        }
        if !server.env.is_empty() {
            object.insert("env".into(), ctx.interpolated_env(&server.env));
        }
    }
    if let Some(url) = &server.url {
        let key = if agent == Agent::Antigravity {
            "serverUrl"
        } else {
            "url"
        };
        object.insert(key.into(), json!(ctx.interpolated_url(url)));
    }
    if !server.headers.is_empty() {
        object.insert("headers".into(), ctx.interpolated_headers(&server.headers));
    }
    if let Some(cwd) = &server.cwd {
        if agent == Agent::Antigravity {
            object.insert("cwd".into(), json!(cwd));
        } else {
            ctx.skip("cwd");
        }
    }
    if let Some(oauth) = &server.oauth {
        match agent {
            Agent::Claude => {
                let mut o = Map::new();
                if let Some(id) = &oauth.client_id {
                    o.insert("clientId".into(), json!(id));
                }
                if let Some(port) = oauth.callback_port {
                    o.insert("callbackPort".into(), json!(port));
                }
                if let Some(url) = &oauth.metadata_url {
                    o.insert("authServerMetadataUrl".into(), json!(url));
                }
                if oauth.client_secret.is_some() {
                    ctx.skip("an OAuth client secret in its configuration");
                }
                if !oauth.scopes.is_empty() {
                    ctx.skip("OAuth scopes");
                }
                if !o.is_empty() {
                    object.insert("oauth".into(), Value::Object(o));
                }
            }
            Agent::Cursor => {
                let mut o = Map::new();
                if let Some(id) = &oauth.client_id {
                    o.insert("CLIENT_ID".into(), json!(id));
                }
                if !oauth.scopes.is_empty() {
                    o.insert("scopes".into(), json!(oauth.scopes));
                }
                if oauth.client_secret.is_some() {
                    ctx.skip("an OAuth client secret read from the environment");
                }
                ctx.skip_oauth_port_and_metadata(oauth);
                if !o.is_empty() {
                    object.insert("auth".into(), Value::Object(o));
                }
            }
            _ => ctx.skip("OAuth client settings"),
        }
    }
    if server.disabled {
        object.insert("disabled".into(), json!(true));
    }
    Some(object)
}

/// The `mcp` map of OpenCode's `opencode.json`.
pub fn render_opencode(
    servers: &[MergedServer],
    plugin_paths: &[&str],
    warnings: &mut Vec<String>,
    secrets: &mut SecretLayer,
) -> Value {
    json_server_map(
        Agent::OpenCode,
        servers,
        plugin_paths,
        warnings,
        secrets,
        |ctx, server| Some(opencode_server(ctx, server)),
    )
}

/// One server for OpenCode.
fn opencode_server(ctx: &mut Ctx<'_>, server: &McpServer) -> Map<String, Value> {
    let mut object = Map::new();
    if let Some(command) = &server.command {
        object.insert("type".into(), json!("local"));
        let mut list = vec![ctx.interpolated_plain(command)];
        list.extend(ctx.interpolated_args(&server.args));
        object.insert("command".into(), json!(list));
        if !server.env.is_empty() {
            object.insert("environment".into(), ctx.interpolated_env(&server.env));
        }
    } else if let Some(url) = &server.url {
        object.insert("type".into(), json!("remote"));
        object.insert("url".into(), json!(ctx.interpolated_url(url)));
    }
    if !server.headers.is_empty() {
        if server.command.is_some() {
            ctx.skip("headers on a local server");
        } else {
            object.insert("headers".into(), ctx.interpolated_headers(&server.headers));
        }
    }
    if server.cwd.is_some() {
        ctx.skip("cwd");
    }
    if let Some(oauth) = &server.oauth {
        let mut o = Map::new();
        if let Some(id) = &oauth.client_id {
            o.insert("clientId".into(), json!(id));
        }
        if let Some(secret) = &oauth.client_secret {
            let value = ctx.interpolated(secret, "OAUTH_CLIENT_SECRET");
            o.insert("clientSecret".into(), json!(value));
        }
        if !oauth.scopes.is_empty() {
            o.insert("scope".into(), json!(oauth.scopes.join(" ")));
        }
        ctx.skip_oauth_port_and_metadata(oauth);
        object.insert("oauth".into(), Value::Object(o));
    }
    if server.disabled {
        object.insert("enabled".into(), json!(false));
    }
    object
}

/// Inserts `value` under `key` when it has entries.
fn insert_unless_empty(table: &mut toml::Table, key: &str, value: toml::Table) {
    if !value.is_empty() {
        table.insert(key.into(), value.into());
    }
}

/// The `[mcp_servers]` table for Codex (and Grok, which reads the same shape). Literal secrets go
/// to `secrets.config_toml` under the same keys; references become `env_vars`,
/// `env_http_headers` and `bearer_token_env_var`.
pub fn render_toml_servers(
    agent: Agent,
    servers: &[MergedServer],
    plugin_paths: &[&str],
    warnings: &mut Vec<String>,
    secrets: &mut SecretLayer,
) -> toml::Table {
    let mut out = toml::Table::new();
    let mut secret_servers = toml::Table::new();
    for merged in servers {
        let server = &merged.server;
        let name = merged.name.as_str();
        let mut table = toml::Table::new();
        let mut secret = toml::Table::new();
        let mut warn = |message: String| warnings.push(format!("MCP server `{name}`: {message}"));
        let no_interpolation = |value: &str, warn: &mut dyn FnMut(String)| {
            if value.contains("${") {
                warn(format!(
                    "{} does not expand variables in `{}`; staged as written",
                    agent.display_name(),
                    crate::credentials::redact_url_userinfo(value)
                ));
            }
        };
        if let Some(command) = &server.command {
            no_interpolation(command, &mut warn);
            table.insert("command".into(), command.clone().into());
            if !server.args.is_empty() {
                // An argument holding a credential is staged as the name of the variable that
                // would carry it; the home layer's `config.toml` gets the arguments as written.
                let credentials = crate::credentials::credential_args(&server.args);
                let staged = server.args.iter().enumerate().map(|(index, arg)| {
                    if credentials.contains(&index) {
                        format!("${{{}}}", secret_var(name, &arg_secret(index))).into()
                    } else {
                        no_interpolation(arg, &mut warn);
                        arg.clone().into()
                    }
                });
                table.insert("args".into(), toml::Value::Array(staged.collect()));
                if !credentials.is_empty() {
                    secret.insert(
                        "args".into(),
                        toml::Value::Array(server.args.iter().map(|a| a.clone().into()).collect()),
                    );
                }
            }
            let mut env = toml::Table::new();
            let mut env_secret = toml::Table::new();
            let mut env_vars = Vec::new();
            for (key, value) in &server.env {
                match staged_value(value, plugin_paths) {
                    StagedValue::Plain(v) => {
                        env.insert(key.clone(), v.into());
                    }
                    StagedValue::Reference(var) if var == *key => {
                        env_vars.push(toml::Value::from(var))
                    }
                    // The agent cannot rename a variable or expand a template: the launcher
                    // gives the value, expanded from its environment, in the home layer.
                    StagedValue::Reference(_) | StagedValue::Template(_) | StagedValue::Secret => {
                        env_secret.insert(key.clone(), value.clone().into());
                    }
                }
            }
            insert_unless_empty(&mut table, "env", env);
            if !env_vars.is_empty() {
                table.insert("env_vars".into(), env_vars.into());
            }
            insert_unless_empty(&mut secret, "env", env_secret);
        }
        if let Some(url) = &server.url {
            if crate::credentials::has_url_credentials(url) {
                // Given in the home layer, its references expanded at each launch.
                let placeholder = format!("${{{}}}", secret_var(name, URL_SECRET));
                table.insert("url".into(), placeholder.into());
                secret.insert("url".into(), url.clone().into());
            } else {
                no_interpolation(url, &mut warn);
                table.insert("url".into(), url.clone().into());
            }
        }
        let mut headers = toml::Table::new();
        let mut env_headers = toml::Table::new();
        let mut secret_headers = toml::Table::new();
        for (key, value) in &server.headers {
            match staged_value(value, plugin_paths) {
                StagedValue::Plain(v) => {
                    headers.insert(key.clone(), v.into());
                }
                StagedValue::Reference(var) => {
                    env_headers.insert(key.clone(), var.into());
                }
                StagedValue::Template(text) => {
                    let bearer = text
                        .strip_prefix("Bearer ${")
                        .and_then(|v| v.strip_suffix('}'))
                        .filter(|v| is_var_name(v) && key.eq_ignore_ascii_case("authorization"));
                    match bearer {
                        Some(var) => {
                            table.insert("bearer_token_env_var".into(), var.to_string().into());
                        }
                        // Expanded by the launcher into the home layer, like a secret.
                        None => {
                            secret_headers.insert(key.clone(), value.clone().into());
                        }
                    }
                }
                StagedValue::Secret => {
                    secret_headers.insert(key.clone(), value.clone().into());
                }
            }
        }
        insert_unless_empty(&mut table, "http_headers", headers);
        insert_unless_empty(&mut table, "env_http_headers", env_headers);
        insert_unless_empty(&mut secret, "http_headers", secret_headers);
        if let Some(cwd) = &server.cwd {
            if agent == Agent::Codex {
                table.insert("cwd".into(), cwd.clone().into());
            } else {
                warn(format!(
                    "{} has no setting for cwd; staged without it",
                    agent.display_name()
                ));
            }
        }
        if let Some(oauth) = &server.oauth {
            if !oauth.scopes.is_empty() && agent == Agent::Codex {
                table.insert(
                    "scopes".into(),
                    toml::Value::Array(oauth.scopes.iter().map(|s| s.clone().into()).collect()),
                );
            }
            if oauth.client_id.is_some()
                || oauth.client_secret.is_some()
                || oauth.callback_port.is_some()
                || oauth.metadata_url.is_some()
            {
                warn(format!(
                    "{} has no setting for OAuth client settings; staged without them",
                    agent.display_name()
                ));
            }
        }
        if server.disabled {
            table.insert("enabled".into(), false.into());
        }
        out.insert(name.to_string(), table.into());
        insert_unless_empty(&mut secret_servers, name, secret);
    }
    if !secret_servers.is_empty() {
        let layer = secrets.config_toml.get_or_insert_with(toml::Table::new);
        layer.insert("mcp_servers".into(), secret_servers.into());
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_shapes_and_skips_unreadable_servers() {
        let mut warnings = Vec::new();
        let wrapped = json!({"mcpServers": {"a": {"command": "x", "env": {"K": "${env:TOKEN}"}}, "b": {"note": 1}}});
        let servers = parse_servers(&wrapped, "p/.mcp.json", &mut warnings);
        assert_eq!(servers.len(), 1);
        assert_eq!(servers["a"].env["K"], "${TOKEN}");
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("`b` has neither command nor url")),
            "{warnings:?}"
        );
        let bare = json!({"c": {"url": "https://x", "headersHelper": "sh", "auth": {"CLIENT_ID": "id", "scopes": ["a"]}}});
        let servers = parse_servers(&bare, "p/mcp.json", &mut warnings);
        assert_eq!(
            servers["c"].oauth.as_ref().unwrap().client_id.as_deref(),
            Some("id")
        );
        assert!(warnings.iter().any(|w| w.contains("`headersHelper`")));
    }

    #[test]
    fn later_sources_win() {
        let plugin = |name: &str, cmd: &str| MergedServer {
            name: name.into(),
            server: McpServer {
                command: Some(cmd.into()),
                ..Default::default()
            },
            source: McpSource::Plugin {
                module: "m".into(),
                file: ".mcp.json".into(),
            },
        };
        let mut manifest = IndexMap::new();
        manifest.insert(
            "a".to_string(),
            McpServer {
                command: Some("manifest".into()),
                ..Default::default()
            },
        );
        let overlay = vec![MergedServer {
            source: McpSource::DotAgents,
            ..plugin("b", "overlay")
        }];
        let mut info = Vec::new();
        let merged = merge(
            vec![plugin("a", "p"), plugin("b", "p")],
            &manifest,
            overlay,
            &mut info,
        );
        assert_eq!(merged[0].server.command.as_deref(), Some("manifest"));
        assert_eq!(merged[1].server.command.as_deref(), Some("overlay"));
        assert_eq!(info.len(), 2);
    }

    #[test]
    fn reference_syntax_per_agent() {
        assert_eq!(
            reference_syntax(Agent::Cursor, "Bearer ${T}"),
            "Bearer ${env:T}"
        );
        assert_eq!(
            reference_syntax(Agent::OpenCode, "Bearer ${T} ${x-y}"),
            "Bearer {env:T} ${x-y}"
        );
        assert_eq!(reference_syntax(Agent::Claude, "${T}"), "${T}");
    }

    #[test]
    fn templates_are_store_safe_only_when_their_text_cannot_carry_a_secret() {
        for safe in [
            "Bearer ${TOKEN}",
            "Basic ${CREDS}",
            "token ${T}",
            "Token\t${T}",
            "${USER}:${PASS}",
            "${A},${B}; ${C}",
            "${A}${B}",
        ] {
            assert!(template_is_store_safe(safe), "{safe}");
            assert_eq!(
                staged_value(safe, &[]),
                StagedValue::Template(safe.to_string())
            );
        }
        for secret in [
            "postgres://app:pw@${DB_HOST}/app",
            "Bearer sk-1_${T}",
            "Bearer ${T} 123",
            "${T:-sk-live}",
            "${not-a-name}",
            "bearer ${T}",
            "Bearerx ${T}",
            "pw\u{e9}${T}",
        ] {
            assert!(!template_is_store_safe(secret), "{secret}");
            assert_eq!(staged_value(secret, &[]), StagedValue::Secret, "{secret}");
        }
        assert_eq!(
            staged_value("${T}", &[]),
            StagedValue::Reference("T".into())
        );
        assert_eq!(staged_value("sk-live", &[]), StagedValue::Secret);
        assert_eq!(staged_value("", &[]), StagedValue::Plain(String::new()));
        assert_eq!(
            staged_value("/data/m/db", &["/data/"]),
            StagedValue::Plain("/data/m/db".into())
        );
    }

    #[test]
    fn references_expand_like_a_shell() {
        let lookup = |name: &str| match name {
            "HOST" => Some("db.internal".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        let (text, unset) = expand_references(
            "a@${HOST}/${MISSING}-${EMPTY}-${EMPTY:-d}-${MISSING:-x}-${bad-name}-${open",
            &lookup,
        );
        assert_eq!(text, "a@db.internal/--d-x-${bad-name}-${open");
        assert_eq!(unset, vec!["MISSING".to_string()]);
        assert_eq!(expand_references("sk-live", &lookup).0, "sk-live");
    }

    #[test]
    fn the_staged_form_holds_no_secret_and_changes_with_what_is_staged() {
        let server = |value: &str| McpServer {
            command: Some("node".into()),
            env: [("TOKEN".to_string(), value.to_string())]
                .into_iter()
                .collect(),
            headers: [("Authorization".to_string(), format!("Bearer {value}"))]
                .into_iter()
                .collect(),
            ..Default::default()
        };
        let root = std::path::Path::new("/data");
        let form = |value: &str| staged_form(&server(value), root).to_string();
        assert!(!form("sk-live-123").contains("sk-live-123"));
        assert!(!form("pw-1${HOST}").contains("pw-1"));
        // A literal secret's bytes do not matter; its kind, a reference's name and a store-safe
        // template's text do.
        assert_eq!(form("sk-live-123"), form("sk-live-456"));
        assert_ne!(form("sk-live-123"), form("${MY_TOKEN}"));
        assert_ne!(form("${MY_TOKEN}"), form("${OTHER}"));
        assert_ne!(form("${A}"), form("${A}:${B}"));
        assert_eq!(form("pw-1${HOST}"), form("sk-live-123"));
    }

    #[test]
    fn url_and_argument_credentials_are_given_at_launch_for_every_agent() {
        let servers = vec![
            MergedServer {
                name: "remote".into(),
                server: McpServer {
                    url: Some("https://u:pw-1@h.example/mcp".into()),
                    ..Default::default()
                },
                source: McpSource::Manifest,
            },
            MergedServer {
                name: "local".into(),
                server: McpServer {
                    command: Some("node".into()),
                    args: vec!["s.js".into(), "--api-key".into(), "k-1".into()],
                    ..Default::default()
                },
                source: McpSource::Manifest,
            },
        ];
        for agent in [Agent::Claude, Agent::Cursor, Agent::Antigravity] {
            let mut secrets = SecretLayer::default();
            let staged = render_json_servers(agent, &servers, &[], &mut Vec::new(), &mut secrets)
                .to_string();
            assert!(
                !staged.contains("pw-1") && !staged.contains("k-1"),
                "{staged}"
            );
            assert!(staged.contains("AGENTPACK_MCP_REMOTE_URL"), "{staged}");
            assert!(staged.contains("AGENTPACK_MCP_LOCAL_ARG_2"), "{staged}");
            assert_eq!(
                secrets.env["AGENTPACK_MCP_REMOTE_URL"],
                "https://u:pw-1@h.example/mcp"
            );
            assert_eq!(secrets.env["AGENTPACK_MCP_LOCAL_ARG_2"], "k-1");
        }
        let mut secrets = SecretLayer::default();
        let staged = render_opencode(&servers, &[], &mut Vec::new(), &mut secrets).to_string();
        assert!(
            staged.contains("{env:AGENTPACK_MCP_LOCAL_ARG_2}"),
            "{staged}"
        );
        assert!(
            !staged.contains("pw-1") && !staged.contains("k-1"),
            "{staged}"
        );
        for agent in [Agent::Codex, Agent::Grok] {
            let mut secrets = SecretLayer::default();
            let staged = render_toml_servers(agent, &servers, &[], &mut Vec::new(), &mut secrets)
                .to_string();
            assert!(
                !staged.contains("pw-1") && !staged.contains("k-1"),
                "{staged}"
            );
            let layer = toml::to_string(&secrets.config_toml.unwrap()).unwrap();
            assert!(layer.contains("https://u:pw-1@h.example/mcp"), "{layer}");
            assert!(
                layer.contains(r#"args = ["s.js", "--api-key", "k-1"]"#),
                "{layer}"
            );
        }
        // The generation digest sees only that they are secrets.
        let root = std::path::Path::new("/data");
        let form = staged_form(&servers[1].server, root).to_string();
        assert!(!form.contains("k-1"), "{form}");
        let mut other = servers[1].server.clone();
        other.args[2] = "k-2".into();
        assert_eq!(form, staged_form(&other, root).to_string());
        assert!(!staged_form(&servers[0].server, root)
            .to_string()
            .contains("pw-1"));
    }

    #[test]
    fn relative_cwd_runs_in_the_plugin_copy() {
        let mut server = McpServer {
            command: Some("node".into()),
            args: vec!["${CLAUDE_PLUGIN_ROOT}/start.mjs".into()],
            env: [("DATA".to_string(), "${PLUGIN_DATA}/db".to_string())]
                .into_iter()
                .collect(),
            cwd: Some("./server".into()),
            ..Default::default()
        };
        assert!(uses_plugin_root(&server));
        localize_plugin_server(&mut server, "/gen/plugin-roots/abc", "/data/m");
        assert_eq!(server.args, vec!["/gen/plugin-roots/abc/start.mjs"]);
        assert_eq!(server.env["DATA"], "/data/m/db");
        assert_eq!(server.cwd.as_deref(), Some("/gen/plugin-roots/abc/server"));
    }
}
