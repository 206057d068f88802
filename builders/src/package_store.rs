//! The seam between builders and the content-addressed store, and its implementation over
//! `agentpack_store::Store`.
//!
//! Resolution and fetching need: hash a tree (`sha256-tree-v1`), compare a tree with a lock's digest
//! (exact, or the documented legacy rule), read a slot verified against a digest, publish (or, for
//! repair, replace: [`OnExisting`]) a verified tree into a slot, and a scratch directory on the
//! store's filesystem.
//! [`PackageStore`] names exactly that. [`StoreMetadataCache`] keeps GitHub ref/tag lookups in the
//! store's index. This module never prints; the store's own warnings stay in the store
//! (`Store::take_warnings`) for the cli to collect.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use agentpack_lockfile::validate::{CacheKey, ContentHash};
use agentpack_store::{tables, Match, Store, StoreError, StoreTempDir, TreeHash};

use crate::github::metadata_cache::{CachedEntry, MetadataCache};

/// A store operation failed; the message names the path and the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StoreAccessError(pub String);

impl From<StoreError> for StoreAccessError {
    fn from(error: StoreError) -> Self {
        StoreAccessError(error.to_string())
    }
}

/// How a tree compares with a lock's `content_hash`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeMatch {
    /// The digest equals the expected one (exactly, or by the legacy link rule).
    Matches,
    /// It does not; `actual` is the tree's `sha256-tree-v1` digest.
    Mismatch {
        /// The tree's digest.
        actual: ContentHash,
    },
}

/// A slot read against an expected digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotCheck {
    /// No usable slot (missing or dangling): fetch.
    Missing,
    /// The slot matches; its directory.
    Verified(PathBuf),
    /// The slot holds something else.
    Mismatch {
        /// The slot path (`cache/<cache_key>`).
        path: PathBuf,
        /// Its digest.
        actual: ContentHash,
    },
}

/// A scratch directory on the store's filesystem, removed when dropped.
pub struct ScratchDir {
    path: PathBuf,
    _guard: Box<dyn Send + Sync>,
}

impl std::fmt::Debug for ScratchDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScratchDir")
            .field("path", &self.path)
            .finish()
    }
}

impl ScratchDir {
    /// Wraps `path`, kept alive by `guard` (dropping the guard removes the directory).
    pub fn new(path: PathBuf, guard: Box<dyn Send + Sync>) -> ScratchDir {
        ScratchDir {
            path,
            _guard: guard,
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// What [`PackageStore::publish`] does when the store path named by the tree's content already
/// exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnExisting {
    /// Keep it: a store path is named by its content, so it holds this tree.
    Keep,
    /// `--repair`: it was damaged (changed in place); replace it by the tree (and only it: other
    /// store paths sharing its damaged files are left for their own checks). The result verifies
    /// against the content hash.
    Repair,
}

/// One verified tree of a [`PackageStore::publish_batch`]: what [`PackageStore::publish`] takes.
#[derive(Debug, Clone, Copy)]
pub struct BatchEntry<'a> {
    /// The slot to point at the published tree.
    pub cache_key: &'a CacheKey,
    /// The store path's label (the module).
    pub label: &'a str,
    /// The tree; the store checks the copy it publishes against `content_hash`.
    pub tree: &'a Path,
    /// The lock's content hash.
    pub content_hash: &'a ContentHash,
    /// `tree` is a scratch tree of this command on the store's filesystem that the batch consumes:
    /// the store may adopt its files as blobs instead of copying them, and removes it
    /// (`agentpack_store::PackageTree::adopting`).
    pub adopt: bool,
}

/// Why one tree of a [`PackageStore::publish_batch`] was not published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchEntryError {
    /// The store's copy of the tree hashes to `actual`, not to the entry's content hash (neither
    /// exactly nor by the legacy rule): nothing was published for it.
    #[error("the tree hashes to {actual}, not to the expected content hash")]
    Mismatch {
        /// The tree's digest.
        actual: ContentHash,
    },
    /// Any other store failure.
    #[error(transparent)]
    Store(#[from] StoreAccessError),
}

/// What builders need from the store.
pub trait PackageStore: Sync {
    /// The `sha256-tree-v1` digest of `dir`.
    fn hash_tree(&self, dir: &Path) -> Result<ContentHash, StoreAccessError>;

