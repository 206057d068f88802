//! GC roots: what keeps store paths alive, and which machine may judge each one.
//!
//! * **indirect roots**: `gcroots/indirect/<hash>.json`, one record per host and project pointer
//!   (e.g. `<staging>/modes/<mode>`), naming the host that registered it, the pointer and the store path
//!   it selected then. The pointer is followed at GC time, so switching it needs no store call;
//! * **generation history**: `gcroots/generations/<history>/@<host>/<nanos>-<name> -> ../../../../<name>`,
//!   one entry per generation a project+mode has used on that host, pruned by `GcOptions::keep_generations`;
//! * **temp roots**: `temproots/<host>-<pid>-...`, one file per live `Store` handle, OFD-locked while
//!   the process lives (see `Store::add_temp_root`);
//! * **leases**: `leases/<host>-<pid>-<start>.json`, store paths a launched agent runs from. A lease of
//!   this host is live while its process exists with the same start time; another host's lease lives
//!   until its TTL expires (renew it to keep it).
//!
//! Pointers and processes are host-local: on a store shared by several machines, only the machine that
//! made an indirect root or a history entry can tell whether it is stale (its pointer gone, its history
//! longer than the keep policy). Another machine keeps it as it is, following the pointer if it can see it
//! and the store path recorded with it, until its host has not been seen for [`HOST_ROOT_TTL`]. A host is
//! seen whenever it records a root, takes or renews a lease or runs GC (`gcroots/hosts/<host>.json`).
//! Roots written before roots recorded their host (a bare `gcroots/indirect/<hash>` symlink, a history
//! entry directly in `<history>/`) belong to no known host: every machine keeps them until they are
//! [`HOST_ROOT_TTL`] old, except that an indirect one whose pointer it can see is followed.
//!
//! Slots (`cache/<cache_key>`) are roots too (see `gc`). This module writes roots atomically (temp +
//! rename) and reads them; it never deletes store paths.
//!
//! Layout: `lease` holds launch leases; this module holds indirect roots, generation histories and
//! host records.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::unix_now;
use crate::lock::LockKind;
use crate::names::{StorePath, StorePathName};
use crate::store::{Store, GCROOTS, GENERATIONS, HOSTS, INDIRECT};

mod lease;

pub use lease::{Lease, LeaseOptions, LeaseRecord, LeaseState};

/// How long the roots of a host stay protected from other hosts' GC after that host was last seen
/// (recorded a root, took or renewed a lease, ran GC), and how long a root that records no host is kept
/// by any host: 90 days, far beyond any clock skew between machines.
pub const HOST_ROOT_TTL: Duration = Duration::from_secs(90 * 24 * 3600);

/// Prefix of the per-host directories inside a generation history directory.
const HOST_DIR_PREFIX: &str = "@";

/// One entry of a generation history.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GenerationRoot {
    /// The generation's store path name.
    pub name: StorePathName,
    /// When it was recorded (nanoseconds since the Unix epoch).
    pub created_nanos: u128,
    /// The host that recorded it; `None` for an entry written before entries recorded their host.
    pub host: Option<String>,
    /// The root link itself.
    #[serde(skip)]
    pub(crate) link: PathBuf,
}

/// An indirect root as written on disk (`gcroots/indirect/<hash>.json`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IndirectRootRecord {
    /// Host id of the machine whose pointer this is.
    pub host: String,
    /// The absolute pointer path, meaningful on that host.
    pub pointer: PathBuf,
    /// The store path name the pointer selected when the root was last registered, if it was in the store.
    pub target: Option<String>,
    /// Unix seconds when last registered.
    pub renewed: u64,
}

/// A registered indirect root, as [`Store::indirect_roots`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndirectRoot {
    /// The root file (a record, or a bare symlink written before roots recorded their host).
    pub file: PathBuf,
    /// The pointer it registers.
    pub pointer: PathBuf,
    /// The host that registered it; `None` for a root written before roots recorded their host.
    pub host: Option<String>,
    /// The store path the pointer selected when registered (`None` for old roots and unreadable records).
    pub target: Option<StorePathName>,
    /// Unix seconds when last registered (for an old root: its modification time).
    pub renewed: u64,
}

/// Who may judge a root, from this host's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RootOwner {
    /// This host made it: its pointer and the keep policy decide.
    ThisHost,
    /// Another (or an unknown) host made it and was seen within [`HOST_ROOT_TTL`]: kept as it is.
    OtherHost,
    /// Its host has not been seen for [`HOST_ROOT_TTL`] (or, for a root without a host, it is older
    /// than that): stale.
    Expired,
}

