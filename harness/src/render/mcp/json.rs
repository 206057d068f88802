//! MCP servers in the JSON shapes: Claude Code's and Cursor's `mcpServers`, Antigravity's
//! `mcp_config.json`, OpenCode's `mcp` map. What differs between them is the agent's
//! [`crate::agent::Mcp`] row (reference syntax, `type`, URL key, `cwd`, OAuth fields).

use serde_json::{json, Map, Value};

use super::staged::{is_var_name, map_references};
use super::*;
use crate::agent::{Agent, OAuthFields, ReferenceSyntax};
use crate::plan::SecretLayer;

/// Rewrites `${VAR}` references into an agent's interpolation syntax.
pub(super) fn reference_syntax(agent: Agent, text: &str) -> String {
    match agent.profile().mcp.references {
        ReferenceSyntax::DollarEnv => text.replace("${", "${env:"),
        ReferenceSyntax::BraceEnv => map_references(text, |inner| {
            is_var_name(inner).then(|| format!("{{env:{inner}}}"))
        }),
        ReferenceSyntax::Dollar => text.to_string(),
    }
}

pub(super) struct Ctx<'a> {
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
            // A secret template is kept as written: the launcher expands it at each launch.
            StagedValue::Secret => self.given_at_launch(value, what),
        }
    }

    /// A command: not secret, references converted to the agent's syntax.
    fn interpolated_plain(&mut self, value: &str) -> String {
        reference_syntax(self.agent, value)
    }

    /// A credential in a URL or an argument ([`crate::render::credentials`]): kept as written in the
    /// secret layer as `AGENTPACK_MCP_<SERVER>_<WHAT>` (the launcher expands its references at
    /// each launch) and staged as a reference to that variable.
    fn given_at_launch(&mut self, value: &str, what: &str) -> String {
        let var = secret_var(self.name, what);
        self.secrets.env.insert(var.clone(), value.to_string());
        reference_syntax(self.agent, &format!("${{{var}}}"))
    }

    /// A URL: staged with references in the agent's syntax, or given at launch when it carries
    /// userinfo ([`crate::render::credentials::has_url_credentials`]).
    fn interpolated_url(&mut self, url: &str) -> String {
        if crate::render::credentials::has_url_credentials(url) {
            self.given_at_launch(url, URL_SECRET)
        } else {
            reference_syntax(self.agent, url)
        }
    }

    /// Arguments: staged with references in the agent's syntax; each one that holds a credential
    /// ([`crate::render::credentials::credential_args`]) is given at launch.
    fn interpolated_args(&mut self, args: &[String]) -> Vec<String> {
        let credentials = crate::render::credentials::credential_args(args);
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
    let fields = &agent.profile().mcp;
    let mut object = Map::new();
    if server.disabled && !fields.stages_disabled {
        ctx.warnings.push(format!(
            "MCP server `{}` is disabled; not staged for {}",
            ctx.name,
            agent.display_name()
        ));
        return None;
    }
    let remote = server.command.is_none();
    if let Some(kind) = &server.server_type {
        if fields.writes_type {
            object.insert("type".into(), json!(kind));
        }
    } else if let Some(kind) = fields.default_remote_type.filter(|_| remote) {
        object.insert("type".into(), json!(kind));
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
        object.insert(fields.url_key.into(), json!(ctx.interpolated_url(url)));
    }
    if !server.headers.is_empty() {
        object.insert("headers".into(), ctx.interpolated_headers(&server.headers));
    }
    if let Some(cwd) = &server.cwd {
        if fields.cwd {
            object.insert("cwd".into(), json!(cwd));
        } else {
            ctx.skip("cwd");
        }
    }
    if let Some(oauth) = &server.oauth {
        match fields.oauth {
            OAuthFields::ClaudeCode => {
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
            OAuthFields::Cursor => {
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
            OAuthFields::Scopes | OAuthFields::None => ctx.skip("OAuth client settings"),
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
