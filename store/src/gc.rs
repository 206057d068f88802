//! Garbage collection: mark from the roots, sweep the rest.
//!
//! Holds the store lock **exclusively** (builders hold it shared while they publish and register temp
//! roots before letting go, so nothing a running sync or launch uses can disappear). Roots: slots,
//! indirect roots (project pointers), generation histories (pruned to `keep_generations` newest, older
//! ones kept while younger than `older_than`), live temp roots, live leases. Marking follows each store
//! path's `references`. Unreachable store paths are renamed to a hidden name in their own directory
//! (which needs no permission on the sealed tree, so a regular user can) and then removed directory by
//! directory, each made writable first; blobs no live manifest or temp root names and whose only link
//! is the blob itself are deleted, with the stamps (`stamps/<uid>/...`) of every blob that is gone;
//! `.tmp/` leftovers of dead builds and metadata without a store path
//! are removed. Stale roots are removed.
//!
//! Only what really went is counted (bytes: allocated blocks, as `du` counts them). Only an entry's
//! owner or root removes it: what GC would remove but may not (another user's, in a shared store) or
//! could not (a failed removal) is reported in [`GcReport::not_removed`] with the remedy, never
//! swallowed. A user's GC judges only that user's roots: another user's pointer may sit in a directory
//! this user cannot read, so their roots and histories are kept as they are.
//!
//! On a store shared by several machines, GC judges only this host's indirect roots and history
//! entries (a pointer is host-local); another host's are kept as they are until that host has not been
//! seen for [`HOST_ROOT_TTL`](crate::HOST_ROOT_TTL), and roots that record no host until they are that
//! old (see `roots`). It must never remove a root because a path another machine owns is missing here.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rayon::prelude::*;

use crate::error::{IoContext, Result};
use crate::fsutil::{self, unique_name};
use crate::lock::{try_lock_file, LockKind};
use crate::meta::StorePathMeta;
use crate::names::StorePathName;
use crate::publish::STAMPS;
use crate::roots::{LeaseState, RootOwner};
use crate::store::{
    Store, BLOBS, GCROOTS, GENERATIONS, HOSTS, INDIRECT, LEASES, META, TEMPROOTS, TMP,
};

/// What GC may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcOptions {
    /// Report what would be removed, remove nothing.
    pub dry_run: bool,
    /// Generations kept per history (newest first), whatever their age.
    pub keep_generations: usize,
    /// Beyond `keep_generations`, keep generations younger than this; `None`: remove them all.
    pub older_than: Option<Duration>,
}

impl Default for GcOptions {
    fn default() -> Self {
        GcOptions {
            dry_run: false,
            keep_generations: 3,
            older_than: None,
        }
    }
}

/// Roots GC found, by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RootCounts {
    /// Slots linking into the store.
    pub slots: usize,
    /// Indirect roots kept that keep a store path: the pointer resolves into the store here, or (a root
    /// of another host) it recorded one.
    pub indirect: usize,
    /// Generation history entries kept.
    pub generations: usize,
    /// Of the indirect roots and history entries kept, those of other hosts (or recording no host),
    /// kept as they are because only their host can judge them.
    pub other_hosts: usize,
    /// Store paths named by live temp roots.
    pub temp: usize,
    /// Live leases.
    pub leases: usize,
    /// Rebuildable slots (path and `local/` packages; not roots) whose copy something else keeps.
    pub rebuildable_slots_kept: usize,
    /// Of the indirect roots and history entries kept, those of other users of a shared store (or
    /// whose pointer sits where this user cannot look), kept as they are: only their owner or root
    /// judges them.
    pub other_users: usize,
}

/// Something GC would remove (unreachable or stale) but could not, or (with `dry_run`) could not.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct NotRemoved {
    /// What it is: `store path`, `blob`, `root`, `slot`, `metadata` or `leftover`.
    pub kind: &'static str,
    /// Where it is.
    pub path: PathBuf,
    /// The uid owning it, when it could be read.
    pub owner: Option<u32>,
    /// Why it stayed.
    pub reason: String,
}

