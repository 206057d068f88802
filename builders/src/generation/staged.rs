//! What a generation staged, and whether the staged files still are what was published.
//!
//! The record of a generation is its store metadata: every file with its BLAKE3, size and execute
//! bit, written once when the generation was published, outside the staged tree. [`check_staged`]
//! hashes the files under the generation and names each one modified, added or removed since;
//! [`quick_check`] compares only file type, size and execute bit, for the cheap report a plain sync
//! gives before it restores. The generation's `agentpack-generation.json` keeps what rendering reported.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentpack_store::{Entry, Store, StoreError, StorePath};

/// What rendering reported, kept inside the generation.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct GenerationReport {
    pub mode: String,
    pub warnings: Vec<String>,
    pub info: Vec<String>,
    /// Artifacts of two packages that would have taken one name, per agent, and how both were kept.
    #[serde(default)]
    pub collisions: Vec<agentpack_harness::Collision>,
    /// What reading the package trees reported (for every agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<AgentReport>,
    /// What each agent's rendering reported, by agent name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agents: BTreeMap<String, AgentReport>,
}

/// The warnings and notes of one part of a generation's rendering.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct AgentReport {
    pub warnings: Vec<String>,
    pub info: Vec<String>,
}

impl GenerationReport {
    /// The report as far as it concerns `agents`: the package trees' messages and those agents'
    /// (the whole report when it does not say which agent said what).
    pub fn for_agents(self, agents: &[agentpack_harness::Agent]) -> GenerationReport {
        let Some(shared) = &self.shared else {
            return self;
        };
        let mut warnings = shared.warnings.clone();
        let mut info = shared.info.clone();
        for agent in agents {
            if let Some(report) = self.agents.get(agent.as_str()) {
                warnings.extend(report.warnings.iter().cloned());
                info.extend(report.info.iter().cloned());
            }
        }
        let mut seen = std::collections::HashSet::new();
        warnings.retain(|line| seen.insert(line.clone()));
        let mut seen = std::collections::HashSet::new();
        info.retain(|line| seen.insert(line.clone()));
        let collisions = self
            .collisions
            .iter()
            .filter(|c| agents.iter().any(|agent| agent.as_str() == c.agent))
            .cloned()
            .collect();
        GenerationReport {
            mode: self.mode.clone(),
            warnings,
            info,
            collisions,
            shared: self.shared.clone(),
            agents: self
                .agents
                .iter()
                .filter(|(name, _)| agents.iter().any(|agent| agent.as_str() == name.as_str()))
                .map(|(name, report)| (name.clone(), report.clone()))
                .collect(),
        }
    }
}

/// Reads the report of a published generation (empty when missing or unreadable).
pub fn read_report(path: &StorePath) -> GenerationReport {
    read_report_at(path.path())
}

