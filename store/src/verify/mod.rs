//! Verification and repair of the whole store.
//!
//! `verify` re-hashes every blob (its name must be the BLAKE3 of its content, its mode 0444, or 0555 for
//! the `x` variant) and checks every store path against its manifest (structure, symlink targets, file
//! content, modes), hashing each inode once. Because files are hard links, a file changed in place
//! (an editor appending to a staged file: root can write 0444 files) damages the blob and every path
//! linking it; all of them are named.
//!
//! `repair` (store lock held exclusively) restores damaged blobs from a good copy (any file in the store
//! with the right content on another inode: a reflink or copy, the other variant), then rebuilds damaged
//! store paths from their manifests and swaps them in atomically. What cannot be restored is removed so
//! the next sync fetches it again, and is listed in `unrepairable`.
//!
//! Last, it checks the store database (see `database`) against what it found on disk and corrects it:
//! each difference is listed in `index_corrected`. The database is a cache: a difference is not damage.
//!
//! Layout: `repair` holds the repair steps; this module holds the report types, the verification
//! pass, and the cheap checks commands make of one store path by this user's blob stamps
//! (`changed_files` for a generation; `unchanged_since_verified` and `stamps_before_hashing` for a
//! package a cache slot names).

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self, set_mode};
use crate::lock::LockKind;
use crate::meta::{Entry, PathKind, StorePathMeta};
use crate::names::{BlobId, StorePathName};
use crate::publish::{blake3_file, file_mode, new_meta};
use crate::store::Store;
use crate::tree_hash::hash_tree;

mod repair;

pub(crate) use repair::replace_store_path;
use repair::{rebuild, remove_store_path, replace_blob};

/// What `verify` may do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerifyOptions {
    /// Restore what can be restored, remove what cannot (so it is fetched again).
    pub repair: bool,
}

/// A damaged blob.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BlobProblem {
    /// The blob's file name (`<hex>` or `<hex>x`).
    pub blob: String,
    /// What is wrong.
    pub problem: String,
}

/// A damaged store path.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PathProblem {
    /// The store path name.
    pub name: String,
    /// What is wrong, one line per file.
    pub problems: Vec<String>,
}

/// The result of `verify`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct VerifyReport {
    /// Blobs checked.
    pub blobs_checked: usize,
    /// Store paths checked.
    pub store_paths_checked: usize,
    /// Damaged blobs found.
    pub damaged_blobs: Vec<BlobProblem>,
    /// Damaged store paths found.
    pub damaged_paths: Vec<PathProblem>,
    /// Store paths without (readable) metadata.
    pub missing_metadata: Vec<String>,
    /// Store paths a slot names that are gone (`slot <cache_key>: <name>`), e.g. a package store path
    /// deleted by hand. A sync fetches them again; `repair` removes the dangling slots.
    pub missing_paths: Vec<String>,
    /// What repair restored.
    pub repaired: Vec<String>,
    /// Store paths repair could not restore and removed: fetch or build them again.
    pub unrepairable: Vec<String>,
    /// Damaged objects repair left alone because another user owns them (a shared store), each with
    /// the remedy.
    pub not_repaired: Vec<String>,
    /// Records of the store database that did not match the filesystem and were corrected (a cache,
    /// not damage: [`VerifyReport::is_clean`] does not look at them).
    pub index_corrected: Vec<String>,
}

impl VerifyReport {
    /// Nothing damaged was found.
    pub fn is_clean(&self) -> bool {
        self.damaged_blobs.is_empty()
            && self.damaged_paths.is_empty()
            && self.missing_metadata.is_empty()
            && self.missing_paths.is_empty()
    }
}

struct BlobFile {
    path: PathBuf,
    file_name: String,
    id: BlobId,
    exec: bool,
    key: (u64, u64),
}

#[derive(Clone)]
enum Actual {
    Dir {
        mode: u32,
    },
    File {
        mode: u32,
        size: u64,
        key: (u64, u64),
        path: PathBuf,
    },
    Link {
        target: String,
    },
    Other,
}

/// A store path as found: name, metadata, entries on disk, mode of its root directory.
type ScannedPath = (
    StorePathName,
    Option<StorePathMeta>,
    BTreeMap<String, Actual>,
    u32,
);

