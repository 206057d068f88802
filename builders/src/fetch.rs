//! Fetching a lock into the store: every locked package ends up in a verified slot, or the command stops.
//!
//! For each `[[packages]]` entry: a filled slot is compared with the lock's `content_hash`; a mismatch
//! (an edit through a staged hard link) is restored from a verified source, the kept repo snapshot or
//! a fresh download, and the files it replaced are named in a warning; only when no source can be
//! reached does it stop everything (with `repair` the slot is re-downloaded, verified and replaced,
//! and reported as repaired); an empty slot is filled
//! from a download (once per repository and commit), normalized and verified before it is published.
//! Empty slots are filled first by [`fill_from_github`]: their repositories fetched concurrently
//! ([`crate::snapshot::SnapshotFetcher::prefetch`]), the packages of each repository snapshot
//! published as one store batch (one flush per archive); a repository that fails stops the fetch
//! before any package is taken from GitHub (what substituters served is already in place), naming
//! the first package that needed it.
//! Path and `local/` packages are re-copied every time; their new pins are returned for the lock.
//! Locks without content hashes (version 2) still load: their packages are fetched unverified and
//! named in a warning. Work directories that killed runs left in the store's `.tmp` (partial
//! downloads, half-extracted trees) are removed first ([`crate::leftovers`]). Never rewrites the
//! lock and never prints.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agentpack_lockfile::lock::{LockedPackage, Lockfile};
use agentpack_lockfile::validate::ContentHash;
use rayon::prelude::*;

use crate::github::RepoId;
use crate::local_package;
use crate::normalize::{self, NormalizeContext};
use crate::package_store::{BatchEntry, PackageStore, SlotCheck};
use crate::resolve::{download_normalized, ResolutionError};
use crate::snapshot::{FetchError, SnapshotFetcher};

/// What fetching may do besides filling empty slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FetchOptions {
    /// Re-download and replace slots that fail verification (`sync --repair`).
    pub repair: bool,
}

/// One slot replaced by `repair`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repaired {
    /// The module.
    pub module: String,
    /// The slot.
    pub cache: PathBuf,
    /// What the slot held.
    pub old: ContentHash,
    /// What it holds now (the lock's hash).
    pub new: ContentHash,
}

/// The result of fetching a lock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchOutcome {
    /// The verified slot of every package, by module.
    pub slots: BTreeMap<String, PathBuf>,
    /// Modules whose slot was downloaded in this run.
    pub downloaded: Vec<String>,
    /// Slots replaced by `repair` (report old and new digests on stderr).
    pub repaired: Vec<Repaired>,
    /// Path and `local/` entries whose copy changed: the entries the lock should now hold.
    pub updated_entries: Vec<LockedPackage>,
    /// Modules without a content hash (unverified), for the one-line warning.
    pub unverified: Vec<String>,
    /// Other warnings.
    pub warnings: Vec<String>,
    /// Work directories of dead processes removed from the store's `.tmp` (see [`crate::leftovers`]).
    pub leftovers_removed: Vec<PathBuf>,
}

enum One {
    Verified(PathBuf),
    Downloaded(PathBuf),
    Repaired(PathBuf, Repaired),
    Updated(PathBuf, LockedPackage),
    Unverified(PathBuf, bool),
    Restored(PathBuf, String),
}

