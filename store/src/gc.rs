//! Garbage collection: mark from the roots, sweep the rest.
//!
//! Holds the store lock **exclusively** (builders hold it shared while they publish and register temp
//! roots before letting go, so nothing a running sync or launch uses can disappear). Roots: slots,
//! indirect roots (project pointers), generation histories (pruned to `keep_generations` newest, older
//! ones kept while younger than `older_than`), live temp roots, live leases. Marking follows each store
//! path's `references`. Unreachable store paths are renamed aside into `.tmp/` and then deleted; blobs
//! no live manifest or temp root names and whose only link is the blob itself are deleted; `.tmp/`
//! leftovers of dead builds and metadata without a store path are removed. Stale roots are removed.
//!
//! On a store shared by several machines, GC judges only this host's indirect roots and history
//! entries (a pointer is host-local); another host's are kept as they are until that host has not been
//! seen for [`HOST_ROOT_TTL`](crate::HOST_ROOT_TTL), and roots that record no host until they are that
//! old (see `roots`). It must never remove a root because a path another machine owns is missing here.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use rayon::prelude::*;

use crate::error::{IoContext, Result};
use crate::fsutil::{self, unique_name};
use crate::lock::{try_lock_file, LockKind};
use crate::meta::StorePathMeta;
use crate::names::StorePathName;
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
    /// Store paths removed.
    pub store_paths_removed: Vec<String>,
    /// Blobs removed.
    pub blobs_removed: usize,
    /// Bytes given back to the filesystem (allocated blocks of inodes whose last link went).
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
    /// What could not be deleted (e.g. another user's files in a shared store; run GC as the store's
    /// owner). Everything named here is unreachable and out of sight in `.tmp/`.
    pub warnings: Vec<String>,
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
                report.roots.slots += 1;
            }
            Ok(crate::SlotState::Dangling(_)) => {
                report.stale_roots_removed += 1;
                if !dry {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
            _ => {}
        }
    }

    // Indirect roots: only this host can see its pointers, so only it judges them by the pointer.
    for root in store.indirect_roots()? {
        let visible = std::fs::symlink_metadata(&root.pointer).is_ok();
        let resolved = if visible {
            store.store_path_of(&root.pointer)
        } else {
            None
        };
        let recorded = match judge.owner(root.host.as_deref(), root.renewed) {
            // Another host's root: its pointer, when visible here too, is followed; what it selected
            // when it was registered stays too.
            RootOwner::OtherHost => {
                report.roots.other_hosts += 1;
                root.target
            }
            // This host's root whose pointer is gone, or an expired one no pointer here backs: stale.
            RootOwner::ThisHost | RootOwner::Expired if !visible => {
                report.stale_roots_removed += 1;
                if !dry {
                    let _ = std::fs::remove_file(&root.file);
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
            report.roots.indirect += 1;
            roots.extend(kept);
        }
    }

    // Generation histories.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    for history in store.all_histories()? {
        // The keep policy counts this host's entries only; other hosts prune their own.
        let mut position = 0;
        for generation in history {
            let created_secs =
                u64::try_from(generation.created_nanos / 1_000_000_000).unwrap_or(u64::MAX);
            match judge.owner(generation.host.as_deref(), created_secs) {
                RootOwner::ThisHost => {
                    let age = Duration::from_nanos(
                        u64::try_from(now.saturating_sub(generation.created_nanos))
                            .unwrap_or(u64::MAX),
                    );
                    let keep = position < options.keep_generations
                        || options.older_than.is_some_and(|limit| age < limit);
                    position += 1;
                    if keep {
                        roots.insert(generation.name.clone());
                        report.roots.generations += 1;
                    } else {
                        report.generations_pruned += 1;
                        if !dry {
                            let _ = std::fs::remove_file(&generation.link);
                        }
                    }
                }
                RootOwner::OtherHost => {
                    roots.insert(generation.name.clone());
                    report.roots.generations += 1;
                    report.roots.other_hosts += 1;
                }
                RootOwner::Expired => {
                    report.stale_roots_removed += 1;
                    if !dry {
                        let _ = std::fs::remove_file(&generation.link);
                        if let Some(host_dir) = generation.link.parent() {
                            if generation.host.is_some() {
                                // Gone once its last entry is (fails harmlessly while not empty).
                                let _ = std::fs::remove_dir(host_dir);
                            }
                        }
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
        let Ok(mut file) = std::fs::File::open(&path) else {
            continue;
        };
        if try_lock_file(&file, &path, LockKind::Shared)? {
            // Its owner is gone.
            report.stale_roots_removed += 1;
            if !dry {
                let _ = std::fs::remove_file(&path);
            }
            continue;
        }
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        for line in text.lines() {
            if let Some(name) = line.strip_prefix("p ") {
                if let Ok(name) = name.parse::<StorePathName>() {
                    roots.insert(name);
                    report.roots.temp += 1;
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
                report.roots.leases += 1;
                for name in &lease.record.paths {
                    if let Ok(name) = name.parse::<StorePathName>() {
                        roots.insert(name);
                    }
                }
            }
            LeaseState::Stale => {
                report.stale_roots_removed += 1;
                if !dry {
                    let _ = store.release_lease(&lease);
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
    report.store_paths_kept = live.len();
    // Rebuildable slots whose copy nothing uses any more go with it.
    for (key, name) in &rebuildable {
        if live.contains(name) {
            report.roots.rebuildable_slots_kept += 1;
        } else {
            report.rebuildable_slots_removed += 1;
            if !dry {
                store.drop_rebuildable_slot(key);
            }
        }
    }

    // Blobs the live paths use.
    let mut live_blobs: HashSet<String> = blob_roots;
    for meta in metas.values().flatten() {
        for (id, exec) in meta.blobs() {
            live_blobs.insert(id.file_name(exec).1);
        }
    }

    // Sweep store paths: rename each aside (so none is ever seen half-deleted), then delete them.
    let dead: Vec<&StorePathName> = all_paths
        .iter()
        .filter(|name| !live.contains(*name))
        .collect();
    let mut dead_links: HashMap<String, u64> = HashMap::new();
    let trash = store.dir.join(TMP).join(unique_name("trash-"));
    if !dead.is_empty() && !dry {
        fs_err::create_dir(&trash).ctx("create", &trash)?;
    }
    let mut moved = Vec::new();
    for name in dead {
        report.store_paths_removed.push(name.to_string());
        let path = store.path_of(name);
        if dry {
            if let Ok(meta) = StorePathMeta::read(&store.meta_path(name.as_str())) {
                for (id, exec) in meta.blobs() {
                    *dead_links.entry(id.file_name(exec).1).or_insert(0) += 1;
                }
            }
            report.bytes_freed += freed_bytes(&path, 0);
            continue;
        }
        let aside = trash.join(name.as_str());
        if fs_err::rename(&path, &aside).is_ok() {
            let _ = std::fs::remove_file(store.meta_path(name.as_str()));
            moved.push(aside);
        }
    }
    if !dry {
        let freed: Vec<Result<u64>> = moved
            .par_iter()
            .map(|aside| fsutil::remove_tree_counting(aside))
            .collect();
        for result in freed {
            report.bytes_freed += result?;
        }
        fsutil::remove_tree(&trash)?;
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
                report.blobs_removed += 1;
                report.bytes_freed += meta.blocks() * 512;
                if !dry {
                    let _ = std::fs::remove_file(blob.path());
                }
            }
        }
    }

    // Leftovers in .tmp (dead builds; live ones hold their lock) and orphaned metadata.
    let tmp = store.dir.join(TMP);
    for entry in fs_err::read_dir(&tmp).ctx("list", &tmp)? {
        let entry = entry.ctx("list", &tmp)?;
        let path = entry.path();
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            let lock_path = path.join(".lock");
            if let Ok(file) = std::fs::File::open(&lock_path) {
                if !try_lock_file(&file, &lock_path, LockKind::Shared)? {
                    continue;
                }
            }
        }
        report.leftovers_removed += 1;
        if !dry {
            if let Err(err) = fsutil::remove_tree(&path) {
                report
                    .warnings
                    .push(format!("could not remove {}: {err}", path.display()));
            }
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
            Ok(name) => !store.path_of(&name).is_dir(),
            Err(_) => true,
        };
        if orphan {
            report.leftovers_removed += 1;
            if !dry {
                let _ = std::fs::remove_file(entry.path());
            }
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
            if bytes.starts_with(b".slot-")
                || bytes.starts_with(b".new-")
                || bytes.starts_with(b".lease-")
            {
                report.leftovers_removed += 1;
                if !dry {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
    }
    if !dry && store.flush {
        fsutil::fsync_dir(&store.dir)?;
    }
    Ok(report)
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

/// Allocated bytes of the files under `root` whose last link is the one in the tree
/// (`nlink <= 1 + extra`).
fn freed_bytes(root: &Path, extra: u64) -> u64 {
    let mut total = 0;
    for entry in walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .flatten()
    {
        if let Ok(meta) = entry.metadata() {
            if meta.is_file() && meta.nlink() <= 1 + extra {
                total += meta.blocks() * 512;
            }
        }
    }
    total
}
