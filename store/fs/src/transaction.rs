//! One transaction over a set of files: write, replace, remove or install entries one by one, and on
//! any failure put every one of them back as it was ([`Transaction::rollback`]).
//!
//! What a transaction records, in order:
//! - a file it writes or removes, or that the caller asks it to [`remember`](Transaction::remember):
//!   its bytes and mode as they were (or that it was absent), in memory; a rollback writes them back
//!   atomically (only when they changed) or removes the file;
//! - an entry (a file or a whole directory tree) it [`install`](Transaction::install)s from a staged
//!   copy: what was there is renamed aside beside it (same directory, so same filesystem); a rollback
//!   renames it back, a commit removes it;
//! - an entry it [`set_aside`](Transaction::set_aside)s (moved out of the way, nothing in its place):
//!   a rollback moves it back, a commit removes it;
//! - a directory it creates: a rollback removes it again when it is empty.
//!
//! The caller ends a transaction explicitly: [`Transaction::commit`] or [`Transaction::rollback`].
//! Dropping one without either leaves things as a crash would: the changes in place and what was set
//! aside still on disk, for the caller's recovery of interrupted runs to find (a panic never deletes
//! the only copy of anything). Never takes a lock: the caller holds the one that makes the set of
//! files its own (the project lock). Users: `agentpack eject` (its writes, and its own files set aside
//! while a sync reads `./.agents/`), `agentpack extra sync` (skill directories swapped), and the
//! project snapshot that puts `agentpack.toml` and `pack.lock` back when a command fails.

use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use crate::atomic::{
    unique_name, write_file, write_file_if_changed, Durability, FileMode, TempName, WriteOptions,
};
use crate::error::FsError;

#[derive(Debug)]
enum Step {
    /// A file as it was: its bytes and permission bits (when known), or `None` when it was absent.
    Remembered {
        path: PathBuf,
        previous: Option<(Vec<u8>, Option<u32>)>,
    },
    /// `path` was installed from a staged copy; what was there before is at `aside`.
    Installed {
        path: PathBuf,
        aside: Option<PathBuf>,
    },
    /// `path` was moved to `aside` (and nothing put in its place).
    SetAside { path: PathBuf, aside: PathBuf },
    /// A directory this transaction created.
    CreatedDir { path: PathBuf },
}

/// A set of file changes that can be undone together. See the module documentation.
#[derive(Debug, Default)]
pub struct Transaction {
    steps: Vec<Step>,
}

