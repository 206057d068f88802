//! File locks that also work on NFSv4: open-file-description (OFD) `fcntl` locks over the whole file.
//!
//! OFD locks belong to the open file, not the process, so two `Store` handles in one process exclude
//! each other like two processes do, and closing the file (or the process dying, kill -9 included)
//! releases the lock. Lock order in the store is fixed: the store lock (`lock`), then temp-root files
//! (only ever try-locked by GC), so no two lock holders can wait on each other.
//!
//! An exclusive holder writes `host`, `pid` and time into the lock file so a stuck lock can be traced.
//! A filesystem without lock support gives [`LockOutcome::Unsupported`]: the caller warns and goes on.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::fcntl::{fcntl, FcntlArg};

use crate::error::{Result, StoreError};

/// Shared (many readers/builders) or exclusive (GC, repair).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// Many holders at once.
    Shared,
    /// One holder, no shared holders.
    Exclusive,
}

/// A held lock; released on drop.
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

/// What [`acquire`] got.
#[derive(Debug)]
pub enum LockOutcome {
    /// The lock is held.
    Held(FileLock),
    /// The filesystem does not support `fcntl` locks; nothing is held.
    Unsupported,
}

fn flock_struct(kind: LockKind, unlock: bool) -> libc::flock {
    let l_type = if unlock {
        libc::F_UNLCK
    } else {
        match kind {
            LockKind::Shared => libc::F_RDLCK,
            LockKind::Exclusive => libc::F_WRLCK,
        }
    };
    libc::flock {
        #[allow(clippy::cast_possible_truncation)]
        l_type: l_type as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    }
}

/// Open (creating) a lock file; in a group-shared directory it is made group read/write, so every
/// member of the group can take the lock.
fn open_lock_file(path: &Path) -> Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o664)
        .open(path)
        .map_err(|source| StoreError::Lock {
            path: path.to_path_buf(),
            source,
        })?;
    crate::fsutil::share_with_group(path)?;
    Ok(file)
}

fn unsupported(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::ENOLCK | libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL)
    )
}

/// Block until `kind` is held on `path` (created if missing).
pub fn acquire(path: &Path, kind: LockKind, owner: &str) -> Result<LockOutcome> {
    let file = open_lock_file(path)?;
    let lock = flock_struct(kind, false);
    loop {
        match fcntl(file.as_fd(), FcntlArg::F_OFD_SETLKW(&lock)) {
            Ok(_) => break,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(errno) => {
                let err = io::Error::from(errno);
                if unsupported(&err) {
                    return Ok(LockOutcome::Unsupported);
                }
                return Err(StoreError::Lock {
                    path: path.to_path_buf(),
                    source: err,
                });
            }
        }
    }
    let mut held = FileLock { _file: file };
    if kind == LockKind::Exclusive {
        write_owner(&mut held, owner);
    }
    Ok(LockOutcome::Held(held))
}

/// Take `kind` on an already open `file` without waiting: `Ok(true)` when held.
pub(crate) fn try_lock_file(file: &File, path: &Path, kind: LockKind) -> Result<bool> {
    let lock = flock_struct(kind, false);
    match fcntl(file.as_fd(), FcntlArg::F_OFD_SETLK(&lock)) {
        Ok(_) => Ok(true),
        Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EACCES) => Ok(false),
        Err(errno) => {
            let err = io::Error::from(errno);
            if unsupported(&err) {
                return Ok(false);
            }
            Err(StoreError::Lock {
                path: path.to_path_buf(),
                source: err,
            })
        }
    }
}

/// Block until `kind` is held on an already open `file`; `Ok(false)` when locks are unsupported.
pub(crate) fn lock_file(file: &File, path: &Path, kind: LockKind) -> Result<bool> {
    let lock = flock_struct(kind, false);
    loop {
        match fcntl(file.as_fd(), FcntlArg::F_OFD_SETLKW(&lock)) {
            Ok(_) => return Ok(true),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(errno) => {
                let err = io::Error::from(errno);
                if unsupported(&err) {
                    return Ok(false);
                }
                return Err(StoreError::Lock {
                    path: path.to_path_buf(),
                    source: err,
                });
            }
        }
    }
}

/// Record who holds an exclusive lock. Best effort: the lock is what matters, not this text.
fn write_owner(lock: &mut FileLock, owner: &str) {
    let text = format!(
        "{owner} pid={} time={}\n",
        std::process::id(),
        crate::fsutil::unix_now()
    );
    let _ = lock._file.set_len(0);
    let _ = (&lock._file).write_all(text.as_bytes());
}
