//! The [`SafeTreeWriter`]: entries written below one root by the extraction rules, counted against
//! the entry and extracted-size caps.
//!
//! It must never write outside its root or through a link.

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use fs_err::os::unix::fs::OpenOptionsExt;

use crate::limits::{self, LimitExceeded, LimitKind, Limits};

use super::{clean_relative, io, link_stays_inside, ExtractError, ExtractReport, FILE_MODE};

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
    /// relative path and the absolute destination (an earlier entry there is replaced when the entry is
    /// created, see [`SafeTreeWriter::replace_existing`]).
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
                if !self.dirs.contains(&prefix) {
                    // Made first and looked at only when something is there already: one call
                    // for a new directory (`mkdir` never follows a link at the last component).
                    let dir = self.root.join(&prefix);
                    match fs_err::create_dir(&dir) {
                        Ok(()) => {}
                        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
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
                                Err(error) => return Err(io(&dir, error)),
                            }
                        }
                        Err(error) => return Err(io(&dir, error)),
                    }
                    self.dirs.insert(prefix.clone());
                }
            }
        }
        let destination = self.root.join(&clean);
        if !for_dir && self.dirs.contains(&clean) {
            return Err(ExtractError::Conflict {
                name: name.to_owned(),
            });
        }
        // Whatever else is at `destination` is found when creating the entry fails with
        // `AlreadyExists` ([`SafeTreeWriter::replace_existing`]), not looked up first.
        Ok(Some((clean, destination)))
    }

    /// After creating the entry `name` at `destination` failed because something is there: a
    /// directory is a conflict; anything else (an earlier entry of the same name, a link) is
    /// removed, so a later entry of the same name replaces the earlier one, as `tar` does. The
    /// caller creates the entry again.
    fn replace_existing(&mut self, name: &str, destination: &Path) -> Result<(), ExtractError> {
        let meta = fs_err::symlink_metadata(destination).map_err(|e| io(destination, e))?;
        if meta.is_dir() {
            return Err(ExtractError::Conflict {
                name: name.to_owned(),
            });
        }
        fs_err::remove_file(destination).map_err(|e| io(destination, e))?;
        self.links.remove(&clean_relative(name)?);
        Ok(())
    }

    /// Creates the new regular file `destination` (entry `name`) with the extraction mode, replacing
    /// an earlier non-directory entry of that name.
    fn create_file(
        &mut self,
        name: &str,
        destination: &Path,
    ) -> Result<fs_err::File, ExtractError> {
        let create = || {
            fs_err::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(FILE_MODE)
                .open(destination)
        };
        let file = match create() {
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                self.replace_existing(name, destination)?;
                create()
            }
            other => other,
        }
        .map_err(|e| io(destination, e))?;
        // Created with FILE_MODE less the umask: set it only when the umask took a bit of it.
        if umask().is_none_or(|mask| mask & FILE_MODE != 0) {
            file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
                .map_err(|e| io(destination, e))?;
        }
        Ok(file)
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
        let mut file = self.create_file(name, destination)?;
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
        let linked = linkable
            && match std::fs::hard_link(source, &destination) {
                Ok(()) => true,
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    self.replace_existing(name, &destination)?;
                    std::fs::hard_link(source, &destination).is_ok()
                }
                Err(_) => false,
            };
        let written = if linked {
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
            match std::os::unix::fs::symlink(target, &destination) {
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    self.replace_existing(name, &destination)?;
                    std::os::unix::fs::symlink(target, &destination)
                }
                other => other,
            }
            .map_err(|e| io(&destination, e))?;
            self.links.insert(clean);
            self.report.links_kept += 1;
        } else {
            self.create_file(name, &destination)?;
            self.report.links_emptied.push(clean);
        }
        Ok(())
    }
}

/// The process's umask, read once from `/proc/self/status` (`umask(2)` can only read it by
/// setting it, which would race with other threads creating files); `None` when it cannot be read,
/// and then every file's mode is set explicitly.
fn umask() -> Option<u32> {
    static UMASK: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *UMASK.get_or_init(|| {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status
            .lines()
            .find_map(|line| line.strip_prefix("Umask:"))?;
        u32::from_str_radix(line.trim(), 8).ok()
    })
}
