//! Package roots, layout normalization and marketplace catalogs.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use agentpack_builders::github::RepoId;
use agentpack_builders::marketplace::{find_plugin, parse_catalog, CatalogError, PluginSource};
use agentpack_builders::normalize::{
    is_package_root, normalize_package, package_kind, package_name, NormalizeContext,
    NormalizeError,
};

fn write(root: &Path, relative: &str, text: &str) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn read(root: &Path, relative: &str) -> String {
    std::fs::read_to_string(root.join(relative)).unwrap()
}

fn ctx(module: &str) -> NormalizeContext<'_> {
    NormalizeContext {
        module,
        ..Default::default()
    }
}

#[test]
fn plugin_manifest_stubs_and_legacy_mcp_json() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    write(
        p,
        ".claude-plugin/plugin.json",
        r#"{"name":"hookify","version":"1.0.0","description":"Hooks","commands":"./cmds"}"#,
    );
    write(p, ".mcp.json", r#"{"mcpServers":{}}"#);
    assert!(is_package_root(p));
    let report = normalize_package(p, &ctx("github.com/acme/hookify")).unwrap();
    assert_eq!(
        report.added,
        vec![
            ".cursor-plugin/plugin.json",
            ".codex-plugin/plugin.json",
            "mcp.json"
        ]
    );
    let stub =
        "{\n  \"name\": \"hookify\",\n  \"version\": \"1.0.0\",\n  \"description\": \"Hooks\"\n}\n";
    assert_eq!(read(p, ".cursor-plugin/plugin.json"), stub);
    assert_eq!(read(p, ".codex-plugin/plugin.json"), stub);
    assert_eq!(read(p, "mcp.json"), r#"{"mcpServers":{}}"#);
    assert_eq!(
        read(p, ".claude-plugin/plugin.json"),
        r#"{"name":"hookify","version":"1.0.0","description":"Hooks","commands":"./cmds"}"#
    );
    assert_eq!(package_kind(p), "plugin");
    assert_eq!(package_name(p).as_deref(), Some("hookify"));
    // Idempotent: nothing more to add.
    assert!(normalize_package(p, &ctx("m")).unwrap().added.is_empty());
}

#[test]
fn a_skill_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "SKILL.md",
        "---\nname: canvas-design\n---\nbody",
    );
    assert!(normalize_package(dir.path(), &ctx("m"))
        .unwrap()
        .added
        .is_empty());
    assert_eq!(package_kind(dir.path()), "skill");
    assert_eq!(package_name(dir.path()).as_deref(), Some("canvas-design"));
    let empty = tempfile::tempdir().unwrap();
    assert!(!is_package_root(empty.path()));
}

fn multi_provider(p: &Path, cursor_name: &str) {
    write(
        p,
        ".claude-plugin/marketplace.json",
        r#"{"name":"m","plugins":[{"name":"acme","source":"./providers/claude/plugin"}]}"#,
    );
    write(
        p,
        ".cursor-plugin/marketplace.json",
        r#"{"name":"m","plugins":[{"name":"acme","source":"./providers/cursor/plugin"}]}"#,
    );
    write(
        p,
        ".agents/plugins/marketplace.json",
        r#"{"name":"m","plugins":[{"name":"acme","source":{"source":"local","path":"./providers/codex/plugin"}}]}"#,
    );
    write(
        p,
        "providers/claude/plugin/.claude-plugin/plugin.json",
        r#"{"name":"acme"}"#,
    );
    write(p, "providers/claude/plugin/skills/a/SKILL.md", "claude a");
    write(
        p,
        "providers/cursor/plugin/.cursor-plugin/plugin.json",
        &format!(r#"{{"name":"{cursor_name}"}}"#),
    );
    write(p, "providers/cursor/plugin/rules/r.mdc", "rule");
    write(p, "providers/cursor/plugin/skills/a/SKILL.md", "cursor a");
    write(
        p,
        "providers/codex/plugin/.codex-plugin/plugin.json",
        r#"{"name":"acme","version":"2.0.0"}"#,
    );
}

#[test]
fn a_single_plugin_marketplace_is_merged_into_one_package() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    multi_provider(p, "acme");
    let report = normalize_package(p, &ctx("github.com/acme/plugin")).unwrap();
    assert_eq!(read(p, ".claude-plugin/plugin.json"), r#"{"name":"acme"}"#);
    assert_eq!(read(p, ".cursor-plugin/plugin.json"), r#"{"name":"acme"}"#);
    assert_eq!(
        read(p, ".codex-plugin/plugin.json"),
        r#"{"name":"acme","version":"2.0.0"}"#
    );
    assert_eq!(
        read(p, "skills/a/SKILL.md"),
        "claude a",
        "the first provider wins a clash"
    );
    assert_eq!(read(p, "rules/r.mdc"), "rule");
    assert!(report.added.contains(&"rules/r.mdc".to_owned()));
}

#[test]
fn provider_names_must_agree() {
    let dir = tempfile::tempdir().unwrap();
    multi_provider(dir.path(), "other");
    let error = normalize_package(dir.path(), &ctx("github.com/acme/plugin")).unwrap_err();
    assert!(
        matches!(error, NormalizeError::NameMismatch { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("\"other\""), "{error}");
}

#[test]
fn an_ambiguous_catalog_names_the_plugin_flag() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        ".claude-plugin/marketplace.json",
        r#"{"plugins":[{"name":"a","source":"./a"},{"name":"b","source":"./b"}]}"#,
    );
    let error = normalize_package(dir.path(), &ctx("github.com/acme/market")).unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(error, NormalizeError::AmbiguousCatalog { count: 2, .. }),
        "{text}"
    );
    assert!(
        text.contains("--plugin")
            && text.contains("github.com/acme/market")
            && text.contains("a, b"),
        "{text}"
    );
}

#[test]
fn catalog_sources_must_stay_inside_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        ".claude-plugin/marketplace.json",
        r#"{"plugins":[{"name":"a","source":"../../etc"}]}"#,
    );
    let error = normalize_package(dir.path(), &ctx("m")).unwrap_err();
    assert!(
        error.to_string().contains("outside the repository"),
        "{error}"
    );
}

