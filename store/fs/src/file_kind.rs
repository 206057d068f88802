//! What kind of special file is in the way, in the words messages use (`FIFO`, `socket`,
//! `character device`, `block device`).
//!
//! Owns only the naming: callers decide what a special file means for them (refuse to read it,
//! refuse to copy it). Never opens a file: opening a FIFO for reading can block.

use std::fs::FileType;
use std::os::unix::fs::FileTypeExt as _;

/// The kind of a special file (neither a regular file, a directory nor a symbolic link); `None`
/// for those three and for a kind this platform has no name for.
pub fn special_file_kind(file_type: &FileType) -> Option<&'static str> {
    if file_type.is_fifo() {
        Some("FIFO")
    } else if file_type.is_socket() {
        Some("socket")
    } else if file_type.is_char_device() {
        Some("character device")
    } else if file_type.is_block_device() {
        Some("block device")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_a_fifo_and_a_socket_and_nothing_for_plain_files() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let kind = |path: &std::path::Path| {
            special_file_kind(&std::fs::symlink_metadata(path).unwrap().file_type())
        };
        assert_eq!(kind(&fifo), Some("FIFO"));
        let socket = dir.path().join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        assert_eq!(kind(&socket), Some("socket"));
        assert_eq!(
            kind(std::path::Path::new("/dev/null")),
            Some("character device")
        );
        std::fs::write(dir.path().join("file"), b"x").unwrap();
        assert_eq!(kind(&dir.path().join("file")), None);
        assert_eq!(kind(dir.path()), None);
    }
}
