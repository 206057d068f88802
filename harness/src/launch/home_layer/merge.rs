//! Home layers: pure functions that combine a generation's config fragments with the user's own
//! configuration, for the writable per-user homes the launchers prepare outside the store.
//!
//! Each function takes the user's file as text (or nothing when the user has none) and the
//! generation's fragment, and returns the text to write; the caller does the reading, writing and
//! permissions (0600 when a [`SecretLayer`] was merged in). Formatting and comments of the user's
//! TOML are kept (`toml_edit`). Layering follows Staging and Bundles (user config first, pack
//! content over it) except where a guide says otherwise: Cursor's user MCP entries win, and a user
//! `[features] lsp_tools` or `sqlite_home` is kept.

use serde_json::Value;
use toml_edit::{DocumentMut, Item, Table};

use crate::plan::SecretLayer;

/// A user file that cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    #[error("cannot read {what} as TOML: {message}; fix the file or move it aside, then run `agentpack sync`")]
    Toml { what: String, message: String },
    #[error("cannot read {what} as JSON: {message}; fix the file or move it aside, then run `agentpack sync`")]
    Json { what: String, message: String },
}

fn parse_toml(text: &str, what: &str) -> Result<DocumentMut, HomeError> {
    text.parse::<DocumentMut>()
        .map_err(|error| HomeError::Toml {
            what: what.to_string(),
            message: error.to_string(),
        })
}

fn table_document(table: &toml::Table, what: &str) -> Result<DocumentMut, HomeError> {
    parse_toml(&toml::to_string(table).unwrap_or_default(), what)
}

/// Deep-merges `source` into `target`: tables merge key by key, anything else replaces.
fn merge_item(target: &mut Item, source: &Item) {
    match (target.as_table_like_mut(), source.as_table_like()) {
        (Some(target_table), Some(source_table)) => {
            for (key, value) in source_table.iter() {
                match target_table.get_mut(key) {
                    Some(existing) => merge_item(existing, value),
                    None => {
                        target_table.insert(key, value.clone());
                    }
                }
            }
        }
        _ => *target = source.clone(),
    }
}

fn ensure_table<'a>(doc: &'a mut DocumentMut, key: &str) -> &'a mut Table {
    if !doc.as_table().get(key).is_some_and(Item::is_table) {
        let mut table = Table::new();
        table.set_implicit(true);
        doc[key] = Item::Table(table);
    }
    doc[key].as_table_mut().expect("just ensured a table")
}

/// Merges the pack's `[mcp_servers]` (each replacing a user server of the same name) and then the
/// secret layer's values into them.
fn merge_servers(
    doc: &mut DocumentMut,
    fragment: &DocumentMut,
    secrets: &SecretLayer,
) -> Result<(), HomeError> {
    let secrets = secrets
        .config_toml
        .as_ref()
        .map(|table| table_document(table, "the MCP secret layer"))
        .transpose()?;
    if let Some(servers) = fragment.get("mcp_servers").and_then(Item::as_table_like) {
        let target = ensure_table(doc, "mcp_servers");
        for (name, server) in servers.iter() {
            target.insert(name, server.clone());
        }
    }
    if let Some(secret_servers) = secrets.as_ref().and_then(|s| s.get("mcp_servers")) {
        let target = doc
            .entry("mcp_servers")
            .or_insert(Item::Table(Table::new()));
        merge_item(target, secret_servers);
    }
    Ok(())
}

/// Codex's `config.toml`: the user's file with legacy `commit_attribution` stripped (unless
/// attribution is kept), the generation's fragment (`codex-home/config.toml`) over it, the secret
/// server values merged in, and `sqlite_home` defaulted when the user did not set it.
pub fn codex_config(
    user: Option<&str>,
    fragment: &str,
    secrets: &SecretLayer,
    keep_attribution: bool,
    default_sqlite_home: Option<&str>,
) -> Result<String, HomeError> {
    let mut doc = parse_toml(user.unwrap_or(""), "~/.codex/config.toml")?;
    if !keep_attribution {
        doc.remove("commit_attribution");
    }
    let fragment = parse_toml(fragment, "codex-home/config.toml")?;
    for (key, value) in fragment.iter() {
        if key != "mcp_servers" {
            doc.insert(key, value.clone());
        }
    }
    merge_servers(&mut doc, &fragment, secrets)?;
    if let Some(home) = default_sqlite_home {
        if doc.get("sqlite_home").is_none() {
            doc.insert("sqlite_home", toml_edit::value(home));
        }
    }
    Ok(doc.to_string())
}

