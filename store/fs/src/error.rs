//! The toolkit's error: what was being done, to which path, and the OS cause as the error's source
//! (printed once by whoever prints the chain, never inside this message).
//!
//! Also [`os_cause`]: `fs-err` puts the path and the OS message into one `io::Error` text; a caller
//! that names the path itself takes the OS cause alone from it, so the path is printed once.

use std::io;
use std::path::PathBuf;

/// A filesystem step that failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}", path.display())]
pub struct FsError {
    /// What was being done ("write", "replace", "create the link", ...).
    pub action: &'static str,
    /// The file it was about.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: io::Error,
}

impl FsError {
    /// An error of `action` on `path`.
    pub fn new(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self {
            action,
            path: path.into(),
            source,
        }
    }
}

/// The OS cause inside `err` when `err` is an `fs-err` error (whose text is
/// ``failed to <verb> `<path>`: <os message> (os error N)`` and whose source is hidden): the plain
/// `io::Error` of that OS error number, so a caller that names the path and the action itself does
/// not print them twice, and `raw_os_error()` works again. Any other error is returned unchanged.
pub fn os_cause(err: io::Error) -> io::Error {
    if err.raw_os_error().is_some() || err.get_ref().is_none() {
        return err;
    }
    let text = err.to_string();
    if !text.starts_with("failed to ") {
        return err;
    }
    let code = text
        .rsplit_once("(os error ")
        .and_then(|(_, tail)| tail.strip_suffix(')'))
        .and_then(|digits| digits.parse::<i32>().ok());
    match code {
        Some(code) => io::Error::from_raw_os_error(code),
        None => match text.rsplit_once("`: ") {
            Some((_, cause)) => io::Error::new(err.kind(), cause.to_owned()),
            None => err,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_fs_err_error_gives_its_os_cause_alone() {
        let wrapped =
            io::Error::other("failed to create directory `/x/y`: Not a directory (os error 20)");
        let cause = os_cause(wrapped);
        assert_eq!(cause.raw_os_error(), Some(libc::ENOTDIR));
        assert_eq!(cause.to_string(), "Not a directory (os error 20)");
        let plain = io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(os_cause(plain).raw_os_error(), Some(libc::EACCES));
        let real = fs_err::create_dir("/proc/self/status/x").unwrap_err();
        assert!(real.to_string().contains("/proc/self/status/x"), "{real}");
        let cause = os_cause(real);
        assert_eq!(cause.raw_os_error(), Some(libc::ENOTDIR), "{cause}");
        let other = io::Error::other("disk on fire");
        assert_eq!(os_cause(other).to_string(), "disk on fire");
    }
}
