//! Repository snapshots: the tree of one repository at one commit, downloaded once, kept in the store.
//!
//! [`SnapshotFetcher::prefetch`] takes the snapshots of many (repo, commit) pairs at once: blocking
//! tasks on a `tokio` runtime made for the call, at most [`CONCURRENT_FETCHES`] in flight.
//! However many packages of a repository the lock names, a (repo, commit) pair is fetched once: a
//! tarball over REST streamed to disk and extracted by the rules of [`crate::extract`] (and its
//! limits), else a depth-1 fetch over the git protocol. With a store ([`SnapshotFetcher::with_store`])
//! the extracted tree is published as a **repo snapshot** store path, input-addressed by repository
//! and commit (`<hash>-snapshot-<owner>-<repo>/{snapshot.json,tree.tar.zst}`), so every later command
//! takes packages of that commit from it instead of downloading again. The tree is kept as one
//! archive ([`crate::oci::archive`]'s deterministic tar+zstd), never as files: the store
//! deduplicates files into shared blobs, so a snapshot kept as files would share its inodes with the
//! package store paths and generations of the same bytes, and an edit through a staged hard link
//! would damage the one source a package is restored from offline. A kept snapshot is extracted into
//! the fetcher's scratch on first use in a command, its archive's BLAKE3 checked on the way against
//! the one its `snapshot.json` records; one that no longer matches is not
//! used: the repository is downloaded again for that command and a warning says so.
//! A snapshot is not a GC root: `gc` removes it like any unreachable store path (the next command
//! after a `gc` downloads again). Without a store, snapshots live in a scratch directory that
//! disappears with the [`SnapshotFetcher`]. Packages are copied out with
//! [`crate::extract::copy_package_tree_with_executables`]; verifying a package against the lock's
//! content hash stays the fetch layer's job. Never prints: warnings come back from
//! [`SnapshotFetcher::take_warnings`].

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agentpack_store::{Store, StorePath, StorePathName};

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
    /// The repository paths extracted under `root` when the download was made for known packages
    /// ([`SnapshotFetcher::prefetch_packages`]: those paths, the directories on the way and the
    /// catalog files, see [`extract::needed_for`]); `None`: the whole repository. The kept snapshot
    /// always holds the whole repository; asking for another path takes the whole tree from it.
    pub only: Option<Vec<String>>,
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
    #[error("refusing the download of github.com/{repo} at {commit}: {cause}")]
    Unsafe {
        /// The repository.
        repo: RepoId,
        /// The commit.
        commit: String,
        /// The rule broken (its own cause, an I/O error, follows as the source).
        #[source]
        cause: Box<ExtractError>,
    },
    /// The download crossed a limit (size, compression ratio, files); nothing else is tried.
    #[error("cannot download github.com/{repo} at {commit}: {cause}")]
    Limit {
        /// The repository.
        repo: RepoId,
        /// The commit.
        commit: String,
        /// The limit crossed.
        cause: crate::limits::LimitExceeded,
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
    /// The repository of a package could not be fetched: the package that needed it, and why.
    #[error("cannot fetch {module}: {cause}")]
    Package {
        /// The module (the first of the lock that needed the repository).
        module: String,
        /// Why (shown in the message, not repeated as a source).
        cause: Box<FetchError>,
    },
    /// Scratch space could not be prepared.
    #[error("cannot prepare {path}: {cause}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
}

type Slot = Arc<Mutex<Option<Arc<RepoSnapshot>>>>;

/// How many repositories [`SnapshotFetcher::prefetch`] downloads (or loads from the store) at once:
/// enough to hide the latency of a request, and twice the cores of the machines this is measured
/// on, where extracting and hashing (CPU work) take over from the network.
pub const CONCURRENT_FETCHES: usize = 4;

