//! Local packages: `path` dependencies and the `$AGENTPACK_HOME/local/<owner>/<repo>` offline mirror.
//!
//! Both are copied from disk on every lock/sync: regular files only (symlinks skipped), `.git` and
//! git-ignored files left out, written 0644. The copy's `dirhash40` (ADDENDUM) stands in for a commit
//! and names the cache slot together with the canonical directory (`path:`) or the spec (`local:`).
//! Never writes into the source directory; never follows a link out of it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use agentpack_lockfile::keys::{dirhash40_from_entries, local_cache_key, path_cache_key};
use agentpack_lockfile::validate::CacheKey;

use crate::extract::FILE_MODE;

/// Why a local package could not be copied.
#[derive(Debug, thiserror::Error)]
pub enum LocalPackageError {
    /// The source directory is missing.
    #[error("{module}: the directory {path} does not exist\n  fix       create it, or fix the `path` in agentpack.toml")]
    Missing {
        /// The module.
        module: String,
        /// The directory.
        path: PathBuf,
    },
    /// A filesystem operation failed.
    #[error("{module}: cannot copy {path}: {source}")]
    Io {
        /// The module.
        module: String,
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file name that is not UTF-8.
    #[error("{module}: the file name {path:?} is not valid UTF-8")]
    NonUtf8 {
        /// The module.
        module: String,
        /// The path.
        path: PathBuf,
    },
}

/// A copied local package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalCopy {
    /// The canonical source directory.
    pub source: PathBuf,
    /// `dirhash40` of the copied files (what the lock records as `commit`).
    pub dirhash40: String,
    /// The cache slot name.
    pub cache_key: CacheKey,
    /// Number of files copied.
    pub files: usize,
}

/// The files a local package consists of: `(relative path, absolute path)`, regular files only,
/// symlinks and `.git` skipped, git-ignored files left out, sorted bytewise by relative path.
pub fn collect_files(
    module: &str,
    source: &Path,
) -> Result<Vec<(String, PathBuf)>, LocalPackageError> {
    let walker = ignore::WalkBuilder::new(source)
        .hidden(false)
        .ignore(false)
        .git_global(false)
        .git_exclude(true)
        .git_ignore(true)
        .require_git(false)
        .parents(true)
        .follow_links(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .build();
    let mut files = Vec::new();
    for entry in walker {
        let entry = entry.map_err(|e| LocalPackageError::Io {
            module: module.to_owned(),
            path: source.to_path_buf(),
            source: std::io::Error::other(e),
        })?;
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(relative) = entry.path().strip_prefix(source) else {
            continue;
        };
        let relative = relative
            .to_str()
            .ok_or_else(|| LocalPackageError::NonUtf8 {
                module: module.to_owned(),
                path: entry.path().to_path_buf(),
            })?;
        files.push((relative.to_owned(), entry.path().to_path_buf()));
    }
    files.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(files)
}

fn copy_files(
    module: &str,
    files: &[(String, PathBuf)],
    destination: &Path,
) -> Result<String, LocalPackageError> {
    let io = |path: &Path, source| LocalPackageError::Io {
        module: module.to_owned(),
        path: path.to_path_buf(),
        source,
    };
    fs_err::create_dir_all(destination).map_err(|e| io(destination, e))?;
    let mut hashed = Vec::with_capacity(files.len());
    for (relative, absolute) in files {
        let bytes = fs_err::read(absolute).map_err(|e| io(absolute, e))?;
        let target = destination.join(relative);
        if let Some(parent) = target.parent() {
            fs_err::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        fs_err::write(&target, &bytes).map_err(|e| io(&target, e))?;
        fs_err::set_permissions(&target, std::fs::Permissions::from_mode(FILE_MODE))
            .map_err(|e| io(&target, e))?;
        hashed.push((relative.as_str(), bytes));
    }
    Ok(dirhash40_from_entries(hashed))
}

/// `dirhash40` of a directory as it is now (without copying).
pub fn dirhash40(module: &str, source: &Path) -> Result<String, LocalPackageError> {
    let files = collect_files(module, source)?;
    let mut hashed = Vec::with_capacity(files.len());
    for (relative, absolute) in &files {
        let bytes = fs_err::read(absolute).map_err(|e| LocalPackageError::Io {
            module: module.to_owned(),
            path: absolute.clone(),
            source: e,
        })?;
        hashed.push((relative.as_str(), bytes));
    }
    Ok(dirhash40_from_entries(hashed))
}

fn canonical(module: &str, dir: &Path) -> Result<PathBuf, LocalPackageError> {
    match fs_err::canonicalize(dir) {
        Ok(path) if path.is_dir() => Ok(path),
        _ => Err(LocalPackageError::Missing {
            module: module.to_owned(),
            path: dir.to_path_buf(),
        }),
    }
}

/// Copies a `path` dependency (`dir`, already joined to the project root) into `destination`.
pub fn copy_path_package(
    module: &str,
    dir: &Path,
    destination: &Path,
) -> Result<LocalCopy, LocalPackageError> {
    let source = canonical(module, dir)?;
    let files = collect_files(module, &source)?;
    let dirhash40 = copy_files(module, &files, destination)?;
    Ok(LocalCopy {
        cache_key: path_cache_key(&source, &dirhash40),
        dirhash40,
        files: files.len(),
        source,
    })
}

/// The `local/` mirror directory of `spec` (`owner/repo[/path]`): `$AGENTPACK_HOME/local/<spec>`.
pub fn local_mirror_dir(agentpack_home: &Path, spec: &str) -> PathBuf {
    let mut dir = agentpack_home.join("local");
    for component in spec
        .split('/')
        .filter(|c| !c.is_empty() && *c != "." && *c != "..")
    {
        dir.push(component);
    }
    dir
}

/// Is `spec` present in the `local/` mirror?
pub fn has_local_mirror(agentpack_home: &Path, spec: &str) -> bool {
    local_mirror_dir(agentpack_home, spec).is_dir()
}

/// Copies the `local/` mirror package `spec` into `destination`.
pub fn copy_local_mirror_package(
    module: &str,
    agentpack_home: &Path,
    spec: &str,
    destination: &Path,
) -> Result<LocalCopy, LocalPackageError> {
    let source = canonical(module, &local_mirror_dir(agentpack_home, spec))?;
    let files = collect_files(module, &source)?;
    let dirhash40 = copy_files(module, &files, destination)?;
    Ok(LocalCopy {
        cache_key: local_cache_key(spec, &dirhash40),
        dirhash40,
        files: files.len(),
        source,
    })
}
