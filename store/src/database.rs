//! The store's database: one record per published store path (what it is, what it references, the
//! blobs it uses, what it allocates on disk and when it was registered) and the roots that reached
//! each path at the last GC, like Nix's database. `gc`, `store info` and `store verify` read it
//! instead of parsing every metadata file and walking every tree.
//!
//! It lives in the index (LMDB, local disk only) and is a cache: the filesystem is the truth. Which
//! store paths exist always comes from listing the store directory. A record is used only while the
//! path's **stamp** matches: the inode of its directory and the inode, size and modification time of
//! its metadata file (both are replaced, never written in place: a republished, repaired or rebuilt
//! path gets new ones). A record whose stamp differs is stale and is made again from the filesystem;
//! records of paths that are gone are dropped; an empty or unreadable database is rebuilt. Without an
//! index (disabled, or a network store with no local directory) the same records are computed in
//! memory for each call, so results are the same with and without it.
//!
//! Never decides what to delete, and never trusts a record it did not check against the filesystem.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::error::Result;
use crate::index::Index;
use crate::meta::{PathKind, StorePathMeta};
use crate::names::StorePathName;
use crate::store::Store;

/// The table of store path records: name -> JSON [`PathRecord`].
const PATHS: &str = "store-paths";
/// The roots that reached each path at the last GC: name -> JSON list of root descriptions.
const ROOTS: &str = "store-roots";
/// Bookkeeping: `format` (the record format) and `last-gc` (Unix seconds).
const STATE: &str = "store-state";
/// Bumped whenever [`PathRecord`] changes meaning; another value rebuilds the database.
const FORMAT: &[u8] = b"1";

/// What identifies the on-disk version a record was made from (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Stamp {
    /// Inode of the store path's directory.
    dir_inode: u64,
    /// Inode of its metadata file (0: none).
    meta_inode: u64,
    /// Size of the metadata file.
    meta_len: u64,
    /// Modification time of the metadata file, nanoseconds.
    meta_mtime_ns: i128,
}

/// A file of a store path whose inode has other links (a blob's, usually): counted once, by the blob
/// when a blob file has that inode, else by the first store path holding it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct SharedInode {
    /// The inode (on the store's filesystem).
    pub(crate) inode: u64,
    /// Allocated bytes (`st_blocks * 512`).
    pub(crate) bytes: u64,
    /// File size.
    pub(crate) size: u64,
}

/// What the database knows about one store path.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct PathRecord {
    stamp: Stamp,
    /// What produced it; `None` when its metadata is missing or unreadable.
    pub(crate) kind: Option<PathKind>,
    /// Store path names it references (GC follows them).
    pub(crate) references: Vec<String>,
    /// Blob file names its files use, with how many files use each.
    pub(crate) blobs: BTreeMap<String, u32>,
    /// Unix seconds of registration (the metadata's `created`; the directory's mtime without one).
    pub(crate) registered: u64,
    /// Whether sizes were measured (records kept in the index always are; in-memory records made for
    /// GC alone are not).
    pub(crate) measured: bool,
    /// Allocated bytes of its directories, symlinks and the files no other link shares.
    pub(crate) own_bytes: u64,
    /// Sizes of those unshared files.
    pub(crate) own_content: u64,
    /// Its files whose inode has other links, each inode once.
    pub(crate) shared: Vec<SharedInode>,
    /// Sizes of all its files (every file where it appears).
    pub(crate) apparent_bytes: u64,
    /// Allocated bytes of every entry where it appears (as if every file were an independent copy).
    pub(crate) copies_bytes: u64,
}

impl PathRecord {
    /// What `du -s --block-size=1 <path>` prints for this path alone.
    pub(crate) fn disk_bytes(&self) -> u64 {
        self.own_bytes + self.shared.iter().map(|inode| inode.bytes).sum::<u64>()
    }
}