    /// Compares `dir` with `expected` (exact digest, else the legacy rule of the docs).
    fn verify_tree(
        &self,
        dir: &Path,
        expected: &ContentHash,
    ) -> Result<TreeMatch, StoreAccessError>;

    /// The slot of `cache_key` compared with `expected`.
    fn check_slot(
        &self,
        cache_key: &CacheKey,
        expected: &ContentHash,
    ) -> Result<SlotCheck, StoreAccessError>;

    /// The filled slot of `cache_key`, unverified (locks without content hashes).
    fn slot(&self, cache_key: &CacheKey) -> Result<Option<PathBuf>, StoreAccessError>;

    /// Marks the slot of `cache_key` as a copy made again from its source on every lock and sync
    /// (path dependencies, `local/` packages): not a GC root of its own.
    fn mark_rebuildable(&self, cache_key: &CacheKey) -> Result<(), StoreAccessError>;

    /// Publishes `tree` (already verified to hash to `content_hash`) and points the slot of `cache_key`
    /// at it, replacing what the slot held; `on_existing` says what becomes of a store path of this
    /// content that already exists. Returns the published directory.
    fn publish(
        &self,
        cache_key: &CacheKey,
        label: &str,
        tree: &Path,
        content_hash: &ContentHash,
        on_existing: OnExisting,
    ) -> Result<PathBuf, StoreAccessError>;

    /// Publishes every tree of `entries` like [`PackageStore::publish`] with [`OnExisting::Keep`]
    /// (each slot pointed at its tree), as one batch: the store flushes once for all of them. Each
    /// tree is checked against its content hash on the copy that is published (the one hash of a
    /// fresh download): a mismatch is [`BatchEntryError::Mismatch`]. One result per entry, in
    /// order; the outer error is the batch's own (no slot is known to point at its tree; a tree
    /// already published stays for `gc`).
    fn publish_batch(
        &self,
        entries: &[BatchEntry<'_>],
    ) -> Result<Vec<Result<PathBuf, BatchEntryError>>, StoreAccessError> {
        Ok(entries
            .iter()
            .map(|entry| {
                let BatchEntry {
                    cache_key,
                    label,
                    tree,
                    content_hash,
                    adopt: _,
                } = *entry;
                Ok(self.publish(cache_key, label, tree, content_hash, OnExisting::Keep)?)
            })
            .collect())
    }

    /// The verified slot of `cache_key`, or `tree` published into it: into an empty slot as it is,
    /// in place of a changed copy with [`OnExisting::Repair`] (the store path of that content exists
    /// but no longer matches it).
    fn verified_or_publish(
        &self,
        cache_key: &CacheKey,
        label: &str,
        tree: &Path,
        content_hash: &ContentHash,
    ) -> Result<PathBuf, StoreAccessError> {
        let on_existing = match self.check_slot(cache_key, content_hash)? {
            SlotCheck::Verified(existing) => return Ok(existing),
            SlotCheck::Missing => OnExisting::Keep,
            SlotCheck::Mismatch { .. } => OnExisting::Repair,
        };
        self.publish(cache_key, label, tree, content_hash, on_existing)
    }

    /// A new scratch directory on the store's filesystem.
    fn scratch(&self) -> Result<ScratchDir, StoreAccessError>;

    /// Records which regular files of the published package at `published` (a slot's store path)
    /// were executable in its source ([`crate::extract::ExtractReport::executables`]): the tree
    /// keeps them 0644, staged copies get the execute bit.
    fn record_executables(
        &self,
        published: &Path,
        executables: &std::collections::BTreeSet<String>,
    ) -> Result<(), StoreAccessError>;
}

fn tree_hash(hash: &ContentHash) -> Result<TreeHash, StoreAccessError> {
    hash.as_str()
        .parse::<TreeHash>()
        .map_err(StoreAccessError::from)
}

fn content_hash(hash: &TreeHash) -> ContentHash {
    ContentHash::from_digest(*hash.as_bytes())
}

impl PackageStore for Store {
    fn hash_tree(&self, dir: &Path) -> Result<ContentHash, StoreAccessError> {
        Ok(content_hash(&agentpack_store::hash_tree(dir)?))
    }