/// Downloads snapshots once per (repo, commit) for the lifetime of the value, and with a store once
/// for as long as the store keeps the snapshot.
#[derive(Debug)]
pub struct SnapshotFetcher {
    shared: Arc<Shared>,
    /// Removed with the fetcher; `shared.scratch` is its path.
    _scratch: tempfile::TempDir,
    /// The OCI side of this command (substituters, `oci://` packages); see [`crate::substitute`].
    oci: OciSources,
}

/// What a fetcher asks besides GitHub: substituters before it, and the registries of `oci://`
/// packages.
#[derive(Debug, Default)]
struct OciSources {
    /// Asked for a locked package before GitHub ([`crate::substitute`]); empty by default.
    substituters: Arc<crate::substitute::Substituters>,
    /// How `oci://` packages are reached ([`crate::oci_package`]); the client is built on first use.
    transport: crate::oci::OciTransport,
    client: Mutex<Option<Arc<crate::oci::OciClient>>>,
}

/// What the fetcher's concurrent downloads share (see [`SnapshotFetcher::prefetch`]).
#[derive(Debug)]
struct Shared {
    resolver: Arc<Resolver>,
    scratch: PathBuf,
    slots: Mutex<HashMap<(String, String), Slot>>,
    store: std::sync::OnceLock<Arc<Store>>,
    warnings: crate::warnings::WarningList,
    downloads: std::sync::atomic::AtomicUsize,
}

/// The file in a repo snapshot store path that describes it.
pub const SNAPSHOT_RECORD: &str = "snapshot.json";
/// The archive in a repo snapshot store path that holds the repository tree (tar+zstd), for a
/// snapshot fetched over the git protocol.
pub const SNAPSHOT_ARCHIVE: &str = "tree.tar.zst";
/// The archive in a repo snapshot store path that holds the repository tree for a snapshot
/// downloaded as a tarball: the tarball itself, as GitHub sent it (kept by a rename, never
/// re-packed), extracted on use by the rules of a fresh download.
pub const SNAPSHOT_TARBALL: &str = "tree.tar.gz";
/// 3: the record names the archive by its BLAKE3 only (2 also carried the tree's `sha256-tree-v1`,
/// a second pass over every file of the repository when it was kept; 1 kept the tree as files under
/// `tree/`, sharing blobs with packages). Part of the store path name: older records are not read.
const SNAPSHOT_RECORD_VERSION: u32 = 3;

/// What `snapshot.json` records about a kept snapshot.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct SnapshotRecord {
    version: u32,
    /// `owner/repo`, lowercase.
    repo: String,
    /// The full commit, lowercase.
    commit: String,
    /// `tarball` or `git`.
    via: String,
    /// The archive's file name: [`SNAPSHOT_TARBALL`] or [`SNAPSHOT_ARCHIVE`].
    archive: String,
    /// The BLAKE3 (hex) of the archive, checked while it is extracted before every use: the
    /// extraction is deterministic, so matching bytes make the recorded tree without a re-hash.
    archive_blake3: String,
    /// Links emptied by extraction (repository-relative; of a tarball, the extraction on use
    /// reports them again, for the whole tree).
    links_emptied: Vec<String>,
    /// Files that were executable in the repository (the tree holds them 0444; of a tarball, the
    /// extraction on use reports them again).
    executables: BTreeSet<String>,
    /// Regular files written, links kept.
    files: usize,
    links_kept: usize,
}

/// The store path name of the snapshot of `repo` at `commit` (input-addressed: repository + commit).
pub fn snapshot_name(repo: &RepoId, commit: &str) -> StorePathName {
    let inputs = format!(
        "agentpack repo snapshot v{SNAPSHOT_RECORD_VERSION}\0github.com/{}\0{}",
        repo.key(),
        commit.to_ascii_lowercase()
    );
    StorePathName::from_inputs(
        inputs.as_bytes(),
        &format!(
            "snapshot-{}-{}",
            repo.owner.to_ascii_lowercase(),
            repo.repo.to_ascii_lowercase()
        ),
    )
}

