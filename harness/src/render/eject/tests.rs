//! The eject plan's tests: plans of hand-written generations, conflicts and merges.

use super::*;
use serde_json::json;

fn source(relative: &str, text: &str) -> SourceFile {
    SourceFile {
        relative: relative.into(),
        bytes: text.as_bytes().to_vec(),
        executable: false,
    }
}

struct Fake(BTreeMap<String, Option<Value>>);
impl ProjectState for Fake {
    fn exists(&self, path: &str) -> bool {
        self.0.contains_key(path)
    }
    fn is_real_dir(&self, _: &str) -> bool {
        true
    }
    fn json(&self, path: &str) -> Result<Option<Value>, String> {
        Ok(self.0.get(path).cloned().flatten())
    }
}

#[test]
fn generation_paths_are_rewritten_to_the_copy() {
    let files = [source(
        "plugins/agentpack-bundle/.mcp.json",
        r#"{"mcpServers":{"s":{"command":"node","args":["/store/gen/plugin-roots/ab/s.js"]}}}"#,
    )];
    let plan = plan(
        &[Agent::Claude],
        &files,
        &["/store/gen"],
        "/p/.agentpack/eject",
    );
    assert_eq!(plan.edits.len(), 1);
    assert_eq!(
        plan.edits[0].value["args"][0],
        "/p/.agentpack/eject/plugin-roots/ab/s.js"
    );
    assert_eq!(
        plan.files[0].path,
        ".agentpack/eject/plugins/agentpack-bundle/.mcp.json"
    );
}

#[test]
fn a_different_user_value_conflicts_and_an_equal_one_is_left_alone() {
    let files = [source(
        "plugins/agentpack-bundle/.mcp.json",
        r#"{"mcpServers":{"a":{"command":"x"},"b":{"command":"y"}}}"#,
    )];
    let mut plan = plan(&[Agent::Claude], &files, &[], "/e");
    let project = Fake(BTreeMap::from([(
        ".mcp.json".to_owned(),
        Some(json!({"mcpServers": {"a": {"command": "x"}, "b": {"command": "mine"}}})),
    )]));
    let conflicts = check_conflicts(&mut plan, &EjectManifest::default(), &project);
    assert_eq!(conflicts.len(), 1);
    assert_eq!(conflicts[0].what, ".mcp.json#/mcpServers/b");
    assert_eq!(plan.edits.len(), 1, "the equal server `a` needs no edit");
}

#[test]
fn apply_then_remove_gives_the_document_back() {
    let original = json!({"hooks": {"Stop": [{"x": 1}]}, "other": true});
    let edits = [
        JsonEdit {
            file: "f".into(),
            path: vec!["hooks".into(), "Stop".into()],
            kind: EditKind::Entry,
            value: json!({"y": 2}),
        },
        JsonEdit {
            file: "f".into(),
            path: vec!["hooks".into(), "PreToolUse".into()],
            kind: EditKind::Entry,
            value: json!({"z": 3}),
        },
        JsonEdit {
            file: "f".into(),
            path: vec!["attribution".into()],
            kind: EditKind::Key,
            value: json!({"commit": ""}),
        },
    ];
    let mut document = original.clone();
    for edit in &edits {
        apply_edit(&mut document, edit);
    }
    assert_eq!(document["hooks"]["PreToolUse"], json!([{"z": 3}]));
    for edit in &edits {
        assert!(remove_edit(&mut document, edit));
        prune_empty(&mut document, &edit.path, Some(&original));
    }
    assert_eq!(document, original);
}

