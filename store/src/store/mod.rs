//! The [`Store`] handle: on-disk layout, opening, the store lock, temp dirs, temp roots and slots.
//!
//! Layout (version 1; a format change makes `v2/` and leaves `v1/` collectable):
//!
//! ```text
//! $AGENTPACK_HOME/cache/                    everything an offline sync needs (the CI recipe saves it)
//!   <cache_key> -> store/v1/<name>          documented slots, relative symlinks
//!   store/
//!     CACHEDIR.TAG  .gitignore              hygiene: backup tools and git skip the store
//!     v1/
//!       lock                                store lock: shared by builders, exclusive for GC/repair
//!       <32hex>-<label>/                    immutable store paths (dirs 0555, files 0444/0555)
//!       meta/<name>.json                    kind, tree hash, references, manifest of each store path
//!       blobs/<2hex>/<64hex>[x]             one inode per unique content (+ executable variant)
//!       .tmp/                               builds in progress and trash, same filesystem
//!       gcroots/indirect/<hash>.json        registered project pointers (indirect roots), per host
//!       gcroots/generations/<history>/@<host>/<nanos>-<name> -> ../../../../<name>   generation history
//!       gcroots/hosts/<host>.json           when each host last recorded a root, leased or ran GC
//!       temproots/<host>-<pid>-...          roots of running processes (OFD-locked while alive)
//!       leases/<host>-<pid>-<start>.json    launches using store paths
//!       index/                              LMDB metadata index when the store is on local disk
//!                                           (a shared store: one private index per user, index/u<uid>/)
//! ```
//!
//! Mutable directories take the permission bits of `store/` (make it `3775` with a shared group to share
//! a store between users); immutable content is world-readable and never secret.
//!
//! Layout: `open` (creating and opening the layout, or opening it read-only: see
//! [`Store::open_read_only`]), `temp` (build directories and temp roots),
//! `slots` (the `cache/<cache_key>` symlinks); this module holds the handle, its paths, the lock
//! and metadata lookups.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self, FilesystemKind};
use crate::index::Index;
use crate::link::{LinkMode, Linker};
use crate::lock::{self, FileLock, LockKind, LockOutcome};
use crate::meta::StorePathMeta;
use crate::names::{BlobId, StorePath, StorePathName};

mod open;
mod slots;
mod temp;

use open::create_dir_if_missing;
pub use slots::{SlotInspection, SlotState};
pub use temp::StoreTempDir;

/// Name of the layout version directory.
pub const LAYOUT_VERSION_DIR: &str = "v1";
/// Environment variable the cli reads for [`StoreOptions::host_id`] (tests simulate other hosts).
pub const HOST_ID_ENV: &str = "AGENTPACK_HOST_ID";

pub(crate) const BLOBS: &str = "blobs";
pub(crate) const META: &str = "meta";
pub(crate) const TMP: &str = ".tmp";
pub(crate) const GCROOTS: &str = "gcroots";
pub(crate) const INDIRECT: &str = "indirect";
pub(crate) const GENERATIONS: &str = "generations";
pub(crate) const HOSTS: &str = "hosts";
pub(crate) const TEMPROOTS: &str = "temproots";
pub(crate) const LEASES: &str = "leases";
/// Under the cache directory: one empty file per rebuildable slot (see
/// [`Store::mark_slot_rebuildable`]).
const REBUILDABLE_DIR: &str = ".rebuildable";
const INDEX: &str = "index";
const LOCK: &str = "lock";

const CACHEDIR_TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by agentpack.\n# For information about cache directory tags see https://bford.info/cachedir/\n";

/// How to open a store. Every field has a sensible default; the cli fills them from the environment.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// `AGENTPACK_LINK_MODE`; `None` is [`LinkMode::Auto`].
    pub link_mode: Option<LinkMode>,
    /// `AGENTPACK_HOST_ID`; `None` uses `/etc/machine-id`, else the hostname.
    pub host_id: Option<String>,
    /// A directory on local disk for the index when the store sits on a network filesystem
    /// (the cli passes `$XDG_CACHE_HOME/agentpack`). `None`: a remote store has no index.
    pub local_cache_dir: Option<PathBuf>,
    /// Use the metadata index at all.
    pub index: bool,
    /// Flush (syncfs + directory fsync) before a publication becomes visible. Default `true`.
    pub flush: bool,
    /// Re-hash every cache slot a command checks, even a store path whose files are still the
    /// blob inodes this user stamped (`AGENTPACK_FULL_VERIFY`; see [`Store::verify_slots_in_full`]).
    pub full_verify: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            link_mode: None,
            host_id: None,
            local_cache_dir: None,
            index: true,
            flush: true,
            full_verify: false,
        }
    }
}

