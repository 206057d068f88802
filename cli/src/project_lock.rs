//! One command at a time per project: the commands that write `agentpack.toml`, `pack.lock` or
//! the staging pointers hold an exclusive lock on `$AGENTPACK_HOME/projects/<hash>/project.lock`
//! for their whole run, so two of them at once (two `add`s in parallel) cannot lose each other's
//! edits. A second command waits, and says so once.
//!
//! The lock is an advisory `flock(2)` on a file that is never removed: the kernel releases it when
//! the process ends, however it ends, so there is nothing stale to clean up. Launchers take it only
//! while they stage, never while the agent runs.

use std::fs::File;
use std::path::Path;

use anyhow::{Context as _, Result};
use nix::fcntl::{Flock, FlockArg};

use crate::output;

/// A held project lock; released when dropped.
#[derive(Debug)]
pub struct ProjectLock {
    _lock: Flock<File>,
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
        let open = || {
            fs_err::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map(File::from)
        };
        let file = open()?;
        let file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(Self { _lock: lock }),
            Err((file, nix::errno::Errno::EWOULDBLOCK)) => file,
            Err((_, errno)) => {
                return Err(std::io::Error::from(errno))
                    .with_context(|| format!("cannot lock {}", path.display()));
            }
        };
        output::info(&format!(
            "waiting for another agentpack command in {} to finish…",
            project_root.display()
        ));
        let lock = Flock::lock(file, FlockArg::LockExclusive)
            .map_err(|(_, errno)| std::io::Error::from(errno))
            .with_context(|| format!("cannot lock {}", path.display()))?;
        Ok(Self { _lock: lock })
    }
}
