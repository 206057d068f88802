//! The metadata index: a `heed` (LMDB) key-value database of named tables.
//!
//! It is a **cache**: deleting its directory loses nothing, the filesystem is the truth. It holds the
//! store's database (one record per store path, see `database`) and, through the generic
//! [`Index::get`] / [`Index::put`] / [`Index::delete`], the GitHub ref and tag lookups builders cache
//! with timestamps ([`tables::REFS`], [`tables::TAGS`]). An environment LMDB cannot read (a damaged
//! or foreign `data.mdb`) is removed and made again, with a warning for the caller to pass on; it is
//! never an error. LMDB must never live on a network filesystem: the store decides placement (see
//! `Store::open`), this module only opens the directory it is given. The only `unsafe` of the crate is
//! in `open_env_once`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvOpenOptions, MdbError, WithoutTls};

use crate::error::{IoContext, Result, StoreError};

/// Table names other crates use (any other name works too; at most 64 tables).
pub mod tables {
    /// GitHub `owner/repo@ref` -> commit (builders' resolver reads it before asking GitHub).
    pub const REFS: &str = "refs";
    /// GitHub `owner/repo` -> tag list (builders' resolver reads it before asking GitHub).
    pub const TAGS: &str = "tags";
}

type Table = Database<'static, Bytes, Bytes>;

/// An open index.
#[derive(Clone)]
pub struct Index {
    inner: Arc<IndexInner>,
}

struct IndexInner {
    env: Env<WithoutTls>,
    location: PathBuf,
    tables: Mutex<HashMap<String, Table>>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("location", &self.inner.location)
            .finish()
    }
}

/// Indexes open in this process, by canonical directory (LMDB allows one env per path per process).
/// Weak: an environment closes when its last handle goes, so a later open sees what is on disk then
/// (a deleted or replaced index directory is opened anew, not served from a stale mapping).
fn opened() -> &'static Mutex<HashMap<PathBuf, Weak<IndexInner>>> {
    static OPENED: OnceLock<Mutex<HashMap<PathBuf, Weak<IndexInner>>>> = OnceLock::new();
    OPENED.get_or_init(|| Mutex::new(HashMap::new()))
}

/// What opening an index found.
#[derive(Debug)]
pub(crate) struct Opened {
    /// The index.
    pub(crate) index: Index,
    /// Set when the environment on disk could not be read and was made again (why).
    pub(crate) recreated: Option<String>,
}

/// Map size: address space only, the file grows as needed.
const MAP_SIZE: usize = 1 << 30;
const MAX_TABLES: u32 = 64;

/// Open the LMDB environment in `dir`. The last handle of an environment of this process may be
/// closing it right now (the registry holds weak references): heed then refuses for a moment.
fn open_env(dir: &Path) -> heed::Result<Env<WithoutTls>> {
    let mut attempts = 0;
    loop {
        match open_env_once(dir) {
            Err(heed::Error::EnvAlreadyOpened) if attempts < 100 => {
                attempts += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            result => return result,
        }
    }
}

#[expect(
    unsafe_code,
    reason = "heed marks opening a memory-mapped LMDB environment unsafe"
)]
fn open_env_once(dir: &Path) -> heed::Result<Env<WithoutTls>> {
    // SAFETY: heed requires that the memory-mapped file is not modified other than through LMDB while
    // open, and that the same environment is not opened twice in one process. The directory is private
    // to the store's index (nothing else writes it), it is never placed on a network filesystem (the
    // store checks statfs first) and `opened()` keeps one `Env` per canonical path in this process.
    unsafe {
        EnvOpenOptions::new()
            .read_txn_without_tls()
            .map_size(MAP_SIZE)
            .max_dbs(MAX_TABLES)
            .open(dir)
    }
}

impl Index {
    /// Open (creating) the index in `dir`. An environment LMDB cannot read is made again (its
    /// content is a cache).
    pub fn open(dir: &Path) -> Result<Index> {
        Self::open_with(dir, true).map(|opened| opened.index)
    }

    /// Like [`Index::open`], saying whether the environment had to be made again.
    pub(crate) fn open_reporting(dir: &Path) -> Result<Opened> {
        Self::open_with(dir, true)
    }

    /// Open (creating) an index only this user reads and writes (a user's own index in a shared
    /// store): its files are never given to the group.
    pub(crate) fn open_private(dir: &Path) -> Result<Opened> {
        Self::open_with(dir, false)
    }

