//! The one file lock: open-file-description (OFD) `fcntl` locks over the whole file, which also work
//! on NFSv4 (where `flock(2)` is emulated and BSD locks of one client do not see another's).
//!
//! OFD locks belong to the open file, not the process: two handles in one process exclude each other
//! like two processes do, and closing the file (or the process dying, kill -9 included) releases the
//! lock, so there is never a stale lock to clean up. Files are opened close-on-exec, so a child process
//! never inherits a lock.
//!
//! A filesystem without lock support gives [`LockState::Unsupported`]: the caller decides (the store
//! warns and goes on). This module never removes a lock file and never decides lock order; the store
//! and the project lock document theirs.

use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::AsFd as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use nix::fcntl::{fcntl, FcntlArg};

/// Shared (many holders) or exclusive (one holder, no shared ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// Many holders at once.
    Shared,
    /// One holder, no shared holders.
    Exclusive,
}

/// What a lock attempt found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockState {
    /// The lock is held (through the file it was taken on).
    Held,
    /// Another holder has it (only from [`try_lock`]).
    Busy,
    /// The filesystem does not support `fcntl` locks; nothing is held.
    Unsupported,
}

/// A lock file that could not be opened or locked.
#[derive(Debug, thiserror::Error)]
#[error("cannot lock {}", path.display())]
pub struct LockError {
    /// The lock file.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: io::Error,
}

/// A held lock; released when dropped (the file is closed).
#[derive(Debug)]
pub struct FileLock {
    file: File,
}

impl FileLock {
    /// Wraps `file`, on which this process took a lock with [`lock`] or [`try_lock`].
    pub fn held(file: File) -> Self {
        Self { file }
    }

    /// The locked file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Writes who holds the lock (`<owner> pid=<pid> time=<unix seconds>`) into the lock file, so a
    /// stuck lock can be traced. Best effort: the lock is what matters, not this text.
    pub fn record_owner(&self, owner: &str) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let text = format!("{owner} pid={} time={now}\n", std::process::id());
        let _ = self.file.set_len(0);
        let _ = (&self.file).write_all(text.as_bytes());
    }
}

/// Opens (creating, mode 0664 less the umask) the lock file `path` for reading and writing.
pub fn open_lock_file(path: &Path) -> Result<File, LockError> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o664)
        .open(path)
        .map_err(|source| LockError {
            path: path.to_path_buf(),
            source,
        })
}

fn flock_struct(kind: LockKind) -> libc::flock {
    let l_type = match kind {
        LockKind::Shared => libc::F_RDLCK,
        LockKind::Exclusive => libc::F_WRLCK,
    };
    libc::flock {
        #[allow(clippy::cast_possible_truncation)]
        l_type: l_type as libc::c_short,
        #[allow(clippy::cast_possible_truncation)]
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    }
}

/// Whether `errno` says the filesystem has no `fcntl` locks (rather than a real failure).
fn unsupported(errno: nix::errno::Errno) -> bool {
    use nix::errno::Errno;
    matches!(
        errno,
        Errno::ENOLCK | Errno::EOPNOTSUPP | Errno::ENOSYS | Errno::EINVAL
    )
}

/// Blocks until `kind` is held on the open `file` (at `path`, named in errors): [`LockState::Held`],
/// or [`LockState::Unsupported`] when the filesystem has no locks.
pub fn lock(file: &File, path: &Path, kind: LockKind) -> Result<LockState, LockError> {
    let lock = flock_struct(kind);
    loop {
        match fcntl(file.as_fd(), FcntlArg::F_OFD_SETLKW(&lock)) {
            Ok(_) => return Ok(LockState::Held),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(errno) if unsupported(errno) => return Ok(LockState::Unsupported),
            Err(errno) => {
                return Err(LockError {
                    path: path.to_path_buf(),
                    source: io::Error::from(errno),
                })
            }
        }
    }
}

/// Takes `kind` on the open `file` without waiting: [`LockState::Held`], [`LockState::Busy`] when
/// another holder has it, or [`LockState::Unsupported`].
pub fn try_lock(file: &File, path: &Path, kind: LockKind) -> Result<LockState, LockError> {
    let lock = flock_struct(kind);
    match fcntl(file.as_fd(), FcntlArg::F_OFD_SETLK(&lock)) {
        Ok(_) => Ok(LockState::Held),
        Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EACCES) => Ok(LockState::Busy),
        Err(errno) if unsupported(errno) => Ok(LockState::Unsupported),
        Err(errno) => Err(LockError {
            path: path.to_path_buf(),
            source: io::Error::from(errno),
        }),
    }
}

/// Opens `path` (see [`open_lock_file`]) and blocks until `kind` is held: `None` when the
/// filesystem has no locks.
pub fn acquire(path: &Path, kind: LockKind) -> Result<Option<FileLock>, LockError> {
    let file = open_lock_file(path)?;
    Ok(match lock(&file, path, kind)? {
        LockState::Held => Some(FileLock::held(file)),
        LockState::Busy | LockState::Unsupported => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_handles_in_one_process_exclude_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let Some(first) = acquire(&path, LockKind::Exclusive).unwrap() else {
            return; // a filesystem without locks: nothing to check
        };
        first.record_owner("test");
        let second = open_lock_file(&path).unwrap();
        assert_eq!(
            try_lock(&second, &path, LockKind::Shared).unwrap(),
            LockState::Busy
        );
        drop(first);
        assert_eq!(
            try_lock(&second, &path, LockKind::Shared).unwrap(),
            LockState::Held
        );
        let third = open_lock_file(&path).unwrap();
        assert_eq!(
            try_lock(&third, &path, LockKind::Shared).unwrap(),
            LockState::Held
        );
        assert_eq!(
            try_lock(&third, &path, LockKind::Exclusive).unwrap(),
            LockState::Busy
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("test pid="), "{text}");
    }

    #[test]
    fn a_lock_file_that_cannot_be_created_names_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("lock");
        let err = acquire(&path, LockKind::Shared).unwrap_err();
        assert_eq!(err.to_string(), format!("cannot lock {}", path.display()));
        assert_eq!(err.source.kind(), io::ErrorKind::NotFound);
    }
}
