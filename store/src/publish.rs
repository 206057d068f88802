//! Putting things into the store: blobs (import a file or bytes once, named by BLAKE3) and store paths
//! (`publish_tree` for packages, `publish_built` and `publish_files` for input-addressed paths such as
//! generations).
//!
//! Every publication: hold the store lock shared, build in a locked `.tmp/` directory, link files from
//! blobs, make the tree read-only, one flush (syncfs), `rename(2)` into place (a lost race is success:
//! same name, same content), write the metadata, fsync the directories, register a temp root. Nothing is
//! ever visible under a final name half-written: blobs are linked into place complete, store paths are
//! renamed complete. A package is published only after its tree hash matches the expected one.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use rayon::prelude::*;

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self, set_mode, unique_name};
use crate::link::{create_empty, LinkMethod, LinkMode, Placed, LINK_MODE_ENV};
use crate::lock::LockKind;
use crate::meta::{Entry, PathKind, StorePathMeta, META_VERSION};
use crate::names::{BlobId, StorePath, StorePathName};
use crate::store::Store;
use crate::tree_hash::{hash_tree, matches_tree_hash, relative_bytes, Match, TreeHash};

const COPY_BUFFER: usize = 256 * 1024;

/// Where each user keeps the identity stamps of the blobs it verified: `stamps/<uid>/<2hex>/<blob>`.
pub(crate) const STAMPS: &str = "stamps";

/// What a blob's inode looked like right after it was last verified (hashed) or linked by this user:
/// size, mtime, ctime (both to the nanosecond) and inode number. A write changes mtime and ctime;
/// `touch` can put mtime back but never ctime; a replaced blob has another inode. `link(2)` also
/// moves ctime (the link count changes), so every link this user makes records the stamp again;
/// a link someone else made only costs one re-hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlobStamp {
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    ino: u64,
}

impl BlobStamp {
    fn of(meta: &std::fs::Metadata) -> BlobStamp {
        use std::os::unix::fs::MetadataExt as _;
        BlobStamp {
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
        }
    }

    fn to_text(self) -> String {
        format!(
            "{} {} {} {} {} {}\n",
            self.size, self.mtime.0, self.mtime.1, self.ctime.0, self.ctime.1, self.ino
        )
    }

    fn parse(text: &str) -> Option<BlobStamp> {
        let mut numbers = text.split_ascii_whitespace();
        let mut next = || numbers.next()?.parse::<i64>().ok();
        let (size, m0, m1, c0, c1, ino) = (next()?, next()?, next()?, next()?, next()?, next()?);
        Some(BlobStamp {
            size: u64::try_from(size).ok()?,
            mtime: (m0, m1),
            ctime: (c0, c1),
            ino: u64::try_from(ino).ok()?,
        })
    }
}

/// Prefix of a tree being published, sealed in the store directory before its final rename.
pub(crate) const PUBLISH_PREFIX: &str = ".pub-";

/// Where the content of one planned file comes from.
#[derive(Clone, Debug)]
pub enum Source {
    /// A blob already in the store (no hashing, no copying: linked).
    Blob(BlobId),
    /// These bytes (imported as a blob unless empty).
    Bytes(Vec<u8>),
    /// A symbolic link with this target text (`executable` is ignored).
    Symlink(String),
    /// An existing file: a file of another store path is linked from its blob; any other file is copied
    /// into a blob first.
    ExistingFile(PathBuf),
}

/// One file of a [`Store::publish_files`] plan.
#[derive(Clone, Debug)]
pub struct PlannedFile {
    /// Relative `/`-separated path inside the store path (no `..`, no absolute, no empty components).
    pub path: String,
    /// Where the content comes from.
    pub source: Source,
    /// Mode 0555 instead of 0444.
    pub executable: bool,
}

impl PlannedFile {
    /// A planned file.
    pub fn new(path: impl Into<String>, source: Source, executable: bool) -> Self {
        PlannedFile {
            path: path.into(),
            source,
            executable,
        }
    }
}

pub(crate) fn file_mode(executable: bool) -> u32 {
    if executable {
        0o555
    } else {
        0o444
    }
}

/// BLAKE3 and size of a file, streamed.
pub(crate) fn blake3_file(path: &Path) -> Result<(BlobId, u64)> {
    let mut file = fs_err::File::open(path).ctx("open", path)?;
    let mut hasher = blake3::Hasher::new();
    let mut buffer = vec![0u8; COPY_BUFFER];
    let mut size = 0u64;
    loop {
        let read = file.read(&mut buffer).ctx("read", path)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
        size += read as u64;
    }
    Ok((BlobId::from_hash(hasher.finalize()), size))
}

fn utf8_relative(root: &Path, path: &Path) -> Result<String> {
    let bytes = relative_bytes(root, path);
    String::from_utf8(bytes).map_err(|err| StoreError::InvalidPath {
        path: String::from_utf8_lossy(err.as_bytes()).into_owned(),
        reason: "store paths only hold UTF-8 file names",
    })
}

fn utf8_target(target: &Path, link: &Path) -> Result<String> {
    target
        .to_str()
        .map(str::to_owned)
        .ok_or_else(|| StoreError::InvalidPath {
            path: link.display().to_string(),
            reason: "store paths only hold symbolic links with UTF-8 targets",
        })
}

impl Store {
    fn stamp_path(&self, id: &BlobId, executable: bool) -> PathBuf {
        let (shard, name) = id.file_name(executable);
        self.dir
            .join(STAMPS)
            .join(fsutil::euid().to_string())
            .join(shard)
            .join(name)
    }

    /// Records the stamp of the blob file `blob` as it is now (after verifying or linking it).
    /// Best effort: without a stamp the next link re-hashes the blob, nothing worse.
    pub(crate) fn record_blob_stamp(&self, id: &BlobId, executable: bool, blob: &Path) {
        let Ok(meta) = std::fs::symlink_metadata(blob) else {
            return;
        };
        let path = self.stamp_path(id, executable);
        let Some(dir) = path.parent() else {
            return;
        };
        if !dir.is_dir() {
            let stamps = self.dir.join(STAMPS);
            if !stamps.is_dir()
                && std::fs::create_dir(&stamps).is_ok()
                && set_mode(&stamps, self.dir_mode).is_err()
            {
                return;
            }
            let mine = dir.parent().unwrap_or(dir);
            if std::fs::create_dir_all(mine).is_ok() {
                let _ = set_mode(mine, 0o700);
            }
            let _ = std::fs::create_dir_all(dir);
        }
        let temp = dir.join(unique_name(".stamp-"));
        if std::fs::write(&temp, BlobStamp::of(&meta).to_text()).is_err()
            || std::fs::rename(&temp, &path).is_err()
        {
            let _ = std::fs::remove_file(&temp);
        }
    }