/// What GC did (or, with `dry_run`, would do).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct GcReport {
    /// Nothing was removed.
    pub dry_run: bool,
    /// Roots found.
    pub roots: RootCounts,
    /// Store paths kept (reachable).
    pub store_paths_kept: usize,
    /// Store paths removed (only those really gone; with `dry_run`, those that would go).
    pub store_paths_removed: Vec<String>,
    /// Blobs removed.
    pub blobs_removed: usize,
    /// Bytes given back to the filesystem: the allocated blocks (what `du` counts) of every inode
    /// whose last link went and of every directory removed.
    pub bytes_freed: u64,
    /// Generation history entries pruned.
    pub generations_pruned: usize,
    /// Stale roots removed (dangling slots, vanished pointers of this host, dead temp roots, stale
    /// leases, roots of hosts not seen for [`HOST_ROOT_TTL`](crate::HOST_ROOT_TTL)).
    pub stale_roots_removed: usize,
    /// Rebuildable slots (path and `local/` packages) removed with their unused copy.
    pub rebuildable_slots_removed: usize,
    /// Leftovers of interrupted builds removed from `.tmp/`, plus orphaned metadata files.
    pub leftovers_removed: usize,
    /// What GC would have removed but could not: another user's files in a shared store (only their
    /// owner or root may remove them), or a removal that failed. Nothing here was counted as removed.
    pub not_removed: Vec<NotRemoved>,
    /// What to tell the user about `not_removed`, with the remedy.
    pub warnings: Vec<String>,
}

/// Whether a root's pointer exists, as far as this user can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Visibility {
    /// It exists.
    Visible,
    /// It is gone (every directory above it could be searched).
    Gone,
    /// A directory above it cannot be searched by this user (another user's private directory): nobody
    /// can tell here, so the root is kept as it is.
    Unknown,
}

fn visibility(pointer: &Path) -> Visibility {
    match std::fs::symlink_metadata(pointer) {
        Ok(_) => Visibility::Visible,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Visibility::Gone,
        Err(_) => Visibility::Unknown,
    }
}

/// Removes (or, dry, counts) what GC decided to remove, honouring ownership: only the owner of an entry
/// (or root) removes it, everything else is listed in `not_removed`, and nothing is counted that did
/// not go.
struct Sweeper<'a> {
    dry: bool,
    report: &'a mut GcReport,
}

impl Sweeper<'_> {
    /// `Some(owner)` when this process may remove `path`; else records why not.
    fn permitted(&mut self, kind: &'static str, path: &Path) -> Option<u32> {
        let Some(owner) = fsutil::owner_of(path) else {
            // Gone already (a concurrent removal by its owner): nothing to do.
            return None;
        };
        if fsutil::may_remove(owner) {
            return Some(owner);
        }
        self.report.not_removed.push(NotRemoved {
            kind,
            path: path.to_path_buf(),
            owner: Some(owner),
            reason: format!("it belongs to uid {owner}; only its owner or root may remove it"),
        });
        None
    }

    /// Remove one file (a root, a slot, a blob, metadata); `true` when it went (or, dry, would go).
    fn remove_file(&mut self, kind: &'static str, path: &Path) -> bool {
        if self.permitted(kind, path).is_none() {
            return false;
        }
        if self.dry {
            if let Ok(meta) = std::fs::symlink_metadata(path) {
                self.report.bytes_freed += fsutil::freed_by_removing(&meta);
            }
            return true;
        }
        let mut freed = 0;
        let result = fsutil::remove_file_counting(path, &mut freed);
        self.report.bytes_freed += freed;
        match result {
            Ok(()) => true,
            Err(err) => {
                self.failed(kind, path, &err);
                false
            }
        }
    }

    /// Remove a tree (a leftover of `.tmp/`); `true` when it went.
    fn remove_tree(&mut self, kind: &'static str, path: &Path) -> bool {
        if self.permitted(kind, path).is_none() {
            return false;
        }
        if self.dry {
            self.report.bytes_freed += tree_bytes(path, 0);
            return true;
        }
        let mut freed = 0;
        let result = fsutil::remove_tree_counting(path, &mut freed);
        self.report.bytes_freed += freed;
        match result {
            Ok(()) => true,
            Err(err) => {
                self.failed(kind, path, &err);
                false
            }
        }
    }

    fn failed(&mut self, kind: &'static str, path: &Path, err: &crate::StoreError) {
        self.report.not_removed.push(NotRemoved {
            kind,
            path: path.to_path_buf(),
            owner: fsutil::owner_of(path),
            reason: err.to_string(),
        });
    }
}

