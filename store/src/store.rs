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

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self, filesystem_kind, set_mode, unique_name, FilesystemKind};
use crate::index::{tables, Index};
use crate::link::{LinkMode, Linker};
use crate::lock::{self, FileLock, LockKind, LockOutcome};
use crate::meta::StorePathMeta;
use crate::names::{BlobId, StorePath, StorePathName};
use crate::tree_hash::{matches_tree_hash, Match, TreeHash};

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
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            link_mode: None,
            host_id: None,
            local_cache_dir: None,
            index: true,
            flush: true,
        }
    }
}

/// What a slot (`cache/<cache_key>`) holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotState {
    /// No slot.
    Missing,
    /// A link to a store path that exists.
    Linked(StorePath),
    /// A link whose store path is gone (collected or removed by repair): fetch again.
    Dangling(PathBuf),
    /// A link to something outside this store.
    Foreign(PathBuf),
    /// A plain directory, as agentpack 0.4 and earlier extracted it (imported on verified read).
    LegacyDir(PathBuf),
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
    index_dir: Option<PathBuf>,
    index: OnceLock<Option<Index>>,
    temp_roots: Mutex<Option<TempRootsFile>>,
    warnings: Mutex<Vec<String>>,
    pub(crate) metas: Mutex<HashMap<StorePathName, Arc<StorePathMeta>>>,
    shards: Mutex<std::collections::HashSet<PathBuf>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir)
            .field("link_mode", &self.linker.mode())
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
}

impl Drop for StoreTempDir {
    fn drop(&mut self) {
        let _ = fsutil::remove_tree(&self.base);
    }
}

