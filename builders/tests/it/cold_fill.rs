//! The cold fill of a lock's empty GitHub slots (`fetch::fill_from_github`, run by a sync that keeps
//! its pins): each package hashed once (by the store, on the copy it publishes), the walk that follows
//! trusting what the fill published in this process, the downloads kept in the store, and a failed
//! fill reported as a warning.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::fetch_env::{env, github_config, Env};
use agentpack_builders::github::metadata_cache::InMemoryMetadataCache;
use agentpack_builders::github::resolver::Resolver;
use agentpack_builders::github::RepoId;
use agentpack_builders::package_store::{
    BatchEntry, BatchEntryError, OnExisting, PackageStore, ScratchDir, SlotCheck, StoreAccessError,
    TreeMatch,
};
use agentpack_builders::resolve::{resolve, ResolveEnv, UpdatePolicy};
use agentpack_builders::snapshot::{snapshot_name, SnapshotFetcher};
use agentpack_lockfile::manifest::Manifest;
use agentpack_lockfile::validate::{CacheKey, ContentHash};
use agentpack_store::Store;
use agentpack_test_support::FakeGitHub;

const HEAD: &str = "name = \"demo\"\nversion = \"0.1.0\"\n";

/// The real store, counting the calls that hash a package tree, and noting what each batch is
/// given: every regular file of its trees (module, package-relative path, inode, link count) and
/// whether the store may adopt it.
struct Counting {
    store: Arc<Store>,
    hashes: AtomicUsize,
    slot_checks: AtomicUsize,
    batched: std::sync::Mutex<Vec<BatchedFile>>,
}

/// A file of a tree given to a batch: module, package-relative path, inode, link count, adoptable.
type BatchedFile = (String, String, u64, u64, bool);

impl Counting {
    fn new(store: &Arc<Store>) -> Counting {
        Counting {
            store: Arc::clone(store),
            hashes: AtomicUsize::new(0),
            slot_checks: AtomicUsize::new(0),
            batched: std::sync::Mutex::new(Vec::new()),
        }
    }
}