/// Ensures every package of `lock` is in the store (see the module docs).
pub fn fetch_lock(
    lock: &Lockfile,
    project_root: &Path,
    agentpack_home: &Path,
    fetcher: &SnapshotFetcher,
    store: &dyn PackageStore,
    options: FetchOptions,
) -> Result<FetchOutcome, ResolutionError> {
    lock.check_integrity()
        .map_err(|e| ResolutionError::Invalid(e.to_string()))?;
    let scratch = store.scratch()?;
    // Our own work directory sits in the store's `.tmp`: leftovers of killed runs sit beside it.
    let swept = crate::leftovers::sweep_beside(scratch.path());
    // Substituters first: what they serve verified is not downloaded from GitHub.
    let substituted =
        crate::substitute::fill_from_substituters(lock, fetcher, store, scratch.path())?;
    let filled = fill_from_github(lock, fetcher, store, scratch.path())?;
    let results: Vec<(String, Result<One, ResolutionError>, Vec<String>)> = lock
        .packages
        .par_iter()
        .enumerate()
        .map(|(index, package)| {
            if let Some(slot) = filled.slots.get(package.module.as_str()) {
                let module = package.module.as_str().to_owned();
                return (module, Ok(One::Downloaded(slot.clone())), Vec::new());
            }
            let tree = scratch.path().join(index.to_string());
            let (result, warnings) =
                match fetch_local(package, project_root, agentpack_home, store, &tree) {
                    Ok(Some((one, warnings))) => (Ok(one), warnings),
                    Ok(None) => (
                        fetch_one(package, fetcher, store, options, &tree),
                        Vec::new(),
                    ),
                    Err(error) => (Err(error), Vec::new()),
                };
            (package.module.as_str().to_owned(), result, warnings)
        })
        .collect();
    let mut outcome = FetchOutcome {
        leftovers_removed: swept.removed,
        warnings: swept.warnings,
        ..FetchOutcome::default()
    };
    outcome.warnings.extend(filled.warnings);
    for (module, result, warnings) in results {
        outcome.warnings.extend(warnings);
        let slot = match result.map_err(|error| name_package(&module, error))? {
            One::Verified(slot) => slot,
            One::Downloaded(slot) => {
                outcome.downloaded.push(module.clone());
                slot
            }
            One::Repaired(slot, repaired) => {
                outcome.repaired.push(repaired);
                slot
            }
            One::Updated(slot, entry) => {
                outcome.updated_entries.push(entry);
                slot
            }
            One::Restored(slot, warning) => {
                outcome.warnings.push(warning);
                slot
            }
            One::Unverified(slot, downloaded) => {
                outcome.unverified.push(module.clone());
                if downloaded {
                    outcome.downloaded.push(module.clone());
                }
                slot
            }
        };
        outcome.slots.insert(module, slot);
    }
    outcome.downloaded.extend(substituted);
    // A kept repo snapshot that was changed, or a download that could not be kept.
    outcome.warnings.extend(fetcher.take_warnings());
    Ok(outcome)
}

/// What [`fill_from_github`] published.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filled {
    /// The slot of every package filled, by module.
    pub slots: BTreeMap<String, PathBuf>,
    /// One per symbolic link the downloads emptied (see [`crate::resolve::Downloaded::warnings`]).
    pub warnings: Vec<String>,
}