impl Store {
    /// Open (creating) the store of `cache_dir` (`$AGENTPACK_HOME/cache`); the store itself lives in
    /// `cache_dir/store/`.
    pub fn open(cache_dir: &Path, options: StoreOptions) -> Result<Store> {
        fs_err::create_dir_all(cache_dir).ctx("create", cache_dir)?;
        let cache_dir = fs_err::canonicalize(cache_dir).ctx("resolve", cache_dir)?;
        let root = cache_dir.join("store");
        create_dir_if_missing(&root, None)?;
        write_if_missing(&root.join("CACHEDIR.TAG"), CACHEDIR_TAG.as_bytes())?;
        write_if_missing(&root.join(".gitignore"), b"*\n")?;
        let root_meta = fs_err::metadata(&root).ctx("inspect", &root)?;
        let root_mode = root_meta.mode() & 0o7777;
        // Mutable directories follow the store root: when it is group-writable they are
        // group-writable, setgid and sticky (the `/tmp` rule, see docs/src/shared-store.md).
        let shared = root_mode & 0o020 != 0;
        let dir_mode = if shared {
            0o755 | fsutil::SHARED_DIR_BITS
        } else {
            0o755
        };
        let dir = root.join(LAYOUT_VERSION_DIR);
        let mut open_warnings = Vec::new();
        let mut mutable_dirs = vec![dir.clone()];
        mutable_dirs
            .extend([BLOBS, META, TMP, GCROOTS, TEMPROOTS, LEASES].map(|sub| dir.join(sub)));
        mutable_dirs.push(dir.join(GCROOTS).join(INDIRECT));
        mutable_dirs.push(dir.join(GCROOTS).join(GENERATIONS));
        if shared {
            // Every directory users share is made up front, so the administrator who opens the
            // store first owns them all: a directory's owner may remove anyone's entries in it.
            mutable_dirs.push(dir.join(GCROOTS).join(HOSTS));
            if options.index && !filesystem_kind(&root)?.remote {
                mutable_dirs.push(dir.join(INDEX));
            }
            mutable_dirs
                .extend((0..=255u8).map(|byte| dir.join(BLOBS).join(format!("{byte:02x}"))));
            mutable_dirs.push(cache_dir.join(REBUILDABLE_DIR));
        }
        let admin = root_meta.uid();
        let mut not_admins = Vec::new();
        for path in &mutable_dirs {
            create_dir_if_missing(path, Some(dir_mode))?;
            if shared {
                match make_sticky(path, admin)? {
                    SharedDir::Ok => {}
                    SharedDir::NotAdmins(owner) => not_admins.push((path.clone(), owner)),
                    SharedDir::NotSticky(warning) => open_warnings.push(warning),
                }
            }
        }
        if let Some((first, owner)) = not_admins.first() {
            open_warnings.push(format!(
                "warning: {} shared store directories (the first: {}) belong to uid {owner}, not to the store's owner (uid {admin}): their owner may remove or replace what anyone published in them; as root run `chown -R {admin} {}` on the directories (not the store paths), or re-create the store as docs/src/shared-store.md says",
                not_admins.len(),
                first.display(),
                dir.display()
            ));
        }
        let dev = fs_err::metadata(&dir).ctx("inspect", &dir)?.dev();
        let fs_kind = filesystem_kind(&dir)?;
        // In a shared store every user keeps an index of their own (`index/u<uid>/`, private): the
        // index is a cache another member must not be able to write into.
        let own_index = |base: PathBuf| {
            if shared {
                base.join(format!("u{}", fsutil::euid()))
            } else {
                base
            }
        };
        let index_dir = if !options.index {
            None
        } else if !fs_kind.remote {
            Some(own_index(dir.join(INDEX)))
        } else {
            options.local_cache_dir.as_ref().and_then(|local| {
                let local_remote = fs_err::create_dir_all(local)
                    .ok()
                    .and_then(|()| filesystem_kind(local).ok())
                    .is_none_or(|kind| kind.remote);
                if local_remote {
                    return None;
                }
                let key = blake3::hash(dir.as_os_str().as_encoded_bytes()).to_hex();
                Some(local.join(INDEX).join(&key[..32]))
            })
        };
        let host_id = crate::host::host_id(options.host_id.as_deref());
        Ok(Store {
            cache_dir,
            root,
            dir,
            dev,
            host_id,
            linker: Linker::new(options.link_mode.unwrap_or_default()),
            flush: options.flush,
            fs_kind,
            dir_mode,
            index_dir,
            index: OnceLock::new(),
            temp_roots: Mutex::new(None),
            warnings: Mutex::new(open_warnings),
            shared,
            verified: Mutex::new(std::collections::HashSet::new()),
            metas: Mutex::new(HashMap::new()),
            shards: Mutex::new(std::collections::HashSet::new()),
        })
    }

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
    pub fn index(&self) -> Option<&Index> {
        self.index
            .get_or_init(|| {
                let dir = self.index_dir.as_ref()?;
                let opened = if self.shared {
                    self.private_index_dir(dir).and_then(|()| Index::open_private(dir))
                } else {
                    Index::open(dir)
                };
                match opened {
                    Ok(index) => Some(index),
                    Err(err) => {
                        self.warn(format!("warning: the store index is unavailable ({err}); continuing without it"));
                        None
                    }
                }
            })
            .as_ref()
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

    /// A new private build directory under `.tmp/`, locked so GC leaves it alone while the guard lives.
    pub fn temp_dir(&self) -> Result<StoreTempDir> {
        let (base, lock) = self.new_build_dir("work-")?;
        let path = base.join("tree");
        fs_err::create_dir(&path).ctx("create", &path)?;
        Ok(StoreTempDir {
            base,
            path,
            _lock: lock,
        })
    }

    /// Create `.tmp/<prefix><unique>/` with a held `.lock` file inside.
    pub(crate) fn new_build_dir(&self, prefix: &str) -> Result<(PathBuf, File)> {
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
    /// path just read from a slot). Publication and slot reads do this automatically.
    pub fn add_temp_root(&self, path: &StorePath) -> Result<()> {
        self.append_temp_root(&format!("p {}\n", path.name()))
    }

    pub(crate) fn add_temp_root_blob(&self, id: &BlobId, executable: bool) -> Result<()> {
        let (_, name) = id.file_name(executable);
        self.append_temp_root(&format!("b {name}\n"))
    }

    fn append_temp_root(&self, line: &str) -> Result<()> {
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

    fn slot_path(&self, cache_key: &str) -> Result<PathBuf> {
        let bad = cache_key.is_empty()
            || cache_key.starts_with('.')
            || cache_key.contains(['/', '\0'])
            || cache_key == "store"
            || cache_key == "db.reddb";
        if bad {
            return Err(StoreError::InvalidCacheKey {
                found: cache_key.to_owned(),
            });
        }
        Ok(self.cache_dir.join(cache_key))
    }

    /// What `cache/<cache_key>` holds.
    pub fn slot_state(&self, cache_key: &str) -> Result<SlotState> {
        let slot = self.slot_path(cache_key)?;
        let meta = match std::fs::symlink_metadata(&slot) {
            Ok(meta) => meta,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Ok(SlotState::Missing)
            }
            Err(err) => return Err(StoreError::io("inspect", &slot, err)),
        };
        if meta.is_dir() {
            return Ok(SlotState::LegacyDir(slot));
        }
        if !meta.file_type().is_symlink() {
            return Ok(SlotState::Foreign(slot));
        }
        let target = fs_err::read_link(&slot).ctx("read link", &slot)?;
        let prefix = Path::new("store").join(LAYOUT_VERSION_DIR);
        let name = target
            .strip_prefix(&prefix)
            .ok()
            .and_then(|rest| rest.to_str())
            .and_then(|rest| rest.parse::<StorePathName>().ok());
        match name {
            Some(name) => match self.published(&name) {
                Some(path) => Ok(SlotState::Linked(path)),
                None => Ok(SlotState::Dangling(target)),
            },
            None => Ok(SlotState::Foreign(target)),
        }
    }

    /// The store path in slot `cache_key`, unverified (registered as a temp root).
    pub fn slot(&self, cache_key: &str) -> Result<Option<StorePath>> {
        match self.slot_state(cache_key)? {
            SlotState::Linked(path) => {
                self.add_temp_root(&path)?;
                Ok(Some(path))
            }
            _ => Ok(None),
        }
    }

    /// Re-hashes the store path a slot links to against the lock's hash (traced: `-vv` shows each).
    fn rehash_slot(cache_key: &str, path: &StorePath, expected: &TreeHash) -> Result<Match> {
        tracing::trace!(cache_key, path = %path.path().display(), "re-hashing a cache slot against the lock");
        matches_tree_hash(path.path(), expected)
    }

    /// The store path in slot `cache_key`, after recomputing its tree hash and comparing it with
    /// `expected` (the legacy rule counts as a match). A mismatch is
    /// [`StoreError::ContentHashMismatch`] naming the slot; nothing is changed. A legacy slot directory
    /// that matches is imported into the store and the slot becomes a link.
    pub fn verified_slot(&self, cache_key: &str, expected: &TreeHash) -> Result<Option<StorePath>> {
        let slot = self.slot_path(cache_key)?;
        match self.slot_state(cache_key)? {
            SlotState::Linked(path) => match Self::rehash_slot(cache_key, &path, expected)? {
                Match::Exact | Match::Legacy => {
                    self.add_temp_root(&path)?;
                    Ok(Some(path))
                }
                Match::Mismatch { actual } => Err(StoreError::ContentHashMismatch {
                    expected: *expected,
                    actual,
                    path: slot,
                }),
            },
            SlotState::LegacyDir(dir) => match matches_tree_hash(&dir, expected)? {
                Match::Exact | Match::Legacy => {
                    let label = &cache_key[..cache_key.len().min(16)];
                    let path = self.publish_tree(&dir, label, Some(expected))?;
                    self.set_slot(cache_key, &path)?;
                    Ok(Some(path))
                }
                Match::Mismatch { actual } => Err(StoreError::ContentHashMismatch {
                    expected: *expected,
                    actual,
                    path: slot,
                }),
            },
            SlotState::Missing | SlotState::Dangling(_) | SlotState::Foreign(_) => Ok(None),
        }
    }

    /// Marks slot `cache_key` as rebuildable: its content is a copy agentpack makes again from a
    /// source on disk (a path dependency, a `local/` mirror package) on every lock and sync, so the
    /// slot is not a GC root. What a generation uses stays through the generation's references; older
    /// copies become collectable, and GC then removes the slot too.
    pub fn mark_slot_rebuildable(&self, cache_key: &str) -> Result<()> {
        self.slot_path(cache_key)?;
        let dir = self.cache_dir.join(REBUILDABLE_DIR);
        if !dir.is_dir() {
            // Every user of a shared `cache/` marks slots here: shared like the store's directories.
            let mode = if fsutil::group_shared(&self.cache_dir) {
                0o755 | fsutil::SHARED_DIR_BITS
            } else {
                0o755
            };
            create_dir_if_missing(&dir, Some(mode))?;
        }
        let marker = dir.join(cache_key);
        if std::fs::symlink_metadata(&marker).is_err() {
            fs_err::write(&marker, b"").ctx("write", &marker)?;
        }
        Ok(())
    }

    /// Whether slot `cache_key` was marked with [`Store::mark_slot_rebuildable`].
    pub(crate) fn slot_is_rebuildable(&self, cache_key: &str) -> bool {
        self.cache_dir
            .join(REBUILDABLE_DIR)
            .join(cache_key)
            .is_file()
    }

    /// The file marking slot `cache_key` rebuildable.
    pub(crate) fn rebuildable_marker(&self, cache_key: &str) -> PathBuf {
        self.cache_dir.join(REBUILDABLE_DIR).join(cache_key)
    }

    /// Point slot `cache_key` at `path` atomically (temp symlink + rename). A legacy slot directory is
    /// moved aside and removed.
    pub fn set_slot(&self, cache_key: &str, path: &StorePath) -> Result<()> {
        let slot = self.slot_path(cache_key)?;
        let _lock = self.lock(LockKind::Shared)?;
        let target = Path::new("store")
            .join(LAYOUT_VERSION_DIR)
            .join(path.name().as_str());
        if std::fs::read_link(&slot).is_ok_and(|existing| existing == target) {
            // Already so (possibly another user's link, which this user could not replace).
            return Ok(());
        }
        let temp = self.cache_dir.join(unique_name(".slot-"));
        std::os::unix::fs::symlink(&target, &temp).ctx("create link", &temp)?;
        if let Err(err) = std::fs::rename(&temp, &slot) {
            let is_dir = std::fs::symlink_metadata(&slot)
                .map(|m| m.is_dir())
                .unwrap_or(false);
            if !is_dir {
                let _ = std::fs::remove_file(&temp);
                return Err(StoreError::io("replace", &slot, err));
            }
            let aside = self.tmp_dir().join(unique_name("legacy-slot-"));
            fs_err::rename(&slot, &aside).ctx("move aside", &slot)?;
            fs_err::rename(&temp, &slot).ctx("replace", &slot)?;
            fsutil::remove_tree(&aside)?;
        }
        if self.flush {
            fsutil::fsync_dir(&self.cache_dir)?;
        }
        if let Some(index) = self.index() {
            if let Err(err) = index.put(
                tables::SLOTS,
                cache_key.as_bytes(),
                path.name().as_str().as_bytes(),
            ) {
                self.warn(format!(
                    "warning: could not record slot {cache_key} in the index: {err}"
                ));
            }
        }
        Ok(())
    }

    /// Remove slot `cache_key` (a link; a legacy directory is removed too). Missing is fine.
    pub fn remove_slot(&self, cache_key: &str) -> Result<()> {
        let slot = self.slot_path(cache_key)?;
        fsutil::remove_tree(&slot)?;
        if let Some(index) = self.index() {
            let _ = index.delete(tables::SLOTS, cache_key.as_bytes());
        }
        Ok(())
    }

    /// Every slot that links into this store: `(cache_key, store path name)`.
    pub fn slots(&self) -> Result<Vec<(String, StorePathName)>> {
        let mut out = Vec::new();
        for entry in fs_err::read_dir(&self.cache_dir).ctx("list", &self.cache_dir)? {
            let entry = entry.ctx("list", &self.cache_dir)?;
            let Some(key) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if key.starts_with('.') || key == "store" {
                continue;
            }
            let Ok(target) = std::fs::read_link(entry.path()) else {
                continue;
            };
            let prefix = Path::new("store").join(LAYOUT_VERSION_DIR);
            if let Some(name) = target
                .strip_prefix(&prefix)
                .ok()
                .and_then(|r| r.to_str())
                .and_then(|r| r.parse().ok())
            {
                out.push((key, name));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Rebuild the index's slot table from the slot links (the filesystem is the truth).
    pub fn rebuild_index(&self) -> Result<()> {
        let Some(index) = self.index() else {
            return Ok(());
        };
        index.clear(tables::SLOTS)?;
        for (key, name) in self.slots()? {
            index.put(tables::SLOTS, key.as_bytes(), name.as_str().as_bytes())?;
        }
        Ok(())
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
        create_dir_if_missing(path, Some(self.dir_mode))
    }
}

/// Whether this user uses in place what `uid` made in the store: its own objects and root's. Anything
/// another user made is verified first (blobs and packages) or refused (input-addressed paths).
pub(crate) fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == fsutil::euid()
}

/// What [`make_sticky`] found.
enum SharedDir {
    /// Sticky, setgid, group-writable, and the administrator's (or this user's, who just made it).
    Ok,
    /// Owned by this other user (neither the administrator nor root), who may remove anyone's entries
    /// in it.
    NotAdmins(u32),
    /// Lacks the bits and belongs to someone else: this warning says how to fix it.
    NotSticky(String),
}

/// Give a shared directory the sticky bit (and the group bits) when this user owns it, so no member
/// can rename or remove another member's entries; report one owned by another user than the store's
/// owner (`admin`) or root, and one that lacks the bits and that this user cannot change.
fn make_sticky(path: &Path, admin: u32) -> Result<SharedDir> {
    let meta = fs_err::symlink_metadata(path).ctx("inspect", path)?;
    let mode = meta.mode() & 0o7777;
    let owner = meta.uid();
    if mode & fsutil::SHARED_DIR_BITS != fsutil::SHARED_DIR_BITS {
        if owner != fsutil::euid() {
            return Ok(SharedDir::NotSticky(format!(
                "warning: the shared store directory {} has mode {mode:04o}: without the sticky bit any member of the group can replace what another member published there; as its owner or root run `chmod 3775 {}` (see docs/src/shared-store.md)",
                path.display(),
                path.display()
            )));
        }
        set_mode(path, mode | fsutil::SHARED_DIR_BITS)?;
    }
    // (This user's own directories are no threat to this user: the warning is for the others.)
    if owner != admin && owner != 0 && owner != fsutil::euid() {
        return Ok(SharedDir::NotAdmins(owner));
    }
    Ok(SharedDir::Ok)
}

fn create_dir_if_missing(path: &Path, mode: Option<u32>) -> Result<()> {
    match std::fs::create_dir(path) {
        Ok(()) => {
            if let Some(mode) = mode {
                set_mode(path, mode)?;
            }
            Ok(())
        }
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(StoreError::io("create", path, err)),
    }
}

fn write_if_missing(path: &Path, content: &[u8]) -> Result<()> {
    if path.exists() {
        return Ok(());
    }
    let temp = path.with_file_name(unique_name(".new-"));
    fs_err::write(&temp, content).ctx("write", &temp)?;
    set_mode(&temp, 0o644)?;
    fs_err::rename(&temp, path).ctx("rename", path)
}