/// Run GC on `store`.
pub fn gc(store: &Store, options: GcOptions) -> Result<GcReport> {
    let _lock = store.lock(LockKind::Exclusive)?;
    if !options.dry_run {
        store.record_host_seen();
    }
    let judge = store.root_judge()?;
    let mut report = GcReport {
        dry_run: options.dry_run,
        ..GcReport::default()
    };
    let dry = options.dry_run;
    let mut roots: BTreeSet<StorePathName> = BTreeSet::new();
    let mut blob_roots: HashSet<String> = HashSet::new();
    let mut rebuildable: Vec<(String, StorePathName)> = Vec::new();
    let mut sweep = Sweeper {
        dry,
        report: &mut report,
    };

    // Slots.
    for entry in fs_err::read_dir(&store.cache_dir).ctx("list", &store.cache_dir)? {
        let entry = entry.ctx("list", &store.cache_dir)?;
        let Some(key) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if key.starts_with('.') || key == "store" {
            continue;
        }
        match store.slot_state(&key) {
            Ok(crate::SlotState::Linked(path)) if store.slot_is_rebuildable(&key) => {
                // Not a root: a generation that uses it keeps it (see `mark_slot_rebuildable`).
                rebuildable.push((key, path.name().clone()));
            }
            Ok(crate::SlotState::Linked(path)) => {
                roots.insert(path.name().clone());
                sweep.report.roots.slots += 1;
            }
            Ok(crate::SlotState::Dangling(_)) if sweep.remove_file("slot", &entry.path()) => {
                sweep.report.stale_roots_removed += 1;
            }
            _ => {}
        }
    }

    // Indirect roots: only this host can see its pointers, so only it judges them by the pointer; and
    // only their owner (or root) judges a user's roots: another user's pointer may sit in a directory
    // this user cannot read, and "cannot see it" is not "it is gone".
    for root in store.indirect_roots()? {
        let mine = fsutil::owner_of(&root.file).is_some_and(fsutil::may_remove);
        let seen = visibility(&root.pointer);
        let resolved = if seen == Visibility::Visible {
            store.store_path_of(&root.pointer)
        } else {
            None
        };
        let recorded = match judge.owner(root.host.as_deref(), root.renewed) {
            // Another host's root: its pointer, when visible here too, is followed; what it selected
            // when it was registered stays too.
            RootOwner::OtherHost => {
                sweep.report.roots.other_hosts += 1;
                root.target
            }
            RootOwner::ThisHost | RootOwner::Expired if !mine => {
                sweep.report.roots.other_users += 1;
                root.target
            }
            RootOwner::ThisHost | RootOwner::Expired if seen == Visibility::Unknown => {
                sweep.report.roots.other_users += 1;
                root.target
            }
            // This host's root whose pointer is gone, or an expired one no pointer here backs: stale.
            RootOwner::ThisHost | RootOwner::Expired if seen == Visibility::Gone => {
                if sweep.remove_file("root", &root.file) {
                    sweep.report.stale_roots_removed += 1;
                } else {
                    // Still registered: what it recorded stays alive until it goes.
                    roots.extend(root.target);
                }
                continue;
            }
            RootOwner::ThisHost | RootOwner::Expired => None,
        };
        let kept: Vec<StorePathName> = resolved
            .map(|path| path.name().clone())
            .into_iter()
            .chain(recorded)
            .collect();
        if !kept.is_empty() {
            sweep.report.roots.indirect += 1;
            roots.extend(kept);
        }
    }

    // Generation histories.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    for history in store.all_histories()? {
        // The keep policy counts this host's entries of this user only; other hosts and other users
        // prune their own.
        let mut position = 0;
        for generation in history {
            let created_secs =
                u64::try_from(generation.created_nanos / 1_000_000_000).unwrap_or(u64::MAX);
            let mine = fsutil::owner_of(&generation.link).is_some_and(fsutil::may_remove);
            match judge.owner(generation.host.as_deref(), created_secs) {
                RootOwner::ThisHost | RootOwner::Expired if !mine => {
                    roots.insert(generation.name.clone());
                    sweep.report.roots.generations += 1;
                    sweep.report.roots.other_users += 1;
                }
                RootOwner::ThisHost => {
                    let age = Duration::from_nanos(
                        u64::try_from(now.saturating_sub(generation.created_nanos))
                            .unwrap_or(u64::MAX),
                    );
                    let keep = position < options.keep_generations
                        || options.older_than.is_some_and(|limit| age < limit);
                    position += 1;
                    if keep || !sweep.remove_file("root", &generation.link) {
                        roots.insert(generation.name.clone());
                        sweep.report.roots.generations += 1;
                    } else {
                        sweep.report.generations_pruned += 1;
                    }
                }
                RootOwner::OtherHost => {
                    roots.insert(generation.name.clone());
                    sweep.report.roots.generations += 1;
                    sweep.report.roots.other_hosts += 1;
                }
                RootOwner::Expired => {
                    if sweep.remove_file("root", &generation.link) {
                        sweep.report.stale_roots_removed += 1;
                        if !dry && generation.host.is_some() {
                            if let Some(host_dir) = generation.link.parent() {
                                // Gone once its last entry is (fails harmlessly while not empty).
                                let _ = std::fs::remove_dir(host_dir);
                            }
                        }
                    } else {
                        roots.insert(generation.name.clone());
                    }
                }
            }
        }
    }

    // Temp roots of live processes.
    let temproots = store.dir.join(TEMPROOTS);
    for entry in fs_err::read_dir(&temproots).ctx("list", &temproots)? {
        let entry = entry.ctx("list", &temproots)?;
        let path = entry.path();
        // Read-only is enough to test a lock (a shared lock conflicts with the owner's exclusive one),
        // and works on another user's file in a shared store.
        let mut file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => {
                // Unreadable: its process may be alive; it stays.
                sweep.report.not_removed.push(NotRemoved {
                    kind: "root",
                    path: path.clone(),
                    owner: fsutil::owner_of(&path),
                    reason: format!(
                        "cannot be read ({err}), so it may belong to a running process"
                    ),
                });
                continue;
            }
        };
        if try_lock_file(&file, &path, LockKind::Shared)? {
            // Its owner is gone.
            if sweep.remove_file("root", &path) {
                sweep.report.stale_roots_removed += 1;
            }
            continue;
        }
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        for line in text.lines() {
            if let Some(name) = line.strip_prefix("p ") {
                if let Ok(name) = name.parse::<StorePathName>() {
                    roots.insert(name);
                    sweep.report.roots.temp += 1;
                }
            } else if let Some(blob) = line.strip_prefix("b ") {
                blob_roots.insert(blob.to_owned());
            }
        }
    }

    // Leases.
    for (lease, state) in store.leases()? {
        match state {
            LeaseState::Live => {
                sweep.report.roots.leases += 1;
                for name in &lease.record.paths {
                    if let Ok(name) = name.parse::<StorePathName>() {
                        roots.insert(name);
                    }
                }
            }
            LeaseState::Stale => {
                if sweep.remove_file("root", &lease.file) {
                    sweep.report.stale_roots_removed += 1;
                }
            }
        }
    }

    // Mark.
    let all_paths = list_store_paths(store)?;
    let mut metas: HashMap<StorePathName, Option<StorePathMeta>> = HashMap::new();
    let mut live: HashSet<StorePathName> = HashSet::new();
    let mut stack: Vec<StorePathName> = roots
        .into_iter()
        .filter(|name| all_paths.contains(name))
        .collect();
    while let Some(name) = stack.pop() {
        if !live.insert(name.clone()) {
            continue;
        }
        let meta = StorePathMeta::read(&store.meta_path(name.as_str())).ok();
        if let Some(meta) = &meta {
            for reference in &meta.references {
                if let Ok(reference) = reference.parse::<StorePathName>() {
                    if all_paths.contains(&reference) && !live.contains(&reference) {
                        stack.push(reference);
                    }
                }
            }
        }
        metas.insert(name, meta);
    }
    sweep.report.store_paths_kept = live.len();

    // Sweep store paths. Each is first renamed to a hidden name in its own directory (so none is ever
    // seen half-deleted; a rename within one directory needs no write permission on the tree itself,
    // which a sealed 0555 tree only grants to root), then removed directory by directory.
    let dead: Vec<&StorePathName> = all_paths
        .iter()
        .filter(|name| !live.contains(*name))
        .collect();
    let mut dead_links: HashMap<String, u64> = HashMap::new();
    let mut moved: Vec<(StorePathName, PathBuf)> = Vec::new();
    let mut gone: HashSet<StorePathName> = HashSet::new();
    for name in dead {
        let path = store.path_of(name);
        if sweep.permitted("store path", &path).is_none() {
            continue;
        }
        if dry {
            if let Ok(meta) = StorePathMeta::read(&store.meta_path(name.as_str())) {
                for (id, exec) in meta.blobs() {
                    *dead_links.entry(id.file_name(exec).1).or_insert(0) += 1;
                }
            }
            sweep.report.bytes_freed += tree_bytes(&path, 0);
            if let Ok(meta) = std::fs::symlink_metadata(store.meta_path(name.as_str())) {
                sweep.report.bytes_freed += fsutil::freed_by_removing(&meta);
            }
            sweep.report.store_paths_removed.push(name.to_string());
            gone.insert(name.clone());
            continue;
        }
        let aside = store.dir.join(unique_name(GC_ASIDE_PREFIX));
        if let Err(err) = fs_err::rename(&path, &aside) {
            sweep.failed(
                "store path",
                &path,
                &crate::StoreError::io("move aside", &path, err),
            );
            continue;
        }
        sweep.remove_file("metadata", &store.meta_path(name.as_str()));
        moved.push((name.clone(), aside));
    }
    let removed: Vec<(StorePathName, PathBuf, u64, Result<()>)> = moved
        .into_par_iter()
        .map(|(name, aside)| {
            let mut freed = 0;
            let result = fsutil::remove_tree_counting(&aside, &mut freed);
            (name, aside, freed, result)
        })
        .collect();
    for (name, aside, freed, result) in removed {
        sweep.report.bytes_freed += freed;
        match result {
            Ok(()) => {
                sweep.report.store_paths_removed.push(name.to_string());
                gone.insert(name);
            }
            Err(err) => sweep.failed("store path", &aside, &err),
        }
    }
    sweep.report.store_paths_removed.sort();

    // Rebuildable slots whose copy nothing uses any more go with it.
    for (key, name) in &rebuildable {
        if live.contains(name) || !gone.contains(name) {
            sweep.report.roots.rebuildable_slots_kept += 1;
        } else if sweep.remove_file("slot", &store.cache_dir.join(key)) {
            sweep.remove_file("slot", &store.rebuildable_marker(key));
            sweep.report.rebuildable_slots_removed += 1;
        }
    }

    // Blobs the live paths use.
    let mut live_blobs: HashSet<String> = blob_roots;
    for meta in metas.values().flatten() {
        for (id, exec) in meta.blobs() {
            live_blobs.insert(id.file_name(exec).1);
        }
    }

    // Sweep blobs.
    let blobs_dir = store.dir.join(BLOBS);
    for shard in fs_err::read_dir(&blobs_dir).ctx("list", &blobs_dir)? {
        let shard = shard.ctx("list", &blobs_dir)?;
        if !shard.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            continue;
        }
        for blob in fs_err::read_dir(shard.path()).ctx("list", shard.path())? {
            let blob = blob.ctx("list", shard.path())?;
            let Some(file_name) = blob.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if live_blobs.contains(&file_name) {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(blob.path()) else {
                continue;
            };
            let extra = if dry {
                dead_links.get(&file_name).copied().unwrap_or(0)
            } else {
                0
            };
            if meta.nlink() <= 1 + extra {
                if dry {
                    if sweep.permitted("blob", &blob.path()).is_some() {
                        sweep.report.blobs_removed += 1;
                        sweep.report.bytes_freed += meta.blocks() * 512;
                    }
                } else if sweep.remove_file("blob", &blob.path()) {
                    sweep.report.blobs_removed += 1;
                }
            }
        }
    }

    // The stamps of blobs that are gone (a cache of each user's checks, see `publish`).
    if !dry {
        sweep_stamps(store, &mut sweep);
    }

    // Leftovers in .tmp (dead builds; live ones hold their lock) and orphaned metadata.
    let tmp = store.dir.join(TMP);
    for entry in fs_err::read_dir(&tmp).ctx("list", &tmp)? {
        let entry = entry.ctx("list", &tmp)?;
        let path = entry.path();
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            let lock_path = path.join(".lock");
            match std::fs::File::open(&lock_path) {
                Ok(file) => {
                    if !try_lock_file(&file, &lock_path, LockKind::Shared)? {
                        continue;
                    }
                }
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                // Another user's private build: it may be running.
                Err(_) => continue,
            }
        }
        if sweep.remove_tree("leftover", &path) {
            sweep.report.leftovers_removed += 1;
        }
    }
    // Store paths GC or repair moved aside and could not finish removing, and trees a killed
    // publication left sealed under a hidden name (GC holds the store lock exclusively, so none of
    // them is in use).
    for entry in fs_err::read_dir(&store.dir).ctx("list", &store.dir)? {
        let entry = entry.ctx("list", &store.dir)?;
        let name = entry.file_name();
        let bytes = name.as_encoded_bytes();
        let hidden = [GC_ASIDE_PREFIX, crate::publish::PUBLISH_PREFIX, ".repair-"];
        if hidden
            .iter()
            .any(|prefix| bytes.starts_with(prefix.as_bytes()))
            && sweep.remove_tree("leftover", &entry.path())
        {
            sweep.report.leftovers_removed += 1;
        }
    }
    let meta_dir = store.dir.join(META);
    for entry in fs_err::read_dir(&meta_dir).ctx("list", &meta_dir)? {
        let entry = entry.ctx("list", &meta_dir)?;
        let Some(file_name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let Some(stem) = file_name.strip_suffix(".json") else {
            continue;
        };
        let orphan = match stem.parse::<StorePathName>() {
            // (A dry run counted the metadata of the paths it would remove with them.)
            Ok(name) => !(store.path_of(&name).is_dir() || dry && gone.contains(&name)),
            Err(_) => true,
        };
        if orphan && sweep.remove_file("metadata", &entry.path()) {
            sweep.report.leftovers_removed += 1;
        }
    }
    // Temp files of interrupted atomic writes (their writers hold the store lock shared).
    let mut temp_parents = vec![
        store.cache_dir.clone(),
        store.dir.join(GCROOTS).join(INDIRECT),
        store.dir.join(GCROOTS).join(HOSTS),
        store.dir.join(LEASES),
    ];
    let generations = store.dir.join(GCROOTS).join(GENERATIONS);
    for entry in fs_err::read_dir(&generations)
        .ctx("list", &generations)?
        .flatten()
    {
        // The history directory and its per-host directories.
        for sub in std::fs::read_dir(entry.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if sub.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                temp_parents.push(sub.path());
            }
        }
        temp_parents.push(entry.path());
    }
    for parent in temp_parents {
        let Ok(entries) = std::fs::read_dir(&parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let bytes = name.as_encoded_bytes();
            if (bytes.starts_with(b".slot-")
                || bytes.starts_with(b".new-")
                || bytes.starts_with(b".lease-"))
                && sweep.remove_file("leftover", &entry.path())
            {
                sweep.report.leftovers_removed += 1;
            }
        }
    }
    if !dry && store.flush {
        fsutil::fsync_dir(&store.dir)?;
    }
    report.warnings = not_removed_warnings(&report.not_removed, dry);
    Ok(report)
}

