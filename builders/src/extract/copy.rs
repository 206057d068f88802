//! Copying a package out of an extracted snapshot by the extraction rules.
//!
//! It never modifies the snapshot (files are hard-linked or copied, never written through).

use std::collections::BTreeSet;
use std::path::Path;

use super::{clean_relative, io, ExtractError, ExtractReport, SafeTreeWriter};

/// Copies the package at `package_path` (relative, `/`-separated, `""` for the root) of an extracted
/// snapshot into `destination` by the same rules: regular files 0644, links kept only when they stay
/// inside the package, other links written as empty files. A regular file of the snapshot that
/// already has the mode extraction gives is hard-linked instead of copied (same bytes, no new inode):
/// the snapshot is scratch space nothing writes to, the copy only gets new files (normalization),
/// and the store copies what it publishes.
pub fn copy_package_tree(
    snapshot: &Path,
    package_path: &str,
    destination: &Path,
) -> Result<ExtractReport, ExtractError> {
    copy_package_tree_with_executables(snapshot, package_path, destination, &BTreeSet::new())
}

/// [`copy_package_tree`] of a snapshot whose [`ExtractReport::executables`] are
/// `snapshot_executables` (relative to the snapshot root): those inside the package are the copy's.
pub fn copy_package_tree_with_executables(
    snapshot: &Path,
    package_path: &str,
    destination: &Path,
    snapshot_executables: &BTreeSet<String>,
) -> Result<ExtractReport, ExtractError> {
    let clean = clean_relative(package_path)?;
    let source_root = if clean.is_empty() {
        snapshot.to_path_buf()
    } else {
        snapshot.join(&clean)
    };
    let mut writer = SafeTreeWriter::new(destination)?;
    for entry in walkdir::WalkDir::new(&source_root)
        .follow_links(false)
        .sort_by_file_name()
    {
        let entry = entry.map_err(|e| {
            let path = e
                .path()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| source_root.clone());
            io(&path, std::io::Error::other(e))
        })?;
        let Ok(relative) = entry.path().strip_prefix(&source_root) else {
            continue;
        };
        let Some(relative) = relative.to_str() else {
            return Err(ExtractError::NonUtf8Name {
                name: relative.to_string_lossy().into_owned(),
            });
        };
        if relative.is_empty() {
            continue;
        }
        let file_type = entry.file_type();
        if file_type.is_dir() {
            writer.dir(relative)?;
        } else if file_type.is_symlink() {
            let target = fs_err::read_link(entry.path()).map_err(|e| io(entry.path(), e))?;
            let target = target.to_str().map(str::to_owned).unwrap_or_default();
            writer.symlink(relative, &target)?;
        } else if file_type.is_file() {
            let in_snapshot = if clean.is_empty() {
                relative.to_owned()
            } else {
                format!("{clean}/{relative}")
            };
            let executable = snapshot_executables.contains(&in_snapshot);
            writer.file_linked(relative, entry.path(), executable)?;
        } else {
            return Err(ExtractError::SpecialFile {
                name: relative.to_owned(),
                kind: "special file".to_owned(),
            });
        }
    }
    Ok(writer.finish())
}
