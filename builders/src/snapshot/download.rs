//! The state the fetcher's concurrent workers share: one slot per (repo, commit), so a repository is
//! downloaded (tarball, else git protocol) or loaded from the store once however many workers ask;
//! keeping a download in the store, at once or staged until the package batches that follow
//! ([`Keep`]); and packages copied out of the snapshot ([`SnapshotFetcher::fetch_package`]).
//!
//! It never verifies a package against the lock (the fetch layer's job) and never prints: warnings
//! go to the shared list.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentpack_store::Store;

use crate::extract::{self, ExtractError, ExtractReport, SafeTreeWriter};
use crate::github::git_protocol::{self, GitFetchError};
use crate::github::{RepoId, SourceFailure};

use super::kept::{covers, keep, load_kept, Blake3Tee, Kept};
use super::{FetchError, FetchedVia, RepoSnapshot, Shared, SnapshotFetcher};

/// When a download is kept in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keep {
    /// Published at once (its own flush).
    Now,
    /// Staged, and named by [`Shared::place_kept`] after the flush of the package batches that
    /// follow (a prefetch for a lock's packages).
    Deferred,
}

/// A downloaded tarball left in the scratch directory for [`keep`], with the BLAKE3 its
/// extraction took (`None`: `keep` reads the file again for it).
type DownloadedTarball = (PathBuf, Option<blake3::Hash>);

impl Shared {
    pub(super) fn store(&self) -> Option<&Arc<Store>> {
        self.store.get()
    }

    pub(super) fn warn(&self, message: String) {
        tracing::warn!("{message}");
        self.warnings.push(message);
    }

    /// The snapshot of `repo` at `commit`, downloading it on first use.
    pub(super) fn snapshot(
        &self,
        repo: &RepoId,
        commit: &str,
    ) -> Result<Arc<RepoSnapshot>, FetchError> {
        self.snapshot_covering(repo, commit, None, None, Keep::Now)
    }

    /// A snapshot of `repo` at `commit` holding `paths` (`None`: the whole repository): the one this
    /// fetcher has when it covers them, else the kept one (whole), else a download, which extracts
    /// only what `extract_only` needs (the whole tarball is kept in the store all the same, now or,
    /// [`Keep::Deferred`], staged for [`Shared::place_kept`]).
    pub(super) fn snapshot_covering(
        &self,
        repo: &RepoId,
        commit: &str,
        paths: Option<&[String]>,
        extract_only: Option<&[String]>,
        keeping: Keep,
    ) -> Result<Arc<RepoSnapshot>, FetchError> {
        let key = (repo.key(), commit.to_ascii_lowercase());
        let slot = {
            let mut slots = self
                .slots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(slots.entry(key.clone()).or_default())
        };
        let mut guard = slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(existing) = guard.as_ref() {
            if covers(existing, paths) {
                return Ok(Arc::clone(existing));
            }
        }
        // A part of the tree was extracted in this command: the rest comes from the kept snapshot,
        // else (not kept) a download of the whole tree.
        let extract_only = if guard.is_some() { None } else { extract_only };
        // A download of this pair staged earlier in this command is kept now, to be read back.
        self.place_kept_of(&key);
        let kept = match self.store() {
            Some(store) => load_kept(
                store,
                repo,
                &key.1,
                &self.scratch,
                &self.resolver.config().limits,
            ),
            None => Kept::Missing,
        };
        let snapshot = match kept {
            Kept::Usable(snapshot) => {
                tracing::debug!(repo = %repo, commit = key.1.as_str(), root = %snapshot.root.display(), "source: the kept repo snapshot");
                snapshot
            }
            Kept::Missing => {
                let (downloaded, tarball) = self.download_counted(repo, &key.1, extract_only)?;
                if let Some(store) = self.store() {
                    let tarball = tarball
                        .as_ref()
                        .map(|(path, digest)| (path.as_path(), *digest));
                    match keep(store, &downloaded, tarball) {
                        Ok(staged) if keeping == Keep::Deferred => {
                            self.pending_keeps
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .insert(key.clone(), staged);
                        }
                        Ok(staged) => {
                            if let Err(error) = store.place_built(staged) {
                                self.warn_not_kept(repo, &key.1, &error.to_string());
                            }
                        }
                        Err(reason) => self.warn_not_kept(repo, &key.1, &reason),
                    }
                }
                if let Some((tarball, _)) = tarball {
                    let _ = fs_err::remove_file(tarball);
                }
                downloaded
            }
            Kept::Damaged(reason) => {
                self.warn(format!(
                    "warning: the kept snapshot of github.com/{repo} at {} was changed ({reason}); not used, downloaded again\n  fix       run `agentpack store verify --repair`, or `agentpack gc` to drop it",
                    key.1
                ));
                let (downloaded, tarball) = self.download_counted(repo, &key.1, None)?;
                if let Some((tarball, _)) = tarball {
                    let _ = fs_err::remove_file(tarball);
                }
                downloaded
            }
        };
        let snapshot = Arc::new(snapshot);
        *guard = Some(Arc::clone(&snapshot));
        Ok(snapshot)
    }

