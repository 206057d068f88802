//! GC roots: what keeps store paths alive.
//!
//! * **indirect roots**: `gcroots/indirect/<hash> -> <absolute project pointer>`; the pointer (e.g.
//!   `<staging>/modes/<mode>`) is followed at GC time, so switching it needs no store call, and a
//!   pointer that disappeared makes the root stale (removed by GC);
//! * **generation history**: `gcroots/generations/<history>/<nanos>-<name> -> ../../../<name>`, one
//!   entry per generation a project+mode has used, pruned by `GcOptions::keep_generations`;
//! * **temp roots**: `temproots/<host>-<pid>-...`, one file per live `Store` handle, OFD-locked while
//!   the process lives (see `Store::add_temp_root`);
//! * **leases**: `leases/<host>-<pid>-<start>.json`, store paths a launched agent runs from. A lease of
//!   this host is live while its process exists with the same start time; another host's lease lives
//!   until its TTL expires (renew it to keep it).
//!
//! Slots (`cache/<cache_key>`) are roots too (see `gc`). This module writes roots atomically (temp +
//! rename) and reads them; it never deletes store paths.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{unique_name, unix_now};
use crate::host::process_start_time;
use crate::lock::LockKind;
use crate::names::{StorePath, StorePathName};
use crate::store::{Store, GCROOTS, GENERATIONS, INDIRECT, LEASES};

/// One entry of a generation history.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GenerationRoot {
    /// The generation's store path name.
    pub name: StorePathName,
    /// When it was recorded (nanoseconds since the Unix epoch).
    pub created_nanos: u128,
    /// The root link itself.
    #[serde(skip)]
    pub(crate) link: PathBuf,
}

/// A launch lease as written on disk.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeaseRecord {
    /// Host id of the launching machine.
    pub host: String,
    /// The launched process.
    pub pid: u32,
    /// Its start time (clock ticks since boot), to tell a reused pid apart.
    pub start_time: Option<u64>,
    /// Unix seconds when taken or last renewed.
    pub renewed: u64,
    /// Seconds after `renewed` when another host may consider it expired.
    pub ttl_secs: u64,
    /// The store path names in use.
    pub paths: Vec<String>,
}

/// A lease held by a launch; [`Store::release_lease`] ends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The lease file.
    pub file: PathBuf,
    /// What it says.
    pub record: LeaseRecord,
}

/// Options of [`Store::acquire_lease`].
#[derive(Clone, Copy, Debug)]
pub struct LeaseOptions {
    /// The process using the paths; default: this process (which then `exec`s the agent).
    pub pid: Option<u32>,
    /// How long another host trusts the lease without renewal. Default 24 h.
    pub ttl: Duration,
}

impl Default for LeaseOptions {
    fn default() -> Self {
        LeaseOptions {
            pid: None,
            ttl: Duration::from_secs(24 * 3600),
        }
    }
}

/// Whether a lease still protects its paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseState {
    /// Protects its paths.
    Live,
    /// Its process is gone (this host) or its TTL expired (another host).
    Stale,
}

fn history_dir_name(history: &str) -> String {
    blake3::hash(history.as_bytes()).to_hex()[..32].to_owned()
}

fn write_symlink_atomically(target: &Path, link: &Path) -> Result<()> {
    let temp = link.with_file_name(unique_name(".new-"));
    std::os::unix::fs::symlink(target, &temp).ctx("create link", &temp)?;
    if let Err(err) = std::fs::rename(&temp, link) {
        let _ = std::fs::remove_file(&temp);
        return Err(StoreError::io("replace", link, err));
    }
    Ok(())
}

impl Store {
    fn indirect_dir(&self) -> PathBuf {
        self.dir.join(GCROOTS).join(INDIRECT)
    }

    fn indirect_link(&self, pointer: &Path) -> Result<(PathBuf, PathBuf)> {
        let absolute = if pointer.is_absolute() {
            pointer.to_path_buf()
        } else {
            std::env::current_dir()
                .ctx("resolve", pointer)?
                .join(pointer)
        };
        let key = blake3::hash(absolute.as_os_str().as_encoded_bytes()).to_hex();
        Ok((self.indirect_dir().join(&key[..32]), absolute))
    }

    /// Register `pointer` (a symlink into the store, e.g. `<staging>/modes/<mode>`) as an indirect
    /// root: whatever it points to at GC time stays alive. Idempotent.
    pub fn add_indirect_root(&self, pointer: &Path) -> Result<()> {
        let (link, absolute) = self.indirect_link(pointer)?;
        let _lock = self.lock(LockKind::Shared)?;
        write_symlink_atomically(&absolute, &link)
    }

