//! `sha256-tree-v1`: the content hash of a package tree, exactly as the user docs define it.
//!
//! Owns the [`TreeHash`] newtype (checked parse, display `sha256-tree-v1:<hex>`), [`hash_tree`] and the
//! legacy verification rule [`matches_tree_hash`]. Records are the regular files and symbolic links
//! below the root (a link to a directory is one `l` record and is never followed; directories are not
//! records, so empty ones do not count; any other file type is an error), sorted bytewise by their
//! `/`-separated relative path, and fed to one SHA-256 stream as
//! `kind 0x00 path 0x00 length 0x00 payload`.
//!
//! Files are streamed (never read whole when large); small files are read in parallel in bounded batches
//! and then fed in order. This module never writes anything.

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

use rayon::prelude::*;
use sha2::{Digest, Sha256};

use crate::error::{IoContext, Result, StoreError};

/// The algorithm prefix of a tree hash.
pub const TREE_HASH_PREFIX: &str = "sha256-tree-v1:";

/// Files up to this size are read whole in parallel; larger ones are streamed.
pub(crate) const SMALL_FILE: u64 = 256 * 1024;
/// At most this many bytes of small files are held in memory at once.
pub(crate) const BATCH_BYTES: u64 = 32 * 1024 * 1024;
/// Buffer of the streaming reader.
const STREAM_BUFFER: usize = 1024 * 1024;

/// A `sha256-tree-v1` digest. Displays as `sha256-tree-v1:<64 lowercase hex>`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TreeHash([u8; 32]);

impl TreeHash {
    /// The raw digest bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 64 lowercase hex digits, without the prefix.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Build from raw bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        TreeHash(bytes)
    }
}

impl FromStr for TreeHash {
    type Err = StoreError;

    fn from_str(text: &str) -> Result<Self> {
        let invalid = || StoreError::InvalidTreeHash {
            found: text.to_owned(),
        };
        let hex_part = text.strip_prefix(TREE_HASH_PREFIX).ok_or_else(invalid)?;
        if hex_part.len() != 64
            || !hex_part
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(invalid());
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut bytes).map_err(|_| invalid())?;
        Ok(TreeHash(bytes))
    }
}

impl TryFrom<&str> for TreeHash {
    type Error = StoreError;

    fn try_from(text: &str) -> Result<Self> {
        text.parse()
    }
}

impl fmt::Display for TreeHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{TREE_HASH_PREFIX}{}", self.hex())
    }
}

impl fmt::Debug for TreeHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TreeHash({self})")
    }
}

impl serde::Serialize for TreeHash {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for TreeHash {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// How a tree compares with an expected hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "match", rename_all = "snake_case")]
pub enum Match {
    /// The `sha256-tree-v1` digest equals the expected one.
    Exact,
    /// Only the legacy digest (in-package links hashed as empty `f` records, as 0.4.8 and earlier
    /// locked them) equals the expected one.
    Legacy,
    /// Neither matches; `actual` is the exact digest of the tree.
    Mismatch {
        /// The tree's `sha256-tree-v1` digest.
        actual: TreeHash,
    },
}

/// The kind of one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordKind {
    /// Regular file without execute bits.
    File,
    /// Regular file with any execute bit.
    Exec,
    /// Symbolic link (never followed).
    Link,
}

impl RecordKind {
    fn tag(self) -> &'static [u8] {
        match self {
            RecordKind::File => b"f",
            RecordKind::Exec => b"x",
            RecordKind::Link => b"l",
        }
    }
}

/// One record of a tree: relative path bytes, absolute path, kind and (for files) the size seen by lstat.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub relative: Vec<u8>,
    pub absolute: PathBuf,
    pub kind: RecordKind,
    pub size: u64,
}