    /// [`SnapshotFetcher::release`].
    pub(super) fn release(&self, repo: &RepoId, commit: &str) {
        let key = (repo.key(), commit.to_ascii_lowercase());
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
            .map(Arc::clone);
        let Some(slot) = slot else {
            return;
        };
        let taken = slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(snapshot) = taken {
            let _ = fs_err::remove_dir_all(&snapshot.root);
        }
    }

    fn warn_not_kept(&self, repo: &dyn std::fmt::Display, commit: &str, reason: &str) {
        self.warn(format!(
            "warning: could not keep the download of github.com/{repo} at {commit} in the store ({reason}); the next command downloads it again\n  fix       run `agentpack store verify` and check the store's free space and permissions"
        ));
    }

    /// Keeps every download a prefetch staged ([`Keep::Deferred`]): named in the store after the
    /// flush of the package batches that followed (one flush of its own when none did).
    pub(super) fn place_kept(&self) {
        let pending: Vec<((String, String), agentpack_store::StagedBuilt)> = self
            .pending_keeps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain()
            .collect();
        for ((repo, commit), staged) in pending {
            self.place_one(&repo, &commit, staged);
        }
    }

    /// [`Shared::place_kept`] for the pair `key` only.
    fn place_kept_of(&self, key: &(String, String)) {
        let staged = self
            .pending_keeps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
        if let Some(staged) = staged {
            self.place_one(&key.0, &key.1, staged);
        }
    }

    fn place_one(&self, repo: &str, commit: &str, staged: agentpack_store::StagedBuilt) {
        let Some(store) = self.store() else {
            return;
        };
        if let Err(error) = store.place_built(staged) {
            self.warn_not_kept(&repo, commit, &error.to_string());
        }
    }

