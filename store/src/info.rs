//! `store info`: where the store is, on what filesystem, which link mode it uses, and how much space
//! deduplication saves. Read-only.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use crate::error::{IoContext, Result};
use crate::fsutil::FilesystemKind;
use crate::link::{LinkMethod, LinkMode};
use crate::store::{Store, BLOBS};

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
    /// Bytes the files of all store paths would take as independent copies.
    pub apparent_bytes: u64,
    /// Bytes actually allocated for store paths and blobs (each inode counted once).
    pub disk_bytes: u64,
    /// Bytes the files of all store paths would allocate as independent copies.
    pub copies_disk_bytes: u64,
    /// `copies_disk_bytes / disk_bytes` (1.0 when nothing is stored).
    pub dedup_ratio: f64,
}

/// Summarize `store`.
pub fn info(store: &Store) -> Result<StoreInfo> {
    let names = crate::gc::list_store_paths(store)?;
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut apparent = 0u64;
    let mut disk = 0u64;
    let mut copies = 0u64;
    for name in &names {
        for entry in walkdir::WalkDir::new(store.path_of(name))
            .follow_links(false)
            .into_iter()
            .flatten()
        {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_file() {
                apparent += meta.len();
                copies += meta.blocks() * 512;
                if seen.insert((meta.dev(), meta.ino())) {
                    disk += meta.blocks() * 512;
                }
            }
        }
    }
    let mut blobs = 0;
    let blobs_dir = store.dir.join(BLOBS);
    for shard in fs_err::read_dir(&blobs_dir)
        .ctx("list", &blobs_dir)?
        .flatten()
    {
        for blob in std::fs::read_dir(shard.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let Ok(meta) = blob.metadata() else { continue };
            blobs += 1;
            if seen.insert((meta.dev(), meta.ino())) {
                disk += meta.blocks() * 512;
            }
        }
    }
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
        apparent_bytes: apparent,
        disk_bytes: disk,
        copies_disk_bytes: copies,
        dedup_ratio,
    })
}