#[test]
fn codex_servers_become_keys_of_the_project_config_toml_with_a_trust_note() {
    let files = [source(
        "codex-home/config.toml",
        "cli_auth_credentials_store = \"file\"\n\n[mcp_servers.fs]\ncommand = \"npx\"\nargs = [\"/store/gen/plugin-roots/x/s.js\"]\n\n[mcp_servers.fs.env]\nMODE = \"ro\"\n",
    )];
    let plan = plan(
        &[Agent::Codex],
        &files,
        &["/store/gen"],
        "/p/.agentpack/eject",
    );
    assert_eq!(plan.edits.len(), 1);
    assert_eq!(plan.edits[0].file, CODEX_PROJECT_CONFIG);
    assert_eq!(plan.edits[0].path, ["mcp_servers", "fs"]);
    assert_eq!(
        plan.edits[0].value,
        json!({"command": "npx", "args": ["/p/.agentpack/eject/plugin-roots/x/s.js"], "env": {"MODE": "ro"}})
    );
    assert!(plan.notes[0].contains("[projects.\"/p\"] trust_level = \"trusted\""));
    assert!(!plan.warnings.iter().any(|w| w.contains("MCP servers (")));
}

#[test]
fn codex_secret_values_are_named_never_shown() {
    let layer: toml::Table = toml::from_str(
        "[mcp_servers.api.env]\nAPI_KEY = \"sk-secret\"\n[mcp_servers.api.http_headers]\nX-Token = \"t0ken\"\n",
    )
    .unwrap();
    let warnings = codex_secret_warnings(&layer);
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("`api`"));
    assert!(warnings[0].contains("env API_KEY, header X-Token"));
    assert!(!warnings[0].contains("sk-secret") && !warnings[0].contains("t0ken"));
    assert!(codex_secret_warnings(&toml::Table::new()).is_empty());
}

#[test]
fn every_agent_whose_row_renders_secrets_is_rendered_not_only_the_first() {
    // A table where two agents keep secrets out of the generation: both are rendered.
    let renders = |agent: Agent| matches!(agent, Agent::Codex | Agent::Cursor);
    assert_eq!(
        rendering_secrets(&[Agent::Claude, Agent::Cursor, Agent::Codex], renders),
        vec![Agent::Cursor, Agent::Codex]
    );
    assert!(rendering_secrets(&[Agent::Claude], renders).is_empty());
}

#[test]
fn the_rows_say_which_agent_eject_renders_secrets_for() {
    assert_eq!(
        secrets_agents(&[Agent::Claude, Agent::Codex]),
        vec![Agent::Codex]
    );
    assert!(secrets_agents(&[Agent::Claude, Agent::Cursor]).is_empty());
    // Every agent of the table whose row renders secrets, in the order asked.
    let mut asked = Agent::ALL.to_vec();
    asked.reverse();
    let expected: Vec<Agent> = asked
        .iter()
        .copied()
        .filter(|agent| {
            agent
                .profile()
                .eject
                .as_ref()
                .is_some_and(|eject| eject.secret_warnings.is_some())
        })
        .collect();
    assert_eq!(secrets_agents(&asked), expected);
    let layer = SecretLayer {
        config_toml: Some(
            toml::from_str("[mcp_servers.api.env]\nAPI_KEY = \"sk-secret\"\n").unwrap(),
        ),
        ..SecretLayer::default()
    };
    let secrets = BTreeMap::from([(Agent::Codex, layer)]);
    let warnings = secret_warnings(&[Agent::Claude, Agent::Codex], &secrets);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("`api` (codex)") && warnings[0].contains("env API_KEY"));
    assert!(secret_warnings(&[Agent::Claude], &secrets).is_empty());
}