/// The content-addressed store. Cheap to share by reference across threads.
pub struct Store {
    pub(crate) cache_dir: PathBuf,
    pub(crate) root: PathBuf,
    pub(crate) dir: PathBuf,
    pub(crate) dev: u64,
    pub(crate) host_id: String,
    pub(crate) linker: Linker,
    pub(crate) flush: bool,
    pub(crate) fs_kind: FilesystemKind,
    pub(crate) dir_mode: u32,
    /// The store is shared by a group (its root is group-writable): objects of other users are
    /// verified before use (see docs/src/shared-store.md).
    pub(crate) shared: bool,
    /// Packages other users published that this handle verified (re-hashed) before using them.
    pub(crate) verified: Mutex<std::collections::HashSet<StorePathName>>,
    /// What this user remembers of the packages of other users it verified, across handles.
    pub(crate) tree_stamps: crate::tree_stamps::TreeStamps,
    /// Every checked slot is re-hashed, stamps or not ([`Store::verify_slots_in_full`]).
    pub(crate) full_verify: std::sync::atomic::AtomicBool,
    /// Opened with [`Store::open_read_only`]: every write is refused ([`StoreError::ReadOnly`]),
    /// slot reads register no temp root, there is no index.
    pub(crate) read_only: bool,
    index_dir: Option<PathBuf>,
    index: OnceLock<Option<Index>>,
    /// Why the index had to be made again when it was opened (its files were unreadable), until the
    /// store database reports it.
    index_recreated: Mutex<Option<String>>,
    temp_roots: Mutex<Option<TempRootsFile>>,
    warnings: Mutex<Vec<String>>,
    pub(crate) metas: Mutex<HashMap<StorePathName, Arc<StorePathMeta>>>,
    shards: Mutex<std::collections::HashSet<PathBuf>>,
    /// Blob stamps and trusted store paths remembered while linking (`crate::stamps`).
    pub(crate) link_caches: crate::stamps::LinkCaches,
    /// The flushes this handle made (`crate::publish`: a staged input-addressed path placed
    /// after one of them needs no flush of its own).
    pub(crate) flushes: crate::publish::FlushCount,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir)
            .field("link_mode", &self.linker.mode())
            .field("read_only", &self.read_only)
            .finish()
    }
}

/// The file listing this process's temp roots; OFD-locked while the `Store` lives.
struct TempRootsFile {
    file: File,
    path: PathBuf,
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Ok(mut guard) = self.temp_roots.lock() {
            if let Some(roots) = guard.take() {
                let _ = std::fs::remove_file(&roots.path);
                drop(roots.file);
            }
        }
    }
}

impl Store {
    /// `$AGENTPACK_HOME/cache`: the slots' directory.
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// `cache/store`: the store root (hygiene files, layout version directories).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `cache/store/v1`: where store paths live.
    pub fn store_dir(&self) -> &Path {
        &self.dir
    }

    /// The link mode asked for.
    pub fn link_mode(&self) -> LinkMode {
        self.linker.mode()
    }

    /// The host id this handle writes into leases and locks.
    pub fn host_id(&self) -> &str {
        &self.host_id
    }

    /// The filesystem holding the store.
    pub fn filesystem(&self) -> &FilesystemKind {
        &self.fs_kind
    }

    /// Whether this handle was opened with [`Store::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Whether the store's layout directory (`cache/store/v1`) exists: a read-only handle of a
    /// store nobody made yet reads as empty (no slot, no store path).
    pub fn exists(&self) -> bool {
        self.dir.is_dir()
    }

    /// [`StoreError::ReadOnly`] for `operation` on `path` when this handle is read-only.
    pub(crate) fn refuse_if_read_only(&self, operation: &'static str, path: &Path) -> Result<()> {
        if self.read_only {
            return Err(StoreError::ReadOnly {
                operation,
                path: path.to_path_buf(),
            });
        }
        Ok(())
    }

    /// Warnings collected so far (e.g. locks unsupported), drained. Libraries never print: the cli does.
    pub fn take_warnings(&self) -> Vec<String> {
        self.warnings
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default()
    }

    pub(crate) fn warn(&self, message: String) {
        if let Ok(mut warnings) = self.warnings.lock() {
            if !warnings.contains(&message) {
                warnings.push(message);
            }
        }
    }