/// Reads the report of the generation at `generation` (a store path or a pointer to one; empty
/// when missing or unreadable).
pub fn read_report_at(generation: &Path) -> GenerationReport {
    std::fs::read(generation.join(super::REPORT_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Staged files that differ from the record.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StagedDiff {
    pub modified: Vec<PathBuf>,
    pub added: Vec<PathBuf>,
    pub removed: Vec<PathBuf>,
}

impl StagedDiff {
    /// True when nothing differs.
    pub fn is_clean(&self) -> bool {
        self.modified.is_empty() && self.added.is_empty() && self.removed.is_empty()
    }

    /// Every named file, `kind path` pairs in a stable order.
    pub fn lines(&self) -> Vec<(&'static str, &Path)> {
        let mut lines = Vec::new();
        lines.extend(self.modified.iter().map(|p| ("modified", p.as_path())));
        lines.extend(self.added.iter().map(|p| ("added", p.as_path())));
        lines.extend(self.removed.iter().map(|p| ("removed", p.as_path())));
        lines
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Recorded {
    File {
        blob: Option<String>,
        size: u64,
        exec: bool,
    },
    Link(String),
    Dir,
}

fn recorded(
    store: &Store,
    generation: &StorePath,
) -> Result<BTreeMap<String, Recorded>, StoreError> {
    let meta = store.meta(generation)?;
    Ok(meta
        .entries
        .iter()
        .map(|entry| {
            let value = match entry {
                Entry::Dir { .. } => Recorded::Dir,
                Entry::File {
                    blob, size, exec, ..
                } => Recorded::File {
                    blob: blob.as_ref().map(|b| b.hex()),
                    size: *size,
                    exec: *exec,
                },
                Entry::Link { target, .. } => Recorded::Link(target.clone()),
            };
            (entry.path().to_owned(), value)
        })
        .collect())
}

fn on_disk(root: &Path, hash: bool) -> BTreeMap<String, Recorded> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut found = BTreeMap::new();
    for entry in walkdir::WalkDir::new(root).min_depth(1).sort_by_file_name() {
        let Ok(entry) = entry else { continue };
        let Ok(relative) = entry.path().strip_prefix(root) else {
            continue;
        };
        let relative = relative.to_string_lossy().into_owned();
        let file_type = entry.file_type();
        let value = if file_type.is_dir() {
            Recorded::Dir
        } else if file_type.is_symlink() {
            let target = std::fs::read_link(entry.path()).unwrap_or_default();
            Recorded::Link(target.to_string_lossy().into_owned())
        } else {
            let meta = entry.metadata().ok();
            let size = meta.as_ref().map_or(0, std::fs::Metadata::len);
            let exec = meta
                .as_ref()
                .is_some_and(|m| m.permissions().mode() & 0o111 != 0);
            let blob = if hash && size > 0 {
                blake3_of(entry.path())
            } else {
                None
            };
            Recorded::File { blob, size, exec }
        };
        found.insert(relative, value);
    }
    found
}

fn blake3_of(path: &Path) -> Option<String> {
    let mut hasher = blake3::Hasher::new();
    let mut file = std::fs::File::open(path).ok()?;
    std::io::copy(&mut file, &mut hasher).ok()?;
    Some(hasher.finalize().to_hex().to_string())
}

fn compare(
    root: &Path,
    recorded: &BTreeMap<String, Recorded>,
    found: &BTreeMap<String, Recorded>,
    same: impl Fn(&Recorded, &Recorded) -> bool,
) -> StagedDiff {
    let mut diff = StagedDiff::default();
    for (path, want) in recorded {
        match found.get(path) {
            None if *want != Recorded::Dir => diff.removed.push(root.join(path)),
            Some(have) if !same(want, have) => diff.modified.push(root.join(path)),
            _ => {}
        }
    }
    for (path, have) in found {
        if !recorded.contains_key(path) && *have != Recorded::Dir {
            diff.added.push(root.join(path));
        }
    }
    diff
}

/// Hashes every staged file of `generation` (reached through `shown_root`, e.g. the mode pointer, so
/// messages name the paths the user sees) and compares it with the record.
pub fn check_staged(
    store: &Store,
    generation: &StorePath,
    shown_root: &Path,
) -> Result<StagedDiff, StoreError> {
    check(store, generation, shown_root, true)
}

/// Compares type, size and execute bit only: cheap, for the report of a plain sync.
pub fn quick_check(
    store: &Store,
    generation: &StorePath,
    shown_root: &Path,
) -> Result<StagedDiff, StoreError> {
    check(store, generation, shown_root, false)
}

/// The staged tree of `generation` compared with its record: every file's hash when `hash`, else
/// only what listing it tells (type, size, execute bit).
fn check(
    store: &Store,
    generation: &StorePath,
    shown_root: &Path,
    hash: bool,
) -> Result<StagedDiff, StoreError> {
    let recorded = recorded(store, generation)?;
    let found = on_disk(generation.path(), hash);
    Ok(compare(
        shown_root,
        &recorded,
        &found,
        |want, have| match (want, have) {
            (
                Recorded::File {
                    size: a, exec: x, ..
                },
                Recorded::File {
                    size: b, exec: y, ..
                },
            ) if !hash => a == b && x == y,
            _ => want == have,
        },
    ))
}
