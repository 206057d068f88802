//! The one archive format of a store tree: a deterministic tar, zstd-compressed, and its reader.
//!
//! Written by `store push` and `publish` (the layer of an OCI artifact) and by
//! `env export --with-store` (a package of an offline bundle). Deterministic: the same tree and
//! executable set give the same bytes, so the same layer digest on every machine:
//! - entries in walk order with names sorted byte-wise, directories before what they hold, paths
//!   relative to the tree root (no `./`, no top-level directory);
//! - GNU headers with mtime 0, uid/gid 0, no user or group names;
//! - directories 0755, regular files 0644, or 0755 for the files recorded as executable
//!   (the store keeps every file 0444 and the executable set beside it), links 0777;
//! - zstd at [`ZSTD_LEVEL`], single-threaded, no checksum, no dictionary.
//!
//! The reader accepts plain tar, tar+gzip and tar+zstd and writes through
//! [`crate::extract::SafeTreeWriter`], so the extraction rules (0644 files, links kept only inside
//! the tree, no `..`, no absolute paths, no hard links or devices) and the limits (entries,
//! extracted bytes, compression ratio) hold whatever the archive says. It never writes outside its
//! destination.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use tar::EntryType;

use crate::extract::{
    archive_error, clean_relative, entry_name, is_metadata_entry, write_entry, ExtractError,
    ExtractReport, SafeTreeWriter,
};
use crate::limits::{CountingReader, Limits, RatioGuard};

/// The zstd level layers and bundle items are compressed with.
pub const ZSTD_LEVEL: i32 = 9;

/// How an archive's tar stream is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// A plain tar.
    None,
    /// tar+gzip.
    Gzip,
    /// tar+zstd.
    Zstd,
}

fn archive_io(path: &Path, source: std::io::Error) -> super::OciError {
    super::OciError::Archive {
        path: path.to_path_buf(),
        source,
    }
}

/// Every regular file below `root` with an execute bit on disk, relative and `/`-separated.
pub fn executables_on_disk(root: &Path) -> Result<BTreeSet<String>, super::OciError> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut found = BTreeSet::new();
    for entry in walkdir::WalkDir::new(root).follow_links(false) {
        let entry = entry.map_err(|e| archive_io(root, std::io::Error::other(e)))?;
        if !entry.file_type().is_file() {
            continue;
        }
        let meta = entry
            .metadata()
            .map_err(|e| archive_io(entry.path(), std::io::Error::other(e)))?;
        if meta.permissions().mode() & 0o111 != 0 {
            if let Ok(relative) = entry.path().strip_prefix(root) {
                found.insert(relative.to_string_lossy().into_owned());
            }
        }
    }
    Ok(found)
}

