//! Blob identity stamps and the per-handle caches that spare system calls while linking.
//!
//! Owns [`BlobStamp`] (what a verified blob's inode looks like), the user's stamp table
//! `stamps/<uid>/table` and [`LinkCaches`] (which counts how often threads wait for its stamp
//! lock, logged at debug level when the handle goes). Stamps are one append-only table per user,
//! not a file per blob: a handle reads it once, keeps what it records in memory and appends those
//! lines in one write when a publication ends (and when the handle is dropped); the last line of a
//! blob wins, and the table is rewritten without the superseded lines when they outnumber the live
//! ones. A lost or stale line only costs one re-hash. Never decides whether a blob is intact
//! (`publish::blob` does) and never writes anything but the table.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use crate::fsutil::{self, unique_name};

/// What a blob's inode looked like right after it was last verified (hashed) or linked by this user:
/// size, mtime, ctime (both to the nanosecond) and inode number. A write changes mtime and ctime;
/// `touch` can put mtime back but never ctime; a replaced blob has another inode. `link(2)` also
/// moves ctime (the link count changes), so every link this user makes records the stamp again;
/// a link someone else made only costs one re-hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlobStamp {
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    ino: u64,
}

impl BlobStamp {
    pub(crate) fn of(meta: &std::fs::Metadata) -> BlobStamp {
        use std::os::unix::fs::MetadataExt as _;
        BlobStamp {
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
        }
    }

    /// Whether `self` is an earlier view of the inode `recorded` describes: the same inode, size
    /// and mtime, an earlier ctime. Links of one blob placed in parallel record their stamps in any
    /// order; each is taken after its own link, so the latest ctime is what the inode looks like
    /// once they are all made, and an earlier view must not replace it.
    pub(crate) fn is_earlier_view_of(&self, recorded: &BlobStamp) -> bool {
        self.ino == recorded.ino
            && self.size == recorded.size
            && self.mtime == recorded.mtime
            && self.ctime < recorded.ctime
    }

    pub(crate) fn to_text(self) -> String {
        format!(
            "{} {} {} {} {} {}\n",
            self.size, self.mtime.0, self.mtime.1, self.ctime.0, self.ctime.1, self.ino
        )
    }

    pub(crate) fn parse(text: &str) -> Option<BlobStamp> {
        let mut numbers = text.split_ascii_whitespace();
        let mut next = || numbers.next()?.parse::<i64>().ok();
        let (size, m0, m1, c0, c1, ino) = (next()?, next()?, next()?, next()?, next()?, next()?);
        Some(BlobStamp {
            size: u64::try_from(size).ok()?,
            mtime: (m0, m1),
            ctime: (c0, c1),
            ino: u64::try_from(ino).ok()?,
        })
    }
}

/// One line of the stamp table: the blob's file name, then its stamp.
fn table_line(name: &str, stamp: BlobStamp) -> String {
    format!("{name} {}", stamp.to_text())
}

/// The file name of a user's stamp table inside `stamps/<uid>/`.
pub(crate) const STAMP_TABLE: &str = "table";

/// What one store handle remembers to spare system calls while linking: the stamp table (loaded
/// once, recorded stamps kept until [`Store::flush_stamps`] appends them) and which store paths'
/// trees and metadata this user may trust (one `lstat` each per handle, not per file).
#[derive(Debug, Default)]
pub(crate) struct LinkCaches {
    stamps: std::sync::Mutex<StampState>,
    /// How often, and how long, [`LinkCaches::stamps`] waited for another thread to let go of the
    /// stamp state (see docs/src/benchmarks-store.md for what parallel publications measure).
    stamp_waits: LockWaits,
    pub(crate) trusted_paths:
        std::sync::Mutex<std::collections::HashMap<crate::names::StorePathName, bool>>,
}

/// Waits for a lock: how many times it was busy, and the nanoseconds spent waiting for it. Only
/// the contended path counts (an uncontended lock costs nothing more).
#[derive(Debug, Default)]
pub(crate) struct LockWaits {
    waits: std::sync::atomic::AtomicU64,
    waited_nanos: std::sync::atomic::AtomicU64,
}

impl LockWaits {
    /// (times the lock was busy, time spent waiting for it) so far.
    pub(crate) fn get(&self) -> (u64, std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.waits.load(Relaxed),
            std::time::Duration::from_nanos(self.waited_nanos.load(Relaxed)),
        )
    }
}

