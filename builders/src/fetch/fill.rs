//! The concurrent fill of a lock's empty GitHub slots: repositories fetched at once, the packages
//! normalized and published as one store batch that checks each against the lock.
//!
//! It never publishes a package that does not match the lock's content hash, and never takes a
//! package from GitHub once a repository failed (the error names the first package that needed it).

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use agentpack_lockfile::lock::{LockedPackage, Lockfile};
use agentpack_lockfile::validate::{CacheKey, ContentHash};
use rayon::prelude::*;

use crate::github::RepoId;
use crate::package_store::{BatchEntry, BatchEntryError, PackageStore};
use crate::resolve::{fetch_normalized, Fetched, GithubPackage, ResolutionError};
use crate::snapshot::{FetchError, SnapshotFetcher};

/// What [`fill_from_github`] published.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filled {
    /// The slot of every package filled, by module.
    pub slots: BTreeMap<String, PathBuf>,
    /// One per symbolic link the downloads emptied (see [`crate::resolve::Downloaded::warnings`]).
    pub warnings: Vec<String>,
    /// The slot and content hash of every package filled, by cache key (see [`Filled::checked_slot`]).
    checked: BTreeMap<String, (PathBuf, ContentHash)>,
}

impl Filled {
    /// The slot of `cache_key` when this fill published it in this process, the store having
    /// checked what it published against `expected` (the lock's hash): a walk that follows needs no
    /// second hash of it. In-process knowledge only: another command re-hashes the slot.
    pub fn checked_slot(&self, cache_key: &CacheKey, expected: &ContentHash) -> Option<&Path> {
        self.checked
            .get(cache_key.as_str())
            .filter(|(_, hash)| hash == expected)
            .map(|(slot, _)| slot.as_path())
    }
}

/// Fills the empty slots of `lock`'s GitHub packages that have a content hash, from GitHub: the
/// repositories they need are fetched first, all of them concurrently
/// ([`SnapshotFetcher::prefetch_packages`]: kept snapshots checked, missing ones downloaded, each
/// once, extracting only the locked paths of each archive); each repository's packages are copied
/// out of its snapshot and normalized as soon as it is fetched
/// ([`SnapshotFetcher::prefetch_packages_then`]: while the others still download), and all of
/// them are published as one store batch
/// ([`PackageStore::publish_batch`]: one flush for the fill, not one per package or archive), the
/// store checking each published copy against the lock's content hash: that is the one hash of a
/// fresh package, taken while the store reads each file once and adopts it as its blob (the
/// scratch trees are consumed: each repository's extracted tree is released as soon as its
/// packages are copied out, [`SnapshotFetcher::release`], so their files have no second name).
/// The snapshots the prefetch downloaded are kept in the store after the batch
/// ([`SnapshotFetcher::place_kept`]), inside its flush. When a repository cannot be fetched, the
/// first package of the lock that needed it names the error and nothing is published from GitHub;
/// a package whose download does not match the lock is refused
/// ([`ResolutionError::FetchedMismatch`]) after the others of its batch are published.
/// Filled slots (verified, restored or repaired one by one by the callers) and packages without a
/// content hash are not looked at. `scratch` is a directory on the store's filesystem. `fetch_lock`
/// and the resolver (pins kept) call it before they walk the lock.
pub fn fill_from_github(
    lock: &Lockfile,
    fetcher: &SnapshotFetcher,
    store: &dyn PackageStore,
    scratch: &Path,
) -> Result<Filled, ResolutionError> {
    let filled = fill_groups(lock, fetcher, store, scratch);
    // Whatever happened to the packages, the downloads are kept (their warnings go to the fetcher).
    fetcher.place_kept();
    filled
}