/// Verify (and with `repair`, repair) `store`.
pub fn verify(store: &Store, options: VerifyOptions) -> Result<VerifyReport> {
    let kind = if options.repair {
        LockKind::Exclusive
    } else {
        LockKind::Shared
    };
    let _lock = store.lock(kind)?;
    let mut report = VerifyReport::default();

    // Blobs.
    let mut blobs = Vec::new();
    let mut not_regular = Vec::new();
    for (path, file_name) in store.blob_files()? {
        let (hex, exec) = match file_name.strip_suffix('x') {
            Some(hex) => (hex.to_owned(), true),
            None => (file_name.clone(), false),
        };
        let Ok(id) = hex.parse::<BlobId>() else {
            continue;
        };
        let meta = fs_err::symlink_metadata(&path).ctx("inspect", &path)?;
        if !meta.is_file() {
            not_regular.push(BlobProblem {
                blob: file_name,
                problem: "not a regular file".to_owned(),
            });
            continue;
        }
        blobs.push(BlobFile {
            path,
            file_name,
            id,
            exec,
            key: (meta.dev(), meta.ino()),
        });
    }
    report.blobs_checked = blobs.len() + not_regular.len();

    // Store paths: metadata and what is on disk.
    let names = crate::gc::list_store_paths(store)?;
    let mut paths: Vec<ScannedPath> = Vec::new();
    for name in names {
        let root = store.path_of(&name);
        let meta = StorePathMeta::read(&store.meta_path(name.as_str())).ok();
        let root_mode = fsutil::mode_of(&root)?;
        paths.push((name, meta, scan(&root)?, root_mode));
    }
    report.store_paths_checked = paths.len();

    // Hash every inode once, in parallel.
    let mut inodes: HashMap<(u64, u64), PathBuf> = HashMap::new();
    for blob in &blobs {
        inodes.entry(blob.key).or_insert_with(|| blob.path.clone());
    }
    for (_, _, actual, _) in &paths {
        for entry in actual.values() {
            if let Actual::File { key, path, .. } = entry {
                inodes.entry(*key).or_insert_with(|| path.clone());
            }
        }
    }
    let hashes: HashMap<(u64, u64), Option<BlobId>> = inodes
        .par_iter()
        .map(|(key, path)| (*key, blake3_file(path).ok().map(|(id, _)| id)))
        .collect();
    // A good copy of each content: any inode whose bytes hash to it.
    let mut good: HashMap<BlobId, PathBuf> = HashMap::new();
    for (key, path) in &inodes {
        if let Some(Some(id)) = hashes.get(key) {
            good.entry(*id).or_insert_with(|| path.clone());
        }
    }

    // Check blobs.
    let mut bad_content: Vec<&BlobFile> = Vec::new();
    let mut bad_mode: Vec<&BlobFile> = Vec::new();
    for blob in &blobs {
        let actual = hashes.get(&blob.key).copied().flatten();
        if actual != Some(blob.id) {
            report.damaged_blobs.push(BlobProblem {
                blob: blob.file_name.clone(),
                problem: "content does not match its name (changed in place?)".to_owned(),
            });
            bad_content.push(blob);
            continue;
        }
        let mode = fsutil::mode_of(&blob.path)?;
        let expected = file_mode(blob.exec);
        if mode != expected {
            report.damaged_blobs.push(BlobProblem {
                blob: blob.file_name.clone(),
                problem: format!("mode is {mode:04o}, expected {expected:04o}"),
            });
            bad_mode.push(blob);
        }
    }
    report.damaged_blobs.extend(not_regular);

    // Check store paths.
    let mut damaged: Vec<(StorePathName, StorePathMeta)> = Vec::new();
    let mut without_meta: Vec<StorePathName> = Vec::new();
    for (name, meta, actual, root_mode) in &paths {
        let Some(meta) = meta else {
            report.missing_metadata.push(name.to_string());
            without_meta.push(name.clone());
            continue;
        };
        let mut problems = compare(meta, actual, &hashes);
        if *root_mode != 0o555 {
            problems.insert(
                0,
                format!("the store path directory has mode {root_mode:04o}, expected 0555"),
            );
        }
        if !problems.is_empty() {
            report.damaged_paths.push(PathProblem {
                name: name.to_string(),
                problems,
            });
            damaged.push((name.clone(), meta.clone()));
        }
    }

    // Store paths that are needed but gone (deleted by hand, or lost).
    // Looked up now, not in the listing above: publishers may add paths (and slots) meanwhile;
    // nothing removes any while this holds the store lock.
    for (key, name) in store.slots()? {
        if store.published(&name).is_none() {
            report.missing_paths.push(format!("slot {key}: {name}"));
        }
    }
    if !options.repair {
        report.index_corrected =
            crate::database::check(store, &crate::gc::list_store_paths(store)?);
        return Ok(report);
    }

    // Only an object's owner (or root) may change or replace it: another user's damaged objects are
    // named with the remedy, and left for them or the administrator.
    let not_mine = |what: &str, path: &Path, report: &mut VerifyReport| -> bool {
        match fsutil::owner_of(path) {
            Some(owner) if !fsutil::may_remove(owner) => {
                report.not_repaired.push(format!(
                    "{what} {} belongs to uid {owner}: run `agentpack store verify --repair` as that user, or as root (the store's administrator)",
                    path.display()
                ));
                true
            }
            _ => false,
        }
    };
    let bad_mode: Vec<&BlobFile> = bad_mode
        .into_iter()
        .filter(|blob| !not_mine("blob", &blob.path, &mut report))
        .collect();
    let bad_content: Vec<&BlobFile> = bad_content
        .into_iter()
        .filter(|blob| !not_mine("blob", &blob.path, &mut report))
        .collect();
    let damaged: Vec<(StorePathName, StorePathMeta)> = damaged
        .into_iter()
        .filter(|(name, _)| !not_mine("store path", &store.path_of(name), &mut report))
        .collect();

    // Repair blobs.
    for blob in bad_mode {
        set_mode(&blob.path, file_mode(blob.exec))?;
        report
            .repaired
            .push(format!("blob {}: mode", blob.file_name));
    }
    for blob in bad_content {
        let source = good.get(&blob.id).cloned();
        match source {
            Some(source) => {
                replace_blob(store, &source, &blob.path, blob.exec)?;
                report.repaired.push(format!(
                    "blob {}: restored from {}",
                    blob.file_name,
                    source.display()
                ));
            }
            None => {
                // No good copy anywhere: the blob goes; paths using it are rebuilt or removed below.
                fs_err::remove_file(&blob.path).ctx("remove", &blob.path)?;
                report
                    .repaired
                    .push(format!("blob {}: removed (no good copy)", blob.file_name));
            }
        }
    }

    // Repair store paths.
    for (name, meta) in damaged {
        match rebuild(store, &name, &meta, &good)? {
            true => report
                .repaired
                .push(format!("store path {name}: rebuilt from blobs")),
            false => {
                remove_store_path(store, &name)?;
                report.unrepairable.push(name.to_string());
            }
        }
    }
    for name in without_meta {
        let root = store.path_of(&name);
        let entries = store.manifest_of(&root)?;
        let tree_hash = hash_tree(&root).ok();
        let mut meta = new_meta(&name, PathKind::Recovered, tree_hash, &[], entries);
        meta.references = Vec::new();
        let meta_path = store.meta_path(name.as_str());
        agentpack_fs::write_file(&meta_path, &meta.to_bytes(), &store.meta_write())?;
        report
            .repaired
            .push(format!("store path {name}: metadata regenerated"));
    }
    // Slots whose store path is gone (found missing, or removed above) go, so the next sync fetches
    // their packages again.
    for (key, name) in store.slots()? {
        if store.published(&name).is_none() {
            store.remove_slot(&key)?;
            report
                .repaired
                .push(format!("slot {key}: removed (its store path is gone)"));
        }
    }
    report.index_corrected = crate::database::check(store, &crate::gc::list_store_paths(store)?);
    Ok(report)
}