    fn verify_tree(
        &self,
        dir: &Path,
        expected: &ContentHash,
    ) -> Result<TreeMatch, StoreAccessError> {
        match agentpack_store::matches_tree_hash(dir, &tree_hash(expected)?)? {
            Match::Exact | Match::Legacy => Ok(TreeMatch::Matches),
            Match::Mismatch { actual } => Ok(TreeMatch::Mismatch {
                actual: content_hash(&actual),
            }),
        }
    }

    fn check_slot(
        &self,
        cache_key: &CacheKey,
        expected: &ContentHash,
    ) -> Result<SlotCheck, StoreAccessError> {
        match self.verified_slot(cache_key.as_str(), &tree_hash(expected)?) {
            Ok(Some(path)) => Ok(SlotCheck::Verified(path.path().to_path_buf())),
            Ok(None) => Ok(SlotCheck::Missing),
            Err(StoreError::ContentHashMismatch { actual, path, .. }) => Ok(SlotCheck::Mismatch {
                path,
                actual: content_hash(&actual),
            }),
            Err(other) => Err(other.into()),
        }
    }

    fn slot(&self, cache_key: &CacheKey) -> Result<Option<PathBuf>, StoreAccessError> {
        Ok(Store::slot(self, cache_key.as_str())?.map(|path| path.path().to_path_buf()))
    }

    fn mark_rebuildable(&self, cache_key: &CacheKey) -> Result<(), StoreAccessError> {
        Ok(self.mark_slot_rebuildable(cache_key.as_str())?)
    }

    fn publish(
        &self,
        cache_key: &CacheKey,
        label: &str,
        tree: &Path,
        content_hash: &ContentHash,
        on_existing: OnExisting,
    ) -> Result<PathBuf, StoreAccessError> {
        let label = agentpack_store::sanitize_label(label);
        let hash = tree_hash(content_hash)?;
        let path = match on_existing {
            OnExisting::Keep => self.publish_tree(tree, &label, Some(&hash))?,
            // Only this package's store path is repaired (its damaged blobs healed from `tree`,
            // the path replaced by the verified tree): a store-wide repair would also restore the
            // generations sharing those blobs, before the sync that stages them can name what was
            // edited. `repair_tree` with the expected hash refuses a tree that does not match it
            // and hashes the existing store path before keeping it, so the result needs no second
            // hash here.
            OnExisting::Repair => self.repair_tree(tree, &label, Some(&hash))?,
        };
        self.set_slot(cache_key.as_str(), &path)?;
        Ok(path.path().to_path_buf())
    }

