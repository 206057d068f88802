//! Small filesystem helpers the store modules share: unique temp names, permission changes over a tree,
//! removal of read-only trees, the one flush per batch (`syncfs` + directory fsync) and filesystem type
//! detection (`statfs` magic numbers).
//!
//! Never decides policy: callers say what to flush, what to remove and what a remote filesystem means.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{IoContext, Result};

/// A name no other process or thread will pick: `<prefix><pid>-<counter>-<nanos>`.
pub(crate) use agentpack_fs::unique_name;

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Set the permission bits of `path` (never follows a final symlink's target: callers pass files/dirs).
pub(crate) fn set_mode(path: &Path, mode: u32) -> Result<()> {
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .ctx("set permissions of", path)
}

/// The permission bits of `path` (lstat).
pub(crate) fn mode_of(path: &Path) -> Result<u32> {
    Ok(fs_err::symlink_metadata(path)
        .ctx("inspect", path)?
        .permissions()
        .mode()
        & 0o7777)
}

/// Make every directory *below* `root` 0555 (deepest first), leaving `root` itself writable. Files keep
/// the mode they were created with (0444 or 0555).
///
/// Renaming a directory into another parent directory needs write permission on the directory itself
/// (its `..` entry changes), which a sealed 0555 directory only grants to root. Publication therefore
/// seals everything below the top, renames the top into place, then seals the top with
/// [`set_mode`]`(top, 0o555)`.
pub(crate) fn seal_dirs_below(root: &Path) -> Result<()> {
    for entry in walkdir::WalkDir::new(root)
        .min_depth(1)
        .contents_first(true)
    {
        let entry = entry.map_err(|err| crate::error::StoreError::walk(root, err))?;
        if entry.file_type().is_dir() {
            set_mode(entry.path(), 0o555)?;
        }
    }
    Ok(())
}

/// The bits a directory shared by a group gets on top of its owner's: setgid (new entries take the
/// group), sticky (the `/tmp` rule: only an entry's owner, the directory's owner or root may rename or
/// remove it, so no member can replace another member's store path, blob or root) and group
/// read/write/search.
pub(crate) const SHARED_DIR_BITS: u32 = 0o3070;

/// Whether `dir` is shared with its group: group-writable (`chmod 3775` on `cache/store` makes the
/// store's mutable directories so). A missing or unreadable directory is not shared.
pub(crate) fn group_shared(dir: &Path) -> bool {
    std::fs::metadata(dir)
        .map(|meta| meta.is_dir() && meta.permissions().mode() & 0o020 != 0)
        .unwrap_or(false)
}

/// Make the directory `dir` (its parent must exist) the way a directory several users share is made:
/// when its parent is group-writable (a shared `AGENTPACK_HOME`, as docs/src/shared-store.md sets up)
/// it is created setgid, sticky and group-writable (3775) whatever the umask, so every member can add
/// their own entries and none can remove another's; otherwise it is created with the default mode.
/// An existing directory of this user's in a shared parent gets those bits; one of another user's is
/// left as it is. For `$AGENTPACK_HOME/projects/` and similar directories outside the store.
pub fn ensure_shared_dir(dir: &Path) -> Result<()> {
    let shared = dir.parent().is_some_and(group_shared);
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(crate::error::StoreError::io("create", dir, err)),
    }
    if !shared {
        return Ok(());
    }
    use std::os::unix::fs::MetadataExt;
    let meta = fs_err::symlink_metadata(dir).ctx("inspect", dir)?;
    let mode = meta.mode() & 0o7777;
    if meta.is_dir() && meta.uid() == euid() && mode & SHARED_DIR_BITS != SHARED_DIR_BITS {
        set_mode(dir, mode | 0o755 | SHARED_DIR_BITS)?;
    }
    Ok(())
}

