//! What GC is asked to do ([`GcOptions`]) and what it reports back ([`GcReport`], [`RootCounts`],
//! [`NotRemoved`]).
//!
//! Pure data: must never touch the store.

use std::path::PathBuf;
use std::time::Duration;

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
    /// whose last link went and of every directory removed, less what the store database grew by
    /// while GC recorded what it found (when the index lives inside the store), so it is the drop `du`
    /// of the store sees.
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
