//! One project's files and places: the manifest, the lock, the project hash, the staging root and the
//! per-project state directory, plus the snapshot that lets a failed command put both files back.
//!
//! Places follow the docs: state under `$AGENTPACK_HOME/projects/<project-hash>/`, staging under
//! `AGENTPACK_STAGING_ROOT`, else `<temp dir>/agentpack-<project-hash>/`. Nothing here resolves or
//! stages; commands do.

use std::path::{Path, PathBuf};

use agentpack_lockfile::{keys, Lockfile, Manifest};
use anyhow::{Context as _, Result};

use crate::context::{Context, Home, LOCK_FILE, MANIFEST_FILE};
use crate::env::{self, EnvVars};
use crate::output;

/// A project on disk.
#[derive(Debug, Clone)]
pub struct Project {
    pub root: PathBuf,
    pub manifest_path: PathBuf,
    pub lock_path: PathBuf,
    pub hash: String,
    pub home: Home,
    pub staging_root: PathBuf,
}

impl Project {
    /// The project of this command (see [`Context::project_root`]).
    pub fn discover(ctx: &Context) -> Result<Self> {
        let root = ctx.project_root()?;
        let root = fs_err::canonicalize(&root)?;
        let hash = keys::project_hash(&root);
        let home = Home::from_env()?;
        let staging_root = match env::var(EnvVars::AGENTPACK_STAGING_ROOT) {
            Some(dir) => ctx.cwd.join(dir),
            None => std::env::temp_dir().join(format!("agentpack-{hash}")),
        };
        Ok(Self {
            manifest_path: root.join(MANIFEST_FILE),
            lock_path: root.join(LOCK_FILE),
            root,
            hash,
            home,
            staging_root,
        })
    }

    /// `$AGENTPACK_HOME/projects/<hash>`.
    pub fn state_dir(&self) -> PathBuf {
        self.home.root.join("projects").join(&self.hash)
    }

    pub fn load_manifest(&self) -> Result<Manifest> {
        Ok(Manifest::load(&self.manifest_path)?)
    }

    /// The lock, or an empty one when the file does not exist. Integrity errors always stop.
    pub fn load_lock(&self, manifest: &Manifest) -> Result<Lockfile> {
        Ok(Lockfile::load_if_exists(&self.lock_path)?
            .unwrap_or_else(|| Lockfile::new(manifest.name.clone(), manifest.version.clone())))
    }

    /// For `lock`: a lock that cannot be parsed is replaced, with a warning; a lock with an invalid
    /// content hash or an inconsistent entry is not (the docs' rule).
    pub fn load_lock_for_relock(&self) -> Result<Option<Lockfile>> {
        match Lockfile::load_if_exists(&self.lock_path) {
            Ok(lock) => Ok(lock),
            Err(err) if err.is_replaceable_by_lock() => {
                output::warn(&format!(
                    "{} cannot be read and will be replaced by a lock resolved from {MANIFEST_FILE}:\n  {err}",
                    self.lock_path.display()
                ));
                Ok(None)
            }
            Err(err) => Err(err.into()),
        }
    }

    /// The bytes of both files now, to restore if a later step fails.
    pub fn snapshot(&self) -> Result<FilesSnapshot> {
        let read = |path: &Path| -> Result<Option<Vec<u8>>> {
            match std::fs::read(path) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(err) => Err(err).with_context(|| format!("cannot read {}", path.display())),
            }
        };
        Ok(FilesSnapshot {
            manifest: (self.manifest_path.clone(), read(&self.manifest_path)?),
            lock: (self.lock_path.clone(), read(&self.lock_path)?),
        })
    }
}

/// Saved bytes of the manifest and the lock.
#[derive(Debug)]
pub struct FilesSnapshot {
    manifest: (PathBuf, Option<Vec<u8>>),
    lock: (PathBuf, Option<Vec<u8>>),
}

impl FilesSnapshot {
    /// Puts both files back exactly as they were (atomically, and only when they changed).
    pub fn restore(&self) {
        for (path, bytes) in [&self.manifest, &self.lock] {
            let restored = match bytes {
                Some(bytes) => agentpack_lockfile::write_if_changed(path, bytes)
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                None => match std::fs::remove_file(path) {
                    Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err.to_string()),
                    _ => Ok(()),
                },
            };
            if let Err(err) = restored {
                output::warn(&format!("could not restore {}: {err}", path.display()));
            }
        }
    }
}