/// A kept snapshot looked up in the store.
enum Kept {
    /// Verified: use it.
    Usable(RepoSnapshot),
    /// Not in the store.
    Missing,
    /// In the store but not usable (why); a fresh download is not kept under its name.
    Damaged(String),
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
            cause: source,
        })?;
        let scratch = tempfile::Builder::new()
            .prefix("snapshots-")
            .tempdir_in(scratch_parent)
            .map_err(|source| FetchError::Io {
                path: scratch_parent.to_path_buf(),
                cause: source,
            })?;
        Ok(SnapshotFetcher {
            shared: Arc::new(Shared {
                resolver,
                scratch: scratch.path().to_path_buf(),
                slots: Mutex::new(HashMap::new()),
                store: std::sync::OnceLock::new(),
                warnings: crate::warnings::WarningList::default(),
                downloads: std::sync::atomic::AtomicUsize::new(0),
            }),
            _scratch: scratch,
            oci: OciSources::default(),
        })
    }

    /// Keeps every downloaded snapshot in `store` and takes snapshots from it (see the module docs).
    /// Call it once, before the first fetch; a second store is ignored.
    pub fn with_store(self, store: Arc<Store>) -> SnapshotFetcher {
        let _ = self.shared.store.set(store);
        self
    }

    /// Asks `substituters` for every locked package before GitHub (see [`crate::substitute`]).
    pub fn with_substituters(
        mut self,
        substituters: Arc<crate::substitute::Substituters>,
    ) -> SnapshotFetcher {
        self.oci.substituters = substituters;
        self
    }

    /// The substituters asked before GitHub (empty unless configured).
    pub fn substituters(&self) -> &Arc<crate::substitute::Substituters> {
        &self.oci.substituters
    }

    /// Reaches `oci://` packages over `transport` (credentials, plain-HTTP hosts, retries).
    pub fn with_oci_transport(mut self, transport: crate::oci::OciTransport) -> SnapshotFetcher {
        self.oci.transport = transport;
        self
    }

    /// The OCI client for `oci://` packages, built on first use.
    pub fn oci_client(&self) -> Result<Arc<crate::oci::OciClient>, crate::oci::OciError> {
        let mut client = self
            .oci
            .client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(client) = client.as_ref() {
            return Ok(Arc::clone(client));
        }
        let built = Arc::new(crate::oci::OciClient::new(self.oci.transport.clone())?);
        *client = Some(Arc::clone(&built));
        Ok(built)
    }

    /// Warnings collected so far (a damaged or unkeepable snapshot, a substituter that failed),
    /// emptied.
    pub fn take_warnings(&self) -> Vec<String> {
        let mut warnings = self.shared.warnings.take();
        warnings.extend(self.oci.substituters.take_warnings());
        warnings
    }

    /// How many repositories this fetcher downloaded (kept snapshots used do not count).
    pub fn downloads(&self) -> usize {
        self.shared
            .downloads
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The resolver (and its GitHub client).
    pub fn resolver(&self) -> &Arc<Resolver> {
        &self.shared.resolver
    }

    /// The snapshot of `repo` at `commit`, downloading it on first use.
    pub fn snapshot(&self, repo: &RepoId, commit: &str) -> Result<Arc<RepoSnapshot>, FetchError> {
        self.shared.snapshot(repo, commit)
    }

    /// The snapshots of every (repository, commit) of `wanted`, taken from the store or downloaded
    /// concurrently, at most [`CONCURRENT_FETCHES`] at a time (blocking tasks of a `tokio` runtime
    /// that lives for this call); one result per pair, in the order of `wanted`. A pair asked for twice
    /// is fetched once. Later [`SnapshotFetcher::snapshot`] and [`SnapshotFetcher::fetch_package`]
    /// calls for a pair that succeeded return the same snapshot without a request; a pair that failed
    /// is tried again by them.
    pub fn prefetch(
        &self,
        wanted: &[(RepoId, String)],
    ) -> Vec<Result<Arc<RepoSnapshot>, FetchError>> {
        let wanted: Vec<(RepoId, String, Option<Vec<String>>)> = wanted
            .iter()
            .map(|(repo, commit)| (repo.clone(), commit.clone(), None))
            .collect();
        self.prefetch_with(wanted)
    }

    /// [`SnapshotFetcher::prefetch`] for the packages at the given paths of each (repository,
    /// commit): a download extracts only what they need ([`RepoSnapshot::only`]; the kept snapshot
    /// still holds the whole repository). A later call for another path of the same pair takes the
    /// whole tree from the kept snapshot.
    pub fn prefetch_packages(
        &self,
        wanted: &[(RepoId, String, Vec<String>)],
    ) -> Vec<Result<Arc<RepoSnapshot>, FetchError>> {
        let wanted: Vec<(RepoId, String, Option<Vec<String>>)> = wanted
            .iter()
            .map(|(repo, commit, paths)| (repo.clone(), commit.clone(), Some(paths.clone())))
            .collect();
        self.prefetch_with(wanted)
    }

    fn prefetch_with(
        &self,
        wanted: Vec<(RepoId, String, Option<Vec<String>>)>,
    ) -> Vec<Result<Arc<RepoSnapshot>, FetchError>> {
        let one_by_one = |wanted: &[(RepoId, String, Option<Vec<String>>)]| {
            wanted
                .iter()
                .map(|(repo, commit, paths)| {
                    let paths = paths.as_deref();
                    self.shared.snapshot_covering(repo, commit, paths, paths)
                })
                .collect()
        };
        if wanted.len() < 2 {
            return one_by_one(&wanted);
        }
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .max_blocking_threads(CONCURRENT_FETCHES)
            .thread_name("agentpack-fetch")
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                // No threads to spare: one after another, as before.
                tracing::debug!(%error, "no runtime for concurrent fetches; fetching one after another");
                return one_by_one(&wanted);
            }
        };
        runtime.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for (index, (repo, commit, paths)) in wanted.iter().enumerate() {
                let shared = Arc::clone(&self.shared);
                let (repo, commit, paths) = (repo.clone(), commit.clone(), paths.clone());
                // The runtime runs at most CONCURRENT_FETCHES blocking tasks; the others queue.
                tasks.spawn_blocking(move || {
                    let paths = paths.as_deref();
                    (
                        index,
                        shared.snapshot_covering(&repo, &commit, paths, paths),
                    )
                });
            }
            let mut results: Vec<Option<Result<Arc<RepoSnapshot>, FetchError>>> =
                (0..wanted.len()).map(|_| None).collect();
            while let Some(joined) = tasks.join_next().await {
                match joined {
                    Ok((index, result)) => results[index] = Some(result),
                    // A panic in a download is a bug: carry it to the caller as it was.
                    Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                    // Cancelled (nothing here cancels): its pair is reported below.
                    Err(_) => {}
                }
            }
            results
                .into_iter()
                .zip(&wanted)
                .map(|(result, (repo, commit, _))| {
                    result.unwrap_or_else(|| {
                        Err(FetchError::Io {
                            path: PathBuf::from(format!("github.com/{repo}@{commit}")),
                            cause: std::io::Error::other("the fetch task was cancelled"),
                        })
                    })
                })
                .collect()
        })
    }

    /// A snapshot of `repo` at `commit` that holds `path` (repository-relative): the one a prefetch
    /// of its packages extracted, or the whole tree.
    pub fn snapshot_for(
        &self,
        repo: &RepoId,
        commit: &str,
        path: &str,
    ) -> Result<Arc<RepoSnapshot>, FetchError> {
        let wanted = [path.trim_matches('/').to_owned()];
        self.shared
            .snapshot_covering(repo, commit, Some(&wanted), None)
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
        self.shared.fetch_package(repo, commit, path, destination)
    }
}

