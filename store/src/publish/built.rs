//! Input-addressed store paths: [`Store::publish_built`] (a build callback writes the tree) and
//! [`Store::publish_files`] (a plan of [`PlannedFile`]s, e.g. a generation).
//!
//! Owns: [`Source`], [`PlannedFile`], plan validation and placing planned files. Must never rebuild a
//! name that is already published and usable, and never accept a plan path that escapes its root.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use rayon::prelude::*;

use super::*;
use crate::error::{IoContext, Result, StoreError};
use crate::fsutil::{self, set_mode, unique_name};
use crate::link::create_empty;
use crate::lock::LockKind;
use crate::meta::{Entry, PathKind};
use crate::names::{BlobId, StorePath, StorePathName};
use crate::store::Store;

/// Where the content of one planned file comes from.
#[derive(Clone, Debug)]
pub enum Source {
    /// A blob already in the store (no hashing, no copying: linked).
    Blob(BlobId),
    /// These bytes (imported as a blob unless empty).
    Bytes(Vec<u8>),
    /// A symbolic link with this target text (`executable` is ignored).
    Symlink(String),
    /// An existing file: a file of another store path is linked from its blob; any other file is copied
    /// into a blob first.
    ExistingFile(PathBuf),
}

/// One file of a [`Store::publish_files`] plan.
#[derive(Clone, Debug)]
pub struct PlannedFile {
    /// Relative `/`-separated path inside the store path (no `..`, no absolute, no empty components).
    pub path: String,
    /// Where the content comes from.
    pub source: Source,
    /// Mode 0555 instead of 0444.
    pub executable: bool,
}

impl PlannedFile {
    /// A planned file.
    pub fn new(path: impl Into<String>, source: Source, executable: bool) -> Self {
        PlannedFile {
            path: path.into(),
            source,
            executable,
        }
    }
}

/// An input-addressed store path staged by [`Store::stage_built`], waiting for
/// [`Store::place_built`]: either already published under its name, or sealed under a hidden name
/// with its metadata beside it. Dropped unplaced, the hidden tree and the build directory are
/// removed and the store lock it holds is released.
pub struct StagedBuilt {
    name: StorePathName,
    state: Staging,
}

/// Where a [`StagedBuilt`] is.
enum Staging {
    /// Already published under its name (the build was not run).
    Existing(StorePath),
    /// Sealed under a hidden name, waiting for its flush.
    Pending(Box<PendingBuilt>),
}

impl StagedBuilt {
    /// The store path name it gets.
    pub fn name(&self) -> &StorePathName {
        &self.name
    }
}

impl std::fmt::Debug for StagedBuilt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedBuilt")
            .field("name", &self.name)
            .field("existing", &matches!(self.state, Staging::Existing(_)))
            .finish()
    }
}

/// A staged tree, its build directory (locked, removed when dropped) and the store lock held
/// until it is placed.
struct PendingBuilt {
    staged: Option<Staged>,
    _build_dir: crate::StoreTempDir,
    /// The ticket of the first flush that covers it ([`FlushCount`]).
    ticket: u64,
    _store_lock: Option<crate::lock::FileLock>,
}

/// Creates the planned symbolic links below `out`, one inode per target: the first link of a
/// target is created, each later one of the same target is a hard link of it (`link(2)` does not
/// follow a symlink), as `cp -al` copies links. A staged tree holds the same link in several agent
/// trees (an unchanged skill directory is a link into its package for each agent that reads
/// through one), and on ext4 every symlink inode with a target over 59 bytes takes a block. Where a
/// hard link is refused (a filesystem without them, a link count at its limit), the link is
/// created anew.
fn place_symlinks<'a>(
    out: &Path,
    links: impl Iterator<Item = &'a PlannedFile>,
) -> Result<Vec<Entry>> {
    let mut first_of: std::collections::HashMap<&str, PathBuf> = std::collections::HashMap::new();
    let mut entries = Vec::new();
    for planned in links {
        let Source::Symlink(target) = &planned.source else {
            continue;
        };
        let dst = out.join(&planned.path);
        let shared = first_of
            .get(target.as_str())
            .is_some_and(|first| fs_err::hard_link(first, &dst).is_ok());
        if !shared {
            std::os::unix::fs::symlink(target, &dst).ctx("create link", &dst)?;
            first_of.insert(target, dst);
        }
        entries.push(Entry::Link {
            path: planned.path.clone(),
            target: target.clone(),
        });
    }
    Ok(entries)
}