/// Fills the empty slots of `lock`'s GitHub packages that have a content hash, from GitHub: the
/// repositories they need are fetched first, all of them concurrently
/// ([`SnapshotFetcher::prefetch_packages`]: kept snapshots checked, missing ones downloaded, each
/// once, extracting only the locked paths of each archive), then every package is copied out of its snapshot, normalized and checked against the lock, and
/// the packages of each repository snapshot are published as one store batch
/// ([`PackageStore::publish_batch`]: one flush per archive, not per package). When a repository
/// cannot be fetched, the first package of the lock that needed it names the error and nothing is
/// published from GitHub; a package whose download does not match the lock is refused
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
    // The packages to fill, by (repository, commit) in the order of the lock.
    let mut groups: Vec<((RepoId, String), Vec<&LockedPackage>)> = Vec::new();
    for package in &lock.packages {
        if !package.is_github() || package.content_hash.is_none() {
            continue;
        }
        if store.slot(&package.cache_key)?.is_some() {
            continue;
        }
        let repo = RepoId::new(package.owner.clone(), package.repo.clone());
        let commit = package.commit.as_str().to_ascii_lowercase();
        match groups
            .iter_mut()
            .find(|((r, c), _)| r.key() == repo.key() && *c == commit)
        {
            Some((_, packages)) => packages.push(package),
            None => groups.push(((repo, commit), vec![package])),
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
    for (result, (_, packages)) in fetcher.prefetch_packages(&wanted).into_iter().zip(&groups) {
        if let Err(error) = result {
            return Err(name_package(
                packages[0].module.as_str(),
                ResolutionError::Fetch(Box::new(error)),
            ));
        }
    }
    let dir = scratch.join("from-github");
    fs_err::create_dir_all(&dir).map_err(|source| ResolutionError::Io {
        path: dir.clone(),
        cause: source,
    })?;
    let filled: Vec<Result<Filled, ResolutionError>> = groups
        .par_iter()
        .enumerate()
        .map(|(group, ((repo, commit), packages))| {
            fill_group(
                fetcher,
                store,
                repo,
                commit,
                packages,
                &dir.join(group.to_string()),
            )
        })
        .collect();
    let mut all = Filled::default();
    for group in filled {
        let group = group?;
        all.slots.extend(group.slots);
        all.warnings.extend(group.warnings);
    }
    Ok(all)
}

/// The packages of one repository snapshot: copied out, normalized and checked in parallel (each
/// into `dir/<index>`), then published as one batch.
fn fill_group(
    fetcher: &SnapshotFetcher,
    store: &dyn PackageStore,
    repo: &RepoId,
    commit: &str,
    packages: &[&LockedPackage],
    dir: &Path,
) -> Result<Filled, ResolutionError> {
    let downloaded: Vec<Result<(PathBuf, crate::resolve::Downloaded), ResolutionError>> = packages
        .par_iter()
        .enumerate()
        .map(|(index, package)| {
            let module = package.module.as_str();
            let tree = dir.join(index.to_string());
            tracing::debug!(module, commit, "source: GitHub (no cache slot)");
            let downloaded =
                download_normalized(fetcher, store, module, repo, commit, &package.path, &tree)?;
            if let Some(expected) = &package.content_hash {
                downloaded.check_matches(store, &tree, expected, module, commit)?;
            }
            Ok((tree, downloaded))
        })
        .collect();
    // Everything that verified is published, even when another package of the batch failed.
    let mut entries = Vec::new();
    let mut verified = Vec::new();
    let mut first_error = None;
    for (package, result) in packages.iter().zip(downloaded) {
        match (result, &package.content_hash) {
            (Ok((tree, downloaded)), Some(content_hash)) => {
                verified.push((package, tree, downloaded, content_hash))
            }
            (Err(error), _) => {
                first_error.get_or_insert_with(|| name_package(package.module.as_str(), error));
            }
            (Ok(_), None) => {}
        }
    }
    for (package, tree, _, content_hash) in &verified {
        entries.push(BatchEntry {
            cache_key: &package.cache_key,
            label: package.module.as_str(),
            tree,
            content_hash,
        });
    }
    let published = store.publish_batch(&entries)?;
    let mut filled = Filled::default();
    for ((package, _, downloaded, _), slot) in verified.iter().zip(published) {
        let module = package.module.as_str();
        let slot = slot?;
        store.record_executables(&slot, &downloaded.executables)?;
        filled.warnings.extend(downloaded.warnings(module));
        filled.slots.insert(module.to_owned(), slot);
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(filled),
    }
}

/// A download error of `module`'s repository, naming the package (other errors as they are).
fn name_package(module: &str, error: ResolutionError) -> ResolutionError {
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

/// A package `sync --verify-only` found wrong in the store (nothing was fetched to find it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotProblem {
    /// The slot is empty or the store path it named was deleted.
    Missing {
        /// The module.
        module: String,
        /// The lock's cache key.
        cache_key: String,
    },
    /// The slot's tree no longer hashes to the lock's content hash.
    Mismatch {
        /// The module.
        module: String,
        /// The slot.
        cache: PathBuf,
        /// The lock's hash.
        expected: ContentHash,
        /// What the slot holds.
        actual: ContentHash,
    },
}

impl std::fmt::Display for SlotProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlotProblem::Missing { module, cache_key } => write!(
                f,
                "missing   {module}: no store path for cache key {cache_key} (deleted?)"
            ),
            SlotProblem::Mismatch {
                module,
                cache,
                expected,
                actual,
            } => write!(
                f,
                "damaged   {module}: {} holds {actual}, pack.lock says {expected}",
                cache.display()
            ),
        }
    }
}

/// What [`check_lock`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckOutcome {
    /// Packages whose store path is missing or does not match the lock.
    pub problems: Vec<SlotProblem>,
    /// Modules without a content hash whose slot is filled (present, unverified).
    pub unverified: Vec<String>,
}

/// Checks every package of `lock` against the store without fetching, copying or publishing
/// anything (`sync --verify-only`): each slot is re-hashed against the lock's content hash, and a
/// slot whose store path is gone is reported, never filled again. Path and `local/` packages are
/// checked like any other: the lock's hash against their store copy.
pub fn check_lock(
    lock: &Lockfile,
    store: &dyn PackageStore,
) -> Result<CheckOutcome, ResolutionError> {
    lock.check_integrity()
        .map_err(|e| ResolutionError::Invalid(e.to_string()))?;
    let checked: Vec<Result<(Option<SlotProblem>, bool), ResolutionError>> = lock
        .packages
        .par_iter()
        .map(|package| {
            let module = package.module.as_str().to_owned();
            let missing = || SlotProblem::Missing {
                module: module.clone(),
                cache_key: package.cache_key.as_str().to_owned(),
            };
            let Some(expected) = &package.content_hash else {
                return Ok(match store.slot(&package.cache_key)? {
                    Some(_) => (None, true),
                    None => (Some(missing()), false),
                });
            };
            Ok(match store.check_slot(&package.cache_key, expected)? {
                SlotCheck::Verified(_) => (None, false),
                SlotCheck::Missing => (Some(missing()), false),
                SlotCheck::Mismatch { path, actual } => (
                    Some(SlotProblem::Mismatch {
                        module: module.clone(),
                        cache: path,
                        expected: expected.clone(),
                        actual,
                    }),
                    false,
                ),
            })
        })
        .collect();
    let mut outcome = CheckOutcome::default();
    for (package, result) in lock.packages.iter().zip(checked) {
        let (problem, unverified) = result?;
        outcome.problems.extend(problem);
        if unverified {
            outcome.unverified.push(package.module.as_str().to_owned());
        }
    }
    Ok(outcome)
}