impl Shared {
    fn store(&self) -> Option<&Arc<Store>> {
        self.store.get()
    }

    fn warn(&self, message: String) {
        tracing::warn!("{message}");
        self.warnings.push(message);
    }

    /// The snapshot of `repo` at `commit`, downloading it on first use.
    fn snapshot(&self, repo: &RepoId, commit: &str) -> Result<Arc<RepoSnapshot>, FetchError> {
        self.snapshot_covering(repo, commit, None, None)
    }

    /// A snapshot of `repo` at `commit` holding `paths` (`None`: the whole repository): the one this
    /// fetcher has when it covers them, else the kept one (whole), else a download, which extracts
    /// only what `extract_only` needs (the whole tarball is kept in the store all the same).
    fn snapshot_covering(
        &self,
        repo: &RepoId,
        commit: &str,
        paths: Option<&[String]>,
        extract_only: Option<&[String]>,
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
                    if let Err(reason) = keep(store, &downloaded, tarball.as_deref()) {
                        self.warn(format!(
                            "warning: could not keep the download of github.com/{repo} at {} in the store ({reason}); the next command downloads it again\n  fix       run `agentpack store verify` and check the store's free space and permissions",
                            key.1
                        ));
                    }
                }
                if let Some(tarball) = tarball {
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
                if let Some(tarball) = tarball {
                    let _ = fs_err::remove_file(tarball);
                }
                downloaded
            }
        };
        let snapshot = Arc::new(snapshot);
        *guard = Some(Arc::clone(&snapshot));
        Ok(snapshot)
    }

    /// A download of `repo` at `commit` (of what `paths` need, see [`RepoSnapshot::only`]) and the
    /// tarball it came from, left in the scratch directory for [`keep`] (`None` over the git
    /// protocol).
    fn download_counted(
        &self,
        repo: &RepoId,
        commit: &str,
        paths: Option<&[String]>,
    ) -> Result<(RepoSnapshot, Option<PathBuf>), FetchError> {
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
                    let extracted = extract::extract_github_tarball_only(
                        std::io::BufReader::new(file),
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
                    let snapshot = RepoSnapshot {
                        repo: repo.clone(),
                        commit: commit.to_owned(),
                        root: tree,
                        via: FetchedVia::Tarball,
                        report,
                        only,
                    };
                    return Ok((snapshot, Some(archive)));
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

    fn fetch_package(
        &self,
        repo: &RepoId,
        commit: &str,
        path: &str,
        destination: &Path,
    ) -> Result<ExtractReport, FetchError> {
        let clean = extract::clean_relative(path).map_err(|source| FetchError::Unsafe {
            repo: repo.clone(),
            commit: commit.to_owned(),
            cause: Box::new(source),
        })?;
        let snapshot =
            self.snapshot_covering(repo, commit, Some(std::slice::from_ref(&clean)), None)?;
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
            cause: Box::new(source),
        })
    }
}