/// Prefix of a store path GC moved aside in its own directory before removing it.
const GC_ASIDE_PREFIX: &str = ".gc-";

/// Removes every blob stamp (`stamps/<uid>/<2hex>/<blob>`) this user can reach whose blob is gone:
/// those of the blobs this GC deleted and any a killed run left, through the sweeper (counted in
/// `bytes_freed` like every removal, a failure reported). A stamp left behind costs nothing but a
/// file (a new blob of that name has another inode, so the stale stamp only makes its first link
/// re-hash it). Another user's stamps sit in their 0700 directory: theirs (or root's) to collect.
/// Stamp temp files (`.stamp-*`) are left alone.
fn sweep_stamps(store: &Store, sweep: &mut Sweeper<'_>) {
    let blobs = store.dir.join(BLOBS);
    let readable = |dir: &Path| std::fs::read_dir(dir).into_iter().flatten().flatten();
    for user in readable(&store.dir.join(STAMPS)) {
        for shard in readable(&user.path()) {
            for entry in readable(&shard.path()) {
                let name = entry.file_name();
                if name.to_string_lossy().starts_with('.') {
                    continue;
                }
                let blob = blobs.join(shard.file_name()).join(&name);
                let gone = matches!(
                    std::fs::symlink_metadata(&blob),
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound
                );
                if gone {
                    sweep.remove_file("blob stamp", &entry.path());
                }
            }
        }
    }
}