/// Judges roots by their host, with the hosts' last-seen times read once (for one GC run).
pub(crate) struct RootJudge {
    this_host: String,
    seen: HashMap<String, u64>,
    now: u64,
}

impl RootJudge {
    /// The owner of a root made by `host` (`None`: unknown) last registered at `renewed` (Unix seconds).
    pub(crate) fn owner(&self, host: Option<&str>, renewed: u64) -> RootOwner {
        let last_seen = match host {
            Some(host) if host == self.this_host => return RootOwner::ThisHost,
            Some(host) => renewed.max(self.seen.get(host).copied().unwrap_or(0)),
            None => renewed,
        };
        if self.now <= last_seen.saturating_add(HOST_ROOT_TTL.as_secs()) {
            RootOwner::OtherHost
        } else {
            RootOwner::Expired
        }
    }
}

/// When a host was last seen, as written on disk (`gcroots/hosts/<host>.json`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HostSeenRecord {
    /// The host id.
    pub host: String,
    /// Unix seconds when it last recorded a root, took or renewed a lease, or ran GC.
    pub seen: u64,
}

/// The directory of `history` for this user: users of a shared store keep separate histories (the
/// owner of a directory may remove anyone's entries in it, even a sticky one), root's are named by the
/// history alone.
fn history_dir_name(history: &str) -> String {
    let uid = crate::fsutil::euid();
    let mut hasher = blake3::Hasher::new();
    hasher.update(history.as_bytes());
    if uid != 0 {
        hasher.update(format!("\0agentpack-user {uid}").as_bytes());
    }
    hasher.finalize().to_hex()[..32].to_owned()
}

fn write_symlink_atomically(target: &Path, link: &Path) -> Result<()> {
    agentpack_fs::write_symlink(
        target,
        link,
        agentpack_fs::TempName::Prefix(".new-"),
        agentpack_fs::Durability::None,
    )
    .map_err(StoreError::from)
}

/// Modification time of `path` itself (not a symlink's target), in Unix seconds; 0 when unknown.
fn own_mtime(path: &Path) -> u64 {
    std::fs::symlink_metadata(path)
        .map(|meta| u64::try_from(meta.mtime()).unwrap_or(0))
        .unwrap_or(0)
}

impl Store {
    fn indirect_dir(&self) -> PathBuf {
        self.dir.join(GCROOTS).join(INDIRECT)
    }

    fn hosts_dir(&self) -> PathBuf {
        self.dir.join(GCROOTS).join(HOSTS)
    }

    /// This host's record file for `pointer`, and the pointer made absolute.
    fn indirect_record(&self, pointer: &Path) -> Result<(PathBuf, PathBuf)> {
        let absolute = if pointer.is_absolute() {
            pointer.to_path_buf()
        } else {
            std::env::current_dir()
                .ctx("resolve", pointer)?
                .join(pointer)
        };
        let mut keyed = self.host_id.as_bytes().to_vec();
        keyed.push(0);
        keyed.extend_from_slice(absolute.as_os_str().as_encoded_bytes());
        let key = blake3::hash(&keyed).to_hex();
        Ok((
            self.indirect_dir().join(format!("{}.json", &key[..32])),
            absolute,
        ))
    }

    /// Register `pointer` (a symlink into the store on this host, e.g. `<staging>/modes/<mode>`) as an
    /// indirect root of this host: whatever it points to at GC time stays alive, and on other hosts
    /// sharing the store, what it points to now stays alive while this host is seen (see
    /// [`HOST_ROOT_TTL`]). Registering again renews it. Idempotent.
    pub fn add_indirect_root(&self, pointer: &Path) -> Result<()> {
        let (file, absolute) = self.indirect_record(pointer)?;
        let record = IndirectRootRecord {
            host: self.host_id.clone(),
            target: self
                .store_path_of(&absolute)
                .map(|path| path.name().to_string()),
            pointer: absolute,
            renewed: unix_now(),
        };
        let _lock = self.lock(LockKind::Shared)?;
        write_json_atomically(&file, &record, ".new-")?;
        self.record_host_seen();
        Ok(())
    }

