//! Repository snapshots: the tree of one repository at one commit, downloaded once per command.
//!
//! However many packages of a repository the lock names, a (repo, commit) pair is fetched once: a
//! tarball over REST streamed to disk and extracted by the rules of [`crate::extract`], else a depth-1
//! fetch over the git protocol. Snapshots live in a scratch directory that disappears with the
//! [`SnapshotFetcher`]; packages are copied out of them with [`crate::extract::copy_package_tree`].
//! Nothing here publishes to the store or verifies hashes: that is the fetch layer's job.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::extract::{self, ExtractError, ExtractReport, SafeTreeWriter};
use crate::github::git_protocol::{self, GitFetchError};
use crate::github::resolver::Resolver;
use crate::github::{RepoId, SourceFailure};

/// How a snapshot was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchedVia {
    /// The REST tarball.
    Tarball,
    /// The git protocol (depth 1).
    GitProtocol,
}

/// One repository at one commit, extracted.
#[derive(Debug)]
pub struct RepoSnapshot {
    /// The repository.
    pub repo: RepoId,
    /// The commit.
    pub commit: String,
    /// The extracted tree (the repository root).
    pub root: PathBuf,
    /// How it was fetched.
    pub via: FetchedVia,
    /// What extraction did (links emptied...).
    pub report: ExtractReport,
}

/// Why a snapshot or a package could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Neither the tarball nor the git protocol worked.
    #[error(
        "cannot download github.com/{repo} at {commit}\n  tarball   {tarball}\n  git       {git}\n  fix       check the network and that the commit exists; for a private repository set GITHUB_TOKEN or GH_TOKEN"
    )]
    Download {
        /// The repository.
        repo: RepoId,
        /// The commit.
        commit: String,
        /// What the tarball download answered.
        tarball: String,
        /// What the git protocol answered.
        git: String,
    },
    /// The downloaded tree broke an extraction rule.
    #[error("refusing the download of github.com/{repo} at {commit}: {source}")]
    Unsafe {
        /// The repository.
        repo: RepoId,
        /// The commit.
        commit: String,
        /// The rule broken.
        source: Box<ExtractError>,
    },
    /// The download crossed a limit (size, compression ratio, files); nothing else is tried.
    #[error("cannot download github.com/{repo} at {commit}: {source}")]
    Limit {
        /// The repository.
        repo: RepoId,
        /// The commit.
        commit: String,
        /// The limit crossed.
        source: crate::limits::LimitExceeded,
    },
    /// The package path does not exist at that commit.
    #[error("github.com/{repo} has no directory {path:?} at commit {commit}\n  fix       check the module id's path")]
    MissingPath {
        /// The repository.
        repo: RepoId,
        /// The commit.
        commit: String,
        /// The in-repo path.
        path: String,
    },
    /// Scratch space could not be prepared.
    #[error("cannot prepare {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

type Slot = Arc<Mutex<Option<Arc<RepoSnapshot>>>>;

/// Downloads snapshots once per (repo, commit) for the lifetime of the value.
#[derive(Debug)]
pub struct SnapshotFetcher {
    resolver: Arc<Resolver>,
    scratch: tempfile::TempDir,
    slots: Mutex<HashMap<(String, String), Slot>>,
}

impl SnapshotFetcher {
    /// A fetcher whose scratch directory is created inside `scratch_parent` (use a directory on the
    /// store's filesystem so later moves are renames).
    pub fn new(
        resolver: Arc<Resolver>,
        scratch_parent: &Path,
    ) -> Result<SnapshotFetcher, FetchError> {
        fs_err::create_dir_all(scratch_parent).map_err(|source| FetchError::Io {
            path: scratch_parent.to_path_buf(),
            source,
        })?;
        let scratch = tempfile::Builder::new()
            .prefix("snapshots-")
            .tempdir_in(scratch_parent)
            .map_err(|source| FetchError::Io {
                path: scratch_parent.to_path_buf(),
                source,
            })?;
        Ok(SnapshotFetcher {
            resolver,
            scratch,
            slots: Mutex::new(HashMap::new()),
        })
    }