    fn publish_batch(
        &self,
        entries: &[BatchEntry<'_>],
    ) -> Result<Vec<Result<PathBuf, BatchEntryError>>, StoreAccessError> {
        let labels: Vec<String> = entries
            .iter()
            .map(|entry| agentpack_store::sanitize_label(entry.label))
            .collect();
        let hashes: Vec<Result<TreeHash, StoreAccessError>> = entries
            .iter()
            .map(|entry| tree_hash(entry.content_hash))
            .collect();
        // Entries whose hash does not parse stay out of the batch and keep their error.
        let mut batch = Vec::new();
        for ((entry, label), hash) in entries.iter().zip(&labels).zip(&hashes) {
            if let Ok(hash) = hash {
                batch.push(if entry.adopt {
                    agentpack_store::PackageTree::adopting(entry.tree, label, Some(hash))
                } else {
                    agentpack_store::PackageTree::new(entry.tree, label, Some(hash))
                });
            }
        }
        let mut published = self.publish_trees(&batch)?.into_iter();
        let trees: Vec<Result<agentpack_store::StorePath, BatchEntryError>> = hashes
            .into_iter()
            .map(|hash| {
                hash?;
                match published.next() {
                    Some(Ok(path)) => Ok(path),
                    Some(Err(StoreError::ContentHashMismatch { actual, .. })) => {
                        Err(BatchEntryError::Mismatch {
                            actual: content_hash(&actual),
                        })
                    }
                    Some(Err(other)) => Err(StoreAccessError::from(other).into()),
                    None => Err(StoreAccessError(
                        "the store published fewer trees than it was given".to_owned(),
                    )
                    .into()),
                }
            })
            .collect();
        // Every published tree's slot, with one flush of the cache directory for the batch.
        let slots: Vec<(&str, &agentpack_store::StorePath)> = entries
            .iter()
            .zip(&trees)
            .filter_map(|(entry, tree)| Some((entry.cache_key.as_str(), tree.as_ref().ok()?)))
            .collect();
        let mut linked = self.set_slots(&slots)?.into_iter();
        Ok(trees
            .into_iter()
            .map(|tree| {
                let path = tree?;
                match linked.next() {
                    Some(Ok(())) => Ok(path.path().to_path_buf()),
                    Some(Err(error)) => Err(StoreAccessError::from(error).into()),
                    None => Err(StoreAccessError(
                        "the store linked fewer slots than it was given".to_owned(),
                    )
                    .into()),
                }
            })
            .collect())
    }

    fn scratch(&self) -> Result<ScratchDir, StoreAccessError> {
        let temp: StoreTempDir = self.temp_dir()?;
        Ok(ScratchDir::new(temp.path().to_path_buf(), Box::new(temp)))
    }

    fn record_executables(
        &self,
        published: &Path,
        executables: &std::collections::BTreeSet<String>,
    ) -> Result<(), StoreAccessError> {
        let canonical =
            fs_err::canonicalize(published).map_err(|error| StoreAccessError(error.to_string()))?;
        let Some(name) = canonical
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.parse::<agentpack_store::StorePathName>().ok())
        else {
            return Ok(());
        };
        let Some(path) = self.get(&name) else {
            return Ok(());
        };
        let executables: Vec<String> = executables.iter().cloned().collect();
        Ok(self.record_source_executables(&path, &executables)?)
    }
}

/// GitHub ref and tag lookups cached in the store's index (`refs` and `tags` tables). Without an index
/// (a remote store without a local index directory) it remembers nothing.
#[derive(Debug, Clone)]
pub struct StoreMetadataCache {
    store: Arc<Store>,
}

impl StoreMetadataCache {
    /// A cache over `store`'s index.
    pub fn new(store: Arc<Store>) -> StoreMetadataCache {
        StoreMetadataCache { store }
    }

    fn table(key: &str) -> &'static str {
        if key.starts_with("github-tags:") {
            tables::TAGS
        } else {
            tables::REFS
        }
    }
}

impl MetadataCache for StoreMetadataCache {
    fn get(&self, key: &str) -> Option<CachedEntry> {
        let index = self.store.index()?;
        let (fetched_at, value): (SystemTime, Vec<u8>) =
            index.get_timed(Self::table(key), key.as_bytes()).ok()??;
        Some(CachedEntry {
            value: String::from_utf8(value).ok()?,
            fetched_at,
        })
    }

    fn put(&self, key: &str, entry: CachedEntry) {
        if let Some(index) = self.store.index() {
            // A cache: a failed write only costs a lookup next time.
            let _ = index.put_timed(Self::table(key), key.as_bytes(), entry.value.as_bytes());
        }
    }
}
