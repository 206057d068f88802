//! Content-addressed package trees: [`Store::publish_tree`] and [`Store::repair_tree`].
//!
//! Owns: building a package in `.tmp/`, checking it against the lock's tree hash, healing damaged
//! blobs from a verified source, and accepting another user's copy only once it verifies. Must never
//! publish a tree whose hash does not match `expected`.

use std::path::Path;

use super::*;
use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self, unique_name};
use crate::link::create_empty;
use crate::lock::LockKind;
use crate::meta::{Entry, PathKind};
use crate::names::{StorePath, StorePathName};
use crate::store::Store;
use crate::tree_hash::{hash_tree, matches_tree_hash, Match, TreeHash};

impl Store {
    /// A package another user published is re-hashed before this handle first uses it: its name says
    /// which tree hash it must have.
    pub(super) fn verify_foreign_package(
        &self,
        existing: &StorePath,
        expected: &TreeHash,
    ) -> Result<()> {
        if self.trusted(existing.path())
            || self
                .verified
                .lock()
                .is_ok_and(|verified| verified.contains(existing.name()))
        {
            return Ok(());
        }
        let actual = hash_tree(existing.path())?;
        if actual != *expected {
            return Err(StoreError::TamperedObject {
                what: "store path",
                path: existing.path().to_path_buf(),
                owner: fsutil::owner_of(existing.path()),
                detail: format!("its tree hash is {actual}, not {expected}"),
            });
        }
        if let Ok(mut verified) = self.verified.lock() {
            verified.insert(existing.name().clone());
        }
        Ok(())
    }

    /// Publish the package tree at `src` (regular files, symlinks and directories only) under
    /// `<first 32 hex of its sha256-tree-v1>-<label>`. With `expected`, a tree whose hash matches
    /// neither exactly nor by the legacy rule is refused with [`StoreError::ContentHashMismatch`] and
    /// nothing is published. The hash is taken over the copy in the store, i.e. over exactly the bytes
    /// that get published. Execute bits are kept (`x` records).
    pub fn publish_tree(
        &self,
        src: &Path,
        label: &str,
        expected: Option<&TreeHash>,
    ) -> Result<StorePath> {
        self.publish_package(src, label, expected, false)
    }

    /// Like [`Store::publish_tree`], but when a store path of that content already exists and no longer
    /// matches its hash (changed in place), the freshly imported and verified tree replaces it
    /// atomically (`rename` exchange). This is `sync --repair`: download again, verify, then replace.
    pub fn repair_tree(
        &self,
        src: &Path,
        label: &str,
        expected: Option<&TreeHash>,
    ) -> Result<StorePath> {
        self.publish_package(src, label, expected, true)
    }

    pub(super) fn publish_package(
        &self,
        src: &Path,
        label: &str,
        expected: Option<&TreeHash>,
        replace_damaged: bool,
    ) -> Result<StorePath> {
        let _lock = self.lock(LockKind::Shared)?;
        let (base, _build_lock) = self.new_build_dir("pkg-")?;
        let out = base.join("out");
        let result = (|| {
            let (entries, actual) = self.build_package(src, &out, expected, replace_damaged)?;
            let name = StorePathName::from_tree_hash(&actual, label);
            if let Some(existing) = self.published(&name) {
                if !replace_damaged {
                    self.verify_foreign_package(&existing, &actual)?;
                }
                if replace_damaged && hash_tree(existing.path())? != actual {
                    crate::verify::replace_store_path(self, &out, existing.path())?;
                    let meta = new_meta(&name, PathKind::Package, Some(actual), &[], entries);
                    let meta_path = self.meta_path(name.as_str());
                    agentpack_fs::write_file(&meta_path, &meta.to_bytes(), &self.meta_write())?;
                }
                return Ok(existing);
            }
            let meta = new_meta(&name, PathKind::Package, Some(actual), &[], entries);
            self.commit(&base, &out, &name, meta)
        })();
        let _ = fsutil::remove_tree(&base);
        let path = result?;
        self.add_temp_root(&path)?;
        Ok(path)
    }

