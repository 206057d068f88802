//! Blobs: importing a file or bytes once under its BLAKE3 name, checking a blob against the
//! identity stamp this user recorded (`crate::stamps`) before linking it, and linking (or copying) a
//! verified blob into a tree being built.
//!
//! Owns: blob import/repair, [`Store::link_blob`], recording and flushing stamps, and the link-mode
//! fallback warning. Must never make a blob visible under its final name before its bytes are
//! complete and hashed, and never publish store paths (the sibling modules do).

use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self, set_mode, unique_name};
use crate::link::{LinkMethod, LinkMode, Placed, LINK_MODE_ENV};
use crate::lock::LockKind;
use crate::meta::Entry;
use crate::names::BlobId;
pub(crate) use crate::stamps::BlobStamp;
use crate::store::Store;

pub(super) const COPY_BUFFER: usize = 256 * 1024;

/// Where each user keeps the identity stamps of the blobs it verified: `stamps/<uid>/table` (one
/// line per stamp: blob file name, size, mtime, ctime, inode). Stores made before the table kept
/// one file per blob (`stamps/<uid>/<2hex>/<blob>`); the first table written removes those.
pub(crate) const STAMPS: &str = "stamps";

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
    hash_stream(path, &mut file, None)
}

/// Copies `src` into the new file `dst` (0600) while hashing it: its BLAKE3 and size. On failure
/// `dst` is removed.
fn copy_hashing(src: &Path, dst: &Path) -> Result<(BlobId, u64)> {
    let mut from = fs_err::File::open(src).ctx("open", src)?;
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dst)
        .ctx("create", dst)?;
    let copied = hash_stream(src, &mut from, Some((dst, &mut to)));
    drop(to);
    if copied.is_err() {
        let _ = std::fs::remove_file(dst);
    }
    copied
}

/// BLAKE3 and size of what `from` (reading `src`) yields, written to `to` on the way when given.
fn hash_stream(
    src: &Path,
    from: &mut impl Read,
    mut to: Option<(&Path, &mut std::fs::File)>,
) -> Result<(BlobId, u64)> {
    let mut hasher = blake3::Hasher::new();
    let mut buffer = vec![0u8; COPY_BUFFER];
    let mut size = 0u64;
    loop {
        let read = from.read(&mut buffer).ctx("read", src)?;
        if read == 0 {
            return Ok((BlobId::from_hash(hasher.finalize()), size));
        }
        hasher.update(&buffer[..read]);
        if let Some((dst, file)) = to.as_mut() {
            file.write_all(&buffer[..read]).ctx("write", *dst)?;
        }
        size += read as u64;
    }
}