    /// Unregister this host's indirect root of `pointer`. Missing is fine.
    pub fn remove_indirect_root(&self, pointer: &Path) -> Result<()> {
        let (file, _) = self.indirect_record(pointer)?;
        self.refuse_if_read_only("remove the indirect root", &file)?;
        match std::fs::remove_file(&file) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                Err(StoreError::io("remove", &file, err))
            }
            _ => Ok(()),
        }
    }

    /// The registered indirect roots of every host, and those written before roots recorded their host.
    pub fn indirect_roots(&self) -> Result<Vec<IndirectRoot>> {
        let dir = self.indirect_dir();
        let mut out = Vec::new();
        for entry in fs_err::read_dir(&dir).ctx("list", &dir)? {
            let entry = entry.ctx("list", &dir)?;
            let file = entry.path();
            let file_name = entry.file_name();
            let name = file_name.as_encoded_bytes();
            if name.starts_with(b".") {
                continue;
            }
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            if file_type.is_symlink() {
                // Written before roots recorded their host.
                if let Ok(pointer) = std::fs::read_link(&file) {
                    out.push(IndirectRoot {
                        renewed: own_mtime(&file),
                        file,
                        pointer,
                        host: None,
                        target: None,
                    });
                }
                continue;
            }
            if !file_type.is_file() || !name.ends_with(b".json") {
                continue;
            }
            let record = std::fs::read(&file)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<IndirectRootRecord>(&bytes).ok());
            out.push(match record {
                Some(record) => IndirectRoot {
                    file,
                    target: record.target.and_then(|name| name.parse().ok()),
                    pointer: record.pointer,
                    host: Some(record.host),
                    renewed: record.renewed,
                },
                // Unreadable: nobody can tell whose it is; it protects nothing and expires by age.
                None => IndirectRoot {
                    renewed: own_mtime(&file),
                    file,
                    pointer: PathBuf::new(),
                    host: None,
                    target: None,
                },
            });
        }
        Ok(out)
    }

    fn history_dir(&self, history: &str) -> PathBuf {
        self.dir
            .join(GCROOTS)
            .join(GENERATIONS)
            .join(history_dir_name(history))
    }

    /// Record that `history` (e.g. `<project-hash>/<mode>`) now uses generation `path` on this host: a
    /// root that keeps it for rollback until GC on this host prunes the history (other hosts keep it
    /// while this host is seen, see [`HOST_ROOT_TTL`]). Recording this host's newest entry again is a
    /// no-op.
    pub fn add_generation_root(&self, history: &str, path: &StorePath) -> Result<()> {
        let dir = self.history_dir(history);
        let host_dir = dir.join(format!("{HOST_DIR_PREFIX}{}", self.host_id));
        let _lock = self.lock(LockKind::Shared)?;
        self.ensure_dir(&dir)?;
        self.ensure_dir(&host_dir)?;
        self.record_host_seen();
        let existing = read_entries(&host_dir, Some(&self.host_id))?;
        if existing
            .iter()
            .max_by_key(|generation| generation.created_nanos)
            .is_some_and(|newest| &newest.name == path.name())
        {
            return Ok(());
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let link = host_dir.join(format!("{nanos:020}-{}", path.name()));
        let target = Path::new("../../../..").join(path.name().as_str());
        write_symlink_atomically(&target, &link)
    }

    /// Forgets `history` on this host (a deleted mode): its entries stop being roots, so GC can
    /// collect the generations no other root keeps. Other hosts' entries stay theirs.
    pub fn remove_generation_history(&self, history: &str) -> Result<()> {
        let dir = self.history_dir(history);
        let host_dir = dir.join(format!("{HOST_DIR_PREFIX}{}", self.host_id));
        let _lock = self.lock(LockKind::Shared)?;
        match std::fs::remove_dir_all(&host_dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io("remove", &host_dir, e)),
        }
        // The directory goes too once no host has entries in it.
        let _ = std::fs::remove_dir(&dir);
        Ok(())
    }

    /// The generations of `history` recorded on this host (and those recorded before entries named
    /// their host), newest first. A generation may appear more than once (after a rollback).
    pub fn generation_history(&self, history: &str) -> Result<Vec<GenerationRoot>> {
        let mut entries = read_history_dir(&self.history_dir(history))?;
        entries.retain(|entry| {
            entry
                .host
                .as_deref()
                .is_none_or(|host| host == self.host_id)
        });
        Ok(entries)
    }

    /// Every generation history directory, with the entries of every host, newest first.
    pub(crate) fn all_histories(&self) -> Result<Vec<Vec<GenerationRoot>>> {
        let dir = self.dir.join(GCROOTS).join(GENERATIONS);
        let mut out = Vec::new();
        for entry in fs_err::read_dir(&dir).ctx("list", &dir)? {
            let entry = entry.ctx("list", &dir)?;
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                out.push(read_history_dir(&entry.path())?);
            }
        }
        Ok(out)
    }

    // ----- hosts -----

    /// Record that this host is alive now, so other hosts keep its roots for another [`HOST_ROOT_TTL`].
    /// Done by every root registration, lease and GC; best effort (a failure becomes a warning).
    /// The caller holds the store lock.
    pub(crate) fn record_host_seen(&self) {
        let dir = self.hosts_dir();
        // One record per host and user: in a shared store another user's record of this host is
        // theirs (a sticky directory), and GC takes the latest of them.
        let uid = crate::fsutil::euid();
        let file = if uid == 0 {
            dir.join(format!("{}.json", self.host_id))
        } else {
            dir.join(format!("{}~u{uid}.json", self.host_id))
        };
        let record = HostSeenRecord {
            host: self.host_id.clone(),
            seen: unix_now(),
        };
        if let Err(err) = self
            .ensure_dir(&dir)
            .and_then(|()| write_json_atomically(&file, &record, ".new-"))
        {
            self.warn(format!(
                "warning: cannot record that host {} is alive ({err}); other machines sharing the store may remove this machine's roots once it has not been seen for {} days",
                self.host_id,
                HOST_ROOT_TTL.as_secs() / 86_400
            ));
        }
    }

    /// When each host was last seen (Unix seconds), from `gcroots/hosts/`.
    pub fn hosts_seen(&self) -> Result<Vec<HostSeenRecord>> {
        let dir = self.hosts_dir();
        let mut out = Vec::new();
        for entry in dir_entries(&dir)? {
            let name = entry.file_name();
            if name.as_encoded_bytes().starts_with(b".") {
                continue;
            }
            if let Some(record) = std::fs::read(entry.path())
                .ok()
                .and_then(|bytes| serde_json::from_slice::<HostSeenRecord>(&bytes).ok())
            {
                out.push(record);
            }
        }
        Ok(out)
    }

    /// A judge of roots by host for one GC run.
    pub(crate) fn root_judge(&self) -> Result<RootJudge> {
        let mut seen: HashMap<String, u64> = HashMap::new();
        for record in self.hosts_seen()? {
            let slot = seen.entry(record.host).or_insert(0);
            *slot = (*slot).max(record.seen);
        }
        Ok(RootJudge {
            this_host: self.host_id.clone(),
            seen,
            now: unix_now(),
        })
    }
}