    /// The metadata index, opened on first use; `None` when disabled, or when the store is on a network
    /// filesystem and no local directory was given, or when it cannot be opened (a warning says why).
    /// An index whose files LMDB cannot read is made again (a warning says so) and the store database
    /// in it is rebuilt from the filesystem by the next reader.
    pub fn index(&self) -> Option<&Index> {
        self.index
            .get_or_init(|| {
                let dir = self.index_dir.as_ref()?;
                let opened = if self.shared {
                    self.private_index_dir(dir).and_then(|()| Index::open_private(dir))
                } else {
                    Index::open_reporting(dir)
                };
                match opened {
                    Ok(opened) => {
                        if let Some(reason) = opened.recreated {
                            self.warn(format!(
                                "warning: the store index in {} could not be read ({reason}); it was made again and is rebuilt from the filesystem",
                                dir.display()
                            ));
                            if let Ok(mut recreated) = self.index_recreated.lock() {
                                *recreated = Some(format!("its files could not be read: {reason}"));
                            }
                        }
                        Some(opened.index)
                    }
                    Err(err) => {
                        self.warn(format!("warning: the store index is unavailable ({err}); continuing without it"));
                        None
                    }
                }
            })
            .as_ref()
    }

    /// Why the index was made again when this handle opened it, once.
    pub(crate) fn take_index_recreated(&self) -> Option<String> {
        self.index_recreated.lock().ok()?.take()
    }

    /// Make this user's own index directory in a shared store (`index/u<uid>/`, 0700), refusing one
    /// that another user made: that user could write what this user reads.
    fn private_index_dir(&self, dir: &Path) -> Result<()> {
        if let Some(parent) = dir.parent() {
            if parent.starts_with(&self.dir) {
                self.ensure_dir(parent)?;
            } else {
                fs_err::create_dir_all(parent).ctx("create", parent)?;
            }
        }
        create_dir_if_missing(dir, Some(0o700))?;
        match fsutil::owner_of(dir) {
            Some(owner) if owner == fsutil::euid() => Ok(()),
            owner => Err(StoreError::ForeignObject {
                what: "index directory",
                path: dir.to_path_buf(),
                owner,
            }),
        }
    }

    /// Where the index lives (or would), if anywhere.
    pub fn index_location(&self) -> Option<&Path> {
        self.index_dir.as_deref()
    }

    // ----- locks -----

    fn lock_path(&self) -> PathBuf {
        self.dir.join(LOCK)
    }

    /// Take the store lock. Builders hold it shared for each publication; GC and repair exclusive.
    pub(crate) fn lock(&self, kind: LockKind) -> Result<Option<FileLock>> {
        // Every publication, root, lease and GC takes the lock first: a read-only handle stops
        // them here.
        self.refuse_if_read_only("lock", &self.lock_path())?;
        let owner = format!("host={}", self.host_id);
        match lock::acquire(&self.lock_path(), kind, &owner)? {
            LockOutcome::Held(lock) => Ok(Some(lock)),
            LockOutcome::Unsupported => {
                self.warn(format!(
                    "warning: the filesystem of {} does not support file locks; concurrent agentpack processes and `agentpack gc` are not protected from each other",
                    self.dir.display()
                ));
                Ok(None)
            }
        }
    }

    // ----- paths -----

    pub(crate) fn path_of(&self, name: &StorePathName) -> PathBuf {
        self.dir.join(name.as_str())
    }

    pub(crate) fn meta_path(&self, name: &str) -> PathBuf {
        self.dir.join(META).join(format!("{name}.json"))
    }

    pub(crate) fn blob_path(&self, id: &BlobId, executable: bool) -> PathBuf {
        let (shard, name) = id.file_name(executable);
        self.dir.join(BLOBS).join(shard).join(name)
    }

    pub(crate) fn tmp_dir(&self) -> PathBuf {
        self.dir.join(TMP)
    }