/// Grok's `config.toml`: the user's file, `agentpack-bundle` added to `[plugins] enabled`, the pack's
/// `[mcp_servers]` and secrets merged, and `[features] lsp_tools` set unless the user set it.
pub fn grok_config(
    user: Option<&str>,
    fragment: &str,
    secrets: &SecretLayer,
) -> Result<String, HomeError> {
    let mut doc = parse_toml(user.unwrap_or(""), "~/.grok/config.toml")?;
    let fragment = parse_toml(fragment, "grok/config.fragment.toml")?;
    if let Some(enabled) = fragment
        .get("plugins")
        .and_then(|p| p.get("enabled"))
        .and_then(Item::as_array)
    {
        let plugins = ensure_table(&mut doc, "plugins");
        let list = plugins
            .entry("enabled")
            .or_insert(toml_edit::value(toml_edit::Array::new()));
        if let Some(array) = list.as_array_mut() {
            for name in enabled.iter() {
                if !array
                    .iter()
                    .any(|existing| existing.as_str() == name.as_str())
                {
                    array.push(name.clone());
                }
            }
        }
    }
    if let Some(features) = fragment.get("features").and_then(Item::as_table_like) {
        let target = ensure_table(&mut doc, "features");
        for (key, value) in features.iter() {
            if !target.contains_key(key) {
                target.insert(key, value.clone());
            }
        }
    }
    merge_servers(&mut doc, &fragment, secrets)?;
    Ok(doc.to_string())
}

fn parse_json(text: Option<&str>, what: &str) -> Result<Value, HomeError> {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(Value::Object(serde_json::Map::new())),
        Some(text) => serde_json::from_str(text).map_err(|error| HomeError::Json {
            what: what.to_string(),
            message: error.to_string(),
        }),
    }
}

fn object(value: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(serde_json::Map::new());
    }
    match value {
        Value::Object(map) => map,
        _ => unreachable!("just made an object"),
    }
}

/// Cursor's fake-home `mcp.json`: the pack's servers with the user's `~/.cursor/mcp.json` over
/// them (user entries win).
pub fn cursor_mcp(user: Option<&str>, pack: &str) -> Result<String, HomeError> {
    let user = parse_json(user, "~/.cursor/mcp.json")?;
    let mut merged = parse_json(Some(pack), "cursor/agentpack-bundle/mcp.json")?;
    let servers = object(
        object(&mut merged)
            .entry("mcpServers")
            .or_insert(Value::Null),
    )
    .clone();
    let mut out = servers;
    if let Some(Value::Object(user_servers)) = user.get("mcpServers") {
        for (name, server) in user_servers {
            out.insert(name.clone(), server.clone());
        }
    }
    object(&mut merged).insert("mcpServers".into(), Value::Object(out));
    Ok(crate::json_string(&merged))
}

/// Cursor's fake-home `cli-config.json`: the user's file with the pack's settings over it.
pub fn cursor_cli_config(user: Option<&str>, pack: &str) -> Result<String, HomeError> {
    let mut merged = parse_json(user, "~/.cursor/cli-config.json")?;
    let pack = parse_json(Some(pack), "cursor/cli-config.json")?;
    deep_merge_json(&mut merged, &pack);
    Ok(crate::json_string(&merged))
}

