//! One project's files and places: the manifest, the lock, the project hash, the staging root and the
//! per-project state directory, plus the snapshot that lets a failed command put both files back.
//!
//! Places follow the docs: state under `$AGENTPACK_HOME/projects/<project-hash>/`, staging under
//! `AGENTPACK_STAGING_ROOT`, else `<temp dir>/agentpack-<project-hash>/`. Nothing here resolves or
//! stages; commands do.
//!
//! With separate roots (see [`crate::context::Roots`]) the project hash is keyed by the pair
//! (definition root, workspace), so two checkouts bound to one definition never share a state
//! directory, a staging root or a pointer; an `AGENTPACK_STAGING_ROOT` is then partitioned by that
//! hash. One root (definition = workspace) keeps the single-root hash and places.

use std::path::{Path, PathBuf};

use agentpack_lockfile::{keys, Lockfile, Manifest};
use anyhow::{Context as _, Result};

use crate::context::{Context, Home, RootsSource, LOCK_FILE, MANIFEST_FILE};
use crate::env::{self, EnvVars};
use crate::output;

/// A project on disk.
#[derive(Debug, Clone)]
pub struct Project {
    /// The definition root: `agentpack.toml`, `pack.lock`; path dependencies are relative to it.
    pub root: PathBuf,
    /// The checkout: the `.agents/` overlay and workspace writes (the definition root when one root).
    pub workspace: PathBuf,
    /// Why these roots.
    pub source: RootsSource,
    pub manifest_path: PathBuf,
    pub lock_path: PathBuf,
    pub hash: String,
    pub home: Home,
    pub staging_root: PathBuf,
}

impl Project {
    /// The project of this command (see [`Context::project_root`]).
    pub fn discover(ctx: &Context) -> Result<Self> {
        let roots = ctx.roots()?;
        let root = fs_err::canonicalize(&roots.definition)?;
        let workspace = fs_err::canonicalize(&roots.workspace).with_context(|| {
            format!(
                "the workspace {} does not exist\n  fix  pass an existing checkout as --workspace",
                roots.workspace.display()
            )
        })?;
        let single_root = root == workspace;
        let hash = if single_root {
            keys::project_hash(&root)
        } else {
            pair_hash(&root, &workspace)
        };
        let home = Home::from_env()?;
        let staging_root = match env::var(EnvVars::AGENTPACK_STAGING_ROOT) {
            Some(dir) if single_root => ctx.cwd.join(dir),
            Some(dir) => ctx.cwd.join(dir).join(format!("agentpack-{hash}")),
            None => std::env::temp_dir().join(format!("agentpack-{hash}")),
        };
        Ok(Self {
            manifest_path: root.join(MANIFEST_FILE),
            lock_path: root.join(LOCK_FILE),
            root,
            workspace,
            source: roots.source,
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
            match agentpack_lockfile::read_regular_file(path) {
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

/// The project hash of separate roots: the first 8 bytes of SHA-256 over both canonical paths, in
/// hex, so it can never equal the single-root hash of either directory alone.
pub fn pair_hash(definition: &Path, workspace: &Path) -> String {
    use sha2::{Digest as _, Sha256};
    use std::os::unix::ffi::OsStrExt as _;
    let mut digest = Sha256::new();
    digest.update(b"agentpack-roots-v1\0definition\0");
    digest.update(definition.as_os_str().as_bytes());
    digest.update(b"\0workspace\0");
    digest.update(workspace.as_os_str().as_bytes());
    hex::encode(&digest.finalize()[..8])
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