/// A path or `local/` package, re-copied from its directory, with the copy's warnings (the links it
/// does not follow); `None` for a GitHub package.
fn fetch_local(
    package: &LockedPackage,
    project_root: &Path,
    agentpack_home: &Path,
    store: &dyn PackageStore,
    tree: &Path,
) -> Result<Option<(One, Vec<String>)>, ResolutionError> {
    let module = package.module.as_str();
    let copy = if let Some(dir) = package.url.strip_prefix("path:") {
        let source = project_root.join(dir);
        if !source.is_dir() {
            // The directory is gone on this machine: the locked slot still serves, if it verifies.
            if let Some(expected) = &package.content_hash {
                if let SlotCheck::Verified(slot) = store.check_slot(&package.cache_key, expected)? {
                    tracing::debug!(module, dir = %source.display(), "source: the locked cache slot (the directory is missing here)");
                    return Ok(Some((One::Verified(slot), Vec::new())));
                }
            }
        }
        tracing::debug!(module, dir = %source.display(), "source: the path package's directory");
        local_package::copy_path_package(module, &source, tree)?
    } else if let Some(spec) = package.url.strip_prefix("local:") {
        tracing::debug!(module, spec, "source: the local/ mirror");
        local_package::copy_local_mirror_package(module, agentpack_home, spec, tree)?
    } else {
        return Ok(None);
    };
    let warnings = copy.warnings(module);
    Ok(Some((local_result(package, store, copy, tree)?, warnings)))
}

/// A GitHub package: the verified slot, else a verified download.
fn fetch_one(
    package: &LockedPackage,
    fetcher: &SnapshotFetcher,
    store: &dyn PackageStore,
    options: FetchOptions,
    tree: &Path,
) -> Result<One, ResolutionError> {
    let module = package.module.as_str();
    if package.is_oci() {
        return crate::oci_package::fetch_locked(fetcher, store, package, tree).map(
            |(slot, pulled)| {
                if pulled {
                    One::Downloaded(slot)
                } else {
                    One::Verified(slot)
                }
            },
        );
    }
    let repo = RepoId::new(package.owner.clone(), package.repo.clone());
    let commit = package.commit.as_str();
    let Some(expected) = &package.content_hash else {
        if let Some(slot) = store.slot(&package.cache_key)? {
            tracing::debug!(
                module,
                "source: the cache slot (no content hash to check it against)"
            );
            return Ok(One::Unverified(slot, false));
        }
        tracing::debug!(
            module,
            commit,
            "source: GitHub (no content hash, no cache slot)"
        );
        let downloaded =
            download_normalized(fetcher, store, module, &repo, commit, &package.path, tree)?;
        let slot = store.publish(&package.cache_key, module, tree, &downloaded.content_hash)?;
        store.record_executables(&slot, &downloaded.executables)?;
        return Ok(One::Unverified(slot, true));
    };
    let download_verified = |tree: &Path| -> Result<BTreeSet<String>, ResolutionError> {
        let downloaded =
            download_normalized(fetcher, store, module, &repo, commit, &package.path, tree)?;
        downloaded.check_matches(store, tree, expected, module, commit)?;
        Ok(downloaded.executables)
    };
    match store.check_slot(&package.cache_key, expected)? {
        SlotCheck::Verified(slot) => {
            tracing::debug!(module, slot = %slot.display(), "source: the verified cache slot");
            Ok(One::Verified(slot))
        }
        SlotCheck::Mismatch { path, actual } if options.repair => {
            tracing::debug!(module, commit, cache = %path.display(), "source: GitHub, repairing a cache slot that does not match the lock");
            let executables = download_verified(tree)?;
            let new_slot = store.publish_repairing(&package.cache_key, module, tree, expected)?;
            store.record_executables(&new_slot, &executables)?;
            Ok(One::Repaired(
                new_slot,
                Repaired {
                    module: module.to_owned(),
                    cache: path,
                    old: actual,
                    new: expected.clone(),
                },
            ))
        }
        SlotCheck::Mismatch { path, actual } => {
            tracing::debug!(module, commit, cache = %path.display(), "source: the kept repo snapshot or GitHub, restoring a cache slot that does not match the lock");
            let damaged = Damaged {
                cache_key: &package.cache_key,
                expected,
                cache: path,
                actual,
            };
            let (slot, warning) = restore_damaged(
                fetcher,
                store,
                module,
                &repo,
                commit,
                &package.path,
                damaged,
                tree,
            )?;
            Ok(One::Restored(slot, warning))
        }
        SlotCheck::Missing => {
            let executables = match crate::substitute::package_from_substituters(
                fetcher, store, module, expected, tree,
            ) {
                Some(executables) => executables,
                None => {
                    tracing::debug!(module, commit, "source: GitHub (no cache slot)");
                    download_verified(tree)?
                }
            };
            let slot = store.publish(&package.cache_key, module, tree, expected)?;
            store.record_executables(&slot, &executables)?;
            Ok(One::Downloaded(slot))
        }
    }
}

