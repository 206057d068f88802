//! Link modes: put a file at a new place by reflink, else hard link, else copy.
//!
//! Owns [`LinkMode`] (what the user asked for; the cli reads `AGENTPACK_LINK_MODE` and passes it in),
//! [`LinkMethod`] (what was actually done) and the [`Linker`], which probes once per (source device,
//! destination device) pair and remembers the method that worked. Fallbacks follow uv's `link.rs`:
//! EXDEV, EPERM (`fs.protected_hardlinks`), EOPNOTSUPP and friends step down to the next method; EMLINK
//! ("too many links") copies that one file to a fresh inode. Empty files are never linked: callers
//! create them fresh. This module never decides where files go and never prints.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::Path;
use std::str::FromStr;
use std::sync::Mutex;

use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{errno, set_mode};

/// The environment variable the cli reads to choose a [`LinkMode`]. Read in one place (the cli), passed
/// to [`crate::StoreOptions::link_mode`].
pub const LINK_MODE_ENV: &str = "AGENTPACK_LINK_MODE";

/// What the user asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkMode {
    /// Reflink, else hard link, else copy; probed once per device pair.
    #[default]
    Auto,
    /// Reflink (copy-on-write clone); falls back to copy where the filesystem cannot.
    Reflink,
    /// Hard link; falls back to copy where it is impossible (other device, protected hard links).
    Hardlink,
    /// Always copy.
    Copy,
}

impl FromStr for LinkMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(LinkMode::Auto),
            "reflink" | "clone" => Ok(LinkMode::Reflink),
            "hardlink" | "hard-link" | "link" => Ok(LinkMode::Hardlink),
            "copy" => Ok(LinkMode::Copy),
            other => Err(format!(
                "invalid {LINK_MODE_ENV} value {other:?}: expected one of auto, reflink, hardlink, copy"
            )),
        }
    }
}

impl fmt::Display for LinkMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LinkMode::Auto => "auto",
            LinkMode::Reflink => "reflink",
            LinkMode::Hardlink => "hardlink",
            LinkMode::Copy => "copy",
        })
    }
}

/// What was actually done for a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkMethod {
    /// Copy-on-write clone (shares extents, separate inode).
    Reflink,
    /// Hard link (same inode).
    Hardlink,
    /// Plain copy.
    Copy,
}

impl fmt::Display for LinkMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LinkMethod::Reflink => "reflink",
            LinkMethod::Hardlink => "hardlink",
            LinkMethod::Copy => "copy",
        })
    }
}

/// How one file was placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Placed {
    /// The method used for this file.
    pub method: LinkMethod,
    /// The file was copied because its source had too many links (EMLINK).
    pub too_many_links: bool,
}

/// Places files by the best method, remembering per device pair what works.
#[derive(Debug)]
pub(crate) struct Linker {
    mode: LinkMode,
    memo: Mutex<HashMap<(u64, u64), LinkMethod>>,
}

fn chain(mode: LinkMode) -> &'static [LinkMethod] {
    match mode {
        LinkMode::Auto => &[LinkMethod::Reflink, LinkMethod::Hardlink, LinkMethod::Copy],
        LinkMode::Reflink => &[LinkMethod::Reflink, LinkMethod::Copy],
        LinkMode::Hardlink => &[LinkMethod::Hardlink, LinkMethod::Copy],
        LinkMode::Copy => &[LinkMethod::Copy],
    }
}

/// Errors after which the next method is tried.
fn falls_back(method: LinkMethod, err: &io::Error) -> bool {
    let code = errno(err);
    match method {
        LinkMethod::Reflink => {
            matches!(
                code,
                Some(
                    libc::EOPNOTSUPP
                        | libc::EXDEV
                        | libc::EINVAL
                        | libc::ENOTTY
                        | libc::ENOSYS
                        | libc::EPERM
                        | libc::EBADF
                        | libc::EISDIR
                )
            ) || err.kind() == io::ErrorKind::Unsupported
        }
        LinkMethod::Hardlink => {
            matches!(
                code,
                Some(libc::EXDEV | libc::EPERM | libc::EMLINK | libc::EOPNOTSUPP | libc::ENOSYS)
            )
        }
        LinkMethod::Copy => false,
    }
}