/// The entries directly in `dir`, none when `dir` does not exist.
fn dir_entries(dir: &Path) -> Result<Vec<std::fs::DirEntry>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(StoreError::io("list", dir, err)),
    };
    entries.map(|entry| entry.ctx("list", dir)).collect()
}

/// The entries of one history directory: those written before entries named their host directly in
/// it, and each host's in its `@<host>/` directory. Newest first.
fn read_history_dir(dir: &Path) -> Result<Vec<GenerationRoot>> {
    let mut out = read_entries(dir, None)?;
    for entry in dir_entries(dir)? {
        let file_name = entry.file_name();
        let Some(host) = file_name
            .to_str()
            .and_then(|name| name.strip_prefix(HOST_DIR_PREFIX))
        else {
            continue;
        };
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            out.extend(read_entries(&entry.path(), Some(host))?);
        }
    }
    out.sort_by_key(|generation| std::cmp::Reverse(generation.created_nanos));
    Ok(out)
}

/// The `<nanos>-<name>` entries directly in `dir`, recorded by `host`. Unordered.
fn read_entries(dir: &Path, host: Option<&str>) -> Result<Vec<GenerationRoot>> {
    let mut out = Vec::new();
    for entry in dir_entries(dir)? {
        let file_name = entry.file_name();
        let Some(text) = file_name.to_str() else {
            continue;
        };
        let Some((stamp, name)) = text.split_once('-') else {
            continue;
        };
        let (Ok(created_nanos), Ok(name)) = (stamp.parse::<u128>(), name.parse::<StorePathName>())
        else {
            continue;
        };
        out.push(GenerationRoot {
            name,
            created_nanos,
            host: host.map(str::to_owned),
            link: entry.path(),
        });
    }
    Ok(out)
}

/// Write `value` as JSON to `file` atomically (a `<prefix>…` temp file renamed over it; the GC
/// removes leftovers by that prefix). Mode 0644 whatever the umask: another user's GC must be able
/// to read a root to keep what it keeps. Not flushed here: the store flushes in batches.
fn write_json_atomically<T: serde::Serialize>(
    file: &Path,
    value: &T,
    prefix: &'static str,
) -> Result<()> {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let options = agentpack_fs::WriteOptions {
        mode: agentpack_fs::FileMode::Exact(0o644),
        durability: agentpack_fs::Durability::None,
        temp: agentpack_fs::TempName::Prefix(prefix),
    };
    agentpack_fs::write_file(file, &bytes, &options).map_err(StoreError::from)
}