/// [`fill_from_github`] but for keeping the downloads.
fn fill_groups(
    lock: &Lockfile,
    fetcher: &SnapshotFetcher,
    store: &dyn PackageStore,
    scratch: &Path,
) -> Result<Filled, ResolutionError> {
    // The packages to fill, by (repository, commit) in the order of the lock.
    let mut groups: Vec<((RepoId, String), Vec<&LockedPackage>)> = Vec::new();
    // The index in `groups` of each (repository key, commit).
    let mut group_of: HashMap<(String, String), usize> = HashMap::new();
    for package in &lock.packages {
        if !package.is_github() || package.content_hash.is_none() {
            continue;
        }
        if store.slot(&package.cache_key)?.is_some() {
            continue;
        }
        let repo = RepoId::new(package.owner.clone(), package.repo.clone());
        let commit = package.commit.as_str().to_ascii_lowercase();
        match group_of.entry((repo.key(), commit.clone())) {
            Entry::Occupied(index) => groups[*index.get()].1.push(package),
            Entry::Vacant(slot) => {
                slot.insert(groups.len());
                groups.push(((repo, commit), vec![package]));
            }
        }
    }
    if groups.is_empty() {
        return Ok(Filled::default());
    }
    tracing::debug!(
        repositories = groups.len(),
        "fetching the repositories of empty slots concurrently"
    );
    // Only the locked paths of each archive are extracted (the kept snapshot holds it whole).
    let wanted: Vec<(RepoId, String, Vec<String>)> = groups
        .iter()
        .map(|((repo, commit), packages)| {
            let paths = packages.iter().map(|p| p.path.clone()).collect();
            (repo.clone(), commit.clone(), paths)
        })
        .collect();
    let dir = scratch.join("from-github");
    fs_err::create_dir_all(&dir).map_err(|source| ResolutionError::Io {
        path: dir.clone(),
        cause: source,
    })?;
    // Every package, numbered in the order of the groups (its scratch tree is `dir/<number>`).
    let jobs: Vec<(&RepoId, &str, &LockedPackage)> = groups
        .iter()
        .flat_map(|((repo, commit), packages)| {
            packages
                .iter()
                .map(move |package| (repo, commit.as_str(), *package))
        })
        .collect();
    let mut first_job = Vec::with_capacity(groups.len());
    let mut next = 0;
    for (_, packages) in &groups {
        first_job.push(next);
        next += packages.len();
    }
    // Each repository's packages are copied out and normalized (in parallel) as soon as it is
    // fetched, while the other repositories are still downloading.
    let mut normalized: Vec<Option<NormalizedPackage>> = (0..jobs.len()).map(|_| None).collect();
    let mut normalize_group = |group: usize| {
        let range = first_job[group]..first_job[group] + groups[group].1.len();
        let results: Vec<NormalizedPackage> = jobs[range.clone()]
            .par_iter()
            .zip(range.clone())
            .map(|(job, index)| normalize_one(fetcher, *job, &dir.join(index.to_string())))
            .collect();
        for (slot, result) in normalized[range].iter_mut().zip(results) {
            *slot = Some(result);
        }
        // Its packages are copied out: the extracted tree goes now (while the other repositories
        // still download), so the packages' files have no second name and the store can adopt
        // them as blobs. A later use of the pair extracts it again.
        let ((repo, commit), _) = &groups[group];
        fetcher.release(repo, commit);
    };
    let fetched = fetcher.prefetch_packages_then(&wanted, &mut normalize_group);
    for (result, (_, packages)) in fetched.into_iter().zip(&groups) {
        if let Err(error) = result {
            return Err(name_package(
                packages[0].module.as_str(),
                ResolutionError::Fetch(Box::new(error)),
            ));
        }
    }
    // Every fetched repository went through `normalize_group`; a package it did not reach would be
    // normalized here, from the snapshot the fetcher keeps.
    let normalized: Vec<NormalizedPackage> = normalized
        .into_iter()
        .zip(&jobs)
        .enumerate()
        .map(|(index, (done, job))| {
            done.unwrap_or_else(|| normalize_one(fetcher, *job, &dir.join(index.to_string())))
        })
        .collect();
    publish_fetched(store, &jobs, normalized)
}

/// A package copied out of its repository snapshot and normalized: its scratch tree and what
/// fetching it found, or why it could not be.
type NormalizedPackage = Result<(PathBuf, Fetched), ResolutionError>;

