//! Eject's previous files set aside under `.agentpack/eject/.aside/` while a sync reads the
//! overlay, and recovery of an aside a killed run left.
//!
//! Must never delete a file it did not move aside itself.

use std::path::{Path, PathBuf};

use agentpack_harness::render::eject::EjectManifest;
use anyhow::Result;

use super::*;

/// Eject's previous files under `./.agents/`, moved to `.agentpack/eject/.aside/` while the sync
/// reads the overlay (a toolkit transaction of `set_aside` steps), and the recorded directories that
/// became empty (removed).
pub(super) struct Aside {
    root: PathBuf,
    moved: agentpack_fs::Transaction,
}

pub(super) const ASIDE_DIR: &str = ".agentpack/eject/.aside";

impl Aside {
    pub(super) fn set(root: &Path, previous: &EjectManifest) -> Result<Self> {
        // A leftover of an interrupted run goes back first.
        recover_leftover_aside(root)?;
        let mut moved = agentpack_fs::Transaction::new();
        for file in previous
            .files
            .iter()
            .filter(|f| f.path.starts_with(".agents/"))
        {
            let from = root.join(&file.path);
            if !from.is_file() {
                continue;
            }
            if let Err(error) = moved.set_aside(&from, &root.join(ASIDE_DIR).join(&file.path)) {
                let _ = moved.rollback();
                return Err(error.into());
            }
        }
        let mut dirs: Vec<&String> = previous
            .dirs
            .iter()
            .filter(|d| *d == ".agents" || d.starts_with(".agents/"))
            .collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
        for dir in dirs {
            let _ = fs_err::remove_dir(root.join(dir));
        }
        Ok(Aside {
            root: root.to_path_buf(),
            moved,
        })
    }

    /// Puts everything back (the plan was refused).
    pub(super) fn restore(mut self) -> Result<()> {
        if let Some(error) = self.moved.rollback().into_iter().next() {
            return Err(error.into());
        }
        remove_tree_if_present(&self.root.join(ASIDE_DIR))
    }

    /// Drops the set-aside copies (the plan writes them again).
    pub(super) fn discard(mut self) -> Result<()> {
        if let Some(error) = self.moved.commit().into_iter().next() {
            return Err(error.into());
        }
        remove_tree_if_present(&self.root.join(ASIDE_DIR))
    }
}

/// Moves back what an interrupted run left under [`ASIDE_DIR`] (a file the user put back meanwhile
/// wins), then removes that directory.
pub(super) fn recover_leftover_aside(root: &Path) -> Result<()> {
    let aside_root = root.join(ASIDE_DIR);
    if !aside_root.is_dir() {
        return Ok(());
    }
    for file in read_generation(&aside_root)? {
        let to = root.join(&file.relative);
        if let Some(parent) = to.parent() {
            fs_err::create_dir_all(parent)?;
        }
        if !to.exists() {
            fs_err::rename(aside_root.join(&file.relative), &to)?;
        }
    }
    remove_tree_if_present(&aside_root)
}

pub(super) fn remove_tree_if_present(path: &Path) -> Result<()> {
    match fs_err::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error.into()),
    }
}
