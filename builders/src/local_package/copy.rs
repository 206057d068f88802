//! Collecting a local package's entries (files, directories, links; `.git` and git-ignored files
//! left out) and copying them through [`SafeTreeWriter`] while hashing (`dirhash40`).
//!
//! Owns: [`LocalEntry`], [`collect_entries`], [`collect_files`], the streaming [`DirHasher`] and the
//! link rules of the copy. Must never write into the source directory or read through a link.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use agentpack_harness::input::tree::{LinkProblem, Node, PackageTree, TreeEntry};

use super::*;
use crate::extract::{ExtractError, SafeTreeWriter};

/// `dirhash40` computed while files stream through (the documented `dirhash40_from_entries`
/// without holding the bytes): files must be fed in bytewise path order.
#[derive(Default)]
pub(super) struct DirHasher {
    hasher: sha2::Sha256,
    files: usize,
}

/// A file's bytes on their way to the copy, fed to the [`DirHasher`].
pub(super) struct HashingReader<'h, R> {
    inner: R,
    hasher: &'h mut sha2::Sha256,
    /// A read of the source failed (as opposed to a write of the copy).
    failed: bool,
}

impl<R: std::io::Read> std::io::Read for HashingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use sha2::Digest as _;
        let n = self.inner.read(buf).inspect_err(|_| self.failed = true)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

impl DirHasher {
    pub(super) fn file<R: std::io::Read>(
        &mut self,
        relative: &str,
        inner: R,
    ) -> HashingReader<'_, R> {
        use sha2::Digest as _;
        self.hasher.update(relative.as_bytes());
        self.hasher.update(b"\0");
        self.files += 1;
        HashingReader {
            inner,
            hasher: &mut self.hasher,
            failed: false,
        }
    }

    pub(super) fn finish(self) -> String {
        use sha2::Digest as _;
        let digest: [u8; 32] = self.hasher.finalize().into();
        hex::encode(digest)[..40].to_owned()
    }
}

/// One entry of a local package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalEntry {
    /// A regular file, by absolute path.
    File(PathBuf),
    /// A symbolic link with its target (`None` when the target is not UTF-8).
    Link(Option<String>),
}

