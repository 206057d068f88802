//! The filesystem steps home layers are made of: atomic private writes, links that are replaced
//! only when they point elsewhere, and mirrors of a generation subtree made of hard links.
//!
//! Every step is idempotent, so preparing a layer that already exists only repairs what differs.
//! Nothing here follows a link it did not make into a directory it then writes to.

use std::ffi::OsString;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::HomeLayerError;

impl From<agentpack_fs::FsError> for HomeLayerError {
    fn from(err: agentpack_fs::FsError) -> Self {
        io_error(err.action, &err.path, err.source)
    }
}

pub(crate) fn io_error(
    action: &'static str,
    path: &Path,
    source: std::io::Error,
) -> HomeLayerError {
    HomeLayerError::Io {
        action,
        path: path.to_path_buf(),
        cause: source,
    }
}

/// Creates `dir` (and parents) with mode 0700 for the directories it creates.
pub(crate) fn private_dir(dir: &Path) -> Result<(), HomeLayerError> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|e| io_error("create directory", dir, e))
}

/// Creates `dir` (and parents) with the default mode.
pub(crate) fn plain_dir(dir: &Path) -> Result<(), HomeLayerError> {
    std::fs::create_dir_all(dir).map_err(|e| io_error("create directory", dir, e))
}

/// Writes `bytes` to `path` atomically with `mode` (0600 for anything that may hold a secret).
/// An unchanged file is left alone (same bytes, same mode).
pub(crate) fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), HomeLayerError> {
    if let Ok(meta) = fs::symlink_metadata(path) {
        if meta.is_file() && meta.mode() & 0o777 == mode {
            if let Ok(existing) = fs::read(path) {
                if existing == bytes {
                    return Ok(());
                }
            }
        }
    }
    if let Some(parent) = path.parent() {
        private_dir(parent)?;
    }
    // A home layer is rebuilt from the generation when lost: no fsync.
    let options = agentpack_fs::WriteOptions {
        mode: agentpack_fs::FileMode::Exact(mode),
        durability: agentpack_fs::Durability::None,
        temp: agentpack_fs::TempName::Hidden,
    };
    Ok(agentpack_fs::write_file(path, bytes, &options)?)
}

/// Makes `link` a symbolic link to `target`, replacing a link that points elsewhere (atomically) and
/// a regular file or directory this layer made earlier only when `replace_real` is set.
pub(crate) fn ensure_symlink(link: &Path, target: &Path) -> Result<(), HomeLayerError> {
    match fs::symlink_metadata(link) {
        Ok(meta) if meta.file_type().is_symlink() => {
            if fs::read_link(link).ok().as_deref() == Some(target) {
                return Ok(());
            }
        }
        Ok(meta) if meta.is_dir() => {
            fs::remove_dir_all(link).map_err(|e| io_error("replace", link, e))?;
        }
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(io_error("inspect", link, e)),
    }
    if let Some(parent) = link.parent() {
        plain_dir(parent)?;
    }
    Ok(agentpack_fs::write_symlink(
        target,
        link,
        agentpack_fs::TempName::Hidden,
        agentpack_fs::Durability::None,
    )?)
}

/// Removes whatever is at `path` (a link, a file or a directory this layer made). Missing is fine.
pub(crate) fn remove_any(path: &Path) -> Result<(), HomeLayerError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            fs::remove_dir_all(path).map_err(|e| io_error("remove", path, e))
        }
        Ok(_) => fs::remove_file(path).map_err(|e| io_error("remove", path, e)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error("inspect", path, e)),
    }
}

/// Links (hard link, else copy) one file. An existing file with the same inode is kept.
fn link_file(source: &Path, dest: &Path) -> Result<(), HomeLayerError> {
    let source_meta = fs::metadata(source).map_err(|e| io_error("read", source, e))?;
    match fs::symlink_metadata(dest) {
        Ok(meta)
            if meta.is_file()
                && meta.ino() == source_meta.ino()
                && meta.dev() == source_meta.dev() =>
        {
            return Ok(())
        }
        Ok(_) => remove_any(dest)?,
        Err(_) => {}
    }
    if fs::hard_link(source, dest).is_ok() {
        return Ok(());
    }
    fs::copy(source, dest).map_err(|e| io_error("copy", source, e))?;
    Ok(())
}

