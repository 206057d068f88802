//! The project pointer: `<staging-root>/modes/<mode>`, a symlink to the selected generation.
//!
//! Switching writes a temporary symlink beside the pointer and `rename(2)`s it over the old one, so a
//! reader sees the old generation or the new one, never a half-switched state; a running agent keeps
//! the store path it resolved at launch. The pointer owns nothing: generations live in the store, and
//! the store's generation history (a GC root per entry) is what `rollback` chooses from.

use std::path::{Path, PathBuf};

/// Failures reading or switching a pointer.
#[derive(Debug, thiserror::Error)]
pub enum PointerError {
    #[error("{path} is a real directory, not a pointer agentpack made; move it away and run `agentpack sync` again")]
    NotAPointer { path: PathBuf },
    #[error("cannot switch the staging pointer {path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
}

/// One mode's pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModePointer {
    path: PathBuf,
}

impl ModePointer {
    /// The pointer of mode directory `mode_dir` under `staging_root`.
    pub fn new(staging_root: &Path, mode_dir: &str) -> Self {
        Self {
            path: staging_root.join("modes").join(mode_dir),
        }
    }

    /// Where the pointer is (`<staging-root>/modes/<mode>`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The generation the pointer selects, if it exists.
    pub fn current(&self) -> Option<PathBuf> {
        std::fs::read_link(&self.path).ok()
    }

    /// Points at `generation`, atomically. Already pointing there is a no-op.
    pub fn switch_to(&self, generation: &Path) -> Result<(), PointerError> {
        let io = |source| PointerError::Io {
            path: self.path.clone(),
            cause: source,
        };
        if let Ok(meta) = std::fs::symlink_metadata(&self.path) {
            if !meta.file_type().is_symlink() {
                return Err(PointerError::NotAPointer {
                    path: self.path.clone(),
                });
            }
            if self.current().as_deref() == Some(generation) {
                return Ok(());
            }
        }
        let parent = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(io)?;
        agentpack_fs::write_symlink(
            generation,
            &self.path,
            agentpack_fs::TempName::Hidden,
            agentpack_fs::Durability::FileAndDir,
        )
        .map_err(|err| io(err.source))
    }

    /// Removes the pointer (not the generation).
    pub fn remove(&self) -> Result<(), PointerError> {
        match std::fs::remove_file(&self.path) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(PointerError::Io {
                path: self.path.clone(),
                cause: err,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switching_replaces_the_link_atomically_and_refuses_a_real_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("gen-a"), tmp.path().join("gen-b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let pointer = ModePointer::new(&tmp.path().join("staging"), "default");
        assert_eq!(pointer.current(), None);
        pointer.switch_to(&a).unwrap();
        assert_eq!(pointer.current(), Some(a.clone()));
        pointer.switch_to(&b).unwrap();
        assert_eq!(pointer.current(), Some(b.clone()));
        let leftovers: Vec<_> = std::fs::read_dir(tmp.path().join("staging/modes"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from("default")]);

        let other = ModePointer::new(&tmp.path().join("staging"), "review");
        std::fs::create_dir_all(other.path()).unwrap();
        assert!(matches!(
            other.switch_to(&a),
            Err(PointerError::NotAPointer { .. })
        ));
        assert!(
            other.path().is_dir(),
            "a refused switch leaves the directory alone"
        );
    }
}