    /// Whether the blob file `blob` is still the content `id` names: its stamp matches the one this
    /// user recorded (cheap), or else a full re-hash says so (and the stamp is recorded again).
    pub(crate) fn blob_is_intact(
        &self,
        id: &BlobId,
        executable: bool,
        blob: &Path,
    ) -> Result<bool> {
        let meta = fs_err::symlink_metadata(blob).ctx("inspect", blob)?;
        let recorded = std::fs::read_to_string(self.stamp_path(id, executable))
            .ok()
            .and_then(|text| BlobStamp::parse(&text));
        if recorded == Some(BlobStamp::of(&meta)) {
            return Ok(true);
        }
        tracing::trace!(blob = %blob.display(), "blob stamp differs: re-hashing before linking it");
        let (found, _) = blake3_file(blob)?;
        if found != *id {
            return Ok(false);
        }
        self.record_blob_stamp(id, executable, blob);
        Ok(true)
    }

    /// After a damaged blob of this user was bypassed by a verified copy at `verified` (inside the
    /// store), the copy's inode becomes the blob again, so later links get the right bytes.
    fn restore_blob_from(&self, id: &BlobId, executable: bool, verified: &Path) {
        let blob = self.blob_path(id, executable);
        if !self.trusted(&blob) {
            return;
        }
        let temp = self.tmp_dir().join(unique_name("blob-"));
        if std::fs::hard_link(verified, &temp).is_ok() && std::fs::rename(&temp, &blob).is_ok() {
            self.record_blob_stamp(id, executable, &blob);
        } else {
            let _ = std::fs::remove_file(&temp);
        }
    }

    /// Whether blob `id` (in its `executable` variant) is in the store.
    pub fn has_blob(&self, id: &BlobId, executable: bool) -> bool {
        self.blob_path(id, executable).is_file()
    }

    /// The published input-addressed path `name` when this user may use it; `Err` when another user
    /// published it (nothing but rebuilding could tell its content is right, and its owner could
    /// change it afterwards; input-addressed names include the user, so only a deliberate collision
    /// gets here).
    fn usable_input_addressed(&self, name: &StorePathName) -> Result<Option<StorePath>> {
        let Some(existing) = self.published(name) else {
            return Ok(None);
        };
        if self.trusted(existing.path()) {
            return Ok(Some(existing));
        }
        Err(StoreError::ForeignObject {
            what: "store path",
            path: existing.path().to_path_buf(),
            owner: fsutil::owner_of(existing.path()),
        })
    }

    /// A package another user published is re-hashed before this handle first uses it: its name says
    /// which tree hash it must have.
    fn verify_foreign_package(&self, existing: &StorePath, expected: &TreeHash) -> Result<()> {
        if self.trusted(existing.path())
            || self
                .verified
                .lock()
                .is_ok_and(|verified| verified.contains(existing.name()))
        {
            return Ok(());
        }
        let actual = hash_tree(existing.path())?;
        if actual != *expected {
            return Err(StoreError::TamperedObject {
                what: "store path",
                path: existing.path().to_path_buf(),
                owner: fsutil::owner_of(existing.path()),
                detail: format!("its tree hash is {actual}, not {expected}"),
            });
        }
        if let Ok(mut verified) = self.verified.lock() {
            verified.insert(existing.name().clone());
        }
        Ok(())
    }

    /// Import the file at `src` as a blob (copied while hashed, so the name always matches the bytes
    /// stored). `None` for an empty file: empty files are never blobs. The blob is a temp root of this
    /// handle.
    pub fn import_file(&self, src: &Path, executable: bool) -> Result<Option<BlobId>> {
        let _lock = self.lock(LockKind::Shared)?;
        let imported = self.import_file_locked(src, executable)?;
        if let Some((id, _)) = imported {
            self.add_temp_root_blob(&id, executable)?;
        }
        Ok(imported.map(|(id, _)| id))
    }

    /// Import `bytes` as a blob; `None` when empty. The blob is a temp root of this handle.
    pub fn import_bytes(&self, bytes: &[u8], executable: bool) -> Result<Option<BlobId>> {
        if bytes.is_empty() {
            return Ok(None);
        }
        let _lock = self.lock(LockKind::Shared)?;
        let id = self.import_bytes_locked(bytes, executable)?;
        self.add_temp_root_blob(&id, executable)?;
        Ok(Some(id))
    }

    fn import_bytes_locked(&self, bytes: &[u8], executable: bool) -> Result<BlobId> {
        let id = BlobId::of(bytes);
        if self.has_blob(&id, executable) {
            return Ok(id);
        }
        let temp = self.tmp_dir().join(unique_name("blob-"));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .ctx("create", &temp)?;
        file.write_all(bytes).ctx("write", &temp)?;
        drop(file);
        self.store_blob_from_temp(&temp, &id, executable)?;
        Ok(id)
    }

    /// Copy `src` into a temp file while hashing it, then link it into `blobs/`.
    pub(crate) fn import_file_locked(
        &self,
        src: &Path,
        executable: bool,
    ) -> Result<Option<(BlobId, u64)>> {
        let mut from = fs_err::File::open(src).ctx("open", src)?;
        let temp = self.tmp_dir().join(unique_name("blob-"));
        let mut to = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .ctx("create", &temp)?;
        let mut hasher = blake3::Hasher::new();
        let mut buffer = vec![0u8; COPY_BUFFER];
        let mut size = 0u64;
        let copied: Result<()> = (|| loop {
            let read = from.read(&mut buffer).ctx("read", src)?;
            if read == 0 {
                return Ok(());
            }
            hasher.update(&buffer[..read]);
            to.write_all(&buffer[..read]).ctx("write", &temp)?;
            size += read as u64;
        })();
        drop(to);
        if let Err(err) = copied {
            let _ = std::fs::remove_file(&temp);
            return Err(err);
        }
        if size == 0 {
            let _ = std::fs::remove_file(&temp);
            return Ok(None);
        }
        let id = BlobId::from_hash(hasher.finalize());
        self.store_blob_from_temp(&temp, &id, executable)?;
        Ok(Some((id, size)))
    }