/// Check every planned path; return the directories to create (parents first) and the plan order.
pub(super) fn validate_plan(plan: &[PlannedFile]) -> Result<(Vec<String>, Vec<usize>)> {
    let mut files = std::collections::BTreeSet::new();
    let mut dirs = std::collections::BTreeSet::new();
    for planned in plan {
        let invalid = |reason| StoreError::InvalidPath {
            path: planned.path.clone(),
            reason,
        };
        let path = Path::new(&planned.path);
        if planned.path.is_empty() || planned.path.ends_with('/') || planned.path.contains("//") {
            return Err(invalid("empty path or empty component"));
        }
        if planned.path.contains('\0') {
            return Err(invalid("NUL in path"));
        }
        let plain = planned
            .path
            .split('/')
            .all(|part| part != "." && part != "..")
            && path
                .components()
                .all(|component| matches!(component, Component::Normal(_)));
        if !plain {
            return Err(invalid(
                "only plain relative components are allowed (no leading '/', '.', '..')",
            ));
        }
        if !files.insert(planned.path.clone()) {
            return Err(invalid("the same path is planned twice"));
        }
        let mut prefix = String::new();
        let parts: Vec<&str> = planned.path.split('/').collect();
        for part in &parts[..parts.len() - 1] {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            dirs.insert(prefix.clone());
        }
    }
    if let Some(clash) = dirs.iter().find(|dir| files.contains(*dir)) {
        return Err(StoreError::InvalidPath {
            path: clash.clone(),
            reason: "planned both as a file and as a directory",
        });
    }
    let mut dirs: Vec<String> = dirs.into_iter().collect();
    dirs.sort_by(|a, b| {
        a.matches('/')
            .count()
            .cmp(&b.matches('/').count())
            .then(a.as_bytes().cmp(b.as_bytes()))
    });
    Ok((dirs, (0..plan.len()).collect()))
}

/// Write `bytes` to the new file `dst` with `mode_bits`.
pub(super) fn write_new(dst: &Path, bytes: &[u8], mode_bits: u32) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dst)
        .ctx("create", dst)?;
    file.write_all(bytes).ctx("write", dst)?;
    drop(file);
    set_mode(dst, mode_bits)
}

impl Store {
    /// The published input-addressed path `name` when this user may use it; `Err` when another user
    /// published it (nothing but rebuilding could tell its content is right, and its owner could
    /// change it afterwards; input-addressed names include the user, so only a deliberate collision
    /// gets here).
    pub(super) fn usable_input_addressed(&self, name: &StorePathName) -> Result<Option<StorePath>> {
        let Some(existing) = self.published(name) else {
            return Ok(None);
        };
        if self.trusted(existing.path()) {
            return Ok(Some(existing));
        }
        Err(StoreError::ForeignObject {
            what: "store path",
            path: existing.path().to_path_buf(),
            owner: fsutil::owner_of(existing.path()),
        })
    }

    /// Publish an input-addressed store path called `name`, written by `build(out_dir, final_path)`.
    /// The final path is known before the build, so content may embed it. If `name` is already
    /// published, `build` is not called. Files are deduplicated into blobs afterwards; `references`
    /// are kept alive by GC as long as this path is. [`Store::stage_built`] then
    /// [`Store::place_built`].
    pub fn publish_built<F>(
        &self,
        name: &StorePathName,
        references: &[StorePath],
        build: F,
    ) -> Result<StorePath>
    where
        F: FnOnce(
            &Path,
            &Path,
        ) -> std::result::Result<(), Box<dyn std::error::Error + Send + Sync>>,
    {
        let staged = self.stage_built(name, references, build)?;
        self.place_built(staged)
    }

    /// [`Store::publish_built`] up to the flush: the tree is built, sealed and moved under a hidden
    /// name, its metadata written, and nothing gets its final name. [`Store::place_built`] names it
    /// after the first flush that starts once it is staged, so a path staged before a batch of
    /// packages ([`Store::publish_trees`]) and placed after it costs no flush of its own (a
    /// repository snapshot kept by the same command). The returned value holds the store lock
    /// (shared) until it is placed or dropped: keep it briefly. Dropped unplaced, the hidden tree
    /// is removed; a crash leaves only a hidden leftover that GC removes.
    pub fn stage_built<F>(
        &self,
        name: &StorePathName,
        references: &[StorePath],
        build: F,
    ) -> Result<StagedBuilt>
    where
        F: FnOnce(
            &Path,
            &Path,
        ) -> std::result::Result<(), Box<dyn std::error::Error + Send + Sync>>,
    {
        let final_path = self.path_of(name);
        self.stage_input_addressed(name, PathKind::Built, references, "built-", |out| {
            build(out, &final_path).map_err(|source| StoreError::Build {
                name: name.to_string(),
                source,
            })?;
            self.absorb_tree(out)
        })
    }

