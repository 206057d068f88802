//! One project's files and places: the manifest, the lock, the project hash, the staging root and the
//! per-project state directory, plus the snapshot that lets a failed command put both files back
//! (made from the bytes the command's session read: `crate::pipeline::snapshot`).
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
    /// The project of this command (see [`Context::roots`]).
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

/// Saved bytes of the manifest and the lock: a toolkit transaction that remembers both, rolled back
/// when a later step fails.
#[derive(Debug)]
pub struct FilesSnapshot {
    saved: std::cell::RefCell<agentpack_fs::Transaction>,
}

impl FilesSnapshot {
    /// Saved bytes of the manifest and the lock (`None`: the file did not exist).
    pub fn of(manifest: (PathBuf, Option<Vec<u8>>), lock: (PathBuf, Option<Vec<u8>>)) -> Self {
        let mut saved = agentpack_fs::Transaction::new();
        saved.remember_as(&manifest.0, manifest.1);
        saved.remember_as(&lock.0, lock.1);
        Self {
            saved: std::cell::RefCell::new(saved),
        }
    }

    /// Puts both files back exactly as they were (atomically, and only when they changed).
    pub fn restore(&self) {
        for err in self.saved.borrow_mut().rollback() {
            output::warn(&format!(
                "could not restore {}: {}",
                err.path.display(),
                err.source
            ));
        }
    }
}
