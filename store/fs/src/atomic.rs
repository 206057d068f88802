//! Atomic replacement of one file or one symbolic link: write a temp entry in the same directory, then
//! `rename(2)` it over the target, so a reader (or a crash) sees the old entry or the new one, never a
//! torn one.
//!
//! Owns the temp naming ([`TempName`], [`unique_name`]), the mode a new file gets ([`FileMode`]) and
//! when data is flushed ([`Durability`]). Never takes a lock (callers that may race hold one around the
//! write) and never removes anything but its own temp entry.

use std::fs::{File, OpenOptions, Permissions};
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::FsError;

/// The permission bits of the written file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileMode {
    /// An existing file keeps its permission bits; a new one gets these bits less the umask (0o666
    /// gives the usual 0644, the mode a plain `open(2)` would give it).
    KeepOr(u32),
    /// Exactly these bits whatever the umask and whatever the file had (0o600 for anything that may
    /// hold a secret, 0o644 for records other users of a shared store must read).
    Exact(u32),
}

/// When the written bytes and the rename reach the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// No fsync: the caller flushes a whole batch later (the store's one `syncfs`), or the file is a
    /// cache that can be rebuilt.
    None,
    /// fsync the temp file before the rename, so the name never points at bytes not on disk.
    File,
    /// [`Durability::File`], then fsync the directory so the rename itself survives a crash. A
    /// directory that cannot be opened or synced (some filesystems) does not fail the write: the data
    /// is already synced.
    FileAndDir,
}

/// How the temp entry beside the target is named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TempName {
    /// `.<file name>.<unique>.tmp`: hidden, and says which file it was for.
    Hidden,
    /// `<prefix><unique>`: for directories whose cleaner removes leftovers by prefix (the store's GC
    /// removes `.new-*`, `.lease-*` and `.slot-*`).
    Prefix(&'static str),
}

/// How [`write_file`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteOptions {
    /// The mode of the written file.
    pub mode: FileMode,
    /// When it reaches the disk.
    pub durability: Durability,
    /// The temp file's name.
    pub temp: TempName,
}

impl WriteOptions {
    /// A project file (`agentpack.toml`, `pack.lock`): an existing file keeps its mode, a new one
    /// gets 0666 less the umask; fully flushed (file and directory).
    pub fn shared_file() -> Self {
        Self {
            mode: FileMode::KeepOr(0o666),
            durability: Durability::FileAndDir,
            temp: TempName::Hidden,
        }
    }

    /// A private record (receipts, logins, bindings): exactly 0600, fully flushed.
    pub fn private_file() -> Self {
        Self {
            mode: FileMode::Exact(0o600),
            durability: Durability::FileAndDir,
            temp: TempName::Hidden,
        }
    }

    /// These options with another durability.
    #[must_use]
    pub fn durability(self, durability: Durability) -> Self {
        Self { durability, ..self }
    }

