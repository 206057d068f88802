//! Importing a package tree with each file read once: its bytes hashed for the blob (BLAKE3) and
//! kept for the tree hash (`sha256-tree-v1` fed from memory, [`hash_known_records`]), so the
//! publication of a package never reads its files a second time; and, for a scratch tree the
//! publication consumes ([`PackageTree::adopting`](super::PackageTree::adopting)), each file whose
//! blob is new **adopted** as that blob (made read-only and renamed into the build directory, then
//! hard-linked into `blobs/`) instead of copied.
//!
//! Owns [`Store::import_tree_once`] and the adoption rule. Must never adopt a file that another
//! name, user or writer could still change: only a regular file of this user on the store's
//! filesystem with a single link, unchanged while it was read, when store files are hard links of
//! their blobs; any other file is written from the bytes read (the copy of before). Never stages
//! or places a store path (the package module does).

use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::built::write_new;
use super::*;
use crate::error::{IoContext, Result, StoreError};
use crate::link::{create_empty, LinkMethod};
use crate::meta::Entry;
use crate::names::BlobId;
use crate::store::Store;
use crate::tree_hash::{hash_known_records, KnownRecord, RecordKind, BATCH_BYTES, SMALL_FILE};

/// A file imported by [`Store::import_file_once`]: its manifest entry, its bytes when they were
/// read whole (kept for the tree hash), and whether its inode was adopted as the blob.
pub(super) struct ImportedFile {
    pub entry: Entry,
    pub bytes: Option<Vec<u8>>,
    pub adopted: bool,
}

/// Takes `size` bytes from the memory `budget` of one package's kept bytes; `false` (nothing
/// taken) when not that many are left.
fn reserve(budget: &AtomicU64, size: u64) -> bool {
    budget
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
            left.checked_sub(size)
        })
        .is_ok()
}

impl Store {
    /// Copy (or, with `adopt`, move) the tree at `src` into `out`, files through blobs, reading
    /// each regular file once; returns the manifest and, when every file was small enough to be
    /// kept in memory (up to [`SMALL_FILE`] each, [`BATCH_BYTES`] together), the tree's
    /// `sha256-tree-v1` computed from the bytes read (`None`: the caller hashes `out`).
    ///
    /// The digest is that of `out`: an adopted file is the inode that was read, a written one holds
    /// the bytes read, and a linked blob was checked against its name (stamp or re-hash) when
    /// linked, and its name is the BLAKE3 of the bytes read. With `adopt`, `src` is a scratch tree
    /// of this process that the caller drops afterwards: adopted files leave it.
    pub(super) fn import_tree_once(
        &self,
        src: &Path,
        out: &Path,
        adopt: bool,
    ) -> Result<(Vec<Entry>, Option<TreeHash>, usize)> {
        fs_err::create_dir(out).ctx("create", out)?;
        let (mut entries, files) = scan_tree(src)?;
        create_dirs_and_links(out, &entries)?;
        let budget = AtomicU64::new(BATCH_BYTES);
        // Asked once: only this user's files are adopted.
        let adopter = adopt.then(crate::fsutil::euid);
        let imported: Vec<ImportedFile> = files
            .par_iter()
            .map(|(relative, source, exec)| {
                let dst = out.join(relative);
                self.import_file_once(source, &dst, relative, *exec, adopter, &budget)
            })
            .collect::<Result<_>>()?;
        let adopted = imported.iter().filter(|file| file.adopted).count();
        let hash = imported.iter().all(|file| file.bytes.is_some()).then(|| {
            let links = entries.iter().filter_map(|entry| match entry {
                Entry::Link { path, target } => Some(KnownRecord {
                    kind: RecordKind::Link,
                    relative: path.as_bytes(),
                    payload: target.as_bytes(),
                }),
                _ => None,
            });
            let files = imported.iter().filter_map(|file| match &file.entry {
                Entry::File { path, exec, .. } => Some(KnownRecord {
                    kind: if *exec {
                        RecordKind::Exec
                    } else {
                        RecordKind::File
                    },
                    relative: path.as_bytes(),
                    payload: file.bytes.as_deref().unwrap_or_default(),
                }),
                _ => None,
            });
            let mut records: Vec<KnownRecord<'_>> = links.chain(files).collect();
            hash_known_records(&mut records)
        });
        entries.extend(imported.into_iter().map(|file| file.entry));
        sort_entries(&mut entries);
        Ok((entries, hash, adopted))
    }

