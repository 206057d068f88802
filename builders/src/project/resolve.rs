//! Step 1, `resolve(policy) -> Resolved`: the lock this command stages and the verified store
//! path (slot) of every package in it.
//!
//! The policies are the commands' ways of getting there (see [`ResolvePolicy`]); each reads the
//! manifest and the lock the session already holds, and never writes the lock (the cli decides
//! whether and when, see [`super::ProjectSession::save_lock`]). Warnings go to the session. A
//! read-only session resolves only with [`ResolvePolicy::Inspect`], which writes nothing at all.

use std::collections::BTreeMap;
use std::path::PathBuf;

use agentpack_lockfile::{LockedPackage, Lockfile};
use agentpack_store::{SlotInspection, SlotState, Store, TreeHash};
use rayon::prelude::*;

use crate::fetch::{check_lock, fetch_lock, FetchOptions, Repaired, SlotProblem};
use crate::resolve::{resolve, PinChange, ResolveEnv, UpdatePolicy};

use super::{PipelineError, ProjectSession};

/// How a command gets its lock and packages.
#[derive(Debug, Clone)]
pub enum ResolvePolicy {
    /// `sync` and the launchers: with a non-empty `[dependencies]` the lock is reconciled with the
    /// manifest, keeping every pin already locked (`update` moves floating pins); with an empty
    /// one the lock is authoritative and is only fetched and verified. `repair` re-fetches slots
    /// that fail verification first.
    Sync { update: UpdatePolicy, repair: bool },
    /// `lock`, `update`, `add`, `remove`, `mcp add`: resolve the manifest on purpose, recording a
    /// content hash for every package. `replace_unreadable` (`lock`): a lock that does not parse
    /// is replaced, with a warning.
    Relock {
        update: UpdatePolicy,
        replace_unreadable: bool,
    },
    /// `env restore`: exactly what the lock pins, fetched and verified; never re-resolved.
    Frozen,
    /// `sync --verify-only`: the lock against the store; nothing is fetched, copied or published.
    VerifyOnly,
    /// `mcp add`, `remove` and `list`: the slots as they are, not re-hashed (sync verifies what it
    /// stages), nothing fetched; a package without a slot is left out with a warning.
    AsPresent,
    /// Preflight and probe: the lock as it is and every cache entry checked against it (re-hashed
    /// when the lock records a content hash); nothing fetched, imported, repaired or registered,
    /// no warning. An entry that is not usable is left out of `lock` and said in
    /// [`Resolved::entries`] (the caller turns it into a finding with a remedy).
    Inspect,
}

/// `Inspect`: how one locked package's cache entry compares with the lock.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum EntryCheck {
    /// In the plan: the store path the slot links to; `verified` false when the lock records no
    /// content hash to compare it with.
    Usable { store_path: PathBuf, verified: bool },
    /// Not in the cache in a usable form: `agentpack env restore` (or `sync`) fetches it.
    Missing { reason: String },
    /// There, but not what the lock pins: `agentpack sync --repair` replaces it.
    Mismatch { reason: String },
}

/// What resolution produced.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The lock to stage (not yet written).
    pub lock: Lockfile,
    /// The lock as it was before this step (empty when there was none).
    pub old_lock: Lockfile,
    /// The verified slot `$AGENTPACK_HOME/cache/<cache_key>` of every package, by module.
    pub slots: BTreeMap<String, PathBuf>,
    /// Every pin that moved.
    pub changes: Vec<PinChange>,
    /// Slots `repair` replaced.
    pub repaired: Vec<Repaired>,
    /// What fetching or copying the packages said (also in the session's warnings).
    pub package_warnings: Vec<String>,
    /// Modules whose slot was downloaded in this run.
    pub downloaded: Vec<String>,
    /// Path and `local/` entries whose copy changed since the lock was written.
    pub updated_entries: Vec<String>,
    /// `VerifyOnly`: packages whose store path is missing or does not match the lock (the
    /// others' slots are in `slots`).
    pub problems: Vec<SlotProblem>,
    /// `Inspect`: every locked package's entry, by module (`old_lock` lists them all; `lock`
    /// only the usable ones).
    pub entries: BTreeMap<String, EntryCheck>,
}

