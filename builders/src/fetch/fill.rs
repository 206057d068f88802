//! The concurrent fill of a lock's empty GitHub slots: repositories fetched at once, the packages of
//! each snapshot normalized, verified and published as one store batch.
//!
//! It never publishes a package that does not match the lock's content hash, and never takes a
//! package from GitHub once a repository failed (the error names the first package that needed it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentpack_lockfile::lock::{LockedPackage, Lockfile};
use rayon::prelude::*;

use crate::github::RepoId;
use crate::package_store::{BatchEntry, PackageStore};
use crate::resolve::{download_normalized, ResolutionError};
use crate::snapshot::{FetchError, SnapshotFetcher};

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
    let entries: Vec<BatchEntry<'_>> = verified
        .iter()
        .map(|(package, tree, _, content_hash)| BatchEntry {
            cache_key: &package.cache_key,
            label: package.module.as_str(),
            tree,
            content_hash,
        })
        .collect();
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
