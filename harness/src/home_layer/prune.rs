//! Removing the home layers of generations no launch uses any more.
//!
//! A layer belongs to one generation (its directory is named by the generation's id). After a
//! launch prepared its own layer, the layers of the same project and mode whose generation is
//! neither the one launched nor held by a live lease are removed. Removal never follows a link
//! (credentials and history are links to the user's real files, which stay). A Codex home whose
//! daemon still answers on its control socket is kept too: a retired generation goes only when no
//! wrapped process (a lease) and no daemon uses it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::codex::codex_home_dir;
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

/// Where a Codex daemon of the home at `dir` listens.
const CODEX_CONTROL_SOCKET: &str = "app-server-control/app-server-control.sock";

/// Whether a daemon still serves the home at `dir` (its control socket accepts a connection).
pub fn daemon_alive(dir: &Path) -> bool {
    let socket = dir.join(CODEX_CONTROL_SOCKET);
    socket.exists() && std::os::unix::net::UnixStream::connect(&socket).is_ok()
}

/// Removes the layers whose generation id is not in `keep`; returns what it removed.
pub fn prune_layers(
    state_dir: &Path,
    mode_dir: &str,
    project_hash: &str,
    staging_root_override: Option<&Path>,
    keep: &BTreeSet<String>,
) -> Result<Vec<PathBuf>, HomeLayerError> {
    let mut removed = Vec::new();
    for (id, dir) in layer_dirs(state_dir, mode_dir, project_hash, staging_root_override) {
        if keep.contains(&id) {
            continue;
        }
        let is_dir = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
        if !is_dir || daemon_alive(&dir) {
            continue;
        }
        std::fs::remove_dir_all(&dir).map_err(|e| io_error("remove", &dir, e))?;
        removed.push(dir);
    }
    Ok(removed)
}

/// Removes the Codex homes under `<base>/ap-c/` of projects that no longer exist (their
/// `.agentpack-project` names a missing directory), except generations in `live` (ids of
/// generations a live lease holds). Directories without the marker are never touched.
pub fn prune_orphan_codex_homes(
    base: &Path,
    live: &BTreeSet<String>,
) -> Result<Vec<PathBuf>, HomeLayerError> {
    let root = base.join("ap-c");
    let mut removed = Vec::new();
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
                if live.contains(id) || daemon_alive(&dir) {
                    kept = true;
                    continue;
                }
                std::fs::remove_dir_all(&dir).map_err(|e| io_error("remove", &dir, e))?;
                removed.push(dir);
            }
        }
        if !kept {
            std::fs::remove_dir_all(&project_dir)
                .map_err(|e| io_error("remove", &project_dir, e))?;
            removed.push(project_dir);
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_home_whose_daemon_answers_is_kept_until_the_daemon_is_gone() {
        let state = tempfile::tempdir().unwrap();
        let layer = state.path().join("homes/default/gen-old");
        std::fs::create_dir_all(layer.join("app-server-control")).unwrap();
        let listener =
            std::os::unix::net::UnixListener::bind(layer.join(CODEX_CONTROL_SOCKET)).unwrap();
        let keep = BTreeSet::new();
        // A project hash no other test uses: Codex homes of the default location are shared.
        let project_hash = format!(
            "prune-test-{}",
            state.path().file_name().unwrap().to_string_lossy()
        );
        let removed = prune_layers(state.path(), "default", &project_hash, None, &keep).unwrap();
        assert!(
            removed.is_empty(),
            "a live daemon keeps its home: {removed:?}"
        );
        assert!(layer.is_dir());
        drop(listener);
        // A process another test forks at this moment may hold a copy of the listening socket until
        // it execs, so the socket can answer briefly after the drop: retry for a bounded time.
        let mut removed = Vec::new();
        for _ in 0..100 {
            removed = prune_layers(state.path(), "default", &project_hash, None, &keep).unwrap();
            if !removed.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(removed, vec![layer.clone()]);
        assert!(!layer.exists());
    }
}
