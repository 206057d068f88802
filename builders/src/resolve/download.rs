//! [`download_normalized`]: one GitHub package downloaded, normalized and hashed, for callers
//! outside resolution (e.g. `fetch` refilling an empty slot); [`fetch_normalized`] the same
//! without the hash, for callers that publish with the lock's hash (the store checks it).
//!
//! Must never publish a tree whose hash does not match the expected one.

use std::path::Path;

use agentpack_lockfile::validate::ContentHash;

use crate::github::RepoId;
use crate::normalize::{self, NormalizeContext};
use crate::package_store::{PackageStore, TreeMatch};
use crate::snapshot::SnapshotFetcher;

use super::*;

/// A GitHub package as downloaded: its content hash, and what its copy reported.
pub struct Downloaded {
    pub content_hash: ContentHash,
    /// The links that could not be kept and the executable files (see [`Fetched`]).
    pub fetched: Fetched,
}

impl Downloaded {
    /// One warning per emptied link, naming the package and the link.
    pub fn warnings(&self, module: &str) -> Vec<String> {
        self.fetched.warnings(module)
    }

    /// Refuses this download, copied into `tree`, unless it matches the lock's `expected` hash.
    /// The copy was just hashed: an exact match needs no second pass (the legacy rule does).
    pub fn check_matches(
        &self,
        store: &dyn PackageStore,
        tree: &Path,
        expected: &ContentHash,
        module: &str,
        commit: &str,
    ) -> Result<(), ResolutionError> {
        if self.content_hash == *expected {
            return Ok(());
        }
        if let TreeMatch::Mismatch { actual } = store.verify_tree(tree, expected)? {
            return Err(ResolutionError::FetchedMismatch {
                module: module.to_owned(),
                expected: expected.to_string(),
                actual: actual.to_string(),
                commit: commit.to_owned(),
            });
        }
        Ok(())
    }
}

/// One package of a GitHub repository at a commit (`path` inside it, `module` its name in the
/// manifest), and the fetcher that downloads and keeps that repository's snapshot.
#[derive(Clone, Copy)]
pub struct GithubPackage<'a> {
    pub fetcher: &'a SnapshotFetcher,
    pub module: &'a str,
    pub repo: &'a RepoId,
    pub commit: &'a str,
    pub path: &'a str,
}

/// Downloads (once per repo and commit), copies, normalizes and hashes one GitHub package into `tree`.
pub fn download_normalized(
    package: GithubPackage<'_>,
    store: &dyn PackageStore,
    tree: &Path,
) -> Result<Downloaded, ResolutionError> {
    let fetched = fetch_normalized(package, tree)?;
    Ok(Downloaded {
        content_hash: store.hash_tree(tree)?,
        fetched,
    })
}

/// A GitHub package copied into its tree and normalized, not hashed: for a caller that publishes
/// it with the lock's content hash, which the store checks on the copy it publishes
/// ([`crate::package_store::BatchEntryError::Mismatch`]), so the tree is hashed once.
pub struct Fetched {
    /// Package-relative paths of symbolic links written as empty files (absolute, or leaving the
    /// package), as the extraction rule says.
    pub links_emptied: Vec<String>,
    /// Package-relative paths of regular files that were executable upstream (recorded in the
    /// store with [`PackageStore::record_executables`]; the tree keeps them 0644).
    pub executables: std::collections::BTreeSet<String>,
}

impl Fetched {
    /// One warning per emptied link, naming the package and the link.
    pub fn warnings(&self, module: &str) -> Vec<String> {
        self.links_emptied
            .iter()
            .map(|link| {
                format!(
                    "{module}: symbolic link {link} is absolute or leaves the package; not followed: the copy holds an empty file in its place\n  fix  ask the package's author to link inside the package with a relative path"
                )
            })
            .collect()
    }
}

/// [`download_normalized`] without the hash (see [`Fetched`]).
pub fn fetch_normalized(
    package: GithubPackage<'_>,
    tree: &Path,
) -> Result<Fetched, ResolutionError> {
    let GithubPackage {
        fetcher,
        module,
        repo,
        commit,
        path,
    } = package;
    let (copied, snapshot) = fetcher.fetch_package_from_snapshot(repo, commit, path, tree)?;
    // Links emptied when the archive was extracted (repository-relative), and when the package was
    // copied out of it (package-relative: they left the package).
    let prefix = if path.is_empty() {
        String::new()
    } else {
        format!("{}/", path.trim_end_matches('/'))
    };
    let mut links_emptied: Vec<String> = snapshot
        .report
        .links_emptied
        .iter()
        .filter_map(|link| link.strip_prefix(&prefix).map(str::to_owned))
        .chain(copied.links_emptied)
        .collect();
    links_emptied.sort();
    links_emptied.dedup();
    let normalized = normalize::normalize_package(
        tree,
        &NormalizeContext {
            module,
            repo_root: Some(&snapshot.root),
            package_path: path,
            inline_manifest: None,
        },
    )?;
    Ok(Fetched {
        links_emptied,
        executables: normalized.with_copied_executables(&copied.executables),
    })
}
