//! Which files of a package were executable in its source.
//!
//! A package tree is stored with every regular file 0444 (`f` records: the docs' rule for
//! `content_hash` and the cache slot), but a hook script or a skill's helper must stay runnable
//! where it is staged. So the store remembers, beside the path's manifest, the regular files whose
//! source (tar header mode, git mode `100755`, a path package's mode) had an execute bit; staging
//! places those with the blob's executable variant. The record is part of the path's metadata
//! (`source_executables`), never of its tree, and never changes its name or hash.
//!
//! Recording rewrites the metadata file atomically (temp file, rename) and only when the set
//! changes; it never touches the tree.

use crate::error::Result;
use crate::fsutil;
use crate::lock::LockKind;
use crate::meta::{Entry, StorePathMeta};
use crate::names::StorePath;
use crate::store::Store;

impl Store {
    /// The regular files of `path` that were executable in its source, sorted (empty when none
    /// were, when nothing was recorded, or when `path` has no readable metadata).
    pub fn source_executables(&self, path: &StorePath) -> Vec<String> {
        self.cached_meta(path.name())
            .map(|meta| meta.source_executables.clone())
            .unwrap_or_default()
    }

    /// Records which regular files of the package `path` were executable in its source. Paths that
    /// are not regular files of `path` are ignored. Rewrites the metadata only when the set differs.
    /// A store whose metadata cannot be written (a read-only shared store) keeps what it had: a
    /// warning says so (see [`Store::take_warnings`]), and nothing fails.
    pub fn record_source_executables(
        &self,
        path: &StorePath,
        executables: &[String],
    ) -> Result<()> {
        match self.write_source_executables(path, executables) {
            Err(crate::error::StoreError::Io { cause: source, .. })
                if matches!(
                    source.raw_os_error(),
                    Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::ENOENT)
                ) =>
            {
                self.warn(format!(
                    "warning: cannot record which files of {} are executable ({source}); its staged copies keep mode 0444 until a writable store records them",
                    path.path().display()
                ));
                Ok(())
            }
            other => other,
        }
    }

    fn write_source_executables(&self, path: &StorePath, executables: &[String]) -> Result<()> {
        let _lock = self.lock(LockKind::Shared)?;
        let meta_path = self.meta_path(path.name().as_str());
        let mut meta = StorePathMeta::read(&meta_path)?;
        let mut wanted: Vec<String> = executables
            .iter()
            .filter(|relative| {
                meta.entries
                    .binary_search_by(|entry| entry.path().as_bytes().cmp(relative.as_bytes()))
                    .is_ok_and(|index| matches!(meta.entries[index], Entry::File { .. }))
            })
            .cloned()
            .collect();
        wanted.sort();
        wanted.dedup();
        if meta.source_executables == wanted {
            return Ok(());
        }
        meta.source_executables = wanted;
        agentpack_fs::write_file(&meta_path, &meta.to_bytes(), &self.meta_write())?;
        if self.flush {
            fsutil::fsync_dir(&self.dir.join(crate::store::META))?;
        }
        if let Ok(mut metas) = self.metas.lock() {
            metas.insert(path.name().clone(), std::sync::Arc::new(meta));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Store, StoreOptions};

    #[test]
    fn source_executables_are_recorded_beside_an_unchanged_tree() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(src.join("hooks")).unwrap();
        std::fs::write(src.join("hooks/run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::write(src.join("README.md"), "r\n").unwrap();
        let store = Store::open(&dir.path().join("cache"), StoreOptions::default()).unwrap();
        let package = store.publish_tree(&src, "demo", None).unwrap();
        let before = crate::hash_tree(package.path()).unwrap();
        assert!(store.source_executables(&package).is_empty());
        store
            .record_source_executables(
                &package,
                &["hooks/run.sh".into(), "missing.sh".into(), "hooks".into()],
            )
            .unwrap();
        assert_eq!(store.source_executables(&package), vec!["hooks/run.sh"]);
        assert_eq!(crate::hash_tree(package.path()).unwrap(), before);
        // A fresh handle reads it from the metadata file.
        let reopened = Store::open(&dir.path().join("cache"), StoreOptions::default()).unwrap();
        assert_eq!(reopened.source_executables(&package), vec!["hooks/run.sh"]);
    }
}