/// How the database served a call.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum IndexStatus {
    /// No index (disabled, or a network store without a local directory): everything was read from
    /// the filesystem.
    #[default]
    Unavailable,
    /// Every record matched the filesystem.
    Current,
    /// Some records were missing or stale and were made again from the filesystem.
    Updated {
        /// Store paths recorded for the first time.
        added: usize,
        /// Records whose stamp no longer matched.
        refreshed: usize,
        /// Records of store paths that are gone.
        dropped: usize,
    },
    /// The database was empty, of another format or unreadable, and was rebuilt.
    Rebuilt {
        /// Why.
        reason: String,
    },
}

/// What one store path is, as `gc`, `store info` and `store verify` see it ([`Store::path_info`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PathInfo {
    /// The store path name.
    pub name: String,
    /// What produced it; `None` when its metadata is missing or unreadable.
    pub kind: Option<PathKind>,
    /// Store paths it references.
    pub references: Vec<String>,
    /// Unix seconds of registration.
    pub registered: u64,
    /// What `du -s --block-size=1` prints for this path alone.
    pub disk_bytes: u64,
    /// The roots that reached it at the last GC (`slot <key>`, `project <pointer>`, `history <name>`,
    /// `temp root <file>`, `lease <file>`); empty when it was not live then or no GC has run since it
    /// was registered.
    pub roots: Vec<String>,
    /// When that GC ran (Unix seconds); `None` when no GC recorded roots in this index.
    pub roots_recorded_at: Option<u64>,
}

/// Whether the caller needs sizes (a tree walk) or only references and blobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Need {
    References,
    Sizes,
}

/// The store database opened for one operation. Records are served lazily, each checked against
/// the filesystem (its stamp) when first asked for and made again when it does not match; what was
/// made is written back by [`Records::finish`]. Without an index, or once it fails (a warning says
/// so), records are made in memory and nothing is written.
pub(crate) struct Records<'s> {
    store: &'s Store,
    index: Option<&'s Index>,
    need: Need,
    /// The stored records are of this format (else they are all ignored and the tables reset).
    format_ok: bool,
    served: HashMap<StorePathName, Option<PathRecord>>,
    puts: Vec<(Vec<u8>, Vec<u8>)>,
    added: usize,
    refreshed: usize,
    undecodable: usize,
    /// Why the database is being rebuilt, if it is.
    rebuilt: Option<String>,
}