impl PackageStore for Counting {
    fn hash_tree(&self, dir: &Path) -> Result<ContentHash, StoreAccessError> {
        self.hashes.fetch_add(1, Ordering::SeqCst);
        self.store.hash_tree(dir)
    }
    fn verify_tree(
        &self,
        dir: &Path,
        expected: &ContentHash,
    ) -> Result<TreeMatch, StoreAccessError> {
        self.hashes.fetch_add(1, Ordering::SeqCst);
        PackageStore::verify_tree(self.store.as_ref(), dir, expected)
    }
    fn check_slot(
        &self,
        cache_key: &CacheKey,
        expected: &ContentHash,
    ) -> Result<SlotCheck, StoreAccessError> {
        self.slot_checks.fetch_add(1, Ordering::SeqCst);
        self.store.check_slot(cache_key, expected)
    }
    fn slot(&self, cache_key: &CacheKey) -> Result<Option<PathBuf>, StoreAccessError> {
        PackageStore::slot(self.store.as_ref(), cache_key)
    }
    fn mark_rebuildable(&self, cache_key: &CacheKey) -> Result<(), StoreAccessError> {
        self.store.mark_rebuildable(cache_key)
    }
    fn publish(
        &self,
        cache_key: &CacheKey,
        label: &str,
        tree: &Path,
        content_hash: &ContentHash,
        on_existing: OnExisting,
    ) -> Result<PathBuf, StoreAccessError> {
        self.store
            .publish(cache_key, label, tree, content_hash, on_existing)
    }
    fn publish_batch(
        &self,
        entries: &[BatchEntry<'_>],
    ) -> Result<Vec<Result<PathBuf, BatchEntryError>>, StoreAccessError> {
        use std::os::unix::fs::MetadataExt;
        for entry in entries {
            for file in walk_files(entry.tree) {
                let meta = std::fs::symlink_metadata(entry.tree.join(&file)).unwrap();
                self.batched.lock().unwrap().push((
                    entry.label.to_owned(),
                    file,
                    meta.ino(),
                    meta.nlink(),
                    entry.adopt,
                ));
            }
        }
        self.store.publish_batch(entries)
    }
    fn scratch(&self) -> Result<ScratchDir, StoreAccessError> {
        self.store.scratch()
    }
    fn record_executables(
        &self,
        published: &Path,
        executables: &std::collections::BTreeSet<String>,
    ) -> Result<(), StoreAccessError> {
        self.store.record_executables(published, executables)
    }
}

fn fetcher(gh: &FakeGitHub, env: &Env) -> SnapshotFetcher {
    let resolver =
        Arc::new(Resolver::new(github_config(gh), Arc::new(InMemoryMetadataCache::new())).unwrap());
    SnapshotFetcher::new(resolver, &env.home.join("scratch"))
        .unwrap()
        .with_store(Arc::clone(&env.store))
}

fn resolve_with(
    env: &Env,
    fetcher: &SnapshotFetcher,
    store: &dyn PackageStore,
    text: &str,
    old: Option<&agentpack_lockfile::lock::Lockfile>,
) -> Result<agentpack_builders::resolve::ResolveOutcome, agentpack_builders::resolve::ResolutionError>
{
    let manifest = Manifest::parse(text, Path::new("agentpack.toml")).unwrap();
    let resolve_env = ResolveEnv {
        store,
        ..env.resolve_env(fetcher)
    };
    resolve(&manifest, old, &UpdatePolicy::KeepPins, &resolve_env)
}

/// Two repositories, three packages; returns the manifest text and the commits.
fn two_repositories(gh: &FakeGitHub) -> (String, String, String) {
    let skills = gh.repo("acme", "skills");
    skills.write("a/SKILL.md", "---\nname: a\ndescription: a\n---\nA.\n");
    skills.write("b/SKILL.md", "---\nname: b\ndescription: b\n---\nB.\n");
    let skills_commit = skills.commit("one");
    let other = gh.repo("acme", "other");
    // At the root: a tampered archive (an extra root file) changes it.
    other.write("SKILL.md", "---\nname: c\ndescription: c\n---\nC.\n");
    let other_commit = other.commit("one");
    let text = format!(
        "{HEAD}[dependencies]\n\"github.com/acme/skills/a\" = \"{skills_commit}\"\n\"github.com/acme/skills/b\" = \"{skills_commit}\"\n\"github.com/acme/other\" = \"{other_commit}\"\n"
    );
    (text, skills_commit, other_commit)
}

/// The lock an author's machine writes for `text`, in a home of its own.
fn authored_lock(gh: &FakeGitHub, text: &str) -> agentpack_lockfile::lock::Lockfile {
    let author = env();
    resolve_with(
        &author,
        &fetcher(gh, &author),
        author.store.as_ref(),
        text,
        None,
    )
    .unwrap()
    .lock
}

#[test]
fn a_cold_sync_hashes_each_package_once_and_keeps_both_downloads() {
    let gh = FakeGitHub::start();
    let (text, skills_commit, other_commit) = two_repositories(&gh);
    let lock = authored_lock(&gh, &text);

    // Another machine: the committed lock, an empty store.
    let cold = env();
    let counting = Counting::new(&cold.store);
    let fetcher = fetcher(&gh, &cold);
    let outcome = resolve_with(&cold, &fetcher, &counting, &text, Some(&lock)).unwrap();
    assert_eq!(outcome.lock, lock);
    assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
    // Checked by the store when it published them; neither the fill nor the walk hashed again.
    assert_eq!(counting.hashes.load(Ordering::SeqCst), 0);
    assert_eq!(counting.slot_checks.load(Ordering::SeqCst), 0);
    for package in &lock.packages {
        let slot = &outcome.slots[package.module.as_str()];
        let hash = PackageStore::hash_tree(cold.store.as_ref(), slot).unwrap();
        assert_eq!(Some(hash), package.content_hash, "{}", package.module);
    }
    // Both repositories downloaded once and kept (staged during the fetch, named after the batch).
    assert_eq!(fetcher.downloads(), 2);
    for (repo, commit) in [("skills", &skills_commit), ("other", &other_commit)] {
        let name = snapshot_name(&RepoId::new("acme", repo), commit);
        assert!(cold.store.get(&name).is_some(), "acme/{repo} kept");
    }
    let hidden: Vec<String> = std::fs::read_dir(cold.store.store_dir())
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".pub-"))
        .collect();
    assert!(hidden.is_empty(), "{hidden:?}");

    // The next command (another process, as far as it knows) checks every slot again.
    let next = Counting::new(&cold.store);
    let again = resolve_with(&cold, &fetcher, &next, &text, Some(&lock)).unwrap();
    assert_eq!(again.lock, lock);
    assert_eq!(next.slot_checks.load(Ordering::SeqCst), 3);
}