    /// Give a [`Store::stage_built`] path its final name (registered as a temp root): without a
    /// flush when one started after it was staged and has returned (this handle's, e.g. a package
    /// batch's), else after one of its own. A name that was already published is returned as is.
    pub fn place_built(&self, staged: StagedBuilt) -> Result<StorePath> {
        let mut pending = match staged.state {
            Staging::Existing(existing) => {
                self.add_temp_root(&existing)?;
                return Ok(existing);
            }
            Staging::Pending(pending) => pending,
        };
        let tree = pending
            .staged
            .take()
            .ok_or_else(|| StoreError::InvalidPath {
                path: staged.name.to_string(),
                reason: "a staged store path holds no tree",
            })?;
        if !self.flushes.covers(pending.ticket) {
            self.flush_batch()?;
        }
        let path = self.place(tree)?;
        self.sync_placed()?;
        // Still under the store lock `pending` holds: no GC between the rename and the root.
        self.add_temp_root(&path)?;
        drop(pending);
        Ok(path)
    }

    /// The shared part of [`Store::stage_built`] and [`Store::publish_files`]: under the store lock
    /// (shared), `name` as it is when already published (and usable), else `fill` writes the tree
    /// into a new `out` directory of a `.tmp/` build directory and returns its manifest, which is
    /// staged ([`Store::stage`]) with metadata of `kind`.
    fn stage_input_addressed(
        &self,
        name: &StorePathName,
        kind: PathKind,
        references: &[StorePath],
        prefix: &str,
        fill: impl FnOnce(&Path) -> Result<Vec<Entry>>,
    ) -> Result<StagedBuilt> {
        let store_lock = self.lock(LockKind::Shared)?;
        if let Some(existing) = self.usable_input_addressed(name)? {
            return Ok(StagedBuilt {
                name: name.clone(),
                state: Staging::Existing(existing),
            });
        }
        let build_dir = self.build_dir(prefix, "out")?;
        let out = build_dir.path();
        let staged = (|| {
            fs_err::create_dir(out).ctx("create", out)?;
            let entries = fill(out)?;
            let meta = new_meta(name, kind, None, references, entries);
            self.stage(build_dir.base(), out, name.clone(), meta)
        })();
        self.flush_stamps();
        // Read once the tree is sealed and hidden: the flush that takes this ticket or a later
        // one covers it. On an error, dropping `pending` removes the build directory.
        let mut pending = PendingBuilt {
            staged: None,
            _build_dir: build_dir,
            ticket: self.flushes.next(),
            _store_lock: store_lock,
        };
        pending.staged = Some(staged?);
        Ok(StagedBuilt {
            name: name.clone(),
            state: Staging::Pending(Box::new(pending)),
        })
    }

    /// Turn the files a builder wrote in `out` into blob links; returns the manifest.
    pub(super) fn absorb_tree(&self, out: &Path) -> Result<Vec<Entry>> {
        manifest_with(
            out,
            |_| Ok(()),
            |(relative, path, exec)| {
                set_mode(path, file_mode(*exec))?;
                let (id, size) = blake3_file(path)?;
                if size == 0 {
                    return Ok(file_entry(relative, id, 0, *exec));
                }
                let adopted = !self.has_blob(&id, *exec) && {
                    let temp = self.tmp_dir().join(unique_name("blob-"));
                    self.place_in_store(path, &temp, file_mode(*exec))?;
                    self.store_blob_from_temp(&temp, &id, *exec)?
                };
                if !adopted {
                    // The blob exists (or another file won the race): link the builder's file to it.
                    // Another user's blob that lies leaves the builder's own file in place.
                    let temp = path.with_file_name(unique_name(".absorb-"));
                    match self.link_blob(&id, *exec, &temp) {
                        Ok(_) => fs_err::rename(&temp, path).ctx("replace", path)?,
                        Err(StoreError::TamperedObject { .. }) => {
                            self.restore_blob_from(&id, *exec, path);
                        }
                        Err(err) => return Err(err),
                    }
                }
                Ok(file_entry(relative, id, size, *exec))
            },
        )
    }