/// The kept snapshot of `repo` at `commit`, extracted into `scratch`, if the store has one that
/// still matches its record.
fn load_kept(
    store: &Store,
    repo: &RepoId,
    commit: &str,
    scratch: &Path,
    limits: &crate::limits::Limits,
) -> Kept {
    let name = snapshot_name(repo, commit);
    let Some(path) = store.get(&name) else {
        return Kept::Missing;
    };
    // A temp root first, so a concurrent `gc` cannot take it while this command reads it; if `gc`
    // took it before, the checks below fail and it is downloaded again.
    if store.add_temp_root(&path).is_err() {
        return Kept::Missing;
    }
    let record_path = path.path().join(SNAPSHOT_RECORD);
    let record: SnapshotRecord = match fs_err::read(&record_path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
    {
        Ok(record) => record,
        Err(_) if !path.path().exists() => return Kept::Missing,
        Err(reason) => return Kept::Damaged(format!("{}: {reason}", record_path.display())),
    };
    if record.version != SNAPSHOT_RECORD_VERSION
        || record.repo != repo.key()
        || record.commit != commit.to_ascii_lowercase()
    {
        return Kept::Damaged(format!(
            "{} describes another snapshot",
            record_path.display()
        ));
    }
    let tarball = match record.archive.as_str() {
        SNAPSHOT_TARBALL => true,
        SNAPSHOT_ARCHIVE => false,
        other => {
            return Kept::Damaged(format!(
                "{} names an unknown archive {other:?}",
                record_path.display()
            ))
        }
    };
    let archive = path.path().join(&record.archive);
    let root = scratch.join(format!(
        "kept-{}-{}-{}",
        repo.owner.to_ascii_lowercase(),
        repo.repo.to_ascii_lowercase(),
        commit.to_ascii_lowercase()
    ));
    if root.exists() && fs_err::remove_dir_all(&root).is_err() {
        return Kept::Damaged(format!("cannot clear {}", root.display()));
    }
    let what = format!("the kept snapshot of github.com/{repo}");
    let extracted = fs_err::File::open(&archive)
        .map_err(|e| e.to_string())
        .and_then(|file| {
            let mut hashed = Blake3Tee::new(std::io::BufReader::new(file));
            // A tarball is extracted by the rules of a fresh download, which report its
            // executables and emptied links again; the tar+zstd of a git fetch holds the tree.
            let report = if tarball {
                Some(
                    extract::extract_github_tarball_limited(&mut hashed, &root, limits)
                        .map_err(|e| e.to_string())?,
                )
            } else {
                crate::oci::archive::read_tree(
                    &mut hashed,
                    crate::oci::archive::Compression::Zstd,
                    &root,
                    limits,
                    &what,
                )
                .map_err(|e| e.to_string())?;
                None
            };
            // Bytes after the end of the archive count too.
            std::io::copy(&mut hashed, &mut std::io::sink()).map_err(|e| e.to_string())?;
            Ok((hashed.hasher.finalize(), report))
        });
    // `Some(reason)` when the archive is not the one recorded.
    let mut extracted_report = None;
    let changed = extracted.map(|(digest, report)| {
        extracted_report = report;
        let recorded = &record.archive_blake3;
        (digest.to_hex().as_str() != recorded).then(|| {
            format!(
                "{} hashes to blake3:{}, not the recorded blake3:{recorded}",
                archive.display(),
                digest.to_hex()
            )
        })
    });
    match changed {
        Ok(None) => {}
        Ok(Some(reason)) => {
            let _ = fs_err::remove_dir_all(&root);
            return Kept::Damaged(reason);
        }
        Err(_) if !path.path().exists() => return Kept::Missing,
        Err(error) => {
            let _ = fs_err::remove_dir_all(&root);
            return Kept::Damaged(format!("{}: {error}", archive.display()));
        }
    }
    Kept::Usable(RepoSnapshot {
        repo: repo.clone(),
        commit: commit.to_ascii_lowercase(),
        root,
        via: if record.via == "git" {
            FetchedVia::GitProtocol
        } else {
            FetchedVia::Tarball
        },
        report: extracted_report.unwrap_or(ExtractReport {
            files: record.files,
            links_kept: record.links_kept,
            links_emptied: record.links_emptied,
            executables: record.executables,
        }),
        only: None,
    })
}

/// Whether `snapshot` holds every path of `paths` (`None`: the whole repository).
fn covers(snapshot: &RepoSnapshot, paths: Option<&[String]>) -> bool {
    match (&snapshot.only, paths) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(only), Some(paths)) => paths.iter().all(|path| {
            let path = path.trim_matches('/');
            only.iter().any(|extracted| {
                extracted.is_empty()
                    || path == extracted
                    || path
                        .strip_prefix(extracted.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            })
        }),
    }
}

