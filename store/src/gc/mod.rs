//! Garbage collection: mark from the roots, sweep the rest.
//!
//! Holds the store lock **exclusively** (builders hold it shared while they publish and register temp
//! roots before letting go, so nothing a running sync or launch uses can disappear). Roots: slots,
//! indirect roots (project pointers), generation histories (pruned to `keep_generations` newest, older
//! ones kept while younger than `older_than`), live temp roots, live leases. Marking follows each store
//! path's `references` as the store database records them (`database`: every record is checked
//! against the filesystem by its stamp before it is used, and made again from the metadata file when
//! it does not match, so a stale index never makes a live path look dead); the roots that reached each
//! live path are recorded there for `Store::path_info`. Unreachable store paths are renamed to a hidden name in their own directory
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
//!
//! This module stays over 600 lines on purpose: [`gc`] is one pass under one exclusive lock (roots,
//! mark, sweep, report) whose phases share the sweeper and the root tables; the report types live
//! in `report` and the removal rules in `sweep`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rayon::prelude::*;

use crate::database::{self, Need, Records};
use crate::error::{IoContext, Result};
use crate::fsutil::{self, unique_name};
use crate::lock::{try_lock_file, LockKind};
use crate::names::StorePathName;
use crate::roots::{LeaseState, RootOwner};
use crate::store::{Store, GCROOTS, GENERATIONS, HOSTS, INDIRECT, LEASES, META, TEMPROOTS, TMP};

mod report;
mod sweep;

pub use report::{GcOptions, GcReport, NotRemoved, RootCounts};
use sweep::{not_removed_warnings, sweep_stamps, tree_bytes, Sweeper};

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