/// Give the group of a file (read/write) or directory (read/write/search + setgid) that this process
/// created the access its owner has, when the directory holding it is [`group_shared`]: the modes
/// agentpack asks for are cut by the umask (typically 022), which would lock other group members out
/// of the store lock, the index and the mutable directories. Does nothing for a file another user owns
/// (only the owner may chmod it) or outside a shared directory.
pub(crate) fn share_with_group(path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Some(parent) = path.parent() else {
        return Ok(());
    };
    if !group_shared(parent) {
        return Ok(());
    }
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(crate::error::StoreError::io("inspect", path, err)),
    };
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Ok(());
    }
    let mode = meta.permissions().mode() & 0o7777;
    let wanted = if meta.is_dir() {
        mode | SHARED_DIR_BITS
    } else if meta.is_file() {
        mode | 0o060
    } else {
        return Ok(());
    };
    if wanted != mode {
        set_mode(path, wanted)?;
    }
    Ok(())
}

/// Move the directory `from` (which this process owns, possibly sealed 0555) to `to` in another
/// parent directory: its top is made writable for the rename (see [`seal_dirs_below`]) and sealed
/// again afterwards when it was sealed.
pub(crate) fn rename_dir(from: &Path, to: &Path) -> Result<()> {
    let mode = mode_of(from)?;
    let sealed = mode & 0o200 == 0;
    if sealed {
        set_mode(from, mode | 0o700)?;
    }
    if let Err(err) = fs_err::rename(from, to) {
        if sealed {
            let _ = set_mode(from, mode);
        }
        return Err(crate::error::StoreError::io("move", from, err));
    }
    if sealed {
        set_mode(to, mode)?;
    }
    Ok(())
}

/// Make every directory of the tree at `root` writable by its owner, so it can be changed or removed.
pub(crate) fn unseal_dirs(root: &Path) -> Result<()> {
    for entry in walkdir::WalkDir::new(root) {
        let Ok(entry) = entry else { continue };
        if entry.file_type().is_dir() {
            set_mode(entry.path(), 0o755)?;
        }
    }
    Ok(())
}

/// Remove a tree that may contain read-only directories. A missing tree is not an error.
pub(crate) fn remove_tree(root: &Path) -> Result<()> {
    match std::fs::symlink_metadata(root) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(crate::error::StoreError::io("inspect", root, err)),
        Ok(meta) if !meta.is_dir() => return fs_err::remove_file(root).ctx("remove", root),
        Ok(_) => {}
    }
    // Most trees removed here (build and scratch directories) were never sealed: removed in one
    // walk. A sealed directory stops the removal with a permission error; then every directory
    // left is made writable (a second walk) and the removal goes on.
    match std::fs::remove_dir_all(root) {
        Ok(()) => return Ok(()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(_) => {}
    }
    unseal_dirs(root)?;
    match fs_err::remove_dir_all(root) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other.ctx("remove", root),
    }
}

/// The bytes the filesystem gives back when the inode behind `meta` loses the link being removed: its
/// allocated blocks (what `du` counts) when that link is its last, else nothing. Directories count
/// their own blocks.
pub(crate) fn freed_by_removing(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    if meta.is_dir() || meta.nlink() <= 1 {
        meta.blocks() * 512
    } else {
        0
    }
}

/// Remove one non-directory entry, adding what it gives back to `freed`. A missing entry is not an
/// error (and frees nothing).
pub(crate) fn remove_file_counting(path: &Path, freed: &mut u64) -> Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(crate::error::StoreError::io("inspect", path, err)),
    };
    match std::fs::remove_file(path) {
        Ok(()) => {
            *freed += freed_by_removing(&meta);
            Ok(())
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(crate::error::StoreError::io("remove", path, err)),
    }
}

/// Remove a tree that may contain read-only directories, the way Nix and uv do without privileges:
/// each directory is made writable and searchable by its owner (us) before its entries are removed,
/// deepest first. Adds to `freed` the allocated bytes of every inode whose last link went and of every
/// directory removed, so it matches what `du` sees disappear; on an error, what was removed before it
/// is counted. A missing tree is not an error.
pub(crate) fn remove_tree_counting(root: &Path, freed: &mut u64) -> Result<()> {
    let meta = match std::fs::symlink_metadata(root) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(crate::error::StoreError::io("inspect", root, err)),
    };
    if !meta.is_dir() {
        return remove_file_counting(root, freed);
    }
    if meta.permissions().mode() & 0o700 != 0o700 {
        set_mode(root, (meta.permissions().mode() & 0o7777) | 0o700)?;
    }
    for entry in fs_err::read_dir(root).ctx("list", root)? {
        let entry = entry.ctx("list", root)?;
        remove_tree_counting(&entry.path(), freed)?;
    }
    match std::fs::remove_dir(root) {
        Ok(()) => {
            *freed += freed_by_removing(&meta);
            Ok(())
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(crate::error::StoreError::io("remove", root, err)),
    }
}