    fn open_with(dir: &Path, share: bool) -> Result<Opened> {
        fs_err::create_dir_all(dir).ctx("create", dir)?;
        let canonical = fs_err::canonicalize(dir).ctx("resolve", dir)?;
        let mut registry = opened().lock().map_err(|_| poisoned(&canonical))?;
        if let Some(inner) = registry.get(&canonical).and_then(Weak::upgrade) {
            return Ok(Opened {
                index: Index { inner },
                recreated: None,
            });
        }
        // In a group-shared store the index directory and LMDB's files (created 0600 by heed) must be
        // group read/write, or other members of the group cannot open the index.
        if share {
            crate::fsutil::share_with_group(&canonical)?;
        }
        let err = |cause| StoreError::Index {
            path: canonical.clone(),
            cause,
        };
        let mut recreated = None;
        let env = match open_env(&canonical) {
            Ok(env) => env,
            // Not an LMDB environment LMDB can read (damaged, truncated, another version): a cache,
            // so it is made again and filled from the filesystem.
            Err(
                source @ heed::Error::Mdb(
                    MdbError::Invalid
                    | MdbError::VersionMismatch
                    | MdbError::Corrupted
                    | MdbError::PageNotFound
                    | MdbError::Panic,
                ),
            ) => {
                for file in ["data.mdb", "lock.mdb"] {
                    let path = canonical.join(file);
                    match std::fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                        Err(error) => return Err(StoreError::io("remove", &path, error)),
                    }
                }
                recreated = Some(source.to_string());
                open_env(&canonical).map_err(err)?
            }
            Err(source) => return Err(err(source)),
        };
        if share {
            for file in ["data.mdb", "lock.mdb"] {
                crate::fsutil::share_with_group(&canonical.join(file))?;
            }
        }
        let inner = Arc::new(IndexInner {
            env,
            location: canonical.clone(),
            tables: Mutex::new(HashMap::new()),
        });
        registry.insert(canonical, Arc::downgrade(&inner));
        Ok(Opened {
            index: Index { inner },
            recreated,
        })
    }

    /// Where the index lives.
    pub fn location(&self) -> &Path {
        &self.inner.location
    }

    fn err(&self, cause: heed::Error) -> StoreError {
        StoreError::Index {
            path: self.inner.location.clone(),
            cause,
        }
    }

    /// The table `name`, created when `create` is set; `None` when it does not exist yet.
    fn table(&self, name: &str, create: bool) -> Result<Option<Table>> {
        let mut tables = self
            .inner
            .tables
            .lock()
            .map_err(|_| poisoned(&self.inner.location))?;
        if let Some(table) = tables.get(name) {
            return Ok(Some(*table));
        }
        let env = &self.inner.env;
        let table: Option<Table> = if create {
            let wtxn = env.write_txn().map_err(|e| self.err(e))?;
            let created = env
                .create_databases_and_commit(wtxn, |opener, wtxn| -> heed::Result<_> {
                    let table = opener.create_database::<Bytes, Bytes>(wtxn, Some(name))?;
                    Ok(CommitOrAbort::<_, ()>::Commit(table))
                })
                .map_err(|e| self.err(e))?;
            match created {
                CommitOrAbort::Commit(table) => Some(table),
                CommitOrAbort::Abort(()) => None,
            }
        } else {
            let rtxn = env.read_txn().map_err(|e| self.err(e))?;
            let opened = env
                .open_databases_and_commit(rtxn, |opener, rtxn| -> heed::Result<_> {
                    let table = opener.open_database::<Bytes, Bytes>(rtxn, Some(name))?;
                    Ok(CommitOrAbort::<_, ()>::Commit(table))
                })
                .map_err(|e| self.err(e))?;
            match opened {
                CommitOrAbort::Commit(table) => table,
                CommitOrAbort::Abort(()) => None,
            }
        };
        if let Some(table) = table {
            tables.insert(name.to_owned(), table);
        }
        Ok(table)
    }

    /// The value of `key` in `table`.
    pub fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let Some(db) = self.table(table, false)? else {
            return Ok(None);
        };
        let rtxn = self.inner.env.read_txn().map_err(|e| self.err(e))?;
        let value = db
            .get(&rtxn, key)
            .map_err(|e| self.err(e))?
            .map(<[u8]>::to_vec);
        Ok(value)
    }

    /// Set `key` in `table` to `value`.
    pub fn put(&self, table: &str, key: &[u8], value: &[u8]) -> Result<()> {
        let db = self.table(table, true)?.ok_or_else(|| {
            self.err(heed::Error::Io(std::io::Error::other(
                "the table could not be created",
            )))
        })?;
        let mut wtxn = self.inner.env.write_txn().map_err(|e| self.err(e))?;
        db.put(&mut wtxn, key, value).map_err(|e| self.err(e))?;
        wtxn.commit().map_err(|e| self.err(e))
    }

    /// Remove `key` from `table`; `true` when it was there.
    pub fn delete(&self, table: &str, key: &[u8]) -> Result<bool> {
        let Some(db) = self.table(table, false)? else {
            return Ok(false);
        };
        let mut wtxn = self.inner.env.write_txn().map_err(|e| self.err(e))?;
        let removed = db.delete(&mut wtxn, key).map_err(|e| self.err(e))?;
        wtxn.commit().map_err(|e| self.err(e))?;
        Ok(removed)
    }

    /// Every `(key, value)` of `table`, in key order.
    pub fn entries(&self, table: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let Some(db) = self.table(table, false)? else {
            return Ok(Vec::new());
        };
        let rtxn = self.inner.env.read_txn().map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for item in db.iter(&rtxn).map_err(|e| self.err(e))? {
            let (key, value) = item.map_err(|e| self.err(e))?;
            out.push((key.to_vec(), value.to_vec()));
        }
        Ok(out)
    }

    /// In one transaction: remove every entry of `table` when `clear`, then remove `deletes`, then
    /// set `puts`.
    pub(crate) fn write_batch(
        &self,
        table: &str,
        clear: bool,
        deletes: &[Vec<u8>],
        puts: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<()> {
        if !clear && deletes.is_empty() && puts.is_empty() {
            return Ok(());
        }
        let db = self.table(table, true)?.ok_or_else(|| {
            self.err(heed::Error::Io(std::io::Error::other(
                "the table could not be created",
            )))
        })?;
        let mut wtxn = self.inner.env.write_txn().map_err(|e| self.err(e))?;
        if clear {
            db.clear(&mut wtxn).map_err(|e| self.err(e))?;
        }
        for key in deletes {
            db.delete(&mut wtxn, key).map_err(|e| self.err(e))?;
        }
        for (key, value) in puts {
            db.put(&mut wtxn, key, value).map_err(|e| self.err(e))?;
        }
        wtxn.commit().map_err(|e| self.err(e))
    }

    /// Every key of `table`, in key order.
    pub(crate) fn keys(&self, table: &str) -> Result<Vec<Vec<u8>>> {
        let Some(db) = self.table(table, false)? else {
            return Ok(Vec::new());
        };
        let rtxn = self.inner.env.read_txn().map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for item in db.iter(&rtxn).map_err(|e| self.err(e))? {
            let (key, _) = item.map_err(|e| self.err(e))?;
            out.push(key.to_vec());
        }
        Ok(out)
    }

    /// Remove every entry of `table`.
    pub fn clear(&self, table: &str) -> Result<()> {
        let Some(db) = self.table(table, false)? else {
            return Ok(());
        };
        let mut wtxn = self.inner.env.write_txn().map_err(|e| self.err(e))?;
        db.clear(&mut wtxn).map_err(|e| self.err(e))?;
        wtxn.commit().map_err(|e| self.err(e))
    }

    /// Set `key` with the current time (for caches with a freshness window, e.g. GitHub refs).
    pub fn put_timed(&self, table: &str, key: &[u8], value: &[u8]) -> Result<()> {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let millis = u64::try_from(millis).unwrap_or(u64::MAX);
        let mut stored = Vec::with_capacity(8 + value.len());
        stored.extend_from_slice(&millis.to_be_bytes());
        stored.extend_from_slice(value);
        self.put(table, key, &stored)
    }

    /// A value written by [`Index::put_timed`] and when it was written.
    pub fn get_timed(&self, table: &str, key: &[u8]) -> Result<Option<(SystemTime, Vec<u8>)>> {
        let Some(stored) = self.get(table, key)? else {
            return Ok(None);
        };
        if stored.len() < 8 {
            return Ok(None);
        }
        let (stamp, value) = stored.split_at(8);
        let mut millis = [0u8; 8];
        millis.copy_from_slice(stamp);
        let when = UNIX_EPOCH + Duration::from_millis(u64::from_be_bytes(millis));
        Ok(Some((when, value.to_vec())))
    }
}

fn poisoned(path: &Path) -> StoreError {
    StoreError::io(
        "lock",
        path,
        std::io::Error::other("index registry poisoned by a panic"),
    )
}
