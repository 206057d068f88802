//! Turning an upstream tree (a GitHub tarball or a git tree) into files on disk, by the documented rules.
//!
//! "What exactly is hashed" fixes the extraction: every regular entry is written with mode 0644
//! (execute bits dropped); a symbolic link is kept when its target is a clean relative path that stays
//! inside the tree, any other link becomes an empty regular file; nothing is written through a link.
//! On top of that this module refuses, with a message naming the entry: `..` and absolute paths,
//! non-UTF-8 names, hard links, devices, FIFOs and other special entries, entries whose declared size
//! runs past the end of the archive, and archives without exactly one top-level directory.
//!
//! A regular entry that was executable upstream (tar header mode with an execute bit, git mode
//! `100755`, a path package's file mode) is still written 0644, so the tree hashes with `f` records as
//! the docs say; its path is recorded in [`ExtractReport::executables`], which the store keeps beside
//! the package so that staged copies get the execute bit.
//!
//! A writer made [`SafeTreeWriter::with_limits`] (every download) also stops at the entry and
//! extracted-size caps, and [`extract_github_tarball_limited`] checks the compression ratio while
//! decompressing; a crossed limit is [`ExtractError::Limit`].
//!
//! It owns one directory (the writer's root) and must never write outside it or follow a link.
//!
//! Submodules, one concept each: `writer` (the [`SafeTreeWriter`] and its limits), `tarball`
//! (reading tar streams through it, the compression ratio checked), `filters` (which entries are
//! wanted, skipped or refused), `copy` (copying a package out of an extracted snapshot).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::limits::LimitExceeded;

mod copy;
mod filters;
mod tarball;
mod writer;

pub use copy::{copy_package_tree, copy_package_tree_with_executables};
pub(crate) use filters::is_metadata_entry;
pub use filters::needed_for;
pub(crate) use tarball::{archive_error, entry_name, write_entry};
pub use tarball::{
    extract_github_tarball, extract_github_tarball_limited, extract_github_tarball_only,
};
pub use writer::SafeTreeWriter;

/// Mode of every regular file extraction writes.
pub const FILE_MODE: u32 = 0o644;

/// Why a tree could not be extracted.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    /// A filesystem operation failed.
    #[error("cannot write {path}")]
    Io {
        /// The path being written.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The archive could not be read (corrupt gzip or tar).
    #[error("cannot read the archive: the download is corrupt or not a gzip tar")]
    Archive {
        /// The cause.
        source: std::io::Error,
    },
    /// An entry declares more bytes than the archive holds.
    #[error("archive entry {name} is truncated: its header declares {declared} bytes but the archive ends first")]
    Truncated {
        /// Entry name.
        name: String,
        /// Size in the header.
        declared: u64,
    },
    /// An absolute path or one with `..`.
    #[error("refusing archive entry {name:?}: absolute paths and `..` components are not allowed")]
    UnsafePath {
        /// Entry name.
        name: String,
    },
    /// A name that is not UTF-8.
    #[error("refusing archive entry {name:?}: its name is not valid UTF-8")]
    NonUtf8Name {
        /// Entry name, lossily decoded.
        name: String,
    },
    /// A hard-link entry.
    #[error("refusing archive entry {name}: hard links ({name} -> {target}) are not supported in packages")]
    HardLink {
        /// Entry name.
        name: String,
        /// Link target.
        target: String,
    },
    /// A device, FIFO or other entry that is neither file, directory nor symlink.
    #[error("refusing archive entry {name}: {kind} entries are not allowed in packages (only files, directories and symbolic links)")]
    SpecialFile {
        /// Entry name.
        name: String,
        /// What it is.
        kind: String,
    },
    /// An entry below a path that is a symbolic link.
    #[error("refusing archive entry {name}: it would be written through the symbolic link {link}")]
    ThroughLink {
        /// Entry name.
        name: String,
        /// The link in its path.
        link: String,
    },
    /// An entry outside the single top-level directory.
    #[error("refusing archive entry {name}: a GitHub tarball has exactly one top-level directory")]
    NotOneTopLevel {
        /// Entry name.
        name: String,
    },
    /// A file where a directory already is, or the reverse.
    #[error("refusing archive entry {name}: it conflicts with an earlier entry of another type")]
    Conflict {
        /// Entry name.
        name: String,
    },
    /// The archive crossed a limit (extracted bytes, entries, compression ratio).
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
}

/// What an extraction did besides writing files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtractReport {
    /// Regular files written.
    pub files: usize,
    /// Symbolic links kept as links.
    pub links_kept: usize,
    /// Links written as empty files (absolute or leaving the tree), by path.
    pub links_emptied: Vec<String>,
    /// Regular files that were executable in the source (written 0644 all the same), by path.
    pub executables: BTreeSet<String>,
}

/// Is `target`, a link at `link_path` (relative, `/`-separated), a clean relative path that stays inside
/// the tree? Clean: not absolute, no empty or `.` components, `..` never climbing above the root.
pub fn link_stays_inside(link_path: &str, target: &str) -> bool {
    if target.is_empty() || target.starts_with('/') || target.contains('\0') {
        return false;
    }
    let mut stack: Vec<&str> = link_path.split('/').collect();
    stack.pop(); // the link's own name
    for component in target.split('/') {
        match component {
            "" | "." => return false,
            ".." => {
                if stack.pop().is_none() {
                    return false;
                }
            }
            name => stack.push(name),
        }
    }
    true
}

/// Splits a relative entry name into clean components, refusing absolute paths and `..`.
/// Empty and `.` components are dropped (`./a//b` is `a/b`).
pub fn clean_relative(name: &str) -> Result<String, ExtractError> {
    if name.starts_with('/') || name.contains('\0') || name.contains('\\') {
        return Err(ExtractError::UnsafePath {
            name: name.to_owned(),
        });
    }
    let mut parts = Vec::new();
    for component in name.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                return Err(ExtractError::UnsafePath {
                    name: name.to_owned(),
                })
            }
            other => parts.push(other),
        }
    }
    Ok(parts.join("/"))
}

fn io(path: &Path, source: std::io::Error) -> ExtractError {
    ExtractError::Io {
        path: path.to_path_buf(),
        source,
    }
}