/// Collect the records below `root`, sorted bytewise by relative path.
pub(crate) fn collect_records(root: &Path) -> Result<Vec<Record>> {
    // The root itself may be reached through a link (a slot); nothing below it is followed.
    let meta = fs_err::metadata(root).ctx("inspect", root)?;
    if !meta.is_dir() {
        return Err(StoreError::io(
            "hash",
            root,
            std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "the root of a tree hash must be a directory",
            ),
        ));
    }
    let mut records = Vec::new();
    for entry in walkdir::WalkDir::new(root).follow_links(false).min_depth(1) {
        let entry = entry.map_err(|err| StoreError::walk(root, err))?;
        let file_type = entry.file_type();
        if file_type.is_dir() {
            continue;
        }
        let absolute = entry.path().to_path_buf();
        let relative = relative_bytes(root, &absolute);
        let (kind, size) = if file_type.is_symlink() {
            (RecordKind::Link, 0)
        } else if file_type.is_file() {
            let meta = StoreError::entry_metadata(&entry)?;
            let kind = if meta.permissions().mode() & 0o111 != 0 {
                RecordKind::Exec
            } else {
                RecordKind::File
            };
            (kind, meta.len())
        } else {
            return Err(StoreError::UnsupportedFileType { path: absolute });
        };
        records.push(Record {
            relative,
            absolute,
            kind,
            size,
        });
    }
    records.sort_unstable_by(|a, b| a.relative.cmp(&b.relative));
    Ok(records)
}

/// `/`-joined relative path bytes of `path` below `root`.
pub(crate) fn relative_bytes(root: &Path, path: &Path) -> Vec<u8> {
    let relative = path.strip_prefix(root).unwrap_or(path);
    let mut out = Vec::new();
    for (index, component) in relative.components().enumerate() {
        if index > 0 {
            out.push(b'/');
        }
        out.extend_from_slice(component.as_os_str().as_bytes());
    }
    out
}

/// The `sha256-tree-v1` digest of the directory `root`.
pub fn hash_tree(root: &Path) -> Result<TreeHash> {
    let records = collect_records(root)?;
    hash_records(&records, false)
}

/// The `sha256-tree-v1` digest of `root` without the symbolic link at `skip_link` (a relative
/// path), when there is one: for a tree in which a tool keeps a link of its own. `None` when
/// nothing else is there (only directories), so such a tree reads as no tree at all.
pub fn hash_tree_without_link(root: &Path, skip_link: &str) -> Result<Option<TreeHash>> {
    let mut records = collect_records(root)?;
    records.retain(|record| {
        !(record.kind == RecordKind::Link && record.relative == skip_link.as_bytes())
    });
    if records.is_empty() {
        return Ok(None);
    }
    hash_records(&records, false).map(Some)
}

/// Compare the tree at `dir` with `expected`: exact digest first, then the legacy rule (each in-package
/// link hashed as an empty `f` record).
pub fn matches_tree_hash(dir: &Path, expected: &TreeHash) -> Result<Match> {
    let records = collect_records(dir)?;
    let actual = hash_records(&records, false)?;
    if actual == *expected {
        return Ok(Match::Exact);
    }
    let has_in_package_link = records.iter().any(|record| {
        record.kind == RecordKind::Link && link_stays_inside(&record.relative, &record.absolute)
    });
    if has_in_package_link && hash_records(&records, true)? == *expected {
        return Ok(Match::Legacy);
    }
    Ok(Match::Mismatch { actual })
}

/// Whether the link at `relative` (inside the package) has a clean relative target that stays inside.
fn link_stays_inside(relative: &[u8], absolute: &Path) -> bool {
    let Ok(target) = std::fs::read_link(absolute) else {
        return false;
    };
    target_stays_inside(relative, &target)
}