    /// Fast path of `import_tree` where store files are hard links of their blobs: copy `src` straight
    /// to `dst` while hashing it, then link `dst` into `blobs/` (or, if the blob exists, replace `dst`
    /// by a link to it). `None` when the fast path does not apply.
    fn import_file_hardlinked(
        &self,
        src: &Path,
        dst: &Path,
        relative: &str,
        exec: bool,
    ) -> Result<Option<Entry>> {
        if self.linker.remembered(self.dev, self.dev) != Some(LinkMethod::Hardlink) {
            return Ok(None);
        }
        let mut from = fs_err::File::open(src).ctx("open", src)?;
        let mut to = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dst)
            .ctx("create", dst)?;
        let mut hasher = blake3::Hasher::new();
        let mut buffer = vec![0u8; COPY_BUFFER];
        let mut size = 0u64;
        loop {
            let read = from.read(&mut buffer).ctx("read", src)?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
            to.write_all(&buffer[..read]).ctx("write", dst)?;
            size += read as u64;
        }
        drop(to);
        set_mode(dst, file_mode(exec))?;
        if size == 0 {
            return Ok(Some(Entry::File {
                path: relative.to_owned(),
                blob: None,
                size: 0,
                exec,
            }));
        }
        let id = BlobId::from_hash(hasher.finalize());
        let blob = self.blob_path(&id, exec);
        if let Some(shard) = blob.parent() {
            self.ensure_shard(shard)?;
        }
        match std::fs::hard_link(dst, &blob) {
            Ok(()) => self.record_blob_stamp(&id, exec, &blob),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                let temp = dst.with_file_name(unique_name(".link-"));
                match self.link_blob(&id, exec, &temp) {
                    Ok(_) => fs_err::rename(&temp, dst).ctx("replace", dst)?,
                    // The blob lies: `dst` is the verified copy of the source; it becomes the blob.
                    Err(StoreError::TamperedObject { .. }) => {
                        self.restore_blob_from(&id, exec, dst)
                    }
                    Err(_) => {}
                }
            }
            // Keep the copy; the blob is made the slow way.
            Err(_) => {
                let temp = self.tmp_dir().join(unique_name("blob-"));
                crate::link::copy_new(dst, &temp, 0o600).ctx("copy", dst)?;
                self.store_blob_from_temp(&temp, &id, exec)?;
            }
        }
        Ok(Some(Entry::File {
            path: relative.to_owned(),
            blob: Some(id),
            size,
            exec,
        }))
    }

    /// Make the complete temp file `temp` the blob `id` (unless it already exists) and remove `temp`.
    /// `true` when `temp`'s inode became the blob.
    fn store_blob_from_temp(&self, temp: &Path, id: &BlobId, executable: bool) -> Result<bool> {
        set_mode(temp, file_mode(executable))?;
        let blob = self.blob_path(id, executable);
        if let Some(shard) = blob.parent() {
            self.ensure_shard(shard)?;
        }
        let created = match std::fs::hard_link(temp, &blob) {
            Ok(()) => {
                self.record_blob_stamp(id, executable, &blob);
                true
            }
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => false,
            Err(err) => {
                let _ = std::fs::remove_file(temp);
                return Err(StoreError::io("store blob", &blob, err));
            }
        };
        fs_err::remove_file(temp).ctx("remove", temp)?;
        Ok(created)
    }

    /// The blob file of `id` in its `executable` variant, made from the other variant if needed.
    pub(crate) fn ensure_blob_variant(&self, id: &BlobId, executable: bool) -> Result<PathBuf> {
        let path = self.blob_path(id, executable);
        if path.is_file() {
            return Ok(path);
        }
        let other = self.blob_path(id, !executable);
        if !other.is_file() {
            return Err(StoreError::MissingBlob { id: id.hex(), path });
        }
        let temp = self.tmp_dir().join(unique_name("blob-"));
        self.copy_verified(&other, &temp, id, 0o600, Some(&other))?;
        self.store_blob_from_temp(&temp, id, executable)?;
        Ok(path)
    }

    /// Whether this user may use the store file `path` in place (see [`crate::store::trusted_owner`]).
    pub(crate) fn trusted(&self, path: &Path) -> bool {
        fsutil::owner_of(path).is_some_and(crate::store::trusted_owner)
    }

    /// Copy `src` to the new file `dst` (mode `mode_bits`) while hashing it; when the bytes are not
    /// the content `id` names, `dst` is removed and the error names `blame` (the store object that
    /// lied; `None`: a source outside the store, reported as a plain mismatch).
    pub(crate) fn copy_verified(
        &self,
        src: &Path,
        dst: &Path,
        id: &BlobId,
        mode_bits: u32,
        blame: Option<&Path>,
    ) -> Result<()> {
        let mut from = fs_err::File::open(src).ctx("open", src)?;
        let mut to = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dst)
            .ctx("create", dst)?;
        let mut hasher = blake3::Hasher::new();
        let mut buffer = vec![0u8; COPY_BUFFER];
        let copied: Result<()> = (|| loop {
            let read = from.read(&mut buffer).ctx("read", src)?;
            if read == 0 {
                return Ok(());
            }
            hasher.update(&buffer[..read]);
            to.write_all(&buffer[..read]).ctx("write", dst)?;
        })();
        drop(to);
        let found = BlobId::from_hash(hasher.finalize());
        if copied.is_err() || found != *id {
            let _ = std::fs::remove_file(dst);
            copied?;
            let culprit = blame.unwrap_or(src);
            let error = StoreError::TamperedObject {
                what: if blame.is_some() { "blob" } else { "file" },
                path: culprit.to_path_buf(),
                owner: fsutil::owner_of(culprit),
                detail: format!("its content is {found}, not {id}"),
            };
            self.warn(format!("warning: {error}"));
            return Err(error);
        }
        set_mode(dst, mode_bits)
    }

    /// Place blob `id` at `dst` by the link mode. On "too many links" the fresh copy made for `dst`
    /// becomes the blob's new inode, so later links start from it.
    pub(crate) fn link_blob(
        &self,
        id: &BlobId,
        executable: bool,
        dst: &Path,
    ) -> Result<LinkMethod> {
        let blob = self.ensure_blob_variant(id, executable)?;
        if !self.trusted(&blob) {
            // Another user's blob is never linked (its owner could change it under us): copied, and
            // checked against its name while copied.
            self.copy_verified(&blob, dst, id, file_mode(executable), Some(&blob))?;
            return Ok(LinkMethod::Copy);
        }
        if !self.blob_is_intact(id, executable, &blob)? {
            // Changed in place or replaced since it was verified: never linked. Callers fall back
            // to their verified source (and restore the blob from it).
            let (found, _) = blake3_file(&blob)?;
            return Err(StoreError::TamperedObject {
                what: "blob",
                path: blob.clone(),
                owner: fsutil::owner_of(&blob),
                detail: format!("its content is {found}, not {id}"),
            });
        }
        let placed = self.place_in_store(&blob, dst, file_mode(executable))?;
        self.record_blob_stamp(id, executable, &blob);
        if placed.too_many_links {
            let temp = self.tmp_dir().join(unique_name("blob-"));
            if std::fs::hard_link(dst, &temp).is_ok() && std::fs::rename(&temp, &blob).is_err() {
                let _ = std::fs::remove_file(&temp);
            }
        }
        Ok(placed.method)
    }

    /// Place the file `src` at `dst`, both inside the store, by the link mode. The first placement of
    /// this handle probes the filesystem; when the mode asked for (`AGENTPACK_LINK_MODE=reflink` or
    /// `hardlink`) turns out impossible and files are copied instead, a warning naming the variable is
    /// collected once (see [`Store::take_warnings`]).
    fn place_in_store(&self, src: &Path, dst: &Path, mode_bits: u32) -> Result<Placed> {
        let probed = self.linker.remembered(self.dev, self.dev).is_some();
        let placed = self.linker.place(src, dst, self.dev, self.dev, mode_bits)?;
        if !probed && !placed.too_many_links {
            if let Some(warning) = link_fallback_warning(
                self.linker.mode(),
                placed.method,
                &self.dir,
                &self.fs_kind.name,
            ) {
                if first_link_fallback_report(&self.dir) {
                    self.warn(warning);
                }
            }
        }
        Ok(placed)
    }

    /// Publish the package tree at `src` (regular files, symlinks and directories only) under
    /// `<first 32 hex of its sha256-tree-v1>-<label>`. With `expected`, a tree whose hash matches
    /// neither exactly nor by the legacy rule is refused with [`StoreError::ContentHashMismatch`] and
    /// nothing is published. The hash is taken over the copy in the store, i.e. over exactly the bytes
    /// that get published. Execute bits are kept (`x` records).
    pub fn publish_tree(
        &self,
        src: &Path,
        label: &str,
        expected: Option<&TreeHash>,
    ) -> Result<StorePath> {
        self.publish_package(src, label, expected, false)
    }

    /// Like [`Store::publish_tree`], but when a store path of that content already exists and no longer
    /// matches its hash (changed in place), the freshly imported and verified tree replaces it
    /// atomically (`rename` exchange). This is `sync --repair`: download again, verify, then replace.
    pub fn repair_tree(
        &self,
        src: &Path,
        label: &str,
        expected: Option<&TreeHash>,
    ) -> Result<StorePath> {
        self.publish_package(src, label, expected, true)
    }

    fn publish_package(
        &self,
        src: &Path,
        label: &str,
        expected: Option<&TreeHash>,
        replace_damaged: bool,
    ) -> Result<StorePath> {
        let _lock = self.lock(LockKind::Shared)?;
        let (base, _build_lock) = self.new_build_dir("pkg-")?;
        let out = base.join("out");
        let result = (|| {
            let (entries, actual) = self.build_package(src, &out, expected, replace_damaged)?;
            let name = StorePathName::from_tree_hash(&actual, label);
            if let Some(existing) = self.published(&name) {
                if !replace_damaged {
                    self.verify_foreign_package(&existing, &actual)?;
                }
                if replace_damaged && hash_tree(existing.path())? != actual {
                    crate::verify::replace_store_path(self, &out, existing.path())?;
                    let meta = new_meta(&name, PathKind::Package, Some(actual), &[], entries);
                    let meta_path = self.meta_path(name.as_str());
                    let temp = base.join("meta.json");
                    fs_err::write(&temp, meta.to_bytes()).ctx("write", &temp)?;
                    set_mode(&temp, 0o444)?;
                    fs_err::rename(&temp, &meta_path).ctx("publish", &meta_path)?;
                }
                return Ok(existing);
            }
            let meta = new_meta(&name, PathKind::Package, Some(actual), &[], entries);
            self.commit(&base, &out, &name, meta)
        })();
        let _ = fsutil::remove_tree(&base);
        let path = result?;
        self.add_temp_root(&path)?;
        Ok(path)
    }

    /// Import `src` into `out` and check the result. If the built tree does not match but `src` does,
    /// a blob it was linked from was changed in place: restore those blobs from `src` and build again.
    fn build_package(
        &self,
        src: &Path,
        out: &Path,
        expected: Option<&TreeHash>,
        always_check_source: bool,
    ) -> Result<(Vec<Entry>, TreeHash)> {
        let entries = self.import_tree(src, out)?;
        let actual = hash_tree(out)?;
        let matches = |hash: &TreeHash| -> Result<bool> {
            Ok(*hash == actual || !matches!(matches_tree_hash(out, hash)?, Match::Mismatch { .. }))
        };
        let suspicious = match expected {
            Some(expected) => !matches(expected)?,
            None => always_check_source,
        };
        if !suspicious {
            return Ok((entries, actual));
        }
        let source_hash = hash_tree(src)?;
        if source_hash != actual {
            self.heal_blobs(src, &entries)?;
            fsutil::remove_tree(out)?;
            let entries = self.import_tree(src, out)?;
            let actual = hash_tree(out)?;
            return self.check_expected(src, out, expected, entries, actual);
        }
        self.check_expected(src, out, expected, entries, actual)
    }

    fn check_expected(
        &self,
        src: &Path,
        out: &Path,
        expected: Option<&TreeHash>,
        entries: Vec<Entry>,
        actual: TreeHash,
    ) -> Result<(Vec<Entry>, TreeHash)> {
        if let Some(expected) = expected {
            if actual != *expected {
                if let Match::Mismatch { actual } = matches_tree_hash(out, expected)? {
                    return Err(StoreError::ContentHashMismatch {
                        expected: *expected,
                        actual,
                        path: src.to_path_buf(),
                    });
                }
            }
        }
        Ok((entries, actual))
    }

    /// Replace every blob used by `entries` whose content no longer matches its name with a fresh
    /// copy of the corresponding file of `src` (checked before it replaces anything).
    fn heal_blobs(&self, src: &Path, entries: &[Entry]) -> Result<()> {
        for entry in entries {
            let Entry::File {
                path,
                blob: Some(id),
                exec,
                ..
            } = entry
            else {
                continue;
            };
            let blob = self.blob_path(id, *exec);
            if blake3_file(&blob)
                .map(|(found, _)| found == *id)
                .unwrap_or(false)
            {
                continue;
            }
            let temp = self.tmp_dir().join(unique_name("blob-"));
            crate::link::copy_new(&src.join(path), &temp, file_mode(*exec))
                .ctx("copy", src.join(path))?;
            if blake3_file(&temp)?.0 == *id {
                fs_err::rename(&temp, &blob).ctx("replace", &blob)?;
            } else {
                let _ = std::fs::remove_file(&temp);
            }
        }
        Ok(())
    }

    /// Copy the tree at `src` into `out`, files through blobs. Returns the manifest.
    fn import_tree(&self, src: &Path, out: &Path) -> Result<Vec<Entry>> {
        fs_err::create_dir(out).ctx("create", out)?;
        let (entries, scanned) = scan_tree(src)?;
        // Walk order puts every directory before what it holds.
        for entry in &entries {
            let dst = out.join(entry.path());
            match entry {
                Entry::Dir { .. } => fs_err::create_dir(&dst).ctx("create", &dst)?,
                Entry::Link { target, .. } => {
                    std::os::unix::fs::symlink(target, &dst).ctx("create link", &dst)?;
                }
                Entry::File { .. } => {}
            }
        }
        let mut entries = entries;
        let files: Vec<_> = scanned
            .into_iter()
            .map(|(relative, source, exec)| {
                let dst = out.join(&relative);
                (relative, source, dst, exec)
            })
            .collect();
        let file_entries: Vec<Entry> = files
            .par_iter()
            .map(|(relative, source, dst, exec)| {
                if let Some(entry) = self.import_file_hardlinked(source, dst, relative, *exec)? {
                    return Ok(entry);
                }
                let imported = self.import_file_locked(source, *exec)?;
                match imported {
                    None => {
                        create_empty(dst, file_mode(*exec))?;
                        Ok(Entry::File {
                            path: relative.clone(),
                            blob: None,
                            size: 0,
                            exec: *exec,
                        })
                    }
                    Some((id, size)) => {
                        if let Err(err) = self.link_blob(&id, *exec, dst) {
                            let StoreError::TamperedObject { .. } = err else {
                                return Err(err);
                            };
                            // The blob of that name lies (another user's, or changed in place):
                            // copy the source, checked; an own blob is restored from the copy.
                            self.copy_verified(source, dst, &id, file_mode(*exec), None)?;
                            self.restore_blob_from(&id, *exec, dst);
                        }
                        Ok(Entry::File {
                            path: relative.clone(),
                            blob: Some(id),
                            size,
                            exec: *exec,
                        })
                    }
                }
            })
            .collect::<Result<_>>()?;
        entries.extend(file_entries);
        sort_entries(&mut entries);
        Ok(entries)
    }

    /// Publish an input-addressed store path called `name`, written by `build(out_dir, final_path)`.
    /// The final path is known before the build, so content may embed it. If `name` is already
    /// published, `build` is not called. Files are deduplicated into blobs afterwards; `references`
    /// are kept alive by GC as long as this path is.
    pub fn publish_built<F>(
        &self,
        name: &StorePathName,
        references: &[StorePath],
        build: F,
    ) -> Result<StorePath>
    where
        F: FnOnce(
            &Path,
            &Path,
        ) -> std::result::Result<(), Box<dyn std::error::Error + Send + Sync>>,
    {
        let _lock = self.lock(LockKind::Shared)?;
        if let Some(existing) = self.usable_input_addressed(name)? {
            self.add_temp_root(&existing)?;
            return Ok(existing);
        }
        let (base, _build_lock) = self.new_build_dir("built-")?;
        let out = base.join("out");
        let final_path = self.path_of(name);
        let result = (|| {
            fs_err::create_dir(&out).ctx("create", &out)?;
            build(&out, &final_path).map_err(|source| StoreError::Build {
                name: name.to_string(),
                source,
            })?;
            let entries = self.absorb_tree(&out)?;
            let meta = new_meta(name, PathKind::Built, None, references, entries);
            self.commit(&base, &out, name, meta)
        })();
        let _ = fsutil::remove_tree(&base);
        let path = result?;
        self.add_temp_root(&path)?;
        Ok(path)
    }

    /// Turn the files a builder wrote in `out` into blob links; returns the manifest.
    fn absorb_tree(&self, out: &Path) -> Result<Vec<Entry>> {
        let (mut entries, files) = scan_tree(out)?;
        let file_entries: Vec<Entry> = files
            .par_iter()
            .map(|(relative, path, exec)| {
                set_mode(path, file_mode(*exec))?;
                let (id, size) = blake3_file(path)?;
                if size == 0 {
                    return Ok(Entry::File {
                        path: relative.clone(),
                        blob: None,
                        size: 0,
                        exec: *exec,
                    });
                }
                let adopted = !self.has_blob(&id, *exec) && {
                    let temp = self.tmp_dir().join(unique_name("blob-"));
                    self.place_in_store(path, &temp, file_mode(*exec))?;
                    self.store_blob_from_temp(&temp, &id, *exec)?
                };
                if !adopted {
                    // The blob exists (or another file won the race): link the builder's file to it.
                    // Another user's blob that lies leaves the builder's own file in place.
                    let temp = path.with_file_name(unique_name(".absorb-"));
                    match self.link_blob(&id, *exec, &temp) {
                        Ok(_) => fs_err::rename(&temp, path).ctx("replace", path)?,
                        Err(StoreError::TamperedObject { .. }) => {
                            self.restore_blob_from(&id, *exec, path);
                        }
                        Err(err) => return Err(err),
                    }
                }
                Ok(Entry::File {
                    path: relative.clone(),
                    blob: Some(id),
                    size,
                    exec: *exec,
                })
            })
            .collect::<Result<_>>()?;
        entries.extend(file_entries);
        sort_entries(&mut entries);
        Ok(entries)
    }

    /// Publish an input-addressed store path called `name` assembled from `plan`: files are linked from
    /// blobs (known blobs are never re-hashed), bytes become blobs, symlinks are created. If `name` is
    /// already published it is returned as is.
    pub fn publish_files(
        &self,
        name: &StorePathName,
        plan: &[PlannedFile],
        references: &[StorePath],
    ) -> Result<StorePath> {
        let (dirs, mut order) = validate_plan(plan)?;
        order.sort_by(|&a, &b| plan[a].path.as_bytes().cmp(plan[b].path.as_bytes()));
        let _lock = self.lock(LockKind::Shared)?;
        if let Some(existing) = self.usable_input_addressed(name)? {
            self.add_temp_root(&existing)?;
            return Ok(existing);
        }
        let (base, _build_lock) = self.new_build_dir("files-")?;
        let out = base.join("out");
        let result = (|| {
            fs_err::create_dir(&out).ctx("create", &out)?;
            let mut entries = Vec::new();
            for dir in &dirs {
                let path = out.join(dir);
                fs_err::create_dir(&path).ctx("create", &path)?;
                entries.push(Entry::Dir { path: dir.clone() });
            }
            let file_entries: Vec<Entry> = order
                .par_iter()
                .map(|&index| self.place_planned(&plan[index], &out.join(&plan[index].path)))
                .collect::<Result<_>>()?;
            entries.extend(file_entries);
            sort_entries(&mut entries);
            let meta = new_meta(name, PathKind::Files, None, references, entries);
            self.commit(&base, &out, name, meta)
        })();
        let _ = fsutil::remove_tree(&base);
        let path = result?;
        self.add_temp_root(&path)?;
        Ok(path)
    }

    fn place_planned(&self, planned: &PlannedFile, dst: &Path) -> Result<Entry> {
        let exec = planned.executable;
        let path = planned.path.clone();
        let blob_entry = |id: BlobId, size: u64| Entry::File {
            path: path.clone(),
            blob: Some(id),
            size,
            exec,
        };
        match &planned.source {
            Source::Symlink(target) => {
                std::os::unix::fs::symlink(target, dst).ctx("create link", dst)?;
                Ok(Entry::Link {
                    path: path.clone(),
                    target: target.clone(),
                })
            }
            Source::Blob(id) => {
                self.link_blob(id, exec, dst)?;
                let size = fs_err::symlink_metadata(dst).ctx("inspect", dst)?.len();
                Ok(blob_entry(*id, size))
            }
            Source::Bytes(bytes) => {
                if bytes.is_empty() {
                    create_empty(dst, file_mode(exec))?;
                    return Ok(Entry::File {
                        path: path.clone(),
                        blob: None,
                        size: 0,
                        exec,
                    });
                }
                let id = self.import_bytes_locked(bytes, exec)?;
                match self.link_blob(&id, exec, dst) {
                    // Another user's blob of that name lies: this path gets its own copy.
                    Err(StoreError::TamperedObject { .. }) => {
                        write_new(dst, bytes, file_mode(exec))?;
                        self.restore_blob_from(&id, exec, dst);
                    }
                    other => {
                        other?;
                    }
                }
                Ok(blob_entry(id, bytes.len() as u64))
            }
            Source::ExistingFile(file) => {
                let inside_store = file.starts_with(&self.dir);
                let known = if let Some(found) = self.known_blob_of(file) {
                    Some(found)
                } else if inside_store {
                    let (id, size) = blake3_file(file)?;
                    (size == 0 || self.has_blob(&id, exec) || self.has_blob(&id, !exec))
                        .then_some((id, size))
                } else {
                    None
                };
                let imported = match known {
                    Some((_, 0)) => None,
                    Some(found) => Some(found),
                    None => self.import_file_locked(file, exec)?,
                };
                match imported {
                    None => {
                        create_empty(dst, file_mode(exec))?;
                        Ok(Entry::File {
                            path: path.clone(),
                            blob: None,
                            size: 0,
                            exec,
                        })
                    }
                    Some((id, size)) => {
                        if let Err(err) = self.link_blob(&id, exec, dst) {
                            let StoreError::TamperedObject { .. } = err else {
                                return Err(err);
                            };
                            // The blob of that name lies (another user's, or changed in place):
                            // copy the file itself, checked; an own blob is restored from the copy.
                            self.copy_verified(file, dst, &id, file_mode(exec), None)?;
                            self.restore_blob_from(&id, exec, dst);
                        }
                        Ok(blob_entry(id, size))
                    }
                }
            }
        }
    }

    /// The blob and size of a file of a published store path, from its manifest (no hashing).
    fn known_blob_of(&self, file: &Path) -> Option<(BlobId, u64)> {
        let relative = file.strip_prefix(&self.dir).ok()?;
        let mut components = relative.components();
        let name = components
            .next()?
            .as_os_str()
            .to_str()?
            .parse::<StorePathName>()
            .ok()?;
        let inner = components.as_path().to_str()?;
        // Another user's metadata is theirs to rewrite: their files are hashed instead.
        if !self.trusted(&self.path_of(&name)) || !self.trusted(&self.meta_path(name.as_str())) {
            return None;
        }
        let meta = self.cached_meta(&name)?;
        let index = meta
            .entries
            .binary_search_by(|entry| entry.path().as_bytes().cmp(inner.as_bytes()))
            .ok()?;
        match &meta.entries[index] {
            Entry::File {
                blob: Some(id),
                size,
                ..
            } => (self.has_blob(id, false) || self.has_blob(id, true)).then_some((*id, *size)),
            Entry::File { blob: None, .. } => Some((BlobId::of(b""), 0)),
            _ => None,
        }
    }

    /// Make `out` read-only, flush, publish the metadata, then rename the tree to its final name.
    ///
    /// The metadata goes first, so a store path never exists without it (a crash in between leaves
    /// metadata without a tree, which GC removes). A publisher that loses the rename race makes sure
    /// the metadata describes the winner's tree, not its own.
    ///
    /// Everything below the top directory is sealed first; the top is moved into the store directory
    /// under a hidden name while still writable (moving a directory into another parent needs write
    /// permission on the directory itself, which a sealed top only grants to root), sealed there, and
    /// then renamed to its final name within the same directory.
    fn commit(
        &self,
        base: &Path,
        out: &Path,
        name: &StorePathName,
        meta: StorePathMeta,
    ) -> Result<StorePath> {
        fsutil::seal_dirs_below(out)?;
        let meta_temp = base.join("meta.json");
        fs_err::write(&meta_temp, meta.to_bytes()).ctx("write", &meta_temp)?;
        set_mode(&meta_temp, 0o444)?;
        if self.flush {
            fsutil::flush_filesystem(&self.dir)?;
        }
        let final_path = self.path_of(name);
        let meta_path = self.meta_path(name.as_str());
        fs_err::rename(&meta_temp, &meta_path).ctx("publish", &meta_path)?;
        // Into the store directory under a hidden name (the top is still writable, which a move to
        // another directory needs), sealed there, then renamed to its final name within the same
        // directory (which needs no permission on the tree itself): a process killed at any point
        // never leaves an unsealed tree under a final name, only a hidden leftover GC removes.
        let staged = self.dir.join(unique_name(PUBLISH_PREFIX));
        fs_err::rename(out, &staged).ctx("publish", &final_path)?;
        let renamed = set_mode(&staged, 0o555).and_then(|()| {
            std::fs::rename(&staged, &final_path)
                .map_err(|err| StoreError::io("publish", &final_path, err))
        });
        if renamed.is_err() {
            let _ = fsutil::remove_tree(&staged);
        }
        match renamed {
            Ok(()) => {}
            Err(StoreError::Io { source: err, .. })
                if matches!(err.raw_os_error(), Some(libc::ENOTEMPTY | libc::EEXIST)) =>
            {
                // Lost the race: the winner's tree is in place; its metadata must describe it.
                let winner = self.manifest_of(&final_path)?;
                if winner != meta.entries {
                    let mut recovered = meta;
                    recovered.entries = winner;
                    let temp = base.join("meta-recovered.json");
                    fs_err::write(&temp, recovered.to_bytes()).ctx("write", &temp)?;
                    set_mode(&temp, 0o444)?;
                    fs_err::rename(&temp, &meta_path).ctx("publish", &meta_path)?;
                }
            }
            Err(err) => return Err(err),
        }
        if self.flush {
            fsutil::fsync_dir(&self.dir.join(crate::store::META))?;
            fsutil::fsync_dir(&self.dir)?;
            // The top directory's mode changed after the flush.
            fsutil::fsync_dir(&final_path)?;
        }
        Ok(StorePath::new(name.clone(), final_path))
    }

    /// The manifest of an existing tree (hashing every file).
    pub(crate) fn manifest_of(&self, root: &Path) -> Result<Vec<Entry>> {
        let (mut entries, files) = scan_tree(root)?;
        let file_entries: Vec<Entry> = files
            .par_iter()
            .map(|(relative, path, exec)| {
                let (id, size) = blake3_file(path)?;
                Ok(Entry::File {
                    path: relative.clone(),
                    blob: (size > 0).then_some(id),
                    size,
                    exec: *exec,
                })
            })
            .collect::<Result<_>>()?;
        entries.extend(file_entries);
        sort_entries(&mut entries);
        Ok(entries)
    }
}

