//! Materializing: putting a store path (or a list of files) somewhere outside the store by the best
//! link mode, reporting the mode actually used.
//!
//! Directories are created writable (0755) so the caller can add to them; files keep the store's
//! read-only modes (a hard link shares the inode, so it cannot differ); symlinks are recreated; empty
//! files are created fresh (never linked). Never changes anything inside the store.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::error::{IoContext, Result, StoreError};
use crate::link::{create_empty, LinkMethod, LinkMode, LINK_MODE_ENV};
use crate::names::StorePath;
use crate::publish::file_mode;
use crate::store::Store;

/// What a materialization did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MaterializeReport {
    /// The link mode asked for.
    pub requested: LinkMode,
    /// Files placed per method actually used.
    pub methods: BTreeMap<LinkMethod, usize>,
    /// Empty files created fresh.
    pub empty_files: usize,
    /// Symbolic links recreated.
    pub symlinks: usize,
    /// Directories created.
    pub directories: usize,
    /// Warnings for the cli to print (e.g. a requested mode that had to fall back).
    pub warnings: Vec<String>,
}

impl MaterializeReport {
    /// The method used for most files (`None` when no non-empty file was placed).
    pub fn method(&self) -> Option<LinkMethod> {
        self.methods
            .iter()
            .max_by_key(|(_, count)| **count)
            .map(|(method, _)| *method)
    }

    /// Non-empty files placed.
    pub fn files(&self) -> usize {
        self.methods.values().sum()
    }

    fn finish(&mut self, requested: LinkMode) {
        self.requested = requested;
        let wanted = match requested {
            LinkMode::Reflink => Some(LinkMethod::Reflink),
            LinkMode::Hardlink => Some(LinkMethod::Hardlink),
            LinkMode::Auto | LinkMode::Copy => None,
        };
        if let Some(wanted) = wanted {
            let fallbacks: usize = self
                .methods
                .iter()
                .filter(|(m, _)| **m != wanted)
                .map(|(_, c)| *c)
                .sum();
            if fallbacks > 0 {
                self.warnings.push(format!(
                    "warning: {fallbacks} file(s) could not be placed by {wanted} and were copied instead; set {LINK_MODE_ENV}=copy to silence this warning"
                ));
            }
        }
    }
}

enum Item {
    Dir(PathBuf),
    Link(PathBuf, PathBuf),
    File {
        src: PathBuf,
        dst: PathBuf,
        size: u64,
        exec: bool,
    },
}

impl Store {
    /// Materialize the store path `path` at `dest` (which must not exist, or be an empty directory).
    pub fn materialize(&self, path: &StorePath, dest: &Path) -> Result<MaterializeReport> {
        let refuse = |kind: std::io::ErrorKind, why: &str| {
            StoreError::io("materialize into", dest, std::io::Error::new(kind, why))
        };
        match std::fs::symlink_metadata(dest) {
            Ok(meta) if meta.is_dir() => {
                let mut entries = fs_err::read_dir(dest).ctx("list", dest)?;
                if entries.next().is_some() {
                    return Err(refuse(
                        std::io::ErrorKind::DirectoryNotEmpty,
                        "the destination is not empty",
                    ));
                }
            }
            Ok(_) => {
                return Err(refuse(
                    std::io::ErrorKind::AlreadyExists,
                    "the destination exists and is not a directory",
                ))
            }
            Err(_) => fs_err::create_dir_all(dest).ctx("create", dest)?,
        }
        let root = path.path();
        let mut items = Vec::new();
        for entry in walkdir::WalkDir::new(root).follow_links(false).min_depth(1) {
            let entry = entry.map_err(|err| StoreError::walk(root, err))?;
            let relative = entry.path().strip_prefix(root).unwrap_or(entry.path());
            let dst = dest.join(relative);
            let file_type = entry.file_type();
            if file_type.is_dir() {
                items.push(Item::Dir(dst));
            } else if file_type.is_symlink() {
                let target = fs_err::read_link(entry.path()).ctx("read link", entry.path())?;
                items.push(Item::Link(target, dst));
            } else {
                let meta = StoreError::entry_metadata(&entry)?;
                let exec = meta.permissions().mode() & 0o111 != 0;
                items.push(Item::File {
                    src: entry.path().to_path_buf(),
                    dst,
                    size: meta.len(),
                    exec,
                });
            }
        }
        self.place_items(items)
    }