    /// A download of `repo` at `commit` (of what `paths` need, see [`RepoSnapshot::only`]) and the
    /// tarball it came from, left in the scratch directory for [`keep`] with the BLAKE3 taken while
    /// it was extracted (`None` when reading its tail failed: `keep` hashes the file itself; no
    /// tarball over the git protocol).
    pub(super) fn download_counted(
        &self,
        repo: &RepoId,
        commit: &str,
        paths: Option<&[String]>,
    ) -> Result<(RepoSnapshot, Option<DownloadedTarball>), FetchError> {
        let number = self
            .downloads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Numbered: a part extracted earlier may still be read while the whole tree comes in.
        let name = format!(
            "{}-{}-{commit}-{number}",
            repo.owner.to_ascii_lowercase(),
            repo.repo.to_ascii_lowercase()
        );
        let archive = self.scratch.join(format!("{name}.tar.gz"));
        let tree = self.scratch.join(&name);
        let unsafe_error = |source: ExtractError| FetchError::Unsafe {
            repo: repo.clone(),
            commit: commit.to_owned(),
            cause: Box::new(source),
        };
        let tarball_failure = if self.resolver.rest_is_down() {
            "skipped (the REST API is unavailable)".to_owned()
        } else {
            match self
                .resolver
                .rest()
                .download_tarball(repo, commit, &archive)
            {
                Ok(_) => {
                    let file = fs_err::File::open(&archive).map_err(|source| FetchError::Io {
                        path: archive.clone(),
                        cause: source,
                    })?;
                    let only: Option<Vec<String>> = paths.map(|paths| {
                        paths
                            .iter()
                            .map(|p| p.trim_matches('/').to_owned())
                            .collect()
                    });
                    let mut hashed = Blake3Tee::new(std::io::BufReader::new(file));
                    let extracted = extract::extract_github_tarball_only(
                        &mut hashed,
                        &tree,
                        &self.resolver.config().limits,
                        &|path| {
                            only.as_deref()
                                .is_none_or(|only| extract::needed_for(only, path))
                        },
                    );
                    let report = match extracted {
                        Ok(report) => report,
                        Err(error) => {
                            // Nothing half-extracted stays behind.
                            let _ = fs_err::remove_file(&archive);
                            let _ = fs_err::remove_dir_all(&tree);
                            return Err(match error {
                                ExtractError::Limit(source) => FetchError::Limit {
                                    repo: repo.clone(),
                                    commit: commit.to_owned(),
                                    cause: source,
                                },
                                other => unsafe_error(other),
                            });
                        }
                    };
                    // The archive's BLAKE3 for `keep`, taken on this one read of it.
                    let digest = hashed.read_to_end_hash().ok();
                    let snapshot = RepoSnapshot {
                        repo: repo.clone(),
                        commit: commit.to_owned(),
                        root: tree,
                        via: FetchedVia::Tarball,
                        report,
                        only,
                    };
                    return Ok((snapshot, Some((archive, digest))));
                }
                Err(SourceFailure::Limit(source)) => {
                    return Err(FetchError::Limit {
                        repo: repo.clone(),
                        commit: commit.to_owned(),
                        cause: source,
                    })
                }
                Err(failure) => {
                    self.resolver.note_rest_failure(&failure);
                    failure.to_string()
                }
            }
        };
        if tree.exists() {
            fs_err::remove_dir_all(&tree).map_err(|source| FetchError::Io {
                path: tree.clone(),
                cause: source,
            })?;
        }
        let mut writer = SafeTreeWriter::new(&tree)
            .map_err(unsafe_error)?
            .with_limits(
                self.resolver.config().limits,
                format!("the git tree of github.com/{repo} at {commit}"),
            );
        match git_protocol::fetch_commit_tree(self.resolver.config(), repo, commit, &mut writer) {
            Ok(()) => Ok((
                RepoSnapshot {
                    repo: repo.clone(),
                    commit: commit.to_owned(),
                    root: tree,
                    via: FetchedVia::GitProtocol,
                    report: writer.finish(),
                    only: None,
                },
                None,
            )),
            Err(GitFetchError::Extract(ExtractError::Limit(source)))
            | Err(GitFetchError::Source(SourceFailure::Limit(source))) => {
                let _ = fs_err::remove_dir_all(&tree);
                Err(FetchError::Limit {
                    repo: repo.clone(),
                    commit: commit.to_owned(),
                    cause: source,
                })
            }
            Err(GitFetchError::Extract(source)) => Err(unsafe_error(source)),
            Err(GitFetchError::Source(failure)) => Err(FetchError::Download {
                repo: repo.clone(),
                commit: commit.to_owned(),
                tarball: tarball_failure,
                git: match failure {
                    SourceFailure::NotFound(text)
                    | SourceFailure::Denied(text)
                    | SourceFailure::Unavailable(text) => text,
                    SourceFailure::Limit(limit) => limit.to_string(),
                },
            }),
        }
    }
}

impl SnapshotFetcher {
    /// Copies the package at `path` of `repo` at `commit` into `destination` (which must not exist or
    /// be empty), downloading the snapshot first if needed.
    pub fn fetch_package(
        &self,
        repo: &RepoId,
        commit: &str,
        path: &str,
        destination: &Path,
    ) -> Result<ExtractReport, FetchError> {
        self.fetch_package_from_snapshot(repo, commit, path, destination)
            .map(|(copied, _)| copied)
    }

    /// [`SnapshotFetcher::fetch_package`], and the snapshot the package was copied from (a prefetch
    /// may have extracted only its packages): what its extraction reported is the package's too.
    pub(crate) fn fetch_package_from_snapshot(
        &self,
        repo: &RepoId,
        commit: &str,
        path: &str,
        destination: &Path,
    ) -> Result<(ExtractReport, Arc<RepoSnapshot>), FetchError> {
        let clean = extract::clean_relative(path).map_err(|source| FetchError::Unsafe {
            repo: repo.clone(),
            commit: commit.to_owned(),
            cause: Box::new(source),
        })?;
        let snapshot = self.shared.snapshot_covering(
            repo,
            commit,
            Some(std::slice::from_ref(&clean)),
            None,
            Keep::Now,
        )?;
        let source = if clean.is_empty() {
            snapshot.root.clone()
        } else {
            snapshot.root.join(&clean)
        };
        match fs_err::symlink_metadata(&source) {
            Ok(meta) if meta.is_dir() => {}
            _ => {
                return Err(FetchError::MissingPath {
                    repo: repo.clone(),
                    commit: commit.to_owned(),
                    path: clean,
                });
            }
        }
        let copied = extract::copy_package_tree_with_executables(
            &snapshot.root,
            &clean,
            destination,
            &snapshot.report.executables,
        )
        .map_err(|source| FetchError::Unsafe {
            repo: repo.clone(),
            commit: commit.to_owned(),
            cause: Box::new(source),
        })?;
        Ok((copied, snapshot))
    }
}
