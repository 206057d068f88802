//! `store info`: where the store is, on what filesystem, which link mode it uses, what it allocates
//! and how much space deduplication saves. Read-only.
//!
//! Two kinds of byte counts, never mixed: *allocated* bytes are what the filesystem gives the store
//! (`st_blocks * 512` of every inode under `cache/store/v1`, each inode once, directories, symlinks and
//! metadata files included: what `du -s --block-size=1` of the store prints); *logical* bytes are file
//! sizes (`st_size`), what the content is. It must never count a hard-linked inode twice in an
//! allocated total, nor leave directories out of one.
//!
//! The store paths' part comes from the store database (`database`: each path's own allocation and
//! its inodes shared with blobs, recorded once and checked against the filesystem by stamp); the
//! blobs and everything else are walked. The numbers are the same with and without an index.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::database::{IndexStatus, Need, PathRecord, Records};
use crate::error::{IoContext, Result};
use crate::fsutil::FilesystemKind;
use crate::link::{LinkMethod, LinkMode};
use crate::names::StorePathName;
use crate::publish::STAMPS;
use crate::store::{Store, BLOBS, META};

/// Allocated bytes of the store, by part; each inode is counted once, in the first part that reaches
/// it (blobs are counted first, so a store path's file hard-linked to a blob counts as the blob's).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AllocatedBytes {
    /// Everything under the store directory, its own directory entry included: equals
    /// `du -s --block-size=1` of [`StoreInfo::location`] while nothing writes.
    pub total: u64,
    /// `blobs/`: one inode per unique content, plus the shard directories.
    pub blobs: u64,
    /// The trees of the store paths: their directories and symlinks, and files not linked to a blob.
    pub store_paths: u64,
    /// `meta/`: one JSON file per store path.
    pub metadata: u64,
    /// `index/`: the metadata index (when it lives inside the store).
    pub index: u64,
    /// `stamps/`: one small file per blob (size, mtime, ctime, inode: re-hashed before linking when it
    /// differs), each taking at least one filesystem block.
    pub stamps: u64,
    /// The rest: the store directory itself, the lock, roots, generation histories, leases, `.tmp/`.
    pub other: u64,
}

/// A summary of the store.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct StoreInfo {
    /// `cache/store/v1`.
    pub location: PathBuf,
    /// The filesystem holding it.
    pub filesystem: FilesystemKind,
    /// The link mode asked for.
    pub link_mode: LinkMode,
    /// The method placing files within the store's filesystem actually uses (probed).
    pub link_method: Option<LinkMethod>,
    /// Where the metadata index lives, if anywhere.
    pub index: Option<PathBuf>,
    /// Published store paths.
    pub store_paths: usize,
    /// Blobs.
    pub blobs: usize,
    /// Slots linking into the store.
    pub slots: usize,
    /// What the filesystem allocates for the store (what `du` counts), by part.
    pub allocated: AllocatedBytes,
    /// Logical bytes (file sizes) of the distinct files of the store paths and blobs, each inode once:
    /// the content itself, without directories or metadata.
    pub unique_content_bytes: u64,
    /// Logical bytes the files of all store paths would take as independent copies.
    pub apparent_bytes: u64,
    /// Allocated bytes of the store paths, each inode once: their directories, symlinks and the files
    /// they hold (blob or not). Blob shard directories, unused blobs and metadata are not in it (they
    /// are in `allocated`).
    pub disk_bytes: u64,
    /// Allocated bytes the store paths would take as independent copies (every file, directory and
    /// symlink of every store path counted where it appears).
    pub copies_disk_bytes: u64,
    /// `copies_disk_bytes / disk_bytes` (1.0 when nothing is stored).
    pub dedup_ratio: f64,
    /// Store paths by kind (`package`, `files` for generations, `built`, `recovered`, `unknown`
    /// without metadata), from the store database.
    pub kinds: BTreeMap<String, KindSummary>,
    /// How the store database served this summary.
    pub index_status: IndexStatus,
}