/// `true` the first time this process reports a link-mode fallback for the store at `store_dir`: one
/// command may open the store several times (e.g. `add` locks, then syncs), and the user needs to read
/// the warning once.
fn first_link_fallback_report(store_dir: &Path) -> bool {
    static REPORTED: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<PathBuf>>> =
        std::sync::OnceLock::new();
    REPORTED
        .get_or_init(Default::default)
        .lock()
        .map(|mut reported| reported.insert(store_dir.to_path_buf()))
        .unwrap_or(true)
}

/// The warning for a link mode asked for by `AGENTPACK_LINK_MODE` that the store's filesystem cannot
/// do (`method` is what was done instead); `None` when the mode was honoured or not asked for.
fn link_fallback_warning(
    requested: LinkMode,
    method: LinkMethod,
    store_dir: &Path,
    filesystem: &str,
) -> Option<String> {
    let wanted = match requested {
        LinkMode::Reflink => LinkMethod::Reflink,
        LinkMode::Hardlink => LinkMethod::Hardlink,
        LinkMode::Auto | LinkMode::Copy => return None,
    };
    (method != wanted).then(|| {
        format!(
            "warning: {LINK_MODE_ENV}={requested}: the filesystem of the store {} ({filesystem}) cannot {wanted}, so store files are placed by {method} instead; set {LINK_MODE_ENV}=auto or copy to silence this warning",
            store_dir.display()
        )
    })
}

