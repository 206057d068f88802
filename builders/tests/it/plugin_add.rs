//! `add <marketplace> --plugin <name>` against the fake GitHub.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use agentpack_builders::github::metadata_cache::InMemoryMetadataCache;
use agentpack_builders::github::resolver::Resolver;
use agentpack_builders::github::{GitHubConfig, RepoId, RetryPolicy};
use agentpack_builders::plugin_add::{resolve_plugin, PluginAddError};
use agentpack_builders::snapshot::SnapshotFetcher;
use agentpack_lockfile::manifest::Pin;
use agentpack_test_support::FakeGitHub;

fn fetcher(gh: &FakeGitHub, scratch: &std::path::Path) -> SnapshotFetcher {
    let mut config = GitHubConfig::from_values(Some(gh.api_url()), Some(gh.git_url()), None, None);
    config.retry = RetryPolicy::fast();
    let resolver = Arc::new(Resolver::new(config, Arc::new(InMemoryMetadataCache::new())).unwrap());
    SnapshotFetcher::new(resolver, scratch).unwrap()
}

#[test]
fn catalog_entries_become_module_ids_and_pins() {
    let gh = FakeGitHub::start();
    let tools = gh.repo("stripe", "agent-toolkit");
    tools.write(
        "plugins/stripe/.claude-plugin/plugin.json",
        r#"{"name":"stripe"}"#,
    );
    let tools_commit = tools.commit("tools");
    tools.tag("v3.0.0");

    let market = gh.repo("anthropics", "claude-plugins-official");
    let catalog = format!(
        r#"{{"renames": {{"hooks": "hookify"}}, "plugins": [
          {{"name": "hookify", "source": "./plugins/hookify"}},
          {{"name": "stripe", "source": {{"source": "github", "repo": "stripe/agent-toolkit", "path": "plugins/stripe", "sha": "{tools_commit}"}}}},
          {{"name": "tagged", "source": {{"source": "url", "url": "https://github.com/stripe/agent-toolkit.git", "path": "plugins/stripe", "ref": "v3.0.0"}}}},
          {{"name": "gopls-lsp", "source": "./plugins/gopls-lsp", "strict": false, "lspServers": {{"gopls": {{"command": "gopls"}}}}}},
          {{"name": "npm-thing", "source": {{"source": "npm", "package": "@acme/x"}}}},
          {{"name": "empty", "source": "./plugins/empty"}}
        ]}}"#
    );
    market.write(".claude-plugin/marketplace.json", catalog);
    market.write(
        "plugins/hookify/.claude-plugin/plugin.json",
        r#"{"name":"hookify"}"#,
    );
    market.write("plugins/gopls-lsp/README.md", "readme");
    market.write("plugins/empty/README.md", "readme");
    let market_commit = market.commit("catalog");
    market.tag("v1");

    let scratch = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&gh, scratch.path());
    let repo = RepoId::new("anthropics", "claude-plugins-official");

    let hookify = resolve_plugin(&fetcher, &repo, "", None, "hooks").unwrap();
    assert_eq!(
        hookify.module.as_str(),
        "github.com/anthropics/claude-plugins-official/plugins/hookify"
    );
    // Without @ref, the commit the catalog was read at (issue 13: the newest tag may predate it).
    assert!(
        matches!(&hookify.pin, Pin::Commit(c) if c.as_str() == market_commit),
        "{:?}",
        hookify.pin
    );
    assert_eq!(hookify.commit, market_commit);
    assert_eq!(hookify.name, "hookify");
    let pinned = resolve_plugin(&fetcher, &repo, "", Some("v1"), "hookify").unwrap();
    assert_eq!(
        pinned.pin,
        Pin::Ref("v1".into()),
        "a local plugin follows the marketplace @ref"
    );

    let stripe = resolve_plugin(&fetcher, &repo, "", None, "stripe").unwrap();
    assert_eq!(
        stripe.module.as_str(),
        "github.com/stripe/agent-toolkit/plugins/stripe"
    );
    assert!(matches!(&stripe.pin, Pin::Commit(c) if c.as_str() == tools_commit));
    let tagged = resolve_plugin(&fetcher, &repo, "", None, "tagged").unwrap();
    assert_eq!(
        (tagged.pin, tagged.commit.as_str()),
        (Pin::Ref("v3.0.0".into()), tools_commit.as_str())
    );

    let lsp = resolve_plugin(&fetcher, &repo, "", None, "gopls-lsp").unwrap();
    assert!(lsp.inline_definition);

    let error = resolve_plugin(&fetcher, &repo, "", None, "npm-thing").unwrap_err();
    assert!(
        error.to_string().contains("npm package") && error.to_string().contains("github.com"),
        "{error}"
    );
    let error = resolve_plugin(&fetcher, &repo, "", None, "empty").unwrap_err();
    assert!(
        matches!(error, PluginAddError::NotAPackage { .. }),
        "{error}"
    );
    let error = resolve_plugin(&fetcher, &repo, "", None, "nope").unwrap_err();
    assert!(error.to_string().contains("hookify"), "{error}");
}

/// Issue 13, Build 5: an in-repo entry without a plugin manifest that Claude Code loads (it has
/// `commands/`, `agents/`...) is added, and without `@ref` it is pinned to the commit the catalog
/// was read at, not to an older tag that lacks it.
#[test]
fn manifestless_entries_are_added_at_the_commit_the_catalog_was_read_at() {
    let gh = FakeGitHub::start();
    let market = gh.repo("acme", "market");
    market.write(
        ".claude-plugin/marketplace.json",
        r#"{"name": "m", "owner": {"name": "o"}, "plugins": [{"name": "old", "source": "./plugins/old"}]}"#,
    );
    market.write(
        "plugins/old/.claude-plugin/plugin.json",
        r#"{"name":"old"}"#,
    );
    market.commit("old plugin");
    market.tag("v1.0.0");
    market.write(
        ".claude-plugin/marketplace.json",
        r#"{"name": "m", "owner": {"name": "o"}, "plugins": [
          {"name": "old", "source": "./plugins/old"},
          {"name": "receipts", "source": "./plugins/receipts"},
          {"name": "readme-only", "source": "./plugins/readme-only"}
        ]}"#,
    );
    market.write("plugins/receipts/commands/receipt.md", "Print a receipt.\n");
    market.write(
        "plugins/receipts/agents/auditor.md",
        "---\nname: auditor\n---\nAudit.\n",
    );
    market.write("plugins/readme-only/README.md", "readme\n");
    let head = market.commit("receipts without a manifest");

    let scratch = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&gh, scratch.path());
    let repo = RepoId::new("acme", "market");
    let receipts = resolve_plugin(&fetcher, &repo, "", None, "receipts").unwrap();
    assert_eq!(
        receipts.module.as_str(),
        "github.com/acme/market/plugins/receipts"
    );
    assert!(
        matches!(&receipts.pin, Pin::Commit(c) if c.as_str() == head),
        "{:?}",
        receipts.pin
    );
    let error = resolve_plugin(&fetcher, &repo, "", None, "readme-only").unwrap_err();
    assert!(
        matches!(error, PluginAddError::NotAPackage { .. }),
        "{error}"
    );
}
