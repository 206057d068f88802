//! What the fast paths compare: a launcher's (one agent) and a bare sync's (every agent) record
//! the fingerprint of their inputs after a full sync, in `$AGENTPACK_HOME/projects/<hash>/launch/`
//! (0600 files, see [`write_private`]), and take the fast path while it is unchanged.
//!
//! Reads the files it fingerprints (the manifest, the lock, the overlay, slots and path package
//! sources: see `harness::launch::fingerprint`); writes only the records.

use std::path::{Path, PathBuf};

use agentpack_harness::launch::fingerprint;
use agentpack_harness::Agent;
use anyhow::{Context as _, Result};

use crate::context::{Context, LOCK_FILE, MANIFEST_FILE};
use crate::env::{self, EnvVars};

fn mode_name(ctx: &Context) -> String {
    super::mode_name(ctx).to_owned()
}

/// What a fingerprint takes from the lock: the cache slot of every package, in lock order, and the
/// directories path and `local/` packages are copied from. A bare sync and a launcher record these
/// beside their fingerprint, so their fast paths need not parse the lock: the fingerprint covers
/// the lock's bytes, and while they are unchanged so is what they name.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LockInputs {
    pub cache_entries: Vec<PathBuf>,
    pub source_dirs: Vec<PathBuf>,
}

/// The [`LockInputs`] of `parsed_lock` (none for no lock).
pub fn lock_inputs(
    project_root: &Path,
    agentpack_home: &Path,
    parsed_lock: Option<&agentpack_lockfile::Lockfile>,
) -> LockInputs {
    let cache = agentpack_home.join("cache");
    let packages = parsed_lock
        .map(|l| l.packages.as_slice())
        .unwrap_or_default();
    let cache_entries: Vec<PathBuf> = packages
        .iter()
        .map(|p| cache.join(p.cache_key.as_str()))
        .collect();
    // Path packages and `local/` mirrors are copied again by every sync: their edits end the
    // fast path too.
    let source_dirs: Vec<PathBuf> = packages
        .iter()
        .filter_map(|p| {
            if let Some(dir) = p.url.strip_prefix("path:") {
                Some(project_root.join(dir))
            } else {
                p.url.strip_prefix("local:").map(|spec| {
                    agentpack_builders::local_package::local_mirror_dir(agentpack_home, spec)
                })
            }
        })
        .collect();
    LockInputs {
        cache_entries,
        source_dirs,
    }
}

/// What the fast paths (a launcher's, and a bare sync's when `agent` is `None`) fingerprint: the
/// manifest, the lock, the overlay of `workspace` and eject's record there, the mode, the
/// toggles, the generation, every cache slot of the lock (its link and store path, never its
/// files) and the directories path and `local/` packages are copied from (walked), as
/// `lock_inputs` names them ([`LockInputs`]: from [`lock_inputs`] of the parsed lock, or as a
/// fast path's record kept them, so the fast path need not parse the lock).
pub fn fingerprint_inputs_with(
    ctx: &Context,
    agent: Option<Agent>,
    project_root: &Path,
    workspace: &Path,
    generation: &Path,
    lock_inputs: LockInputs,
) -> (fingerprint::FingerprintInputs, fingerprint::ExtraInputs) {
    let lock = project_root.join(LOCK_FILE);
    let LockInputs {
        cache_entries,
        source_dirs,
    } = lock_inputs;
    let dot_agents = env::var(EnvVars::AGENTPACK_DOT_AGENTS).as_deref() != Some("0");
    let exe = std::env::current_exe().unwrap_or_default();
    let exe_stamp = fs_err::metadata(&exe)
        .ok()
        .and_then(|m| m.modified().ok())
        .map(|t| format!("{t:?}"))
        .unwrap_or_default();
    let inputs = fingerprint::FingerprintInputs {
        agent,
        mode: mode_name(ctx),
        manifest: project_root.join(MANIFEST_FILE),
        lock,
        overlay: dot_agents.then(|| workspace.join(".agents")),
        generation: generation.to_path_buf(),
        cache_entries,
        toggles: vec![
            format!(
                "keep_attribution={}",
                env::flag(EnvVars::AGENTPACK_KEEP_ATTRIBUTION)
            ),
            format!("dot_agents={dot_agents}"),
            format!(
                "require_verified={}",
                env::flag(EnvVars::AGENTPACK_REQUIRE_VERIFIED)
            ),
            format!("yolo={}", ctx.yolo),
            format!(
                "staging_root={:?}",
                env::var(EnvVars::AGENTPACK_STAGING_ROOT)
            ),
            format!("exe={} {exe_stamp}", exe.display()),
        ],
    };
    let extra = fingerprint::ExtraInputs {
        source_dirs,
        files: vec![workspace.join(agentpack_harness::render::eject::MANIFEST_PATH)],
    };
    (inputs, extra)
}

/// Writes `bytes` to `path` (0600), through a temporary file renamed over it.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().context("a record path has a parent")?;
    fs_err::create_dir_all(dir)?;
    // A record the next launch compares against: no fsync (a lost record only costs a rebuild).
    let options = agentpack_fs::WriteOptions::private_file()
        .durability(agentpack_fs::Durability::None)
        .temp(agentpack_fs::TempName::Prefix(".record-"));
    agentpack_fs::write_file(path, bytes, &options)?;
    Ok(())
}