/// The entries a local package consists of: `(relative path, entry)`, regular files and symbolic
/// links (never followed), `.git` skipped, git-ignored paths left out, sorted bytewise by path.
pub fn collect_entries(
    module: &str,
    source: &Path,
) -> Result<Vec<(String, LocalEntry)>, LocalPackageError> {
    let walker = ignore::WalkBuilder::new(source)
        .hidden(false)
        .ignore(false)
        .git_global(false)
        .git_exclude(true)
        .git_ignore(true)
        .require_git(false)
        .parents(true)
        .follow_links(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .build();
    let mut entries = Vec::new();
    for entry in walker {
        let entry = entry.map_err(|e| LocalPackageError::Io {
            module: module.to_owned(),
            path: source.to_path_buf(),
            cause: std::io::Error::other(e),
        })?;
        let Some(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_dir() {
            continue;
        }
        if !file_type.is_file() && !file_type.is_symlink() {
            use std::os::unix::fs::FileTypeExt as _;
            let kind = if file_type.is_fifo() {
                "FIFO"
            } else if file_type.is_socket() {
                "socket"
            } else if file_type.is_char_device() {
                "character device"
            } else if file_type.is_block_device() {
                "block device"
            } else {
                "special file"
            };
            return Err(LocalPackageError::SpecialFile {
                module: module.to_owned(),
                path: entry.path().to_path_buf(),
                kind,
            });
        }
        let Ok(relative) = entry.path().strip_prefix(source) else {
            continue;
        };
        let relative = relative
            .to_str()
            .ok_or_else(|| LocalPackageError::NonUtf8 {
                module: module.to_owned(),
                path: entry.path().to_path_buf(),
            })?;
        let local = if file_type.is_symlink() {
            let target =
                fs_err::read_link(entry.path()).map_err(|source| LocalPackageError::Io {
                    module: module.to_owned(),
                    path: entry.path().to_path_buf(),
                    cause: source,
                })?;
            LocalEntry::Link(target.to_str().map(str::to_owned))
        } else {
            LocalEntry::File(entry.path().to_path_buf())
        };
        entries.push((relative.to_owned(), local));
    }
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(entries)
}

/// The regular files a local package consists of: `(relative path, absolute path)`, symlinks and
/// `.git` skipped, git-ignored files left out, sorted bytewise by relative path (what `dirhash40`
/// covers).
pub fn collect_files(
    module: &str,
    source: &Path,
) -> Result<Vec<(String, PathBuf)>, LocalPackageError> {
    Ok(collect_entries(module, source)?
        .into_iter()
        .filter_map(|(relative, entry)| match entry {
            LocalEntry::File(absolute) => Some((relative, absolute)),
            LocalEntry::Link(_) => None,
        })
        .collect())
}

/// Why extraction wrote a link to `target` as an empty file; only called for links that failed
/// [`crate::extract::link_stays_inside`], so a target that is neither absolute nor unclean climbs out.
pub(super) fn emptied_issue(target: &str) -> LinkIssue {
    if target.starts_with('/') {
        LinkIssue::Absolute
    } else if target.split('/').any(|c| c.is_empty() || c == ".") {
        LinkIssue::NotClean
    } else {
        LinkIssue::LeavesPackage
    }
}

/// The links kept in the copy that cannot be followed inside it: dangling, a chain that loops, or a
/// directory that contains the link itself (a walk through it never ends).
pub(super) fn unfollowable_links(
    copy_listing: BTreeMap<String, TreeEntry>,
    destination: &Path,
) -> Vec<(String, String, LinkIssue)> {
    let tree = PackageTree::from_entries(destination.to_path_buf(), copy_listing);
    let mut problems = Vec::new();
    for (path, entry) in tree.entries() {
        let TreeEntry::Symlink { target } = entry else {
            continue;
        };
        let issue = match tree.resolve(path) {
            Ok(Node::File(_)) => continue,
            Ok(Node::Dir(dir)) => {
                if dir.is_empty() || path.starts_with(&format!("{dir}/")) {
                    LinkIssue::Loops
                } else {
                    continue;
                }
            }
            Err(LinkProblem::Loop { .. }) => LinkIssue::Loops,
            Err(LinkProblem::Missing) => LinkIssue::Dangling,
            // Kept links stay inside by construction; a chain that still leaves is reported as such.
            Err(LinkProblem::Outside { .. }) => LinkIssue::LeavesPackage,
        };
        problems.push((path.clone(), target.clone(), issue));
    }
    problems
}

pub(super) struct Copied {
    pub(super) dirhash40: String,
    pub(super) files: usize,
    pub(super) links: usize,
    pub(super) skipped_links: Vec<SkippedLink>,
    pub(super) executables: std::collections::BTreeSet<String>,
}

pub(super) fn copy_entries(
    module: &str,
    source: &Path,
    entries: &[(String, LocalEntry)],
    destination: &Path,
) -> Result<Copied, LocalPackageError> {
    let io = |path: &Path, source| LocalPackageError::Io {
        module: module.to_owned(),
        path: path.to_path_buf(),
        cause: source,
    };
    let copy_error = |error| LocalPackageError::Copy {
        module: module.to_owned(),
        source_dir: source.to_path_buf(),
        error,
    };
    let mut writer = SafeTreeWriter::new(destination).map_err(copy_error)?;
    let mut dirhash = DirHasher::default();
    let mut listing = BTreeMap::new();
    let mut targets = BTreeMap::new();
    for (relative, entry) in entries {
        match entry {
            LocalEntry::File(absolute) => {
                // Streamed: hashed and copied in one pass, never read whole into memory; opened
                // without blocking, so a file swapped for a FIFO meanwhile is an error, not a hang.
                let file = open_regular(absolute).map_err(|e| io(absolute, e))?;
                let executable = file
                    .metadata()
                    .map_err(|e| io(absolute, e))?
                    .permissions()
                    .mode()
                    & 0o111
                    != 0;
                let mut reader = dirhash.file(relative, file);
                let written = writer.file_from_source(relative, &mut reader, executable);
                let source_failed = reader.failed;
                written.map_err(|error| match error {
                    ExtractError::Io { source, .. } if source_failed => io(absolute, source),
                    other => copy_error(other),
                })?;
            }
            LocalEntry::Link(target) => {
                // A target that is not UTF-8 is no clean relative path: extraction empties it.
                writer
                    .symlink(relative, target.as_deref().unwrap_or(""))
                    .map_err(copy_error)?;
                targets.insert(relative.as_str(), target.as_deref());
            }
        }
    }
    let report = writer.finish();
    let mut skipped_links = Vec::new();
    for relative in &report.links_emptied {
        let target = targets.get(relative.as_str()).copied().flatten();
        let (target, issue) = match target {
            Some(target) => (target.to_owned(), emptied_issue(target)),
            None => {
                let raw = fs_err::read_link(source.join(relative)).unwrap_or_default();
                (
                    String::from_utf8_lossy(raw.as_os_str().as_bytes()).into_owned(),
                    LinkIssue::NonUtf8Target,
                )
            }
        };
        skipped_links.push(SkippedLink {
            path: relative.clone(),
            target,
            issue,
        });
    }
    for (relative, entry) in entries {
        let listed = match entry {
            LocalEntry::File(_) => TreeEntry::File { executable: false },
            LocalEntry::Link(_) if report.links_emptied.contains(relative) => {
                TreeEntry::File { executable: false }
            }
            LocalEntry::Link(target) => TreeEntry::Symlink {
                target: target.clone().unwrap_or_default(),
            },
        };
        listing.insert(relative.clone(), listed);
    }
    skipped_links.extend(unfollowable_links(listing, destination).into_iter().map(
        |(path, target, issue)| SkippedLink {
            path,
            target,
            issue,
        },
    ));
    skipped_links.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    Ok(Copied {
        files: dirhash.files,
        links: report.links_kept,
        dirhash40: dirhash.finish(),
        skipped_links,
        executables: report.executables,
    })
}