/// Writes the deterministic tar of `root` (see the module docs) to `out`. `executables` are
/// relative paths of regular files written 0755.
pub fn write_tar(
    root: &Path,
    executables: &BTreeSet<String>,
    out: impl Write,
) -> Result<(), super::OciError> {
    let mut builder = tar::Builder::new(out);
    builder.mode(tar::HeaderMode::Deterministic);
    builder.follow_symlinks(false);
    for entry in walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by(|a, b| {
            a.file_name()
                .as_encoded_bytes()
                .cmp(b.file_name().as_encoded_bytes())
        })
    {
        let entry = entry.map_err(|e| archive_io(root, std::io::Error::other(e)))?;
        let Ok(relative) = entry.path().strip_prefix(root) else {
            continue;
        };
        if relative.as_os_str().is_empty() {
            continue;
        }
        let Some(name) = relative.to_str() else {
            return Err(archive_io(
                entry.path(),
                std::io::Error::other("the file name is not UTF-8"),
            ));
        };
        let path = entry.path();
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        let file_type = entry.file_type();
        if file_type.is_symlink() {
            let target = fs_err::read_link(path).map_err(|e| archive_io(path, e))?;
            header.set_entry_type(EntryType::Symlink);
            header.set_size(0);
            header.set_mode(0o777);
            builder
                .append_link(&mut header, name, &target)
                .map_err(|e| archive_io(path, e))?;
        } else if file_type.is_dir() {
            header.set_entry_type(EntryType::Directory);
            header.set_size(0);
            header.set_mode(0o755);
            builder
                .append_data(&mut header, name, std::io::empty())
                .map_err(|e| archive_io(path, e))?;
        } else if file_type.is_file() {
            let file = fs_err::File::open(path).map_err(|e| archive_io(path, e))?;
            let size = file.metadata().map_err(|e| archive_io(path, e))?.len();
            header.set_entry_type(EntryType::Regular);
            header.set_size(size);
            header.set_mode(if executables.contains(name) {
                0o755
            } else {
                0o644
            });
            builder
                .append_data(&mut header, name, file)
                .map_err(|e| archive_io(path, e))?;
        } else {
            return Err(archive_io(
                path,
                std::io::Error::other("neither a file, a directory nor a symbolic link"),
            ));
        }
    }
    builder
        .into_inner()
        .and_then(|mut out| out.flush())
        .map_err(|e| archive_io(root, e))
}

/// The deterministic tar of `root`, zstd-compressed, in memory.
pub fn tree_tar_zstd(
    root: &Path,
    executables: &BTreeSet<String>,
) -> Result<Vec<u8>, super::OciError> {
    let mut encoder =
        zstd::Encoder::new(Vec::new(), ZSTD_LEVEL).map_err(|e| archive_io(root, e))?;
    encoder
        .include_checksum(false)
        .map_err(|e| archive_io(root, e))?;
    write_tar(root, executables, &mut encoder)?;
    encoder.finish().map_err(|e| archive_io(root, e))
}

/// Unpacks an archive of `compression` from `reader` into `destination` (created if missing) by
/// the extraction rules, within `limits` (`what` names the source in limit messages). The report's
/// `executables` are the regular entries whose tar mode had an execute bit.
pub fn read_tree(
    reader: impl Read,
    compression: Compression,
    destination: &Path,
    limits: &Limits,
    what: &str,
) -> Result<ExtractReport, ExtractError> {
    let writer = SafeTreeWriter::new(destination)?.with_limits(*limits, what);
    let (counted, compressed) = CountingReader::new(reader);
    let stream: Box<dyn Read> = match compression {
        Compression::None => Box::new(counted),
        Compression::Gzip => Box::new(RatioGuard::new(
            flate2::read::GzDecoder::new(counted),
            compressed,
            *limits,
            what,
        )),
        Compression::Zstd => Box::new(RatioGuard::new(
            zstd::Decoder::new(counted).map_err(|source| ExtractError::Archive { source })?,
            compressed,
            *limits,
            what,
        )),
    };
    read_entries(stream, writer)
}

fn read_entries(
    stream: impl Read,
    mut writer: SafeTreeWriter,
) -> Result<ExtractReport, ExtractError> {
    let mut archive = tar::Archive::new(stream);
    for entry in archive.entries().map_err(archive_error)? {
        let mut entry = entry.map_err(archive_error)?;
        if is_metadata_entry(entry.header().entry_type()) {
            continue;
        }
        let full_name = entry_name(&entry.path_bytes())?;
        let clean = clean_relative(&full_name)?;
        if clean.is_empty() {
            continue;
        }
        write_entry(&mut writer, &mut entry, &clean, full_name)?;
    }
    Ok(writer.finish())
}

/// A tree unpacked into a fresh directory beside nothing else: when the archive holds a single
/// top-level directory and no package marker at its root, that directory is the tree.
#[derive(Debug)]
pub struct HoistedTree {
    /// The directory holding the tree.
    pub root: PathBuf,
    /// Executables relative to `root`.
    pub executables: BTreeSet<String>,
}

