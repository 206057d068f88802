//! agentpack.toml parsing: the docs' examples load; every refusal names the file, the key and
//! what to do.

#![allow(clippy::unwrap_used)] // tests may unwrap (HELPERS.md)

use std::path::Path;

use agentpack_lockfile::{
    classify_ref, Base, Dependency, Manifest, ManifestError, Pin, RefKind, Selector,
};

fn parse(text: &str) -> Result<Manifest, ManifestError> {
    Manifest::parse(text, Path::new("/work/project/agentpack.toml"))
}

const COMPLETE_EXAMPLE: &str = r#"name    = "acme-backend"
version = "0.5.0"

[dependencies]
"github.com/anthropics/skills/skills/canvas-design" = { branch = "main" }
"github.com/acme/shared-rules"                      = { tag = "v2.1.0" }
"github.com/acme/monorepo/packages/agent"           = "^2.0"
"local-dev" = { path = "../local-dev" }

[modes.default]
base    = "all"
disable = ["package-path:github.com/acme/shared-rules:commands/noisy.md"]

[modes.review]
base   = "none"
enable = ["package:github.com/acme/shared-rules", ".agents:rules/backend.mdc"]

[mcp.servers.filesystem]
command = "npx"
args    = ["-y", "@modelcontextprotocol/server-filesystem"]
"#;

#[test]
fn complete_example_from_the_schema() {
    let m = parse(COMPLETE_EXAMPLE).unwrap();
    assert_eq!(
        (m.name.as_str(), m.version.as_str()),
        ("acme-backend", "0.5.0")
    );
    let deps: Vec<(&str, &Dependency)> = m
        .dependencies
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    assert_eq!(deps[0].1, &Dependency::Remote(Pin::Branch("main".into())));
    assert_eq!(deps[1].1, &Dependency::Remote(Pin::Tag("v2.1.0".into())));
    assert!(matches!(deps[2].1, Dependency::Remote(Pin::Version(c)) if c.as_str() == "^2.0"));
    assert_eq!(
        deps[3],
        ("local-dev", &Dependency::Path("../local-dev".into()))
    );
    assert_eq!(m.mode_names(), ["default", "review"]);
    let review = m.mode("review").unwrap();
    assert_eq!(review.base, Base::None);
    assert_eq!(
        review.enable[1],
        Selector::Agents("rules/backend.mdc".into())
    );
    assert!(
        matches!(&m.mode("default").unwrap().disable[0], Selector::PackagePath { path, .. } if path == "commands/noisy.md")
    );
    let fs = &m.mcp_servers["filesystem"];
    assert_eq!(fs.command.as_deref(), Some("npx"));
    assert_eq!(fs.args, ["-y", "@modelcontextprotocol/server-filesystem"]);
}

#[test]
fn short_strings_are_classified() {
    let m = parse(
        r#"name = "x"
version = "0.0.1"
[dependencies]
"github.com/a/constraint" = "^1.2"
"github.com/a/exact" = "1.2.3"
"github.com/a/branch" = "main"
"github.com/a/tag" = "v2.1.0"
"github.com/a/commit" = "A1B2C3D4E5F6A1B2C3D4E5F6A1B2C3D4E5F6A1B2"
"github.com/a/empty" = {}
"github.com/a/commit-table" = { commit = "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2" }
"github.com/a/version-table" = { version = ">=1.0, <2.0" }
"#,
    )
    .unwrap();
    let pin = |k: &str| match &m.dependencies[&agentpack_lockfile::ModuleId::parse(k).unwrap()] {
        Dependency::Remote(p) => p.clone(),
        Dependency::Path(_) => panic!(),
    };
    assert!(matches!(pin("github.com/a/constraint"), Pin::Version(_)));
    assert!(matches!(pin("github.com/a/exact"), Pin::Version(_)));
    assert_eq!(pin("github.com/a/branch"), Pin::Ref("main".into()));
    assert_eq!(pin("github.com/a/tag"), Pin::Ref("v2.1.0".into()));
    assert!(
        matches!(pin("github.com/a/commit"), Pin::Commit(c) if c.as_str() == "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2")
    );
    assert_eq!(pin("github.com/a/commit-table"), pin("github.com/a/commit"));
    assert_eq!(pin("github.com/a/empty"), Pin::Unpinned);
    assert!(matches!(pin("github.com/a/version-table"), Pin::Version(_)));
    assert!(matches!(
        classify_ref("1.x").unwrap(),
        RefKind::Constraint(_)
    ));
}

#[test]
fn mcp_server_fields() {
    let m = parse(
        r#"name = "x"
version = "0.0.1"

[mcp.servers.retrieval]
command = "uvx"
args    = ["mcp-retrieval"]
env     = { API_KEY = "sk-..." }
cwd = "tools"
disabled = true

[mcp.servers.remote]
type = "http"
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer x" }

[mcp.servers.remote.oauth]
client_id = "abc"
client_secret = "shh"
callback_port = 8765
scopes = ["read", "write"]
metadata_url = "https://mcp.example.com/.well-known/oauth"
"#,
    )
    .unwrap();
    let r = &m.mcp_servers["retrieval"];
    assert_eq!(r.env["API_KEY"], "sk-...");
    assert!(r.disabled);
    assert_eq!(r.cwd.as_deref(), Some("tools"));
    let remote = &m.mcp_servers["remote"];
    let oauth = remote.oauth.as_ref().unwrap();
    assert_eq!(oauth.callback_port, Some(8765));
    assert_eq!(oauth.scopes, ["read", "write"]);
    assert_eq!(remote.headers["Authorization"], "Bearer x");
    // Secrets are not part of the definition digest; cwd is.
    let mut changed = remote.clone();
    changed.headers.clear();
    changed.oauth = None;
    assert_eq!(changed.definition_digest(), remote.definition_digest());
    let mut moved = r.clone();
    moved.cwd = None;
    assert_ne!(moved.definition_digest(), r.definition_digest());
}

