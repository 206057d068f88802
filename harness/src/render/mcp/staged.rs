//! Which values of a server may enter the store: `${VAR}` templates and plugin paths are staged,
//! secrets are referenced by a variable the launcher sets ([`StagedValue`]); the secret variable
//! names; expanding references at launch.

use serde_json::{json, Value};

use super::*;

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
    map_references(value, |inner| is_var_name(inner).then(|| " ".to_owned()))
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
/// ([`crate::render::credentials::credential_args`]) only as `["secret"]`, the others as written.
pub fn staged_args(args: &[String]) -> Value {
    let credentials = crate::render::credentials::credential_args(args);
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
    if crate::render::credentials::has_url_credentials(url) {
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
    let mut unset = Vec::new();
    let out = map_references(text, |inner| {
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if !is_var_name(name) {
            return None;
        }
        Some(
            match (
                lookup(name).filter(|v| !v.is_empty() || default.is_none()),
                default,
            ) {
                (Some(value), _) => value,
                (None, Some(default)) => default.to_owned(),
                (None, None) => {
                    unset.push(name.to_string());
                    String::new()
                }
            },
        )
    });
    (out, unset)
}

/// The one `${...}` scanner: `text` with each `${<inner>}` (up to the first `}` after it)
/// replaced by what `replace` answers for `<inner>`. `None` keeps that `${` as written, and the
/// scan goes on right after it; text outside references, and a `${` never closed, stay as they are.
pub(crate) fn map_references(
    text: &str,
    mut replace: impl FnMut(&str) -> Option<String>,
) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after
            .find('}')
            .and_then(|end| Some((end, replace(&after[..end])?)))
        {
            Some((end, replacement)) => {
                out.push_str(&replacement);
                rest = &after[end + 1..];
            }
            None => {
                out.push_str("${");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

pub(super) fn is_var_name(name: &str) -> bool {
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