impl LinkCaches {
    /// The stamp state, locked (`None`: a thread panicked holding it; stamps are best effort).
    pub(crate) fn stamps(&self) -> Option<std::sync::MutexGuard<'_, StampState>> {
        use std::sync::atomic::Ordering::Relaxed;
        match self.stamps.try_lock() {
            Ok(state) => Some(state),
            Err(std::sync::TryLockError::Poisoned(_)) => None,
            Err(std::sync::TryLockError::WouldBlock) => {
                let started = std::time::Instant::now();
                let state = self.stamps.lock().ok();
                let waited = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
                self.stamp_waits.waits.fetch_add(1, Relaxed);
                self.stamp_waits.waited_nanos.fetch_add(waited, Relaxed);
                state
            }
        }
    }

    /// How often and how long [`LinkCaches::stamps`] waited so far.
    #[cfg(test)]
    pub(crate) fn stamp_waits(&self) -> &LockWaits {
        &self.stamp_waits
    }
}

#[derive(Debug, Default)]
pub(crate) struct StampState {
    /// `stamps/<uid>/table`, once loaded (`None`: not read yet).
    pub(crate) table: Option<PathBuf>,
    /// The stamps by blob file name (`<hex>` or `<hex>x`).
    pub(crate) stamps: std::collections::HashMap<String, BlobStamp>,
    /// Recorded by this handle and not yet appended.
    pub(crate) dirty: Vec<(String, BlobStamp)>,
    /// Lines the table file held when read plus those appended since.
    lines: usize,
    /// No table file existed when it was read (the old per-blob stamps may still be there).
    fresh: bool,
}

impl Drop for LinkCaches {
    fn drop(&mut self) {
        let (waits, waited) = self.stamp_waits.get();
        if waits > 0 {
            tracing::debug!(
                waits,
                ?waited,
                "threads of this store handle waited for its stamp table"
            );
        }
        if let Ok(state) = self.stamps.get_mut() {
            let _ = state.append_dirty();
        }
    }
}

impl StampState {
    /// Writes the table anew with one line per stamp kept (temp file, rename). Best effort.
    pub(crate) fn rewrite(&mut self) -> std::io::Result<()> {
        let Some(table) = self.table.clone() else {
            return Ok(());
        };
        self.dirty.clear();
        let text: String = self
            .stamps
            .iter()
            .map(|(name, stamp)| table_line(name, *stamp))
            .collect();
        let temp = table.with_file_name(unique_name(".table-"));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .and_then(|mut file| file.write_all(text.as_bytes()))
            .and_then(|()| std::fs::rename(&temp, &table));
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        self.lines = self.stamps.len();
        written
    }

    /// Keeps only the stamps of the blob files `present` names (GC's listing of `blobs/`, less
    /// what it removed; nothing is looked up on disk); `true` when any went.
    pub(crate) fn retain_present(&mut self, present: &std::collections::HashSet<String>) -> bool {
        let before = self.stamps.len();
        self.stamps.retain(|name, _| present.contains(name));
        self.stamps.len() != before
    }

    pub(crate) fn load(&mut self, table: PathBuf) {
        let text = std::fs::read_to_string(&table).ok();
        // A table this user does not own is not theirs to trust (it lives in their 0700 directory,
        // so only root could have put it there).
        let owned = text.is_some() && fsutil::owner_of(&table) == Some(fsutil::euid());
        self.fresh = text.is_none();
        if let Some(text) = text.filter(|_| owned) {
            for line in text.lines() {
                self.lines += 1;
                if let Some((name, stamp)) = line.split_once(' ') {
                    if let Some(stamp) = BlobStamp::parse(stamp) {
                        self.stamps.insert(name.to_owned(), stamp);
                    }
                }
            }
        }
        self.table = Some(table);
    }

