//! Format-preserving edits: comments, order and spacing survive; snapshots show the result.

#![allow(clippy::unwrap_used)] // tests may unwrap (HELPERS.md)

use std::path::Path;

use agentpack_lockfile::edit::{render_init_manifest, EditError, ManifestDocument};
use agentpack_lockfile::manifest::{Base, Dependency, Manifest, McpOAuth, McpServer, Pin};
use agentpack_lockfile::module_id::ModuleId;
use agentpack_lockfile::selector::Selector;
use agentpack_lockfile::validate::CommitSha;
use agentpack_lockfile::version::VersionConstraint;

const HAND_WRITTEN: &str = r#"# Our agent setup. Keep this comment.
name    = "acme-backend"   # the project
version = "0.5.0"

[dependencies]
# skills from upstream
"github.com/anthropics/skills/skills/canvas-design"      = { branch = "main" }  # floating
"github.com/acme/shared-rules"                      = { tag = "v2.1.0" }
"local-dev" = { path = "../local-dev" }

[modes.default]
base    = "all"
disable = ["package-path:github.com/acme/shared-rules:commands/noisy.md"]

[modes.review]
base   = "none"
enable = [
  "package:github.com/acme/shared-rules",
  ".agents:rules/backend.mdc",
]

# servers
[mcp.servers.filesystem]
command = "npx"
args    = ["-y", "@modelcontextprotocol/server-filesystem"]
"#;

fn doc() -> ManifestDocument {
    ManifestDocument::parse(HAND_WRITTEN, Path::new("/p/agentpack.toml")).unwrap()
}

fn module(s: &str) -> ModuleId {
    ModuleId::parse(s).unwrap()
}

fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap()
}

