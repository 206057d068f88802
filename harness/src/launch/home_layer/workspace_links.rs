//! The per-project overlay manifest: the workspace links launchers make (`./.cursor/agents` for
//! Cursor, `./.agents/plugins/agentpack-bundle` for Antigravity), recorded in
//! `$AGENTPACK_HOME/projects/<hash>/workspace-links.json` so that other launchers and bare `sync`
//! remove exactly those and nothing else.
//!
//! A link is removed only while it is still a symbolic link to what was recorded; a real file or
//! directory at that path is never touched. The parent directories `place` had to create for a link
//! (`./.cursor`, `./.agents`, `./.agents/plugins`) are recorded with it and removed with it, each
//! only while it is empty: a directory that was there before, or that holds anything, stays.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::fsops::{self, io_error};
use super::HomeLayerError;
use crate::agent::Agent;

/// The manifest's file name under the project state directory.
pub const FILE: &str = "workspace-links.json";

/// One recorded link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceLink {
    /// `cursor` or `agy`.
    pub agent: String,
    pub link: PathBuf,
    pub target: PathBuf,
    /// The directories `place` created for the link, outermost first (absent from manifests
    /// written before they were recorded: those directories are left alone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created_dirs: Vec<PathBuf>,
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

/// The directories of `dir` and its ancestors that do not exist, outermost first.
fn missing_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut missing = Vec::new();
    let mut current = Some(dir);
    while let Some(path) = current {
        if path.as_os_str().is_empty() || fs::symlink_metadata(path).is_ok() {
            break;
        }
        missing.push(path.to_path_buf());
        current = path.parent();
    }
    missing.reverse();
    missing
}

