//! The public calls of [`SnapshotFetcher`]: construction (store, substituters, OCI transport), the
//! concurrent prefetch of many (repo, commit) pairs and single snapshots (package copies are
//! `download`'s [`SnapshotFetcher::fetch_package`]).
//!
//! It only schedules and delegates to the shared state ([`super::download`]); it never downloads,
//! extracts or prints itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agentpack_store::Store;

use crate::github::resolver::Resolver;
use crate::github::RepoId;

use super::download::Keep;
use super::{FetchError, OciSources, RepoSnapshot, Shared, SnapshotFetcher, CONCURRENT_FETCHES};

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
                pending_keeps: Mutex::new(HashMap::new()),
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
        self.prefetch_with(wanted, Keep::Now, &mut |_| {})
    }

    /// [`SnapshotFetcher::prefetch`] for the packages at the given paths of each (repository,
    /// commit): a download extracts only what they need ([`RepoSnapshot::only`]; the kept snapshot
    /// still holds the whole repository). A later call for another path of the same pair takes the
    /// whole tree from the kept snapshot. The downloads are staged in the store, not yet named: the
    /// caller publishes the packages (their batch's flush covers the snapshots too), then calls
    /// [`SnapshotFetcher::place_kept`]; a later use of a pair, or the end of the fetcher, keeps
    /// them otherwise.
    pub fn prefetch_packages(
        &self,
        wanted: &[(RepoId, String, Vec<String>)],
    ) -> Vec<Result<Arc<RepoSnapshot>, FetchError>> {
        self.prefetch_packages_then(wanted, &mut |_| {})
    }

    /// [`SnapshotFetcher::prefetch_packages`], calling `ready` with the index in `wanted` of each
    /// pair as soon as that pair is fetched (its packages can then be taken from this fetcher), on
    /// the calling thread, while the other pairs are still downloading: work on one repository's
    /// packages overlaps the downloads of the others. Pairs that fail are not passed to `ready`
    /// (their error is in the result).
    pub fn prefetch_packages_then(
        &self,
        wanted: &[(RepoId, String, Vec<String>)],
        ready: &mut dyn FnMut(usize),
    ) -> Vec<Result<Arc<RepoSnapshot>, FetchError>> {
        let wanted: Vec<(RepoId, String, Option<Vec<String>>)> = wanted
            .iter()
            .map(|(repo, commit, paths)| (repo.clone(), commit.clone(), Some(paths.clone())))
            .collect();
        self.prefetch_with(wanted, Keep::Deferred, ready)
    }

    /// Forgets the tree this fetcher extracted for `repo` at `commit` and removes it from its
    /// scratch directory, for a caller that copied out everything it needs from it (the files of
    /// the packages copied out, hard links of the extracted ones, then have no other name). A later
    /// use of the pair extracts it again (from the kept snapshot, else a download). Best effort: a
    /// tree that cannot be removed goes with the scratch directory.
    pub fn release(&self, repo: &RepoId, commit: &str) {
        self.shared.release(repo, commit);
    }

    /// Names in the store every download [`SnapshotFetcher::prefetch_packages`] staged: after the
    /// flush of the package batches published since, without one of its own (one when none came).
    /// A download that cannot be kept is a warning ([`SnapshotFetcher::take_warnings`]).
    pub fn place_kept(&self) {
        self.shared.place_kept();
    }

    fn prefetch_with(
        &self,
        wanted: Vec<(RepoId, String, Option<Vec<String>>)>,
        keeping: Keep,
        ready: &mut dyn FnMut(usize),
    ) -> Vec<Result<Arc<RepoSnapshot>, FetchError>> {
        let one_by_one = |wanted: &[(RepoId, String, Option<Vec<String>>)],
                          ready: &mut dyn FnMut(usize)| {
            wanted
                .iter()
                .enumerate()
                .map(|(index, (repo, commit, paths))| {
                    let paths = paths.as_deref();
                    let result = self
                        .shared
                        .snapshot_covering(repo, commit, paths, paths, keeping);
                    if result.is_ok() {
                        ready(index);
                    }
                    result
                })
                .collect()
        };
        if wanted.len() < 2 {
            return one_by_one(&wanted, ready);
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
                return one_by_one(&wanted, ready);
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
                        shared.snapshot_covering(&repo, &commit, paths, paths, keeping),
                    )
                });
            }
            let mut results: Vec<Option<Result<Arc<RepoSnapshot>, FetchError>>> =
                (0..wanted.len()).map(|_| None).collect();
            while let Some(joined) = tasks.join_next().await {
                match joined {
                    Ok((index, result)) => {
                        // On this thread while the blocking tasks go on downloading.
                        if result.is_ok() {
                            ready(index);
                        }
                        results[index] = Some(result);
                    }
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
}
