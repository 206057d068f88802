//! Removing the home layers of generations no launch uses any more.
//!
//! A layer belongs to one generation (its directory is named by the generation's id). After a
//! launch prepared its own layer, the layers of the same project and mode whose generation is
//! neither the one launched nor held by a live lease are removed. Removal never follows a link
//! (credentials and history are links to the user's real files, which stay). A retired Codex home
//! goes only when no wrapped process (a lease) and no daemon uses it: a daemon with loaded threads
//! keeps it, an idle daemon is stopped first (see [`super::codex_daemon`]), and a daemon that does
//! not answer keeps it with a warning.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::codex::codex_home_dir;
use super::codex_daemon::{self, DaemonUse};
use super::fsops::{io_error, list_names};
use super::HomeLayerError;

/// Every layer directory of a project and mode, with the generation id it belongs to.
pub fn layer_dirs(
    state_dir: &Path,
    mode_dir: &str,
    project_hash: &str,
    staging_root_override: Option<&Path>,
) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for parent in [
        state_dir.join("homes").join(mode_dir),
        state_dir.join("grok-homes").join(mode_dir),
    ] {
        for name in list_names(&parent) {
            let id = name.to_string_lossy().into_owned();
            out.push((id, parent.join(&name)));
        }
    }
    let mut codex_parents: Vec<PathBuf> = Vec::new();
    for root in [staging_root_override, None] {
        if let Some(parent) = codex_home_dir(root, project_hash, mode_dir, "x").parent() {
            if !codex_parents.iter().any(|p| p == parent) {
                codex_parents.push(parent.to_path_buf());
            }
        }
    }
    for parent in codex_parents {
        for name in list_names(&parent) {
            let text = name.to_string_lossy();
            if let Some(id) = text.strip_prefix("g-") {
                out.push((id.to_string(), parent.join(&name)));
            }
        }
    }
    out
}

/// What pruning did, for the caller to report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PruneReport {
    /// Layer directories removed.
    pub removed: Vec<PathBuf>,
    /// Codex homes whose idle daemon was stopped (before the home was removed).
    pub stopped_daemons: Vec<PathBuf>,
    /// Retired Codex homes kept because their daemon still has loaded threads.
    pub busy: Vec<PathBuf>,
    /// Homes kept for a reason the user may want to act on (a daemon that did not answer or
    /// could not be stopped).
    pub warnings: Vec<String>,
}

/// How pruning treats a retired layer's Codex daemon.
#[derive(Debug, Clone, Copy)]
pub struct DaemonPolicy<'a> {
    /// The user's `codex`, to stop a daemon whose home has no managed copy of Codex.
    pub codex: Option<&'a Path>,
    /// How long a daemon may take to say which threads it has loaded.
    pub probe_timeout: std::time::Duration,
}

impl Default for DaemonPolicy<'_> {
    fn default() -> Self {
        Self {
            codex: None,
            probe_timeout: codex_daemon::PROBE_TIMEOUT,
        }
    }
}

/// Whether a retired layer may go: `true` when nothing uses it (an idle daemon is stopped first).
fn release(dir: &Path, policy: &DaemonPolicy<'_>, report: &mut PruneReport) -> bool {
    match codex_daemon::probe(dir, policy.probe_timeout) {
        DaemonUse::NotRunning => true,
        DaemonUse::Busy { .. } => {
            report.busy.push(dir.to_path_buf());
            false
        }
        DaemonUse::Unknown(why) => {
            report.warnings.push(format!(
                "kept the retired Codex home {}: its daemon did not say whether it is in use ({why}); it is retried at the next sync or launch",
                dir.display()
            ));
            false
        }
        DaemonUse::Idle => match codex_daemon::stop(dir, policy.codex) {
            Ok(()) => {
                report.stopped_daemons.push(dir.to_path_buf());
                true
            }
            Err(error) => {
                report.warnings.push(format!(
                    "kept the retired Codex home {}: {error}",
                    dir.display()
                ));
                false
            }
        },
    }
}

/// Removes a layer directory (never following links); `false` when another agentpack process
/// removed it first.
fn remove_layer(dir: &Path) -> Result<bool, HomeLayerError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_error("remove", dir, e)),
    }
}

