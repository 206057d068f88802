//! The launch fast path's fingerprint: one digest over everything a launch's staging depends on
//! that can be checked without hashing package content.
//!
//! It covers the manifest's and the lock's bytes, the `./.agents/` tree's metadata, the mode, the
//! target agent, the behaviour toggles, the generation path the pointer resolved to, and the cache
//! entries the lock names. A cache entry that links into the store (the store paths are immutable
//! and named by their content) counts as its link target and the identity of that store path's
//! root (type, device and inode): nothing below it is read, so the cost is one `readlink` and one
//! `stat` per package whatever its size, and with a recorded [`Listings`] one `stat` per directory
//! holding slots or store paths while those directories are unchanged (see `SlotRecord`). A file
//! changed in place inside a store path, or its root's permission bits, are not noticed (that is
//! what `AGENTPACK_FULL_VERIFY=1` and `sync --verify-only` are for); a slot relinked, a store path
//! removed or re-created is. A cache entry that is a directory (an older layout) and every source
//! directory ([`ExtraInputs::source_dirs`]: path packages and `$AGENTPACK_HOME/local/` mirrors,
//! re-copied on every sync) are walked: each entry's path, type,
//! permission bits, size and modification time (the documented "Launches that skip the sync"
//! contract). The launcher and `sync` record it after a full sync and compare it on the next run;
//! any difference sends the command through a full sync. Reading metadata (and the manifest, the
//! lock and the [`ExtraInputs::files`]) is the only I/O; a caller that already read the manifest and
//! the lock passes their bytes ([`ReadFiles`]) and they are not read again.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::agent::Agent;

/// What a fingerprint is computed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FingerprintInputs {
    /// The launcher's agent; `None` for a bare sync's fingerprint (every agent).
    pub agent: Option<Agent>,
    pub mode: String,
    pub manifest: PathBuf,
    pub lock: PathBuf,
    /// `./.agents/` (when the overlay is enabled).
    pub overlay: Option<PathBuf>,
    /// The generation the pointer resolves to.
    pub generation: PathBuf,
    /// The cache entries (`$AGENTPACK_HOME/cache/<cache_key>`) the lock names, in lock order.
    pub cache_entries: Vec<PathBuf>,
    /// Toggles that change staging (`AGENTPACK_KEEP_ATTRIBUTION=1`, `--yolo`...), as `name=value`.
    pub toggles: Vec<String>,
}

/// What [`compute_extended`] covers beyond [`FingerprintInputs`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtraInputs {
    /// Mutable directories a sync copies packages from (path packages, `local/` mirrors): walked.
    pub source_dirs: Vec<PathBuf>,
    /// Files whose bytes change what is staged (eject's record of the files it wrote).
    pub files: Vec<PathBuf>,
}

/// The manifest's and the lock's bytes as the caller read them (`lock: None`: no lock, or one that
/// could not be read, which a read by path would count as missing too).
#[derive(Debug, Clone, Copy)]
pub struct ReadFiles<'a> {
    pub manifest: &'a [u8],
    pub lock: Option<&'a [u8]>,
}

