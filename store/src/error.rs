//! The store's one error type.
//!
//! Every variant names the file or store path it is about and carries the cause, so the cli can print
//! "what happened, to what, what to do" without guessing. This module never formats user output beyond
//! the `Display` of each variant. A cause is printed once: an OS error is part of its variant's message
//! (field `cause`, not a `source`); a builder's error is the `source` and not in the message.

use std::io;
use std::path::{Path, PathBuf};

use crate::tree_hash::TreeHash;

/// Result alias of this crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A filesystem call failed. A permission error says how a store is shared between users.
    ///
    /// The OS error is a leaf: it is part of this message, once, and not a separate `source` (an
    /// `fs-err` error, which names the path itself, is reduced to its OS error first; see
    /// [`StoreError::io`]).
    #[error("{action} {path}: {cause}{}", permission_hint(.cause))]
    Io {
        /// What we were doing ("create", "read", "link", ...).
        action: &'static str,
        /// The file it was about.
        path: PathBuf,
        /// The OS error.
        cause: io::Error,
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

    /// A write was asked of a read-only handle ([`crate::Store::open_read_only`]); nothing was
    /// written.
    #[error("cannot {operation} {}: this store handle is read-only (preflight and probe never write); run `agentpack sync` to make the change, and report this as a bug", .path.display())]
    ReadOnly {
        /// What was asked ("publish into", "point the slot", ...).
        operation: &'static str,
        /// The store directory or entry it would have written.
        path: PathBuf,
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
    #[error("building store path {name} failed")]
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
    /// The cause is in the message, not a `source`, so an error chain names it once.
    #[error("store index {}: {cause}; the index is a cache: delete the directory to rebuild it", .path.display())]
    Index {
        /// The index directory.
        path: PathBuf,
        /// The cause.
        cause: heed::Error,
    },

    /// An object of a shared store that this user must not use in place: another user made it, so
    /// that user could change it under this user (see docs/src/shared-store.md).
    #[error("{what} {} belongs to {}, not to this user; agentpack uses only what this user or root made there, so that user cannot change it under you. Ask its owner to remove it, or the store's administrator to run `agentpack gc` as root, or use a store of your own (set AGENTPACK_HOME)", .path.display(), owner_text(*.owner))]
    ForeignObject {
        /// What it is ("store path", "index directory", ...).
        what: &'static str,
        /// The object.
        path: PathBuf,
        /// Its owner's uid, when it could be read.
        owner: Option<u32>,
    },

    /// An object of a shared store published by another user does not hold what its name says.
    #[error("{what} {} (published by {}) does not match its name: {detail}. It was not used. Someone changed it; the store's administrator should run `agentpack store verify --repair` as root (or its owner `agentpack gc`), or use a store of your own (set AGENTPACK_HOME)", .path.display(), owner_text(*.owner))]
    TamperedObject {
        /// What it is ("blob", "store path").
        what: &'static str,
        /// The object.
        path: PathBuf,
        /// Its owner's uid, when it could be read.
        owner: Option<u32>,
        /// What differs.
        detail: String,
    },

    /// A lock could not be taken. The OS error is part of this message (a leaf, not a `source`).
    #[error("cannot lock {}: {cause}{}", .path.display(), lock_hint(.path, .cause))]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The OS error.
        cause: io::Error,
    },
}

/// "uid N" or "an unknown user".
fn owner_text(owner: Option<u32>) -> String {
    match owner {
        Some(uid) => format!("uid {uid}"),
        None => "an unknown user".to_owned(),
    }
}

/// What to do about a permission error inside a store (empty for any other error).
fn permission_hint(source: &io::Error) -> &'static str {
    if source.kind() == io::ErrorKind::PermissionDenied {
        "\n  this user may not write there: the store belongs to another user, or its group lacks \
         write access. Use a store of your own (set AGENTPACK_HOME), or share this one with a group: \
         as its owner or root, `chgrp -R GROUP` the store, `chmod 3775` its mutable directories and \
         `chmod g+rw` v1/lock (see \"A store shared by several users\" in the documentation)"
    } else {
        ""
    }
}

