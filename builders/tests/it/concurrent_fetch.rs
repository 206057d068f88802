//! Fetching a lock whose packages come from many repositories: the repositories are fetched
//! concurrently (`SnapshotFetcher::prefetch`), once per (repository, commit), into the same store
//! paths a one-after-another fetch gives; a repository that fails names a package of it and leaves no
//! package of the lock published.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::fetch_env::{env, github_config, Env};
use agentpack_builders::fetch::FetchOptions;
use agentpack_builders::github::metadata_cache::InMemoryMetadataCache;
use agentpack_builders::github::resolver::Resolver;
use agentpack_builders::github::RepoId;
use agentpack_builders::package_store::PackageStore;
use agentpack_builders::resolve::{resolve, UpdatePolicy};
use agentpack_builders::snapshot::SnapshotFetcher;
use agentpack_lockfile::lock::Lockfile;
use agentpack_lockfile::manifest::Manifest;
use agentpack_test_support::{Endpoint, FakeGitHub, RawTar};

/// A fetcher keeping repo snapshots in `env`'s store, as the cli's session does.
fn fetcher(gh: &FakeGitHub, env: &Env) -> SnapshotFetcher {
    let resolver =
        Arc::new(Resolver::new(github_config(gh), Arc::new(InMemoryMetadataCache::new())).unwrap());
    SnapshotFetcher::new(resolver, &env.home.join("scratch"))
        .unwrap()
        .with_store(Arc::clone(&env.store))
}

/// `repos` repositories `acme/r<N>` with `per_repo` skills each; returns the manifest naming every
/// skill at the commit of its repository, and the commits.
fn repositories(gh: &FakeGitHub, repos: usize, per_repo: usize) -> (String, Vec<String>) {
    let mut text = String::from("name = \"demo\"\nversion = \"0.1.0\"\n[dependencies]\n");
    let mut commits = Vec::new();
    for r in 0..repos {
        let repo = gh.repo("acme", &format!("r{r}"));
        for s in 0..per_repo {
            repo.write(
                &format!("skills/s{s}/SKILL.md"),
                format!("---\nname: r{r}-s{s}\ndescription: skill {s} of repo {r}\n---\nBody.\n"),
            );
            repo.write(
                &format!("skills/s{s}/notes/ref.md"),
                format!("ref {r} {s}\n"),
            );
        }
        repo.write("README.md", format!("repository {r}\n"));
        let commit = repo.commit("skills");
        for s in 0..per_repo {
            text.push_str(&format!(
                "\"github.com/acme/r{r}/skills/s{s}\" = {{ commit = \"{commit}\" }}\n"
            ));
        }
        commits.push(commit);
    }
    (text, commits)
}

/// Resolves `text` in `env` (resolution downloads one package after another) into a lock.
fn lock_of(gh: &FakeGitHub, env: &Env, text: &str) -> (Lockfile, BTreeMap<String, PathBuf>) {
    let fetcher = fetcher(gh, env);
    let manifest = Manifest::parse(text, Path::new("agentpack.toml")).unwrap();
    let outcome = resolve(
        &manifest,
        None,
        &UpdatePolicy::KeepPins,
        &env.resolve_env(&fetcher),
    )
    .unwrap();
    (outcome.lock, outcome.slots)
}

/// The store path names (content-addressed) of every slot, by module.
fn names(slots: &BTreeMap<String, PathBuf>) -> BTreeMap<String, String> {
    slots
        .iter()
        .map(|(module, slot)| {
            (
                module.clone(),
                slot.file_name().unwrap().to_string_lossy().into_owned(),
            )
        })
        .collect()
}