/// Lexical check: `target`, resolved from the directory holding the link at `link_relative`, stays
/// inside the root and is a clean relative path (no empty, `.` or root components).
pub(crate) fn target_stays_inside(link_relative: &[u8], target: &Path) -> bool {
    if target.as_os_str().is_empty() {
        return false;
    }
    let mut depth: i64 =
        i64::try_from(link_relative.iter().filter(|&&b| b == b'/').count()).unwrap_or(i64::MAX);
    for component in target.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// Feed the records to one SHA-256 stream. With `legacy`, in-package links are empty `f` records.
pub(crate) fn hash_records(records: &[Record], legacy: bool) -> Result<TreeHash> {
    let mut digest = Sha256::new();
    let mut start = 0;
    while start < records.len() {
        // One batch: consecutive records whose small files fit the memory budget.
        let mut end = start;
        let mut budget = 0u64;
        while end < records.len() {
            let record = &records[end];
            if record.kind != RecordKind::Link && record.size <= SMALL_FILE {
                if budget + record.size > BATCH_BYTES && end > start {
                    break;
                }
                budget += record.size;
            }
            end += 1;
        }
        let batch = &records[start..end];
        let small_total: u64 = batch
            .iter()
            .filter(|r| r.kind != RecordKind::Link && r.size <= SMALL_FILE)
            .map(|r| r.size)
            .sum();
        let contents: Vec<Option<Vec<u8>>> = if small_total > 1024 * 1024 || batch.len() > 64 {
            batch.par_iter().map(read_small).collect::<Result<_>>()?
        } else {
            batch.iter().map(read_small).collect::<Result<_>>()?
        };
        for (record, content) in batch.iter().zip(contents) {
            feed_record(&mut digest, record, content, legacy)?;
        }
        start = end;
    }
    Ok(TreeHash(digest.finalize().into()))
}

/// One record of a tree whose bytes are already in memory (read once while the tree was imported,
/// see [`hash_known_records`]): kind, `/`-separated relative path bytes, payload (a file's bytes, a
/// link's target).
#[derive(Clone, Copy, Debug)]
pub(crate) struct KnownRecord<'a> {
    pub kind: RecordKind,
    pub relative: &'a [u8],
    pub payload: &'a [u8],
}

