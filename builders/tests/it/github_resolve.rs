//! Ref resolution against the fake GitHub: branches, tags, commits, SemVer, every tag page, fallbacks.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use agentpack_builders::github::metadata_cache::InMemoryMetadataCache;
use agentpack_builders::github::resolver::{RefRequest, ResolveError, ResolvedFrom, Resolver};
use agentpack_builders::github::{GitHubConfig, RepoId, RetryPolicy};
use agentpack_test_support::{Endpoint, FakeGitHub};

fn config(gh: &FakeGitHub) -> GitHubConfig {
    let mut config = GitHubConfig::from_values(Some(gh.api_url()), Some(gh.git_url()), None, None);
    config.retry = RetryPolicy::fast();
    config
}

fn resolver(gh: &FakeGitHub, cache: &Arc<InMemoryMetadataCache>) -> Resolver {
    Resolver::new(config(gh), Arc::clone(cache) as _).unwrap()
}

#[test]
fn branch_tag_commit_and_semver() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "skills");
    repo.write("SKILL.md", "1");
    let c1 = repo.commit("one");
    repo.tag("v1.0.0");
    repo.write("SKILL.md", "2");
    let c2 = repo.commit("two");
    repo.annotated_tag("v1.2.0");
    repo.write("SKILL.md", "3");
    let c3 = repo.commit("three");
    repo.tag("2.0.0").tag("v2.1.0-beta.1");
    repo.branch("dev");
    repo.write("SKILL.md", "4");
    let c4 = repo.commit("four");

    let cache = Arc::new(InMemoryMetadataCache::new());
    let r = resolver(&gh, &cache);
    let id = RepoId::new("acme", "skills");
    let m = "github.com/acme/skills";
    assert_eq!(r.resolve_name(m, &id, "main").unwrap().commit, c3);
    assert_eq!(r.resolve_name(m, &id, "dev").unwrap().commit, c4);
    assert_eq!(r.resolve_name(m, &id, "v1.0.0").unwrap().commit, c1);
    let direct = r.resolve_name(m, &id, &c2.to_uppercase()).unwrap();
    assert_eq!(
        (direct.commit.as_str(), direct.from),
        (c2.as_str(), ResolvedFrom::Commit)
    );

    let pick = |constraint: &str| r.resolve_version(m, &id, constraint).unwrap();
    assert_eq!(pick("^1.0").tag.as_deref(), Some("v1.2.0"));
    assert_eq!(
        pick("^1.0").commit,
        c2,
        "annotated tags resolve to their commit"
    );
    assert_eq!(pick("~1.0").tag.as_deref(), Some("v1.0.0"));
    assert_eq!(pick("1.0.0").commit, c1);
    assert_eq!(
        pick("*").tag.as_deref(),
        Some("2.0.0"),
        "pre-releases only when named"
    );
    assert_eq!(pick(">=2.1.0-beta.0").tag.as_deref(), Some("v2.1.0-beta.1"));
    assert_eq!(pick(">=1.0, <2.0").tag.as_deref(), Some("v1.2.0"));
    assert_eq!(pick("1.x").tag.as_deref(), Some("v1.2.0"));
    match r.resolve_version(m, &id, "^3") {
        Err(ResolveError::NoMatchingVersion { available, .. }) => {
            assert!(available.contains("v1.2.0"))
        }
        other => panic!("{other:?}"),
    }
    // The tag list came once from REST, then from the fresh cache.
    assert_eq!(gh.count(Endpoint::Tags, "acme", "skills"), 1);
}

#[test]
fn unknown_ref_and_repo_name_the_module_and_ref() {
    let gh = FakeGitHub::start();
    gh.repo("acme", "skills").commit("init");
    let cache = Arc::new(InMemoryMetadataCache::new());
    let r = resolver(&gh, &cache);
    let error = r
        .resolve_name(
            "github.com/acme/skills/x",
            &RepoId::new("acme", "skills"),
            "nope",
        )
        .unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, ResolveError::UnknownRef { .. }), "{text}");
    assert!(
        text.contains("github.com/acme/skills/x") && text.contains("\"nope\""),
        "{text}"
    );
    let error = r
        .resolve_name(
            "github.com/acme/missing",
            &RepoId::new("acme", "missing"),
            "main",
        )
        .unwrap_err();
    assert!(
        error.to_string().contains("github.com/acme/missing"),
        "{error}"
    );
}

#[test]
fn every_tag_page_is_listed() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "many");
    repo.commit("init");
    for i in 0..230 {
        repo.tag(&format!("v0.{i}.0"));
    }
    let cache = Arc::new(InMemoryMetadataCache::new());
    let r = resolver(&gh, &cache);
    let list = r
        .list_tags("github.com/acme/many", &RepoId::new("acme", "many"))
        .unwrap();
    assert_eq!(list.tags.len(), 230);
    assert_eq!(gh.count(Endpoint::Tags, "acme", "many"), 3);
    let chosen = r
        .resolve_version("github.com/acme/many", &RepoId::new("acme", "many"), "*")
        .unwrap();
    assert_eq!(chosen.tag.as_deref(), Some("v0.229.0"));
}