#[test]
fn default_mode_is_implicit() {
    let m = parse("name = \"x\"\nversion = \"0.0.1\"\n").unwrap();
    assert_eq!(m.mode("default").unwrap().base, Base::All);
    assert!(m.mode("writing").is_none());
    assert_eq!(m.mode_names(), ["default"]);
}

#[test]
fn refusals() {
    let head = "name = \"x\"\nversion = \"0.0.1\"\n";
    let cases: Vec<(&str, String)> = vec![
        ("package_table", "[package]\nname = \"x\"\nversion = \"0.0.1\"\n".to_owned()),
        ("missing_name", "version = \"0.0.1\"\n".to_owned()),
        ("missing_version", "name = \"x\"\n".to_owned()),
        ("bad_version", "name = \"x\"\nversion = \"1.0\"\n".to_owned()),
        ("unknown_top_level", format!("{head}[workspace]\n")),
        ("syntax", format!("{head}[dependencies\n")),
        ("unknown_dependency_field", format!("{head}[dependencies]\n\"github.com/a/b\" = {{ banch = \"main\" }}\n")),
        ("rev_field", format!("{head}[dependencies]\n\"github.com/a/b\" = {{ rev = \"abc\" }}\n")),
        ("subdir_field", format!("{head}[dependencies]\n\"github.com/a/b\" = {{ subdir = \"x\" }}\n")),
        ("conflicting_pins", format!("{head}[dependencies]\n\"github.com/a/b\" = {{ branch = \"main\", tag = \"v1\" }}\n")),
        ("path_with_pin", format!("{head}[dependencies]\n\"local\" = {{ path = \"../x\", version = \"^1\" }}\n")),
        ("short_commit", format!("{head}[dependencies]\n\"github.com/a/b\" = {{ commit = \"a1b2c3d\" }}\n")),
        ("bad_constraint", format!("{head}[dependencies]\n\"github.com/a/b\" = \"^1.x.y\"\n")),
        ("bad_version_field", format!("{head}[dependencies]\n\"github.com/a/b\" = {{ version = \"main\" }}\n")),
        ("number_value", format!("{head}[dependencies]\n\"github.com/a/b\" = 1\n")),
        ("no_host", format!("{head}[dependencies]\n\"acme/rules\" = \"^1\"\n")),
        ("other_host", format!("{head}[dependencies]\n\"gitlab.com/acme/rules\" = \"^1\"\n")),
        ("uppercase_owner", format!("{head}[dependencies]\n\"github.com/Acme/Rules/Sub\" = \"^1\"\n")),
        ("dotdot_path", format!("{head}[dependencies]\n\"github.com/acme/rules/../x\" = \"^1\"\n")),
        ("bad_base", format!("{head}[modes.x]\nbase = \"some\"\n")),
        ("unknown_mode_field", format!("{head}[modes.x]\nbase = \"all\"\nonly = []\n")),
        ("bad_selector", format!("{head}[modes.x]\nenable = [\"github.com/a/b\"]\n")),
        ("selector_not_string", format!("{head}[modes.x]\nenable = [1]\n")),
        ("mcp_unknown_key", format!("{head}[mcp.server.x]\ncommand = \"x\"\n")),
        ("mcp_unknown_field", format!("{head}[mcp.servers.x]\ncommand = \"x\"\nenvironment = {{}}\n")),
        ("mcp_no_command", format!("{head}[mcp.servers.x]\nargs = [\"a\"]\n")),
        ("mcp_bad_port", format!("{head}[mcp.servers.x]\nurl = \"https://x\"\n[mcp.servers.x.oauth]\ncallback_port = 70000\n")),
        ("mcp_oauth_camel", format!("{head}[mcp.servers.x]\nurl = \"https://x\"\n[mcp.servers.x.oauth]\nclientId = \"a\"\n")),
        ("mcp_disabled_string", format!("{head}[mcp.servers.x]\ncommand = \"x\"\ndisabled = \"yes\"\n")),
    ];
    let mut out = String::new();
    for (name, text) in cases {
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains("/work/project/agentpack.toml"), "{name}: {e}");
        out.push_str(&format!("## {name}\n{e}\n\n"));
    }
    insta::assert_snapshot!("manifest_refusals", out);
}

#[test]
fn load_reads_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentpack.toml");
    std::fs::write(&path, COMPLETE_EXAMPLE).unwrap();
    assert_eq!(Manifest::load(&path).unwrap().name, "acme-backend");
    let e = Manifest::load(&dir.path().join("missing.toml")).unwrap_err();
    assert!(matches!(e, ManifestError::Io { .. }));
}
