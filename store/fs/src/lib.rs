//! The filesystem toolkit every agentpack crate shares (the role `uv-fs` plays in uv): one way to
//! replace a file or a symbolic link atomically, one lock, one transaction.
//!
//! | need | use |
//! |---|---|
//! | replace a file so a reader sees the old bytes or the new, never a torn file | [`write_file`] with [`WriteOptions`] (mode, fsync policy, temp name) |
//! | the same, skipped when the bytes are already there | [`write_file_if_changed`] |
//! | create a file that must not exist yet, never half written | [`write_new_file`] |
//! | point a symbolic link elsewhere atomically | [`write_symlink`] |
//! | a shared or exclusive lock that works on NFSv4 and dies with the process | [`lock`] ([`lock::acquire`], [`lock::try_lock`]) |
//! | change several files and put all of them back when one step fails | [`Transaction`] |
//! | a temp name no other process or thread picks | [`unique_name`] |
//! | name the FIFO, socket or device in the way, for a message | [`special_file_kind`] |
//!
//! Policy stays with the callers: which mode a file gets, whether a write is flushed now or by a later
//! `syncfs`, what a filesystem without locks means. This crate never prints and depends on no crate
//! of ours (the store and the lockfile crates build on it). Errors name the path and the action once;
//! the OS cause is their [`std::error::Error::source`], never repeated in the message.
//!
//! ```
//! use agentpack_fs::{write_file, WriteOptions};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("pack.lock");
//! write_file(&path, b"version = 1\n", &WriteOptions::shared_file()).unwrap();
//! assert_eq!(std::fs::read(&path).unwrap(), b"version = 1\n");
//! ```

pub mod atomic;
mod error;
mod file_kind;
pub mod lock;
pub mod transaction;

pub use atomic::{
    unique_name, write_file, write_file_if_changed, write_new_file, write_symlink, Durability,
    FileMode, TempName, WriteOptions,
};
pub use error::{os_cause, FsError};
pub use file_kind::special_file_kind;
pub use lock::{FileLock, LockError, LockKind, LockState};
pub use transaction::Transaction;