impl Resolved {
    fn new(lock: Lockfile, old_lock: Lockfile) -> Resolved {
        Resolved {
            lock,
            old_lock,
            slots: BTreeMap::new(),
            changes: Vec::new(),
            repaired: Vec::new(),
            package_warnings: Vec::new(),
            downloaded: Vec::new(),
            updated_entries: Vec::new(),
            problems: Vec::new(),
            entries: BTreeMap::new(),
        }
    }
}

/// `Inspect` of one package: see [`EntryCheck`].
fn inspect_entry(store: &Store, package: &LockedPackage) -> EntryCheck {
    let missing = |reason: String| EntryCheck::Missing { reason };
    let mismatch = |reason: String| EntryCheck::Mismatch { reason };
    let expected: Option<TreeHash> = match &package.content_hash {
        None => None,
        Some(hash) => match hash.as_str().parse() {
            Ok(hash) => Some(hash),
            Err(err) => return mismatch(format!("the lock's content_hash: {err}")),
        },
    };
    match store.inspect_slot(package.cache_key.as_str(), expected.as_ref()) {
        Err(err) => missing(format!("cannot read the cache entry: {err}")),
        Ok(SlotInspection::Usable { path, verified }) => EntryCheck::Usable {
            store_path: path.path().to_path_buf(),
            verified,
        },
        Ok(SlotInspection::Mismatch { actual, .. }) => mismatch(format!(
            "the cache entry hashes to {actual}, the lock records {}",
            expected.map_or_else(String::new, |hash| hash.to_string())
        )),
        Ok(SlotInspection::Unusable(state)) => match state {
            SlotState::Missing | SlotState::Linked(_) => missing("no cache entry".to_owned()),
            SlotState::Dangling(target) => missing(format!(
                "the cache entry links to {}, which is gone",
                target.display()
            )),
            SlotState::Foreign(target) => mismatch(format!(
                "the cache entry is not one agentpack made ({})",
                target.display()
            )),
            SlotState::LegacyDir(dir) => missing(format!(
                "the cache entry {} is a directory of agentpack 0.4 or earlier, which `agentpack sync` imports into the store",
                dir.display()
            )),
        },
    }
}

