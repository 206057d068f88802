//! Cached GitHub metadata: ref -> commit lookups and tag lists, with the time they were fetched.
//!
//! The resolver decides freshness (refs 15 minutes, tag lists 1 hour) and falls back to stale entries
//! only when every live source failed. [`MetadataCache`] is the seam: the store crate's index provides
//! the persistent implementation, [`InMemoryMetadataCache`] serves tests and one-shot runs. A cache is a
//! cache: failing to read or write it is never an error for the caller.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// How long a cached ref -> commit lookup is used without asking GitHub again.
pub const REF_TTL: Duration = Duration::from_secs(15 * 60);
/// How long a cached tag list is used without asking GitHub again.
pub const TAGS_TTL: Duration = Duration::from_secs(60 * 60);

/// One cached value and when it was fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedEntry {
    /// The value (a commit id, or a JSON tag list).
    pub value: String,
    /// When it was fetched from GitHub.
    pub fetched_at: SystemTime,
}

impl CachedEntry {
    /// Is the entry younger than `ttl` at `now`? (A clock that went backwards counts as fresh.)
    pub fn is_fresh(&self, ttl: Duration, now: SystemTime) -> bool {
        now.duration_since(self.fetched_at)
            .map_or(true, |age| age < ttl)
    }
}

/// A key/value cache of GitHub metadata. Implementations swallow their own I/O errors.
pub trait MetadataCache: Send + Sync {
    /// The entry under `key`, fresh or not.
    fn get(&self, key: &str) -> Option<CachedEntry>;
    /// Stores `entry` under `key`, replacing what was there.
    fn put(&self, key: &str, entry: CachedEntry);
}

/// Key of a cached ref -> commit lookup.
pub fn ref_key(repo_key: &str, reference: &str) -> String {
    format!("github-ref:{repo_key}:{reference}")
}

/// Key of a cached tag list.
pub fn tags_key(repo_key: &str) -> String {
    format!("github-tags:{repo_key}")
}

/// A process-local cache.
#[derive(Debug, Default)]
pub struct InMemoryMetadataCache {
    entries: Mutex<HashMap<String, CachedEntry>>,
}

impl InMemoryMetadataCache {
    /// An empty cache.
    pub fn new() -> InMemoryMetadataCache {
        InMemoryMetadataCache::default()
    }

    /// Makes every entry `age` older (tests use it to expire entries).
    pub fn age_all(&self, age: Duration) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for entry in entries.values_mut() {
            entry.fetched_at = entry
                .fetched_at
                .checked_sub(age)
                .unwrap_or(SystemTime::UNIX_EPOCH);
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// No entries?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl MetadataCache for InMemoryMetadataCache {
    fn get(&self, key: &str) -> Option<CachedEntry> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    fn put(&self, key: &str, entry: CachedEntry) {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key.to_owned(), entry);
    }
}

/// A cache that remembers nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoMetadataCache;

impl MetadataCache for NoMetadataCache {
    fn get(&self, _key: &str) -> Option<CachedEntry> {
        None
    }

    fn put(&self, _key: &str, _entry: CachedEntry) {}
}
