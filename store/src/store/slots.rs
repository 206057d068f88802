//! Slots: the documented `cache/<cache_key> -> store/v1/<name>` symlinks, their [`SlotState`],
//! verification against a tree hash and the `.rebuildable` markers.
//!
//! Must never point a slot at anything but a published store path.

use std::path::{Path, PathBuf};

use super::*;
use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self, unique_name};
use crate::lock::LockKind;
use crate::names::{StorePath, StorePathName};
use crate::tree_hash::{matches_tree_hash, Match, TreeHash};

/// What a slot (`cache/<cache_key>`) holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotState {
    /// No slot.
    Missing,
    /// A link to a store path that exists.
    Linked(StorePath),
    /// A link whose store path is gone (collected or removed by repair): fetch again.
    Dangling(PathBuf),
    /// A link to something outside this store.
    Foreign(PathBuf),
    /// A plain directory, as agentpack 0.4 and earlier extracted it (imported on verified read).
    LegacyDir(PathBuf),
}

/// What [`Store::inspect_slot`] found in a slot, compared with the lock's hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotInspection {
    /// A link to a published store path that hashes to the expected tree hash (the legacy rule
    /// counts), or, with nothing to compare (`verified` false), a link to a published path.
    Usable { path: StorePath, verified: bool },
    /// A link to a published store path whose tree hashes to `actual`.
    Mismatch { path: StorePath, actual: TreeHash },
    /// Nothing usable without a write: missing, dangling, foreign, or a legacy directory (which
    /// a verified read imports; see [`Store::verified_slot`]).
    Unusable(SlotState),
}

impl Store {
    /// What slot `cache_key` holds, compared with `expected` when given (the tree re-hashed):
    /// changes nothing and registers no root, so a read-only handle may use it.
    pub fn inspect_slot(
        &self,
        cache_key: &str,
        expected: Option<&TreeHash>,
    ) -> Result<SlotInspection> {
        let path = match self.slot_state(cache_key)? {
            SlotState::Linked(path) => path,
            other => return Ok(SlotInspection::Unusable(other)),
        };
        let Some(expected) = expected else {
            return Ok(SlotInspection::Usable {
                path,
                verified: false,
            });
        };
        Ok(match Self::rehash_slot(cache_key, &path, expected)? {
            Match::Exact | Match::Legacy => SlotInspection::Usable {
                path,
                verified: true,
            },
            Match::Mismatch { actual } => SlotInspection::Mismatch { path, actual },
        })
    }

    pub(super) fn slot_path(&self, cache_key: &str) -> Result<PathBuf> {
        let bad = cache_key.is_empty()
            || cache_key.starts_with('.')
            || cache_key.contains(['/', '\0'])
            || cache_key == "store"
            || cache_key == "db.reddb";
        if bad {
            return Err(StoreError::InvalidCacheKey {
                found: cache_key.to_owned(),
            });
        }
        Ok(self.cache_dir.join(cache_key))
    }

