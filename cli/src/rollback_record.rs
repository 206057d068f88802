//! The record a rollback leaves, so that it stays selected: which generation the user rolled back
//! to, and a digest of the inputs at that moment (the manifest, the lock, `./.agents/` and the mode).
//!
//! A launch that finds the record valid (the pointer still selects that generation and the inputs
//! digest is unchanged) uses the rolled-back generation instead of building one from the lock, and
//! says so the first time. Any change of the inputs ends the rollback; so does a sync the user runs
//! (`sync`, `add`, `remove`, `update`, `mcp add`...), which removes the record. Lives in
//! `$AGENTPACK_HOME/projects/<hash>/rollback/<mode-dir>.json`. Never changes the pointer.

use std::path::{Path, PathBuf};

use agentpack_harness::launch::fingerprint::{self, FingerprintInputs};
use agentpack_harness::Agent;
use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::context::{LOCK_FILE, MANIFEST_FILE};
use crate::env::{self, EnvVars};
use crate::project::Project;

#[derive(Debug, Serialize, Deserialize)]
struct RollbackRecord {
    version: u32,
    /// The generation's store path the rollback selected.
    generation: PathBuf,
    /// The inputs digest at the time of the rollback.
    inputs: String,
    /// Whether a launch already said that it uses the rolled-back generation.
    announced: bool,
}

fn record_path(state_dir: &Path, mode_dir: &str) -> PathBuf {
    state_dir.join("rollback").join(format!("{mode_dir}.json"))
}

/// The digest of what a generation is built from, except the cache (whose entries the lock
/// pins): the manifest's and the lock's bytes (in the definition root), the workspace's
/// `./.agents/` metadata, the mode and the generation.
fn inputs_digest(project: &Project, mode: &str, generation: &Path) -> String {
    let dot_agents = env::var(EnvVars::AGENTPACK_DOT_AGENTS).as_deref() != Some("0");
    fingerprint::compute(&FingerprintInputs {
        // The record is the same for every launcher: one fixed agent, so records written earlier
        // still hold.
        agent: Some(Agent::Claude),
        mode: mode.to_owned(),
        manifest: project.root.join(MANIFEST_FILE),
        lock: project.root.join(LOCK_FILE),
        overlay: dot_agents.then(|| project.workspace.join(".agents")),
        generation: generation.to_path_buf(),
        cache_entries: Vec::new(),
        toggles: vec![format!("dot_agents={dot_agents}")],
    })
}

/// Records that `mode` of the project was rolled back to `generation`.
pub fn record(
    state_dir: &Path,
    project: &Project,
    mode: &str,
    mode_dir: &str,
    generation: &Path,
) -> Result<()> {
    let record = RollbackRecord {
        version: 1,
        generation: generation.to_path_buf(),
        inputs: inputs_digest(project, mode, generation),
        announced: false,
    };
    write(&record_path(state_dir, mode_dir), &record)
}

/// What a launch should do about a rollback of its mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RolledBack {
    /// No rollback holds: build from the lock as usual.
    No,
    /// Use this generation; `announce` is true the first time a launch uses it.
    Yes { generation: PathBuf, announce: bool },
}

/// Whether the rollback of `mode` still holds: the pointer (resolved to `selected`) still selects
/// the rolled-back generation and the inputs are those of the rollback. A record that no longer
/// holds is removed. The first call that finds it holding marks it announced.
pub fn check(
    state_dir: &Path,
    project: &Project,
    mode: &str,
    mode_dir: &str,
    selected: Option<&Path>,
) -> RolledBack {
    let path = record_path(state_dir, mode_dir);
    let Ok(text) = fs_err::read_to_string(&path) else {
        return RolledBack::No;
    };
    let record = match serde_json::from_str::<RollbackRecord>(&text) {
        Ok(record) if record.version == 1 => record,
        _ => {
            clear(state_dir, mode_dir);
            return RolledBack::No;
        }
    };
    let holds = selected == Some(record.generation.as_path())
        && record.generation.is_dir()
        && inputs_digest(project, mode, &record.generation) == record.inputs;
    if !holds {
        clear(state_dir, mode_dir);
        return RolledBack::No;
    }
    let announce = !record.announced;
    if announce {
        let announced = RollbackRecord {
            announced: true,
            ..record
        };
        // Failing to record it only means the note is printed again next time.
        let _ = write(&path, &announced);
        return RolledBack::Yes {
            generation: announced.generation,
            announce,
        };
    }
    RolledBack::Yes {
        generation: record.generation,
        announce,
    }
}

/// Ends the rollback of a mode (a sync the user asked for builds from the lock again).
pub fn clear(state_dir: &Path, mode_dir: &str) {
    let _ = std::fs::remove_file(record_path(state_dir, mode_dir));
}

fn write(path: &Path, record: &RollbackRecord) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs_err::create_dir_all(dir)?;
    }
    let mut bytes = serde_json::to_vec_pretty(record)?;
    bytes.push(b'\n');
    agentpack_lockfile::write_atomic(path, &bytes)?;
    Ok(())
}