/// A regular file found by [`scan_tree`]: relative path, path, executable.
type ScannedFile = (String, PathBuf, bool);

/// Lists a tree without following links: its directories and symbolic links as manifest entries, and
/// its regular files as (relative path, path, executable) for the caller to hash or absorb. Any other
/// file type is an error.
fn scan_tree(root: &Path) -> Result<(Vec<Entry>, Vec<ScannedFile>)> {
    let mut entries = Vec::new();
    let mut files = Vec::new();
    for item in walkdir::WalkDir::new(root).follow_links(false).min_depth(1) {
        let item = item.map_err(|err| {
            let path = err.path().unwrap_or(root).to_path_buf();
            StoreError::io(
                "walk",
                path,
                err.into_io_error()
                    .unwrap_or_else(|| std::io::Error::other("walk")),
            )
        })?;
        let relative = utf8_relative(root, item.path())?;
        let file_type = item.file_type();
        if file_type.is_dir() {
            entries.push(Entry::Dir { path: relative });
        } else if file_type.is_symlink() {
            let target = fs_err::read_link(item.path()).ctx("read link", item.path())?;
            entries.push(Entry::Link {
                path: relative,
                target: utf8_target(&target, item.path())?,
            });
        } else if file_type.is_file() {
            let mode = item
                .metadata()
                .map(|m| m.permissions().mode())
                .unwrap_or(0o444);
            files.push((relative, item.path().to_path_buf(), mode & 0o111 != 0));
        } else {
            return Err(StoreError::UnsupportedFileType {
                path: item.path().to_path_buf(),
            });
        }
    }
    Ok((entries, files))
}