    /// What `cache/<cache_key>` holds.
    pub fn slot_state(&self, cache_key: &str) -> Result<SlotState> {
        let slot = self.slot_path(cache_key)?;
        let meta = match std::fs::symlink_metadata(&slot) {
            Ok(meta) => meta,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Ok(SlotState::Missing)
            }
            Err(err) => return Err(StoreError::io("inspect", &slot, err)),
        };
        if meta.is_dir() {
            return Ok(SlotState::LegacyDir(slot));
        }
        if !meta.file_type().is_symlink() {
            return Ok(SlotState::Foreign(slot));
        }
        let target = fs_err::read_link(&slot).ctx("read link", &slot)?;
        let prefix = Path::new("store").join(LAYOUT_VERSION_DIR);
        let name = target
            .strip_prefix(&prefix)
            .ok()
            .and_then(|rest| rest.to_str())
            .and_then(|rest| rest.parse::<StorePathName>().ok());
        match name {
            Some(name) => match self.published(&name) {
                Some(path) => Ok(SlotState::Linked(path)),
                None => Ok(SlotState::Dangling(target)),
            },
            None => Ok(SlotState::Foreign(target)),
        }
    }

    /// The store path in slot `cache_key`, unverified (registered as a temp root).
    pub fn slot(&self, cache_key: &str) -> Result<Option<StorePath>> {
        match self.slot_state(cache_key)? {
            SlotState::Linked(path) => {
                self.add_temp_root(&path)?;
                Ok(Some(path))
            }
            _ => Ok(None),
        }
    }

    /// Makes every later slot check of this handle re-hash its store path, whatever this user's
    /// blob stamps say (`sync --verify-only` and `--repair` look for damage, which a stamp could
    /// only hide if it lied).
    pub fn verify_slots_in_full(&self) {
        self.full_verify
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// [`Store::rehash_slot`], unless the store path is still the tree this user published or
    /// verified ([`Store::unchanged_since_verified`]: its entries and each file's blob stamp, no
    /// file read) and [`Store::verify_slots_in_full`] was not asked for.
    fn rehash_slot_unless_stamped(
        &self,
        cache_key: &str,
        path: &StorePath,
        expected: &TreeHash,
    ) -> Result<Match> {
        let full = self.full_verify.load(std::sync::atomic::Ordering::Relaxed);
        if !full && !self.read_only && self.unchanged_since_verified(path, expected) {
            tracing::trace!(cache_key, path = %path.path().display(), "a cache slot unchanged since it was verified (its files are their blobs' stamped inodes)");
            return Ok(Match::Exact);
        }
        let stamps = if self.read_only {
            Vec::new()
        } else {
            self.stamps_before_hashing(path, expected)
        };
        let found = Self::rehash_slot(cache_key, path, expected)?;
        if found == Match::Exact {
            // Verified: the next check of an unchanged tree needs no hash (recorded with the
            // publication's stamps, or when the handle is dropped).
            for (id, exec, stamp) in stamps {
                self.record_stamp(&id, exec, stamp);
            }
        }
        Ok(found)
    }

    /// Re-hashes the store path a slot links to against the lock's hash (traced: `-vv` shows each).
    pub(super) fn rehash_slot(
        cache_key: &str,
        path: &StorePath,
        expected: &TreeHash,
    ) -> Result<Match> {
        tracing::trace!(cache_key, path = %path.path().display(), "re-hashing a cache slot against the lock");
        matches_tree_hash(path.path(), expected)
    }

    /// The store path in slot `cache_key`, after recomputing its tree hash and comparing it with
    /// `expected` (the legacy rule counts as a match). A mismatch is
    /// [`StoreError::ContentHashMismatch`] naming the slot; nothing is changed. A legacy slot directory
    /// that matches is imported into the store and the slot becomes a link (a read-only handle
    /// refuses that with [`StoreError::ReadOnly`]; see [`Store::inspect_slot`]).
    ///
    /// A store path of this user named by `expected` is not hashed again while its entries are
    /// its manifest's and its files are the blob inodes this user stamped ([`crate::stamps`]: a
    /// write moves a file's ctime, a replaced file is another inode), unless
    /// [`Store::verify_slots_in_full`].
    pub fn verified_slot(&self, cache_key: &str, expected: &TreeHash) -> Result<Option<StorePath>> {
        let slot = self.slot_path(cache_key)?;
        match self.slot_state(cache_key)? {
            SlotState::Linked(path) => {
                match self.rehash_slot_unless_stamped(cache_key, &path, expected)? {
                    Match::Exact | Match::Legacy => {
                        self.add_temp_root(&path)?;
                        Ok(Some(path))
                    }
                    Match::Mismatch { actual } => Err(StoreError::ContentHashMismatch {
                        expected: *expected,
                        actual,
                        path: slot,
                    }),
                }
            }
            SlotState::LegacyDir(dir) => match matches_tree_hash(&dir, expected)? {
                Match::Exact | Match::Legacy => {
                    let label = &cache_key[..cache_key.len().min(16)];
                    let path = self.publish_tree(&dir, label, Some(expected))?;
                    self.set_slot(cache_key, &path)?;
                    Ok(Some(path))
                }
                Match::Mismatch { actual } => Err(StoreError::ContentHashMismatch {
                    expected: *expected,
                    actual,
                    path: slot,
                }),
            },
            SlotState::Missing | SlotState::Dangling(_) | SlotState::Foreign(_) => Ok(None),
        }
    }

    /// Marks slot `cache_key` as rebuildable: its content is a copy agentpack makes again from a
    /// source on disk (a path dependency, a `local/` mirror package) on every lock and sync, so the
    /// slot is not a GC root. What a generation uses stays through the generation's references; older
    /// copies become collectable, and GC then removes the slot too.
    pub fn mark_slot_rebuildable(&self, cache_key: &str) -> Result<()> {
        self.slot_path(cache_key)?;
        let dir = self.cache_dir.join(REBUILDABLE_DIR);
        self.refuse_if_read_only("mark a slot rebuildable in", &dir)?;
        if !dir.is_dir() {
            // Every user of a shared `cache/` marks slots here: shared like the store's directories.
            let mode = if fsutil::group_shared(&self.cache_dir) {
                0o755 | fsutil::SHARED_DIR_BITS
            } else {
                0o755
            };
            create_dir_if_missing(&dir, Some(mode))?;
        }
        let marker = dir.join(cache_key);
        if std::fs::symlink_metadata(&marker).is_err() {
            fs_err::write(&marker, b"").ctx("write", &marker)?;
        }
        Ok(())
    }

    /// Whether slot `cache_key` was marked with [`Store::mark_slot_rebuildable`].
    pub(crate) fn slot_is_rebuildable(&self, cache_key: &str) -> bool {
        self.cache_dir
            .join(REBUILDABLE_DIR)
            .join(cache_key)
            .is_file()
    }

    /// The file marking slot `cache_key` rebuildable.
    pub(crate) fn rebuildable_marker(&self, cache_key: &str) -> PathBuf {
        self.cache_dir.join(REBUILDABLE_DIR).join(cache_key)
    }

    /// Point slot `cache_key` at `path` atomically (temp symlink + rename). A legacy slot directory is
    /// moved aside and removed.
    pub fn set_slot(&self, cache_key: &str, path: &StorePath) -> Result<()> {
        let _lock = self.lock(LockKind::Shared)?;
        if self.link_slot(cache_key, path)? {
            self.flush_slots()?;
        }
        Ok(())
    }

    /// [`Store::set_slot`] for every `(cache_key, path)` of `slots`, under one lock and with one
    /// flush of the cache directory for all of them (a batch publication's slots). One result per
    /// entry, in order; the outer error is the lock's or the flush's: then no slot is known durable.
    pub fn set_slots(&self, slots: &[(&str, &StorePath)]) -> Result<Vec<Result<()>>> {
        let _lock = self.lock(LockKind::Shared)?;
        let mut changed = false;
        let results = slots
            .iter()
            .map(|(cache_key, path)| {
                changed |= self.link_slot(cache_key, path)?;
                Ok(())
            })
            .collect();
        if changed {
            self.flush_slots()?;
        }
        Ok(results)
    }

    /// Flushes the cache directory (where the slot links are) when this store flushes.
    fn flush_slots(&self) -> Result<()> {
        if self.flush {
            fsutil::fsync_dir(&self.cache_dir)?;
        }
        Ok(())
    }

    /// Points slot `cache_key` at `path` without flushing, under the caller's lock; `false` when it
    /// already pointed there (nothing written).
    fn link_slot(&self, cache_key: &str, path: &StorePath) -> Result<bool> {
        let slot = self.slot_path(cache_key)?;
        let target = Path::new("store")
            .join(LAYOUT_VERSION_DIR)
            .join(path.name().as_str());
        if std::fs::read_link(&slot).is_ok_and(|existing| existing == target) {
            // Already so (possibly another user's link, which this user could not replace).
            return Ok(false);
        }
        let link = |slot: &Path| {
            agentpack_fs::write_symlink(
                &target,
                slot,
                agentpack_fs::TempName::Prefix(".slot-"),
                agentpack_fs::Durability::None,
            )
        };
        if let Err(err) = link(&slot) {
            let is_dir = std::fs::symlink_metadata(&slot)
                .map(|m| m.is_dir())
                .unwrap_or(false);
            if !is_dir {
                // Another member's link under this key (a shared store's sticky `cache/`): say
                // whose it is, not that the store is unwritable.
                let owner = fsutil::owner_of(&slot);
                if owner.is_some_and(|owner| !fsutil::may_remove(owner)) {
                    return Err(StoreError::ForeignObject {
                        what: "cache slot",
                        path: slot,
                        owner,
                    });
                }
                return Err(err.into());
            }
            let aside = self.tmp_dir().join(unique_name("legacy-slot-"));
            fs_err::rename(&slot, &aside).ctx("move aside", &slot)?;
            link(&slot)?;
            fsutil::remove_tree(&aside)?;
        }
        Ok(true)
    }

    /// Remove slot `cache_key` (a link; a legacy directory is removed too). Missing is fine.
    pub fn remove_slot(&self, cache_key: &str) -> Result<()> {
        let slot = self.slot_path(cache_key)?;
        self.refuse_if_read_only("remove the slot", &slot)?;
        fsutil::remove_tree(&slot)
    }

    /// The name of every entry of the cache directory that may be a slot (not the store, not a
    /// dot-file such as `.rebuildable`), whatever it holds.
    pub(crate) fn slot_keys(&self) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        for entry in fs_err::read_dir(&self.cache_dir).ctx("list", &self.cache_dir)? {
            let entry = entry.ctx("list", &self.cache_dir)?;
            let Some(key) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if !key.starts_with('.') && key != "store" {
                keys.push(key);
            }
        }
        Ok(keys)
    }

    /// Every slot that links into this store: `(cache_key, store path name)`.
    pub fn slots(&self) -> Result<Vec<(String, StorePathName)>> {
        let mut out = Vec::new();
        for key in self.slot_keys()? {
            let Ok(target) = std::fs::read_link(self.cache_dir.join(&key)) else {
                continue;
            };
            let prefix = Path::new("store").join(LAYOUT_VERSION_DIR);
            if let Some(name) = target
                .strip_prefix(&prefix)
                .ok()
                .and_then(|r| r.to_str())
                .and_then(|r| r.parse().ok())
            {
                out.push((key, name));
            }
        }
        out.sort();
        Ok(out)
    }
}