#[test]
fn init_text_is_the_quick_start_manifest() {
    let text = render_init_manifest("my-project", "0.0.1");
    assert_eq!(
        text,
        "name = \"my-project\"\nversion = \"0.0.1\"\n\n[dependencies]\n"
    );
    let m = Manifest::parse(&text, Path::new("agentpack.toml")).unwrap();
    assert_eq!(m.name, "my-project");
    assert!(m.dependencies.is_empty());
    assert_eq!(
        render_init_manifest("a \"b\"", "0.0.1").lines().next(),
        Some(r#"name = "a \"b\"""#)
    );
}

#[test]
fn untouched_document_is_byte_identical() {
    assert_eq!(doc().to_string(), HAND_WRITTEN);
}

#[test]
fn add_replace_and_remove_dependencies() {
    let mut d = doc();
    d.set_dependency(
        &module("github.com/anthropics/skills/skills/pdf"),
        &Dependency::Remote(Pin::Unpinned),
    )
    .unwrap();
    d.set_dependency(
        &module("github.com/acme/monorepo/packages/agent"),
        &Dependency::Remote(Pin::Version(VersionConstraint::parse("^2.0").unwrap())),
    )
    .unwrap();
    d.set_dependency(
        &module("github.com/acme/shared-rules"),
        &Dependency::Remote(Pin::Commit(
            CommitSha::parse("a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2").unwrap(),
        )),
    )
    .unwrap();
    d.set_dependency(
        &module("github.com/anthropics/skills/skills/canvas-design"),
        &Dependency::Remote(Pin::Ref("v1.2.0".into())),
    )
    .unwrap();
    assert!(d.remove_dependency(&module("local-dev")));
    assert!(!d.remove_dependency(&module("local-dev")));
    d.to_manifest().unwrap();
    insta::assert_snapshot!("edit_dependencies", d.to_string());
}

#[test]
fn add_to_a_manifest_without_dependencies_table() {
    let mut d = ManifestDocument::parse(
        "name = \"x\"\nversion = \"0.0.1\"\n",
        Path::new("agentpack.toml"),
    )
    .unwrap();
    d.set_dependency(&module("github.com/a/b"), &Dependency::Path("../b".into()))
        .unwrap();
    assert_eq!(
        d.to_string(),
        "name = \"x\"\nversion = \"0.0.1\"\n\n[dependencies]\n\"github.com/a/b\" = { path = \"../b\" }\n"
    );
    let mut d = ManifestDocument::parse(
        &render_init_manifest("x", "0.0.1"),
        Path::new("agentpack.toml"),
    )
    .unwrap();
    d.set_dependency(
        &module("github.com/anthropics/skills/skills/canvas-design"),
        &Dependency::Remote(Pin::Unpinned),
    )
    .unwrap();
    assert_eq!(
        d.to_string(),
        "name = \"x\"\nversion = \"0.0.1\"\n\n[dependencies]\n\"github.com/anthropics/skills/skills/canvas-design\" = {}\n"
    );
}

#[test]
fn mode_edits() {
    let mut d = doc();
    d.create_mode("writing", Base::None).unwrap();
    assert!(d
        .mode_enable("writing", &sel("package:github.com/acme/shared-rules"))
        .unwrap());
    assert!(!d
        .mode_enable("writing", &sel("package:github.com/acme/shared-rules"))
        .unwrap());
    assert!(d.mode_disable("writing", &sel("mcp:linear")).unwrap());
    assert!(d.mode_enable("review", &sel("mcp:filesystem")).unwrap());
    assert!(d
        .mode_disable("review", &sel(".agents:rules/backend.mdc"))
        .unwrap());
    d.set_mode_base("review", Base::All).unwrap();
    assert!(d
        .mode_enable(
            "default",
            &sel("package-path:github.com/acme/shared-rules:commands/noisy.md")
        )
        .unwrap());
    let m = d.to_manifest().unwrap();
    assert_eq!(m.modes["writing"].base, Base::None);
    insta::assert_snapshot!("edit_modes", d.to_string());
}

#[test]
fn mode_errors() {
    let mut d = doc();
    assert_eq!(
        d.delete_mode("default").unwrap_err(),
        EditError::DefaultReserved
    );
    assert!(matches!(
        d.delete_mode("nope").unwrap_err(),
        EditError::UnknownMode { .. }
    ));
    assert!(matches!(
        d.create_mode("review", Base::All).unwrap_err(),
        EditError::ModeExists { .. }
    ));
    assert!(matches!(
        d.mode_enable("nope", &sel("mcp:x")).unwrap_err(),
        EditError::UnknownMode { .. }
    ));
    insta::assert_snapshot!(
        "edit_errors",
        [
            d.delete_mode("default").unwrap_err().to_string(),
            d.delete_mode("nope").unwrap_err().to_string(),
            d.create_mode("review", Base::All).unwrap_err().to_string(),
        ]
        .join("\n---\n")
    );
    d.delete_mode("review").unwrap();
    assert!(d.to_manifest().unwrap().modes.get("review").is_none());
}

#[test]
fn default_mode_is_declared_on_first_edit() {
    let mut d = ManifestDocument::parse(
        &render_init_manifest("x", "0.0.1"),
        Path::new("agentpack.toml"),
    )
    .unwrap();
    d.mode_disable("default", &sel("mcp:filesystem")).unwrap();
    insta::assert_snapshot!("edit_default_mode_created", d.to_string());
    d.to_manifest().unwrap();
}

#[test]
fn remove_prunes_selectors_of_the_module() {
    let mut d = doc();
    let removed = d.remove_selectors_for_module(&module("github.com/acme/shared-rules"));
    assert_eq!(removed, 2);
    assert!(d.remove_dependency(&module("github.com/acme/shared-rules")));
    d.to_manifest().unwrap();
    insta::assert_snapshot!("edit_remove_module", d.to_string());
}

#[test]
fn mcp_server_add_replace_remove() {
    let mut d = doc();
    let mut retrieval = McpServer {
        command: Some("uvx".into()),
        args: vec!["mcp-retrieval".into()],
        ..Default::default()
    };
    retrieval.env.insert("API_KEY".into(), "sk-...".into());
    d.set_mcp_server("retrieval", &retrieval).unwrap();
    let remote = McpServer {
        server_type: Some("http".into()),
        url: Some("https://mcp.example.com/mcp".into()),
        headers: [("Authorization".to_owned(), "Bearer x".to_owned())]
            .into_iter()
            .collect(),
        oauth: Some(McpOAuth {
            client_id: Some("abc".into()),
            callback_port: Some(8765),
            scopes: vec!["read".into()],
            ..Default::default()
        }),
        ..Default::default()
    };
    d.set_mcp_server("remote", &remote).unwrap();
    let replaced = McpServer {
        command: Some("npx".into()),
        args: vec![
            "-y".into(),
            "@modelcontextprotocol/server-filesystem".into(),
            ".".into(),
        ],
        disabled: true,
        ..Default::default()
    };
    d.set_mcp_server("filesystem", &replaced).unwrap();
    let m = d.to_manifest().unwrap();
    assert_eq!(m.mcp_servers["retrieval"], retrieval);
    assert_eq!(m.mcp_servers["remote"], remote);
    assert_eq!(m.mcp_servers["filesystem"], replaced);
    insta::assert_snapshot!("edit_mcp_add", d.to_string());
    assert!(d.remove_mcp_server("retrieval"));
    assert!(!d.remove_mcp_server("retrieval"));
    assert!(d.remove_mcp_server("filesystem"));
    insta::assert_snapshot!("edit_mcp_remove", d.to_string());
}