/// Every entry below `root` by relative path.
fn scan(root: &Path) -> Result<BTreeMap<String, Actual>> {
    let mut out = BTreeMap::new();
    for entry in walkdir::WalkDir::new(root).follow_links(false).min_depth(1) {
        let entry = entry.map_err(|err| StoreError::walk(root, err))?;
        let relative =
            String::from_utf8_lossy(&crate::tree_hash::relative_bytes(root, entry.path()))
                .into_owned();
        let meta = fs_err::symlink_metadata(entry.path()).ctx("inspect", entry.path())?;
        let mode = meta.permissions().mode() & 0o7777;
        let actual = if meta.is_dir() {
            Actual::Dir { mode }
        } else if meta.file_type().is_symlink() {
            let target = fs_err::read_link(entry.path()).ctx("read link", entry.path())?;
            Actual::Link {
                target: target.to_string_lossy().into_owned(),
            }
        } else if meta.is_file() {
            Actual::File {
                mode,
                size: meta.len(),
                key: (meta.dev(), meta.ino()),
                path: entry.path().to_path_buf(),
            }
        } else {
            Actual::Other
        };
        out.insert(relative, actual);
    }
    Ok(out)
}

fn compare(
    meta: &StorePathMeta,
    actual: &BTreeMap<String, Actual>,
    hashes: &HashMap<(u64, u64), Option<BlobId>>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut expected_paths = std::collections::HashSet::new();
    for entry in &meta.entries {
        let path = entry.path();
        expected_paths.insert(path);
        let Some(found) = actual.get(path) else {
            problems.push(format!("{path}: missing"));
            continue;
        };
        match (entry, found) {
            (Entry::Dir { .. }, Actual::Dir { mode }) => {
                if *mode != 0o555 {
                    problems.push(format!("{path}: directory mode {mode:04o}, expected 0555"));
                }
            }
            (Entry::Link { target, .. }, Actual::Link { target: found }) => {
                if target != found {
                    problems.push(format!("{path}: link target changed"));
                }
            }
            (
                Entry::File {
                    blob, size, exec, ..
                },
                Actual::File {
                    mode,
                    size: found_size,
                    key,
                    ..
                },
            ) => {
                let content_ok = match blob {
                    None => *found_size == 0,
                    Some(id) => {
                        *found_size == *size && hashes.get(key).copied().flatten() == Some(*id)
                    }
                };
                if !content_ok {
                    problems.push(format!("{path}: content changed"));
                } else if *mode != file_mode(*exec) {
                    problems.push(format!(
                        "{path}: mode {mode:04o}, expected {:04o}",
                        file_mode(*exec)
                    ));
                }
            }
            _ => problems.push(format!("{path}: file type changed")),
        }
    }
    for path in actual.keys() {
        if !expected_paths.contains(path.as_str()) {
            problems.push(format!("{path}: unexpected entry"));
        }
    }
    problems
}