    /// Appends the stamps recorded since the last append in one write (rewriting the table when
    /// superseded lines outnumber live ones). Best effort.
    pub(crate) fn append_dirty(&mut self) -> std::io::Result<()> {
        let Some(table) = self.table.clone() else {
            return Ok(());
        };
        if self.dirty.is_empty() {
            return Ok(());
        }
        let dirty = std::mem::take(&mut self.dirty);
        if self.lines + dirty.len() > 2 * self.stamps.len() + 1024 {
            return self.rewrite();
        }
        let text: String = dirty
            .iter()
            .map(|(name, stamp)| table_line(name, *stamp))
            .collect();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&table)?;
        file.write_all(text.as_bytes())?;
        self.lines += dirty.len();
        if self.fresh {
            self.fresh = false;
            // The per-blob stamp files of earlier versions: superseded by the table.
            if let Some(mine) = table.parent() {
                for entry in std::fs::read_dir(mine).into_iter().flatten().flatten() {
                    let name = entry.file_name();
                    if name.len() == 2 && entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                        let _ = std::fs::remove_dir_all(entry.path());
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn stamp(size: u64) -> BlobStamp {
        BlobStamp {
            size,
            mtime: (1, 2),
            ctime: (3, 4),
            ino: 5,
        }
    }

    #[test]
    fn an_earlier_view_of_the_recorded_inode_never_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(
            &dir.path().join("cache"),
            crate::StoreOptions {
                flush: false,
                ..crate::StoreOptions::default()
            },
        )
        .unwrap();
        let id = crate::BlobId::of(b"linked in parallel\n");
        let earlier = stamp(7);
        let later = BlobStamp {
            ctime: (3, 9),
            ..earlier
        };
        assert!(earlier.is_earlier_view_of(&later));
        assert!(!later.is_earlier_view_of(&earlier));
        let written = BlobStamp {
            mtime: (1, 3),
            ..earlier
        };
        assert!(
            !written.is_earlier_view_of(&later),
            "another mtime is another state, not an earlier view"
        );

        // Two links of one blob placed in parallel record their stamps out of order.
        store.record_stamp(&id, false, later);
        store.record_stamp(&id, false, earlier);
        assert_eq!(store.recorded_stamp(&id, false), Some(later));
        // A new state of the inode (a write moved mtime) is recorded as ever.
        store.record_stamp(&id, false, written);
        assert_eq!(store.recorded_stamp(&id, false), Some(written));
    }

    /// Publications from `threads` threads sharing one handle, as parallel batch builds do:
    /// `batches` batches of `trees` new trees of `files` files each (copied, hashed, linked), then as
    /// many generations of `files` known blobs (linked only, where the stamp lock weighs most).
    /// Returns (stamp lock waits, time waited, wall time, files placed).
    fn publish_in_parallel(
        store: &crate::Store,
        root: &std::path::Path,
        (threads, batches, trees, files): (usize, usize, usize, usize),
    ) -> (u64, std::time::Duration, std::time::Duration, usize) {
        use crate::{PackageTree, PlannedFile, Source, StorePathName};
        let sources: Vec<Vec<std::path::PathBuf>> = (0..threads)
            .map(|thread| {
                (0..batches * trees)
                    .map(|tree| {
                        let dir = root.join(format!("src-{thread}-{tree}"));
                        std::fs::create_dir_all(&dir).unwrap();
                        for file in 0..files {
                            let text = format!("{thread} {tree} {file}\n");
                            std::fs::write(dir.join(format!("f{file}.md")), text).unwrap();
                        }
                        dir
                    })
                    .collect()
            })
            .collect();
        let started = std::time::Instant::now();
        std::thread::scope(|scope| {
            for (thread, dirs) in sources.iter().enumerate() {
                scope.spawn(move || {
                    for batch in dirs.chunks(trees) {
                        let trees: Vec<PackageTree<'_>> = batch
                            .iter()
                            .map(|dir| PackageTree::new(dir, "pkg", None))
                            .collect();
                        for published in store.publish_trees(&trees).unwrap() {
                            published.unwrap();
                        }
                    }
                    let blobs: Vec<crate::names::BlobId> = (0..files)
                        .map(|file| {
                            let text = format!("{thread} 0 {file}\n");
                            store.import_bytes(text.as_bytes(), false).unwrap().unwrap()
                        })
                        .collect();
                    for generation in 0..batches * trees {
                        let name = StorePathName::from_inputs(
                            format!("{thread} {generation}").as_bytes(),
                            "generation",
                        );
                        let plan: Vec<PlannedFile> = blobs
                            .iter()
                            .enumerate()
                            .map(|(file, blob)| {
                                PlannedFile::new(format!("f{file}.md"), Source::Blob(*blob), false)
                            })
                            .collect();
                        store.publish_files(&name, &plan, &[]).unwrap();
                    }
                });
            }
        });
        let wall = started.elapsed();
        let (waits, waited) = store.link_caches.stamp_waits().get();
        (waits, waited, wall, 2 * threads * batches * trees * files)
    }

    #[test]
    fn parallel_batch_publications_keep_every_stamp_and_count_their_waits_for_the_table() {
        // AGENTPACK_STAMP_LOCK_SCALE=threads,batches,trees,files measures a bigger case (the
        // figure in docs/src/benchmarks-store.md); the default keeps the test fast.
        let scale = std::env::var("AGENTPACK_STAMP_LOCK_SCALE")
            .ok()
            .and_then(|text| {
                let numbers: Vec<usize> = text.split(',').filter_map(|n| n.parse().ok()).collect();
                (numbers.len() == 4).then(|| (numbers[0], numbers[1], numbers[2], numbers[3]))
            })
            .unwrap_or((4, 2, 4, 40));
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(
            &dir.path().join("cache"),
            crate::StoreOptions {
                link_mode: Some(crate::LinkMode::Hardlink),
                flush: false,
                ..crate::StoreOptions::default()
            },
        )
        .unwrap();
        let (waits, waited, wall, placed) = publish_in_parallel(&store, dir.path(), scale);
        let threads = scale.0;
        println!(
            "stamp lock, {scale:?} (threads, batches, trees, files): {placed} files placed in {wall:?}; \
             {waits} waits ({:.2} per 1,000 files), {waited:?} waited in all ({:.3}% of the threads' time)",
            waits as f64 * 1000.0 / placed as f64,
            waited.as_secs_f64() * 100.0 / (wall.as_secs_f64() * threads as f64)
        );
        // Every blob the threads linked has its stamp, each once in the table after the flush.
        store.flush_stamps();
        let state = store.link_caches.stamps().unwrap();
        let blobs: Vec<String> = store
            .blob_files()
            .unwrap()
            .into_iter()
            .map(|(_, name)| name)
            .collect();
        assert_eq!(
            blobs.len(),
            threads * scale.1 * scale.2 * scale.3,
            "distinct contents"
        );
        for blob in &blobs {
            assert!(state.stamps.contains_key(blob), "no stamp for {blob}");
        }
        let table = std::fs::read_to_string(state.table.as_ref().unwrap()).unwrap();
        let mut names: Vec<&str> = table
            .lines()
            .filter_map(|line| line.split(' ').next())
            .collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), state.stamps.len(), "one live line per stamp");
        assert!(waited <= wall * u32::try_from(threads).unwrap());
    }