#[test]
fn a_failed_fill_is_a_warning_when_the_walk_no_longer_needs_the_package() {
    let gh = FakeGitHub::start();
    let (text, _, other_commit) = two_repositories(&gh);
    let lock = authored_lock(&gh, &text);
    // acme/other's archive no longer matches the lock, and the manifest no longer wants it.
    gh.tamper_tarball("acme", "other", &other_commit);
    let without_c: String = text
        .lines()
        .filter(|line| !line.contains("acme/other"))
        .map(|line| format!("{line}\n"))
        .collect();
    let cold = env();
    let outcome = resolve_with(
        &cold,
        &fetcher(&gh, &cold),
        cold.store.as_ref(),
        &without_c,
        Some(&lock),
    )
    .unwrap();
    assert_eq!(outcome.lock.packages.len(), 2);
    let warning = outcome
        .warnings
        .iter()
        .find(|w| w.contains("concurrent fetch of the locked packages failed"))
        .unwrap_or_else(|| panic!("{:?}", outcome.warnings));
    assert!(
        warning.contains("fetched content does not match pack.lock: github.com/acme/other"),
        "{warning}"
    );
    assert!(
        warning.contains("\n  cause     fetched content does not match"),
        "{warning}"
    );
    assert_eq!(warning.matches("\n  fix       ").count(), 1, "{warning}");
}

/// The regular files below `root`, relative.
fn walk_files(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                let relative = entry.path().strip_prefix(root).unwrap().to_owned();
                files.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    files
}

#[test]
fn a_cold_fill_adopts_the_extracted_files_as_blobs_and_the_store_verifies() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let gh = FakeGitHub::start();
    let (text, _, _) = two_repositories(&gh);
    let lock = authored_lock(&gh, &text);
    let cold = env();
    // The link mode probed first (as any earlier publication in the store does).
    let warm = cold.home.join("warm");
    std::fs::create_dir_all(&warm).unwrap();
    std::fs::write(warm.join("warm.md"), "probe\n").unwrap();
    cold.store.publish_tree(&warm, "warm", None).unwrap();
    let counting = Counting::new(&cold.store);
    let fetcher = fetcher(&gh, &cold);
    let outcome = resolve_with(&cold, &fetcher, &counting, &text, Some(&lock)).unwrap();
    assert_eq!(outcome.lock, lock);
    let seen = counting.batched.into_inner().unwrap();
    assert!(!seen.is_empty());
    let mut adopted = 0;
    for (module, file, inode, links, adopt) in &seen {
        assert!(adopt, "{module}: the fill's scratch trees are adoptable");
        // The extracted tree was released: the copied-out file has no other name.
        assert_eq!(*links, 1, "{module}/{file}");
        let slot = &outcome.slots[module.as_str()];
        let meta = std::fs::symlink_metadata(slot.join(file)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o222, 0, "{module}/{file}");
        if meta.len() > 0 && meta.ino() == *inode {
            adopted += 1;
        }
    }
    // Every non-empty file's blob was new: each one is the extracted file itself.
    let non_empty = seen
        .iter()
        .filter(|(module, file, ..)| {
            std::fs::metadata(outcome.slots[module.as_str()].join(file))
                .unwrap()
                .len()
                > 0
        })
        .count();
    assert_eq!(adopted, non_empty, "{seen:?}");
    for package in &lock.packages {
        let slot = &outcome.slots[package.module.as_str()];
        let hash = PackageStore::hash_tree(cold.store.as_ref(), slot).unwrap();
        assert_eq!(Some(hash), package.content_hash, "{}", package.module);
    }
    let report =
        agentpack_store::verify(&cold.store, agentpack_store::VerifyOptions::default()).unwrap();
    assert!(report.is_clean(), "{report:?}");
    // A package of a released repository asked for again comes from the kept snapshot.
    let skills_a = lock
        .packages
        .iter()
        .find(|package| package.module.as_str() == "github.com/acme/skills/a")
        .unwrap();
    let again = cold.home.join("again");
    fetcher
        .fetch_package(
            &RepoId::new("acme", "skills"),
            skills_a.commit.as_str(),
            "a",
            &again,
        )
        .unwrap();
    assert!(again.join("SKILL.md").is_file());
}
