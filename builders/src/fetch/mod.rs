//! Fetching a lock into the store: every locked package ends up in a verified slot, or the command stops.
//!
//! For each `[[packages]]` entry: a filled slot is compared with the lock's `content_hash`; a mismatch
//! (an edit through a staged hard link) is restored from a verified source, the kept repo snapshot or
//! a fresh download, and the files it replaced are named in a warning; only when no source can be
//! reached does it stop everything (with `repair` the slot is re-downloaded, verified and replaced,
//! and reported as repaired); an empty slot is filled
//! from a download (once per repository and commit), normalized and verified before it is published.
//! Empty slots are filled first by [`fill_from_github`]: their repositories fetched concurrently
//! ([`crate::snapshot::SnapshotFetcher::prefetch_packages`]), their packages published as one
//! store batch (one flush for all of them and the kept snapshots); a repository that fails stops the fetch
//! before any package is taken from GitHub (what substituters served is already in place), naming
//! the first package that needed it.
//! Path and `local/` packages are re-copied every time; their new pins are returned for the lock.
//! Locks without content hashes (version 2) still load: their packages are fetched unverified and
//! named in a warning. Work directories that killed runs left in the store's `.tmp` (partial
//! downloads, half-extracted trees) are removed first ([`crate::leftovers`]). Never rewrites the
//! lock and never prints.
//!
//! Submodules, one concept each: `fill` (the concurrent fill of a lock's empty GitHub slots),
//! `check` (`sync --verify-only`: what is wrong in the store, nothing fetched), `restore`
//! (a damaged slot restored from a verified source, the files that differed named).

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agentpack_lockfile::lock::{LockedPackage, Lockfile};
use agentpack_lockfile::validate::ContentHash;
use rayon::prelude::*;

use crate::github::RepoId;
use crate::local_package;
use crate::normalize::{self, NormalizeContext};
use crate::package_store::{OnExisting, PackageStore, SlotCheck};
use crate::resolve::{download_normalized, GithubPackage, ResolutionError};
use crate::snapshot::SnapshotFetcher;

mod check;
mod fill;
mod restore;

pub use check::{check_lock, CheckOutcome, SlotProblem};
use fill::name_package;
pub use fill::{fill_failed_warning, fill_from_github, Filled};
pub(crate) use restore::{restore_damaged, Damaged};

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
    let github = GithubPackage {
        fetcher,
        module,
        repo: &repo,
        commit,
        path: &package.path,
    };
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
        let downloaded = download_normalized(github, store, tree)?;
        let slot = store.publish(
            &package.cache_key,
            module,
            tree,
            &downloaded.content_hash,
            OnExisting::Keep,
        )?;
        store.record_executables(&slot, &downloaded.fetched.executables)?;
        return Ok(One::Unverified(slot, true));
    };
    let download_verified = |tree: &Path| -> Result<BTreeSet<String>, ResolutionError> {
        let downloaded = download_normalized(github, store, tree)?;
        downloaded.check_matches(store, tree, expected, module, commit)?;
        Ok(downloaded.fetched.executables)
    };
    match store.check_slot(&package.cache_key, expected)? {
        SlotCheck::Verified(slot) => {
            tracing::debug!(module, slot = %slot.display(), "source: the verified cache slot");
            Ok(One::Verified(slot))
        }
        SlotCheck::Mismatch { path, actual } if options.repair => {
            tracing::debug!(module, commit, cache = %path.display(), "source: GitHub, repairing a cache slot that does not match the lock");
            let executables = download_verified(tree)?;
            let new_slot = store.publish(
                &package.cache_key,
                module,
                tree,
                expected,
                OnExisting::Repair,
            )?;
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
            let (slot, warning) = restore_damaged(github, store, damaged, tree)?;
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
            let slot =
                store.publish(&package.cache_key, module, tree, expected, OnExisting::Keep)?;
            store.record_executables(&slot, &executables)?;
            Ok(One::Downloaded(slot))
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
        SlotCheck::Missing => {
            store.publish(&copy.cache_key, module, tree, &hash, OnExisting::Keep)?
        }
        SlotCheck::Mismatch { path, actual } => {
            tracing::debug!(module, cache = %path.display(), %actual, "restoring a path package's store copy changed in place from its source");
            store.publish(&copy.cache_key, module, tree, &hash, OnExisting::Repair)?
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