impl Transaction {
    /// An empty transaction.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the file `path` as it is now (its bytes and mode, or that it is absent), so that a
    /// rollback puts it back whatever writes it later (by this transaction or anyone else). The first
    /// record of a path wins. A directory, FIFO, socket or device at `path` is an error (it is never
    /// opened for reading, which could block).
    pub fn remember(&mut self, path: &Path) -> Result<(), FsError> {
        if self.remembers(path) {
            return Ok(());
        }
        let previous = match std::fs::metadata(path) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(source) => return Err(FsError::new("read", path, source)),
            Ok(meta) if !meta.is_file() => {
                return Err(FsError::new(
                    "read",
                    path,
                    io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"),
                ))
            }
            Ok(meta) => {
                let bytes =
                    std::fs::read(path).map_err(|source| FsError::new("read", path, source))?;
                Some((bytes, Some(meta.permissions().mode() & 0o7777)))
            }
        };
        self.steps.push(Step::Remembered {
            path: path.to_path_buf(),
            previous,
        });
        Ok(())
    }

    /// Records that `path` holds `previous` (`None`: it is absent), for a caller that has read it
    /// already (the project session reads `agentpack.toml` and `pack.lock` once per process). A
    /// rollback writes these bytes back with the mode the file has then. The first record of a path
    /// wins.
    pub fn remember_as(&mut self, path: &Path, previous: Option<Vec<u8>>) {
        if self.remembers(path) {
            return;
        }
        self.steps.push(Step::Remembered {
            path: path.to_path_buf(),
            previous: previous.map(|bytes| (bytes, None)),
        });
    }

    fn remembers(&self, path: &Path) -> bool {
        self.steps
            .iter()
            .any(|step| matches!(step, Step::Remembered { path: p, .. } if p == path))
    }

    /// Replaces `path` with `bytes` atomically ([`write_file`]), remembering what it was first.
    pub fn write(
        &mut self,
        path: &Path,
        bytes: &[u8],
        options: &WriteOptions,
    ) -> Result<(), FsError> {
        self.remember(path)?;
        write_file(path, bytes, options)
    }

    /// [`Transaction::write`] unless `path` already holds exactly `bytes`; returns whether it wrote.
    pub fn write_if_changed(
        &mut self,
        path: &Path,
        bytes: &[u8],
        options: &WriteOptions,
    ) -> Result<bool, FsError> {
        self.remember(path)?;
        write_file_if_changed(path, bytes, options)
    }

    /// Removes the file `path` (a missing file is not an error), remembering it first.
    pub fn remove_file(&mut self, path: &Path) -> Result<(), FsError> {
        self.remember(path)?;
        match std::fs::remove_file(path) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => {
                Err(FsError::new("remove", path, err))
            }
            _ => Ok(()),
        }
    }

    /// Creates `dir` and its missing parents, remembering each one it creates (a rollback removes
    /// them again when they are empty).
    pub fn create_dir_all(&mut self, dir: &Path) -> Result<(), FsError> {
        let mut missing = Vec::new();
        let mut current = Some(dir);
        while let Some(path) = current.filter(|p| !p.as_os_str().is_empty()) {
            if std::fs::symlink_metadata(path).is_ok() {
                break;
            }
            missing.push(path.to_path_buf());
            current = path.parent();
        }
        for path in missing.into_iter().rev() {
            match std::fs::create_dir(&path) {
                Ok(()) => self.steps.push(Step::CreatedDir { path }),
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
                Err(err) => return Err(FsError::new("create", &path, err)),
            }
        }
        Ok(())
    }

    /// Puts the staged entry `staged` (a file or a directory tree, on the same filesystem) at `to`:
    /// what is at `to` is first renamed aside beside it, then `staged` is renamed into place. When the
    /// second rename fails, the first is undone and `to` is as it was.
    pub fn install(&mut self, staged: &Path, to: &Path) -> Result<(), FsError> {
        let name = to
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let aside = to.with_file_name(unique_name(&format!(".{name}.aside-")));
        self.install_via(staged, to, &aside)
    }

    /// [`Transaction::install`] with what is at `to` set aside at `aside` (same filesystem; a place
    /// the caller's cleaner of interrupted runs knows).
    pub fn install_via(&mut self, staged: &Path, to: &Path, aside: &Path) -> Result<(), FsError> {
        let aside = match std::fs::symlink_metadata(to) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(err) => return Err(FsError::new("inspect", to, err)),
            Ok(_) => {
                std::fs::rename(to, aside).map_err(|err| FsError::new("move aside", to, err))?;
                Some(aside.to_path_buf())
            }
        };
        if let Err(err) = std::fs::rename(staged, to) {
            if let Some(aside) = &aside {
                let _ = std::fs::rename(aside, to);
            }
            return Err(FsError::new("replace", to, err));
        }
        self.steps.push(Step::Installed {
            path: to.to_path_buf(),
            aside,
        });
        Ok(())
    }

    /// Moves the entry `path` to `aside` (same filesystem; its parent directories are created), so it
    /// is out of the way until the transaction ends: a rollback moves it back (re-creating its parent
    /// directories, and only when nothing was put at `path` meanwhile), a commit removes it. A missing
    /// `path` is not an error and records nothing; returns whether something was moved.
    pub fn set_aside(&mut self, path: &Path, aside: &Path) -> Result<bool, FsError> {
        match std::fs::symlink_metadata(path) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(err) => return Err(FsError::new("inspect", path, err)),
            Ok(_) => {}
        }
        if let Some(parent) = aside.parent() {
            std::fs::create_dir_all(parent).map_err(|err| FsError::new("create", parent, err))?;
        }
        std::fs::rename(path, aside).map_err(|err| FsError::new("move aside", path, err))?;
        self.steps.push(Step::SetAside {
            path: path.to_path_buf(),
            aside: aside.to_path_buf(),
        });
        Ok(true)
    }

    /// Undoes every recorded step, the last first, and empties the record. Returns what could not be
    /// put back (every step is tried).
    pub fn rollback(&mut self) -> Vec<FsError> {
        let mut failed = Vec::new();
        while let Some(step) = self.steps.pop() {
            if let Err(err) = undo(step) {
                failed.push(err);
            }
        }
        failed
    }

    /// Keeps every change and removes what was set aside; empties the record. Returns the asides that
    /// could not be removed (the changes stand either way).
    pub fn commit(&mut self) -> Vec<FsError> {
        let mut failed = Vec::new();
        for step in std::mem::take(&mut self.steps) {
            let aside = match step {
                Step::Installed {
                    aside: Some(aside), ..
                }
                | Step::SetAside { aside, .. } => aside,
                _ => continue,
            };
            if let Err(err) = remove_entry(&aside) {
                failed.push(FsError::new("remove", &aside, err));
            }
        }
        failed
    }
}

