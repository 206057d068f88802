//! One command at a time per project: the commands that write `agentpack.toml`, `pack.lock` or
//! the staging pointers hold an exclusive lock on `$AGENTPACK_HOME/projects/<hash>/project.lock`
//! for their whole run, so two of them at once (two `add`s in parallel) cannot lose each other's
//! edits. A second command waits, and says so once.
//!
//! The lock is the store's kind of lock (`agentpack_fs::lock`: an OFD `fcntl` lock, which also
//! works on NFSv4) on a file that is never removed: the kernel releases it when the process ends,
//! however it ends, so there is nothing stale to clean up. Launchers take it only while they stage,
//! never while the agent runs. On a filesystem without locks the command goes on unprotected, with
//! a warning.

use std::path::Path;

use agentpack_fs::lock::{self, FileLock, LockKind, LockState};
use anyhow::Result;

use crate::output;

/// A held project lock; released when dropped.
#[derive(Debug)]
pub struct ProjectLock {
    _lock: Option<FileLock>,
}

impl ProjectLock {
    /// Locks the project whose state directory is `state_dir`, waiting for another agentpack
    /// command in that project to finish.
    pub fn acquire(state_dir: &Path, project_root: &Path) -> Result<Self> {
        // `projects/` is shared by every user of a shared AGENTPACK_HOME (issue 12, defect 7).
        if let Some(projects) = state_dir.parent() {
            if let Some(home) = projects.parent() {
                fs_err::create_dir_all(home)?;
            }
            agentpack_store::ensure_shared_dir(projects)?;
        }
        fs_err::create_dir_all(state_dir)?;
        let path = state_dir.join("project.lock");
        let file = lock::open_lock_file(&path)?;
        let mut state = lock::try_lock(&file, &path, LockKind::Exclusive)?;
        if state == LockState::Busy {
            output::info(&format!(
                "waiting for another agentpack command in {} to finish…",
                project_root.display()
            ));
            state = lock::lock(&file, &path, LockKind::Exclusive)?;
        }
        if state == LockState::Unsupported {
            output::warn(&format!(
                "the filesystem of {} does not support file locks; two agentpack commands at once in {} are not kept from each other",
                path.display(),
                project_root.display()
            ));
            return Ok(Self { _lock: None });
        }
        Ok(Self {
            _lock: Some(FileLock::held(file)),
        })
    }
}
