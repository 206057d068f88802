//! Putting things into the store: blobs (import a file or bytes once, named by BLAKE3) and store paths
//! (`publish_tree` for packages, `publish_built` and `publish_files` for input-addressed paths such as
//! generations).
//!
//! Every publication: hold the store lock shared, build in a locked `.tmp/` directory, link files from
//! blobs, make the tree read-only, one flush (syncfs) per batch, write the metadata, `rename(2)` into
//! place (a lost race is success: same name, same content), fsync the directories once per batch,
//! register a temp root. A batch ([`Store::publish_trees`]) publishes many package trees with one
//! flush; each store path is still renamed into place on its own, complete. An input-addressed path
//! staged with [`Store::stage_built`] before a batch and placed ([`Store::place_built`]) after it
//! shares the batch's flush (each handle counts its flushes, [`FlushCount`]). Nothing is
//! ever visible under a final name half-written: blobs are linked into place complete, store paths are
//! renamed complete. A package is published only after its tree hash matches the expected one.
//!
//! Layout: `blob` (blobs, stamps, linking), `adopt` (a package tree imported with each file read
//! once, and a scratch tree's files adopted as blobs), `package` (content-addressed package
//! trees), `built` (input-addressed paths and plans); this module holds the shared commit (stage
//! and seal, flush, place) and tree scanning.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self, set_mode, unique_name};
use crate::meta::{Entry, PathKind, StorePathMeta, META_VERSION};
use crate::names::{BlobId, StorePath, StorePathName};
use crate::store::Store;
use crate::tree_hash::{relative_bytes, TreeHash};

mod adopt;
mod blob;
mod built;
mod package;

pub(crate) use blob::{blake3_file, file_mode, STAMPS};
pub use built::{PlannedFile, Source, StagedBuilt};
pub use package::PackageTree;

/// Prefix of a tree being published, sealed in the store directory before its final rename.
pub(crate) const PUBLISH_PREFIX: &str = ".pub-";

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

/// The flushes ([`Store::flush_batch`]) a store handle made: a tree staged while `started` read
/// `n` is on disk once `completed` exceeds `n` (a flush that started after it was staged has
/// returned), so it can be placed without a flush of its own. In-process knowledge only.
#[derive(Debug, Default)]
pub(crate) struct FlushCount {
    /// Flushes started (each takes the next ticket).
    started: AtomicU64,
    /// One more than the highest ticket of a flush that returned.
    completed: AtomicU64,
}

impl FlushCount {
    /// The ticket the next flush will take: what a tree staged now waits for.
    fn next(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }

    /// Whether a flush that took `ticket` or a later one has returned.
    fn covers(&self, ticket: u64) -> bool {
        self.completed.load(Ordering::SeqCst) > ticket
    }
}

/// A tree sealed under a hidden name in the store directory, its metadata written beside its build
/// directory, waiting for the flush of its batch before [`Store::place`] gives both their final names.
/// Dropped unplaced (an error elsewhere in the batch), the hidden tree is removed.
pub(crate) struct Staged {
    name: StorePathName,
    meta: StorePathMeta,
    meta_temp: PathBuf,
    hidden: PathBuf,
    placed: bool,
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.placed {
            let _ = fsutil::remove_tree(&self.hidden);
        }
    }
}

impl Store {
    /// Seal the tree built at `out` and write its metadata into `base`, ready for the flush of its
    /// batch. Nothing gets a final name here.
    ///
    /// Everything below the top directory is sealed first, by the directories `meta` lists (a
    /// manifest lists every directory of its tree, so nothing is read again); the top is moved into
    /// the store directory under a hidden name while still writable (moving a directory into
    /// another parent needs write permission on the directory itself, which a sealed top only
    /// grants to root) and sealed there; after the flush [`Store::place`] renames it within the
    /// same directory, which needs no permission on the tree itself. A process killed at any point
    /// never leaves an unsealed or unflushed tree under a final name, only a hidden leftover GC
    /// removes.
    pub(crate) fn stage(
        &self,
        base: &Path,
        out: &Path,
        name: StorePathName,
        meta: StorePathMeta,
    ) -> Result<Staged> {
        for entry in &meta.entries {
            if let Entry::Dir { path } = entry {
                set_mode(&out.join(path), 0o555)?;
            }
        }
        let meta_temp = base.join("meta.json");
        fs_err::write(&meta_temp, meta.to_bytes()).ctx("write", &meta_temp)?;
        set_mode(&meta_temp, 0o444)?;
        let hidden = self.dir.join(unique_name(PUBLISH_PREFIX));
        fs_err::rename(out, &hidden).ctx("publish", self.path_of(&name))?;
        let staged = Staged {
            name,
            meta,
            meta_temp,
            hidden,
            placed: false,
        };
        set_mode(&staged.hidden, 0o555)?;
        Ok(staged)
    }

