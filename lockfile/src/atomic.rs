//! Crash-safe replacement of the project files, on the toolkit's one atomic writer
//! (`agentpack_fs::write_file`: temp file in the same directory, fsync, rename, fsync of the
//! directory).
//!
//! Owns: [`write_atomic`], [`write_if_changed`] and the readers of project files that refuse a FIFO
//! ([`read_regular_file`]). A reader sees the old file or the new one, never a torn one. Does not take
//! a cross-process lock: callers that may race (two `lock` runs) hold the project lock around the
//! write.

use std::path::{Path, PathBuf};

use agentpack_fs::WriteOptions;

/// A write that failed, with the file it was for. The cause is the error's source (printed once by
/// whoever prints the chain), not part of this message.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}", path.display())]
pub struct WriteError {
    /// The target file.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}

impl From<agentpack_fs::FsError> for WriteError {
    fn from(err: agentpack_fs::FsError) -> Self {
        Self {
            path: err.path,
            source: err.source,
        }
    }
}

/// Replaces `path` with `bytes` atomically (temp file in the same directory, fsync, rename,
/// fsync of the directory). An existing file's permissions are kept; a new file gets the mode a
/// plain `open` would give it (0666 less the umask): `agentpack.toml` and `pack.lock` are meant to
/// be shared.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    agentpack_fs::write_file(path, bytes, &WriteOptions::shared_file())?;
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
    let kind = match agentpack_fs::special_file_kind(&meta.file_type()) {
        Some(special) => format!("a {special}"),
        None if meta.is_dir() => "a directory".to_owned(),
        None => "not a regular file".to_owned(),
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
    Ok(agentpack_fs::write_file_if_changed(
        path,
        bytes,
        &WriteOptions::shared_file(),
    )?)
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
        let e = write_atomic(&path, b"x").unwrap_err();
        let message = e.to_string();
        assert!(message.ends_with("nope/pack.lock"), "{message}");
        assert!(
            !message.contains("No such file"),
            "the cause is the source: {message}"
        );
        assert_eq!(e.source.kind(), std::io::ErrorKind::NotFound);
    }
}