fn field(hasher: &mut Sha256, bytes: &[u8]) {
    hasher.update((bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}

fn file_bytes(hasher: &mut Sha256, path: &Path) {
    present_bytes(hasher, fs::read(path).ok().as_deref());
}

fn present_bytes(hasher: &mut Sha256, bytes: Option<&[u8]>) {
    match bytes {
        Some(bytes) => {
            field(hasher, b"present");
            field(hasher, bytes);
        }
        None => field(hasher, b"missing"),
    }
}

/// One entry's metadata as fixed-width bytes: type, permission bits, size (0 for a directory) and
/// modification time (seconds and nanoseconds). No text formatting: the fast path encodes one of
/// these per file of every path package on every no-op sync.
type MetadataLine = [u8; 29];

fn metadata_line(meta: &fs::Metadata) -> MetadataLine {
    let kind = if meta.file_type().is_symlink() {
        b'l'
    } else if meta.is_dir() {
        b'd'
    } else {
        b'f'
    };
    let size = if meta.is_dir() { 0 } else { meta.size() };
    let mut line = [0u8; 29];
    line[0] = kind;
    line[1..5].copy_from_slice(&(meta.mode() & 0o7777).to_le_bytes());
    line[5..13].copy_from_slice(&size.to_le_bytes());
    line[13..21].copy_from_slice(&meta.mtime().to_le_bytes());
    line[21..29].copy_from_slice(&meta.mtime_nsec().to_le_bytes());
    line
}

/// `root` and its metadata, or where it points and that metadata when it is a symbolic link: one
/// `lstat` (and one `readlink` for a link), not a full canonicalization, because the fast path runs
/// it for every package on every launch and every no-op sync.
fn resolve_root(root: &Path) -> Option<(PathBuf, fs::Metadata)> {
    let meta = root.symlink_metadata().ok()?;
    if !meta.file_type().is_symlink() {
        return Some((root.to_path_buf(), meta));
    }
    let target = fs::read_link(root).ok()?;
    let target = if target.is_absolute() {
        target
    } else {
        root.parent().unwrap_or(Path::new("/")).join(target)
    };
    let meta = target.symlink_metadata().ok()?;
    Some((target, meta))
}

/// A directory a recorded section depends on, and its stamp (see `dir_stamp`).
type DirStamp = (String, [i64; 6]);

/// The identity of a slot's store path root: type, device and inode (`None`: missing).
type SlotLine = Option<[u8; 17]>;

fn slot_line(path: &Path) -> SlotLine {
    let meta = path.symlink_metadata().ok()?;
    let mut line = [0u8; 17];
    line[0] = if meta.is_dir() { b'd' } else { b'o' };
    line[1..9].copy_from_slice(&meta.dev().to_le_bytes());
    line[9..17].copy_from_slice(&meta.ino().to_le_bytes());
    Some(line)
}

/// What one cache entry contributed: a slot linking into the store counts as its target and the
/// identity of the store path's root ([`SlotLine`]); anything else (a legacy slot directory) is
/// walked.
enum EntryRead {
    Slot { target: PathBuf, resolved: PathBuf },
    Walked,
}

/// The digest of the cache entries' section of a fingerprint, in lock order: each entry's path and
/// either its slot (link target and [`SlotLine`]: one `readlink` and one `stat`, nothing below the
/// store path read) or its walked tree.
///
/// With `trusted_before`, also the stamps of the directories the section depends on (see
/// [`SlotRecord`]), or `None` when it cannot be recorded (an entry that is not a link to an
/// existing store path, a directory changed too recently). Each directory is stamped before what
/// it holds is read: the slots' directories before the `readlink`s, the store paths' parents
/// before the `stat`s, so a change made while reading leaves a stamp that differs next time.
fn slots_section(
    entries: &[PathBuf],
    trusted_before: Option<i64>,
) -> ([u8; 32], Option<Vec<DirStamp>>) {
    let mut stamps: Option<Vec<DirStamp>> = trusted_before.map(|_| Vec::new());
    let stamp = |stamps: &mut Option<Vec<DirStamp>>, dir: &Path| {
        let Some(list) = stamps.as_mut() else {
            return;
        };
        let (Some(key), Some(before)) = (dir.to_str(), trusted_before) else {
            *stamps = None;
            return;
        };
        if list.iter().any(|(known, _)| known == key) {
            return;
        }
        match fs::metadata(dir) {
            Ok(meta) if meta.ctime() < before => list.push((key.to_owned(), dir_stamp(&meta))),
            _ => *stamps = None,
        }
    };
    for entry in entries {
        stamp(&mut stamps, entry.parent().unwrap_or(Path::new("/")));
    }
    let reads: Vec<EntryRead> = entries
        .iter()
        .map(|entry| match fs::read_link(entry) {
            Ok(target) => {
                let resolved = if target.is_absolute() {
                    target.clone()
                } else {
                    entry.parent().unwrap_or(Path::new("/")).join(&target)
                };
                stamp(&mut stamps, resolved.parent().unwrap_or(Path::new("/")));
                EntryRead::Slot { target, resolved }
            }
            Err(_) => EntryRead::Walked,
        })
        .collect();
    let mut hasher = Sha256::new();
    for (entry, read) in entries.iter().zip(reads) {
        field(&mut hasher, entry.as_os_str().as_encoded_bytes());
        match read {
            EntryRead::Slot { target, resolved } => {
                field(&mut hasher, b"slot");
                field(&mut hasher, target.as_os_str().as_encoded_bytes());
                match slot_line(&resolved) {
                    Some(line) => field(&mut hasher, &line),
                    None => {
                        field(&mut hasher, b"missing");
                        stamps = None;
                    }
                }
            }
            EntryRead::Walked => {
                tree_metadata(&mut hasher, entry, Cover::All, None);
                stamps = None;
            }
        }
    }
    (hasher.finalize().into(), stamps)
}

/// The digest of the cache entries' names, in order: what a [`SlotRecord`] was taken over.
fn entries_digest(entries: &[PathBuf]) -> String {
    let mut hasher = Sha256::new();
    for entry in entries {
        field(&mut hasher, entry.as_os_str().as_encoded_bytes());
    }
    hex::encode(hasher.finalize())
}

/// The cache entries' section: recomputed by [`slots_section`] (one `readlink` and one `stat` per
/// slot) unless `cache` holds a [`SlotRecord`] of the same entries whose directories are
/// unchanged, whose digest is then the section's (one `stat` per directory, whatever the number of
/// packages).
fn slots_digest(entries: &[PathBuf], cache: Option<&mut ListingCache<'_>>) -> [u8; 32] {
    let Some(cache) = cache else {
        return slots_section(entries, None).0;
    };
    let names = entries_digest(entries);
    if let Some(recorded) = &cache.previous.slots {
        if let Some(digest) = recorded.still_valid(&names) {
            cache.next.slots = Some(recorded.clone());
            return digest;
        }
    }
    let (digest, stamps) = slots_section(entries, Some(cache.trusted_before));
    cache.next.slots = stamps.map(|dirs| SlotRecord {
        entries: names,
        digest: hex::encode(digest),
        dirs,
    });
    digest
}

/// The cache entries' section of a fingerprint as a computation found it, kept with the
/// [`Listings`] so the next computation need not read every slot again.
///
/// A slot is a symbolic link (changed only by replacing or removing it, which moves its
/// directory's modification and change times) to a store path whose root's identity changes only
/// by removing or renaming it in its parent directory (which moves that directory's times). While
/// every such directory has the device, inode and both times recorded, each slot still links where
/// it did and each store path root is still the one it was, so the section's digest is the one
/// recorded. Recorded only when every entry is a slot linking to an existing store path and every
/// directory changed more than [`RACY_SECONDS`] before it was stamped.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct SlotRecord {
    /// [`entries_digest`] of the cache entries it covers.
    entries: String,
    /// The section's digest (hex).
    digest: String,
    /// Each directory the section depends on, with its stamp.
    dirs: Vec<DirStamp>,
}

impl SlotRecord {
    /// The recorded digest, when it covers `entries` (an [`entries_digest`]) and no directory
    /// moved.
    fn still_valid(&self, entries: &str) -> Option<[u8; 32]> {
        if self.entries != entries {
            return None;
        }
        for (dir, stamp) in &self.dirs {
            let meta = fs::metadata(dir).ok()?;
            if dir_stamp(&meta) != *stamp {
                return None;
            }
        }
        let bytes = hex::decode(&self.digest).ok()?;
        <[u8; 32]>::try_from(bytes).ok()
    }
}

/// Which entries of a tree the fingerprint covers.
#[derive(Clone, Copy)]
enum Cover {
    /// Everything (a cache entry).
    All,
    /// The project overlay: its files and links, except agy's workspace link; a missing and an
    /// empty `./.agents/` are the same input, as they are to the sync.
    Overlay,
}

/// Hashes the metadata of every entry under `root` (the root itself followed when it is a link,
/// nothing below followed). With `listings`, a directory whose identity and times are those of a
/// recorded listing is not listed again: each recorded name is stat'ed instead (the digest is the
/// same; see [`Listings`]).
fn tree_metadata(
    hasher: &mut Sha256,
    root: &Path,
    cover: Cover,
    mut listings: Option<&mut ListingCache<'_>>,
) {
    let Some((resolved, root_meta)) = resolve_root(root) else {
        if matches!(cover, Cover::All) {
            field(hasher, b"missing");
        }
        return;
    };
    if matches!(cover, Cover::All) {
        field(hasher, resolved.as_os_str().as_encoded_bytes());
    }
    let covered = |relative: &[u8], meta: &fs::Metadata| {
        !(matches!(cover, Cover::Overlay)
            && (meta.is_dir()
                || (meta.is_symlink()
                    && relative == crate::launch::home_layer::AGY_OVERLAY_LINK.as_bytes())))
    };
    let mut lines: Vec<(Vec<u8>, MetadataLine)> = Vec::new();
    if covered(b"", &root_meta) {
        lines.push((Vec::new(), metadata_line(&root_meta)));
    }
    // Each entry's metadata is read relative to its directory (`fstatat`) when it is listed; by
    // path when its recorded listing is used (no `openat`, `getdents64` or `close` then).
    let mut pending = Vec::new();
    if root_meta.is_dir() {
        pending.push((resolved, Vec::new(), root_meta));
    }
    while let Some((dir, prefix, dir_meta)) = pending.pop() {
        let mut visit = |name: &std::ffi::OsStr, path: PathBuf, meta: fs::Metadata| {
            let mut relative: Vec<u8> = prefix.clone();
            if !relative.is_empty() {
                relative.push(b'/');
            }
            relative.extend_from_slice(name.as_encoded_bytes());
            if covered(&relative, &meta) {
                lines.push((relative.clone(), metadata_line(&meta)));
            }
            if meta.is_dir() {
                pending.push((path, relative, meta));
            }
        };
        if let Some(names) = listings
            .as_deref_mut()
            .and_then(|cache| cache.recorded(&dir, &dir_meta))
        {
            for name in &names {
                let path = dir.join(name);
                match path.symlink_metadata() {
                    Ok(meta) => visit(std::ffi::OsStr::new(name), path, meta),
                    // Gone although the directory's times did not move: never the same digest.
                    Err(_) => field(hasher, b"vanished"),
                }
            }
            // Kept for the next computation (its times lie before any later threshold).
            if let Some(cache) = listings.as_deref_mut() {
                cache.record(&dir, &dir_meta, names);
            }
            continue;
        }
        let Ok(entries) = fs::read_dir(&dir) else {
            field(hasher, b"unreadable");
            continue;
        };
        let mut names = Some(Vec::new());
        for entry in entries {
            let Ok(entry) = entry else {
                field(hasher, b"unreadable");
                names = None;
                continue;
            };
            let Ok(meta) = entry.metadata() else {
                names = None;
                continue;
            };
            let name = entry.file_name();
            match (&mut names, name.to_str()) {
                (Some(list), Some(text)) => list.push(text.to_owned()),
                _ => names = None,
            }
            visit(&name, entry.path(), meta);
        }
        if let (Some(cache), Some(names)) = (listings.as_deref_mut(), names) {
            cache.record(&dir, &dir_meta, names);
        }
    }
    lines.sort();
    for (path, line) in lines {
        field(hasher, &path);
        field(hasher, &line);
    }
}

/// The listings of source directories a fingerprint read, kept beside it so the next one need not
/// list them again (a bare sync records them; see [`compute_with_listings`]).
///
/// A directory's listing changes only through an entry created, removed or renamed in it, and each
/// of those moves the directory's modification and change times (the change time cannot be set
/// back). A directory whose device, inode and both times are those recorded therefore has the
/// recorded names; each is still stat'ed, because an edit in place moves only the file's own times.
/// A directory changed less than [`RACY_SECONDS`] before it was listed is not recorded (a change in
/// the same clock tick would leave its times as they were), nor one with a name that is not UTF-8.
///
/// It also keeps the cache entries' section of the fingerprint with the stamps of the directories
/// holding the slots and their store paths (see `SlotRecord`), so the next computation need not
/// read every slot either.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Listings {
    dirs: std::collections::BTreeMap<String, Listing>,
    /// The cache entries' section, when it could be recorded (see [`SlotRecord`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    slots: Option<SlotRecord>,
}