/// Publishes `downloaded` as the repo snapshot store path of its (repo, commit), or says why it
/// could not be kept: `tarball` (what the download came from) moved in as [`SNAPSHOT_TARBALL`],
/// else (a git fetch, always the whole tree) the tree packed as [`SNAPSHOT_ARCHIVE`].
fn keep(store: &Store, downloaded: &RepoSnapshot, tarball: Option<&Path>) -> Result<(), String> {
    let name = snapshot_name(&downloaded.repo, &downloaded.commit);
    let _published: StorePath = store
        .publish_built(&name, &[], |out, _final_path| {
            let (archive, digest) = match tarball {
                Some(tarball) => {
                    let archive = out.join(SNAPSHOT_TARBALL);
                    fs_err::rename(tarball, &archive)?;
                    let mut hashed = Blake3Tee::new(fs_err::File::open(&archive)?);
                    std::io::copy(&mut hashed, &mut std::io::sink())?;
                    (SNAPSHOT_TARBALL, hashed.hasher.finalize())
                }
                None => {
                    let archive = out.join(SNAPSHOT_ARCHIVE);
                    let file = std::io::BufWriter::new(fs_err::File::create(&archive)?);
                    let mut encoder =
                        zstd::Encoder::new(Blake3Tee::new(file), crate::oci::archive::ZSTD_LEVEL)?;
                    encoder.include_checksum(false)?;
                    crate::oci::archive::write_tar(
                        &downloaded.root,
                        &downloaded.report.executables,
                        &mut encoder,
                    )?;
                    let mut hashed = encoder.finish()?;
                    std::io::Write::flush(&mut hashed)?;
                    (SNAPSHOT_ARCHIVE, hashed.hasher.finalize())
                }
            };
            let record = SnapshotRecord {
                version: SNAPSHOT_RECORD_VERSION,
                repo: downloaded.repo.key(),
                commit: downloaded.commit.to_ascii_lowercase(),
                via: match downloaded.via {
                    FetchedVia::Tarball => "tarball".to_owned(),
                    FetchedVia::GitProtocol => "git".to_owned(),
                },
                archive: archive.to_owned(),
                archive_blake3: digest.to_hex().to_string(),
                links_emptied: downloaded.report.links_emptied.clone(),
                executables: downloaded.report.executables.clone(),
                files: downloaded.report.files,
                links_kept: downloaded.report.links_kept,
            };
            fs_err::write(out.join(SNAPSHOT_RECORD), serde_json::to_vec(&record)?)?;
            Ok(())
        })
        .map_err(|error| error.to_string())?;
    Ok(())
}