    /// The one flush of a batch: every staged tree and its metadata reach the disk before any of
    /// them is placed. Counted in [`FlushCount`]: a tree staged before it started (an
    /// input-addressed path of [`Store::stage_built`]) is on disk once it returns.
    pub(crate) fn flush_batch(&self) -> Result<()> {
        let ticket = self.flushes.started.fetch_add(1, Ordering::SeqCst);
        if self.flush {
            fsutil::flush_filesystem(&self.dir)?;
        }
        self.flushes
            .completed
            .fetch_max(ticket + 1, Ordering::SeqCst);
        Ok(())
    }

    /// Give a staged (and flushed) tree its final name, the metadata first, so a store path never
    /// exists without it (a crash in between leaves metadata without a tree, which GC removes). A
    /// publisher that loses the rename race makes sure the metadata describes the winner's tree, not
    /// its own. The renames are made durable by [`Store::sync_placed`], once per batch.
    pub(crate) fn place(&self, mut staged: Staged) -> Result<StorePath> {
        let final_path = self.path_of(&staged.name);
        let meta_path = self.meta_path(staged.name.as_str());
        fs_err::rename(&staged.meta_temp, &meta_path).ctx("publish", &meta_path)?;
        match std::fs::rename(&staged.hidden, &final_path) {
            Ok(()) => staged.placed = true,
            Err(err) if matches!(err.raw_os_error(), Some(libc::ENOTEMPTY | libc::EEXIST)) => {
                // Lost the race: the winner's tree is in place; its metadata must describe it
                // (dropping `staged` removes the hidden copy).
                let winner = self.manifest_of(&final_path)?;
                if winner != staged.meta.entries {
                    let mut recovered = staged.meta.clone();
                    recovered.entries = winner;
                    agentpack_fs::write_file(
                        &meta_path,
                        &recovered.to_bytes(),
                        &self.meta_write(),
                    )?;
                }
            }
            Err(err) => return Err(StoreError::io("publish", &final_path, err)),
        }
        Ok(StorePath::new(staged.name.clone(), final_path))
    }

    /// Make the renames of a batch's [`Store::place`] calls durable: one fsync of the metadata
    /// directory and one of the store directory.
    pub(crate) fn sync_placed(&self) -> Result<()> {
        if self.flush {
            fsutil::fsync_dir(&self.dir.join(crate::store::META))?;
            fsutil::fsync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// The manifest of an existing tree (hashing every file).
    pub(crate) fn manifest_of(&self, root: &Path) -> Result<Vec<Entry>> {
        manifest_with(
            root,
            |_| Ok(()),
            |(relative, path, exec)| {
                let (id, size) = blake3_file(path)?;
                Ok(file_entry(relative, id, size, *exec))
            },
        )
    }
}

/// The manifest of the tree at `root`, sorted: its directories and links as scanned (first shown to
/// `before_files`), and each regular file as `entry_of` makes it, in parallel.
fn manifest_with(
    root: &Path,
    before_files: impl FnOnce(&[Entry]) -> Result<()>,
    entry_of: impl Fn(&ScannedFile) -> Result<Entry> + Sync + Send,
) -> Result<Vec<Entry>> {
    let (mut entries, files) = scan_tree(root)?;
    before_files(&entries)?;
    let file_entries: Vec<Entry> = files.par_iter().map(entry_of).collect::<Result<_>>()?;
    entries.extend(file_entries);
    sort_entries(&mut entries);
    Ok(entries)
}

/// The manifest entry of a regular file of `size` bytes hashing to `id` (an empty file has no blob).
fn file_entry(path: &str, id: BlobId, size: u64, exec: bool) -> Entry {
    Entry::File {
        path: path.to_string(),
        blob: (size > 0).then_some(id),
        size,
        exec,
    }
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
        let item = item.map_err(|err| StoreError::walk(root, err))?;
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::blob::BlobStamp;
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
        let now = BlobStamp::of(&std::fs::metadata(&blob).unwrap());
        assert_eq!(store.recorded_stamp(&id, false), Some(now));
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