#[test]
fn many_repositories_fetched_concurrently_give_the_store_paths_of_a_sequential_fetch() {
    let gh = FakeGitHub::start();
    const REPOS: usize = 10;
    let (text, _) = repositories(&gh, REPOS, 2);
    let sequential = env();
    let (lock, sequential_slots) = lock_of(&gh, &sequential, &text);
    assert_eq!(lock.packages.len(), 2 * REPOS);

    // A cold store: every slot empty, more repositories to fetch than run at once.
    let cold = env();
    gh.reset_counters();
    let fetcher = fetcher(&gh, &cold);
    let outcome = cold
        .fetch(&fetcher, &lock, FetchOptions::default())
        .unwrap();
    assert_eq!(names(&outcome.slots), names(&sequential_slots));
    assert_eq!(outcome.downloaded.len(), 2 * REPOS);
    for (module, slot) in &outcome.slots {
        assert!(slot.starts_with(cold.store.store_dir()), "{module}");
        assert!(slot.join("SKILL.md").is_file(), "{module}");
        assert!(slot.join("notes/ref.md").is_file(), "{module}");
    }
    // One archive per repository and commit, though two packages each needed it.
    for r in 0..REPOS {
        assert_eq!(
            gh.count(Endpoint::Tarball, "acme", &format!("r{r}")),
            1,
            "acme/r{r}"
        );
    }
    assert_eq!(gh.total(Endpoint::GitHttp), 0);
    assert_eq!(fetcher.downloads(), REPOS);
}

#[test]
fn one_download_per_repository_and_commit_even_for_two_commits_of_one_repository() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "mono");
    for s in 0..4 {
        repo.write(
            &format!("skills/s{s}/SKILL.md"),
            format!("---\nname: s{s}\ndescription: v1\n---\n"),
        );
    }
    let first = repo.commit("v1");
    repo.write(
        "skills/s3/SKILL.md",
        "---\nname: s3\ndescription: v2\n---\n",
    );
    let second = repo.commit("v2");
    let other = gh.repo("acme", "other");
    other.write("SKILL.md", "---\nname: other\ndescription: o\n---\n");
    let other_commit = other.commit("o");
    let text = format!(
        "name = \"demo\"\nversion = \"0.1.0\"\n[dependencies]\n\
         \"github.com/acme/mono/skills/s0\" = {{ commit = \"{first}\" }}\n\
         \"github.com/acme/mono/skills/s1\" = {{ commit = \"{first}\" }}\n\
         \"github.com/acme/mono/skills/s2\" = {{ commit = \"{first}\" }}\n\
         \"github.com/acme/mono/skills/s3\" = {{ commit = \"{second}\" }}\n\
         \"github.com/acme/other\" = {{ commit = \"{other_commit}\" }}\n"
    );
    let sequential = env();
    let (lock, sequential_slots) = lock_of(&gh, &sequential, &text);

    let cold = env();
    gh.reset_counters();
    let fetcher = fetcher(&gh, &cold);
    let outcome = cold
        .fetch(&fetcher, &lock, FetchOptions::default())
        .unwrap();
    assert_eq!(names(&outcome.slots), names(&sequential_slots));
    assert_eq!(
        gh.count(Endpoint::Tarball, "acme", "mono"),
        2,
        "two commits"
    );
    assert_eq!(gh.count(Endpoint::Tarball, "acme", "other"), 1);
    assert_eq!(fetcher.downloads(), 3);
    assert_eq!(
        std::fs::read_to_string(outcome.slots["github.com/acme/mono/skills/s3"].join("SKILL.md"))
            .unwrap(),
        "---\nname: s3\ndescription: v2\n---\n"
    );
}

#[test]
fn a_failing_repository_names_its_package_and_no_package_of_the_lock_is_published() {
    let gh = FakeGitHub::start();
    let (text, commits) = repositories(&gh, 4, 2);
    let sequential = env();
    let (lock, _) = lock_of(&gh, &sequential, &text);

    // acme/r2's archive now breaks an extraction rule (a path leaving the tree): refused, and the
    // git protocol is not tried for a refused download.
    let evil = RawTar::new()
        .dir("acme-r2-0000000/")
        .file("acme-r2-0000000/../escape.md", "outside")
        .finish_gz();
    gh.override_tarball("acme", "r2", &commits[2], evil);
    let cold = env();
    let first = fetcher(&gh, &cold);
    let error = cold
        .fetch(&first, &lock, FetchOptions::default())
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with("cannot fetch github.com/acme/r2/skills/s0: "),
        "{message}"
    );
    assert!(
        message.contains("refusing the download of github.com/acme/r2 at"),
        "{message}"
    );
    // Nothing of the lock is published: no slot, not even those of the repositories that worked.
    for package in &lock.packages {
        assert_eq!(
            PackageStore::slot(cold.store.as_ref(), &package.cache_key).unwrap(),
            None,
            "{}",
            package.module.as_str()
        );
    }
    // No half-extracted tree of the refused archive in the fetcher's scratch space.
    let scratch = cold.home.join("scratch");
    for entry in walkdir::WalkDir::new(&scratch).min_depth(1).max_depth(2) {
        let entry = entry.unwrap();
        assert!(
            !entry.file_name().to_string_lossy().contains("acme-r2-"),
            "{}",
            entry.path().display()
        );
    }
    // The snapshots that did download are kept, so the next attempt fetches only what failed.
    assert_eq!(first.downloads(), 4);
    let kept = RepoId::new("acme", "r0");
    let again = fetcher(&gh, &cold);
    gh.reset_counters();
    again.snapshot(&kept, &commits[0]).unwrap();
    assert_eq!(gh.total(Endpoint::Tarball), 0);
}