impl Store {
    /// The metadata of the package store path `path` when it may stand for the tree hash
    /// `expected`: the path is named by that hash, its tree and metadata are this user's (or
    /// root's), and the metadata records that hash (what was hashed when it was published).
    fn manifest_vouching_for(
        &self,
        path: &crate::names::StorePath,
        expected: &crate::tree_hash::TreeHash,
    ) -> Option<std::sync::Arc<StorePathMeta>> {
        if !expected.hex().starts_with(path.name().hash_part())
            || !self.trusted_store_path(path.name())
        {
            return None;
        }
        self.cached_meta(path.name())
            .filter(|meta| meta.tree_hash.as_ref() == Some(expected))
    }

    /// Whether the package store path `path`, named by the tree hash `expected`, is still the tree
    /// this user published or verified, told without reading a file: its metadata is this user's
    /// (or root's) and records `expected`; the walk finds exactly the entries its manifest lists,
    /// each of the same type (a link with the same target); and every file is still the inode of
    /// its blob as this user's blob stamp last recorded it (`crate::stamps`: a write moves ctime, a
    /// replaced file is another inode, and each link this user makes records the stamp again).
    /// `false` for anything else, a file that is a copy of its blob included: the caller hashes.
    pub(crate) fn unchanged_since_verified(
        &self,
        path: &crate::names::StorePath,
        expected: &crate::tree_hash::TreeHash,
    ) -> bool {
        let Some(meta) = self.manifest_vouching_for(path, expected) else {
            return false;
        };
        let mut seen = 0;
        for item in walkdir::WalkDir::new(path.path())
            .min_depth(1)
            .follow_links(false)
        {
            let Ok(item) = item else {
                return false;
            };
            let Some(relative) = item
                .path()
                .strip_prefix(path.path())
                .ok()
                .and_then(Path::to_str)
            else {
                return false;
            };
            let Ok(index) = meta
                .entries
                .binary_search_by(|entry| entry.path().as_bytes().cmp(relative.as_bytes()))
            else {
                return false;
            };
            let file_type = item.file_type();
            let same = match &meta.entries[index] {
                Entry::Dir { .. } => file_type.is_dir(),
                Entry::Link { target, .. } => {
                    file_type.is_symlink()
                        && std::fs::read_link(item.path())
                            .is_ok_and(|found| found.as_os_str() == target.as_str())
                }
                Entry::File { blob, exec, .. } => {
                    file_type.is_file()
                        && item.metadata().is_ok_and(|found| match blob {
                            None => found.len() == 0,
                            Some(id) => {
                                self.recorded_stamp(id, *exec)
                                    == Some(crate::stamps::BlobStamp::of(&found))
                            }
                        })
                }
            };
            if !same {
                return false;
            }
            seen += 1;
        }
        seen == meta.entries.len()
    }

