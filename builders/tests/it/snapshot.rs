//! Downloading repository snapshots: once per (repo, commit), tarball first, git protocol second.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use agentpack_builders::github::metadata_cache::InMemoryMetadataCache;
use agentpack_builders::github::resolver::Resolver;
use agentpack_builders::github::{GitHubConfig, RepoId, RetryPolicy};
use agentpack_builders::snapshot::{FetchError, FetchedVia, SnapshotFetcher};
use agentpack_test_support::{Endpoint, FakeGitHub, RawTar};

fn fetcher(gh: &FakeGitHub, scratch: &std::path::Path) -> SnapshotFetcher {
    let mut config = GitHubConfig::from_values(Some(gh.api_url()), Some(gh.git_url()), None, None);
    config.retry = RetryPolicy::fast();
    let resolver = Arc::new(Resolver::new(config, Arc::new(InMemoryMetadataCache::new())).unwrap());
    SnapshotFetcher::new(resolver, scratch).unwrap()
}

fn monorepo(gh: &FakeGitHub) -> String {
    let repo = gh.repo("Acme", "Mono");
    for i in 0..20 {
        repo.write(
            &format!("skills/s{i}/SKILL.md"),
            format!("---\nname: s{i}\n---\nskill {i}\n"),
        );
    }
    repo.write("skills/s0/run.sh", "#!/bin/sh\n");
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(repo.dir.join("skills/s0/run.sh"))
        .status()
        .unwrap();
    repo.symlink("skills/s1/shared", "../s0");
    repo.commit("twenty skills")
}

#[test]
fn twenty_packages_of_one_repo_at_one_commit_download_one_tarball() {
    let gh = FakeGitHub::start();
    gh.set_tarball_redirect(true);
    let commit = monorepo(&gh);
    let scratch = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&gh, scratch.path());
    let out = tempfile::tempdir().unwrap();
    std::thread::scope(|scope| {
        for i in 0..20 {
            let fetcher = &fetcher;
            let out = out.path();
            let commit = commit.clone();
            scope.spawn(move || {
                let repo = RepoId::new("acme", "mono");
                fetcher
                    .fetch_package(
                        &repo,
                        &commit,
                        &format!("skills/s{i}"),
                        &out.join(format!("s{i}")),
                    )
                    .unwrap();
            });
        }
    });
    assert_eq!(
        gh.count(Endpoint::Tarball, "acme", "mono"),
        1,
        "{:?}",
        gh.requests()
    );
    assert_eq!(
        std::fs::read_to_string(out.path().join("s7/SKILL.md")).unwrap(),
        "---\nname: s7\n---\nskill 7\n"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(out.path().join("s0/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644, "execute bits are dropped");
    // s1/shared -> ../s0 leaves the package s1: an empty file.
    let shared = out.path().join("s1/shared");
    assert!(std::fs::symlink_metadata(&shared).unwrap().is_file());
    assert_eq!(std::fs::metadata(&shared).unwrap().len(), 0);
    // The whole repository as one package keeps the link.
    let snapshot = fetcher
        .snapshot(&RepoId::new("ACME", "mono"), &commit)
        .unwrap();
    assert_eq!(snapshot.via, FetchedVia::Tarball);
    assert_eq!(
        std::fs::read_link(snapshot.root.join("skills/s1/shared"))
            .unwrap()
            .to_str(),
        Some("../s0")
    );
    assert_eq!(gh.count(Endpoint::Tarball, "acme", "mono"), 1);
}

#[test]
fn rest_down_fetches_over_the_git_protocol_with_the_same_rules() {
    let gh = FakeGitHub::start();
    let commit = monorepo(&gh);
    let repo = gh.repo("acme", "mono");
    repo.write("later.md", "not at the pinned commit");
    repo.commit("later");
    gh.set_rest_down(Some(502));
    let scratch = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&gh, scratch.path());
    let snapshot = fetcher
        .snapshot(&RepoId::new("acme", "mono"), &commit)
        .unwrap();
    assert_eq!(snapshot.via, FetchedVia::GitProtocol);
    assert!(snapshot.root.join("skills/s19/SKILL.md").is_file());
    assert!(
        !snapshot.root.join("later.md").exists(),
        "the pinned commit, not the branch tip"
    );
    assert_eq!(
        std::fs::read_link(snapshot.root.join("skills/s1/shared"))
            .unwrap()
            .to_str(),
        Some("../s0")
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(snapshot.root.join("skills/s0/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644);
    assert!(gh.count(Endpoint::GitHttp, "acme", "mono") >= 1);
}

#[test]
fn both_down_is_an_error_naming_repo_and_commit() {
    let gh = FakeGitHub::start();
    let commit = monorepo(&gh);
    gh.set_rest_down(Some(500));
    gh.set_git_http_enabled(false);
    let scratch = tempfile::tempdir().unwrap();
    let error = fetcher(&gh, scratch.path())
        .snapshot(&RepoId::new("acme", "mono"), &commit)
        .unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, FetchError::Download { .. }));
    assert!(
        text.contains("github.com/acme/mono") && text.contains(&commit),
        "{text}"
    );
}

#[test]
fn a_malicious_tarball_from_the_server_is_refused() {
    let gh = FakeGitHub::start();
    let commit = monorepo(&gh);
    let evil = RawTar::new()
        .file("Acme-Mono-x/ok.md", "ok")
        .file("Acme-Mono-x/../../escape.md", "evil")
        .finish_gz();
    gh.override_tarball("acme", "mono", &commit, evil);
    let scratch = tempfile::tempdir().unwrap();
    let error = fetcher(&gh, scratch.path())
        .snapshot(&RepoId::new("acme", "mono"), &commit)
        .unwrap_err();
    assert!(matches!(error, FetchError::Unsafe { .. }), "{error}");
    assert!(error.to_string().contains("escape.md"), "{error}");
    assert!(!scratch.path().join("escape.md").exists());
}

#[test]
fn a_missing_package_path_is_named() {
    let gh = FakeGitHub::start();
    let commit = monorepo(&gh);
    let scratch = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let error = fetcher(&gh, scratch.path())
        .fetch_package(
            &RepoId::new("acme", "mono"),
            &commit,
            "skills/nope",
            &out.path().join("p"),
        )
        .unwrap_err();
    assert!(
        matches!(error, FetchError::MissingPath { .. })
            && error.to_string().contains("skills/nope"),
        "{error}"
    );
}