/// A GitHub package's slot that does not match the lock's content hash.
pub(crate) struct Damaged<'a> {
    /// The lock's cache key.
    pub cache_key: &'a agentpack_lockfile::validate::CacheKey,
    /// The lock's content hash.
    pub expected: &'a ContentHash,
    /// The store path the slot names (the damaged copy).
    pub cache: PathBuf,
    /// What it hashes to.
    pub actual: ContentHash,
}

/// Restores a damaged GitHub package slot from a verified source: the kept repo snapshot (checked
/// against its record before use) or a fresh download, copied into `tree`, checked against the
/// lock's content hash and published in place of the damaged copy. Returns the new slot and the
/// warning naming each file that differed ("restored <module>: ... (edited through a hard link?)").
/// When neither source can be reached, [`ResolutionError::Unrestored`] (the content hash mismatch
/// with its `sync --repair` remedy and why); a source whose bytes do not match the lock is refused
/// ([`ResolutionError::FetchedMismatch`]) and nothing is published.
#[allow(clippy::too_many_arguments)]
pub(crate) fn restore_damaged(
    fetcher: &SnapshotFetcher,
    store: &dyn PackageStore,
    module: &str,
    repo: &RepoId,
    commit: &str,
    path: &str,
    damaged: Damaged<'_>,
    tree: &Path,
) -> Result<(PathBuf, String), ResolutionError> {
    let Damaged {
        cache_key,
        expected,
        cache,
        actual,
    } = damaged;
    let downloaded = match download_normalized(fetcher, store, module, repo, commit, path, tree) {
        Ok(downloaded) => downloaded,
        Err(ResolutionError::Fetch(error)) => {
            tracing::debug!(module, %error, "no verified source to restore the cache slot from");
            let mismatch = ResolutionError::CacheMismatch {
                module: module.to_owned(),
                expected: expected.to_string(),
                actual: actual.to_string(),
                cache,
                commit: commit.to_owned(),
            };
            return Err(ResolutionError::Unrestored {
                mismatch: Box::new(mismatch),
                why: format!(
                    "no verified source: no usable kept snapshot, and {}",
                    error.to_string().lines().next().unwrap_or_default()
                ),
            });
        }
        Err(other) => return Err(other),
    };
    downloaded.check_matches(store, tree, expected, module, commit)?;
    let files = differing_files(&cache, tree).map_err(|source| ResolutionError::Io {
        path: cache.clone(),
        cause: source,
    })?;
    let slot = store.publish_repairing(cache_key, module, tree, expected)?;
    store.record_executables(&slot, &downloaded.executables)?;
    let named = if files.is_empty() {
        "file modes or links".to_owned()
    } else {
        files.join(", ")
    };
    Ok((
        slot,
        format!(
            "restored {module}: {named} (edited through a hard link?)\n  was       {} ({actual})\n  now       {expected}, verified against pack.lock",
            cache.display()
        ),
    ))
}