/// `true` the first time this process reports a link-mode fallback for the store at `store_dir`: one
/// command may open the store several times (e.g. `add` locks, then syncs), and the user needs to read
/// the warning once.
pub(super) fn first_link_fallback_report(store_dir: &Path) -> bool {
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
pub(super) fn link_fallback_warning(
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

impl Store {
    /// The stamp this user recorded for blob `id` (its `executable` variant), if any.
    pub(crate) fn recorded_stamp(&self, id: &BlobId, executable: bool) -> Option<BlobStamp> {
        let (_, name) = id.file_name(executable);
        self.loaded_stamps()?.stamps.get(&name).copied()
    }

    /// This handle's stamp state, the user's table read into it first if it was not yet.
    fn loaded_stamps(&self) -> Option<std::sync::MutexGuard<'_, crate::stamps::StampState>> {
        let mut state = self.link_caches.stamps()?;
        if state.table.is_none() {
            state.load(self.user_stamps_dir().join(crate::stamps::STAMP_TABLE));
        }
        Some(state)
    }

    /// `stamps/<uid>/`: where this user keeps its blob stamp table and its tree table.
    pub(crate) fn user_stamps_dir(&self) -> PathBuf {
        self.dir.join(STAMPS).join(fsutil::euid().to_string())
    }

    /// Creates `stamps/` (with the store's mutable-directory mode, so every user of a shared store
    /// can add their own) and `stamps/<uid>/` (0700) when missing; `false` when `stamps/` cannot be
    /// made usable. Best effort, like every stamp.
    pub(crate) fn ensure_user_stamps_dir(&self) -> bool {
        let stamps = self.dir.join(STAMPS);
        if !stamps.is_dir()
            && std::fs::create_dir(&stamps).is_ok()
            && set_mode(&stamps, self.dir_mode).is_err()
        {
            return false;
        }
        let mine = self.user_stamps_dir();
        if !mine.is_dir() && std::fs::create_dir(&mine).is_ok() {
            let _ = set_mode(&mine, 0o700);
        }
        true
    }

    /// Records `stamp` as what the blob file of `id` looks like now (after verifying or linking
    /// it), in memory until [`Store::flush_stamps`]. Best effort: without a stamp the next link
    /// re-hashes the blob, nothing worse.
    pub(crate) fn record_stamp(&self, id: &BlobId, executable: bool, stamp: BlobStamp) {
        if self.read_only {
            return;
        }
        let (_, name) = id.file_name(executable);
        // The table is loaded first, so a recorded stamp is never overwritten by an older line.
        if let Some(mut state) = self.loaded_stamps() {
            if state
                .stamps
                .get(&name)
                .is_some_and(|recorded| stamp.is_earlier_view_of(recorded))
            {
                return;
            }
            if state.stamps.insert(name.clone(), stamp) != Some(stamp) {
                state.dirty.push((name, stamp));
            }
        }
    }

    /// Records the stamp of the blob file `blob` as it is now (after verifying or linking it).
    pub(crate) fn record_blob_stamp(&self, id: &BlobId, executable: bool, blob: &Path) {
        if let Ok(meta) = std::fs::symlink_metadata(blob) {
            self.record_stamp(id, executable, BlobStamp::of(&meta));
        }
    }

    /// Appends the stamps this handle recorded to the user's stamp table (one write; called when a
    /// publication ends and when the handle is dropped). Best effort.
    pub(crate) fn flush_stamps(&self) {
        if self.read_only {
            return;
        }
        let Some(mut state) = self.link_caches.stamps() else {
            return;
        };
        if state.dirty.is_empty() {
            return;
        }
        if self.ensure_user_stamps_dir() {
            let _ = state.append_dirty();
        }
    }

    /// Drops from this user's stamp table the stamps of blobs that are gone (GC, after its sweep):
    /// `present` names every blob file left in `blobs/` (GC's own listing less what it removed, so
    /// no blob is looked up again), and the table is rewritten once when any stamp went; returns
    /// the bytes the filesystem allocates less for it afterwards.
    pub(crate) fn forget_stamps_of_missing_blobs(&self, present: &HashSet<String>) -> u64 {
        use std::os::unix::fs::MetadataExt as _;
        if self.read_only {
            return 0;
        }
        let Some(mut state) = self.loaded_stamps() else {
            return 0;
        };
        let Some(table) = state.table.clone() else {
            return 0;
        };
        let allocated =
            |path: &Path| std::fs::symlink_metadata(path).map_or(0, |meta| meta.blocks() * 512);
        if !state.retain_present(present) || !table.is_file() {
            return 0;
        }
        let was = allocated(&table);
        let _ = state.rewrite();
        was.saturating_sub(allocated(&table))
    }

    /// Whether this user may trust the tree and the metadata of the store path `name` in place
    /// (asked once per handle).
    pub(crate) fn trusted_store_path(&self, name: &crate::names::StorePathName) -> bool {
        if let Some(known) = self
            .link_caches
            .trusted_paths
            .lock()
            .ok()
            .and_then(|known| known.get(name).copied())
        {
            return known;
        }
        let trusted =
            self.trusted(&self.path_of(name)) && self.trusted(&self.meta_path(name.as_str()));
        if let Ok(mut known) = self.link_caches.trusted_paths.lock() {
            known.insert(name.clone(), trusted);
        }
        trusted
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
        self.blob_is_intact_as(id, executable, blob, &meta)
    }

    /// [`Store::blob_is_intact`] of a blob whose `lstat` is `meta`.
    fn blob_is_intact_as(
        &self,
        id: &BlobId,
        executable: bool,
        blob: &Path,
        meta: &std::fs::Metadata,
    ) -> Result<bool> {
        if self.recorded_stamp(id, executable) == Some(BlobStamp::of(meta)) {
            return Ok(true);
        }
        tracing::trace!(blob = %blob.display(), "blob stamp differs: re-hashing before linking it");
        let (found, _) = blake3_file(blob)?;
        if found != *id {
            return Ok(false);
        }
        self.record_stamp(id, executable, BlobStamp::of(meta));
        Ok(true)
    }

    /// After a damaged blob of this user was bypassed by a verified copy at `verified` (inside the
    /// store), the copy's inode becomes the blob again, so later links get the right bytes.
    pub(super) fn restore_blob_from(&self, id: &BlobId, executable: bool, verified: &Path) {
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

    pub(super) fn import_bytes_locked(&self, bytes: &[u8], executable: bool) -> Result<BlobId> {
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
        let temp = self.tmp_dir().join(unique_name("blob-"));
        let (id, size) = copy_hashing(src, &temp)?;
        if size == 0 {
            let _ = std::fs::remove_file(&temp);
            return Ok(None);
        }
        self.store_blob_from_temp(&temp, &id, executable)?;
        Ok(Some((id, size)))
    }

    /// Fast path of `import_tree` where store files are hard links of their blobs: copy `src` straight
    /// to `dst` while hashing it, then link `dst` into `blobs/` (or, if the blob exists, replace `dst`
    /// by a link to it). `None` when the fast path does not apply.
    pub(super) fn import_file_hardlinked(
        &self,
        src: &Path,
        dst: &Path,
        relative: &str,
        exec: bool,
    ) -> Result<Option<Entry>> {
        if self.linker.remembered(self.dev, self.dev) != Some(LinkMethod::Hardlink) {
            return Ok(None);
        }
        let (id, size) = copy_hashing(src, dst)?;
        set_mode(dst, file_mode(exec))?;
        if size == 0 {
            return Ok(Some(Entry::File {
                path: relative.to_owned(),
                blob: None,
                size: 0,
                exec,
            }));
        }
        self.make_blob_of(dst, &id, exec)?;
        Ok(Some(Entry::File {
            path: relative.to_owned(),
            blob: Some(id),
            size,
            exec,
        }))
    }

    /// Makes the complete, read-only file `dst` of a build (its bytes hash to `id`) the blob `id`
    /// by a hard link; when the blob appeared meanwhile `dst` becomes a link of it instead (or, if
    /// that blob lies, the blob is restored from `dst`); when it cannot be linked, `dst` stays a
    /// copy and the blob is made from another copy.
    pub(super) fn make_blob_of(&self, dst: &Path, id: &BlobId, exec: bool) -> Result<()> {
        let blob = self.blob_path(id, exec);
        if let Some(shard) = blob.parent() {
            self.ensure_shard(shard)?;
        }
        match std::fs::hard_link(dst, &blob) {
            Ok(()) => self.record_blob_stamp(id, exec, &blob),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                let temp = dst.with_file_name(unique_name(".link-"));
                match self.link_blob(id, exec, &temp) {
                    Ok(_) => fs_err::rename(&temp, dst).ctx("replace", dst)?,
                    // The blob lies: `dst` is the verified copy of the source; it becomes the blob.
                    Err(StoreError::TamperedObject { .. }) => self.restore_blob_from(id, exec, dst),
                    Err(_) => {}
                }
            }
            // Keep the copy; the blob is made the slow way.
            Err(_) => {
                let temp = self.tmp_dir().join(unique_name("blob-"));
                crate::link::copy_new(dst, &temp, 0o600).ctx("copy", dst)?;
                self.store_blob_from_temp(&temp, id, exec)?;
            }
        }
        Ok(())
    }

    /// Make the complete temp file `temp` the blob `id` (unless it already exists) and remove `temp`.
    /// `true` when `temp`'s inode became the blob.
    pub(super) fn store_blob_from_temp(
        &self,
        temp: &Path,
        id: &BlobId,
        executable: bool,
    ) -> Result<bool> {
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
        let (found, _) = copy_hashing(src, dst)?;
        if found != *id {
            let _ = std::fs::remove_file(dst);
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
        use std::os::unix::fs::MetadataExt as _;
        let mut blob = self.blob_path(id, executable);
        let meta = match std::fs::symlink_metadata(&blob) {
            Ok(meta) if meta.is_file() => meta,
            _ => {
                blob = self.ensure_blob_variant(id, executable)?;
                fs_err::symlink_metadata(&blob).ctx("inspect", &blob)?
            }
        };
        if !crate::store::trusted_owner(meta.uid()) {
            // Another user's blob is never linked (its owner could change it under us): copied, and
            // checked against its name while copied.
            self.copy_verified(&blob, dst, id, file_mode(executable), Some(&blob))?;
            return Ok(LinkMethod::Copy);
        }
        if !self.blob_is_intact_as(id, executable, &blob, &meta)? {
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
    pub(super) fn place_in_store(&self, src: &Path, dst: &Path, mode_bits: u32) -> Result<Placed> {
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
}
