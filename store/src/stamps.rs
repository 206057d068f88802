//! Blob identity stamps and the per-handle caches that spare system calls while linking.
//!
//! Owns [`BlobStamp`] (what a verified blob's inode looks like), the user's stamp table
//! `stamps/<uid>/table` and [`LinkCaches`]. Stamps are one append-only table per user, not a file
//! per blob: a handle reads it once, keeps what it records in memory and appends those lines in
//! one write when a publication ends (and when the handle is dropped); the last line of a blob
//! wins, and the table is rewritten without the superseded lines when they outnumber the live
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
    pub(crate) stamps: std::sync::Mutex<StampState>,
    pub(crate) trusted_paths:
        std::sync::Mutex<std::collections::HashMap<crate::names::StorePathName, bool>>,
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