impl Listings {
    /// How many things are recorded: each directory's listing, and the cache entries' section when
    /// it is.
    pub fn len(&self) -> usize {
        self.dirs.len() + usize::from(self.slots.is_some())
    }

    /// Is nothing recorded?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Listing {
    /// Device, inode, modification time (s, ns), change time (s, ns).
    stamp: [i64; 6],
    names: Vec<String>,
}

/// How old (by its change time) a directory must be for its listing to be recorded.
pub const RACY_SECONDS: i64 = 2;

fn dir_stamp(meta: &fs::Metadata) -> [i64; 6] {
    [
        meta.dev() as i64,
        meta.ino() as i64,
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    ]
}

/// The recorded listings a computation may use, and the ones it records.
struct ListingCache<'a> {
    previous: &'a Listings,
    next: Listings,
    /// Seconds since the epoch before which a directory's change time must lie to be recorded.
    trusted_before: i64,
}

impl ListingCache<'_> {
    fn recorded(&self, dir: &Path, meta: &fs::Metadata) -> Option<Vec<String>> {
        let key = dir.to_str()?;
        let listing = self.previous.dirs.get(key)?;
        if listing.stamp != dir_stamp(meta) {
            return None;
        }
        Some(listing.names.clone())
    }

    fn record(&mut self, dir: &Path, meta: &fs::Metadata, names: Vec<String>) {
        let Some(key) = dir.to_str() else {
            return;
        };
        if meta.ctime() >= self.trusted_before {
            return;
        }
        self.next.dirs.insert(
            key.to_owned(),
            Listing {
                stamp: dir_stamp(meta),
                names,
            },
        );
    }
}