/// This process's effective uid.
pub(crate) fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// The uid owning `path` itself (lstat), if it can be inspected.
pub(crate) fn owner_of(path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|meta| meta.uid())
}

/// Whether this process may remove the entry `path` and everything below it: it is root, or it owns
/// the entry. (In a sticky shared directory nobody else may; in any store, removing a sealed tree
/// needs its directories made writable, which only their owner can do.)
pub(crate) fn may_remove(owner: u32) -> bool {
    let me = euid();
    me == 0 || owner == me
}

/// Flush everything written to the filesystem holding `path` (one `syncfs`), then fsync `path` itself
/// when it is a directory.
pub(crate) fn flush_filesystem(path: &Path) -> Result<()> {
    let dir = fs_err::File::open(path).ctx("open", path)?;
    nix::unistd::syncfs(dir.file())
        .map_err(io::Error::from)
        .ctx("flush filesystem of", path)
}

/// fsync the directory `path` (makes renames inside it durable).
pub(crate) fn fsync_dir(path: &Path) -> Result<()> {
    let dir = fs_err::File::open(path).ctx("open", path)?;
    dir.sync_all().ctx("flush directory", path)
}

/// The raw OS error number of `err`, if any.
pub(crate) fn errno(err: &io::Error) -> Option<i32> {
    err.raw_os_error()
}

/// What kind of filesystem holds a path.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FilesystemKind {
    /// A short name (`ext4`, `xfs`, `btrfs`, `tmpfs`, `nfs`, `fuse`, ...), or `0x<magic>`.
    pub name: String,
    /// Whether it is a network or userspace filesystem (NFS, SMB/CIFS, FUSE, 9p, Ceph, AFS), where an
    /// LMDB index must not live.
    pub remote: bool,
}

/// Detect the filesystem type of `path` with `statfs`.
pub fn filesystem_kind(path: &Path) -> Result<FilesystemKind> {
    let stat = nix::sys::statfs::statfs(path)
        .map_err(io::Error::from)
        .ctx("statfs", path)?;
    #[allow(clippy::unnecessary_cast)]
    let magic = stat.filesystem_type().0 as i64;
    Ok(classify_magic(magic))
}

/// Map a statfs magic number to a [`FilesystemKind`].
pub(crate) fn classify_magic(magic: i64) -> FilesystemKind {
    let magic = magic & 0xffff_ffff;
    let (name, remote) = match magic {
        0xEF53 => ("ext4", false),
        0x5846_5342 => ("xfs", false),
        0x9123_683E => ("btrfs", false),
        0x0102_1994 => ("tmpfs", false),
        0x2FC1_2FC1 => ("zfs", false),
        0x794C_7630 => ("overlayfs", false),
        0xF2F5_2010 => ("f2fs", false),
        0x6969 => ("nfs", true),
        0x517B => ("smb", true),
        0xFE53_4D42 => ("smb2", true),
        0xFF53_4D42 => ("cifs", true),
        0x6573_5546 => ("fuse", true),
        0x6573_5543 => ("fusectl", true),
        0x0102_1997 => ("9p", true),
        0x00C3_6400 => ("ceph", true),
        0x5346_414F => ("afs", true),
        0x0BD0_0BD0 => ("lustre", true),
        0x4750_4653 => ("gpfs", true),
        _ => {
            return FilesystemKind {
                name: format!("0x{magic:x}"),
                remote: false,
            }
        }
    };
    FilesystemKind {
        name: name.to_owned(),
        remote,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_numbers() {
        assert!(classify_magic(0x6969).remote);
        assert!(classify_magic(0x6573_5546).remote);
        assert!(classify_magic(0xFF53_4D42).remote);
        assert!(!classify_magic(0xEF53).remote);
        assert_eq!(classify_magic(0x1234).name, "0x1234");
    }
}
