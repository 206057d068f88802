//! Where each agent's ejected copy is registered in the project: one function per agent, its
//! row's [`crate::agent::Eject::register`] (the directories eject copies are the row's
//! [`crate::agent::Eject::dirs`]), plus the MCP, credential and hook merges they share. Pure: it
//! only adds files, edits and messages to the [`EjectPlan`].

use serde_json::Value;

use super::*;

/// `mcpServers.<name>` of a staged MCP file as keys of `target`.
fn merge_servers(files: &[SourceFile], source: &str, target: &str, plan: &mut EjectPlan) {
    let Some(file) = find(files, source) else {
        return;
    };
    let Some(value) = parse_json(file, plan) else {
        return;
    };
    if let Some(servers) = value.get("mcpServers").and_then(Value::as_object) {
        register_servers(servers, target, "mcpServers", plan);
    }
}

/// Each server of `servers` as the key `<table>.<name>` of `target`, once it passed the
/// credential refusal and the secret-reference warning.
fn register_servers(
    servers: &serde_json::Map<String, Value>,
    target: &str,
    table: &str,
    plan: &mut EjectPlan,
) {
    for (name, server) in servers {
        refuse_credentials(name, server, plan);
        warn_secret_references(name, server, plan);
        plan.edits.push(JsonEdit {
            file: target.to_owned(),
            path: vec![table.into(), name.clone()],
            kind: EditKind::Key,
            value: server.clone(),
        });
    }
}

/// Whether `staged` is exactly the reference to `var`, in any agent's syntax (`${VAR}`,
/// `${env:VAR}`, `{env:VAR}`).
fn is_reference_to(staged: &str, var: &str) -> bool {
    let inner = staged
        .strip_prefix("${env:")
        .or_else(|| staged.strip_prefix("${"))
        .or_else(|| staged.strip_prefix("{env:"))
        .and_then(|rest| rest.strip_suffix('}'));
    inner == Some(var)
}

/// Refuses a staged server whose `url` or an argument is given at launch because it holds a
/// credential (rendering staged it as `AGENTPACK_MCP_<SERVER>_URL` / `_ARG_<i>`).
fn refuse_credentials(name: &str, server: &Value, plan: &mut EjectPlan) {
    use crate::render::mcp::{arg_secret, secret_var, URL_SECRET};
    let url_var = secret_var(name, URL_SECRET);
    let url = ["url", "serverUrl"]
        .iter()
        .filter_map(|key| server.get(*key).and_then(Value::as_str))
        .any(|url| is_reference_to(url, &url_var));
    if url {
        push_refusal(plan, format!(
            "MCP server `{name}`: its `url` carries credentials (user:password@ before the host), which eject would write into files people commit\n  fix  write references in its definition instead, e.g. url = \"https://${{MCP_USER}}:${{MCP_PASSWORD}}@host/path\", and set those variables where your editor starts (a launcher such as `agentpack claude` gives the value at launch without eject)"
        ));
    }
    let args: Vec<&str> = server
        .get("args")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (index, arg) in args.iter().enumerate() {
        if is_reference_to(arg, &secret_var(name, &arg_secret(index))) {
            let flag = index
                .checked_sub(1)
                .and_then(|i| args.get(i))
                .filter(|flag| {
                    crate::render::credentials::is_credential_flag(flag) && !flag.contains('=')
                })
                .map(|flag| format!(" (the value of {flag})"))
                .unwrap_or_default();
            push_refusal(plan, format!(
                "MCP server `{name}`: `args[{index}]`{flag} holds a credential, which eject would write into files people commit\n  fix  write a reference in its definition instead (e.g. \"${{API_KEY}}\" or \"--api-key=${{API_KEY}}\") and set that variable where your editor starts (a launcher such as `agentpack claude` gives the value at launch without eject)"
            ));
        }
    }
}

fn push_refusal(plan: &mut EjectPlan, refusal: String) {
    if !plan.refusals.contains(&refusal) {
        plan.refusals.push(refusal);
    }
}