    /// Place each `(source, destination)` pair: a regular file by the link mode, a symlink recreated.
    /// Parent directories are created; destinations must not exist.
    pub fn link_files(&self, pairs: &[(PathBuf, PathBuf)]) -> Result<MaterializeReport> {
        let mut items = Vec::new();
        let mut parents = std::collections::BTreeSet::new();
        for (src, dst) in pairs {
            if let Some(parent) = dst.parent() {
                parents.insert(parent.to_path_buf());
            }
            let meta = fs_err::symlink_metadata(src).ctx("inspect", src)?;
            if meta.file_type().is_symlink() {
                items.push(Item::Link(
                    fs_err::read_link(src).ctx("read link", src)?,
                    dst.clone(),
                ));
            } else if meta.is_file() {
                let exec = meta.permissions().mode() & 0o111 != 0;
                items.push(Item::File {
                    src: src.clone(),
                    dst: dst.clone(),
                    size: meta.len(),
                    exec,
                });
            } else {
                return Err(StoreError::UnsupportedFileType { path: src.clone() });
            }
        }
        for parent in &parents {
            fs_err::create_dir_all(parent).ctx("create", parent)?;
        }
        self.place_items(items)
    }

    /// The method placing files within the store's filesystem uses (probed once with two temp files,
    /// then remembered).
    pub fn probe_link_method(&self) -> Result<LinkMethod> {
        if let Some(method) = self.linker.remembered(self.dev, self.dev) {
            return Ok(method);
        }
        let tmp = self.tmp_dir();
        let probe = tmp.join(crate::fsutil::unique_name("probe-"));
        let target = tmp.join(crate::fsutil::unique_name("probe-"));
        fs_err::write(&probe, b"probe").ctx("write", &probe)?;
        let placed = self
            .linker
            .place(&probe, &target, self.dev, self.dev, 0o444);
        let _ = std::fs::remove_file(&probe);
        let _ = std::fs::remove_file(&target);
        Ok(placed?.method)
    }

    fn place_items(&self, items: Vec<Item>) -> Result<MaterializeReport> {
        let mut report = MaterializeReport::default();
        let mut files = Vec::new();
        for item in items {
            match item {
                Item::Dir(dst) => {
                    fs_err::create_dir(&dst).ctx("create", &dst)?;
                    report.directories += 1;
                }
                Item::Link(target, dst) => {
                    std::os::unix::fs::symlink(&target, &dst).ctx("create link", &dst)?;
                    report.symlinks += 1;
                }
                Item::File {
                    src,
                    dst,
                    size,
                    exec,
                } => files.push((src, dst, size, exec)),
            }
        }
        let placed: Vec<Option<LinkMethod>> = files
            .par_iter()
            .map(|(src, dst, size, exec)| {
                if *size == 0 {
                    create_empty(dst, file_mode(*exec))?;
                    return Ok(None);
                }
                let src_dev = fs_err::metadata(src).ctx("inspect", src)?.dev();
                let parent = dst.parent().unwrap_or(Path::new("."));
                let dst_dev = fs_err::metadata(parent).ctx("inspect", parent)?.dev();
                let placed = self
                    .linker
                    .place(src, dst, src_dev, dst_dev, file_mode(*exec))?;
                Ok(Some(placed.method))
            })
            .collect::<Result<_>>()?;
        for method in placed {
            match method {
                Some(method) => *report.methods.entry(method).or_insert(0) += 1,
                None => report.empty_files += 1,
            }
        }
        report.finish(self.linker.mode());
        Ok(report)
    }
}
