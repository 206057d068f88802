//! Reading tar streams (GitHub tarballs, OCI layers) entry by entry through a [`SafeTreeWriter`],
//! the compression ratio checked while decompressing.
//!
//! It never writes an entry itself (the writer does) and never keeps a refused entry.

use std::io::Read;
use std::path::Path;

use tar::EntryType;

use crate::limits::{CountingReader, LimitExceeded, Limits, RatioGuard};

use super::filters::refused_kind;
use super::{clean_relative, is_metadata_entry, ExtractError, ExtractReport, SafeTreeWriter};

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

/// The archive error of a tar read: a limit crossed while decompressing, or corruption.
pub(crate) fn archive_error(source: std::io::Error) -> ExtractError {
    match LimitExceeded::find(&source) {
        Some(limit) => ExtractError::Limit(limit.clone()),
        None => ExtractError::Archive { source },
    }
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
