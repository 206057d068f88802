//! Parsing `[mcp]`: MCP server definitions ([`McpServer`]) and their `[oauth]` tables.
//!
//! Must never accept a field it does not know, and never resolve or start a server.

use indexmap::IndexMap;
use toml::Value;

use super::*;

pub(super) const MCP_FIELDS: &str =
    "type, command, args, env, url, disabled, headers, cwd and [oauth]";

pub(super) fn parse_mcp(
    ctx: &Ctx<'_>,
    value: &Value,
) -> Result<IndexMap<String, McpServer>, ManifestError> {
    let mut out = IndexMap::new();
    for (key, dotted, value) in ctx.entries("mcp", value)? {
        if key != "servers" {
            return Err(ctx.invalid(
                &dotted,
                "unknown key; servers are declared as [mcp.servers.<name>]",
            ));
        }
        for (name, dotted, value) in ctx.entries("mcp.servers", value)? {
            if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
                return Err(ctx.invalid(
                    &dotted,
                    "a server name must be non-empty and have no spaces",
                ));
            }
            out.insert(name.to_owned(), parse_server(ctx, &dotted, value)?);
        }
    }
    Ok(out)
}

pub(super) fn parse_server(
    ctx: &Ctx<'_>,
    dotted: &str,
    value: &Value,
) -> Result<McpServer, ManifestError> {
    let mut server = McpServer::default();
    for (field, sub, v) in ctx.entries(dotted, value)? {
        match field {
            "type" => server.server_type = Some(ctx.string(&sub, v)?),
            "command" => server.command = Some(ctx.string(&sub, v)?),
            "args" => server.args = ctx.strings(&sub, v)?,
            "env" => server.env = ctx.string_map(&sub, v)?,
            "url" => server.url = Some(ctx.string(&sub, v)?),
            "disabled" => {
                server.disabled = v
                    .as_bool()
                    .ok_or_else(|| ctx.invalid(&sub, "expected true or false"))?;
            }
            "headers" => server.headers = ctx.string_map(&sub, v)?,
            "cwd" => server.cwd = Some(ctx.string(&sub, v)?),
            "oauth" => server.oauth = Some(parse_oauth(ctx, &sub, v)?),
            other => {
                let hint = match other {
                    "environment" => " (did you mean `env`?)",
                    "arguments" => " (did you mean `args`?)",
                    "transport" => " (did you mean `type`?)",
                    _ => "",
                };
                return Err(ctx.invalid(
                    &sub,
                    format!("unknown field `{other}`; an MCP server accepts {MCP_FIELDS}{hint}"),
                ));
            }
        }
    }
    if server.command.is_none() && server.url.is_none() {
        return Err(ctx.invalid(
            dotted,
            "a server needs `command` (a local process) or `url` (a remote server)",
        ));
    }
    Ok(server)
}

pub(super) fn parse_oauth(
    ctx: &Ctx<'_>,
    dotted: &str,
    value: &Value,
) -> Result<McpOAuth, ManifestError> {
    let mut oauth = McpOAuth::default();
    for (field, sub, v) in ctx.entries(dotted, value)? {
        match field {
            "client_id" => oauth.client_id = Some(ctx.string(&sub, v)?),
            "client_secret" => oauth.client_secret = Some(ctx.string(&sub, v)?),
            "callback_port" => {
                let port = v
                    .as_integer()
                    .and_then(|n| u16::try_from(n).ok())
                    .ok_or_else(|| {
                        ctx.invalid(&sub, "expected a port number between 0 and 65535")
                    })?;
                oauth.callback_port = Some(port);
            }
            "scopes" => oauth.scopes = ctx.strings(&sub, v)?,
            "metadata_url" => oauth.metadata_url = Some(ctx.string(&sub, v)?),
            other => {
                let hint = if other == "clientId" {
                    " (write `client_id`)"
                } else {
                    ""
                };
                return Err(ctx.invalid(
                    &sub,
                    format!("unknown field `{other}`; oauth accepts client_id, client_secret, callback_port, scopes and metadata_url{hint}"),
                ));
            }
        }
    }
    Ok(oauth)
}
