//! Content-addressed package trees: [`Store::publish_tree`], [`Store::publish_trees`] (a batch, one
//! flush) and [`Store::repair_tree`].
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

/// One package tree of a [`Store::publish_trees`] batch: what [`Store::publish_tree`] takes.
#[derive(Debug, Clone, Copy)]
pub struct PackageTree<'a> {
    /// The tree to import (left as it is).
    pub src: &'a Path,
    /// The label of the store path name.
    pub label: &'a str,
    /// The `sha256-tree-v1` the tree must have (exactly or by the legacy rule), if known.
    pub expected: Option<&'a TreeHash>,
    /// `src` is a scratch tree of this process on the store's filesystem that the publication
    /// consumes: its files may be adopted as blobs (moved, not copied) and it is removed (see
    /// [`PackageTree::adopting`]).
    pub adopt: bool,
}

impl<'a> PackageTree<'a> {
    /// The tree at `src`, published under `label`, checked against `expected`.
    pub fn new(src: &'a Path, label: &'a str, expected: Option<&'a TreeHash>) -> Self {
        PackageTree {
            src,
            label,
            expected,
            adopt: false,
        }
    }

    /// [`PackageTree::new`] for a scratch tree the publication consumes (a download extracted and
    /// normalized by this process, dropped afterwards): each file whose blob is new becomes that
    /// blob as it is (made read-only, moved into the store path and linked into `blobs/`) instead
    /// of being copied, when it is a regular file of this user on the store's filesystem with no
    /// other name and store files are hard links of their blobs; any other file is copied. `src`
    /// is consumed: removed once imported (best effort). The tree is checked against `expected`
    /// all the same.
    pub fn adopting(src: &'a Path, label: &'a str, expected: Option<&'a TreeHash>) -> Self {
        PackageTree {
            adopt: true,
            ..PackageTree::new(src, label, expected)
        }
    }
}

/// A tree of a batch after its build: staged for the flush (with its build directory, removed
/// when dropped, placed or not), or already in the store.
enum Built {
    Existing(StorePath),
    Staged {
        staged: Box<Staged>,
        _build_dir: crate::StoreTempDir,
    },
}