fn undo(step: Step) -> Result<(), FsError> {
    match step {
        Step::Remembered {
            path,
            previous: Some((bytes, mode)),
        } => {
            let options = WriteOptions {
                mode: mode.map_or(FileMode::KeepOr(0o666), FileMode::Exact),
                durability: Durability::FileAndDir,
                temp: TempName::Hidden,
            };
            // Its directory may have gone with a later step (an emptied directory removed).
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)
                    .map_err(|err| FsError::new("create", parent, err))?;
            }
            write_file_if_changed(&path, &bytes, &options).map(|_| ())
        }
        Step::Remembered {
            path,
            previous: None,
        } => match std::fs::remove_file(&path) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => {
                Err(FsError::new("remove", &path, err))
            }
            _ => Ok(()),
        },
        Step::Installed { path, aside } => {
            remove_entry(&path).map_err(|err| FsError::new("remove", &path, err))?;
            if let Some(aside) = aside {
                std::fs::rename(&aside, &path)
                    .map_err(|err| FsError::new("put back", &path, err))?;
            }
            Ok(())
        }
        Step::SetAside { path, aside } => {
            if std::fs::symlink_metadata(&path).is_ok() {
                // Something was put there meanwhile: keep it, and drop the old entry.
                return remove_entry(&aside).map_err(|err| FsError::new("remove", &aside, err));
            }
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|err| FsError::new("create", parent, err))?;
            }
            std::fs::rename(&aside, &path).map_err(|err| FsError::new("put back", &path, err))
        }
        Step::CreatedDir { path } => {
            // Not empty: something else was put there meanwhile, which is not ours to remove.
            let _ = std::fs::remove_dir(&path);
            Ok(())
        }
    }
}