/// Bytes read or written through it, hashed with BLAKE3 on the way (a kept snapshot's archive).
struct Blake3Tee<T> {
    inner: T,
    hasher: blake3::Hasher,
}

impl<T> Blake3Tee<T> {
    fn new(inner: T) -> Self {
        Blake3Tee {
            inner,
            hasher: blake3::Hasher::new(),
        }
    }
}

impl<R: std::io::Read> std::io::Read for Blake3Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

impl<W: std::io::Write> std::io::Write for Blake3Tee<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a panic is a failure

    use std::os::unix::fs::PermissionsExt as _;

    use agentpack_store::StoreOptions;

    use super::*;

    fn scratch_snapshot(dir: &Path, repo: &RepoId) -> RepoSnapshot {
        let root = dir.join("extracted");
        fs_err::create_dir_all(root.join("skills/a")).unwrap();
        fs_err::write(root.join("skills/a/SKILL.md"), "---\nname: a\n---\nA.\n").unwrap();
        fs_err::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("skills/a", root.join("link")).unwrap();
        RepoSnapshot {
            repo: repo.clone(),
            commit: "ABCDEF0123456789abcdef0123456789abcdef01".to_owned(),
            root,
            via: FetchedVia::Tarball,
            report: ExtractReport {
                files: 2,
                links_kept: 1,
                links_emptied: vec!["skills/a/outside".to_owned()],
                executables: BTreeSet::from(["run.sh".to_owned()]),
            },
            only: None,
        }
    }

    #[test]
    fn a_kept_snapshot_is_found_by_repo_and_commit_and_a_changed_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cache"), StoreOptions::default()).unwrap();
        let scratch = dir.path().join("scratch");
        fs_err::create_dir_all(&scratch).unwrap();
        let limits = crate::limits::Limits::default();
        let repo = RepoId::new("Acme", "Big");
        let commit = "abcdef0123456789abcdef0123456789abcdef01";
        let load = |repo: &RepoId, commit: &str| load_kept(&store, repo, commit, &scratch, &limits);
        assert!(matches!(load(&repo, commit), Kept::Missing));

        let downloaded = scratch_snapshot(dir.path(), &repo);
        keep(&store, &downloaded, None).unwrap();
        let kept_path = store.get(&snapshot_name(&repo, commit)).unwrap();
        // One archive, no file of the tree: nothing shares an inode with a package's blobs.
        let mut names: Vec<String> = fs_err::read_dir(kept_path.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, vec![SNAPSHOT_RECORD, SNAPSHOT_ARCHIVE]);
        // Any case of the commit and the names finds it; another commit does not.
        let Kept::Usable(kept) = load(&RepoId::new("acme", "big"), &commit.to_ascii_uppercase())
        else {
            panic!("the kept snapshot is usable");
        };
        assert!(kept.root.starts_with(&scratch));
        assert_eq!(
            fs_err::read_to_string(kept.root.join("skills/a/SKILL.md")).unwrap(),
            "---\nname: a\n---\nA.\n"
        );
        assert_eq!(
            fs_err::read_link(kept.root.join("link")).unwrap(),
            Path::new("skills/a")
        );
        assert_eq!(
            kept.report.links_emptied,
            vec!["skills/a/outside".to_owned()]
        );
        assert!(kept.report.executables.contains("run.sh"));
        assert!(matches!(
            load(&repo, "1111111111111111111111111111111111111111"),
            Kept::Missing
        ));

        // A record without the archive's digest (an older layout) is not used.
        fs_err::set_permissions(kept_path.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let record_path = kept_path.path().join(SNAPSHOT_RECORD);
        let recorded = fs_err::read(&record_path).unwrap();
        let mut legacy: serde_json::Value = serde_json::from_slice(&recorded).unwrap();
        assert!(legacy["archive_blake3"].is_string(), "{legacy}");
        legacy.as_object_mut().unwrap().remove("archive_blake3");
        let write_record = |bytes: &[u8]| {
            let _ = fs_err::remove_file(&record_path);
            fs_err::write(&record_path, bytes).unwrap();
        };
        write_record(&serde_json::to_vec(&legacy).unwrap());
        assert!(matches!(load(&repo, commit), Kept::Damaged(_)));
        write_record(&recorded);
        assert!(matches!(load(&repo, commit), Kept::Usable(_)));

        // The archive replaced by another tree's: not usable.
        let other = dir.path().join("other");
        fs_err::create_dir_all(&other).unwrap();
        fs_err::write(other.join("SKILL.md"), "changed").unwrap();
        let forged = crate::oci::archive::tree_tar_zstd(&other, &BTreeSet::new()).unwrap();
        let archive = kept_path.path().join(SNAPSHOT_ARCHIVE);
        fs_err::remove_file(&archive).unwrap();
        fs_err::write(&archive, forged).unwrap();
        match load(&repo, commit) {
            Kept::Damaged(reason) => assert!(reason.contains("hashes to blake3:"), "{reason}"),
            _ => panic!("a changed snapshot is refused"),
        }
        // And one that is no archive at all.
        fs_err::write(&archive, "not zstd").unwrap();
        assert!(matches!(load(&repo, commit), Kept::Damaged(_)));
        fs_err::set_permissions(kept_path.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    }
}
