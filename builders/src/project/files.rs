//! `agentpack.toml` and `pack.lock`, read once per process: every step parses these bytes, a
//! command that fails puts exactly these bytes back, and a write made by this process updates them
//! (so nothing reads a file it has just written).
//!
//! Owns: the one read of each file and the messages of an unreadable one (the same `ManifestError`
//! and `LockError` the lockfile crate's `load` gives). Never writes.

use std::io;
use std::path::{Path, PathBuf};

use agentpack_lockfile::{LockError, Lockfile, Manifest, ManifestDocument, ManifestError};

/// The manifest's file name.
pub const MANIFEST_FILE: &str = "agentpack.toml";
/// The lockfile's file name.
pub const LOCK_FILE: &str = "pack.lock";

/// A file that could not be read (not one that is missing).
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// The manifest could not be read.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The manifest does not parse as an editable document.
    #[error(transparent)]
    Edit(#[from] agentpack_lockfile::EditError),
}

/// What reading `pack.lock` gave.
#[derive(Debug)]
enum LockRead {
    Missing,
    Bytes(Vec<u8>),
    /// Kept as kind and text: every caller that asks gets the same error again.
    Unreadable(io::ErrorKind, String),
}

/// The bytes of both files as this process read (or last wrote) them.
#[derive(Debug)]
pub struct ProjectFiles {
    manifest_path: PathBuf,
    lock_path: PathBuf,
    manifest: Vec<u8>,
    lock: LockRead,
}

impl ProjectFiles {
    /// Reads both files: a missing or unreadable manifest is an error, a missing lock is none, an
    /// unreadable lock is said by [`ProjectFiles::lock`] when a step needs it.
    pub fn read(manifest_path: &Path, lock_path: &Path) -> Result<ProjectFiles, FilesError> {
        let manifest = agentpack_lockfile::read_regular_file(manifest_path).map_err(|source| {
            ManifestError::Io {
                path: manifest_path.to_path_buf(),
                source,
            }
        })?;
        let lock = match agentpack_lockfile::read_regular_file(lock_path) {
            Ok(bytes) => LockRead::Bytes(bytes),
            Err(err) if err.kind() == io::ErrorKind::NotFound => LockRead::Missing,
            Err(err) => LockRead::Unreadable(err.kind(), err.to_string()),
        };
        Ok(ProjectFiles {
            manifest_path: manifest_path.to_path_buf(),
            lock_path: lock_path.to_path_buf(),
            manifest,
            lock,
        })
    }

    /// `agentpack.toml`'s path.
    pub fn manifest_path(&self) -> &Path {
        &self.manifest_path
    }

    /// `pack.lock`'s path.
    pub fn lock_path(&self) -> &Path {
        &self.lock_path
    }

    fn manifest_text(&self) -> Result<&str, ManifestError> {
        std::str::from_utf8(&self.manifest).map_err(|_| ManifestError::Io {
            path: self.manifest_path.clone(),
            source: io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not valid UTF-8", self.manifest_path.display()),
            ),
        })
    }

    /// The manifest, parsed.
    pub fn manifest(&self) -> Result<Manifest, ManifestError> {
        Manifest::parse(self.manifest_text()?, &self.manifest_path)
    }

    /// The manifest as an editable document.
    pub fn manifest_document(&self) -> Result<ManifestDocument, FilesError> {
        let text = self.manifest_text()?;
        Ok(ManifestDocument::parse(text, &self.manifest_path)?)
    }

    /// The lock, parsed and validated; `None` when there is no `pack.lock`.
    pub fn lock(&self) -> Result<Option<Lockfile>, LockError> {
        match &self.lock {
            LockRead::Missing => Ok(None),
            LockRead::Unreadable(kind, text) => Err(LockError::Io {
                path: self.lock_path.clone(),
                source: io::Error::new(*kind, text.clone()),
            }),
            LockRead::Bytes(bytes) => {
                let text = std::str::from_utf8(bytes).map_err(|_| LockError::Io {
                    path: self.lock_path.clone(),
                    source: io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{} is not valid UTF-8", self.lock_path.display()),
                    ),
                })?;
                Lockfile::parse(text, &self.lock_path).map(Some)
            }
        }
    }

    /// The manifest's bytes as read.
    pub fn manifest_bytes(&self) -> &[u8] {
        &self.manifest
    }

    /// The lock's bytes as read; `None` when there was no lock (or it could not be read).
    pub fn lock_bytes(&self) -> Option<&[u8]> {
        match &self.lock {
            LockRead::Bytes(bytes) => Some(bytes),
            _ => None,
        }
    }

    /// Whether the lock was there (readable or not).
    pub fn lock_exists(&self) -> bool {
        !matches!(self.lock, LockRead::Missing)
    }

    /// This process wrote these bytes (`None`: left as it was).
    pub fn wrote(&mut self, manifest: Option<&[u8]>, lock: Option<&[u8]>) {
        if let Some(bytes) = manifest {
            self.manifest = bytes.to_vec();
        }
        if let Some(bytes) = lock {
            self.lock = LockRead::Bytes(bytes.to_vec());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_lock_is_none_a_directory_is_an_error_every_time_and_writes_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join(MANIFEST_FILE);
        let lock = dir.path().join(LOCK_FILE);
        std::fs::write(&manifest, "name = \"p\"\nversion = \"0.1.0\"\n").unwrap();
        let mut files = ProjectFiles::read(&manifest, &lock).unwrap();
        assert!(files.lock().unwrap().is_none());
        assert!(!files.lock_exists());
        assert_eq!(files.manifest().unwrap().name, "p");

        let text = Lockfile::new("p", "0.1.0").to_toml_string();
        files.wrote(None, Some(text.as_bytes()));
        assert_eq!(files.lock_bytes(), Some(text.as_bytes()));
        assert!(
            files.lock().unwrap().is_some(),
            "the written lock, not re-read"
        );

        std::fs::create_dir(&lock).unwrap();
        let files = ProjectFiles::read(&manifest, &lock).unwrap();
        assert!(files.lock_exists());
        for _ in 0..2 {
            let error = files.lock().unwrap_err().to_string();
            assert!(error.contains("pack.lock"), "{error}");
        }
    }

    #[test]
    fn a_missing_manifest_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join(MANIFEST_FILE);
        let error = ProjectFiles::read(&manifest, &dir.path().join(LOCK_FILE)).unwrap_err();
        assert!(error.to_string().contains("agentpack.toml"), "{error}");
    }
}