impl<'s> Records<'s> {
    /// Open the database of `store` for one operation needing `need` (with an index, records are
    /// always made with sizes, so what is stored is complete).
    pub(crate) fn open(store: &'s Store, need: Need) -> Records<'s> {
        let mut records = Records {
            store,
            index: store.index(),
            need,
            format_ok: false,
            served: HashMap::new(),
            puts: Vec::new(),
            added: 0,
            refreshed: 0,
            undecodable: 0,
            // Only damage is worth a warning (the store said so when it opened the index); an index
            // that is new or was deleted is simply filled.
            rebuilt: store.take_index_recreated(),
        };
        if let Some(index) = records.index {
            match index.get(STATE, b"format") {
                Ok(format) => records.format_ok = format.as_deref() == Some(FORMAT),
                Err(err) => records.index_failed(&err),
            }
            if !records.format_ok && records.index.is_some() {
                records
                    .rebuilt
                    .get_or_insert_with(|| "there was no store database yet".to_owned());
            }
        }
        records
    }

    fn index_failed(&mut self, err: &crate::StoreError) {
        if let Some(index) = self.index.take() {
            self.store.warn(format!(
                "warning: the store database in {} could not be read ({err}); reading the store itself",
                index.location().display()
            ));
        }
    }

    /// The record of the published store path `name`; `None` when its directory is gone.
    pub(crate) fn get(&mut self, name: &StorePathName) -> Option<&PathRecord> {
        if !self.served.contains_key(name) {
            let record = self.check_out(name);
            self.served.insert(name.clone(), record);
        }
        self.served.get(name).and_then(Option::as_ref)
    }

    fn check_out(&mut self, name: &StorePathName) -> Option<PathRecord> {
        let Some(index) = self.index else {
            return make_record(self.store, name, self.need);
        };
        let stamp = stamp_of(self.store, name)?;
        let key = name.as_str().as_bytes();
        let stored = if self.format_ok {
            match index.get(PATHS, key) {
                Ok(stored) => stored,
                Err(err) => {
                    self.index_failed(&err);
                    return make_record(self.store, name, self.need);
                }
            }
        } else {
            None
        };
        match stored.map(|bytes| serde_json::from_slice::<PathRecord>(&bytes)) {
            Some(Ok(record)) if record.stamp == stamp && record.measured => return Some(record),
            Some(Ok(_)) => self.refreshed += 1,
            Some(Err(_)) => {
                self.undecodable += 1;
                self.refreshed += 1;
            }
            None => self.added += 1,
        }
        let record = make_record(self.store, name, Need::Sizes)?;
        self.puts.push((
            key.to_vec(),
            serde_json::to_vec(&record).unwrap_or_default(),
        ));
        Some(record)
    }

    /// Write back what was made; with `listed` (every store path on disk), drop the records of the
    /// paths not in it. How the database served this operation.
    pub(crate) fn finish(mut self, listed: Option<&BTreeSet<StorePathName>>) -> IndexStatus {
        let Some(index) = self.index else {
            return IndexStatus::Unavailable;
        };
        let mut deletes: Vec<Vec<u8>> = Vec::new();
        if let (Some(listed), true) = (listed, self.format_ok) {
            match index.keys(PATHS) {
                Ok(keys) => {
                    let listed: HashSet<&[u8]> =
                        listed.iter().map(|n| n.as_str().as_bytes()).collect();
                    deletes = keys
                        .into_iter()
                        .filter(|key| !listed.contains(key.as_slice()))
                        .collect();
                }
                Err(err) => self.index_failed(&err),
            }
        }
        if self.undecodable > 0 && self.rebuilt.is_none() {
            let reason = format!("{} record(s) could not be read", self.undecodable);
            self.store.warn(format!(
                "warning: the store database in {} was damaged ({reason}); rebuilt those records from the filesystem",
                index.location().display()
            ));
            self.rebuilt = Some(reason);
        }
        if let Err(err) = write_records(index, !self.format_ok, &deletes, &self.puts) {
            // A cache: what could not be written is made again next time.
            self.store.warn(format!(
                "warning: could not update the store database in {}: {err}",
                index.location().display()
            ));
        }
        match self.rebuilt {
            Some(reason) => IndexStatus::Rebuilt { reason },
            None if self.added + self.refreshed + deletes.len() == 0 => IndexStatus::Current,
            None => IndexStatus::Updated {
                added: self.added,
                refreshed: self.refreshed,
                dropped: deletes.len(),
            },
        }
    }
}

fn write_records(
    index: &Index,
    reset: bool,
    deletes: &[Vec<u8>],
    puts: &[(Vec<u8>, Vec<u8>)],
) -> Result<()> {
    if reset {
        index.write_batch(ROOTS, true, &[], &[])?;
    }
    index.write_batch(PATHS, reset, deletes, puts)?;
    if reset {
        index.put(STATE, b"format", FORMAT)?;
    }
    Ok(())
}

/// After a GC: forget the records of `removed` paths and record, for every live path, the roots that
/// reached it. Best effort (a warning on failure).
pub(crate) fn record_gc(
    store: &Store,
    removed: &[StorePathName],
    roots_of: &BTreeMap<StorePathName, BTreeSet<String>>,
) {
    let Some(index) = store.index() else {
        return;
    };
    let deletes: Vec<Vec<u8>> = removed
        .iter()
        .map(|name| name.as_str().as_bytes().to_vec())
        .collect();
    let puts: Vec<(Vec<u8>, Vec<u8>)> = roots_of
        .iter()
        .map(|(name, roots)| {
            let roots: Vec<&String> = roots.iter().collect();
            (
                name.as_str().as_bytes().to_vec(),
                serde_json::to_vec(&roots).unwrap_or_default(),
            )
        })
        .collect();
    let result = index
        .write_batch(PATHS, false, &deletes, &[])
        .and_then(|()| index.write_batch(ROOTS, true, &[], &puts))
        .and_then(|()| {
            index.put(
                STATE,
                b"last-gc",
                crate::fsutil::unix_now().to_string().as_bytes(),
            )
        });
    if let Err(err) = result {
        store.warn(format!(
            "warning: could not record the roots in the store database in {}: {err}",
            index.location().display()
        ));
    }
}

/// Forget every record (`Store::rebuild_index`): the next reader makes them all again.
pub(crate) fn invalidate(store: &Store) {
    if let Some(index) = store.index() {
        let _ = index.delete(STATE, b"format");
    }
}

/// Compare the database with the filesystem for every listed store path (what `store verify` does),
/// correct it, and say what differed, one line per path. A failing index is a warning.
pub(crate) fn check(store: &Store, names: &BTreeSet<StorePathName>) -> Vec<String> {
    let Some(index) = store.index() else {
        return Vec::new();
    };
    match check_indexed(store, index, names) {
        Ok(problems) => problems,
        Err(err) => {
            store.warn(format!(
                "warning: could not check the store database in {}: {err}",
                index.location().display()
            ));
            Vec::new()
        }
    }
}

fn check_indexed(
    store: &Store,
    index: &Index,
    names: &BTreeSet<StorePathName>,
) -> Result<Vec<String>> {
    let stored: HashMap<Vec<u8>, Vec<u8>> =
        if index.get(STATE, b"format")?.as_deref() == Some(FORMAT) {
            index.entries(PATHS)?.into_iter().collect()
        } else {
            HashMap::new()
        };
    let mut problems = Vec::new();
    let mut puts = Vec::new();
    for name in names {
        let Some(actual) = make_record(store, name, Need::Sizes) else {
            continue;
        };
        let key = name.as_str().as_bytes();
        let recorded = stored
            .get(key)
            .and_then(|bytes| serde_json::from_slice::<PathRecord>(bytes).ok());
        let difference = match &recorded {
            None => None,
            Some(recorded) if recorded.stamp != actual.stamp => None,
            Some(recorded) if recorded.references != actual.references => {
                Some("references".to_owned())
            }
            Some(recorded) if recorded.disk_bytes() != actual.disk_bytes() => Some(format!(
                "size recorded {} bytes, {} on disk",
                recorded.disk_bytes(),
                actual.disk_bytes()
            )),
            Some(recorded) if recorded != &actual => Some("sizes or blobs".to_owned()),
            Some(_) => continue,
        };
        if let Some(difference) = difference {
            problems.push(format!("{name}: {difference} differed; corrected"));
        }
        puts.push((
            key.to_vec(),
            serde_json::to_vec(&actual).unwrap_or_default(),
        ));
    }
    let listed: HashSet<&[u8]> = names.iter().map(|n| n.as_str().as_bytes()).collect();
    let deletes: Vec<Vec<u8>> = stored
        .keys()
        .filter(|key| !listed.contains(key.as_slice()))
        .cloned()
        .collect();
    for key in &deletes {
        problems.push(format!(
            "{}: recorded but not in the store; dropped",
            String::from_utf8_lossy(key)
        ));
    }
    let reset = index.get(STATE, b"format")?.as_deref() != Some(FORMAT);
    write_records(index, reset, &deletes, &puts)?;
    Ok(problems)
}

/// What the database knows about `name`, checked against the filesystem; `None` when it is not
/// published.
pub(crate) fn path_info(store: &Store, name: &StorePathName) -> Result<Option<PathInfo>> {
    let mut records = Records::open(store, Need::Sizes);
    let record = records.get(name).cloned();
    records.finish(None);
    let Some(record) = record else {
        return Ok(None);
    };
    let (roots, roots_recorded_at) = match store.index() {
        Some(index) => {
            let roots: Vec<String> = index
                .get(ROOTS, name.as_str().as_bytes())
                .ok()
                .flatten()
                .and_then(|bytes| serde_json::from_slice(&bytes).ok())
                .unwrap_or_default();
            let at = index
                .get(STATE, b"last-gc")
                .ok()
                .flatten()
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .and_then(|text| text.parse().ok());
            (roots, at)
        }
        None => (Vec::new(), None),
    };
    Ok(Some(PathInfo {
        name: name.to_string(),
        kind: record.kind,
        references: record.references.clone(),
        registered: record.registered,
        disk_bytes: record.disk_bytes(),
        roots,
        roots_recorded_at,
    }))
}

/// The stamp of a published store path; `None` when its directory is gone.
fn stamp_of(store: &Store, name: &StorePathName) -> Option<Stamp> {
    let dir = std::fs::symlink_metadata(store.path_of(name)).ok()?;
    if !dir.is_dir() {
        return None;
    }
    let meta = std::fs::symlink_metadata(store.meta_path(name.as_str())).ok();
    Some(Stamp {
        dir_inode: dir.ino(),
        meta_inode: meta.as_ref().map_or(0, MetadataExt::ino),
        meta_len: meta.as_ref().map_or(0, std::fs::Metadata::len),
        meta_mtime_ns: meta.as_ref().map_or(0, |m| {
            i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec())
        }),
    })
}