/// Computes the fingerprint (lowercase hex SHA-256).
pub fn compute(inputs: &FingerprintInputs) -> String {
    compute_extended(inputs, &ExtraInputs::default())
}

/// Computes the fingerprint of `inputs` and `extra` (lowercase hex SHA-256).
pub fn compute_extended(inputs: &FingerprintInputs, extra: &ExtraInputs) -> String {
    digest(inputs, extra, None, None)
}

/// [`compute_extended`] over the manifest's and the lock's bytes in `read` (the files at
/// [`FingerprintInputs::manifest`] and [`FingerprintInputs::lock`] are not read): the same digest
/// as [`compute_extended`] when they are those files' bytes.
pub fn compute_over(
    inputs: &FingerprintInputs,
    extra: &ExtraInputs,
    read: ReadFiles<'_>,
) -> String {
    digest(inputs, extra, None, Some(read))
}

/// [`compute_extended`], listing a source directory again only when it differs from its listing
/// in `previous`; returns the fingerprint (the same as [`compute_extended`]'s) and the listings to
/// record for the next computation.
pub fn compute_with_listings(
    inputs: &FingerprintInputs,
    extra: &ExtraInputs,
    previous: &Listings,
) -> (String, Listings) {
    let trusted_before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.as_secs() as i64 - RACY_SECONDS)
        .unwrap_or(i64::MIN);
    compute_with_listings_before(inputs, extra, previous, trusted_before)
}