    /// Publish an input-addressed store path called `name` assembled from `plan`: files are linked from
    /// blobs (known blobs are never re-hashed), bytes become blobs, symlinks are created, the
    /// symlinks of one target as hard links of one inode (see [`place_symlinks`]). If `name` is
    /// already published it is returned as is.
    pub fn publish_files(
        &self,
        name: &StorePathName,
        plan: &[PlannedFile],
        references: &[StorePath],
    ) -> Result<StorePath> {
        let (dirs, mut order) = validate_plan(plan)?;
        order.sort_by(|&a, &b| plan[a].path.as_bytes().cmp(plan[b].path.as_bytes()));
        let staged =
            self.stage_input_addressed(name, PathKind::Files, references, "files-", |out| {
                let mut entries = Vec::new();
                for dir in &dirs {
                    let path = out.join(dir);
                    fs_err::create_dir(&path).ctx("create", &path)?;
                    entries.push(Entry::Dir { path: dir.clone() });
                }
                let (links, files): (Vec<usize>, Vec<usize>) = order
                    .iter()
                    .partition(|&&index| matches!(plan[index].source, Source::Symlink(_)));
                let file_entries: Vec<Entry> = files
                    .par_iter()
                    .map(|&index| self.place_planned(&plan[index], &out.join(&plan[index].path)))
                    .collect::<Result<_>>()?;
                entries.extend(file_entries);
                entries.extend(place_symlinks(
                    out,
                    links.iter().map(|&index| &plan[index]),
                )?);
                sort_entries(&mut entries);
                Ok(entries)
            })?;
        self.place_built(staged)
    }

    pub(super) fn place_planned(&self, planned: &PlannedFile, dst: &Path) -> Result<Entry> {
        let exec = planned.executable;
        let path = planned.path.clone();
        let blob_entry = |id: BlobId, size: u64| Entry::File {
            path: path.clone(),
            blob: Some(id),
            size,
            exec,
        };
        let empty = |dst: &Path| -> Result<Entry> {
            create_empty(dst, file_mode(exec))?;
            Ok(Entry::File {
                path: path.clone(),
                blob: None,
                size: 0,
                exec,
            })
        };
        match &planned.source {
            Source::Symlink(target) => {
                std::os::unix::fs::symlink(target, dst).ctx("create link", dst)?;
                Ok(Entry::Link {
                    path: path.clone(),
                    target: target.clone(),
                })
            }
            Source::Blob(id) => {
                self.link_blob(id, exec, dst)?;
                let size = fs_err::symlink_metadata(dst).ctx("inspect", dst)?.len();
                Ok(blob_entry(*id, size))
            }
            Source::Bytes(bytes) => {
                if bytes.is_empty() {
                    return empty(dst);
                }
                let id = BlobId::of(bytes);
                self.place_bytes(bytes, &id, exec, dst)?;
                Ok(blob_entry(id, bytes.len() as u64))
            }
            Source::ExistingFile(file) => {
                // A file of a published store path names its blob in the manifest: linked without
                // a lookup first, since linking finds a missing blob anyway (imported below then).
                match self.manifest_blob_of(file) {
                    Some((_, 0)) => return empty(dst),
                    Some((id, size)) => match self.link_or_copy_verified(&id, exec, file, dst) {
                        Err(StoreError::MissingBlob { .. }) => {}
                        linked => return linked.map(|()| blob_entry(id, size)),
                    },
                    None => {}
                }
                let known = if file.starts_with(&self.dir) {
                    let (id, size) = blake3_file(file)?;
                    (size == 0 || self.has_blob(&id, exec) || self.has_blob(&id, !exec))
                        .then_some((id, size))
                } else {
                    None
                };
                let imported = match known {
                    Some((_, 0)) => None,
                    Some(found) => Some(found),
                    None => self.import_file_locked(file, exec)?,
                };
                match imported {
                    None => empty(dst),
                    Some((id, size)) => {
                        self.link_or_copy_verified(&id, exec, file, dst)?;
                        Ok(blob_entry(id, size))
                    }
                }
            }
        }
    }