/// Mirrors the tree under `source` into `dest`: real directories, hard-linked (else copied) files,
/// symbolic links re-created. Entries of `dest` that `source` does not have are left alone (they are
/// the user's seeds or the agent's own files). `skip` names top-level entries not to mirror.
pub(crate) fn mirror(source: &Path, dest: &Path, skip: &[&str]) -> Result<(), HomeLayerError> {
    if !source.is_dir() {
        return Ok(());
    }
    plain_dir(dest)?;
    let entries = fs::read_dir(source).map_err(|e| io_error("list", source, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_error("list", source, e))?;
        let name = entry.file_name();
        if skip.iter().any(|s| name == *s) {
            continue;
        }
        let from = entry.path();
        let to = dest.join(&name);
        let kind = entry
            .file_type()
            .map_err(|e| io_error("inspect", &from, e))?;
        if kind.is_dir() {
            if fs::symlink_metadata(&to).is_ok_and(|m| !m.is_dir()) {
                remove_any(&to)?;
            }
            mirror(&from, &to, &[])?;
        } else if kind.is_symlink() {
            let target = fs::read_link(&from).map_err(|e| io_error("read link", &from, e))?;
            ensure_symlink(&to, &target)?;
        } else {
            link_file(&from, &to)?;
        }
    }
    Ok(())
}

/// The file in a layer root that names the generation its pack content was mirrored from.
pub(crate) const MIRROR_STAMP: &str = ".agentpack-mirrored-generation";

/// [`mirror`], unless the stamp in `dest` ([`MIRROR_STAMP`]) says `generation` was mirrored there
/// already: a generation is immutable, so a layer stamped with it holds its entries. Returns
/// whether it mirrored. The stamp is written only after the mirror completed. The trade-off: an
/// entry of the pack's that someone removed from the layer is not restored until the generation
/// changes or the stamp is removed.
pub(crate) fn mirror_stamped(
    source: &Path,
    dest: &Path,
    skip: &[&str],
    generation: &Path,
) -> Result<bool, HomeLayerError> {
    let stamp = dest.join(MIRROR_STAMP);
    let mut expected = generation.as_os_str().as_encoded_bytes().to_vec();
    expected.push(b'\n');
    if fs::read(&stamp).is_ok_and(|bytes| bytes == expected) {
        return Ok(false);
    }
    mirror(source, dest, skip)?;
    write_file(&stamp, &expected, 0o600)?;
    Ok(true)
}

/// The names in a directory, sorted; nothing when it does not exist.
pub(crate) fn list_names(dir: &Path) -> Vec<OsString> {
    let mut names: Vec<OsString> = fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// Reads a text file that may be missing.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, HomeLayerError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error("read", path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamped_mirror_is_not_redone_for_the_same_generation() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("gen-a/codex-home");
        fs::create_dir_all(source.join("skills/one")).unwrap();
        fs::write(source.join("skills/one/SKILL.md"), "x").unwrap();
        let dest = dir.path().join("layer");
        let generation = dir.path().join("gen-a");
        assert!(mirror_stamped(&source, &dest, &[], &generation).unwrap());
        assert!(dest.join("skills/one/SKILL.md").is_file());
        // Removed from the layer: the stamp still names the generation, so nothing is redone.
        fs::remove_file(dest.join("skills/one/SKILL.md")).unwrap();
        assert!(!mirror_stamped(&source, &dest, &[], &generation).unwrap());
        assert!(!dest.join("skills/one/SKILL.md").exists());
        // Another generation (or a stamp removed) mirrors again.
        let other = dir.path().join("gen-b");
        assert!(mirror_stamped(&source, &dest, &[], &other).unwrap());
        assert!(dest.join("skills/one/SKILL.md").is_file());
    }
}