#[test]
fn prefetch_answers_in_order_once_per_pair_and_a_missing_repository_fails_alone() {
    let gh = FakeGitHub::start();
    let (_, commits) = repositories(&gh, 3, 1);
    let env = env();
    let fetcher = fetcher(&gh, &env);
    let pair = |r: usize| (RepoId::new("acme", format!("r{r}")), commits[r].clone());
    let missing = (RepoId::new("acme", "gone"), commits[0].clone());
    let wanted = vec![pair(0), pair(1), missing, pair(0), pair(2)];
    let results = fetcher.prefetch(&wanted);
    assert_eq!(results.len(), 5);
    for index in [0, 1, 3, 4] {
        let snapshot = results[index].as_ref().unwrap();
        assert_eq!(snapshot.repo, wanted[index].0, "{index}");
        assert!(snapshot.root.join("README.md").is_file(), "{index}");
    }
    let error = results[2].as_ref().unwrap_err().to_string();
    assert!(
        error.starts_with("cannot download github.com/acme/gone at"),
        "{error}"
    );
    // acme/r0 asked twice: one snapshot, one download.
    assert!(Arc::ptr_eq(
        results[0].as_ref().unwrap(),
        results[3].as_ref().unwrap()
    ));
    assert_eq!(gh.count(Endpoint::Tarball, "acme", "r0"), 1);
    assert_eq!(fetcher.downloads(), 4);
}

#[test]
fn resolving_a_committed_lock_on_a_cold_store_fills_every_slot_with_one_download_per_repository() {
    // What `sync` does with a manifest and a committed lock (pins kept): the empty slots are
    // filled before the walk, every repository fetched concurrently and once.
    let gh = FakeGitHub::start();
    const REPOS: usize = 5;
    let (text, _) = repositories(&gh, REPOS, 3);
    let author = env();
    let (lock, authored_slots) = lock_of(&gh, &author, &text);

    let cold = env();
    gh.reset_counters();
    let fetcher = fetcher(&gh, &cold);
    let manifest = Manifest::parse(&text, Path::new("agentpack.toml")).unwrap();
    let outcome = resolve(
        &manifest,
        Some(&lock),
        &UpdatePolicy::KeepPins,
        &cold.resolve_env(&fetcher),
    )
    .unwrap();
    assert!(outcome.lock.records_same_as(&lock));
    assert_eq!(names(&outcome.slots), names(&authored_slots));
    for r in 0..REPOS {
        assert_eq!(
            gh.count(Endpoint::Tarball, "acme", &format!("r{r}")),
            1,
            "acme/r{r}"
        );
    }
    assert_eq!(fetcher.downloads(), REPOS);
    for package in &lock.packages {
        let slot = PackageStore::slot(cold.store.as_ref(), &package.cache_key)
            .unwrap()
            .unwrap();
        assert!(
            slot.join("notes/ref.md").is_file(),
            "{}",
            package.module.as_str()
        );
    }
}