/// Removes the directories recorded as created for `recorded`'s link, innermost first, each only
/// while it is empty. Only ancestors of the link are considered (whatever else a manifest names is
/// ignored); a directory replaced by a link is not followed. Returns warnings for directories that
/// are empty but could not be removed.
fn remove_created_dirs(recorded: &WorkspaceLink) -> Vec<String> {
    let mut warnings = Vec::new();
    for dir in recorded.created_dirs.iter().rev() {
        if *dir == recorded.link || !recorded.link.starts_with(dir) {
            continue;
        }
        match fs::remove_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            // Holds something (so do its parents), or is no longer a directory: it stays.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::DirectoryNotEmpty | std::io::ErrorKind::NotADirectory
                ) =>
            {
                break
            }
            Err(e) => {
                warnings.push(format!(
                    "cannot remove {}, the empty directory agentpack made for {}: {e}; remove it yourself",
                    dir.display(),
                    recorded.link.display()
                ));
                break;
            }
        }
    }
    warnings
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
                warnings.extend(remove_created_dirs(&recorded));
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

    /// Removes `agent`'s link at `link` if it is recorded and still ours, and the directories made
    /// for it that are empty. Returns warnings for empty ones that could not be removed.
    pub fn remove_agent_link(
        &mut self,
        agent: Agent,
        link: &Path,
    ) -> Result<Vec<String>, HomeLayerError> {
        let position = self
            .links
            .iter()
            .position(|l| l.agent == agent.as_str() && l.link == link);
        let mut warnings = Vec::new();
        if let Some(index) = position {
            let recorded = self.links.remove(index);
            if is_ours(link, Some(&recorded)) {
                fs::remove_file(link).map_err(|e| io_error("remove", link, e))?;
                warnings.extend(remove_created_dirs(&recorded));
            }
        }
        Ok(warnings)
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
        let created = link.parent().map(missing_dirs).unwrap_or_default();
        // Directories made for this link by an earlier `place` stay agentpack's own.
        let mut created_dirs: Vec<PathBuf> = recorded
            .map(|r| r.created_dirs)
            .unwrap_or_default()
            .into_iter()
            .filter(|dir| link.starts_with(dir) && !created.contains(dir))
            .collect();
        created_dirs.extend(created.iter().cloned());
        created_dirs.sort_by_key(|dir| dir.components().count());
        let made = link
            .parent()
            .map_or(Ok(()), fsops::plain_dir)
            .and_then(|()| fsops::ensure_symlink(link, target));
        if let Err(error) = made {
            // A failed launch leaves the workspace as it was: what was created for it goes again.
            for dir in created.iter().rev() {
                let _ = fs::remove_dir(dir);
            }
            return Err(error);
        }
        let entry = WorkspaceLink {
            agent: agent.as_str().to_string(),
            link: link.to_path_buf(),
            target: target.to_path_buf(),
            created_dirs,
        };
        self.links.retain(|l| l.link != link);
        self.links.push(entry.clone());
        Ok(Some(entry))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    struct Fixture {
        _temp: tempfile::TempDir,
        workspace: PathBuf,
        state: PathBuf,
        target: PathBuf,
    }

    fn fixture() -> Fixture {
        let temp = tempfile::tempdir().unwrap();
        let workspace = temp.path().join("project");
        let state = temp.path().join("state");
        let target = temp.path().join("generation/agy/agentpack-bundle");
        fs::create_dir_all(&workspace).unwrap();
        fs::create_dir_all(&state).unwrap();
        fs::create_dir_all(&target).unwrap();
        Fixture {
            _temp: temp,
            workspace,
            state,
            target,
        }
    }

    #[test]
    fn directories_place_created_are_recorded_and_removed_with_the_link() {
        let f = fixture();
        let link = f.workspace.join(".agents/plugins/agentpack-bundle");
        let mut links = WorkspaceLinks::load(&f.state).unwrap();
        let placed = links
            .place(Agent::Antigravity, &link, &f.target)
            .unwrap()
            .unwrap();
        assert_eq!(
            placed.created_dirs,
            [
                f.workspace.join(".agents"),
                f.workspace.join(".agents/plugins")
            ]
        );
        links.save().unwrap();

        // Placing again (the next launch) keeps what the first one created.
        let mut links = WorkspaceLinks::load(&f.state).unwrap();
        let again = links
            .place(Agent::Antigravity, &link, &f.target)
            .unwrap()
            .unwrap();
        assert_eq!(again.created_dirs, placed.created_dirs);
        links.save().unwrap();

        let mut links = WorkspaceLinks::load(&f.state).unwrap();
        assert!(links.remove_all_except(None).unwrap().is_empty());
        assert!(!f.workspace.join(".agents").exists());
        assert!(f.workspace.is_dir());
    }

    #[test]
    fn a_directory_that_existed_or_holds_a_file_stays() {
        let f = fixture();
        fs::create_dir_all(f.workspace.join(".agents")).unwrap();
        let link = f.workspace.join(".agents/plugins/agentpack-bundle");
        let mut links = WorkspaceLinks::load(&f.state).unwrap();
        let placed = links
            .place(Agent::Antigravity, &link, &f.target)
            .unwrap()
            .unwrap();
        assert_eq!(placed.created_dirs, [f.workspace.join(".agents/plugins")]);
        links.remove_all_except(None).unwrap();
        assert!(!f.workspace.join(".agents/plugins").exists());
        assert!(
            f.workspace.join(".agents").is_dir(),
            "the user's directory stays"
        );

        // Something the user put in a directory agentpack made keeps it (and its parents).
        let cursor_target = f.target.parent().unwrap().join("agents");
        fs::create_dir_all(&cursor_target).unwrap();
        let cursor_link = f.workspace.join(".cursor/agents");
        links
            .place(Agent::Cursor, &cursor_link, &cursor_target)
            .unwrap()
            .unwrap();
        fs::write(f.workspace.join(".cursor/mine.json"), "{}").unwrap();
        links
            .remove_agent_link(Agent::Cursor, &cursor_link)
            .unwrap();
        assert!(fs::symlink_metadata(&cursor_link).is_err());
        assert!(f.workspace.join(".cursor/mine.json").is_file());
    }

    #[test]
    fn a_manifest_without_created_dirs_still_loads_and_removes_only_the_link() {
        let f = fixture();
        let link = f.workspace.join(".agents/plugins/agentpack-bundle");
        fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&f.target, &link).unwrap();
        let old = serde_json::json!({
            "version": 1,
            "links": [{"agent": "agy", "link": link, "target": f.target}],
        });
        fs::write(f.state.join(FILE), old.to_string()).unwrap();
        let mut links = WorkspaceLinks::load(&f.state).unwrap();
        assert_eq!(links.links().len(), 1);
        assert!(links.links()[0].created_dirs.is_empty());
        links.remove_all_except(None).unwrap();
        assert!(fs::symlink_metadata(&link).is_err());
        assert!(
            f.workspace.join(".agents/plugins").is_dir(),
            "not recorded as agentpack's: left alone"
        );
    }

    #[test]
    fn a_recorded_directory_that_is_not_an_ancestor_of_the_link_is_ignored() {
        let f = fixture();
        let link = f.workspace.join(".cursor/agents");
        let elsewhere = f.workspace.join("empty-user-dir");
        fs::create_dir_all(&elsewhere).unwrap();
        fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&f.target, &link).unwrap();
        let recorded = WorkspaceLink {
            agent: "cursor".into(),
            link: link.clone(),
            target: f.target.clone(),
            created_dirs: vec![elsewhere.clone(), link.parent().unwrap().to_path_buf()],
        };
        fs::remove_file(&link).unwrap();
        assert!(remove_created_dirs(&recorded).is_empty());
        assert!(elsewhere.is_dir());
        assert!(!f.workspace.join(".cursor").exists());
    }
}