/// Removes a file, a link or a whole directory tree (not following links); missing is fine.
fn remove_entry(path: &Path) -> io::Result<()> {
    let removed = match std::fs::symlink_metadata(path) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err),
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
    };
    match removed {
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_rollback_puts_every_file_back() {
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join("agentpack.toml");
        let gone = dir.path().join("pack.lock");
        std::fs::write(&kept, b"old manifest").unwrap();
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o640)).unwrap();
        std::fs::write(&gone, b"old lock").unwrap();
        let mut tx = Transaction::new();
        tx.write(&kept, b"new manifest", &WriteOptions::shared_file())
            .unwrap();
        tx.remove_file(&gone).unwrap();
        tx.create_dir_all(&dir.path().join("a/b")).unwrap();
        tx.write(
            &dir.path().join("a/b/new"),
            b"x",
            &WriteOptions::shared_file(),
        )
        .unwrap();
        // Someone else writes a remembered file later: the rollback still restores it.
        std::fs::write(&kept, b"written by another step").unwrap();
        assert!(tx.rollback().is_empty());
        assert_eq!(std::fs::read(&kept).unwrap(), b"old manifest");
        assert_eq!(
            std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777,
            0o640
        );
        assert_eq!(std::fs::read(&gone).unwrap(), b"old lock");
        assert_eq!(names(dir.path()), ["agentpack.toml", "pack.lock"]);
    }

    #[test]
    fn bytes_read_before_are_put_back_without_reading_again() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join("agentpack.toml");
        let lock = dir.path().join("pack.lock");
        std::fs::write(&manifest, b"edited").unwrap();
        std::fs::write(&lock, b"new lock").unwrap();
        let mut tx = Transaction::new();
        tx.remember_as(&manifest, Some(b"as read".to_vec()));
        tx.remember_as(&lock, None);
        assert!(tx.rollback().is_empty());
        assert_eq!(std::fs::read(&manifest).unwrap(), b"as read");
        assert!(!lock.exists());
    }

    #[test]
    fn install_swaps_trees_and_rollback_or_commit_settles_the_aside() {
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().join("skill");
        std::fs::create_dir(&to).unwrap();
        std::fs::write(to.join("SKILL.md"), b"old").unwrap();
        let staged = dir.path().join(".staged");
        std::fs::create_dir(&staged).unwrap();
        std::fs::write(staged.join("SKILL.md"), b"new").unwrap();
        let mut tx = Transaction::new();
        tx.install(&staged, &to).unwrap();
        assert_eq!(std::fs::read(to.join("SKILL.md")).unwrap(), b"new");
        assert_eq!(names(dir.path()).len(), 2, "the old copy is aside");
        assert!(tx.rollback().is_empty());
        assert_eq!(std::fs::read(to.join("SKILL.md")).unwrap(), b"old");
        assert_eq!(names(dir.path()), ["skill"]);

        std::fs::create_dir(&staged).unwrap();
        std::fs::write(staged.join("SKILL.md"), b"new").unwrap();
        let fresh = dir.path().join("fresh");
        let staged_fresh = dir.path().join(".fresh");
        std::fs::write(&staged_fresh, b"f").unwrap();
        let mut tx = Transaction::new();
        tx.install(&staged, &to).unwrap();
        tx.install(&staged_fresh, &fresh).unwrap();
        assert!(tx.commit().is_empty());
        assert_eq!(std::fs::read(to.join("SKILL.md")).unwrap(), b"new");
        assert_eq!(names(dir.path()), ["fresh", "skill"]);
    }

    #[test]
    fn set_aside_entries_come_back_on_rollback_and_go_on_commit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".agents/skills/a/SKILL.md");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, b"mine").unwrap();
        let aside = dir
            .path()
            .join(".agentpack/eject/.aside/.agents/skills/a/SKILL.md");
        let mut tx = Transaction::new();
        assert!(tx.set_aside(&file, &aside).unwrap());
        assert!(!tx.set_aside(&dir.path().join("missing"), &aside).unwrap());
        std::fs::remove_dir_all(dir.path().join(".agents")).unwrap();
        assert!(tx.rollback().is_empty());
        assert_eq!(std::fs::read(&file).unwrap(), b"mine");
        assert!(!aside.exists());
        let mut tx = Transaction::new();
        tx.set_aside(&file, &aside).unwrap();
        assert!(tx.commit().is_empty());
        assert!(!aside.exists() && !file.exists());
    }

    #[test]
    fn a_failed_install_leaves_the_target_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().join("skill");
        std::fs::write(&to, b"old").unwrap();
        let mut tx = Transaction::new();
        let err = tx.install(&dir.path().join("missing"), &to).unwrap_err();
        assert_eq!(err.action, "replace");
        assert_eq!(std::fs::read(&to).unwrap(), b"old");
        assert_eq!(names(dir.path()), ["skill"]);
    }

    #[test]
    fn remembering_a_fifo_is_refused_without_opening_it() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pack.lock");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = Transaction::new().remember(&fifo).unwrap_err();
        assert_eq!(err.source.kind(), io::ErrorKind::InvalidInput);
    }
}
