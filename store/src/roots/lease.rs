//! Launch leases: `leases/<host>-<pid>-<start>.json`, the store paths a launched agent runs from,
//! taken, renewed and released by the launcher and judged live or stale by GC.
//!
//! Must never call a lease stale while its process may still run on its host.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::unix_now;
use crate::host::process_start_time;
use crate::lock::LockKind;
use crate::names::StorePath;
use crate::store::{Store, LEASES};

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

pub(super) fn write_lease(file: &Path, record: &LeaseRecord) -> Result<()> {
    write_json_atomically(file, record, ".lease-")
}

impl Store {
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
        self.record_host_seen();
        Ok(Lease { file, record })
    }

    /// Renew a lease (another host trusts it for another TTL).
    pub fn renew_lease(&self, lease: &mut Lease) -> Result<()> {
        lease.record.renewed = unix_now();
        let _lock = self.lock(LockKind::Shared)?;
        write_lease(&lease.file, &lease.record)?;
        self.record_host_seen();
        Ok(())
    }

    /// End a lease. Missing is fine.
    pub fn release_lease(&self, lease: &Lease) -> Result<()> {
        self.refuse_if_read_only("remove the lease", &lease.file)?;
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
