//! The store's locks, on the one lock implementation of `agentpack-fs` (OFD `fcntl` locks over the
//! whole file, which also work on NFSv4 and are released when the file closes, kill -9 included).
//!
//! Lock order in the store is fixed: the store lock (`lock`), then temp-root files (only ever
//! try-locked by GC), so no two lock holders can wait on each other. An exclusive holder writes
//! `host`, `pid` and time into the lock file so a stuck lock can be traced. A filesystem without lock
//! support gives [`LockOutcome::Unsupported`]: the caller warns and goes on. What this module adds to
//! the toolkit is store policy: the lock file is shared with the group of a shared store, and errors
//! are [`StoreError::Lock`] with their hints.

use std::fs::File;
use std::path::Path;

use agentpack_fs::lock::{self as fs_lock, LockError, LockState};
pub use agentpack_fs::lock::{FileLock, LockKind};

use crate::error::{Result, StoreError};

/// What [`acquire`] got.
#[derive(Debug)]
pub enum LockOutcome {
    /// The lock is held.
    Held(FileLock),
    /// The filesystem does not support `fcntl` locks; nothing is held.
    Unsupported,
}

fn store_error(err: LockError) -> StoreError {
    StoreError::Lock {
        path: err.path,
        cause: err.source,
    }
}

/// Block until `kind` is held on `path` (created if missing; in a group-shared directory it is made
/// group read/write, so every member of the group can take the lock).
pub fn acquire(path: &Path, kind: LockKind, owner: &str) -> Result<LockOutcome> {
    let file = fs_lock::open_lock_file(path).map_err(store_error)?;
    crate::fsutil::share_with_group(path)?;
    match fs_lock::lock(&file, path, kind).map_err(store_error)? {
        LockState::Held => {}
        LockState::Busy | LockState::Unsupported => return Ok(LockOutcome::Unsupported),
    }
    let held = FileLock::held(file);
    if kind == LockKind::Exclusive {
        held.record_owner(owner);
    }
    Ok(LockOutcome::Held(held))
}

/// Take `kind` on an already open `file` without waiting: `Ok(true)` when held (a filesystem
/// without locks gives `false`: nothing can be known about the holder).
pub(crate) fn try_lock_file(file: &File, path: &Path, kind: LockKind) -> Result<bool> {
    Ok(fs_lock::try_lock(file, path, kind).map_err(store_error)? == LockState::Held)
}

/// Block until `kind` is held on an already open `file`; `Ok(false)` when locks are unsupported.
pub(crate) fn lock_file(file: &File, path: &Path, kind: LockKind) -> Result<bool> {
    Ok(fs_lock::lock(file, path, kind).map_err(store_error)? == LockState::Held)
}