impl ProjectSession {
    /// Step 1 (see the module doc). `progress` is called with each module as resolution starts
    /// on it (`Relock` only).
    pub fn resolve(
        &self,
        policy: &ResolvePolicy,
        progress: Option<&(dyn Fn(&str) + Sync)>,
    ) -> Result<Resolved, PipelineError> {
        if !matches!(policy, ResolvePolicy::Inspect) {
            self.refuse_if_read_only("resolve with a policy that may fetch or import")?;
        }
        match policy {
            ResolvePolicy::Inspect => {
                let lock = self.lock()?;
                let entries: BTreeMap<String, EntryCheck> = lock
                    .packages
                    .par_iter()
                    .map(|package| {
                        (
                            package.module.as_str().to_owned(),
                            inspect_entry(self.store(), package),
                        )
                    })
                    .collect();
                let mut resolved = Resolved::new(lock.clone(), lock);
                let cache = self.store().cache_dir();
                resolved.lock.packages.retain(|package| {
                    let usable = matches!(
                        entries.get(package.module.as_str()),
                        Some(EntryCheck::Usable { .. })
                    );
                    if usable {
                        resolved.slots.insert(
                            package.module.as_str().to_owned(),
                            cache.join(package.cache_key.as_str()),
                        );
                    }
                    usable
                });
                resolved.entries = entries;
                Ok(resolved)
            }
            ResolvePolicy::VerifyOnly => {
                let lock = self.lock()?;
                let outcome = check_lock(&lock, self.store().as_ref())?;
                let mut resolved = Resolved::new(lock.clone(), lock);
                let failed: std::collections::BTreeSet<&str> = outcome
                    .problems
                    .iter()
                    .map(|problem| match problem {
                        SlotProblem::Missing { module, .. }
                        | SlotProblem::Mismatch { module, .. } => module.as_str(),
                    })
                    .collect();
                let cache = self.store().cache_dir();
                resolved.slots = resolved
                    .lock
                    .packages
                    .iter()
                    .filter(|package| !failed.contains(package.module.as_str()))
                    .map(|package| {
                        (
                            package.module.as_str().to_owned(),
                            cache.join(package.cache_key.as_str()),
                        )
                    })
                    .collect();
                resolved.problems = outcome.problems;
                Ok(resolved)
            }
            ResolvePolicy::AsPresent => {
                let lock = self.lock()?;
                let mut resolved = Resolved::new(lock.clone(), lock);
                let cache = self.store().cache_dir();
                let mut kept = Vec::new();
                for package in &resolved.lock.packages {
                    let module = package.module.as_str();
                    if self.store().slot(package.cache_key.as_str())?.is_some() {
                        resolved
                            .slots
                            .insert(module.to_owned(), cache.join(package.cache_key.as_str()));
                        kept.push(package.clone());
                    } else {
                        self.warn(format!(
                            "{module} has no cache entry; its MCP servers are not listed\n  fix  run `agentpack sync`"
                        ));
                    }
                }
                resolved.lock.packages = kept;
                Ok(resolved)
            }
            ResolvePolicy::Frozen => {
                let lock = self.lock()?;
                let outcome = self.fetch(&lock, false)?;
                let mut resolved = Resolved::new(lock.clone(), lock);
                self.warn_all(outcome.warnings.iter().cloned());
                resolved.package_warnings = outcome.warnings;
                resolved.slots = outcome.slots;
                resolved.downloaded = outcome.downloaded;
                resolved.updated_entries = outcome
                    .updated_entries
                    .iter()
                    .map(|entry| entry.module.as_str().to_owned())
                    .collect();
                Ok(resolved)
            }
            ResolvePolicy::Relock {
                update,
                replace_unreadable,
            } => {
                let old = if *replace_unreadable {
                    self.lock_for_relock()?
                } else {
                    Some(self.lock()?)
                };
                let github = self.github()?;
                github
                    .resolver()
                    .set_refresh(!matches!(update, UpdatePolicy::KeepPins));
                let env = ResolveEnv {
                    project_root: self.definition(),
                    agentpack_home: &self.roots().agentpack_home,
                    fetcher: &github.fetcher,
                    store: self.store().as_ref(),
                    progress,
                    keep_unhashed: false,
                };
                let outcome = resolve(self.manifest(), old.as_ref(), update, &env)?;
                self.warn_all(outcome.warnings.iter().cloned());
                let old_lock = old.unwrap_or_else(|| {
                    Lockfile::new(
                        self.manifest().name.clone(),
                        self.manifest().version.clone(),
                    )
                });
                let mut resolved = Resolved::new(outcome.lock, old_lock);
                resolved.slots = outcome.slots;
                resolved.changes = outcome.changes;
                resolved.package_warnings = outcome.warnings;
                Ok(resolved)
            }
            ResolvePolicy::Sync { update, repair } => self.reconcile(update, *repair),
        }
    }

    fn fetch(
        &self,
        lock: &Lockfile,
        repair: bool,
    ) -> Result<crate::fetch::FetchOutcome, PipelineError> {
        let github = self.github()?;
        Ok(fetch_lock(
            lock,
            self.definition(),
            &self.roots().agentpack_home,
            &github.fetcher,
            self.store().as_ref(),
            FetchOptions { repair },
        )?)
    }