/// The package-relative paths whose content or kind differs between the damaged copy and the
/// restored tree (changed, added or removed), sorted.
fn differing_files(damaged: &Path, restored: &Path) -> std::io::Result<Vec<String>> {
    let damaged_entries = tree_entries(damaged)?;
    let restored_entries = tree_entries(restored)?;
    let mut differing = Vec::new();
    let names: BTreeSet<&String> = damaged_entries
        .keys()
        .chain(restored_entries.keys())
        .collect();
    for name in names {
        let same = match (damaged_entries.get(name), restored_entries.get(name)) {
            (Some(Entry::File(a)), Some(Entry::File(b))) => same_content(a, b)?,
            (Some(Entry::Link(a)), Some(Entry::Link(b))) => a == b,
            (Some(Entry::Dir), Some(Entry::Dir)) => true,
            _ => false,
        };
        if !same {
            differing.push(name.clone());
        }
    }
    Ok(differing)
}

enum Entry {
    File(PathBuf),
    Link(PathBuf),
    Dir,
}

fn tree_entries(root: &Path) -> std::io::Result<BTreeMap<String, Entry>> {
    let mut entries = BTreeMap::new();
    for entry in walkdir::WalkDir::new(root).follow_links(false).min_depth(1) {
        let entry = entry.map_err(std::io::Error::other)?;
        let relative = entry
            .path()
            .strip_prefix(root)
            .map_err(std::io::Error::other)?
            .to_string_lossy()
            .into_owned();
        let file_type = entry.file_type();
        let value = if file_type.is_dir() {
            Entry::Dir
        } else if file_type.is_symlink() {
            Entry::Link(fs_err::read_link(entry.path())?)
        } else {
            Entry::File(entry.path().to_path_buf())
        };
        entries.insert(relative, value);
    }
    Ok(entries)
}

/// Whether two files hold the same bytes (streamed, never read whole).
fn same_content(a: &Path, b: &Path) -> std::io::Result<bool> {
    use std::io::Read as _;
    if fs_err::metadata(a)?.len() != fs_err::metadata(b)?.len() {
        return Ok(false);
    }
    let mut a = std::io::BufReader::new(fs_err::File::open(a)?);
    let mut b = std::io::BufReader::new(fs_err::File::open(b)?);
    let mut left = vec![0u8; 64 * 1024];
    let mut right = vec![0u8; 64 * 1024];
    loop {
        let read = a.read(&mut left)?;
        if read == 0 {
            return Ok(b.read(&mut right[..1])? == 0);
        }
        let mut filled = 0;
        while filled < read {
            let more = b.read(&mut right[filled..read])?;
            if more == 0 {
                return Ok(false);
            }
            filled += more;
        }
        if left[..read] != right[..read] {
            return Ok(false);
        }
    }
}

fn local_result(
    package: &LockedPackage,
    store: &dyn PackageStore,
    copy: local_package::LocalCopy,
    tree: &Path,
) -> Result<One, ResolutionError> {
    let module = package.module.as_str();
    let normalized = normalize::normalize_package(
        tree,
        &NormalizeContext {
            module,
            ..Default::default()
        },
    )?;
    // Hashed from the fresh copy of the source, never from the store copy: an edit through a
    // staged hard link changes the store copy, which the verified source then replaces.
    let hash = store.hash_tree(tree)?;
    let slot = match store.check_slot(&copy.cache_key, &hash)? {
        SlotCheck::Verified(existing) => existing,
        SlotCheck::Missing => store.publish(&copy.cache_key, module, tree, &hash)?,
        SlotCheck::Mismatch { path, actual } => {
            tracing::debug!(module, cache = %path.display(), %actual, "restoring a path package's store copy changed in place from its source");
            store.publish_repairing(&copy.cache_key, module, tree, &hash)?
        }
    };
    store.record_executables(
        &slot,
        &normalized.with_copied_executables(&copy.executables),
    )?;
    store.mark_rebuildable(&copy.cache_key)?;
    let unchanged = package.commit.as_str() == copy.dirhash40
        && package.cache_key == copy.cache_key
        && package.content_hash.as_ref() == Some(&hash);
    if unchanged {
        return Ok(One::Verified(slot));
    }
    let mut entry = package.clone();
    entry.commit = agentpack_lockfile::validate::CommitSha::parse(&copy.dirhash40)
        .map_err(|e| ResolutionError::Invalid(e.to_string()))?;
    entry.cache_key = copy.cache_key;
    entry.content_hash = Some(hash);
    entry.kind = normalize::package_kind(&slot).to_owned();
    entry.name = normalize::package_name(&slot);
    Ok(One::Updated(slot, entry))
}
