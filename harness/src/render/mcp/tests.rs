//! Tests of MCP parsing, staging and rendering.

use serde_json::json;

use super::json::reference_syntax;
use super::*;
use crate::agent::Agent;
use crate::plan::SecretLayer;

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
        let staged =
            render_json_servers(agent, &servers, &[], &mut Vec::new(), &mut secrets).to_string();
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
        let staged =
            render_toml_servers(agent, &servers, &[], &mut Vec::new(), &mut secrets).to_string();
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

#[test]
fn the_reference_scanner_replaces_what_it_is_given_and_keeps_the_rest() {
    let angle = |inner: &str| staged::is_var_name(inner).then(|| format!("<{inner}>"));
    assert_eq!(
        map_references("a ${X} b ${not-a-name} c ${Y", angle),
        "a <X> b ${not-a-name} c ${Y"
    );
    // A refused `${` is kept and the scan goes on right after it.
    assert_eq!(map_references("${${X}}", angle), "${<X>}");
    assert_eq!(
        map_references("x${A}y${B:-d}z${", |_| Some(String::new())),
        "xyz${"
    );
}