/// Secret-bearing values are staged as `${AGENTPACK_...}` references that a launcher fills in;
/// an editor started without the launcher must have them in its environment.
fn warn_secret_references(name: &str, server: &Value, plan: &mut EjectPlan) {
    let text = server.to_string();
    let mut names = BTreeSet::new();
    for piece in text.split("${").skip(1) {
        let var = piece.trim_start_matches("env:");
        if let Some(end) = var.find('}') {
            if var[..end].starts_with("AGENTPACK_") {
                names.insert(var[..end].to_owned());
            }
        }
    }
    if !names.is_empty() {
        plan.warnings.push(format!(
            "MCP server `{name}` reads {} from the environment; eject writes no secret values, so set them where your editor starts",
            names.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
}

/// `[mcp_servers.<name>]` of the staged Codex `config.toml` as keys of the project's
/// `.codex/config.toml`, and the note that Codex reads that file only in a trusted project.
fn merge_toml_servers(file: &SourceFile, eject_root: &str, plan: &mut EjectPlan) {
    let parsed = std::str::from_utf8(&file.bytes)
        .map_err(|error| error.to_string())
        .and_then(toml_to_json);
    let value = match parsed {
        Ok(value) => value,
        Err(error) => {
            plan.warnings.push(format!(
                "{} in the generation does not parse ({error}); its MCP servers are not registered",
                file.relative
            ));
            return;
        }
    };
    let Some(servers) = value.get("mcp_servers").and_then(Value::as_object) else {
        return;
    };
    register_servers(servers, CODEX_PROJECT_CONFIG, "mcp_servers", plan);
    if !servers.is_empty() {
        let project = eject_root
            .strip_suffix(EJECT_DIR)
            .map(|p| p.trim_end_matches('/'))
            .filter(|p| !p.is_empty())
            .unwrap_or("<project>");
        plan.notes.push(format!(
            "codex: MCP servers are in {CODEX_PROJECT_CONFIG}, which Codex reads once the project is trusted (`[projects.\"{project}\"] trust_level = \"trusted\"` in $CODEX_HOME/config.toml); eject does not change your Codex configuration"
        ));
    }
}

/// Codex's secret-bearing server values are not in the generation at all (the launcher merges
/// them into its home layer's `config.toml`): one warning per server of the launcher's secret
/// fragment (`[mcp_servers.<name>.env]`, `[mcp_servers.<name>.http_headers]`) naming what the
/// ejected server lacks. Never includes a value.
pub fn codex_secret_warnings(secret_config: &toml::Table) -> Vec<String> {
    let Some(servers) = secret_config
        .get("mcp_servers")
        .and_then(toml::Value::as_table)
    else {
        return Vec::new();
    };
    let mut warnings = Vec::new();
    for (name, server) in servers {
        let mut names = Vec::new();
        for (section, label) in [("env", "env"), ("http_headers", "header")] {
            if let Some(values) = server.get(section).and_then(toml::Value::as_table) {
                names.extend(values.keys().map(|key| format!("{label} {key}")));
            }
        }
        if !names.is_empty() {
            warnings.push(format!(
                "MCP server `{name}` (codex): eject writes no secret values, so {CODEX_PROJECT_CONFIG} lacks {}; give them to Codex yourself (its `env_vars` and `env_http_headers` read them from the environment Codex starts in)",
                names.join(", ")
            ));
        }
    }
    warnings
}

/// [`codex_secret_warnings`] of the launcher's fragment of Codex's layer (Codex's
/// [`crate::agent::Eject::secret_warnings`]).
pub(crate) fn codex_layer_secret_warnings(layer: &crate::plan::SecretLayer) -> Vec<String> {
    layer
        .config_toml
        .as_ref()
        .map(codex_secret_warnings)
        .unwrap_or_default()
}

/// Each event's entries of `{"hooks": {event: [...]}}` as array entries of `target`.
fn merge_hooks(value: &Value, target: &str, plan: &mut EjectPlan) {
    if let Some(events) = value.get("hooks").and_then(Value::as_object) {
        for (event, entries) in events {
            for entry in entries.as_array().into_iter().flatten() {
                plan.edits.push(JsonEdit {
                    file: target.to_owned(),
                    path: vec!["hooks".into(), event.clone()],
                    kind: EditKind::Entry,
                    value: entry.clone(),
                });
            }
        }
    }
}

/// Points Codex hook commands that name their spec relative to `CODEX_HOME` (which an editor's
/// Codex sets to the user's own home) at the ejected copy instead.
fn anchor_codex_specs(value: &mut Value, eject_root: &str) {
    let marker = format!("--spec {}", crate::render::hooks::CODEX_HOME_SPEC);
    let Some(events) = value.get_mut("hooks").and_then(Value::as_object_mut) else {
        return;
    };
    for groups in events.values_mut() {
        for group in groups.as_array_mut().into_iter().flatten() {
            let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
                continue;
            };
            for handler in handlers {
                let Some(command) = handler.get("command").and_then(Value::as_str) else {
                    continue;
                };
                if let Some((program, relative)) = command.split_once(&marker) {
                    let spec = format!("{eject_root}/{}/{relative}", staged_root(Agent::Codex));
                    handler["command"] = Value::String(format!(
                        "{program}--spec {}",
                        crate::render::hooks::shell_quote(&spec)
                    ));
                }
            }
        }
    }
}

/// Claude Code (after the row's `.claude/` skills, commands and agents): `.mcp.json`,
/// `.claude/settings.json`.
pub(crate) fn claude(files: &[SourceFile], _eject_root: &str, plan: &mut EjectPlan) {
    let bundle = staged_root(Agent::Claude);
    merge_servers(files, &format!("{bundle}/.mcp.json"), ".mcp.json", plan);
    if let Some(file) = find(files, &format!("{bundle}/hooks/hooks.json")) {
        if let Some(value) = parse_json(file, plan) {
            merge_hooks(&value, ".claude/settings.json", plan);
        }
    }
    if let Some(file) = find(files, &format!("{bundle}/agentpack-settings.json")) {
        if let Some(Value::Object(settings)) = parse_json(file, plan) {
            for (key, value) in settings {
                match value {
                    Value::Array(items) => {
                        for item in items {
                            plan.edits.push(JsonEdit {
                                file: ".claude/settings.json".into(),
                                path: vec![key.clone()],
                                kind: EditKind::Entry,
                                value: item,
                            });
                        }
                    }
                    value => plan.edits.push(JsonEdit {
                        file: ".claude/settings.json".into(),
                        path: vec![key],
                        kind: EditKind::Key,
                        value,
                    }),
                }
            }
        }
    }
    if find(files, &format!("{bundle}/.lsp.json")).is_some() {
        plan.warnings.push(
            "claude: language servers are read from plugins only; .lsp.json stays in the ejected copy and is not registered".into(),
        );
    }
}

/// Cursor (after the row's `.cursor/` rules, commands, agents and skills): `.cursor/mcp.json`,
/// `.cursor/hooks.json`.
pub(crate) fn cursor(files: &[SourceFile], _eject_root: &str, plan: &mut EjectPlan) {
    let bundle = crate::render::cursor::BUNDLE;
    merge_servers(
        files,
        &format!("{bundle}/mcp.json"),
        ".cursor/mcp.json",
        plan,
    );
    if let Some(file) = find(files, &format!("{bundle}/hooks/hooks.json")) {
        if let Some(value) = parse_json(file, plan) {
            if let Some(version) = value.get("version") {
                plan.edits.push(JsonEdit {
                    file: ".cursor/hooks.json".into(),
                    path: vec!["version".into()],
                    kind: EditKind::Key,
                    value: version.clone(),
                });
            }
            merge_hooks(&value, ".cursor/hooks.json", plan);
        }
    }
}

/// Codex (after the row's `.agents/skills/` and `.codex/agents/`): `.codex/config.toml`,
/// `.codex/hooks.json`.
pub(crate) fn codex(files: &[SourceFile], eject_root: &str, plan: &mut EjectPlan) {
    if let Some(file) = find(files, "codex-home/config.toml") {
        merge_toml_servers(file, eject_root, plan);
    }
    // Hooks (and custom agents, copied by the row's `dirs`): Codex reads a trusted project's
    // `.codex/hooks.json` (Claude Code's hook format) and `.codex/agents/<name>.toml`, like its
    // MCP servers (checked with Codex 0.171.0: `hooks/list` reports them with source `project`).
    if let Some(file) = find(files, "codex-home/hooks.json") {
        if let Some(mut value) = parse_json(file, plan) {
            anchor_codex_specs(&mut value, eject_root);
            merge_hooks(&value, CODEX_PROJECT_HOOKS, plan);
            plan.warnings.push(format!(
                "codex: hooks are in {CODEX_PROJECT_HOOKS}; Codex runs them once the project is trusted and you have reviewed and trusted each hook in Codex"
            ));
        }
    }
}

/// Antigravity: the bundle as a real directory under `.agents/plugins/`.
pub(crate) fn antigravity(files: &[SourceFile], _eject_root: &str, plan: &mut EjectPlan) {
    let target = ".agents/plugins/agentpack-bundle";
    let config = format!("{}/mcp_config.json", staged_root(Agent::Antigravity));
    if let Some(value) = find(files, &config).and_then(|file| parse_json(file, plan)) {
        if let Some(servers) = value.get("mcpServers").and_then(Value::as_object) {
            for (name, server) in servers {
                refuse_credentials(name, server, plan);
            }
        }
    }
    copy_dir(files, staged_root(Agent::Antigravity), target, false, plan);
    plan.owned_dirs.push(target.to_owned());
}