/// The `sha256-tree-v1` digest of records whose bytes are known, fed exactly as [`hash_records`]
/// feeds records read from disk (same headers, same order: the records are sorted bytewise by
/// relative path here). Never reads a file.
pub(crate) fn hash_known_records(records: &mut [KnownRecord<'_>]) -> TreeHash {
    records.sort_unstable_by(|a, b| a.relative.cmp(b.relative));
    let mut digest = Sha256::new();
    for record in records.iter() {
        header(
            &mut digest,
            record.kind,
            record.relative,
            record.payload.len() as u64,
        );
        digest.update(record.payload);
    }
    TreeHash(digest.finalize().into())
}

fn read_small(record: &Record) -> Result<Option<Vec<u8>>> {
    match record.kind {
        RecordKind::Link => Ok(None),
        _ if record.size <= SMALL_FILE => fs_err::read(&record.absolute)
            .ctx("read", &record.absolute)
            .map(Some),
        _ => Ok(None),
    }
}

fn header(digest: &mut Sha256, kind: RecordKind, relative: &[u8], length: u64) {
    digest.update(kind.tag());
    digest.update([0u8]);
    digest.update(relative);
    digest.update([0u8]);
    digest.update(length.to_string().as_bytes());
    digest.update([0u8]);
}

fn feed_record(
    digest: &mut Sha256,
    record: &Record,
    content: Option<Vec<u8>>,
    legacy: bool,
) -> Result<()> {
    match record.kind {
        RecordKind::Link => {
            let target = fs_err::read_link(&record.absolute).ctx("read link", &record.absolute)?;
            if legacy && target_stays_inside(&record.relative, &target) {
                header(digest, RecordKind::File, &record.relative, 0);
            } else {
                let payload = target.as_os_str().as_bytes();
                header(
                    digest,
                    RecordKind::Link,
                    &record.relative,
                    payload.len() as u64,
                );
                digest.update(payload);
            }
        }
        kind => {
            if let Some(bytes) = content {
                header(digest, kind, &record.relative, bytes.len() as u64);
                digest.update(&bytes);
            } else {
                stream_file(digest, kind, record)?;
            }
        }
    }
    Ok(())
}

/// Hash a large file without holding it in memory; the length is taken from the open file and the
/// bytes read must match it (a file that changes while it is hashed is an error, not a wrong digest).
fn stream_file(digest: &mut Sha256, kind: RecordKind, record: &Record) -> Result<()> {
    let path = &record.absolute;
    let mut file = File::open(path).ctx("open", path)?;
    let length = file.metadata().ctx("inspect", path)?.len();
    header(digest, kind, &record.relative, length);
    let mut buffer = vec![0u8; STREAM_BUFFER];
    let mut remaining = length;
    while remaining > 0 {
        let read = file.read(&mut buffer).ctx("read", path)?;
        if read == 0 {
            break;
        }
        let take = usize::try_from(remaining.min(read as u64)).unwrap_or(read);
        digest.update(&buffer[..take]);
        remaining -= take as u64;
        if take < read {
            remaining = u64::MAX;
            break;
        }
    }
    if remaining != 0 || file.read(&mut buffer[..1]).ctx("read", path)? != 0 {
        return Err(StoreError::io(
            "hash",
            path,
            std::io::Error::other("the file changed while it was being hashed; retry"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    #[test]
    fn parse_and_display_round_trip() {
        let text = format!("sha256-tree-v1:{}", "ab".repeat(32));
        let hash: TreeHash = text.parse().unwrap();
        assert_eq!(hash.to_string(), text);
    }

    #[test]
    fn parse_refuses_bad_forms() {
        for bad in [
            "",
            "sha256-tree-v1:",
            &format!("sha256-{}", "0".repeat(64)),
            &format!("sha256-tree-v1:{}", "A".repeat(64)),
            &format!("sha256-tree-v1:{}", "0".repeat(63)),
            &format!("sha256-tree-v2:{}", "0".repeat(64)),
        ] {
            assert!(bad.parse::<TreeHash>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn known_records_hash_like_the_tree_they_were_read_from() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (relative, bytes) in [
            ("a-b", &b"dash"[..]),
            ("a/b", b"nested"),
            ("a0", b"zero"),
            ("empty", b""),
            ("run.sh", b"#!/bin/sh\n"),
        ] {
            let path = root.join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, bytes).unwrap();
        }
        std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::os::unix::fs::symlink("a/b", root.join("link")).unwrap();
        std::fs::create_dir(root.join("empty-dir")).unwrap();
        let records = collect_records(root).unwrap();
        let payloads: Vec<Vec<u8>> = records
            .iter()
            .map(|record| match record.kind {
                RecordKind::Link => std::fs::read_link(&record.absolute)
                    .unwrap()
                    .into_os_string()
                    .into_vec(),
                _ => std::fs::read(&record.absolute).unwrap(),
            })
            .collect();
        // Given in another order: the records are sorted by their path bytes.
        let mut known: Vec<KnownRecord<'_>> = records
            .iter()
            .zip(&payloads)
            .rev()
            .map(|(record, payload)| KnownRecord {
                kind: record.kind,
                relative: &record.relative,
                payload,
            })
            .collect();
        assert_eq!(hash_known_records(&mut known), hash_tree(root).unwrap());
    }

    #[test]
    fn inside_rule() {
        assert!(target_stays_inside(b"a/b/link", Path::new("../c")));
        assert!(target_stays_inside(
            b".codex/skills/x",
            Path::new("../../engineering/skills/x")
        ));
        assert!(!target_stays_inside(b"link", Path::new("../c")));
        assert!(!target_stays_inside(b"a/link", Path::new("/etc/passwd")));
        assert!(!target_stays_inside(b"a/link", Path::new("./b")));
        assert!(!target_stays_inside(b"a/link", Path::new("")));
    }
}
