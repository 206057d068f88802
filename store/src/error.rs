//! The store's one error type.
//!
//! Every variant names the file or store path it is about and carries the cause, so the cli can print
//! "what happened, to what, what to do" without guessing. This module never formats user output beyond
//! the `Display` of each variant.

use std::io;
use std::path::PathBuf;

use crate::tree_hash::TreeHash;

/// Result alias of this crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A filesystem call failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What we were doing ("create", "read", "link", ...).
        action: &'static str,
        /// The file it was about.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },

    /// A tree holds a file type `sha256-tree-v1` has no record for.
    #[error("unsupported file type in {path}: only regular files, symbolic links and directories can be hashed or stored")]
    UnsupportedFileType {
        /// The offending entry.
        path: PathBuf,
    },

    /// A path below a tree is not valid UTF-8 where one is required, or a relative path is unsafe.
    #[error("invalid path {path:?} in a store plan: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Why it was refused.
        reason: &'static str,
    },

    /// A `sha256-tree-v1:` string did not parse.
    #[error("invalid tree hash {found:?}: expected sha256-tree-v1:<64 lowercase hex digits>")]
    InvalidTreeHash {
        /// The text that was given.
        found: String,
    },

    /// A blob id did not parse.
    #[error("invalid blob id {found:?}: expected 64 lowercase hex digits")]
    InvalidBlobId {
        /// The text that was given.
        found: String,
    },

    /// A store path name did not parse or a name is unusable.
    #[error("invalid store path name {found:?}: {reason}")]
    InvalidStorePathName {
        /// The text that was given.
        found: String,
        /// Why.
        reason: &'static str,
    },

    /// A cache key is not usable as a slot name.
    #[error("invalid cache key {found:?}: a cache key is a non-empty name without '/' that does not start with '.'")]
    InvalidCacheKey {
        /// The text that was given.
        found: String,
    },

    /// A tree did not hash to what the caller expected; nothing was published or changed.
    #[error("content hash mismatch: {}\n  expected  {expected}\n  actual    {actual}", .path.display())]
    ContentHashMismatch {
        /// The hash the caller (the lock) expects.
        expected: TreeHash,
        /// The hash the tree has.
        actual: TreeHash,
        /// The tree that was hashed (a slot, or the directory given to publish).
        path: PathBuf,
    },

    /// A blob named in a plan is not in the store.
    #[error("blob {id} is missing from the store at {}; it was collected or never imported: import the file again", .path.display())]
    MissingBlob {
        /// The blob.
        id: String,
        /// Where it should be.
        path: PathBuf,
    },

    /// The builder closure of `publish_built` failed.
    #[error("building store path {name} failed: {source}")]
    Build {
        /// The store path name being built.
        name: String,
        /// The builder's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A metadata file of a store path is unreadable.
    #[error("store path metadata {} is damaged: {reason}; run `agentpack store verify --repair`", .path.display())]
    BadMetadata {
        /// The metadata file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },

    /// The index (LMDB) failed.
    #[error("store index {}: {source}; the index is a cache: delete the directory to rebuild it", .path.display())]
    Index {
        /// The index directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: heed::Error,
    },

    /// A lock could not be taken.
    #[error("cannot lock {}: {source}; if no agentpack process is running the lock file may need manual deletion", .path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

impl StoreError {
    /// An I/O error about `path`.
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        StoreError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// Attach a path and an action to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn ctx(self, action: &'static str, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, action: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| StoreError::io(action, path, source))
    }
}