#[test]
fn rest_500_falls_back_to_the_git_protocol() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "skills");
    let c1 = repo.commit("init");
    repo.tag("v1.0.0");
    gh.set_rest_down(Some(500));
    let cache = Arc::new(InMemoryMetadataCache::new());
    let r = resolver(&gh, &cache);
    let id = RepoId::new("acme", "skills");
    let resolved = r
        .resolve_name("github.com/acme/skills", &id, "main")
        .unwrap();
    assert_eq!(
        (resolved.commit.as_str(), resolved.from),
        (c1.as_str(), ResolvedFrom::GitProtocol)
    );
    // REST was retried (3 attempts) once, then skipped for the rest of the session.
    assert_eq!(gh.count(Endpoint::Commits, "acme", "skills"), 3);
    let version = r
        .resolve_version("github.com/acme/skills", &id, "^1")
        .unwrap();
    assert_eq!(
        (version.commit.as_str(), version.from),
        (c1.as_str(), ResolvedFrom::GitProtocol)
    );
    assert_eq!(gh.count(Endpoint::Tags, "acme", "skills"), 0);
    assert!(gh.count(Endpoint::GitHttp, "acme", "skills") >= 1);
}

#[test]
fn one_429_is_retried() {
    let gh = FakeGitHub::start();
    let c1 = gh.repo("acme", "skills").commit("init");
    gh.fail_next(Some(Endpoint::Commits), 429, 1);
    let cache = Arc::new(InMemoryMetadataCache::new());
    let resolved = resolver(&gh, &cache)
        .resolve_name("m", &RepoId::new("acme", "skills"), "main")
        .unwrap();
    assert_eq!(
        (resolved.commit.as_str(), resolved.from),
        (c1.as_str(), ResolvedFrom::Rest)
    );
    assert_eq!(gh.count(Endpoint::Commits, "acme", "skills"), 2);
}

#[test]
fn fresh_cache_then_stale_cache_with_a_warning_when_everything_is_down() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "skills");
    let c1 = repo.commit("init");
    repo.tag("v1.0.0");
    let cache = Arc::new(InMemoryMetadataCache::new());
    let id = RepoId::new("acme", "skills");
    resolver(&gh, &cache)
        .resolve_name("m", &id, "main")
        .unwrap();
    resolver(&gh, &cache).list_tags("m", &id).unwrap();

    // Fresh: no request at all.
    gh.reset_counters();
    let again = resolver(&gh, &cache)
        .resolve_name("m", &id, "main")
        .unwrap();
    assert_eq!(again.from, ResolvedFrom::FreshCache);
    assert!(gh.requests().is_empty(), "{:?}", gh.requests());

    // Stale and both sources down: the cached value with a warning.
    cache.age_all(Duration::from_secs(2 * 3600));
    gh.set_rest_down(Some(503));
    gh.set_git_http_enabled(false);
    let stale = resolver(&gh, &cache)
        .resolve_name("github.com/acme/skills", &id, "main")
        .unwrap();
    assert_eq!(
        (stale.commit.as_str(), stale.from),
        (c1.as_str(), ResolvedFrom::StaleCache)
    );
    assert_eq!(stale.warnings.len(), 1);
    assert!(
        stale.warnings[0].contains("github.com/acme/skills") && stale.warnings[0].contains("2h"),
        "{:?}",
        stale.warnings
    );
    let version = resolver(&gh, &cache)
        .resolve("m", &id, &RefRequest::Version("^1".into()))
        .unwrap();
    assert_eq!(
        (version.commit.as_str(), version.from),
        (c1.as_str(), ResolvedFrom::StaleCache)
    );

    // Nothing cached and everything down: an error that says so.
    let empty = Arc::new(InMemoryMetadataCache::new());
    let error = resolver(&gh, &empty)
        .resolve_name("github.com/acme/skills", &id, "main")
        .unwrap_err();
    assert!(matches!(error, ResolveError::Unavailable { .. }), "{error}");
}

#[test]
fn tokens_are_sent_as_bearer_to_rest_and_git() {
    let gh = FakeGitHub::start();
    let c1 = gh.repo("acme", "private").commit("init");
    gh.require_token(Some("s3cret"));
    let cache = Arc::new(InMemoryMetadataCache::new());
    let mut cfg = config(&gh);
    cfg.token = GitHubConfig::from_values(None, None, None, Some("s3cret".into())).token;
    let r = Resolver::new(cfg.clone(), Arc::clone(&cache) as _).unwrap();
    let resolved = r
        .resolve_name("m", &RepoId::new("acme", "private"), "main")
        .unwrap();
    assert_eq!(
        (resolved.commit.as_str(), resolved.from),
        (c1.as_str(), ResolvedFrom::Rest)
    );
    assert_eq!(
        gh.authorizations().last().unwrap().as_deref(),
        Some("Bearer s3cret")
    );
    // Over the git protocol too.
    gh.set_rest_down(Some(500));
    let r = Resolver::new(cfg, Arc::new(InMemoryMetadataCache::new()) as _).unwrap();
    let resolved = r
        .resolve_name("m", &RepoId::new("acme", "private"), "main")
        .unwrap();
    assert_eq!(resolved.from, ResolvedFrom::GitProtocol);
    assert_eq!(
        gh.authorizations().last().unwrap().as_deref(),
        Some("Basic eC1hY2Nlc3MtdG9rZW46czNjcmV0")
    );
    // Without a token: denied everywhere, named as such.
    let r = Resolver::new(config(&gh), Arc::new(InMemoryMetadataCache::new()) as _).unwrap();
    gh.set_rest_down(None);
    let error = r
        .resolve_name("m", &RepoId::new("acme", "private"), "main")
        .unwrap_err();
    assert!(error.to_string().contains("GITHUB_TOKEN"), "{error}");
}