    /// Unregister an indirect root. Missing is fine.
    pub fn remove_indirect_root(&self, pointer: &Path) -> Result<()> {
        let (link, _) = self.indirect_link(pointer)?;
        match std::fs::remove_file(&link) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                Err(StoreError::io("remove", &link, err))
            }
            _ => Ok(()),
        }
    }

    /// The registered indirect roots: `(root link, pointer)`.
    pub fn indirect_roots(&self) -> Result<Vec<(PathBuf, PathBuf)>> {
        let dir = self.indirect_dir();
        let mut out = Vec::new();
        for entry in fs_err::read_dir(&dir).ctx("list", &dir)? {
            let entry = entry.ctx("list", &dir)?;
            if entry.file_name().as_encoded_bytes().starts_with(b".") {
                continue;
            }
            if let Ok(pointer) = std::fs::read_link(entry.path()) {
                out.push((entry.path(), pointer));
            }
        }
        Ok(out)
    }

    fn history_dir(&self, history: &str) -> PathBuf {
        self.dir
            .join(GCROOTS)
            .join(GENERATIONS)
            .join(history_dir_name(history))
    }

    /// Record that `history` (e.g. `<project-hash>/<mode>`) now uses generation `path`: a root that
    /// keeps it for rollback until GC prunes the history. Recording the newest entry again is a no-op.
    pub fn add_generation_root(&self, history: &str, path: &StorePath) -> Result<()> {
        let dir = self.history_dir(history);
        let _lock = self.lock(LockKind::Shared)?;
        self.ensure_dir(&dir)?;
        let existing = self.generation_history(history)?;
        if existing
            .first()
            .is_some_and(|newest| &newest.name == path.name())
        {
            return Ok(());
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let link = dir.join(format!("{nanos:020}-{}", path.name()));
        let target = Path::new("../../..").join(path.name().as_str());
        write_symlink_atomically(&target, &link)
    }

    /// The generations of `history`, newest first.
    pub fn generation_history(&self, history: &str) -> Result<Vec<GenerationRoot>> {
        read_history_dir(&self.history_dir(history))
    }

    /// Every generation history directory.
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

    // ----- leases -----

    /// Take a lease on `paths` for a launch (see [`LeaseOptions`]).
    pub fn acquire_lease(&self, paths: &[StorePath], options: LeaseOptions) -> Result<Lease> {
        let pid = options.pid.unwrap_or_else(std::process::id);
        let start_time = process_start_time(pid);
        let record = LeaseRecord {
            host: self.host_id.clone(),
            pid,
            start_time,
            renewed: unix_now(),
            ttl_secs: options.ttl.as_secs(),
            paths: paths.iter().map(|p| p.name().to_string()).collect(),
        };
        let file = self.dir.join(LEASES).join(format!(
            "{}-{pid}-{}.json",
            self.host_id,
            start_time.unwrap_or(0)
        ));
        let _lock = self.lock(LockKind::Shared)?;
        write_lease(&file, &record)?;
        Ok(Lease { file, record })
    }

    /// Renew a lease (another host trusts it for another TTL).
    pub fn renew_lease(&self, lease: &mut Lease) -> Result<()> {
        lease.record.renewed = unix_now();
        let _lock = self.lock(LockKind::Shared)?;
        write_lease(&lease.file, &lease.record)
    }

    /// End a lease. Missing is fine.
    pub fn release_lease(&self, lease: &Lease) -> Result<()> {
        match std::fs::remove_file(&lease.file) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                Err(StoreError::io("remove", &lease.file, err))
            }
            _ => Ok(()),
        }
    }

    /// Every lease with its state.
    pub fn leases(&self) -> Result<Vec<(Lease, LeaseState)>> {
        let dir = self.dir.join(LEASES);
        let mut out = Vec::new();
        for entry in fs_err::read_dir(&dir).ctx("list", &dir)? {
            let entry = entry.ctx("list", &dir)?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            let Ok(bytes) = std::fs::read(entry.path()) else {
                continue;
            };
            let Ok(record) = serde_json::from_slice::<LeaseRecord>(&bytes) else {
                // An unreadable lease protects nothing; treat it as stale so GC removes it.
                let record = LeaseRecord {
                    host: String::new(),
                    pid: 0,
                    start_time: None,
                    renewed: 0,
                    ttl_secs: 0,
                    paths: Vec::new(),
                };
                out.push((
                    Lease {
                        file: entry.path(),
                        record,
                    },
                    LeaseState::Stale,
                ));
                continue;
            };
            let state = self.lease_state(&record);
            out.push((
                Lease {
                    file: entry.path(),
                    record,
                },
                state,
            ));
        }
        Ok(out)
    }

    /// Whether a lease is live, judged from this host.
    pub fn lease_state(&self, record: &LeaseRecord) -> LeaseState {
        if record.host == self.host_id {
            match (process_start_time(record.pid), record.start_time) {
                (Some(now), Some(then)) if now == then => LeaseState::Live,
                (Some(_), None) => LeaseState::Live,
                _ => LeaseState::Stale,
            }
        } else if unix_now() <= record.renewed.saturating_add(record.ttl_secs) {
            LeaseState::Live
        } else {
            LeaseState::Stale
        }
    }
}

fn read_history_dir(dir: &Path) -> Result<Vec<GenerationRoot>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(err) => return Err(StoreError::io("list", dir, err)),
    };
    for entry in entries {
        let entry = entry.ctx("list", dir)?;
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
            link: entry.path(),
        });
    }
    out.sort_by_key(|generation| std::cmp::Reverse(generation.created_nanos));
    Ok(out)
}

fn write_lease(file: &Path, record: &LeaseRecord) -> Result<()> {
    let temp = file.with_file_name(unique_name(".lease-"));
    let bytes = serde_json::to_vec(record).unwrap_or_default();
    {
        use std::io::Write;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&temp)
            .ctx("create", &temp)?;
        out.write_all(&bytes).ctx("write", &temp)?;
    }
    fs_err::rename(&temp, file).ctx("write", file)
}
