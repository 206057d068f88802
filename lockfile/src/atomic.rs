//! Crash-safe file replacement: write a temp file in the same directory, fsync it, rename it over
//! the target, fsync the directory.
//!
//! Owns: [`write_atomic`] and [`write_if_changed`]. A reader sees the old file or the new one,
//! never a torn one. Does not take a cross-process lock: callers that may race (two `lock` runs)
//! hold the project lock around the write.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A write that failed, with the file it was for.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}: {source}", path.display())]
pub struct WriteError {
    /// The target file.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> WriteError + '_ {
    move |source| WriteError {
        path: path.to_path_buf(),
        source,
    }
}

/// 0666: what `open(2)` turns into the usual 0644 through the umask.
#[cfg(unix)]
fn shareable() -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::Permissions::from_mode(0o666)
}

/// Replaces `path` with `bytes` atomically (temp file in the same directory, fsync, rename,
/// fsync of the directory). An existing file's permissions are kept.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A new file gets the mode a plain `open` would give it (0666 less the umask), not
    // tempfile's private 0600: agentpack.toml and pack.lock are meant to be shared.
    let prefix = format!(".{file_name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    builder.permissions(shareable());
    let mut temp = builder.tempfile_in(&dir).map_err(io_err(path))?;
    temp.write_all(bytes).map_err(io_err(path))?;
    if let Ok(meta) = fs_err::metadata(path) {
        temp.as_file()
            .set_permissions(meta.permissions())
            .map_err(io_err(path))?;
    }
    temp.as_file().sync_all().map_err(io_err(path))?;
    temp.persist(path).map_err(|e| WriteError {
        path: path.to_path_buf(),
        source: e.error,
    })?;
    // Make the rename durable; a directory that cannot be opened or synced (some filesystems)
    // does not make the write fail: the data itself is already synced.
    if let Ok(handle) = std::fs::File::open(&dir) {
        let _ = handle.sync_all();
    }
    Ok(())
}

/// Reads a project file (`pack.lock`, `agentpack.toml`, `.agents/mcp.json`) that must be a regular
/// file (a symbolic link to one is fine). A FIFO, socket or device in its place is an error naming
/// what it is, checked before the file is opened: opening a FIFO for reading blocks until a writer
/// appears, which would hang the command.
pub fn read_regular_file(path: &Path) -> std::io::Result<Vec<u8>> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(not_regular(path, &meta));
    }
    std::fs::read(path)
}

/// [`read_regular_file`] as UTF-8 text.
pub fn read_regular_to_string(path: &Path) -> std::io::Result<String> {
    String::from_utf8(read_regular_file(path)?).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is not valid UTF-8", path.display()),
        )
    })
}

fn not_regular(path: &Path, meta: &std::fs::Metadata) -> std::io::Error {
    #[cfg(unix)]
    let kind = {
        use std::os::unix::fs::FileTypeExt as _;
        let t = meta.file_type();
        if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else if t.is_char_device() {
            "a character device"
        } else if t.is_block_device() {
            "a block device"
        } else if t.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        }
    };
    #[cfg(not(unix))]
    let kind = if meta.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    };
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "{} is {kind}, not a regular file; agentpack never reads project files from a FIFO, socket or device (fix: replace it with a regular file)",
            path.display()
        ),
    )
}

/// Writes `bytes` to `path` atomically unless the file already holds exactly these bytes, in
/// which case the file is not touched (its modification time stays). Returns whether it wrote.
pub fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<bool, WriteError> {
    match read_regular_file(path) {
        Ok(existing) if existing == bytes => return Ok(false),
        _ => {}
    }
    write_atomic(path, bytes)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_replaces_and_skips_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pack.lock");
        assert!(write_if_changed(&path, b"one\n").unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"one\n");
        let before = std::fs::metadata(&path).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!write_if_changed(&path, b"one\n").unwrap());
        let after = std::fs::metadata(&path).unwrap();
        assert_eq!(before.modified().unwrap(), after.modified().unwrap());
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            assert_eq!(
                before.ino(),
                after.ino(),
                "unchanged file must not be replaced"
            );
        }
        assert!(write_if_changed(&path, b"two\n").unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"two\n");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp files left behind");
    }

    #[test]
    fn missing_directory_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope").join("pack.lock");
        let e = write_atomic(&path, b"x").unwrap_err().to_string();
        assert!(e.contains("nope/pack.lock"), "{e}");
    }
}
