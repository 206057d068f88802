//! Work directories of dead processes in the store's `.tmp`: removed by the next sync, not only gc.
//!
//! Every build and download of a command works in `.tmp/work-<pid>-…` and holds an exclusive
//! open-file-description lock on its `.lock` file for as long as it runs; a kill -9 releases the
//! lock but leaves the directory (a half-extracted tarball, a partial 10 GB download). [`sweep`]
//! removes exactly those: a `work-*` directory whose `.lock` can be locked (its owner is gone) and
//! is older than [`MIN_AGE`] (so a directory whose owner is between creating it and locking it is
//! never taken). It never touches anything else in `.tmp` (gc's trash, other entries), never
//! removes a directory whose lock is held, and returns what it could not remove instead of
//! printing.

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How old a leftover's `.lock` must be before it is removed.
pub const MIN_AGE: Duration = Duration::from_secs(10);

/// The prefix of work directories.
pub const WORK_PREFIX: &str = "work-";

/// What a sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Directories removed.
    pub removed: Vec<PathBuf>,
    /// Directories that could not be removed, with why (for a warning).
    pub warnings: Vec<String>,
}

/// Removes the work directories of dead processes in `tmp` (the store's `.tmp`); see the module docs.
/// A missing `tmp` is no error.
pub fn sweep(tmp: &Path) -> SweepReport {
    let mut report = SweepReport::default();
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return report;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(WORK_PREFIX) {
            continue;
        }
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let lock_path = path.join(".lock");
        let Ok(lock) = File::open(&lock_path) else {
            continue;
        };
        let old_enough = lock
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|modified| SystemTime::now().duration_since(modified).ok())
            .is_some_and(|age| age >= MIN_AGE);
        if !old_enough || !owner_is_gone(&lock, &lock_path) {
            continue;
        }
        match remove_tree(&path) {
            Ok(()) => report.removed.push(path),
            Err(error) => report.warnings.push(format!(
                "cannot remove {}, left by a process that is gone: {error}\n  fix       remove it by hand, or run `agentpack gc`",
                path.display()
            )),
        }
        drop(lock);
    }
    report
}

/// [`sweep`] of the `.tmp` directory that holds `own` (a path inside this process's own work
/// directory); nothing when `own` is not below a `.tmp`.
pub fn sweep_beside(own: &Path) -> SweepReport {
    own.ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == ".tmp"))
        .map(sweep)
        .unwrap_or_default()
}

/// [`sweep`] of `store`'s `.tmp` (`<cache>/store/<layout>/.tmp`).
pub fn sweep_store(store: &agentpack_store::Store) -> SweepReport {
    sweep(
        &store
            .cache_dir()
            .join("store")
            .join(agentpack_store::LAYOUT_VERSION_DIR)
            .join(".tmp"),
    )
}

/// Can a shared lock be taken on `lock` (at `path`)? Then no live process holds it exclusively.
/// Unsupported locks (some network filesystems) say nothing about the owner: keep the directory.
fn owner_is_gone(lock: &File, path: &Path) -> bool {
    matches!(
        agentpack_fs::lock::try_lock(lock, path, agentpack_fs::lock::LockKind::Shared),
        Ok(agentpack_fs::lock::LockState::Held)
    )
}

/// Removes a tree whose directories may be read-only (a half-published store path).
pub(crate) fn remove_tree(root: &Path) -> std::io::Result<()> {
    for entry in walkdir::WalkDir::new(root).into_iter().flatten() {
        if entry.file_type().is_dir() {
            let _ = std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o755));
        }
    }
    match std::fs::remove_dir_all(root) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn age(path: &Path, seconds: u64) {
        let then = SystemTime::now() - Duration::from_secs(seconds);
        let file = File::options().write(true).open(path).unwrap();
        file.set_modified(then).unwrap();
    }

    #[test]
    fn removes_only_old_unlocked_work_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let make = |name: &str| {
            let dir = tmp.path().join(name);
            std::fs::create_dir_all(dir.join("sub")).unwrap();
            std::fs::write(dir.join("sub/partial.tar.gz"), b"x").unwrap();
            std::fs::write(dir.join(".lock"), b"").unwrap();
            dir
        };
        let dead = make("work-1-0-0");
        age(&dead.join(".lock"), 60);
        std::fs::set_permissions(dead.join("sub"), std::fs::Permissions::from_mode(0o555)).unwrap();
        let young = make("work-2-0-0");
        let live = make("work-3-0-0");
        age(&live.join(".lock"), 60);
        let held = agentpack_fs::lock::acquire(
            &live.join(".lock"),
            agentpack_fs::lock::LockKind::Exclusive,
        )
        .unwrap()
        .expect("this filesystem supports locks");
        let trash = make("trash-4-0-0");
        age(&trash.join(".lock"), 60);

        let report = sweep(tmp.path());
        assert_eq!(sweep_beside(&young.join("sub")), SweepReport::default());
        assert_eq!(report.removed, vec![dead.clone()], "{report:?}");
        assert!(report.warnings.is_empty(), "{report:?}");
        assert!(!dead.exists());
        assert!(young.exists() && live.exists() && trash.exists());
        drop(held);
    }
}