pub(crate) fn sort_entries(entries: &mut [Entry]) {
    entries.sort_by(|a, b| a.path().as_bytes().cmp(b.path().as_bytes()));
}

pub(crate) fn new_meta(
    name: &StorePathName,
    kind: PathKind,
    tree_hash: Option<TreeHash>,
    references: &[StorePath],
    entries: Vec<Entry>,
) -> StorePathMeta {
    let mut references: Vec<String> = references.iter().map(|r| r.name().to_string()).collect();
    references.sort();
    references.dedup();
    StorePathMeta {
        version: META_VERSION,
        name: name.to_string(),
        kind,
        tree_hash,
        references,
        created: fsutil::unix_now(),
        entries,
        source_executables: Vec::new(),
    }
}

/// Check every planned path; return the directories to create (parents first) and the plan order.
fn validate_plan(plan: &[PlannedFile]) -> Result<(Vec<String>, Vec<usize>)> {
    let mut files = std::collections::BTreeSet::new();
    let mut dirs = std::collections::BTreeSet::new();
    for planned in plan {
        let invalid = |reason| StoreError::InvalidPath {
            path: planned.path.clone(),
            reason,
        };
        let path = Path::new(&planned.path);
        if planned.path.is_empty() || planned.path.ends_with('/') || planned.path.contains("//") {
            return Err(invalid("empty path or empty component"));
        }
        if planned.path.contains('\0') {
            return Err(invalid("NUL in path"));
        }
        let plain = planned
            .path
            .split('/')
            .all(|part| part != "." && part != "..")
            && path
                .components()
                .all(|component| matches!(component, Component::Normal(_)));
        if !plain {
            return Err(invalid(
                "only plain relative components are allowed (no leading '/', '.', '..')",
            ));
        }
        if !files.insert(planned.path.clone()) {
            return Err(invalid("the same path is planned twice"));
        }
        let mut prefix = String::new();
        let parts: Vec<&str> = planned.path.split('/').collect();
        for part in &parts[..parts.len() - 1] {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            dirs.insert(prefix.clone());
        }
    }
    if let Some(clash) = dirs.iter().find(|dir| files.contains(*dir)) {
        return Err(StoreError::InvalidPath {
            path: clash.clone(),
            reason: "planned both as a file and as a directory",
        });
    }
    let mut dirs: Vec<String> = dirs.into_iter().collect();
    dirs.sort_by(|a, b| {
        a.matches('/')
            .count()
            .cmp(&b.matches('/').count())
            .then(a.as_bytes().cmp(b.as_bytes()))
    });
    Ok((dirs, (0..plan.len()).collect()))
}