    /// Imports the regular file `source` (`relative` in its tree) as `dst` of a build, read once:
    /// a small file's bytes are kept (within `budget`) and, with `adopter` (this user's id, when the
    /// tree may be adopted), its inode becomes the blob when the blob is new and [`adoptable`] says
    /// so; a large one takes the streamed copy of
    /// [`Store::import_tree_file`].
    fn import_file_once(
        &self,
        source: &Path,
        dst: &Path,
        relative: &str,
        exec: bool,
        adopter: Option<u32>,
        budget: &AtomicU64,
    ) -> Result<ImportedFile> {
        let mut file = fs_err::File::open(source).ctx("open", source)?;
        let before = file.metadata().ctx("inspect", source)?;
        if !before.is_file() {
            return Err(StoreError::UnsupportedFileType {
                path: source.to_path_buf(),
            });
        }
        if before.len() > SMALL_FILE || !reserve(budget, before.len()) {
            drop(file);
            return Ok(ImportedFile {
                entry: self.import_tree_file(source, dst, relative, exec)?,
                bytes: None,
                adopted: false,
            });
        }
        let mut bytes = Vec::with_capacity(usize::try_from(before.len()).unwrap_or(0));
        file.read_to_end(&mut bytes).ctx("read", source)?;
        let mode = file_mode(exec);
        if bytes.is_empty() {
            create_empty(dst, mode)?;
            return Ok(ImportedFile {
                entry: file_entry(relative, BlobId::of(&bytes), 0, exec),
                bytes: Some(bytes),
                adopted: false,
            });
        }
        let id = BlobId::of(&bytes);
        let entry = file_entry(relative, id, bytes.len() as u64, exec);
        let hard_links = self.linker.remembered(self.dev, self.dev) == Some(LinkMethod::Hardlink);
        if !hard_links || self.has_blob(&id, exec) {
            // The blob exists (or store files are not hard links of their blobs): placed by the
            // link mode; a blob that lies is bypassed by the bytes read and restored from them.
            self.place_bytes(&bytes, &id, exec, dst)?;
            return Ok(ImportedFile {
                entry,
                bytes: Some(bytes),
                adopted: false,
            });
        }
        let adopted = match adopter {
            Some(uid) => self.adopt_file(&file, (&before, uid, bytes.len()), source, dst, mode)?,
            None => false,
        };
        drop(file);
        if !adopted {
            write_new(dst, &bytes, mode)?;
        }
        self.make_blob_of(dst, &id, exec)?;
        Ok(ImportedFile {
            entry,
            bytes: Some(bytes),
            adopted,
        })
    }

    /// Moves the scratch file `source` (open as `file`; `before` its metadata when opened, `uid`
    /// this user, `read` bytes read from it) to `dst` with the blob's `mode`, when [`adoptable`]:
    /// `false` (nothing moved; its mode may be the blob's already) when it is not, or the rename
    /// fails (another filesystem).
    fn adopt_file(
        &self,
        file: &fs_err::File,
        (before, uid, read): (&std::fs::Metadata, u32, usize),
        source: &Path,
        dst: &Path,
        mode: u32,
    ) -> Result<bool> {
        if !adoptable(before, self.dev, uid, read) {
            return Ok(false);
        }
        // Read-only first, through the descriptor that was read: from here no name grants a write.
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .ctx("make read-only", source)?;
        let after = file.metadata().ctx("inspect", source)?;
        if !adoptable(&after, self.dev, uid, read)
            || after.mtime() != before.mtime()
            || after.mtime_nsec() != before.mtime_nsec()
            || after.ino() != before.ino()
        {
            return Ok(false);
        }
        Ok(std::fs::rename(source, dst).is_ok())
    }
}

/// Whether a scratch file whose metadata is `meta` (and of which `read` bytes were read) may become
/// a blob as it is: a regular file of this user (`uid`) on the store's filesystem (`store_dev`),
/// with no other name, whose size is what was read.
pub(super) fn adoptable(meta: &std::fs::Metadata, store_dev: u64, uid: u32, read: usize) -> bool {
    meta.is_file()
        && meta.uid() == uid
        && meta.dev() == store_dev
        && meta.nlink() == 1
        && meta.len() == read as u64
}

/// Creates in `out` the directories and symbolic links of a scanned tree (`entries` in walk order,
/// every directory before what it holds).
pub(super) fn create_dirs_and_links(out: &Path, entries: &[Entry]) -> Result<()> {
    for entry in entries {
        let dst = out.join(entry.path());
        match entry {
            Entry::Dir { .. } => fs_err::create_dir(&dst).ctx("create", &dst)?,
            Entry::Link { target, .. } => {
                std::os::unix::fs::symlink(target, &dst).ctx("create link", &dst)?;
            }
            Entry::File { .. } => {}
        }
    }
    Ok(())
}