    /// The blob stamps a hash of the package store path `path` may record when it matches
    /// `expected`, taken before the content is read (a change while it is hashed shows next time):
    /// for each file that is its blob's inode, the file's stamp. Empty unless the store path is
    /// named by `expected` and its metadata is this user's (or root's) and records that hash, since
    /// only then does a match say that every file holds the content its manifest's blob names.
    pub(crate) fn stamps_before_hashing(
        &self,
        path: &crate::names::StorePath,
        expected: &crate::tree_hash::TreeHash,
    ) -> Vec<(BlobId, bool, crate::stamps::BlobStamp)> {
        let Some(meta) = self.manifest_vouching_for(path, expected) else {
            return Vec::new();
        };
        meta.entries
            .iter()
            .filter_map(|entry| {
                let Entry::File {
                    path: relative,
                    blob: Some(id),
                    exec,
                    ..
                } = entry
                else {
                    return None;
                };
                let found = std::fs::symlink_metadata(path.path().join(relative)).ok()?;
                let blob = std::fs::symlink_metadata(self.blob_path(id, *exec)).ok()?;
                (found.is_file() && blob.ino() == found.ino() && blob.dev() == found.dev())
                    .then(|| (*id, *exec, crate::stamps::BlobStamp::of(&found)))
            })
            .collect()
    }

    /// The regular files of the store path `path` whose content is no longer what its manifest
    /// records, found cheaply: a file that is still its blob's inode is checked by the blob's
    /// identity stamp (size, mtime, ctime, inode recorded when this user last verified or linked it;
    /// re-hashed only when the stamp differs); any other file (a copy, or a blob replaced or restored
    /// since) is hashed. Relative `/`-separated paths, sorted; a missing file counts as changed.
    pub fn changed_files(&self, path: &crate::names::StorePath) -> Result<Vec<String>> {
        let meta = self.meta(path)?;
        let changed: Vec<Option<String>> = meta
            .entries
            .par_iter()
            .map(|entry| {
                let Entry::File {
                    path: relative,
                    blob,
                    size,
                    exec,
                } = entry
                else {
                    return Ok(None);
                };
                let file = path.path().join(relative);
                let Ok(found) = std::fs::symlink_metadata(&file) else {
                    return Ok(Some(relative.clone()));
                };
                if !found.is_file() || found.len() != *size {
                    return Ok(Some(relative.clone()));
                }
                let Some(id) = blob else {
                    return Ok(None);
                };
                let blob_path = self.blob_path(id, *exec);
                let same_inode = std::fs::symlink_metadata(&blob_path)
                    .is_ok_and(|b| b.ino() == found.ino() && b.dev() == found.dev());
                let intact = if same_inode {
                    self.blob_is_intact(id, *exec, &blob_path)?
                } else {
                    blake3_file(&file)?.0 == *id
                };
                Ok((!intact).then(|| relative.clone()))
            })
            .collect::<Result<_>>()?;
        let mut changed: Vec<String> = changed.into_iter().flatten().collect();
        changed.sort();
        Ok(changed)
    }
}