/// Removes the layers whose generation id is not in `keep` and that no Codex daemon uses.
pub fn prune_layers(
    state_dir: &Path,
    mode_dir: &str,
    project_hash: &str,
    staging_root_override: Option<&Path>,
    keep: &BTreeSet<String>,
    policy: &DaemonPolicy<'_>,
) -> Result<PruneReport, HomeLayerError> {
    let mut report = PruneReport::default();
    for (id, dir) in layer_dirs(state_dir, mode_dir, project_hash, staging_root_override) {
        if keep.contains(&id) {
            continue;
        }
        let is_dir = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
        if !is_dir || !release(&dir, policy, &mut report) {
            continue;
        }
        if remove_layer(&dir)? {
            report.removed.push(dir);
        }
    }
    prune_private_configs(
        state_dir,
        mode_dir,
        project_hash,
        staging_root_override,
        keep,
    )?;
    Ok(report)
}

/// Removes the private `config.toml` directories ([`super::codex::private_config_dir`]) of Codex
/// homes that are gone and not in `keep` (a home kept because its daemon is busy keeps its config).
fn prune_private_configs(
    state_dir: &Path,
    mode_dir: &str,
    project_hash: &str,
    staging_root_override: Option<&Path>,
    keep: &BTreeSet<String>,
) -> Result<(), HomeLayerError> {
    let parent = state_dir
        .join(super::codex::PRIVATE_CONFIG_DIR)
        .join(mode_dir);
    for name in list_names(&parent) {
        let text = name.to_string_lossy();
        let Some(id) = text.strip_prefix("g-") else {
            continue;
        };
        let home_exists = [staging_root_override, None].into_iter().any(|root| {
            std::fs::symlink_metadata(codex_home_dir(root, project_hash, mode_dir, id)).is_ok()
        });
        if keep.contains(id) || home_exists {
            continue;
        }
        remove_layer(&parent.join(&name))?;
    }
    Ok(())
}

/// Removes the Codex homes under `<base>/ap-c/` of projects that no longer exist (their
/// `.agentpack-project` names a missing directory), except generations in `live` (ids of
/// generations a live lease holds) and homes a daemon uses. Directories without the marker are
/// never touched.
pub fn prune_orphan_codex_homes(
    base: &Path,
    live: &BTreeSet<String>,
    policy: &DaemonPolicy<'_>,
) -> Result<PruneReport, HomeLayerError> {
    let root = base.join("ap-c");
    let mut report = PruneReport::default();
    for project in list_names(&root) {
        let project_dir = root.join(&project);
        let Ok(recorded) = std::fs::read_to_string(project_dir.join(".agentpack-project")) else {
            continue;
        };
        if Path::new(recorded.trim_end()).exists() {
            continue;
        }
        let mut kept = false;
        for mode in list_names(&project_dir) {
            let mode_dir = project_dir.join(&mode);
            if !std::fs::symlink_metadata(&mode_dir).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            for generation in list_names(&mode_dir) {
                let text = generation.to_string_lossy();
                let id = text.strip_prefix("g-").unwrap_or(&text);
                let dir = mode_dir.join(&generation);
                if live.contains(id) || !release(&dir, policy, &mut report) {
                    kept = true;
                    continue;
                }
                if remove_layer(&dir)? {
                    report.removed.push(dir);
                }
            }
        }
        if !kept && remove_layer(&project_dir)? {
            report.removed.push(project_dir);
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_home_whose_socket_does_not_answer_the_protocol_is_kept_with_a_warning() {
        let state = tempfile::tempdir().unwrap();
        let layer = state.path().join("homes/default/gen-old");
        std::fs::create_dir_all(layer.join("app-server-control")).unwrap();
        let listener =
            std::os::unix::net::UnixListener::bind(layer.join(codex_daemon::CONTROL_SOCKET))
                .unwrap();
        let keep = BTreeSet::new();
        // A project hash no other test uses: Codex homes of the default location are shared.
        let project_hash = format!(
            "prune-test-{}",
            state.path().file_name().unwrap().to_string_lossy()
        );
        let policy = DaemonPolicy {
            codex: None,
            probe_timeout: std::time::Duration::from_millis(200),
        };
        let report =
            prune_layers(state.path(), "default", &project_hash, None, &keep, &policy).unwrap();
        assert!(report.removed.is_empty(), "{report:?}");
        assert_eq!(report.warnings.len(), 1, "{report:?}");
        assert!(
            report.warnings[0].contains("did not say whether it is in use"),
            "{report:?}"
        );
        assert!(layer.is_dir());
        drop(listener);
        // A process another test forks at this moment may hold a copy of the listening socket until
        // it execs, so the socket can answer briefly after the drop: retry for a bounded time.
        let mut removed = Vec::new();
        for _ in 0..100 {
            removed = prune_layers(state.path(), "default", &project_hash, None, &keep, &policy)
                .unwrap()
                .removed;
            if !removed.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(removed, vec![layer.clone()]);
        assert!(!layer.exists());
    }
}
