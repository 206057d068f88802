//! Bindings made by `agentpack env use`: which environment a checkout uses when no root flag is
//! given.
//!
//! One JSON file per checkout, `$AGENTPACK_HOME/bindings/<hash of the canonical checkout>.json`,
//! written atomically (temp file and rename), so two `env use` of different checkouts never lose
//! each other's binding. Bindings are host-local: an export never carries them. Never follows a
//! binding to another one: a checkout has exactly one, or none.

use std::path::{Path, PathBuf};

use agentpack_lockfile::keys;
use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

/// The directory under `AGENTPACK_HOME` that holds the bindings.
pub const BINDINGS_DIR: &str = "bindings";

/// One checkout bound to one environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// The canonical checkout.
    pub project: PathBuf,
    /// The environment's name, as given to `env use`.
    pub environment: String,
    /// The environment's directory: the definition root.
    pub definition_root: PathBuf,
}

/// What is stored: the binding and a format version.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    version: u32,
    #[serde(flatten)]
    binding: Binding,
}

const VERSION: u32 = 1;

fn binding_path(agentpack_home: &Path, canonical_project: &Path) -> PathBuf {
    agentpack_home
        .join(BINDINGS_DIR)
        .join(format!("{}.json", keys::project_hash(canonical_project)))
}

/// The binding of exactly `canonical_project`, if any.
pub fn read(agentpack_home: &Path, canonical_project: &Path) -> Result<Option<Binding>> {
    let path = binding_path(agentpack_home, canonical_project);
    let text = match fs_err::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    let stored: Stored = serde_json::from_str(&text).with_context(|| {
        format!(
            "the binding {} does not parse\n  fix  remove it and bind again with `agentpack env use NAME --project {}`",
            path.display(),
            canonical_project.display()
        )
    })?;
    // A hash collision (or a moved file) is not this checkout's binding.
    Ok(
        (stored.version == VERSION && stored.binding.project == canonical_project)
            .then_some(stored.binding),
    )
}

/// The binding of `start` or of its nearest bound parent directory.
pub fn nearest(agentpack_home: &Path, start: &Path) -> Result<Option<Binding>> {
    if !agentpack_home.join(BINDINGS_DIR).is_dir() {
        return Ok(None);
    }
    let Ok(start) = fs_err::canonicalize(start) else {
        return Ok(None);
    };
    for dir in start.ancestors() {
        if let Some(binding) = read(agentpack_home, dir)? {
            return Ok(Some(binding));
        }
    }
    Ok(None)
}

/// Writes (or replaces) the binding of `binding.project`.
pub fn write(agentpack_home: &Path, binding: &Binding) -> Result<()> {
    let path = binding_path(agentpack_home, &binding.project);
    let dir = agentpack_home.join(BINDINGS_DIR);
    fs_err::create_dir_all(&dir)?;
    let stored = Stored {
        version: VERSION,
        binding: binding.clone(),
    };
    let mut bytes = serde_json::to_vec_pretty(&stored)?;
    bytes.push(b'\n');
    // 0600 and no fsync, as the temp file it replaced (tempfile's NamedTempFile) had.
    let options =
        agentpack_fs::WriteOptions::private_file().durability(agentpack_fs::Durability::None);
    agentpack_fs::write_file(&path, &bytes, &options)?;
    Ok(())
}

/// Removes the binding of exactly `canonical_project`; false when there was none.
pub fn remove(agentpack_home: &Path, canonical_project: &Path) -> Result<bool> {
    if read(agentpack_home, canonical_project)?.is_none() {
        return Ok(false);
    }
    fs_err::remove_file(binding_path(agentpack_home, canonical_project))?;
    Ok(true)
}

/// Every binding on this host, sorted by checkout; files that do not parse are skipped.
pub fn all(agentpack_home: &Path) -> Result<Vec<Binding>> {
    let dir = agentpack_home.join(BINDINGS_DIR);
    let entries = match fs_err::read_dir(&dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err.into()),
    };
    let mut bindings = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_none_or(|ext| ext != "json") {
            continue;
        }
        let Ok(text) = fs_err::read_to_string(&path) else {
            continue;
        };
        if let Ok(stored) = serde_json::from_str::<Stored>(&text) {
            if stored.version == VERSION {
                bindings.push(stored.binding);
            }
        }
    }
    bindings.sort_by(|a, b| a.project.cmp(&b.project));
    Ok(bindings)
}