#[test]
fn an_inline_catalog_entry_becomes_the_plugin_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    write(
        &repo,
        ".claude-plugin/marketplace.json",
        r#"{"plugins":[{"name":"gopls-lsp","source":"./plugins/gopls-lsp","strict":false,"description":"Go","lspServers":{"gopls":{"command":"gopls","extensionToLanguage":{".go":"go"}}}}]}"#,
    );
    write(&repo, "plugins/gopls-lsp/README.md", "readme only");
    let package = dir.path().join("package");
    agentpack_builders::extract::copy_package_tree(&repo, "plugins/gopls-lsp", &package).unwrap();
    let context = NormalizeContext {
        module: "github.com/anthropics/claude-plugins-official/plugins/gopls-lsp",
        repo_root: Some(&repo),
        package_path: "plugins/gopls-lsp",
        inline_manifest: None,
    };
    normalize_package(&package, &context).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_str(&read(&package, ".claude-plugin/plugin.json")).unwrap();
    assert_eq!(manifest["name"], "gopls-lsp");
    assert_eq!(manifest["lspServers"]["gopls"]["command"], "gopls");
    assert!(manifest.get("strict").is_none() && manifest.get("source").is_none());
    assert_eq!(package_kind(&package), "plugin");
}

#[test]
fn plugin_flag_sources() {
    let catalog = parse_catalog(
        ".claude-plugin/marketplace.json",
        r#"{
          "metadata": {"pluginRoot": "./plugins"},
          "renames": {"old-name": "hookify"},
          "plugins": [
            {"name": "hookify", "source": "./plugins/hookify"},
            {"name": "bare", "source": "bare"},
            {"name": "loc", "source": {"source": "local", "path": "./x/y"}},
            {"name": "stripe", "source": {"source": "github", "repo": "stripe/agent-toolkit", "sha": "0123456789012345678901234567890123456789"}},
            {"name": "viaurl", "source": {"source": "url", "url": "https://github.com/acme/tools.git", "ref": "v1"}},
            {"name": "sub", "source": {"source": "git-subdir", "url": "https://github.com/acme/mono", "path": "plugins/p"}},
            {"name": "npmpkg", "source": {"source": "npm", "package": "@acme/plugin"}},
            {"name": "gitlab", "source": {"source": "url", "url": "https://gitlab.com/acme/x.git"}}
          ]
        }"#,
    )
    .unwrap();
    let catalogs = [catalog];
    let find = |name: &str| find_plugin(&catalogs, name, "acme/market");
    assert_eq!(
        find("hookify").unwrap().source,
        PluginSource::Local {
            path: "plugins/hookify".into()
        }
    );
    assert_eq!(
        find("old-name").unwrap().name,
        "hookify",
        "renames are followed"
    );
    assert_eq!(
        find("bare").unwrap().source,
        PluginSource::Local {
            path: "plugins/bare".into()
        }
    );
    assert_eq!(
        find("loc").unwrap().source,
        PluginSource::Local { path: "x/y".into() }
    );
    assert_eq!(
        find("stripe").unwrap().source,
        PluginSource::GitHub {
            repo: RepoId::new("stripe", "agent-toolkit"),
            path: String::new(),
            sha: Some("0123456789012345678901234567890123456789".into()),
            reference: None
        }
    );
    assert_eq!(
        find("viaurl").unwrap().source,
        PluginSource::GitHub {
            repo: RepoId::new("acme", "tools"),
            path: String::new(),
            sha: None,
            reference: Some("v1".into())
        }
    );
    assert_eq!(
        find("sub").unwrap().source,
        PluginSource::GitHub {
            repo: RepoId::new("acme", "mono"),
            path: "plugins/p".into(),
            sha: None,
            reference: None
        }
    );
    for refused in ["npmpkg", "gitlab"] {
        let error = find(refused).unwrap_err();
        assert!(matches!(error, CatalogError::NotGitHub { .. }), "{error}");
        assert!(error.to_string().contains("github.com"), "{error}");
    }
    let error = find("missing").unwrap_err();
    assert!(
        error.to_string().contains("hookify"),
        "lists what exists: {error}"
    );
}
