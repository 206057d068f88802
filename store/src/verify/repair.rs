//! Repair steps used by `verify --repair`: restoring a blob from a good copy, rebuilding a store
//! path from its manifest, and swapping a rebuilt (or removing an unrepairable) path atomically.
//!
//! Must never run without the store lock held exclusively by its caller, and never edit a store path
//! in place: a rebuilt path is swapped in whole (`renameat2(RENAME_EXCHANGE)`, else two renames).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};
use crate::fsutil::{self, set_mode, unique_name};
use crate::link::create_empty;
use crate::meta::{Entry, StorePathMeta};
use crate::names::{BlobId, StorePathName};
use crate::publish::{blake3_file, file_mode};
use crate::store::{Store, TMP};

/// Replace the blob at `blob_path` by a fresh copy of `source` (atomic rename).
pub(super) fn replace_blob(
    store: &Store,
    source: &Path,
    blob_path: &Path,
    exec: bool,
) -> Result<()> {
    let temp = store.dir.join(TMP).join(unique_name("blob-"));
    crate::link::copy_new(source, &temp, file_mode(exec)).ctx("copy", source)?;
    fs_err::rename(&temp, blob_path).ctx("replace", blob_path)
}

/// Rebuild a store path from its manifest and swap it in; `false` when a blob is unavailable.
pub(super) fn rebuild(
    store: &Store,
    name: &StorePathName,
    meta: &StorePathMeta,
    good: &HashMap<BlobId, PathBuf>,
) -> Result<bool> {
    // Every blob must be available with good content.
    for (id, exec) in meta.blobs() {
        let path = store.blob_path(&id, exec);
        let ok = path.is_file()
            && blake3_file(&path)
                .map(|(found, _)| found == id)
                .unwrap_or(false);
        if ok {
            continue;
        }
        let other = store.blob_path(&id, !exec);
        let other_ok = other.is_file()
            && blake3_file(&other)
                .map(|(found, _)| found == id)
                .unwrap_or(false);
        let source = if other_ok {
            Some(other)
        } else {
            good.get(&id).cloned()
        };
        let Some(source) = source else {
            return Ok(false);
        };
        // The good copy may be a file of the damaged path itself only if its content is right: it is.
        let fresh = store.dir.join(TMP).join(unique_name("blob-"));
        crate::link::copy_new(&source, &fresh, file_mode(exec)).ctx("copy", &source)?;
        if blake3_file(&fresh)?.0 != id {
            let _ = std::fs::remove_file(&fresh);
            return Ok(false);
        }
        if let Some(shard) = path.parent() {
            store.ensure_dir(shard)?;
        }
        fs_err::rename(&fresh, &path).ctx("replace", &path)?;
    }
    let (base, _lock) = store.new_build_dir("repair-")?;
    let out = base.join("out");
    let result = (|| {
        fs_err::create_dir(&out).ctx("create", &out)?;
        for entry in &meta.entries {
            let dst = out.join(entry.path());
            match entry {
                Entry::Dir { .. } => fs_err::create_dir(&dst).ctx("create", &dst)?,
                Entry::Link { target, .. } => {
                    std::os::unix::fs::symlink(target, &dst).ctx("create link", &dst)?
                }
                Entry::File {
                    blob: None, exec, ..
                } => create_empty(&dst, file_mode(*exec))?,
                Entry::File {
                    blob: Some(id),
                    exec,
                    ..
                } => {
                    store.link_blob(id, *exec, &dst)?;
                }
            }
        }
        let final_path = store.path_of(name);
        replace_store_path(store, &out, &final_path)
    })();
    let _ = fsutil::remove_tree(&base);
    result.map(|()| true)
}

/// Replace the published store path `final_path` by the unsealed tree `out` (built in `.tmp/`) in one
/// step, and remove the tree it replaced.
///
/// A directory moved into another parent needs write permission on itself, and a published store
/// path is sealed (0555) and may belong to another user of a shared store. So `out` (ours, top still
/// writable) is sealed below its top and moved next to `final_path` first, its top sealed there, and
/// the two are exchanged within the store directory, which needs no permission on either tree. The
/// replaced tree is then removed; when that is impossible (another user's tree) a warning names it.
pub(crate) fn replace_store_path(store: &Store, out: &Path, final_path: &Path) -> Result<()> {
    fsutil::seal_dirs_below(out)?;
    let staged = final_path.with_file_name(unique_name(".repair-"));
    fs_err::rename(out, &staged).ctx("move into the store", out)?;
    let swapped = set_mode(&staged, 0o555).and_then(|()| exchange(&staged, final_path));
    if let Err(err) = swapped {
        let _ = fsutil::remove_tree(&staged);
        return Err(err);
    }
    // `staged` now holds the damaged tree.
    if let Err(err) = fsutil::remove_tree(&staged) {
        store.warn(format!(
            "warning: could not remove the replaced copy of {} at {} ({err}); remove it as its owner or root",
            final_path.display(),
            staged.display()
        ));
    }
    Ok(())
}

/// Atomically swap two directories (renameat2 RENAME_EXCHANGE), else two renames.
pub(crate) fn exchange(a: &Path, b: &Path) -> Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use nix::fcntl::{renameat2, RenameFlags, AT_FDCWD};
        if renameat2(AT_FDCWD, a, AT_FDCWD, b, RenameFlags::RENAME_EXCHANGE).is_ok() {
            return Ok(());
        }
    }
    let aside = a.with_file_name(unique_name("old-"));
    fs_err::rename(b, &aside).ctx("move aside", b)?;
    fs_err::rename(a, b).ctx("replace", b)?;
    fs_err::rename(&aside, a).ctx("move aside", a)
}

/// Remove a store path and its metadata (rename aside first, so no half-deleted tree is visible).
pub(super) fn remove_store_path(store: &Store, name: &StorePathName) -> Result<()> {
    let path = store.path_of(name);
    let aside = store.dir.join(TMP).join(unique_name("trash-"));
    fsutil::rename_dir(&path, &aside)?;
    let _ = std::fs::remove_file(store.meta_path(name.as_str()));
    fsutil::remove_tree(&aside)
}