/// One warning per owner of what could not be removed (with the remedy), and one per failure.
fn not_removed_warnings(not_removed: &[NotRemoved], dry: bool) -> Vec<String> {
    let me = fsutil::euid();
    let mut by_owner: std::collections::BTreeMap<u32, usize> = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for item in not_removed {
        match item.owner {
            Some(owner) if owner != me && item.reason.starts_with("it belongs to uid") => {
                *by_owner.entry(owner).or_insert(0) += 1;
            }
            _ => out.push(format!(
                "warning: could not remove {} {}: {}",
                item.kind,
                item.path.display(),
                item.reason
            )),
        }
    }
    let verb = if dry {
        "would not remove"
    } else {
        "did not remove"
    };
    for (owner, count) in by_owner {
        out.insert(
            0,
            format!(
                "warning: {verb} {count} unused item(s) of uid {owner} (store paths, blobs, roots or leftovers it made): only their owner or root may remove them in a shared store; run `agentpack gc` as that user, or as root (the store's administrator) to collect the whole store"
            ),
        );
    }
    out
}

/// Published store path names (directories named `<32hex>-<label>`).
pub(crate) fn list_store_paths(store: &Store) -> Result<BTreeSet<StorePathName>> {
    let mut out = BTreeSet::new();
    for entry in fs_err::read_dir(&store.dir).ctx("list", &store.dir)? {
        let entry = entry.ctx("list", &store.dir)?;
        let Some(text) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let Ok(name) = text.parse::<StorePathName>() else {
            continue;
        };
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            out.insert(name);
        }
    }
    Ok(out)
}

/// Allocated bytes (what `du` counts) of what removing the tree at `root` gives back: its directories
/// and the files whose last link is the one in the tree (`nlink <= 1 + extra`).
fn tree_bytes(root: &Path, extra: u64) -> u64 {
    let mut total = 0;
    for entry in walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .flatten()
    {
        if let Ok(meta) = entry.metadata() {
            if meta.is_dir() || meta.nlink() <= 1 + extra {
                total += meta.blocks() * 512;
            }
        }
    }
    total
}