#[test]
fn a_package_that_does_not_match_the_lock_is_refused_and_the_rest_of_its_batch_is_published() {
    let gh = FakeGitHub::start();
    let (text, _) = repositories(&gh, 2, 3);
    let author = env();
    let (mut lock, _) = lock_of(&gh, &author, &text);
    // The lock says acme/r1/skills/s1 holds what acme/r1/skills/s0 holds.
    let index = |module: &str| {
        lock.packages
            .iter()
            .position(|p| p.module.as_str() == module)
            .unwrap()
    };
    let (s0, s1) = (
        index("github.com/acme/r1/skills/s0"),
        index("github.com/acme/r1/skills/s1"),
    );
    lock.packages[s1].content_hash = lock.packages[s0].content_hash.clone();

    let cold = env();
    let fetcher = fetcher(&gh, &cold);
    let error = cold
        .fetch(&fetcher, &lock, FetchOptions::default())
        .unwrap_err()
        .to_string();
    assert!(error.contains("github.com/acme/r1/skills/s1"), "{error}");
    // Refused: its slot stays empty; every other package of the lock is in the store, verified.
    for package in &lock.packages {
        let slot = PackageStore::slot(cold.store.as_ref(), &package.cache_key).unwrap();
        if package.module.as_str() == "github.com/acme/r1/skills/s1" {
            assert_eq!(slot, None);
            continue;
        }
        let slot = slot.unwrap_or_else(|| panic!("{}", package.module.as_str()));
        assert_eq!(
            cold.store.hash_tree(&slot).unwrap(),
            *package.content_hash.as_ref().unwrap()
        );
    }
}

#[test]
fn a_prefetch_for_packages_extracts_their_paths_and_keeps_the_whole_repository() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "big");
    repo.write(
        "skills/a/SKILL.md",
        "---\nname: a\ndescription: a\n---\nA.\n",
    );
    repo.write(
        "skills/b/SKILL.md",
        "---\nname: b\ndescription: b\n---\nB.\n",
    );
    repo.write("docs/page.md", "documentation\n");
    repo.write(
        ".claude-plugin/marketplace.json",
        r#"{"name":"m","plugins":[]}"#,
    );
    let commit = repo.commit("c");
    let id = RepoId::new("acme", "big");
    let env = env();
    let first = fetcher(&gh, &env);
    let results = first.prefetch_packages(&[(id.clone(), commit.clone(), vec!["skills/a".into()])]);
    let partial = results[0].as_ref().unwrap();
    assert_eq!(partial.only, Some(vec!["skills/a".to_owned()]));
    assert!(partial.root.join("skills/a/SKILL.md").is_file());
    // The catalogs normalization reads at the root come along; nothing else does.
    assert!(partial
        .root
        .join(".claude-plugin/marketplace.json")
        .is_file());
    assert!(!partial.root.join("skills/b").exists());
    assert!(!partial.root.join("docs").exists());

    // Another path of the same commit: the whole tree, from the kept snapshot, no new download.
    gh.reset_counters();
    let b = env.home.join("b");
    first.fetch_package(&id, &commit, "skills/b", &b).unwrap();
    assert!(b.join("SKILL.md").is_file());
    let whole = first.snapshot(&id, &commit).unwrap();
    assert_eq!(whole.only, None);
    assert!(whole.root.join("docs/page.md").is_file());
    assert_eq!(gh.total(Endpoint::Tarball), 0);
    assert_eq!(first.downloads(), 1);

    // The next command takes the whole tree from the kept tarball.
    let next = fetcher(&gh, &env);
    let kept = next.snapshot(&id, &commit).unwrap();
    assert!(kept.root.join("docs/page.md").is_file());
    assert!(kept.root.join("skills/b/SKILL.md").is_file());
    assert_eq!(gh.total(Endpoint::Tarball), 0);
    assert_eq!(next.downloads(), 0);

    // Without a store nothing is kept: the rest of the tree is downloaded again.
    let resolver = Arc::new(
        Resolver::new(github_config(&gh), Arc::new(InMemoryMetadataCache::new())).unwrap(),
    );
    let storeless = SnapshotFetcher::new(resolver, &env.home.join("storeless")).unwrap();
    storeless.prefetch_packages(&[(id.clone(), commit.clone(), vec!["skills/a".into()])]);
    let c = env.home.join("c");
    storeless
        .fetch_package(&id, &commit, "skills/b", &c)
        .unwrap();
    assert!(c.join("SKILL.md").is_file());
    assert_eq!(storeless.downloads(), 2);
}