    #[test]
    fn a_busy_stamp_lock_counts_one_wait_and_a_free_one_none() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let caches = LinkCaches::default();
        drop(caches.stamps().unwrap());
        assert_eq!(caches.stamp_waits().get().0, 0, "a free lock is no wait");
        let held = caches.stamps().unwrap();
        let started = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| {
                started.store(true, Ordering::SeqCst);
                caches.stamps().is_some()
            });
            while !started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            // Long enough that the waiter reaches the lock before it is let go, even on a loaded
            // machine (a waiter that came late would find it free and count no wait).
            std::thread::sleep(std::time::Duration::from_millis(500));
            drop(held);
            assert!(waiter.join().unwrap());
        });
        let (waits, waited) = caches.stamp_waits().get();
        assert_eq!(waits, 1);
        assert!(waited > std::time::Duration::ZERO);
    }

    #[test]
    fn gc_keeps_exactly_the_stamps_of_the_blobs_its_listing_names() {
        // No blob exists on disk here: a sweep that looked blobs up again would drop every stamp.
        let mut state = StampState::default();
        for name in ["aa01", "bb02x", "cc03"] {
            state.stamps.insert(name.into(), stamp(1));
        }
        let listed: std::collections::HashSet<String> =
            ["aa01", "cc03", "dd04"].map(String::from).into();
        assert!(state.retain_present(&listed));
        let mut kept: Vec<&str> = state.stamps.keys().map(String::as_str).collect();
        kept.sort_unstable();
        assert_eq!(kept, ["aa01", "cc03"]);
        assert!(!state.retain_present(&listed), "nothing more to drop");
    }

    #[test]
    fn the_table_is_appended_once_per_flush_and_the_last_line_wins() {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("table");
        // A stamp directory of the per-blob layout goes when the first table is written.
        std::fs::create_dir_all(dir.path().join("ab")).unwrap();
        std::fs::write(dir.path().join("ab/abcd"), "1 2 3 4 5 6\n").unwrap();
        let mut first = StampState::default();
        first.load(table.clone());
        for (name, size) in [("aa", 1), ("bb", 2), ("aa", 3)] {
            first.stamps.insert(name.into(), stamp(size));
            first.dirty.push((name.into(), stamp(size)));
        }
        first.append_dirty().unwrap();
        assert!(first.dirty.is_empty());
        assert!(!dir.path().join("ab").exists());
        assert_eq!(std::fs::read_to_string(&table).unwrap().lines().count(), 3);

        let mut second = StampState::default();
        second.load(table.clone());
        assert_eq!(second.stamps.get("aa"), Some(&stamp(3)));
        assert_eq!(second.stamps.get("bb"), Some(&stamp(2)));
        // Superseded lines beyond twice the live ones (plus a margin) are compacted away.
        for round in 0..1100 {
            second.stamps.insert("aa".into(), stamp(round));
            second.dirty.push(("aa".into(), stamp(round)));
        }
        second.append_dirty().unwrap();
        let text = std::fs::read_to_string(&table).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        let mut third = StampState::default();
        third.load(table);
        assert_eq!(third.stamps.get("aa"), Some(&stamp(1099)));
    }
}