    /// Places `bytes` (whose BLAKE3 is `id`) at `dst` through their blob: linked first (rendered
    /// files are mostly the blobs of earlier generations), the blob written only when linking
    /// finds it missing. When the blob of that name lies (another user's, or changed in place),
    /// `dst` gets its own copy of the bytes and an own blob is restored from it.
    pub(super) fn place_bytes(
        &self,
        bytes: &[u8],
        id: &BlobId,
        exec: bool,
        dst: &Path,
    ) -> Result<()> {
        let linked = match self.link_blob(id, exec, dst) {
            Err(StoreError::MissingBlob { .. }) => {
                self.import_bytes_locked(bytes, exec)?;
                self.link_blob(id, exec, dst)
            }
            other => other,
        };
        match linked {
            Ok(_) => Ok(()),
            Err(StoreError::TamperedObject { .. }) => {
                write_new(dst, bytes, file_mode(exec))?;
                self.restore_blob_from(id, exec, dst);
                Ok(())
            }
            Err(err) => Err(err),
        }
    }

    /// Links blob `id` at `dst`. When the blob of that name lies (another user's, or changed in
    /// place), `file` itself is copied, checked against `id`, and an own blob is restored from the
    /// copy.
    fn link_or_copy_verified(
        &self,
        id: &BlobId,
        exec: bool,
        file: &Path,
        dst: &Path,
    ) -> Result<()> {
        match self.link_blob(id, exec, dst) {
            Ok(_) => Ok(()),
            Err(StoreError::TamperedObject { .. }) => {
                self.copy_verified(file, dst, id, file_mode(exec), None)?;
                self.restore_blob_from(id, exec, dst);
                Ok(())
            }
            Err(err) => Err(err),
        }
    }

    /// The published store path holding `inside` (the path itself or anything below it), the path
    /// of `inside` relative to it (`""` for the path itself) and its manifest, when this user may
    /// trust both the tree and its metadata in place; `None` otherwise. For builders that link a
    /// whole unchanged directory of a package instead of its files, and for linking a file of it
    /// by the blob its manifest names.
    pub fn published_manifest_of(
        &self,
        inside: &Path,
    ) -> Option<(
        StorePath,
        String,
        std::sync::Arc<crate::meta::StorePathMeta>,
    )> {
        let relative = inside.strip_prefix(&self.dir).ok()?;
        let mut components = relative.components();
        let name = components
            .next()?
            .as_os_str()
            .to_str()?
            .parse::<StorePathName>()
            .ok()?;
        let inner = components.as_path().to_str()?.to_owned();
        if !self.trusted_store_path(&name) {
            return None;
        }
        let meta = self.cached_meta(&name)?;
        let path = StorePath::new(name.clone(), self.path_of(&name));
        Some((path, inner, meta))
    }

    /// The blob and size of a file of a published store path as its manifest names them (no
    /// hashing, and no look at the blob itself: linking it finds out whether it is there).
    fn manifest_blob_of(&self, file: &Path) -> Option<(BlobId, u64)> {
        // Another user's metadata is theirs to rewrite: their files are hashed instead.
        let (_, inner, meta) = self.published_manifest_of(file)?;
        let index = meta
            .entries
            .binary_search_by(|entry| entry.path().as_bytes().cmp(inner.as_bytes()))
            .ok()?;
        match &meta.entries[index] {
            Entry::File {
                blob: Some(id),
                size,
                ..
            } => Some((*id, *size)),
            Entry::File { blob: None, .. } => Some((BlobId::of(b""), 0)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a panic is a failure

    use super::*;
    use crate::StoreOptions;

    fn started(store: &Store) -> u64 {
        store.flushes.next()
    }

    #[test]
    fn a_path_staged_before_a_batch_is_placed_without_a_flush_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cache"), StoreOptions::default()).unwrap();
        let stage = |inputs: &[u8]| {
            let name = StorePathName::from_inputs(inputs, "snapshot");
            store
                .stage_built(&name, &[], |out, _| {
                    std::fs::write(out.join("tree.tar.gz"), inputs)?;
                    Ok(())
                })
                .unwrap()
        };
        // Alone: placing it flushes once.
        let alone = stage(b"alone");
        let before = started(&store);
        store.place_built(alone).unwrap();
        assert_eq!(started(&store), before + 1);
        // Staged, then a batch flushes: placing it needs no flush.
        let kept = stage(b"kept");
        let src = dir.path().join("pkg");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("SKILL.md"), "skill").unwrap();
        store
            .publish_trees(&[crate::PackageTree::new(&src, "pkg", None)])
            .unwrap();
        let after_batch = started(&store);
        store.place_built(kept).unwrap();
        assert_eq!(started(&store), after_batch, "no flush of its own");
        // Staged after that flush: not covered by it.
        let late = stage(b"late");
        store.place_built(late).unwrap();
        assert_eq!(started(&store), after_batch + 1);
    }
}