    /// These options with another temp name.
    #[must_use]
    pub fn temp(self, temp: TempName) -> Self {
        Self { temp, ..self }
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A name no other process or thread will pick: `<prefix><pid>-<counter>-<nanos>`.
pub fn unique_name(prefix: &str) -> String {
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{prefix}{}-{count}-{nanos:08x}", std::process::id())
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn temp_path(path: &Path, temp: TempName) -> PathBuf {
    let name = match temp {
        TempName::Hidden => {
            let file_name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            format!("{}.tmp", unique_name(&format!(".{file_name}.")))
        }
        TempName::Prefix(prefix) => unique_name(prefix),
    };
    parent_dir(path).join(name)
}

/// fsync the directory `dir`, ignoring a directory that cannot be opened or synced.
fn sync_dir_best_effort(dir: &Path) {
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
}

/// Replaces `path` with `bytes` atomically: a temp file in the same directory (named by
/// `options.temp`, created with `options.mode`), flushed as `options.durability` says, renamed over
/// `path`. On any failure the temp file is removed and `path` is as it was.
pub fn write_file(path: &Path, bytes: &[u8], options: &WriteOptions) -> Result<(), FsError> {
    let temp = temp_path(path, options.temp);
    let written = write_temp(path, &temp, bytes, options);
    let renamed = written.and_then(|()| {
        std::fs::rename(&temp, path).map_err(|source| FsError::new("replace", path, source))
    });
    if renamed.is_err() {
        let _ = std::fs::remove_file(&temp);
        return renamed;
    }
    if options.durability == Durability::FileAndDir {
        sync_dir_best_effort(&parent_dir(path));
    }
    Ok(())
}

fn write_temp(
    path: &Path,
    temp: &Path,
    bytes: &[u8],
    options: &WriteOptions,
) -> Result<(), FsError> {
    let (create_mode, exact) = match options.mode {
        FileMode::Exact(bits) => (bits, Some(bits)),
        FileMode::KeepOr(bits) => (
            bits,
            std::fs::metadata(path)
                .ok()
                .map(|meta| meta.permissions().mode() & 0o7777),
        ),
    };
    let write_err = |source| FsError::new("write", path, source);
    create_and_write(temp, (create_mode, exact), bytes, options, write_err)
}

/// Creates `target` with `O_EXCL` (never replacing anything) and the mode `create`, sets the
/// permissions to `exact` when given (the umask does not apply to them), writes `bytes` and flushes
/// them as `options.durability` says. `err` names the failure for the caller's path.
fn create_and_write(
    target: &Path,
    (create, exact): (u32, Option<u32>),
    bytes: &[u8],
    options: &WriteOptions,
    err: impl Fn(std::io::Error) -> FsError,
) -> Result<(), FsError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(create)
        .open(target)
        .map_err(&err)?;
    if let Some(bits) = exact {
        file.set_permissions(Permissions::from_mode(bits))
            .map_err(&err)?;
    }
    file.write_all(bytes).map_err(&err)?;
    if options.durability != Durability::None {
        file.sync_all().map_err(&err)?;
    }
    Ok(())
}

/// Creates `path` holding `bytes`, refusing when anything is there already (the error's source is
/// then of kind `AlreadyExists`) and never showing a partly written file: a temp file in the same
/// directory, written and flushed as `options` say, then hard-linked to `path` (`link(2)` fails
/// rather than replace) and its temp name removed. On a filesystem without hard links the file is
/// created with `O_EXCL` and written in place.
pub fn write_new_file(path: &Path, bytes: &[u8], options: &WriteOptions) -> Result<(), FsError> {
    let temp = temp_path(path, options.temp);
    write_temp(path, &temp, bytes, options).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })?;
    let linked = std::fs::hard_link(&temp, path);
    let _ = std::fs::remove_file(&temp);
    match linked {
        Ok(()) => {}
        Err(err)
            if matches!(
                err.raw_os_error(),
                Some(libc::EPERM | libc::EOPNOTSUPP | libc::EXDEV | libc::EMLINK)
            ) =>
        {
            // No hard links here: O_EXCL still never replaces anything.
            write_exclusive(path, bytes, options)?;
        }
        Err(source) => return Err(FsError::new("create", path, source)),
    }
    if options.durability == Durability::FileAndDir {
        sync_dir_best_effort(&parent_dir(path));
    }
    Ok(())
}

fn write_exclusive(path: &Path, bytes: &[u8], options: &WriteOptions) -> Result<(), FsError> {
    let modes = match options.mode {
        FileMode::Exact(bits) => (bits, Some(bits)),
        FileMode::KeepOr(bits) => (bits, None),
    };
    let err = |source| FsError::new("create", path, source);
    create_and_write(path, modes, bytes, options, err)
}

/// [`write_file`] unless `path` is a regular file that already holds exactly `bytes`, in which case
/// it is not touched (its inode and modification time stay). Returns whether it wrote. A FIFO,
/// socket or device at `path` is never opened for reading (that could block); it is replaced.
pub fn write_file_if_changed(
    path: &Path,
    bytes: &[u8],
    options: &WriteOptions,
) -> Result<bool, FsError> {
    let unchanged = std::fs::metadata(path).is_ok_and(|meta| {
        meta.is_file()
            && meta.len() == bytes.len() as u64
            && std::fs::read(path).is_ok_and(|existing| existing == bytes)
    });
    if unchanged {
        return Ok(false);
    }
    write_file(path, bytes, options)?;
    Ok(true)
}