/// If `dir` is not a package root but holds exactly one directory (and nothing else) that is,
/// that directory and the executables below it (re-rooted); else `dir` itself.
pub fn package_root_of(dir: &Path, executables: &BTreeSet<String>) -> HoistedTree {
    let same = || HoistedTree {
        root: dir.to_path_buf(),
        executables: executables.clone(),
    };
    if crate::normalize::is_package_root(dir) {
        return same();
    }
    let Ok(entries) = fs_err::read_dir(dir) else {
        return same();
    };
    let entries: Vec<_> = entries.filter_map(Result::ok).collect();
    let [only] = entries.as_slice() else {
        return same();
    };
    let is_dir = only.file_type().is_ok_and(|t| t.is_dir());
    let Some(name) = only.file_name().to_str().map(str::to_owned) else {
        return same();
    };
    if !is_dir || !crate::normalize::is_package_root(&only.path()) {
        return same();
    }
    let prefix = format!("{name}/");
    HoistedTree {
        root: only.path(),
        executables: executables
            .iter()
            .filter_map(|path| path.strip_prefix(&prefix).map(str::to_owned))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(root: &Path) {
        std::fs::create_dir_all(root.join("b/c")).unwrap();
        std::fs::write(root.join("SKILL.md"), "---\nname: s\n---\n").unwrap();
        std::fs::write(root.join("b/run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::write(root.join("b/c/z"), "z").unwrap();
        std::fs::write(root.join("a"), "a").unwrap();
        std::os::unix::fs::symlink("b/run.sh", root.join("link")).unwrap();
    }

    #[test]
    fn the_archive_is_deterministic_and_round_trips() {
        let one = tempfile::tempdir().unwrap();
        let two = tempfile::tempdir().unwrap();
        sample(one.path());
        sample(two.path());
        // Different mtimes and modes on disk do not change the bytes.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(two.path().join("a"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        let executables: BTreeSet<String> = ["b/run.sh".to_owned()].into();
        let first = tree_tar_zstd(one.path(), &executables).unwrap();
        let second = tree_tar_zstd(two.path(), &executables).unwrap();
        assert_eq!(first, second);

        let out = tempfile::tempdir().unwrap();
        let dest = out.path().join("t");
        let report = read_tree(
            first.as_slice(),
            Compression::Zstd,
            &dest,
            &Limits::default(),
            "test",
        )
        .unwrap();
        assert_eq!(report.executables, executables);
        assert_eq!(std::fs::read_to_string(dest.join("b/c/z")).unwrap(), "z");
        assert_eq!(
            std::fs::read_link(dest.join("link")).unwrap(),
            Path::new("b/run.sh")
        );
        let names: Vec<String> =
            tar::Archive::new(zstd::decode_all(first.as_slice()).unwrap().as_slice())
                .entries()
                .unwrap()
                .map(|e| e.unwrap().path().unwrap().display().to_string())
                .collect();
        assert_eq!(
            names,
            ["SKILL.md", "a", "b", "b/c", "b/c/z", "b/run.sh", "link"]
        );
    }

    #[test]
    fn unsafe_entries_are_refused() {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(EntryType::Regular);
        header.set_size(1);
        header.set_mode(0o644);
        // `append_data` refuses `..`; write the raw name.
        header.as_gnu_mut().unwrap().name[..7].copy_from_slice(b"../evil");
        header.set_cksum();
        builder.append(&header, &b"x"[..]).unwrap();
        let bytes = builder.into_inner().unwrap();
        let out = tempfile::tempdir().unwrap();
        let error = read_tree(
            bytes.as_slice(),
            Compression::None,
            &out.path().join("t"),
            &Limits::default(),
            "test",
        )
        .unwrap_err();
        assert!(matches!(error, ExtractError::UnsafePath { .. }), "{error}");
        assert!(!out.path().join("evil").exists());
    }
}
