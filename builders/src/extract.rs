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

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tar::EntryType;

use crate::limits::{self, CountingReader, LimitExceeded, LimitKind, Limits, RatioGuard};

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

/// Writes entries below one root directory by the extraction rules; see the module docs.
#[derive(Debug)]
pub struct SafeTreeWriter {
    root: PathBuf,
    links: BTreeSet<String>,
    dirs: BTreeSet<String>,
    report: ExtractReport,
    /// Entry and byte caps, with what is being written (for messages); `None`: unbounded.
    bounds: Option<(Limits, String)>,
    entries_written: u64,
    bytes_written: u64,
}

fn io(path: &Path, source: std::io::Error) -> ExtractError {
    ExtractError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl SafeTreeWriter {
    /// A writer into `root`, which is created if missing.
    pub fn new(root: &Path) -> Result<SafeTreeWriter, ExtractError> {
        fs_err::create_dir_all(root).map_err(|e| io(root, e))?;
        Ok(SafeTreeWriter {
            root: root.to_path_buf(),
            links: BTreeSet::new(),
            dirs: BTreeSet::new(),
            report: ExtractReport::default(),
            bounds: None,
            entries_written: 0,
            bytes_written: 0,
        })
    }

    /// Bounds this writer by `limits` (entries and extracted bytes); `what` names the source in
    /// messages (`the tarball of github.com/o/r at <commit>`).
    pub fn with_limits(mut self, limits: Limits, what: impl Into<String>) -> SafeTreeWriter {
        self.bounds = Some((limits, what.into()));
        self
    }

    /// Counts one more entry against the entry cap.
    fn count_entry(&mut self) -> Result<(), ExtractError> {
        self.entries_written += 1;
        if let Some((limits, what)) = &self.bounds {
            if self.entries_written > limits.max_files {
                return Err(ExtractError::Limit(LimitExceeded::new(
                    limits,
                    LimitKind::Files,
                    what.clone(),
                    format!("holds more than {} entries", limits.max_files),
                )));
            }
        }
        Ok(())
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What has been written so far.
    pub fn report(&self) -> &ExtractReport {
        &self.report
    }

    /// Ends writing and returns the report.
    pub fn finish(self) -> ExtractReport {
        self.report
    }

    /// Checks `name`, refuses a path below a link, creates parent directories; returns the clean
    /// relative path and the absolute destination (with any earlier non-directory entry removed).
    fn prepare(
        &mut self,
        name: &str,
        for_dir: bool,
    ) -> Result<Option<(String, PathBuf)>, ExtractError> {
        let clean = clean_relative(name)?;
        if clean.is_empty() {
            return Ok(None);
        }
        let mut prefix = String::new();
        let components: Vec<&str> = clean.split('/').collect();
        for (index, component) in components.iter().enumerate() {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(component);
            let is_last = index + 1 == components.len();
            if !is_last || for_dir {
                if self.links.contains(&prefix) {
                    return Err(ExtractError::ThroughLink {
                        name: name.to_owned(),
                        link: prefix.clone(),
                    });
                }
                let dir = self.root.join(&prefix);
                if !self.dirs.contains(&prefix) {
                    match fs_err::symlink_metadata(&dir) {
                        Ok(meta) if meta.is_dir() => {}
                        Ok(meta) if meta.file_type().is_symlink() => {
                            return Err(ExtractError::ThroughLink {
                                name: name.to_owned(),
                                link: prefix.clone(),
                            })
                        }
                        Ok(_) => {
                            return Err(ExtractError::Conflict {
                                name: name.to_owned(),
                            })
                        }
                        Err(_) => fs_err::create_dir(&dir).map_err(|e| io(&dir, e))?,
                    }
                    self.dirs.insert(prefix.clone());
                }
            }
        }
        let destination = self.root.join(&clean);
        if !for_dir {
            if self.dirs.contains(&clean) {
                return Err(ExtractError::Conflict {
                    name: name.to_owned(),
                });
            }
            match fs_err::symlink_metadata(&destination) {
                Ok(meta) if meta.is_dir() => {
                    return Err(ExtractError::Conflict {
                        name: name.to_owned(),
                    })
                }
                Ok(_) => {
                    // A later entry of the same name replaces the earlier one, as `tar` does.
                    fs_err::remove_file(&destination).map_err(|e| io(&destination, e))?;
                    self.links.remove(&clean);
                }
                Err(_) => {}
            }
        }
        Ok(Some((clean, destination)))
    }

    /// A directory (also created implicitly by entries below it).
    pub fn dir(&mut self, name: &str) -> Result<(), ExtractError> {
        self.count_entry()?;
        self.prepare(name, true)?;
        Ok(())
    }

    /// A regular file with `contents`, written 0644.
    /// Returns the number of bytes written.
    pub fn file(&mut self, name: &str, contents: &mut dyn Read) -> Result<u64, ExtractError> {
        let destination = self.prepare_file(name)?;
        self.write_contents(name, &destination, contents)
    }

    /// Counts and checks the regular file `name`; its destination.
    fn prepare_file(&mut self, name: &str) -> Result<PathBuf, ExtractError> {
        self.count_entry()?;
        match self.prepare(name, false)? {
            Some((_, destination)) => Ok(destination),
            None => Err(ExtractError::Conflict {
                name: name.to_owned(),
            }),
        }
    }

    /// Writes `contents` to the new file `destination` (the entry `name`), within the byte cap.
    fn write_contents(
        &mut self,
        name: &str,
        destination: &Path,
        contents: &mut dyn Read,
    ) -> Result<u64, ExtractError> {
        let mut file = fs_err::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(destination)
            .map_err(|e| io(destination, e))?;
        let written = match &self.bounds {
            None => std::io::copy(contents, &mut file),
            Some((limits, what)) => {
                let room = limits
                    .max_extracted_bytes
                    .saturating_sub(self.bytes_written);
                let crossing = LimitExceeded::new(
                    limits,
                    LimitKind::ExtractedSize,
                    what.clone(),
                    format!(
                        "unpacks to more than {} (at {name})",
                        limits.describe(LimitKind::ExtractedSize)
                    ),
                );
                std::io::copy(
                    &mut limits::CappedReader::new(contents, room, crossing),
                    &mut file,
                )
            }
        }
        .map_err(|e| match LimitExceeded::find(&e) {
            Some(limit) => ExtractError::Limit(limit.clone()),
            None => io(destination, e),
        })?;
        self.bytes_written += written;
        file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
            .map_err(|e| io(destination, e))?;
        self.report.files += 1;
        Ok(written)
    }

    /// A regular file like [`SafeTreeWriter::file`]; `executable` says whether the source had an
    /// execute bit, recorded in [`ExtractReport::executables`] (the file is written 0644 all the same).
    pub fn file_from_source(
        &mut self,
        name: &str,
        contents: &mut dyn Read,
        executable: bool,
    ) -> Result<u64, ExtractError> {
        let written = self.file(name, contents)?;
        self.note_executable(name, executable)?;
        Ok(written)
    }

    /// [`SafeTreeWriter::file_from_source`] of the file at `source`, made a hard link of it when it
    /// is written the way this writer writes files (a regular 0644 file: one this crate extracted
    /// into scratch space, which nothing changes afterwards) and the writer has no caps; copied
    /// otherwise (another filesystem, another mode). A link costs no new inode and no bytes; the
    /// store copies what it publishes all the same, so it never shares an inode with the source.
    pub(crate) fn file_linked(
        &mut self,
        name: &str,
        source: &Path,
        executable: bool,
    ) -> Result<u64, ExtractError> {
        let destination = self.prepare_file(name)?;
        let meta = fs_err::symlink_metadata(source).map_err(|e| io(source, e))?;
        let linkable = self.bounds.is_none()
            && meta.is_file()
            && meta.permissions().mode() & 0o7777 == FILE_MODE;
        let written = if linkable && std::fs::hard_link(source, &destination).is_ok() {
            self.report.files += 1;
            meta.len()
        } else {
            let mut file = fs_err::File::open(source).map_err(|e| io(source, e))?;
            self.write_contents(name, &destination, &mut file)?
        };
        self.note_executable(name, executable)?;
        Ok(written)
    }

    /// Records whether the file `name` was executable in its source.
    fn note_executable(&mut self, name: &str, executable: bool) -> Result<(), ExtractError> {
        let clean = clean_relative(name)?;
        if executable {
            self.report.executables.insert(clean);
        } else {
            self.report.executables.remove(&clean);
        }
        Ok(())
    }

    /// A symbolic link: kept when [`link_stays_inside`], else written as an empty regular file.
    pub fn symlink(&mut self, name: &str, target: &str) -> Result<(), ExtractError> {
        self.count_entry()?;
        let Some((clean, destination)) = self.prepare(name, false)? else {
            return Err(ExtractError::Conflict {
                name: name.to_owned(),
            });
        };
        if link_stays_inside(&clean, target) {
            std::os::unix::fs::symlink(target, &destination).map_err(|e| io(&destination, e))?;
            self.links.insert(clean);
            self.report.links_kept += 1;
        } else {
            let file = fs_err::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&destination)
                .map_err(|e| io(&destination, e))?;
            file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
                .map_err(|e| io(&destination, e))?;
            self.report.links_emptied.push(clean);
        }
        Ok(())
    }
}

/// An entry's name as UTF-8, or the refusal naming it (also used by [`crate::oci::archive`]).
pub(crate) fn entry_name(bytes: &[u8]) -> Result<String, ExtractError> {
    std::str::from_utf8(bytes)
        .map(str::to_owned)
        .map_err(|_| ExtractError::NonUtf8Name {
            name: String::from_utf8_lossy(bytes).into_owned(),
        })
}

/// Extracts a gzip tar (a GitHub tarball) into `destination`, dropping its single top-level directory.
/// Unbounded: for archives already known to be small; downloads use [`extract_github_tarball_limited`].
pub fn extract_github_tarball(
    gzip_tar: impl Read,
    destination: &Path,
) -> Result<ExtractReport, ExtractError> {
    let writer = SafeTreeWriter::new(destination)?;
    extract_into(flate2::read::GzDecoder::new(gzip_tar), writer, &|_| true)
}

/// [`extract_github_tarball`] within `limits`: entries, extracted bytes and the compression ratio
/// (checked while decompressing, so a decompression bomb stops early).
pub fn extract_github_tarball_limited(
    gzip_tar: impl Read,
    destination: &Path,
    limits: &Limits,
) -> Result<ExtractReport, ExtractError> {
    extract_github_tarball_only(gzip_tar, destination, limits, &|_| true)
}

/// [`extract_github_tarball_limited`] writing only the entries whose repository-relative path
/// `wanted` keeps (the report covers those). Every entry is still checked by name (`..`, absolute,
/// non-UTF-8, one top-level directory) and kind (hard links, devices...), so an archive refused
/// whole is refused here too; the limits count what is decompressed and written.
pub fn extract_github_tarball_only(
    gzip_tar: impl Read,
    destination: &Path,
    limits: &Limits,
    wanted: &dyn Fn(&str) -> bool,
) -> Result<ExtractReport, ExtractError> {
    let what = "the downloaded archive";
    let writer = SafeTreeWriter::new(destination)?.with_limits(*limits, what);
    let (counted, compressed) = CountingReader::new(gzip_tar);
    let guarded = RatioGuard::new(
        flate2::read::GzDecoder::new(counted),
        compressed,
        *limits,
        what,
    );
    extract_into(guarded, writer, wanted)
}

/// Whether the repository-relative `path` is needed to copy out the packages at `paths`
/// (repository-relative, `""` for the whole repository): inside one of them, or a directory on the
/// way to one (so a link on the way is seen), or one of the catalog files normalization reads at
/// the root ([`crate::marketplace::CATALOG_FILES`]).
pub fn needed_for(paths: &[String], path: &str) -> bool {
    let path = path.trim_end_matches('/');
    paths.iter().any(|wanted| {
        let wanted = wanted.trim_matches('/');
        wanted.is_empty()
            || path == wanted
            || path
                .strip_prefix(wanted)
                .is_some_and(|rest| rest.starts_with('/'))
            || wanted
                .strip_prefix(path)
                .is_some_and(|rest| rest.starts_with('/'))
    }) || crate::marketplace::CATALOG_FILES.iter().any(|catalog| {
        *catalog == path
            || catalog
                .strip_prefix(path)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// The archive error of a tar read: a limit crossed while decompressing, or corruption.
pub(crate) fn archive_error(source: std::io::Error) -> ExtractError {
    match LimitExceeded::find(&source) {
        Some(limit) => ExtractError::Limit(limit.clone()),
        None => ExtractError::Archive { source },
    }
}

/// Pax and GNU long-name headers: tar reads them into the next entry, there is nothing to write.
pub(crate) fn is_metadata_entry(kind: EntryType) -> bool {
    matches!(
        kind,
        EntryType::XGlobalHeader
            | EntryType::XHeader
            | EntryType::GNULongName
            | EntryType::GNULongLink
    )
}

fn extract_into(
    tar_stream: impl Read,
    mut writer: SafeTreeWriter,
    wanted: &dyn Fn(&str) -> bool,
) -> Result<ExtractReport, ExtractError> {
    let mut archive = tar::Archive::new(tar_stream);
    let mut top_level: Option<String> = None;
    let entries = archive.entries().map_err(archive_error)?;
    for entry in entries {
        let mut entry = entry.map_err(archive_error)?;
        let kind = entry.header().entry_type();
        if is_metadata_entry(kind) {
            continue;
        }
        let raw_name = entry.path_bytes().into_owned();
        let full_name = entry_name(&raw_name)?;
        let clean = clean_relative(&full_name)?;
        let (top, rest) = match clean.split_once('/') {
            Some((top, rest)) => (top.to_owned(), rest.to_owned()),
            None => (clean.clone(), String::new()),
        };
        match &top_level {
            None => top_level = Some(top),
            Some(existing) if *existing == top => {}
            Some(_) => return Err(ExtractError::NotOneTopLevel { name: full_name }),
        }
        if rest.is_empty() {
            if kind == EntryType::Directory {
                continue;
            }
            return Err(ExtractError::NotOneTopLevel { name: full_name });
        }
        if wanted(&rest) {
            write_entry(&mut writer, &mut entry, &rest, full_name)?;
        } else if let Some(refused) = refused_kind(&entry, full_name) {
            return Err(refused);
        }
    }
    Ok(writer.finish())
}

/// Writes one archive entry (already named `rel` inside the tree, `full_name` in the archive) through
/// `writer`: directories, regular files (executable bit kept), symlinks by the writer's rules; hard
/// links, devices, FIFOs and sparse files are refused naming the entry. The one entry writer of every
/// tar reader in this crate (repository tarballs and OCI layers).
pub(crate) fn write_entry<R: Read>(
    writer: &mut SafeTreeWriter,
    entry: &mut tar::Entry<'_, R>,
    rel: &str,
    full_name: String,
) -> Result<(), ExtractError> {
    let kind = entry.header().entry_type();
    match kind {
        EntryType::Directory => writer.dir(rel)?,
        EntryType::Regular | EntryType::Continuous => {
            let declared = entry.header().size().unwrap_or(0);
            let executable = entry.header().mode().is_ok_and(|mode| mode & 0o111 != 0);
            let written = writer
                .file_from_source(rel, entry, executable)
                .map_err(|error| match error {
                    ExtractError::Io { source, .. } if LimitExceeded::find(&source).is_some() => {
                        archive_error(source)
                    }
                    ExtractError::Io { source, .. }
                        if source.kind() == std::io::ErrorKind::UnexpectedEof =>
                    {
                        ExtractError::Truncated {
                            name: full_name.clone(),
                            declared,
                        }
                    }
                    other => other,
                })?;
            if written < declared {
                return Err(ExtractError::Truncated {
                    name: full_name,
                    declared,
                });
            }
        }
        EntryType::Symlink => {
            let target = entry
                .link_name_bytes()
                .map(|b| b.into_owned())
                .unwrap_or_default();
            let target = entry_name(&target)?;
            writer.symlink(rel, &target)?;
        }
        _ => {
            if let Some(refused) = refused_kind(entry, full_name) {
                return Err(refused);
            }
        }
    }
    Ok(())
}

/// The refusal of an entry no package may hold: a hard link, a device, a FIFO, a sparse file or an
/// unknown type (`None` for files, directories and symbolic links).
fn refused_kind<R: Read>(entry: &tar::Entry<'_, R>, full_name: String) -> Option<ExtractError> {
    let kind = match entry.header().entry_type() {
        EntryType::Directory | EntryType::Regular | EntryType::Continuous | EntryType::Symlink => {
            return None
        }
        EntryType::Link => {
            let target = entry
                .link_name_bytes()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            return Some(ExtractError::HardLink {
                name: full_name,
                target,
            });
        }
        EntryType::Char => "character device".to_owned(),
        EntryType::Block => "block device".to_owned(),
        EntryType::Fifo => "FIFO".to_owned(),
        EntryType::GNUSparse => "sparse file".to_owned(),
        unknown => format!("type {:?}", unknown.as_byte() as char),
    };
    Some(ExtractError::SpecialFile {
        name: full_name,
        kind,
    })
}

/// Copies the package at `package_path` (relative, `/`-separated, `""` for the root) of an extracted
/// snapshot into `destination` by the same rules: regular files 0644, links kept only when they stay
/// inside the package, other links written as empty files. A regular file of the snapshot that
/// already has the mode extraction gives is hard-linked instead of copied (same bytes, no new inode):
/// the snapshot is scratch space nothing writes to, the copy only gets new files (normalization),
/// and the store copies what it publishes.
pub fn copy_package_tree(
    snapshot: &Path,
    package_path: &str,
    destination: &Path,
) -> Result<ExtractReport, ExtractError> {
    copy_package_tree_with_executables(snapshot, package_path, destination, &BTreeSet::new())
}

/// [`copy_package_tree`] of a snapshot whose [`ExtractReport::executables`] are
/// `snapshot_executables` (relative to the snapshot root): those inside the package are the copy's.
pub fn copy_package_tree_with_executables(
    snapshot: &Path,
    package_path: &str,
    destination: &Path,
    snapshot_executables: &BTreeSet<String>,
) -> Result<ExtractReport, ExtractError> {
    let clean = clean_relative(package_path)?;
    let source_root = if clean.is_empty() {
        snapshot.to_path_buf()
    } else {
        snapshot.join(&clean)
    };
    let mut writer = SafeTreeWriter::new(destination)?;
    for entry in walkdir::WalkDir::new(&source_root)
        .follow_links(false)
        .sort_by_file_name()
    {
        let entry = entry.map_err(|e| {
            let path = e
                .path()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| source_root.clone());
            io(&path, std::io::Error::other(e))
        })?;
        let Ok(relative) = entry.path().strip_prefix(&source_root) else {
            continue;
        };
        let Some(relative) = relative.to_str() else {
            return Err(ExtractError::NonUtf8Name {
                name: relative.to_string_lossy().into_owned(),
            });
        };
        if relative.is_empty() {
            continue;
        }
        let file_type = entry.file_type();
        if file_type.is_dir() {
            writer.dir(relative)?;
        } else if file_type.is_symlink() {
            let target = fs_err::read_link(entry.path()).map_err(|e| io(entry.path(), e))?;
            let target = target.to_str().map(str::to_owned).unwrap_or_default();
            writer.symlink(relative, &target)?;
        } else if file_type.is_file() {
            let in_snapshot = if clean.is_empty() {
                relative.to_owned()
            } else {
                format!("{clean}/{relative}")
            };
            let executable = snapshot_executables.contains(&in_snapshot);
            writer.file_linked(relative, entry.path(), executable)?;
        } else {
            return Err(ExtractError::SpecialFile {
                name: relative.to_owned(),
                kind: "special file".to_owned(),
            });
        }
    }
    Ok(writer.finish())
}