/// Run GC on `store`.
pub fn gc(store: &Store, options: GcOptions) -> Result<GcReport> {
    let _lock = store.lock(LockKind::Exclusive)?;
    if !options.dry_run {
        store.record_host_seen();
    }
    let judge = store.root_judge()?;
    let index_before = index_allocation(store);
    let mut report = GcReport {
        dry_run: options.dry_run,
        ..GcReport::default()
    };
    let dry = options.dry_run;
    let mut roots = Roots::default();
    let mut blob_roots: HashSet<String> = HashSet::new();
    let mut rebuildable: Vec<(String, StorePathName)> = Vec::new();
    let mut sweep = Sweeper {
        dry,
        report: &mut report,
    };

    // Slots.
    for key in store.slot_keys()? {
        match store.slot_state(&key) {
            Ok(crate::SlotState::Linked(path)) if store.slot_is_rebuildable(&key) => {
                // Not a root: a generation that uses it keeps it (see `mark_slot_rebuildable`).
                rebuildable.push((key, path.name().clone()));
            }
            Ok(crate::SlotState::Linked(path)) => {
                roots.insert(path.name().clone(), format!("slot {key}"));
                sweep.report.roots.slots += 1;
            }
            Ok(crate::SlotState::Dangling(_))
                if sweep.remove_file("slot", &store.cache_dir.join(&key)) =>
            {
                sweep.report.stale_roots_removed += 1;
            }
            _ => {}
        }
    }

    // Indirect roots: only this host can see its pointers, so only it judges them by the pointer; and
    // only their owner (or root) judges a user's roots: another user's pointer may sit in a directory
    // this user cannot read, and "cannot see it" is not "it is gone".
    for root in store.indirect_roots()? {
        let label = format!("project {}", root.pointer.display());
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
                    roots.extend(root.target, &label);
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
            roots.extend(kept, &label);
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
            let label = history_label(store, &generation.link);
            let created_secs =
                u64::try_from(generation.created_nanos / 1_000_000_000).unwrap_or(u64::MAX);
            let mine = fsutil::owner_of(&generation.link).is_some_and(fsutil::may_remove);
            match judge.owner(generation.host.as_deref(), created_secs) {
                RootOwner::ThisHost | RootOwner::Expired if !mine => {
                    roots.insert(generation.name.clone(), label.clone());
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
                        roots.insert(generation.name.clone(), label.clone());
                        sweep.report.roots.generations += 1;
                    } else {
                        sweep.report.generations_pruned += 1;
                    }
                }
                RootOwner::OtherHost => {
                    roots.insert(generation.name.clone(), label.clone());
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
                        roots.insert(generation.name.clone(), label.clone());
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
                    let file = path.file_name().unwrap_or_default().to_string_lossy();
                    roots.insert(name, format!("temp root {file}"));
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
                let file = lease.file.file_name().unwrap_or_default().to_string_lossy();
                for name in &lease.record.paths {
                    if let Ok(name) = name.parse::<StorePathName>() {
                        roots.insert(name, format!("lease {file}"));
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

    // Mark, following the references the store database records (each record checked against the
    // filesystem by its stamp when first used; see `database`).
    let all_paths = list_store_paths(store)?;
    let mut records = Records::open(store, Need::References);
    let mut references = |name: &StorePathName| -> Vec<StorePathName> {
        records
            .get(name)
            .map(|record| {
                record
                    .references
                    .iter()
                    .filter_map(|reference| reference.parse::<StorePathName>().ok())
                    .filter(|reference| all_paths.contains(reference))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut live: HashSet<StorePathName> = HashSet::new();
    let mut roots_of: BTreeMap<StorePathName, BTreeSet<String>> = BTreeMap::new();
    for (root, labels) in &roots.0 {
        if !all_paths.contains(root) {
            continue;
        }
        // Each root's closure, so every live path knows the roots that reach it.
        let mut reached: HashSet<StorePathName> = HashSet::new();
        let mut stack = vec![root.clone()];
        while let Some(name) = stack.pop() {
            if !reached.insert(name.clone()) {
                continue;
            }
            let known = roots_of.entry(name.clone()).or_default();
            let fresh = labels.iter().any(|label| !known.contains(label));
            known.extend(labels.iter().cloned());
            if live.insert(name.clone()) || fresh {
                stack.extend(
                    references(&name)
                        .into_iter()
                        .filter(|reference| !reached.contains(reference)),
                );
            }
        }
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
            if let Some(record) = records.get(name) {
                for (blob, files) in &record.blobs {
                    *dead_links.entry(blob.clone()).or_insert(0) += u64::from(*files);
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
    for name in &live {
        if let Some(record) = records.get(name) {
            live_blobs.extend(record.blobs.keys().cloned());
        }
    }
    // The records of the paths that went are dropped below, with the roots recorded.
    records.finish(Some(&all_paths));

    // Sweep blobs. What is left of the listing is what the stamp sweep keeps stamps of.
    let mut present_blobs: HashSet<String> = HashSet::new();
    for (blob, file_name) in store.blob_files()? {
        if live_blobs.contains(&file_name) {
            present_blobs.insert(file_name);
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&blob) else {
            continue;
        };
        let extra = if dry {
            dead_links.get(&file_name).copied().unwrap_or(0)
        } else {
            0
        };
        if meta.nlink() <= 1 + extra {
            if dry {
                if sweep.permitted("blob", &blob).is_some() {
                    sweep.report.blobs_removed += 1;
                    sweep.report.bytes_freed += meta.blocks() * 512;
                }
            } else if sweep.remove_file("blob", &blob) {
                sweep.report.blobs_removed += 1;
                continue;
            }
        }
        present_blobs.insert(file_name);
    }

    // The stamps of blobs that are gone (a cache of each user's checks, see `publish`).
    if !dry {
        sweep_stamps(store, &mut sweep, &present_blobs);
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
            // The temp file of an interrupted metadata rewrite.
            if file_name.starts_with(crate::meta::META_TEMP_PREFIX)
                && sweep.remove_file("leftover", &entry.path())
            {
                sweep.report.leftovers_removed += 1;
            }
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
    if !dry {
        let removed: Vec<StorePathName> = gone.iter().cloned().collect();
        roots_of.retain(|name, _| live.contains(name));
        database::record_gc(store, &removed, &roots_of);
        let growth = index_allocation(store).saturating_sub(index_before);
        report.bytes_freed = report.bytes_freed.saturating_sub(growth);
    }
    report.warnings = not_removed_warnings(&report.not_removed, dry);
    Ok(report)
}

/// The roots GC found: every store path a root names, with a description of each root naming it
/// (recorded in the store database for `Store::path_info`).
#[derive(Default)]
struct Roots(BTreeMap<StorePathName, BTreeSet<String>>);

impl Roots {
    fn insert(&mut self, name: StorePathName, root: String) {
        self.0.entry(name).or_default().insert(root);
    }

    fn extend(&mut self, names: impl IntoIterator<Item = StorePathName>, root: &str) {
        for name in names {
            self.insert(name, root.to_owned());
        }
    }
}

/// Allocated bytes of the index's files when it lives inside the store (0 elsewhere): LMDB's file
/// grows as GC records what it found, and that growth is part of what `du` of the store sees.
fn index_allocation(store: &Store) -> u64 {
    let Some(location) = store
        .index_location()
        .filter(|dir| dir.starts_with(&store.dir))
    else {
        return 0;
    };
    ["data.mdb", "lock.mdb"]
        .iter()
        .filter_map(|file| std::fs::symlink_metadata(location.join(file)).ok())
        .map(|meta| meta.blocks() * 512)
        .sum()
}

/// `history <name>` for an entry of a generation history (`gcroots/generations/<name>/...`).
fn history_label(store: &Store, link: &Path) -> String {
    let generations = store.dir.join(GCROOTS).join(GENERATIONS);
    let history = link
        .strip_prefix(&generations)
        .ok()
        .and_then(|relative| relative.components().next())
        .map(|first| first.as_os_str().to_string_lossy().into_owned())
        .unwrap_or_else(|| link.display().to_string());
    format!("history {history}")
}

/// Prefix of a store path GC moved aside in its own directory before removing it.
const GC_ASIDE_PREFIX: &str = ".gc-";

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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::StoreOptions;

    #[test]
    fn the_temp_file_of_an_interrupted_metadata_rewrite_is_a_leftover() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cache"), StoreOptions::default()).unwrap();
        let meta_dir = store.dir.join(META);
        let temp = meta_dir.join(fsutil::unique_name(crate::meta::META_TEMP_PREFIX));
        std::fs::write(&temp, b"{\"partial").unwrap();
        let options = GcOptions {
            dry_run: false,
            keep_generations: 1,
            older_than: None,
        };
        let report = gc(&store, options).unwrap();
        assert_eq!(report.leftovers_removed, 1, "{report:?}");
        assert!(!temp.exists());
    }
}