    /// The resolver (and its GitHub client).
    pub fn resolver(&self) -> &Arc<Resolver> {
        &self.resolver
    }

    /// The snapshot of `repo` at `commit`, downloading it on first use.
    pub fn snapshot(&self, repo: &RepoId, commit: &str) -> Result<Arc<RepoSnapshot>, FetchError> {
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
            return Ok(Arc::clone(existing));
        }
        let snapshot = Arc::new(self.download(repo, &key.1)?);
        *guard = Some(Arc::clone(&snapshot));
        Ok(snapshot)
    }

    fn download(&self, repo: &RepoId, commit: &str) -> Result<RepoSnapshot, FetchError> {
        let name = format!(
            "{}-{}-{commit}",
            repo.owner.to_ascii_lowercase(),
            repo.repo.to_ascii_lowercase()
        );
        let archive = self.scratch.path().join(format!("{name}.tar.gz"));
        let tree = self.scratch.path().join(&name);
        let unsafe_error = |source: ExtractError| FetchError::Unsafe {
            repo: repo.clone(),
            commit: commit.to_owned(),
            source: Box::new(source),
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
                        source,
                    })?;
                    let extracted = extract::extract_github_tarball_limited(
                        std::io::BufReader::new(file),
                        &tree,
                        &self.resolver.config().limits,
                    );
                    let _ = fs_err::remove_file(&archive);
                    let report = match extracted {
                        Ok(report) => report,
                        Err(error) => {
                            // Nothing half-extracted stays behind.
                            let _ = fs_err::remove_dir_all(&tree);
                            return Err(match error {
                                ExtractError::Limit(source) => FetchError::Limit {
                                    repo: repo.clone(),
                                    commit: commit.to_owned(),
                                    source,
                                },
                                other => unsafe_error(other),
                            });
                        }
                    };
                    return Ok(RepoSnapshot {
                        repo: repo.clone(),
                        commit: commit.to_owned(),
                        root: tree,
                        via: FetchedVia::Tarball,
                        report,
                    });
                }
                Err(SourceFailure::Limit(source)) => {
                    return Err(FetchError::Limit {
                        repo: repo.clone(),
                        commit: commit.to_owned(),
                        source,
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
                source,
            })?;
        }
        let mut writer = SafeTreeWriter::new(&tree)
            .map_err(unsafe_error)?
            .with_limits(
                self.resolver.config().limits,
                format!("the git tree of github.com/{repo} at {commit}"),
            );
        match git_protocol::fetch_commit_tree(self.resolver.config(), repo, commit, &mut writer) {
            Ok(()) => Ok(RepoSnapshot {
                repo: repo.clone(),
                commit: commit.to_owned(),
                root: tree,
                via: FetchedVia::GitProtocol,
                report: writer.finish(),
            }),
            Err(GitFetchError::Extract(ExtractError::Limit(source)))
            | Err(GitFetchError::Source(SourceFailure::Limit(source))) => {
                let _ = fs_err::remove_dir_all(&tree);
                Err(FetchError::Limit {
                    repo: repo.clone(),
                    commit: commit.to_owned(),
                    source,
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

    /// Copies the package at `path` of `repo` at `commit` into `destination` (which must not exist or
    /// be empty), downloading the snapshot first if needed.
    pub fn fetch_package(
        &self,
        repo: &RepoId,
        commit: &str,
        path: &str,
        destination: &Path,
    ) -> Result<ExtractReport, FetchError> {
        let snapshot = self.snapshot(repo, commit)?;
        let clean = extract::clean_relative(path).map_err(|source| FetchError::Unsafe {
            repo: repo.clone(),
            commit: commit.to_owned(),
            source: Box::new(source),
        })?;
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
        extract::copy_package_tree_with_executables(
            &snapshot.root,
            &clean,
            destination,
            &snapshot.report.executables,
        )
        .map_err(|source| FetchError::Unsafe {
            repo: repo.clone(),
            commit: commit.to_owned(),
            source: Box::new(source),
        })
    }
}