/// The store paths of one kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct KindSummary {
    /// How many.
    pub store_paths: usize,
    /// Their allocated bytes, each path as `du -s` counts it alone (inodes shared between paths
    /// counted in each).
    pub disk_bytes: u64,
}

/// Summarize `store`.
pub fn info(store: &Store) -> Result<StoreInfo> {
    let names = crate::gc::list_store_paths(store)?;
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut allocated = AllocatedBytes::default();
    let mut unique_content = 0u64;
    let mut apparent = 0u64;
    let mut copies = 0u64;
    let mut disk = 0u64;
    let mut seen_in_paths: HashSet<(u64, u64)> = HashSet::new();

    // The store directory's own entry.
    let root_meta = fs_err::symlink_metadata(&store.dir).ctx("inspect", &store.dir)?;
    if seen.insert((root_meta.dev(), root_meta.ino())) {
        allocated.other += root_meta.blocks() * 512;
    }

    // Blobs first: a store path's hard link to a blob is the blob's inode.
    let blobs_dir = store.dir.join(BLOBS);
    let mut blobs = 0;
    for (meta, depth) in walk(&blobs_dir) {
        if meta.is_file() && depth == 2 {
            blobs += 1;
        }
        if seen.insert((meta.dev(), meta.ino())) {
            allocated.blobs += meta.blocks() * 512;
            if meta.is_file() {
                unique_content += meta.len();
            }
        }
    }

    // The store paths, from their records.
    let mut database = Records::open(store, Need::Sizes);
    let records: BTreeMap<&StorePathName, PathRecord> = names
        .iter()
        .filter_map(|name| database.get(name).map(|record| (name, record.clone())))
        .collect();
    let index_status = database.finish(Some(&names));
    let mut kinds: BTreeMap<String, KindSummary> = BTreeMap::new();
    for record in records.values() {
        let kind = record.kind.map_or("unknown".to_owned(), |kind| {
            serde_json::to_value(kind)
                .ok()
                .and_then(|value| value.as_str().map(str::to_owned))
                .unwrap_or_default()
        });
        let summary = kinds.entry(kind).or_default();
        summary.store_paths += 1;
        summary.disk_bytes += record.disk_bytes();
        allocated.store_paths += record.own_bytes;
        unique_content += record.own_content;
        apparent += record.apparent_bytes;
        copies += record.copies_bytes;
        disk += record.own_bytes;
        for inode in &record.shared {
            let key = (store.dev, inode.inode);
            if seen_in_paths.insert(key) {
                disk += inode.bytes;
            }
            if seen.insert(key) {
                // No blob has this inode (any more), nor an earlier store path: this path's.
                allocated.store_paths += inode.bytes;
                unique_content += inode.size;
            }
        }
    }

    let entries = fs_err::read_dir(&store.dir).ctx("list", &store.dir)?;
    for entry in entries.flatten() {
        let path = entry.path();
        let file_name = entry.file_name();
        let name = file_name.to_str().unwrap_or_default();
        if name == BLOBS {
            continue;
        }
        let part = part_of(name, &names);
        if part == Part::StorePath
            && name
                .parse::<StorePathName>()
                .is_ok_and(|parsed| records.contains_key(&parsed))
        {
            continue;
        }
        for (meta, _) in walk(&path) {
            if !seen.insert((meta.dev(), meta.ino())) {
                continue;
            }
            let bytes = meta.blocks() * 512;
            match part {
                // (Published while this ran: not in the listing's records.)
                Part::StorePath => allocated.store_paths += bytes,
                Part::Metadata => allocated.metadata += bytes,
                Part::Index => allocated.index += bytes,
                Part::Stamps => allocated.stamps += bytes,
                Part::Other => allocated.other += bytes,
            }
        }
    }
    allocated.total = allocated.blobs
        + allocated.store_paths
        + allocated.metadata
        + allocated.index
        + allocated.stamps
        + allocated.other;
    let dedup_ratio = if disk == 0 {
        1.0
    } else {
        copies as f64 / disk as f64
    };
    Ok(StoreInfo {
        location: store.dir.clone(),
        filesystem: store.fs_kind.clone(),
        link_mode: store.linker.mode(),
        link_method: store.probe_link_method().ok(),
        index: store.index_location().map(PathBuf::from),
        store_paths: names.len(),
        blobs,
        slots: store.slots()?.len(),
        allocated,
        unique_content_bytes: unique_content,
        apparent_bytes: apparent,
        disk_bytes: disk,
        copies_disk_bytes: copies,
        dedup_ratio,
        kinds,
        index_status,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    StorePath,
    Metadata,
    Index,
    Stamps,
    Other,
}

/// Which part a top-level entry of the store directory (other than `blobs/`) belongs to.
fn part_of(name: &str, store_paths: &BTreeSet<StorePathName>) -> Part {
    if name == META {
        Part::Metadata
    } else if name == "index" {
        Part::Index
    } else if name == STAMPS {
        Part::Stamps
    } else if name
        .parse::<StorePathName>()
        .is_ok_and(|parsed| store_paths.contains(&parsed))
    {
        Part::StorePath
    } else {
        Part::Other
    }
}

/// Every entry under `root`, `root` included, with its depth, never following symlinks. What cannot be
/// read (removed meanwhile, another user's private index) is left out.
fn walk(root: &Path) -> impl Iterator<Item = (std::fs::Metadata, usize)> {
    walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let depth = entry.depth();
            entry.metadata().ok().map(|meta| (meta, depth))
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{PlannedFile, Source, StoreOptions};

    fn du(path: &Path) -> u64 {
        let output = std::process::Command::new("du")
            .args(["-s", "--block-size=1"])
            .arg(path)
            .output()
            .unwrap();
        String::from_utf8(output.stdout)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    }

    #[test]
    fn allocated_bytes_count_every_inode_once_as_du_does() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cache"), StoreOptions::default()).unwrap();
        let blob = store
            .import_bytes(&b"shared content\n".repeat(500), false)
            .unwrap()
            .unwrap();
        // Two generations linking the same blob from several directories.
        for label in ["one", "two"] {
            let plan: Vec<PlannedFile> = ["a/x.md", "b/c/y.md", "d/e/f/z.md"]
                .iter()
                .map(|path| PlannedFile::new(*path, Source::Blob(blob), false))
                .chain([PlannedFile::new(
                    "link",
                    Source::Symlink("a/x.md".into()),
                    false,
                )])
                .collect();
            let name = StorePathName::from_inputs(label.as_bytes(), "generation");
            store.publish_files(&name, &plan, &[]).unwrap();
        }
        let summary = info(&store).unwrap();
        assert_eq!(summary.allocated.total, du(&store.dir), "{summary:?}");
        // One distinct file of 7,500 bytes, however many links it has.
        assert_eq!(summary.unique_content_bytes, 7_500, "{summary:?}");
        assert_eq!(summary.apparent_bytes, 6 * 7_500, "{summary:?}");
        // The store paths' part is their own directories and symlinks (7 directories each: root, a,
        // b, b/c, d, d/e, d/e/f); their files are the blob's inode.
        let mut trees = 0;
        let mut directories = 0;
        for name in crate::gc::list_store_paths(&store).unwrap() {
            for (meta, _) in walk(&store.path_of(&name)) {
                if !meta.is_file() {
                    trees += meta.blocks() * 512;
                    directories += usize::from(meta.is_dir());
                }
            }
        }
        assert_eq!(directories, 14);
        assert_eq!(summary.allocated.store_paths, trees, "{summary:?}");
        assert!(
            summary.copies_disk_bytes > summary.disk_bytes,
            "{summary:?}"
        );
    }
}
