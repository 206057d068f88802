//! MCP servers in the TOML shape of Codex's and Grok's `config.toml` (`[mcp_servers.<name>]`),
//! with secret-bearing values split into the [`SecretLayer`]'s TOML fragment.

use super::staged::is_var_name;
use super::*;
use crate::agent::{Agent, OAuthFields};
use crate::plan::SecretLayer;

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
                    crate::render::credentials::redact_url_userinfo(value)
                ));
            }
        };
        if let Some(command) = &server.command {
            no_interpolation(command, &mut warn);
            table.insert("command".into(), command.clone().into());
            if !server.args.is_empty() {
                // An argument holding a credential is staged as the name of the variable that
                // would carry it; the home layer's `config.toml` gets the arguments as written.
                let credentials = crate::render::credentials::credential_args(&server.args);
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
            if crate::render::credentials::has_url_credentials(url) {
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
            if agent.profile().mcp.cwd {
                table.insert("cwd".into(), cwd.clone().into());
            } else {
                warn(format!(
                    "{} has no setting for cwd; staged without it",
                    agent.display_name()
                ));
            }
        }
        if let Some(oauth) = &server.oauth {
            if !oauth.scopes.is_empty() && agent.profile().mcp.oauth == OAuthFields::Scopes {
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