    /// Every entry of every shard directory under `blobs/`, as (path, UTF-8 file name): what
    /// GC sweeps and verify checks. Entries that are not blobs are the caller's to skip.
    pub(crate) fn blob_files(&self) -> Result<Vec<(PathBuf, String)>> {
        let blobs_dir = self.dir.join(BLOBS);
        let mut files = Vec::new();
        for shard in fs_err::read_dir(&blobs_dir).ctx("list", &blobs_dir)? {
            let shard = shard.ctx("list", &blobs_dir)?;
            if !shard.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                continue;
            }
            for entry in fs_err::read_dir(shard.path()).ctx("list", shard.path())? {
                let entry = entry.ctx("list", shard.path())?;
                if let Some(name) = entry.file_name().to_str() {
                    files.push((entry.path(), name.to_owned()));
                }
            }
        }
        Ok(files)
    }

    /// The store path called `name`, if it is published and this user may use it in place: this user
    /// or root published it. A path another user of a shared store published is `None` here (that
    /// user could change it under this one; see docs/src/shared-store.md): building it again fails with
    /// [`StoreError::ForeignObject`], and a package is verified before it is used
    /// ([`Store::publish_tree`], [`Store::verified_slot`]).
    pub fn get(&self, name: &StorePathName) -> Option<StorePath> {
        self.published(name)
            .filter(|path| fsutil::owner_of(path.path()).is_some_and(trusted_owner))
    }

    /// The store path called `name`, if it is published, whoever published it.
    pub(crate) fn published(&self, name: &StorePathName) -> Option<StorePath> {
        let path = self.path_of(name);
        std::fs::symlink_metadata(&path)
            .ok()
            .filter(|m| m.is_dir())
            .map(|_| StorePath::new(name.clone(), path))
    }

    /// The store path called `name` where it is (or will be) published, whether or not it exists yet.
    ///
    /// For referencing an input-addressed path that a later process publishes: GC follows a
    /// reference only to published paths, so a reference to a name not published yet is harmless,
    /// and it keeps the path alive from the moment it is published.
    pub fn planned(&self, name: &StorePathName) -> StorePath {
        StorePath::new(name.clone(), self.path_of(name))
    }

    /// The store path a filesystem path points into (e.g. a project pointer), if it is in this store.
    pub fn store_path_of(&self, path: &Path) -> Option<StorePath> {
        let resolved = std::fs::canonicalize(path).ok()?;
        let relative = resolved.strip_prefix(&self.dir).ok()?;
        let first = relative.components().next()?.as_os_str().to_str()?;
        let name: StorePathName = first.parse().ok()?;
        self.published(&name)
    }

    /// The metadata of a published store path.
    pub fn meta(&self, path: &StorePath) -> Result<crate::meta::StorePathMeta> {
        crate::meta::StorePathMeta::read(&self.meta_path(path.name().as_str()))
    }

    /// The metadata of a published store path, read once per handle (store paths are immutable).
    pub(crate) fn cached_meta(&self, name: &StorePathName) -> Option<Arc<StorePathMeta>> {
        if let Some(meta) = self.metas.lock().ok()?.get(name) {
            return Some(Arc::clone(meta));
        }
        let meta = Arc::new(StorePathMeta::read(&self.meta_path(name.as_str())).ok()?);
        self.metas
            .lock()
            .ok()?
            .insert(name.clone(), Arc::clone(&meta));
        Some(meta)
    }

    /// Rebuild the store database in the index from the filesystem (every record made again); what
    /// it found. Without an index there is nothing to rebuild.
    pub fn rebuild_index(&self) -> Result<crate::IndexStatus> {
        if self.index().is_none() {
            return Ok(crate::IndexStatus::Unavailable);
        }
        crate::database::invalidate(self);
        let names = crate::gc::list_store_paths(self)?;
        let mut records = crate::database::Records::open(self, crate::database::Need::Sizes);
        for name in &names {
            records.get(name);
        }
        Ok(records.finish(Some(&names)))
    }

    /// What the store database knows about the store path `name` (kind, references, size on disk,
    /// registration time, the roots that reached it at the last GC), checked against the filesystem;
    /// `None` when it is not published.
    pub fn path_info(&self, name: &StorePathName) -> Result<Option<crate::PathInfo>> {
        crate::database::path_info(self, name)
    }

    /// Make sure a blob shard directory exists (remembered per handle; GC never removes shards).
    pub(crate) fn ensure_shard(&self, shard: &Path) -> Result<()> {
        if self
            .shards
            .lock()
            .map(|known| known.contains(shard))
            .unwrap_or(false)
        {
            return Ok(());
        }
        self.ensure_dir(shard)?;
        if let Ok(mut known) = self.shards.lock() {
            known.insert(shard.to_path_buf());
        }
        Ok(())
    }

    /// Create a directory with the store's mutable-directory mode, if missing.
    pub(crate) fn ensure_dir(&self, path: &Path) -> Result<()> {
        self.refuse_if_read_only("create", path)?;
        create_dir_if_missing(path, Some(self.dir_mode))
    }
}

/// Whether this user uses in place what `uid` made in the store: its own objects and root's. Anything
/// another user made is verified first (blobs and packages) or refused (input-addressed paths).
pub(crate) fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == fsutil::euid()
}