impl Linker {
    pub(crate) fn new(mode: LinkMode) -> Self {
        Linker {
            mode,
            memo: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn mode(&self) -> LinkMode {
        self.mode
    }

    /// The method remembered for a device pair, if probed.
    pub(crate) fn remembered(&self, src_dev: u64, dst_dev: u64) -> Option<LinkMethod> {
        self.memo
            .lock()
            .ok()
            .and_then(|memo| memo.get(&(src_dev, dst_dev)).copied())
    }

    /// Place the regular file `src` at `dst` (which must not exist). Copies and clones get `mode_bits`;
    /// a hard link shares the source's inode and mode.
    pub(crate) fn place(
        &self,
        src: &Path,
        dst: &Path,
        src_dev: u64,
        dst_dev: u64,
        mode_bits: u32,
    ) -> Result<Placed> {
        let methods = chain(self.mode);
        let remembered = self.remembered(src_dev, dst_dev);
        let start = remembered
            .and_then(|m| methods.iter().position(|&x| x == m))
            .unwrap_or(0);
        let mut too_many_links = false;
        let mut last_err = None;
        for &method in &methods[start..] {
            match try_method(method, src, dst, mode_bits) {
                Ok(()) => {
                    if remembered.is_none() && !too_many_links {
                        if let Ok(mut memo) = self.memo.lock() {
                            memo.insert((src_dev, dst_dev), method);
                        }
                    }
                    return Ok(Placed {
                        method,
                        too_many_links,
                    });
                }
                Err(err) if falls_back(method, &err) => {
                    if method == LinkMethod::Hardlink && errno(&err) == Some(libc::EMLINK) {
                        too_many_links = true;
                    }
                    last_err = Some(err);
                }
                Err(err) => return Err(StoreError::io(action_name(method), dst, err)),
            }
        }
        Err(StoreError::io(
            "copy",
            dst,
            last_err.unwrap_or_else(|| io::Error::other("no link method left")),
        ))
    }
}

fn action_name(method: LinkMethod) -> &'static str {
    match method {
        LinkMethod::Reflink => "reflink",
        LinkMethod::Hardlink => "hard-link",
        LinkMethod::Copy => "copy",
    }
}

fn try_method(method: LinkMethod, src: &Path, dst: &Path, mode_bits: u32) -> io::Result<()> {
    match method {
        LinkMethod::Hardlink => std::fs::hard_link(src, dst),
        LinkMethod::Reflink => {
            reflink_copy::reflink(src, dst)?;
            std::fs::set_permissions(dst, std::os::unix::fs::PermissionsExt::from_mode(mode_bits))
        }
        LinkMethod::Copy => copy_new(src, dst, mode_bits),
    }
}

/// Copy `src` to a new file `dst` (create-new) with `mode_bits`.
pub(crate) fn copy_new(src: &Path, dst: &Path, mode_bits: u32) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut from = std::fs::File::open(src)?;
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dst)?;
    let result = io::copy(&mut from, &mut to).and_then(|_| {
        drop(to);
        std::fs::set_permissions(dst, std::os::unix::fs::PermissionsExt::from_mode(mode_bits))
    });
    if result.is_err() {
        let _ = std::fs::remove_file(dst);
    }
    result
}

/// Create an empty file at `dst` with `mode_bits` (empty files are never linked).
pub(crate) fn create_empty(dst: &Path, mode_bits: u32) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dst)
        .ctx("create", dst)?;
    set_mode(dst, mode_bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_modes() {
        assert_eq!("auto".parse::<LinkMode>().unwrap(), LinkMode::Auto);
        assert_eq!("HardLink".parse::<LinkMode>().unwrap(), LinkMode::Hardlink);
        assert_eq!("clone".parse::<LinkMode>().unwrap(), LinkMode::Reflink);
        assert!("symlink"
            .parse::<LinkMode>()
            .unwrap_err()
            .contains(LINK_MODE_ENV));
    }
}
