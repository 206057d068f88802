//! What a generation is a function of, gathered from the session: the verified packages of a
//! [`Resolved`](super::Resolved), the mode, the workspace's `./.agents/` overlay (less what
//! `agentpack eject` wrote there) and the manifest's MCP servers.
//!
//! Reads the overlay (its tree hash) and eject's record; writes nothing. Staging, `sync --dry-run`
//! and preflight use the same [`overlay_for`], so they agree on what the overlay is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use agentpack_harness::launch::home_layer::AGY_OVERLAY_LINK;
use agentpack_harness::ModeFilter;
use agentpack_lockfile::Selector;
use agentpack_store::hash_tree_without_link;

use super::mode::ResolvedMode;
use super::PipelineError;

/// The files `agentpack eject` recorded under `./.agents/` (relative to it), from
/// `.agentpack/eject/manifest.json` of `workspace`; none when there is no such record. A record
/// that does not parse gives none and a warning.
pub fn ejected_overlay_files(workspace: &Path) -> (Vec<String>, Option<String>) {
    let path = workspace.join(agentpack_harness::render::eject::MANIFEST_PATH);
    let Ok(text) = fs_err::read_to_string(&path) else {
        return (Vec::new(), None);
    };
    match serde_json::from_str::<agentpack_harness::render::eject::EjectManifest>(&text) {
        Ok(manifest) => (
            manifest
                .files
                .iter()
                .filter_map(|file| file.path.strip_prefix(".agents/"))
                .map(str::to_owned)
                .collect(),
            None,
        ),
        Err(error) => (
            Vec::new(),
            Some(format!(
                "{} does not parse ({error}); files eject wrote under .agents/ cannot be told from yours and are staged as the project overlay\n  fix  restore it from version control",
                path.display()
            )),
        ),
    }
}

/// Whether `overlay_dir` holds anything besides eject's files and agy's workspace link.
pub fn has_own_files(overlay_dir: &Path, ejected: &[String]) -> bool {
    if ejected.is_empty() {
        return true;
    }
    let ejected: BTreeSet<&str> = ejected.iter().map(String::as_str).collect();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let Ok(entries) = fs_err::read_dir(overlay_dir.join(&relative)) else {
            // Unreadable: let the overlay reader say what is wrong.
            return true;
        };
        for entry in entries.flatten() {
            let relative = relative.join(entry.file_name());
            let text = relative.to_string_lossy();
            let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
            if is_dir {
                pending.push(relative);
            } else if text != AGY_OVERLAY_LINK && !ejected.contains(text.as_ref()) {
                return true;
            }
        }
    }
    false
}

/// The mode as staged with the workspace's overlay: what eject wrote under `./.agents/` is
/// output, never an input (the filter leaves it out, the selectors say so), and an overlay of
/// nothing else (or agy's workspace link alone) is no overlay.
#[derive(Debug, Clone)]
pub struct OverlaidMode {
    pub filter: ModeFilter,
    pub selectors: Vec<String>,
    /// The overlay directory and its tree hash, when there is one to stage.
    pub overlay: Option<(PathBuf, String)>,
    pub warnings: Vec<String>,
}

/// [`OverlaidMode`] of `mode` over `workspace`; `dot_agents` false (`AGENTPACK_DOT_AGENTS=0`)
/// stages no overlay.
pub fn overlay_for(
    mode: &ResolvedMode,
    workspace: &Path,
    dot_agents: bool,
) -> Result<OverlaidMode, PipelineError> {
    let overlay_dir = workspace.join(".agents");
    let (ejected, warning) = ejected_overlay_files(workspace);
    let own_files = has_own_files(&overlay_dir, &ejected);
    let (filter, selectors) = if ejected.is_empty() || !own_files {
        (mode.filter.clone(), mode.selectors.clone())
    } else {
        let mut declared = mode.declared.clone();
        declared
            .disable
            .extend(ejected.iter().cloned().map(Selector::Agents));
        let mut selectors = mode.selectors.clone();
        selectors.extend(ejected.iter().map(|path| format!("ejected=.agents/{path}")));
        (ModeFilter::from_mode(&declared), selectors)
    };
    let overlay = if dot_agents && overlay_dir.is_dir() && own_files {
        hash_tree_without_link(&overlay_dir, AGY_OVERLAY_LINK)
            .map_err(|source| PipelineError::Overlay {
                path: overlay_dir.clone(),
                source: Box::new(source),
            })?
            .map(|hash| (overlay_dir, hash.to_string()))
    } else {
        None
    };
    Ok(OverlaidMode {
        filter,
        selectors,
        overlay,
        warnings: warning.into_iter().collect(),
    })
}

/// Each locked package's verified store path, from the slots resolution left.
pub fn locked_packages(
    store: &agentpack_store::Store,
    lock: &agentpack_lockfile::Lockfile,
    slots: &BTreeMap<String, PathBuf>,
) -> Result<Vec<crate::generation::LockedPackageInput>, PipelineError> {
    lock.packages
        .iter()
        .map(|package| {
            let module = package.module.as_str();
            let store_path = slots
                .get(module)
                .and_then(|slot| store.store_path_of(slot))
                .ok_or_else(|| PipelineError::NoVerifiedEntry {
                    module: module.to_owned(),
                })?;
            Ok(crate::generation::LockedPackageInput::new(
                package, store_path,
            ))
        })
        .collect()
}