/// [`compute_with_listings`], recording directories whose change time is before `trusted_before`.
fn compute_with_listings_before(
    inputs: &FingerprintInputs,
    extra: &ExtraInputs,
    previous: &Listings,
    trusted_before: i64,
) -> (String, Listings) {
    let mut cache = ListingCache {
        previous,
        next: Listings::default(),
        trusted_before,
    };
    let fingerprint = digest(inputs, extra, Some(&mut cache), None);
    (fingerprint, cache.next)
}

fn digest(
    inputs: &FingerprintInputs,
    extra: &ExtraInputs,
    mut listings: Option<&mut ListingCache<'_>>,
    read: Option<ReadFiles<'_>>,
) -> String {
    let mut hasher = Sha256::new();
    field(&mut hasher, b"agentpack-launch-fingerprint-v3");
    match inputs.agent {
        Some(agent) => field(&mut hasher, agent.as_str().as_bytes()),
        None => field(&mut hasher, b"all agents"),
    }
    field(&mut hasher, inputs.mode.as_bytes());
    for toggle in &inputs.toggles {
        field(&mut hasher, toggle.as_bytes());
    }
    match read {
        Some(read) => {
            present_bytes(&mut hasher, Some(read.manifest));
            present_bytes(&mut hasher, read.lock);
        }
        None => {
            file_bytes(&mut hasher, &inputs.manifest);
            file_bytes(&mut hasher, &inputs.lock);
        }
    }
    match &inputs.overlay {
        Some(overlay) => tree_metadata(&mut hasher, overlay, Cover::Overlay, None),
        None => field(&mut hasher, b"no overlay"),
    }
    field(
        &mut hasher,
        inputs.generation.as_os_str().as_encoded_bytes(),
    );
    field(
        &mut hasher,
        if inputs.generation.is_dir() {
            b"generation present"
        } else {
            b"generation missing"
        },
    );
    // No cache entries, no section: a digest without slots (a rollback's record) is the one
    // earlier versions computed.
    if !inputs.cache_entries.is_empty() {
        field(&mut hasher, b"slots");
        field(
            &mut hasher,
            &slots_digest(&inputs.cache_entries, listings.as_deref_mut()),
        );
    }
    for dir in &extra.source_dirs {
        field(&mut hasher, b"source");
        field(&mut hasher, dir.as_os_str().as_encoded_bytes());
        tree_metadata(&mut hasher, dir, Cover::All, listings.as_deref_mut());
    }
    for file in &extra.files {
        field(&mut hasher, file.as_os_str().as_encoded_bytes());
        file_bytes(&mut hasher, file);
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_visible_change_changes_the_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("agentpack.toml"), "[dependencies]\n").unwrap();
        fs::write(root.join("pack.lock"), "lockfile_version = 3\n").unwrap();
        fs::create_dir_all(root.join(".agents/skills/a")).unwrap();
        fs::write(root.join(".agents/skills/a/SKILL.md"), "x").unwrap();
        fs::create_dir_all(root.join("cache-entry")).unwrap();
        fs::write(root.join("cache-entry/file"), "abc").unwrap();
        fs::create_dir_all(root.join("gen")).unwrap();
        let inputs = FingerprintInputs {
            agent: Some(Agent::Claude),
            mode: "default".into(),
            manifest: root.join("agentpack.toml"),
            lock: root.join("pack.lock"),
            overlay: Some(root.join(".agents")),
            generation: root.join("gen"),
            cache_entries: vec![root.join("cache-entry")],
            toggles: vec![],
        };
        let first = compute(&inputs);
        assert_eq!(first, compute(&inputs));
        let mut other = inputs.clone();
        other.agent = Some(Agent::Codex);
        assert_ne!(first, compute(&other));
        let mut other = inputs.clone();
        other.mode = "writing".into();
        assert_ne!(first, compute(&other));

        fs::write(root.join("cache-entry/file"), "abcd").unwrap();
        let changed = compute(&inputs);
        assert_ne!(first, changed);
        fs::write(root.join(".agents/skills/a/new.md"), "y").unwrap();
        let added = compute(&inputs);
        assert_ne!(changed, added);
        fs::write(root.join("pack.lock"), "lockfile_version = 4\n").unwrap();
        assert_ne!(added, compute(&inputs));
    }

    #[test]
    fn bytes_already_read_give_the_digest_of_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("agentpack.toml"), "[dependencies]\n").unwrap();
        let (inputs, extra) = bare_sync_inputs(root, vec![]);
        let read = |manifest: &'static [u8], lock| ReadFiles { manifest, lock };
        let plain = compute_extended(&inputs, &extra);
        assert_eq!(
            plain,
            compute_over(&inputs, &extra, read(b"[dependencies]\n", None))
        );
        assert_ne!(
            plain,
            compute_over(&inputs, &extra, read(b"[dependencies]\n", Some(b"")))
        );
        assert_ne!(plain, compute_over(&inputs, &extra, read(b"", None)));
        fs::write(root.join("pack.lock"), "lockfile_version = 3\n").unwrap();
        assert_eq!(
            compute_extended(&inputs, &extra),
            compute_over(
                &inputs,
                &extra,
                read(b"[dependencies]\n", Some(b"lockfile_version = 3\n"))
            )
        );
    }

    /// A bare sync's inputs under `root`: its manifest and lock, the source directory `src`, eject's
    /// record `eject.json`, and `cache_entries`.
    fn bare_sync_inputs(
        root: &Path,
        cache_entries: Vec<PathBuf>,
    ) -> (FingerprintInputs, ExtraInputs) {
        let inputs = FingerprintInputs {
            agent: None,
            mode: "default".into(),
            manifest: root.join("agentpack.toml"),
            lock: root.join("pack.lock"),
            overlay: None,
            generation: root.join("gen"),
            cache_entries,
            toggles: vec![],
        };
        let extra = ExtraInputs {
            source_dirs: vec![root.join("src")],
            files: vec![root.join("eject.json")],
        };
        (inputs, extra)
    }

    #[test]
    fn recorded_listings_give_the_same_digest_and_miss_no_change() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("agentpack.toml"), "").unwrap();
        fs::write(root.join("pack.lock"), "").unwrap();
        fs::create_dir_all(root.join("src/skills/a")).unwrap();
        fs::write(root.join("src/skills/a/SKILL.md"), "a").unwrap();
        let (inputs, extra) = bare_sync_inputs(root, vec![]);
        let plain = compute_extended(&inputs, &extra);
        // Directories changed just now are not recorded (racy)...
        let (digest, racy) = compute_with_listings(&inputs, &extra, &Listings::default());
        assert_eq!(digest, plain);
        assert!(racy.is_empty(), "{racy:?}");
        // ...but older ones are (a clock in the future stands in for waiting).
        let future = i64::MAX;
        let (digest, listings) =
            compute_with_listings_before(&inputs, &extra, &Listings::default(), future);
        assert_eq!(digest, plain);
        assert_eq!(listings.len(), 3, "src, skills and skills/a: {listings:?}");
        let (again, kept) = compute_with_listings_before(&inputs, &extra, &listings, future);
        assert_eq!(again, plain, "a recorded listing gives the same digest");
        assert_eq!(kept, listings);

        // An edit in place (the directory's times do not move) is still found.
        fs::write(root.join("src/skills/a/SKILL.md"), "edited").unwrap();
        let edited = compute_extended(&inputs, &extra);
        assert_ne!(edited, plain);
        assert_eq!(
            compute_with_listings_before(&inputs, &extra, &listings, future).0,
            edited
        );
        // A file added, or one removed, moves its directory's times: listed again.
        fs::write(root.join("src/skills/a/new.md"), "n").unwrap();
        let added = compute_extended(&inputs, &extra);
        assert_ne!(added, edited);
        let (digest, relisted) = compute_with_listings_before(&inputs, &extra, &listings, future);
        assert_eq!(digest, added);
        assert_ne!(relisted, listings);
        fs::remove_file(root.join("src/skills/a/new.md")).unwrap();
        assert_eq!(
            compute_with_listings_before(&inputs, &extra, &relisted, future).0,
            compute_extended(&inputs, &extra)
        );
    }

    /// Past the filesystem clock's granularity, so a change made now moves a directory's times
    /// (the fast path's [`RACY_SECONDS`] stands for this in real use).
    fn next_tick() {
        std::thread::sleep(std::time::Duration::from_millis(30));
    }

    #[test]
    fn a_recorded_slot_section_gives_the_same_digest_and_misses_no_relink_or_removal() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("agentpack.toml"), "").unwrap();
        fs::write(root.join("pack.lock"), "").unwrap();
        for name in ["aaaa-pkg", "bbbb-pkg", "cccc-pkg"] {
            fs::create_dir_all(root.join("cache/store/v1").join(name)).unwrap();
        }
        std::os::unix::fs::symlink("store/v1/aaaa-pkg", root.join("cache/one")).unwrap();
        std::os::unix::fs::symlink("store/v1/bbbb-pkg", root.join("cache/two")).unwrap();
        let entries = vec![root.join("cache/one"), root.join("cache/two")];
        let (inputs, extra) = bare_sync_inputs(root, entries);
        let plain = compute_extended(&inputs, &extra);
        // Directories changed just now are not recorded (racy)...
        let (digest, racy) = compute_with_listings(&inputs, &extra, &Listings::default());
        assert_eq!(digest, plain);
        assert!(racy.slots.is_none(), "{racy:?}");
        // ...older ones are: the slots' directory and the store paths' one.
        let future = i64::MAX;
        let (digest, recorded) =
            compute_with_listings_before(&inputs, &extra, &Listings::default(), future);
        assert_eq!(digest, plain);
        let slots = recorded.slots.clone().expect("recorded");
        assert_eq!(slots.dirs.len(), 2, "{slots:?}");
        assert_eq!(recorded.len(), 1);
        let (again, kept) = compute_with_listings_before(&inputs, &extra, &recorded, future);
        assert_eq!(again, plain, "a recorded section gives the same digest");
        assert_eq!(kept, recorded);
        // Other entries than those recorded: read again.
        let (fewer, _) = bare_sync_inputs(root, vec![root.join("cache/one")]);
        assert_eq!(
            compute_with_listings_before(&fewer, &extra, &recorded, future).0,
            compute_extended(&fewer, &extra)
        );

        // After each change: the digest differs from the one before, and a computation over the
        // recorded section gives the plain one (the directories moved, so it reads again).
        let changed = |before: &str, recorded: &Listings| {
            let plain = compute_extended(&inputs, &extra);
            assert_ne!(plain, before);
            let (digest, next) = compute_with_listings_before(&inputs, &extra, recorded, future);
            assert_eq!(digest, plain);
            (plain, next)
        };
        // A slot relinked moves its directory's times.
        next_tick();
        fs::remove_file(root.join("cache/two")).unwrap();
        std::os::unix::fs::symlink("store/v1/cccc-pkg", root.join("cache/two")).unwrap();
        let (relinked, recorded) = changed(&plain, &recorded);
        // A store path removed and made again (another inode) moves the store's directory.
        next_tick();
        fs::create_dir(root.join("cache/store/v1/aaaa-pkg-new")).unwrap();
        fs::remove_dir(root.join("cache/store/v1/aaaa-pkg")).unwrap();
        fs::rename(
            root.join("cache/store/v1/aaaa-pkg-new"),
            root.join("cache/store/v1/aaaa-pkg"),
        )
        .unwrap();
        let (recreated, recorded) = changed(&relinked, &recorded);
        // A store path removed: noticed, and a section with a missing store path is not recorded.
        next_tick();
        fs::remove_dir(root.join("cache/store/v1/aaaa-pkg")).unwrap();
        let (_, after) = changed(&recreated, &recorded);
        assert!(after.slots.is_none(), "{after:?}");
        // A legacy slot directory (walked) is never recorded either.
        fs::create_dir_all(root.join("cache/legacy")).unwrap();
        let (legacy, _) = bare_sync_inputs(root, vec![root.join("cache/legacy")]);
        let (_, after) =
            compute_with_listings_before(&legacy, &extra, &Listings::default(), future);
        assert!(after.slots.is_none(), "{after:?}");
    }

    #[test]
    fn a_store_slot_counts_as_its_link_and_root_not_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("agentpack.toml"), "").unwrap();
        fs::write(root.join("pack.lock"), "").unwrap();
        fs::create_dir_all(root.join("cache/store/v1/aaaa-pkg")).unwrap();
        fs::create_dir_all(root.join("cache/store/v1/bbbb-pkg")).unwrap();
        fs::write(root.join("cache/store/v1/aaaa-pkg/SKILL.md"), "a").unwrap();
        std::os::unix::fs::symlink("store/v1/aaaa-pkg", root.join("cache/slot")).unwrap();
        fs::create_dir_all(root.join("src")).unwrap();
        fs::write(root.join("src/SKILL.md"), "s").unwrap();
        let (inputs, extra) = bare_sync_inputs(root, vec![root.join("cache/slot")]);
        let first = compute_extended(&inputs, &extra);
        assert_ne!(
            first,
            compute(&inputs),
            "a sync's fingerprint is not a launch's"
        );
        let launch = FingerprintInputs {
            agent: Some(Agent::Claude),
            ..inputs.clone()
        };
        assert_ne!(
            first,
            compute_extended(&launch, &extra),
            "a sync's fingerprint is not a launcher's over the same inputs"
        );
        // In place inside the immutable store path: not read, by design.
        fs::write(root.join("cache/store/v1/aaaa-pkg/SKILL.md"), "tampered").unwrap();
        assert_eq!(first, compute_extended(&inputs, &extra));
        // The slot relinked: noticed.
        fs::remove_file(root.join("cache/slot")).unwrap();
        std::os::unix::fs::symlink("store/v1/bbbb-pkg", root.join("cache/slot")).unwrap();
        let relinked = compute_extended(&inputs, &extra);
        assert_ne!(first, relinked);
        // A source directory edited: noticed.
        fs::write(root.join("src/SKILL.md"), "edited").unwrap();
        let edited = compute_extended(&inputs, &extra);
        assert_ne!(relinked, edited);
        // An extra file appearing: noticed.
        fs::write(root.join("eject.json"), "{}").unwrap();
        assert_ne!(edited, compute_extended(&inputs, &extra));
    }
}