impl Store {
    /// A package another user published is re-hashed before this user first uses it (its name says
    /// which tree hash it must have), and again whenever its tree's inodes changed since this user
    /// last verified it ([`crate::tree_stamps`]).
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
        let user_dir = self.user_stamps_dir();
        // Taken before the content is read: a change while it is hashed shows next time.
        let stamp = crate::tree_stamps::tree_stamp(existing.path());
        if stamp
            .as_ref()
            .is_some_and(|stamp| self.tree_stamps.matches(&user_dir, existing.name(), stamp))
        {
            if let Ok(mut verified) = self.verified.lock() {
                verified.insert(existing.name().clone());
            }
            return Ok(());
        }
        tracing::debug!(path = %existing.path().display(), "re-hashing a store path another user published");
        let actual = hash_tree(existing.path())?;
        if actual != *expected {
            return Err(StoreError::TamperedObject {
                what: "store path",
                path: existing.path().to_path_buf(),
                owner: fsutil::owner_of(existing.path()),
                detail: format!("its tree hash is {actual}, not {expected}"),
            });
        }
        if let Some(stamp) = stamp.filter(|_| self.ensure_user_stamps_dir()) {
            self.tree_stamps.record(&user_dir, existing.name(), stamp);
        }
        if let Ok(mut verified) = self.verified.lock() {
            verified.insert(existing.name().clone());
        }
        Ok(())
    }

    /// Publish the package tree at `src` (regular files, symlinks and directories only) under
    /// `<first 32 hex of its sha256-tree-v1>-<label>`. With `expected`, a tree whose hash matches
    /// neither exactly nor by the legacy rule is refused with [`StoreError::ContentHashMismatch`] and
    /// nothing is published. The hash is taken over exactly the bytes that get published: each file
    /// is read once, and what is published is those bytes (written, or the inode that was read), or
    /// a blob named by their BLAKE3 and checked when linked; a package too large to be held in
    /// memory is hashed in the store. Execute bits are kept (`x` records).
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

    /// Publish many package trees with one flush (one `syncfs` for the batch, not one per tree):
    /// each tree is built and checked like [`Store::publish_tree`] (in parallel), all of them are
    /// flushed at once, and each is then renamed into place on its own, complete, so a crash at any
    /// point leaves every store path either absent or whole. One result per tree, in order: a tree
    /// that fails (its hash does not match `expected`, a copy error) does not keep the others out.
    /// The outer error is the batch's own (the store lock, the flush): then nothing was placed.
    pub fn publish_trees(&self, trees: &[PackageTree<'_>]) -> Result<Vec<Result<StorePath>>> {
        self.publish_batch(trees, false)
    }

    pub(super) fn publish_package(
        &self,
        src: &Path,
        label: &str,
        expected: Option<&TreeHash>,
        replace_damaged: bool,
    ) -> Result<StorePath> {
        let tree = PackageTree::new(src, label, expected);
        self.publish_batch(&[tree], replace_damaged)?
            .pop()
            .unwrap_or_else(|| {
                Err(StoreError::InvalidPath {
                    path: src.display().to_string(),
                    reason: "a batch of one tree published nothing",
                })
            })
    }

    /// [`Store::publish_trees`]; with `replace_damaged`, [`Store::repair_tree`] for each tree.
    fn publish_batch(
        &self,
        trees: &[PackageTree<'_>],
        replace_damaged: bool,
    ) -> Result<Vec<Result<StorePath>>> {
        let _lock = self.lock(LockKind::Shared)?;
        let built: Vec<Result<Built>> = trees
            .par_iter()
            .map(|tree| self.build_new(tree, replace_damaged))
            .collect();
        let staged_any = built
            .iter()
            .any(|built| matches!(built, Ok(Built::Staged { .. })));
        if staged_any {
            self.flush_batch()?;
        }
        let mut results = Vec::with_capacity(built.len());
        for built in built {
            results.push(built.and_then(|built| match built {
                Built::Existing(path) => Ok(path),
                Built::Staged { staged, .. } => self.place(*staged),
            }));
        }
        if staged_any {
            self.sync_placed()?;
        }
        self.flush_stamps();
        for path in results.iter().flatten() {
            self.add_temp_root(path)?;
        }
        Ok(results)
    }

    /// Build one tree of a batch in its own `.tmp/` directory and stage it. A package of that
    /// content already in the store is used as it is: verified first when another user published
    /// it, or, with `replace_damaged`, replaced by the fresh tree when it no longer matches its hash.
    fn build_new(&self, tree: &PackageTree<'_>, replace_damaged: bool) -> Result<Built> {
        let build_dir = self.build_dir("pkg-", "out")?;
        let out = build_dir.path();
        let staged = (|| {
            let (entries, actual) =
                self.build_package(tree.src, out, tree.expected, replace_damaged, tree.adopt)?;
            let name = StorePathName::from_tree_hash(&actual, tree.label);
            let Some(existing) = self.published(&name) else {
                let meta = new_meta(&name, PathKind::Package, Some(actual), &[], entries);
                return self.stage(build_dir.base(), out, name, meta).map(Ok);
            };
            if !replace_damaged {
                self.verify_foreign_package(&existing, &actual)?;
            } else {
                let found = hash_tree(existing.path())?;
                if found != actual {
                    // Another member's damaged path cannot be exchanged (sticky directory): say
                    // whose it is and who may repair it, not a bare "Operation not permitted".
                    let owner = fsutil::owner_of(existing.path());
                    if owner.is_some_and(|owner| !fsutil::may_remove(owner)) {
                        return Err(StoreError::TamperedObject {
                            what: "store path",
                            path: existing.path().to_path_buf(),
                            owner,
                            detail: format!("its tree hash is {found}, not {actual}"),
                        });
                    }
                    crate::verify::replace_store_path(self, out, existing.path())?;
                    let meta = new_meta(&name, PathKind::Package, Some(actual), &[], entries);
                    let meta_path = self.meta_path(name.as_str());
                    agentpack_fs::write_file(&meta_path, &meta.to_bytes(), &self.meta_write())?;
                }
            }
            Ok(Err(existing))
        })();
        // An existing path or an error drops the build directory (removing it) here.
        Ok(match staged? {
            Ok(staged) => Built::Staged {
                staged: Box::new(staged),
                _build_dir: build_dir,
            },
            Err(existing) => Built::Existing(existing),
        })
    }

    /// Import `src` into `out` and check the result.
    ///
    /// A publication (not a repair, `always_check_source`) reads each file of `src` once
    /// ([`Store::import_tree_once`]; with `adopt`, new blobs are adopted from it): the tree hash
    /// comes from the bytes read, and a package too large to be held in memory is hashed in `out`.
    /// Otherwise (a repair) `src` is copied and `out` hashed: if the built tree does not match but
    /// `src` does, a blob it was linked from was changed in place: restore those blobs from `src`
    /// and build again.
    pub(super) fn build_package(
        &self,
        src: &Path,
        out: &Path,
        expected: Option<&TreeHash>,
        always_check_source: bool,
        adopt: bool,
    ) -> Result<(Vec<Entry>, TreeHash)> {
        if !always_check_source {
            let (entries, known, adopted) = self.import_tree_once(src, out, adopt)?;
            if adopt {
                tracing::trace!(src = %src.display(), adopted, "files adopted as blobs");
                // Consumed: what is left of it (directories, files not adopted) goes now, on this
                // worker, not after the batch. Best effort: the caller drops its scratch anyway.
                let _ = fsutil::remove_tree(src);
            }
            match known {
                Some(actual) => return self.check_expected(src, out, expected, entries, actual),
                // Adopted files left `src`: the tree in `out` is what is checked.
                None if adopt => {
                    let actual = hash_tree(out)?;
                    return self.check_expected(src, out, expected, entries, actual);
                }
                None => return self.check_linked(src, out, expected, entries, false),
            }
        }
        let entries = self.import_tree(src, out)?;
        self.check_linked(src, out, expected, entries, always_check_source)
    }

    /// Hash `out` (built from `src`, its manifest `entries`) and check it against `expected`; if it
    /// does not match but `src` does, a blob it was linked from was changed in place: restore those
    /// blobs from `src` and build again.
    fn check_linked(
        &self,
        src: &Path,
        out: &Path,
        expected: Option<&TreeHash>,
        entries: Vec<Entry>,
        always_check_source: bool,
    ) -> Result<(Vec<Entry>, TreeHash)> {
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
            |entries| adopt::create_dirs_and_links(out, entries),
            |(relative, source, exec)| {
                self.import_tree_file(source, &out.join(relative), relative, *exec)
            },
        )
    }

    /// Import the regular file `source` (`relative` in its tree) as `dst` of a build, streamed:
    /// copied while hashed (straight to `dst` when store files are hard links of their blobs).
    pub(super) fn import_tree_file(
        &self,
        source: &Path,
        dst: &Path,
        relative: &str,
        exec: bool,
    ) -> Result<Entry> {
        if let Some(entry) = self.import_file_hardlinked(source, dst, relative, exec)? {
            return Ok(entry);
        }
        let Some((id, size)) = self.import_file_locked(source, exec)? else {
            create_empty(dst, file_mode(exec))?;
            return Ok(Entry::File {
                path: relative.to_owned(),
                blob: None,
                size: 0,
                exec,
            });
        };
        if let Err(err) = self.link_blob(&id, exec, dst) {
            let StoreError::TamperedObject { .. } = err else {
                return Err(err);
            };
            // The blob of that name lies (another user's, or changed in place):
            // copy the source, checked; an own blob is restored from the copy.
            self.copy_verified(source, dst, &id, file_mode(exec), None)?;
            self.restore_blob_from(&id, exec, dst);
        }
        Ok(file_entry(relative, id, size, exec))
    }
}