/// A record made from the filesystem: the metadata file, and with [`Need::Sizes`] a walk of the tree.
/// The stamp is taken first, so a change while this runs makes the record stale, never wrongly fresh.
pub(crate) fn make_record(store: &Store, name: &StorePathName, need: Need) -> Option<PathRecord> {
    let stamp = stamp_of(store, name)?;
    let meta = StorePathMeta::read(&store.meta_path(name.as_str())).ok();
    let root = store.path_of(name);
    let registered = match &meta {
        Some(meta) => meta.created,
        None => std::fs::symlink_metadata(&root)
            .map(|m| u64::try_from(m.mtime()).unwrap_or(0))
            .unwrap_or(0),
    };
    let mut blobs: BTreeMap<String, u32> = BTreeMap::new();
    if let Some(meta) = &meta {
        for (id, exec) in meta.blobs() {
            *blobs.entry(id.file_name(exec).1).or_insert(0) += 1;
        }
    }
    let mut record = PathRecord {
        stamp,
        kind: meta.as_ref().map(|meta| meta.kind),
        references: meta
            .as_ref()
            .map(|meta| meta.references.clone())
            .unwrap_or_default(),
        blobs,
        registered,
        measured: need == Need::Sizes,
        own_bytes: 0,
        own_content: 0,
        shared: Vec::new(),
        apparent_bytes: 0,
        copies_bytes: 0,
    };
    if need == Need::Sizes {
        measure(&root, &mut record);
    }
    Some(record)
}

/// Fill the size fields of `record` from a walk of the tree at `root` (never following symlinks).
fn measure(root: &Path, record: &mut PathRecord) {
    let mut seen: HashSet<u64> = HashSet::new();
    for entry in walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .flatten()
    {
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        let bytes = meta.blocks() * 512;
        record.copies_bytes += bytes;
        if meta.is_file() {
            record.apparent_bytes += meta.len();
        }
        if meta.is_dir() || meta.nlink() <= 1 {
            record.own_bytes += bytes;
            if meta.is_file() {
                record.own_content += meta.len();
            }
            continue;
        }
        if !meta.is_file() {
            // A symlink with several names: the store links a path's symlinks of one target
            // within that path only (`publish_files`), so it is this path's own, counted once.
            if seen.insert(meta.ino()) {
                record.own_bytes += bytes;
            }
            continue;
        }
        if seen.insert(meta.ino()) {
            record.shared.push(SharedInode {
                inode: meta.ino(),
                bytes,
                size: meta.len(),
            });
        }
    }
}
