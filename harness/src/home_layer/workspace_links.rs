//! The per-project overlay manifest: the workspace links launchers make (`./.cursor/agents` for
//! Cursor, `./.agents/plugins/agentpack-bundle` for Antigravity), recorded in
//! `$AGENTPACK_HOME/projects/<hash>/workspace-links.json` so that other launchers and bare `sync`
//! remove exactly those and nothing else.
//!
//! A link is removed only while it is still a symbolic link to what was recorded; a real file or
//! directory at that path is never touched.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::fsops::{self, io_error};
use super::HomeLayerError;
use crate::plan::Agent;

/// The manifest's file name under the project state directory.
pub const FILE: &str = "workspace-links.json";

/// One recorded link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceLink {
    /// `cursor` or `agy`.
    pub agent: String,
    pub link: PathBuf,
    pub target: PathBuf,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    version: u32,
    links: Vec<WorkspaceLink>,
}

/// The manifest of one project, loaded.
#[derive(Debug)]
pub struct WorkspaceLinks {
    file: PathBuf,
    links: Vec<WorkspaceLink>,
}

fn is_ours(link: &Path, recorded: Option<&WorkspaceLink>) -> bool {
    let Ok(meta) = fs::symlink_metadata(link) else {
        return false;
    };
    if !meta.file_type().is_symlink() {
        return false;
    }
    let Ok(target) = fs::read_link(link) else {
        return false;
    };
    recorded.is_some_and(|r| r.target == target)
        || target.ends_with("cursor/agentpack-bundle/agents")
        || target.ends_with("agy/agentpack-bundle")
}

impl WorkspaceLinks {
    /// Loads the manifest of the project whose state directory is `state_dir` (empty when none).
    pub fn load(state_dir: &Path) -> Result<Self, HomeLayerError> {
        let file = state_dir.join(FILE);
        let links = match fsops::read_optional(&file)? {
            Some(text) => serde_json::from_str::<Manifest>(&text)
                .map(|m| m.links)
                .unwrap_or_default(),
            None => Vec::new(),
        };
        Ok(Self { file, links })
    }

    /// The recorded links.
    pub fn links(&self) -> &[WorkspaceLink] {
        &self.links
    }

    /// Writes the manifest back (removes the file when nothing is recorded).
    pub fn save(&self) -> Result<(), HomeLayerError> {
        if self.links.is_empty() {
            return fsops::remove_any(&self.file);
        }
        let manifest = Manifest {
            version: 1,
            links: self.links.clone(),
        };
        let mut bytes = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
        bytes.push(b'\n');
        fsops::write_file(&self.file, &bytes, 0o600)
    }

    /// Removes every recorded link except those of `keep` (bare `sync` passes `None`). Returns
    /// warnings for recorded paths that are no longer agentpack's links (left alone, forgotten).
    pub fn remove_all_except(
        &mut self,
        keep: Option<Agent>,
    ) -> Result<Vec<String>, HomeLayerError> {
        let mut warnings = Vec::new();
        let mut kept = Vec::new();
        for recorded in std::mem::take(&mut self.links) {
            if keep.is_some_and(|agent| agent.as_str() == recorded.agent) {
                kept.push(recorded);
                continue;
            }
            if is_ours(&recorded.link, Some(&recorded)) {
                fs::remove_file(&recorded.link)
                    .map_err(|e| io_error("remove", &recorded.link, e))?;
            } else if fs::symlink_metadata(&recorded.link).is_ok() {
                warnings.push(format!(
                    "{} is no longer the link agentpack made; left it alone",
                    recorded.link.display()
                ));
            }
        }
        self.links = kept;
        Ok(warnings)
    }

    /// Removes `agent`'s link at `link` if it is recorded and still ours.
    pub fn remove_agent_link(&mut self, agent: Agent, link: &Path) -> Result<(), HomeLayerError> {
        let position = self
            .links
            .iter()
            .position(|l| l.agent == agent.as_str() && l.link == link);
        if let Some(index) = position {
            let recorded = self.links.remove(index);
            if is_ours(link, Some(&recorded)) {
                fs::remove_file(link).map_err(|e| io_error("remove", link, e))?;
            }
        }
        Ok(())
    }

    /// Makes `link` point at `target` and records it. Returns `None` (and changes nothing) when a
    /// real file or directory, or a link agentpack did not make, is in the way.
    pub fn place(
        &mut self,
        agent: Agent,
        link: &Path,
        target: &Path,
    ) -> Result<Option<WorkspaceLink>, HomeLayerError> {
        let recorded = self.links.iter().find(|l| l.link == link).cloned();
        if fs::symlink_metadata(link).is_ok() && !is_ours(link, recorded.as_ref()) {
            return Ok(None);
        }
        if let Some(parent) = link.parent() {
            fsops::plain_dir(parent)?;
        }
        fsops::ensure_symlink(link, target)?;
        let entry = WorkspaceLink {
            agent: agent.as_str().to_string(),
            link: link.to_path_buf(),
            target: target.to_path_buf(),
        };
        self.links.retain(|l| l.link != link);
        self.links.push(entry.clone());
        Ok(Some(entry))
    }
}