/// Makes `link` a symbolic link to `target` atomically (a temp link beside it, renamed over it).
/// Whatever was at `link` is replaced, except a directory: `rename(2)` refuses that and the error
/// (`EISDIR`, `ENOTEMPTY` or `EEXIST` as its source) leaves the caller to decide. The temp link is
/// removed on failure.
pub fn write_symlink(
    target: &Path,
    link: &Path,
    temp: TempName,
    durability: Durability,
) -> Result<(), FsError> {
    let temp = temp_path(link, temp);
    std::os::unix::fs::symlink(target, &temp)
        .map_err(|source| FsError::new("create the link", link, source))?;
    if let Err(source) = std::fs::rename(&temp, link) {
        let _ = std::fs::remove_file(&temp);
        return Err(FsError::new("replace", link, source));
    }
    if durability == Durability::FileAndDir {
        sync_dir_best_effort(&parent_dir(link));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt as _;

    fn leftovers(dir: &Path) -> usize {
        std::fs::read_dir(dir).unwrap().count()
    }

    #[test]
    fn replaces_keeps_the_mode_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pack.lock");
        write_file(&path, b"one\n", &WriteOptions::shared_file()).unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(0o640)).unwrap();
        write_file(&path, b"two\n", &WriteOptions::shared_file()).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two\n");
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o640);
        assert_eq!(leftovers(dir.path()), 1);
    }

    #[test]
    fn an_exact_mode_is_not_cut_by_the_umask_and_overrides_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret.json");
        std::fs::write(&path, b"old").unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(0o666)).unwrap();
        write_file(&path, b"new", &WriteOptions::private_file()).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        let shared = dir.path().join("root.json");
        let options = WriteOptions {
            mode: FileMode::Exact(0o664),
            durability: Durability::None,
            temp: TempName::Prefix(".new-"),
        };
        write_file(&shared, b"{}", &options).unwrap();
        assert_eq!(std::fs::metadata(&shared).unwrap().mode() & 0o777, 0o664);
    }

    #[test]
    fn a_new_file_never_replaces_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("capsule.json");
        write_new_file(&path, b"first", &WriteOptions::shared_file()).unwrap();
        let err = write_new_file(&path, b"second", &WriteOptions::shared_file()).unwrap_err();
        assert_eq!(err.source.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        assert_eq!(leftovers(dir.path()), 1, "no temp file left");
    }

    #[test]
    fn unchanged_bytes_keep_the_inode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentpack.toml");
        assert!(write_file_if_changed(&path, b"a", &WriteOptions::shared_file()).unwrap());
        let before = std::fs::metadata(&path).unwrap().ino();
        assert!(!write_file_if_changed(&path, b"a", &WriteOptions::shared_file()).unwrap());
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), before);
        assert!(write_file_if_changed(&path, b"b", &WriteOptions::shared_file()).unwrap());
        assert_ne!(std::fs::metadata(&path).unwrap().ino(), before);
    }

    #[test]
    fn a_failed_write_names_the_file_once_and_keeps_the_cause_as_source() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope").join("pack.lock");
        let err = write_file(&path, b"x", &WriteOptions::shared_file()).unwrap_err();
        let message = err.to_string();
        assert!(message.ends_with("nope/pack.lock"), "{message}");
        assert!(!message.contains("os error"), "{message}");
        let source = std::error::Error::source(&err).unwrap().to_string();
        assert!(source.contains("No such file"), "{source}");
        assert_eq!(err.source.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn a_symlink_is_replaced_but_a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("current");
        write_symlink(
            Path::new("a"),
            &link,
            TempName::Prefix(".slot-"),
            Durability::FileAndDir,
        )
        .unwrap();
        write_symlink(
            Path::new("b"),
            &link,
            TempName::Prefix(".slot-"),
            Durability::None,
        )
        .unwrap();
        assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("b"));
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("f"), b"x").unwrap();
        let err =
            write_symlink(Path::new("b"), &real, TempName::Hidden, Durability::None).unwrap_err();
        assert!(real.join("f").is_file(), "{err}");
        assert_eq!(leftovers(dir.path()), 2, "no temp link left");
    }
}
