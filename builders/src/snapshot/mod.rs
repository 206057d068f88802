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
//!
//! Submodules, one concept each: `record` (the store path name and `snapshot.json`), `fetcher`
//! (the public [`SnapshotFetcher`] calls), `download` (the concurrent slots shared by the fetcher's
//! workers: one download per (repo, commit)), `kept` (keeping a download in the store and
//! restoring it, checked, on later use).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agentpack_store::Store;

use crate::extract::{ExtractError, ExtractReport};
use crate::github::resolver::Resolver;
use crate::github::RepoId;

mod download;
mod fetcher;
mod kept;
mod record;

pub use record::{snapshot_name, SNAPSHOT_ARCHIVE, SNAPSHOT_RECORD, SNAPSHOT_TARBALL};

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
    /// catalog files, see [`extract::needed_for`](crate::extract::needed_for)); `None`: the whole
    /// repository. The kept snapshot always holds the whole repository; asking for another path
    /// takes the whole tree from it.
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
    /// Downloads of a prefetch staged in the store, by (repo key, commit), until
    /// [`SnapshotFetcher::place_kept`] (or a later use of the pair, or the fetcher's end) names them.
    pending_keeps: Mutex<HashMap<(String, String), agentpack_store::StagedBuilt>>,
    warnings: crate::warnings::WarningList,
    downloads: std::sync::atomic::AtomicUsize,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // A prefetch whose caller did not place its downloads: kept all the same.
        self.place_kept();
    }
}