/// One package copied out of its repository snapshot into `tree` and normalized.
fn normalize_one(
    fetcher: &SnapshotFetcher,
    (repo, commit, package): (&RepoId, &str, &LockedPackage),
    tree: &Path,
) -> NormalizedPackage {
    let module = package.module.as_str();
    tracing::debug!(module, commit, "source: GitHub (no cache slot)");
    let github = GithubPackage {
        fetcher,
        module,
        repo,
        commit,
        path: &package.path,
    };
    let fetched = fetch_normalized(github, tree)?;
    Ok((tree.to_path_buf(), fetched))
}

/// The packages of every repository snapshot, normalized (`fetched`, one per job, in order),
/// published as one store batch (one flush for the whole fill, the kept snapshots' included),
/// which checks each against the lock.
fn publish_fetched(
    store: &dyn PackageStore,
    jobs: &[(&RepoId, &str, &LockedPackage)],
    fetched: Vec<NormalizedPackage>,
) -> Result<Filled, ResolutionError> {
    // Everything that was fetched is published, even when another package failed.
    let mut ready = Vec::new();
    let mut first_error = None;
    for ((_, commit, package), result) in jobs.iter().zip(fetched) {
        match (result, &package.content_hash) {
            (Ok((tree, fetched)), Some(content_hash)) => {
                ready.push((*package, *commit, tree, fetched, content_hash))
            }
            (Err(error), _) => {
                first_error.get_or_insert_with(|| name_package(package.module.as_str(), error));
            }
            (Ok(_), None) => {}
        }
    }
    let entries: Vec<BatchEntry<'_>> = ready
        .iter()
        .map(|(package, _, tree, _, content_hash)| BatchEntry {
            cache_key: &package.cache_key,
            label: package.module.as_str(),
            tree,
            content_hash,
            // The scratch trees of this fill: the batch consumes them.
            adopt: true,
        })
        .collect();
    let published = store.publish_batch(&entries)?;
    let mut filled = Filled::default();
    for ((package, commit, _, fetched, content_hash), slot) in ready.iter().zip(published) {
        let module = package.module.as_str();
        let slot = match slot {
            Ok(slot) => slot,
            Err(BatchEntryError::Mismatch { actual }) => {
                first_error.get_or_insert_with(|| ResolutionError::FetchedMismatch {
                    module: module.to_owned(),
                    expected: content_hash.to_string(),
                    actual: actual.to_string(),
                    commit: (*commit).to_owned(),
                });
                continue;
            }
            Err(BatchEntryError::Store(error)) => {
                first_error.get_or_insert(ResolutionError::Store(error));
                continue;
            }
        };
        store.record_executables(&slot, &fetched.executables)?;
        filled.warnings.extend(fetched.warnings(module));
        filled.checked.insert(
            package.cache_key.as_str().to_owned(),
            (slot.clone(), (*content_hash).clone()),
        );
        filled.slots.insert(module.to_owned(), slot);
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(filled),
    }
}

/// The warning of a best-effort [`fill_from_github`] that failed (the resolver's walk then fetches
/// what it still needs one by one, and reports a failure that still matters as an error).
pub fn fill_failed_warning(error: &ResolutionError) -> String {
    let text = error.to_string();
    let mut lines = text.lines();
    let mut warning = format!(
        "warning: the concurrent fetch of the locked packages failed; each package still needed was fetched on its own\n  cause     {}",
        lines.next().unwrap_or_default()
    );
    let mut has_fix = false;
    for line in lines {
        has_fix |= line.trim_start().starts_with("fix ");
        warning.push('\n');
        if !line.starts_with(' ') {
            warning.push_str("  ");
        }
        warning.push_str(line);
    }
    if !has_fix {
        warning.push_str("\n  fix       check the network and the package named; `agentpack sync -v` shows each download");
    }
    warning
}

/// A download error of `module`'s repository, naming the package (other errors as they are).
pub(super) fn name_package(module: &str, error: ResolutionError) -> ResolutionError {
    match error {
        ResolutionError::Fetch(fetch) if !matches!(*fetch, FetchError::Package { .. }) => {
            ResolutionError::Fetch(Box::new(FetchError::Package {
                module: module.to_owned(),
                cause: fetch,
            }))
        }
        other => other,
    }
}