    /// `ResolvePolicy::Sync`.
    fn reconcile(&self, update: &UpdatePolicy, repair: bool) -> Result<Resolved, PipelineError> {
        let old_lock = self.lock()?;
        let github = self.github()?;
        github
            .resolver()
            .set_refresh(!matches!(update, UpdatePolicy::KeepPins));
        let mut repaired = Vec::new();
        if repair {
            repaired = self.fetch(&old_lock, true)?.repaired;
        }
        if self.manifest().dependencies.is_empty() {
            // The lock is authoritative: fetch and verify it; path packages follow their
            // directories.
            let outcome = self.fetch(&old_lock, false)?;
            self.warn_all(outcome.warnings.iter().cloned());
            let mut lock = old_lock.clone();
            let mut updated = Vec::new();
            for entry in outcome.updated_entries {
                if let Some(slot) = lock.packages.iter_mut().find(|p| p.module == entry.module) {
                    updated.push(entry.module.as_str().to_owned());
                    *slot = entry;
                }
            }
            let mut resolved = Resolved::new(lock, old_lock);
            resolved.slots = outcome.slots;
            resolved.repaired = repaired;
            resolved.package_warnings = outcome.warnings;
            resolved.downloaded = outcome.downloaded;
            resolved.updated_entries = updated;
            return Ok(resolved);
        }
        let env = ResolveEnv {
            project_root: self.definition(),
            agentpack_home: &self.roots().agentpack_home,
            fetcher: &github.fetcher,
            store: self.store().as_ref(),
            progress: None,
            // `sync --update-lock` re-resolves on purpose, like `lock --update`: it records hashes.
            keep_unhashed: matches!(update, UpdatePolicy::KeepPins),
        };
        let outcome = resolve(self.manifest(), Some(&old_lock), update, &env)?;
        self.warn_all(outcome.warnings.iter().cloned());
        let mut resolved = Resolved::new(outcome.lock, old_lock);
        resolved.slots = outcome.slots;
        resolved.changes = outcome.changes;
        resolved.repaired = repaired;
        resolved.package_warnings = outcome.warnings;
        Ok(resolved)
    }

    /// Writes `lock` to `pack.lock` unless the file already records the same thing (what `sync`
    /// and the launchers do: a file that differs only in spacing or order is left as it is), or,
    /// with `exact`, unless it already holds these bytes (`lock`, `add`...). Returns whether it
    /// wrote. The session then holds the written bytes: nothing reads the lock again.
    pub fn save_lock(&mut self, lock: &Lockfile, exact: bool) -> Result<bool, PipelineError> {
        self.refuse_if_read_only("write pack.lock")?;
        if !exact {
            if let Ok(Some(existing)) = self.files().lock() {
                if existing.records_same_as(lock) {
                    return Ok(false);
                }
            }
        }
        let text = lock.to_toml_string();
        if self.files().lock_bytes() == Some(text.as_bytes()) {
            return Ok(false);
        }
        agentpack_lockfile::write_atomic(&self.roots().lock_path(), text.as_bytes())
            .map_err(agentpack_lockfile::LockError::from)?;
        self.wrote_files(None, Some(text.as_bytes()));
        Ok(true)
    }

    /// Writes `agentpack.toml` (unless it already holds `text`) and keeps `manifest` as the
    /// session's manifest.
    pub fn save_manifest(
        &mut self,
        text: &str,
        manifest: agentpack_lockfile::Manifest,
    ) -> Result<bool, PipelineError> {
        self.refuse_if_read_only("write agentpack.toml")?;
        let written = self.files().manifest_bytes() != text.as_bytes();
        if written {
            agentpack_lockfile::write_atomic(&self.roots().manifest_path(), text.as_bytes())
                .map_err(agentpack_lockfile::LockError::from)?;
            self.wrote_files(Some(text.as_bytes()), None);
        }
        self.set_manifest(manifest);
        Ok(written)
    }
}