/// Write `bytes` to the new file `dst` with `mode_bits`.
fn write_new(dst: &Path, bytes: &[u8], mode_bits: u32) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dst)
        .ctx("create", dst)?;
    file.write_all(bytes).ctx("write", dst)?;
    drop(file);
    set_mode(dst, mode_bits)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::StoreOptions;

    #[test]
    fn stamps_round_trip_and_follow_links_but_not_writes_or_replacements() {
        let meta = std::fs::metadata("/").unwrap();
        let stamp = BlobStamp::of(&meta);
        assert_eq!(BlobStamp::parse(&stamp.to_text()), Some(stamp));
        assert_eq!(BlobStamp::parse("1 2 3"), None);

        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cache"), StoreOptions::default()).unwrap();
        let id = store.import_bytes(b"good bytes\n", false).unwrap().unwrap();
        let blob = store.blob_path(&id, false);
        let scratch = dir.path().join("cache/store/v1/.tmp");
        // Linking moves the blob's ctime; the stamp follows, so the next check needs no re-hash.
        store.link_blob(&id, false, &scratch.join("a")).unwrap();
        let recorded = std::fs::read_to_string(store.stamp_path(&id, false)).unwrap();
        let now = BlobStamp::of(&std::fs::metadata(&blob).unwrap());
        assert_eq!(BlobStamp::parse(&recorded), Some(now));
        assert!(store.blob_is_intact(&id, false, &blob).unwrap());

        // A new inode with other bytes renamed over the blob: refused, never linked.
        let forged = scratch.join("forged");
        std::fs::write(&forged, b"evil bytes\n").unwrap();
        std::fs::rename(&forged, &blob).unwrap();
        assert!(!store.blob_is_intact(&id, false, &blob).unwrap());
        let refused = store.link_blob(&id, false, &scratch.join("b"));
        assert!(
            matches!(refused, Err(StoreError::TamperedObject { .. })),
            "{refused:?}"
        );
        assert!(!scratch.join("b").exists());

        // Rendered bytes of that name are placed from the bytes, and the blob is restored.
        let name = StorePathName::from_inputs(b"stamps test", "generation-test");
        let plan = [PlannedFile::new(
            "f.md",
            Source::Bytes(b"good bytes\n".to_vec()),
            false,
        )];
        let path = store.publish_files(&name, &plan, &[]).unwrap();
        assert_eq!(
            std::fs::read(path.path().join("f.md")).unwrap(),
            b"good bytes\n"
        );
        assert_eq!(std::fs::read(&blob).unwrap(), b"good bytes\n");
        assert!(store.blob_is_intact(&id, false, &blob).unwrap());
    }
}