    /// Import `src` into `out` and check the result. If the built tree does not match but `src` does,
    /// a blob it was linked from was changed in place: restore those blobs from `src` and build again.
    pub(super) fn build_package(
        &self,
        src: &Path,
        out: &Path,
        expected: Option<&TreeHash>,
        always_check_source: bool,
    ) -> Result<(Vec<Entry>, TreeHash)> {
        let entries = self.import_tree(src, out)?;
        let actual = hash_tree(out)?;
        let matches = |hash: &TreeHash| -> Result<bool> {
            Ok(*hash == actual || !matches!(matches_tree_hash(out, hash)?, Match::Mismatch { .. }))
        };
        let suspicious = match expected {
            Some(expected) => !matches(expected)?,
            None => always_check_source,
        };
        if !suspicious {
            return Ok((entries, actual));
        }
        let source_hash = hash_tree(src)?;
        if source_hash != actual {
            self.heal_blobs(src, &entries)?;
            fsutil::remove_tree(out)?;
            let entries = self.import_tree(src, out)?;
            let actual = hash_tree(out)?;
            return self.check_expected(src, out, expected, entries, actual);
        }
        self.check_expected(src, out, expected, entries, actual)
    }

    pub(super) fn check_expected(
        &self,
        src: &Path,
        out: &Path,
        expected: Option<&TreeHash>,
        entries: Vec<Entry>,
        actual: TreeHash,
    ) -> Result<(Vec<Entry>, TreeHash)> {
        if let Some(expected) = expected {
            if actual != *expected {
                if let Match::Mismatch { actual } = matches_tree_hash(out, expected)? {
                    return Err(StoreError::ContentHashMismatch {
                        expected: *expected,
                        actual,
                        path: src.to_path_buf(),
                    });
                }
            }
        }
        Ok((entries, actual))
    }

    /// Replace every blob used by `entries` whose content no longer matches its name with a fresh
    /// copy of the corresponding file of `src` (checked before it replaces anything).
    pub(super) fn heal_blobs(&self, src: &Path, entries: &[Entry]) -> Result<()> {
        for entry in entries {
            let Entry::File {
                path,
                blob: Some(id),
                exec,
                ..
            } = entry
            else {
                continue;
            };
            let blob = self.blob_path(id, *exec);
            if blake3_file(&blob)
                .map(|(found, _)| found == *id)
                .unwrap_or(false)
            {
                continue;
            }
            let temp = self.tmp_dir().join(unique_name("blob-"));
            crate::link::copy_new(&src.join(path), &temp, file_mode(*exec))
                .ctx("copy", src.join(path))?;
            if blake3_file(&temp)?.0 == *id {
                fs_err::rename(&temp, &blob).ctx("replace", &blob)?;
            } else {
                let _ = std::fs::remove_file(&temp);
            }
        }
        Ok(())
    }

    /// Copy the tree at `src` into `out`, files through blobs. Returns the manifest.
    pub(super) fn import_tree(&self, src: &Path, out: &Path) -> Result<Vec<Entry>> {
        fs_err::create_dir(out).ctx("create", out)?;
        manifest_with(
            src,
            |entries| {
                // Walk order puts every directory before what it holds.
                for entry in entries {
                    let dst = out.join(entry.path());
                    match entry {
                        Entry::Dir { .. } => fs_err::create_dir(&dst).ctx("create", &dst)?,
                        Entry::Link { target, .. } => {
                            std::os::unix::fs::symlink(target, &dst).ctx("create link", &dst)?;
                        }
                        Entry::File { .. } => {}
                    }
                }
                Ok(())
            },
            |(relative, source, exec)| {
                let dst = out.join(relative);
                if let Some(entry) = self.import_file_hardlinked(source, &dst, relative, *exec)? {
                    return Ok(entry);
                }
                let Some((id, size)) = self.import_file_locked(source, *exec)? else {
                    create_empty(&dst, file_mode(*exec))?;
                    return Ok(Entry::File {
                        path: relative.clone(),
                        blob: None,
                        size: 0,
                        exec: *exec,
                    });
                };
                if let Err(err) = self.link_blob(&id, *exec, &dst) {
                    let StoreError::TamperedObject { .. } = err else {
                        return Err(err);
                    };
                    // The blob of that name lies (another user's, or changed in place):
                    // copy the source, checked; an own blob is restored from the copy.
                    self.copy_verified(source, &dst, &id, file_mode(*exec), None)?;
                    self.restore_blob_from(&id, *exec, &dst);
                }
                Ok(file_entry(relative, id, size, *exec))
            },
        )
    }
}
