//! Build directories under `.tmp/` ([`StoreTempDir`], locked so GC leaves them alone) and this
//! handle's temp roots.
//!
//! Must never hand out a directory outside the store's filesystem.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::*;
use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self, set_mode, unique_name};
use crate::lock::{self, LockKind};
use crate::names::{BlobId, StorePath};

/// A private directory under `.tmp/` on the store's filesystem for a caller to fill (e.g. extract an
/// archive) before `publish_tree`. GC leaves it alone while this guard lives; dropped, it is removed.
#[derive(Debug)]
pub struct StoreTempDir {
    base: PathBuf,
    path: PathBuf,
    _lock: File,
}

impl StoreTempDir {
    /// The directory to write into.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The locked build directory holding [`StoreTempDir::path`] (and, while publishing, the
    /// metadata of the tree built there).
    pub(crate) fn base(&self) -> &Path {
        &self.base
    }
}

impl Drop for StoreTempDir {
    fn drop(&mut self) {
        let _ = fsutil::remove_tree(&self.base);
    }
}

impl Store {
    /// A new private build directory under `.tmp/`, locked so GC leaves it alone while the guard lives.
    pub fn temp_dir(&self) -> Result<StoreTempDir> {
        let dir = self.build_dir("work-", "tree")?;
        fs_err::create_dir(dir.path()).ctx("create", dir.path())?;
        Ok(dir)
    }

    /// A new locked build directory `.tmp/<prefix><unique>/` whose [`StoreTempDir::path`] is
    /// `<inner>` inside it (not created); dropped, the whole build directory is removed.
    pub(crate) fn build_dir(&self, prefix: &str, inner: &str) -> Result<StoreTempDir> {
        let (base, lock) = self.new_build_dir(prefix)?;
        Ok(StoreTempDir {
            path: base.join(inner),
            base,
            _lock: lock,
        })
    }

    /// Create `.tmp/<prefix><unique>/` with a held `.lock` file inside.
    pub(crate) fn new_build_dir(&self, prefix: &str) -> Result<(PathBuf, File)> {
        self.refuse_if_read_only("make a build directory in", &self.tmp_dir())?;
        let base = self.tmp_dir().join(unique_name(prefix));
        fs_err::create_dir(&base).ctx("create", &base)?;
        let lock_path = base.join(".lock");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&lock_path)
            .ctx("create", &lock_path)?;
        lock::lock_file(&file, &lock_path, LockKind::Exclusive)?;
        Ok((base, file))
    }

    // ----- temp roots -----

    /// Keep `path` alive for as long as this `Store` handle lives (a root of an in-flight build or of a
    /// path just read from a slot). Publication and slot reads do this automatically. A read-only
    /// handle registers nothing (it writes nothing): a GC running meanwhile may collect what it
    /// reads, and the reader then finds the path missing, as if it had run after the GC.
    pub fn add_temp_root(&self, path: &StorePath) -> Result<()> {
        self.append_temp_root(&format!("p {}\n", path.name()))
    }

    pub(crate) fn add_temp_root_blob(&self, id: &BlobId, executable: bool) -> Result<()> {
        let (_, name) = id.file_name(executable);
        self.append_temp_root(&format!("b {name}\n"))
    }

    pub(super) fn append_temp_root(&self, line: &str) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let mut guard = self.temp_roots.lock().map_err(|_| {
            StoreError::io(
                "lock",
                &self.dir,
                std::io::Error::other("temp roots poisoned"),
            )
        })?;
        if guard.is_none() {
            let path = self
                .dir
                .join(TEMPROOTS)
                .join(unique_name(&format!("{}-", self.host_id)));
            let file = std::fs::OpenOptions::new()
                .read(true)
                .append(true)
                .create_new(true)
                .mode(0o644)
                .open(&path)
                .ctx("create", &path)?;
            // Readable by every user whatever the umask: another user's GC reads what it keeps.
            set_mode(&path, 0o644)?;
            lock::lock_file(&file, &path, LockKind::Exclusive)?;
            *guard = Some(TempRootsFile { file, path });
        }
        if let Some(roots) = guard.as_mut() {
            roots
                .file
                .write_all(line.as_bytes())
                .ctx("write", &roots.path)?;
        }
        Ok(())
    }

    // ----- slots -----
}