/// What to do about a lock that cannot be taken: a permission problem is fixed by group and mode, any
/// other failure may be a stale lock file.
fn lock_hint(path: &Path, source: &io::Error) -> String {
    if source.kind() == io::ErrorKind::PermissionDenied {
        format!(
            "\n  this user may not open the store lock for writing: the store belongs to another user, \
             or its group lacks write access. Use a store of your own (set AGENTPACK_HOME), or share \
             this one with a group: as its owner or root, `chgrp GROUP {lock} && chmod g+rw {lock}` \
             and `chmod 3775` on the store's mutable directories (see \"A store shared by several \
             users\" in the documentation)",
            lock = path.display()
        )
    } else {
        "; if no agentpack process is running the lock file may need manual deletion".to_owned()
    }
}

impl StoreError {
    /// An I/O error about `path`. An `fs-err` error (whose text names the path and the call
    /// already) is reduced to its OS error, so the message names the path once.
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        StoreError::Io {
            action,
            path: path.into(),
            cause: agentpack_fs::os_cause(source),
        }
    }

    /// A failed step of a `walkdir` walk below `root`, as an I/O error about the entry it
    /// could not read (or `root` when the error names none).
    pub(crate) fn walk(root: &Path, err: walkdir::Error) -> Self {
        Self::walked("walk", root, err)
    }

    /// A `walkdir` error met while doing `action` below `root`, about the entry it names.
    fn walked(action: &'static str, root: &Path, err: walkdir::Error) -> Self {
        let at = err.path().unwrap_or(root).to_path_buf();
        let cause = err
            .into_io_error()
            .unwrap_or_else(|| io::Error::other(format!("{action} failed")));
        StoreError::io(action, at, cause)
    }

    /// The metadata of a walked `entry` (not following a link), or an I/O error about it.
    pub(crate) fn entry_metadata(entry: &walkdir::DirEntry) -> Result<std::fs::Metadata> {
        entry
            .metadata()
            .map_err(|err| Self::walked("inspect", entry.path(), err))
    }

    /// The OS error of an [`StoreError::Io`] or [`StoreError::Lock`], if this is one.
    pub fn io_cause(&self) -> Option<&io::Error> {
        match self {
            StoreError::Io { cause, .. } | StoreError::Lock { cause, .. } => Some(cause),
            _ => None,
        }
    }
}

impl From<agentpack_fs::FsError> for StoreError {
    fn from(err: agentpack_fs::FsError) -> Self {
        StoreError::io(err.action, err.path, err.source)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn denied() -> io::Error {
        io::Error::from_raw_os_error(libc::EACCES)
    }

    #[test]
    fn a_permission_error_says_how_to_share_the_store() {
        let message = StoreError::io("publish", "/s/v1/x", denied()).to_string();
        assert!(
            message.starts_with("publish /s/v1/x: Permission denied"),
            "{message}"
        );
        assert!(message.contains("AGENTPACK_HOME"), "{message}");
        assert!(message.contains("chmod 3775"), "{message}");
        let other = StoreError::io("publish", "/s/v1/x", io::Error::other("disk on fire"));
        assert_eq!(other.to_string(), "publish /s/v1/x: disk on fire");
        assert!(
            std::error::Error::source(&other).is_none(),
            "the cause is printed once"
        );
    }

    #[test]
    fn an_fs_err_error_names_the_path_once() {
        let err = fs_err::create_dir("/proc/self/status/x").unwrap_err();
        let message = StoreError::io("create", "/proc/self/status/x", err).to_string();
        assert_eq!(
            message,
            "create /proc/self/status/x: Not a directory (os error 20)"
        );
    }

    #[test]
    fn a_lock_permission_error_names_group_and_mode_not_deletion() {
        let lock = |cause| {
            StoreError::Lock {
                path: PathBuf::from("/s/v1/lock"),
                cause,
            }
            .to_string()
        };
        let message = lock(denied());
        assert!(message.contains("chmod g+rw /s/v1/lock"), "{message}");
        assert!(message.contains("chgrp GROUP /s/v1/lock"), "{message}");
        assert!(!message.contains("deletion"), "{message}");
        let message = lock(io::Error::from_raw_os_error(libc::EIO));
        assert!(message.contains("manual deletion"), "{message}");
    }
}