fn deep_merge_json(target: &mut Value, source: &Value) {
    match (target, source) {
        (Value::Object(target), Value::Object(source)) => {
            for (key, value) in source {
                match target.get_mut(key) {
                    Some(existing) => deep_merge_json(existing, value),
                    None => {
                        target.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (target, source) => *target = source.clone(),
    }
}

/// OpenCode's `opencode.json`: the user's config with the pack's `mcp` and `lsp` servers over it,
/// the pack's instructions appended, and the pack's other keys (`permission` under `--yolo`) set.
pub fn opencode_config(user: Option<&str>, pack: &str) -> Result<String, HomeError> {
    let mut merged = parse_json(user, "~/.config/opencode/opencode.json")?;
    let pack = parse_json(Some(pack), "opencode/opencode.json")?;
    let target = object(&mut merged);
    if let Value::Object(pack) = pack {
        for (key, value) in pack {
            match key.as_str() {
                "mcp" | "lsp" => {
                    let entry = object(target.entry(key).or_insert(Value::Null));
                    if let Value::Object(servers) = value {
                        entry.extend(servers);
                    }
                }
                "instructions" => {
                    let entry = target.entry(key).or_insert(Value::Array(Vec::new()));
                    if !entry.is_array() {
                        *entry = Value::Array(Vec::new());
                    }
                    if let (Value::Array(list), Value::Array(added)) = (entry, value) {
                        for item in added {
                            if !list.contains(&item) {
                                list.push(item);
                            }
                        }
                    }
                }
                _ => {
                    target.insert(key, value);
                }
            }
        }
    }
    Ok(crate::json_string(&merged))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> SecretLayer {
        let mut layer = SecretLayer::default();
        let table: toml::Table =
            toml::from_str("[mcp_servers.retrieval.env]\nAPI_KEY = \"sk-1\"\n").unwrap();
        layer.config_toml = Some(table);
        layer
    }

    #[test]
    fn codex_config_keeps_user_settings_and_adds_the_pack() {
        let user = "# mine\nmodel = \"gpt-5\"\ncommit_attribution = \"x\"\n\n[mcp_servers.mine]\ncommand = \"mine\"\n\n[mcp_servers.retrieval]\ncommand = \"old\"\n";
        let fragment = "cli_auth_credentials_store = \"file\"\n\n[mcp_servers.retrieval]\ncommand = \"uvx\"\nargs = [\"mcp-retrieval\"]\n";
        let out = codex_config(
            Some(user),
            fragment,
            &secrets(),
            false,
            Some("/home/u/.codex"),
        )
        .unwrap();
        let parsed: toml::Table = toml::from_str(&out).unwrap();
        assert!(out.starts_with("# mine\n"), "{out}");
        assert!(parsed.get("commit_attribution").is_none());
        assert_eq!(parsed["model"].as_str(), Some("gpt-5"));
        assert_eq!(parsed["cli_auth_credentials_store"].as_str(), Some("file"));
        assert_eq!(parsed["sqlite_home"].as_str(), Some("/home/u/.codex"));
        let servers = parsed["mcp_servers"].as_table().unwrap();
        assert_eq!(servers["mine"]["command"].as_str(), Some("mine"));
        assert_eq!(servers["retrieval"]["command"].as_str(), Some("uvx"));
        assert_eq!(
            servers["retrieval"]["env"]["API_KEY"].as_str(),
            Some("sk-1")
        );
        let kept = codex_config(Some(user), "", &SecretLayer::default(), true, None).unwrap();
        assert!(kept.contains("commit_attribution"));
        assert!(codex_config(
            Some("not = = toml"),
            "",
            &SecretLayer::default(),
            false,
            None
        )
        .unwrap_err()
        .to_string()
        .contains("~/.codex/config.toml"));
    }

    #[test]
    fn grok_config_enables_the_bundle_and_respects_user_features() {
        let user = "[plugins]\nenabled = [\"other\"]\n\n[features]\nlsp_tools = false\n";
        let fragment = "[plugins]\nenabled = [\"agentpack-bundle\"]\n\n[features]\nlsp_tools = true\n\n[mcp_servers.retrieval]\ncommand = \"uvx\"\n";
        let out = grok_config(Some(user), fragment, &secrets()).unwrap();
        let parsed: toml::Table = toml::from_str(&out).unwrap();
        let enabled: Vec<&str> = parsed["plugins"]["enabled"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert_eq!(enabled, vec!["other", "agentpack-bundle"]);
        assert_eq!(parsed["features"]["lsp_tools"].as_bool(), Some(false));
        assert_eq!(
            parsed["mcp_servers"]["retrieval"]["env"]["API_KEY"].as_str(),
            Some("sk-1")
        );
        let fresh = grok_config(None, fragment, &SecretLayer::default()).unwrap();
        let parsed: toml::Table = toml::from_str(&fresh).unwrap();
        assert_eq!(parsed["features"]["lsp_tools"].as_bool(), Some(true));
    }

    #[test]
    fn cursor_user_servers_win_and_attribution_is_forced() {
        let out = cursor_mcp(
            Some(r#"{"mcpServers": {"a": {"command": "user"}}}"#),
            r#"{"mcpServers": {"a": {"command": "pack"}, "b": {"command": "pack"}}}"#,
        )
        .unwrap();
        let parsed: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(parsed["mcpServers"]["a"]["command"], "user");
        assert_eq!(parsed["mcpServers"]["b"]["command"], "pack");
        let config = cursor_cli_config(
            Some(r#"{"attribution": {"attributeCommitsToAgent": true}, "editor": {"vimMode": true}}"#),
            r#"{"attribution": {"attributeCommitsToAgent": false, "attributePRsToAgent": false}}"#,
        )
        .unwrap();
        let parsed: Value = serde_json::from_str(&config).unwrap();
        assert_eq!(parsed["attribution"]["attributeCommitsToAgent"], false);
        assert_eq!(parsed["editor"]["vimMode"], true);
    }

    #[test]
    fn opencode_config_merges_servers_and_instructions() {
        let out = opencode_config(
            Some(r#"{"provider": {"x": {}}, "mcp": {"mine": {"type": "local"}}, "instructions": ["a.md"]}"#),
            r#"{"$schema": "s", "mcp": {"pack": {"type": "remote"}}, "instructions": ["b.md"], "permission": "allow"}"#,
        )
        .unwrap();
        let parsed: Value = serde_json::from_str(&out).unwrap();
        assert!(parsed["provider"].is_object());
        assert!(parsed["mcp"]["mine"].is_object() && parsed["mcp"]["pack"].is_object());
        assert_eq!(parsed["instructions"], serde_json::json!(["a.md", "b.md"]));
        assert_eq!(parsed["permission"], "allow");
    }
}