#[test]
fn toml_merge_keeps_the_users_text_and_unmerge_gives_it_back() {
    let original = "# my codex settings\nmodel = \"o3\" # inline\n\n[mcp_servers.mine]\ncommand = \"mine\"\n\n[profiles.x]\nmodel = \"y\"\n";
    let edit = JsonEdit {
        file: CODEX_PROJECT_CONFIG.into(),
        path: vec!["mcp_servers".into(), "fs".into()],
        kind: EditKind::Key,
        value: json!({"command": "npx", "env": {"A": "b"}}),
    };
    let merged = merge_toml(Some(original), &[], &[&edit], Some(original)).unwrap();
    assert!(merged.starts_with("# my codex settings\nmodel = \"o3\" # inline\n\n[mcp_servers.mine]\ncommand = \"mine\"\n"), "{merged}");
    let value = toml_to_json(&merged).unwrap();
    assert_eq!(value["mcp_servers"]["fs"], edit.value);
    assert_eq!(value["mcp_servers"]["mine"]["command"], "mine");
    assert_eq!(value["profiles"]["x"]["model"], "y");
    // Merging again over eject's own previous key changes nothing.
    assert_eq!(
        merge_toml(Some(&merged), &[&edit], &[&edit], Some(original)).unwrap(),
        merged
    );
    let unmerged = unmerge_toml(&merged, &[&edit], Some(original)).unwrap();
    assert_eq!(unmerged.text, original);
    assert!(unmerged.changed.is_empty());

    // In a file eject created, nothing is left.
    let created = merge_toml(None, &[], &[&edit], None).unwrap();
    let unmerged = unmerge_toml(&created, &[&edit], None).unwrap();
    assert!(unmerged.empty, "{:?}", unmerged.text);

    // A server the user changed since is left, and reported.
    let changed = created.replace("npx", "mine");
    let unmerged = unmerge_toml(&changed, &[&edit], None).unwrap();
    assert_eq!(unmerged.changed, [".codex/config.toml#/mcp_servers/fs"]);
    assert_eq!(unmerged.text, changed);
}

#[test]
fn credentials_given_at_launch_are_refused_by_server_and_field() {
    let files = [
        source(
            "plugins/agentpack-bundle/.mcp.json",
            r#"{"mcpServers":{"db":{"url":"${AGENTPACK_MCP_DB_URL}","headers":{"X":"${AGENTPACK_MCP_DB_HEADER_X}"}},"k":{"command":"n","args":["--api-key","${AGENTPACK_MCP_K_ARG_1}"]}}}"#,
        ),
        source(
            "codex-home/config.toml",
            "[mcp_servers.k]\ncommand = \"n\"\nargs = [\"--api-key\", \"${AGENTPACK_MCP_K_ARG_1}\"]\n",
        ),
        source(
            "agy/agentpack-bundle/mcp_config.json",
            r#"{"mcpServers":{"db":{"serverUrl":"${AGENTPACK_MCP_DB_URL}"}}}"#,
        ),
    ];
    let plan = plan(
        &[Agent::Claude, Agent::Codex, Agent::Antigravity],
        &files,
        &["/store/gen"],
        "/p/.agentpack/eject",
    );
    assert_eq!(plan.refusals.len(), 2, "{:?}", plan.refusals);
    assert!(plan.refusals[0].starts_with("MCP server `db`: its `url` carries credentials"));
    assert!(plan.refusals[1]
        .starts_with("MCP server `k`: `args[1]` (the value of --api-key) holds a credential"));
    // A header given at launch is a warning, as before: eject names the variable.
    let plain = plan_for(&[Agent::Claude], &files[..1]);
    assert!(plain
        .warnings
        .iter()
        .any(|w| w.contains("AGENTPACK_MCP_DB_HEADER_X")));
    let clean = [source(
        "plugins/agentpack-bundle/.mcp.json",
        r#"{"mcpServers":{"k":{"command":"n","args":["--api-key","${API_KEY}"]}}}"#,
    )];
    assert!(plan_for(&[Agent::Claude], &clean).refusals.is_empty());
}

fn plan_for(agents: &[Agent], files: &[SourceFile]) -> EjectPlan {
    plan(agents, files, &["/store/gen"], "/p/.agentpack/eject")
}

#[test]
fn opencode_and_grok_are_refused_with_their_launcher() {
    assert!(refusal(Agent::OpenCode)
        .unwrap()
        .contains("agentpack opencode"));
    assert!(refusal(Agent::Grok).unwrap().contains("terminal"));
    assert!(refusal(Agent::Cursor).is_none());
}
