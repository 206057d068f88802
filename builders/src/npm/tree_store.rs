//! The npm-tree store path: a locked tree, downloaded, integrity-checked and unpacked, shared by
//! every project that locks the same tree.
//!
//! Layout: the unpacked tree is an ordinary content-addressed store path (`node_modules/...`
//! inside), and `$AGENTPACK_HOME/cache/npm-trees/<tree digest hex>` is a symlink to it, which finds
//! it again but does not keep it. Its **root** is a small input-addressed store path whose name
//! follows from the lock alone ([`tree_root_name`]: tree digest and platform) and which references
//! the tree. Sync references the root by that name from the exec spec before any start has
//! published it (a reference to a name not published yet is harmless), so a generation's identity
//! never depends on whether a tree was already downloaded, and from the first start on GC keeps
//! the tree while any generation references the spec. A running server's lease (taken by
//! `mcp-exec` for its own pid, which stays the server's after `exec`) keeps it too. An
//! unreferenced tree is collected and downloaded again, verified, by the next start.
//!
//! [`ensure_tree`] takes the tarballs substituters serve first
//! ([`crate::substitute_npm`], each checked against the same integrity) and downloads the rest.
//!
//! It must never write a byte of a tarball whose integrity differs from the lock (every tarball is
//! checked before anything is unpacked), never unpack outside the package's directory (no `..`,
//! no absolute paths, no symlinks or hard links), and never run a package script.

// Errors carry the paths, packages and digests a message needs; they are returned once per
// command on a cold path, so their size does not matter.
#![allow(clippy::result_large_err)]

use std::path::{Component, Path, PathBuf};

use agentpack_store::{Store, StoreError, StorePath, StorePathName};
use rayon::prelude::*;

use super::exec_spec::{ExecSpec, ExecTreeEntry};
use super::integrity::{self, IntegrityMismatch};
use super::registry::{tarball_url, RegistryClient, RegistryError};
use super::tree::{applies_on, node_platform, package_name_at, TREE_DIGEST_PREFIX};
use crate::limits::{CappedReader, CountingReader, LimitExceeded, LimitKind, Limits, RatioGuard};

/// The directory under the cache holding one pointer per tree digest.
pub const NPM_TREES_DIR: &str = "npm-trees";

/// Why a tree could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum TreeStoreError {
    /// A tarball could not be downloaded.
    #[error("{path} ({package}@{version}): {cause}\n  fix  check that the registry is reachable and try again")]
    Download {
        /// Tree path.
        path: String,
        /// Package name.
        package: String,
        /// Version.
        version: String,
        /// The cause.
        cause: RegistryError,
    },
    /// A tarball's bytes differ from the lock: nothing was written and nothing runs.
    #[error("the tarball of {package}@{version} ({url}) does not match the integrity in pack.lock: {cause}; nothing was unpacked and the server was not started\n  fix  if the registry really changed this version, run `agentpack lock --update` and review the change")]
    Integrity {
        /// Package name.
        package: String,
        /// Version.
        version: String,
        /// Where it came from.
        url: String,
        /// Expected and actual.
        cause: IntegrityMismatch,
    },
    /// A tarball is not a readable gzip tar, or names a path outside its package.
    #[error("the tarball of {package}@{version} cannot be unpacked: {message}")]
    Unpack {
        /// Package name.
        package: String,
        /// Version.
        version: String,
        /// What was wrong.
        message: String,
    },
    /// A file of the unpacked tree could not be written.
    #[error("cannot write {}: {cause}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// The store refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The pointer of a tree digest: `<cache>/npm-trees/<hex>`.
pub fn tree_pointer(store: &Store, tree_digest: &str) -> PathBuf {
    let hex = tree_digest
        .strip_prefix(TREE_DIGEST_PREFIX)
        .unwrap_or(tree_digest);
    let safe: String = hex.chars().filter(char::is_ascii_hexdigit).collect();
    store.cache_dir().join(NPM_TREES_DIR).join(safe)
}

/// The published store path of a tree, if a start already unpacked it (not checked).
pub fn existing_tree(store: &Store, tree_digest: &str) -> Option<StorePath> {
    store.store_path_of(&tree_pointer(store, tree_digest))
}

/// What the name of a tree root is derived from; bump it when the unpacked layout changes.
const TREE_ROOT_FORMAT: &str = "agentpack-npm-tree-root-v1";
/// The file of a tree root naming the tree it references.
pub const TREE_ROOT_FILE: &str = "npm-tree";

/// The name of the tree root of `spec` on this platform: known from the lock alone, before any
/// start has downloaded the tree (optional packages of other platforms are left out of a tree, so
/// the platform is part of it).
pub fn tree_root_name(spec: &ExecSpec) -> StorePathName {
    let (os, cpu) = node_platform();
    let inputs = format!("{TREE_ROOT_FORMAT}\0{}\0{os}\0{cpu}", spec.tree_digest);
    let label = format!(
        "npm-tree-root-{}-{}",
        spec.package.replace('/', "-"),
        spec.version
    );
    StorePathName::from_inputs(inputs.as_bytes(), &label)
}

/// Publishes the tree root of `spec` referencing `tree` (nothing to do when it exists).
fn ensure_tree_root(store: &Store, spec: &ExecSpec, tree: &StorePath) -> Result<(), StoreError> {
    let name = tree_root_name(spec);
    let tree_name = tree.name().to_string();
    store.publish_built(&name, std::slice::from_ref(tree), |dir, _| {
        std::fs::write(dir.join(TREE_ROOT_FILE), format!("{tree_name}\n"))?;
        Ok(())
    })?;
    Ok(())
}

/// The cheap check of a later start: every file the store recorded is still there with its size
/// and every directory exists.
pub fn tree_looks_intact(store: &Store, tree: &StorePath) -> bool {
    let Ok(meta) = store.meta(tree) else {
        return false;
    };
    meta.entries.iter().all(|entry| match entry {
        agentpack_store::Entry::Dir { path } => tree.path().join(path).is_dir(),
        agentpack_store::Entry::File { path, size, .. } => {
            std::fs::symlink_metadata(tree.path().join(path))
                .is_ok_and(|m| m.is_file() && m.len() == *size)
        }
        agentpack_store::Entry::Link { path, .. } => {
            std::fs::symlink_metadata(tree.path().join(path)).is_ok()
        }
    })
}

/// A ready tree.
#[derive(Debug, Clone)]
pub struct ReadyTree {
    /// The store path holding `node_modules/`.
    pub tree: StorePath,
    /// Whether this call downloaded and unpacked it.
    pub downloaded: bool,
    /// The substituter that served tarballs of it, when one did ([`crate::substitute_npm`]).
    pub substituted_by: Option<String>,
    /// Warnings of the substituters (tarballs refused or missing, a cache unavailable).
    pub warnings: Vec<String>,
}

/// Makes the tree of `spec` ready: reuses the published tree after the cheap check, else
/// gets every tarball (optional packages of other platforms are left out), checks each against its
/// integrity, unpacks them and publishes the result. `substituters` are asked for the tarballs
/// before the registry: each one they serve is checked against its integrity like a download
/// ([`crate::substitute_npm`]); the rest is downloaded ([`Substituters::none`] for none).
///
/// [`Substituters::none`]: crate::substitute::Substituters::none
pub fn ensure_tree(
    store: &Store,
    spec: &ExecSpec,
    client: &RegistryClient,
    substituters: &crate::substitute::Substituters,
) -> Result<ReadyTree, TreeStoreError> {
    let pointer = tree_pointer(store, &spec.tree_digest);
    let existing = store.store_path_of(&pointer);
    if let Some(tree) = &existing {
        if tree_looks_intact(store, tree) {
            store.add_temp_root(tree)?;
            ensure_tree_root(store, spec, tree)?;
            return Ok(ReadyTree {
                tree: tree.clone(),
                downloaded: false,
                substituted_by: None,
                warnings: Vec::new(),
            });
        }
    }
    let (os, cpu) = node_platform();
    let wanted: Vec<&ExecTreeEntry> = spec
        .tree
        .iter()
        .filter(|e| !e.optional || applies_on(&e.to_tree_entry(), os, cpu))
        .collect();
    let substituted = crate::substitute_npm::tarballs_from_substituters(
        substituters,
        store,
        spec,
        &wanted,
        client.limits(),
    );
    // Download and check everything before writing anything (tarballs a substituter served were
    // checked against the same integrities).
    let tarballs: Vec<(&ExecTreeEntry, Vec<u8>)> = wanted
        .par_iter()
        .map(|entry| {
            if let Some(bytes) = substituted.tarballs.get(&entry.integrity) {
                return Ok((*entry, bytes.clone()));
            }
            let package = package_name_at(&entry.path).to_owned();
            let url = tarball_url(&spec.registry, &package, &entry.version);
            let bytes = client
                .download(&url)
                .map_err(|source| TreeStoreError::Download {
                    path: entry.path.clone(),
                    package: package.clone(),
                    version: entry.version.clone(),
                    cause: source,
                })?;
            integrity::check(&entry.integrity, &bytes).map_err(|source| {
                TreeStoreError::Integrity {
                    package,
                    version: entry.version.clone(),
                    url,
                    cause: source,
                }
            })?;
            Ok((*entry, bytes))
        })
        .collect::<Result<_, TreeStoreError>>()?;
    let work = store.temp_dir()?;
    for (entry, bytes) in &tarballs {
        unpack_tarball_limited(bytes, &work.path().join(&entry.path), client.limits()).map_err(
            |message| TreeStoreError::Unpack {
                package: package_name_at(&entry.path).to_owned(),
                version: entry.version.clone(),
                message,
            },
        )?;
    }
    let label = format!(
        "npm-tree-{}-{}",
        spec.package.replace('/', "-"),
        spec.version
    );
    let tree = if existing.is_some() {
        store.repair_tree(work.path(), &label, None)?
    } else {
        store.publish_tree(work.path(), &label, None)?
    };
    ensure_tree_root(store, spec, &tree)?;
    point_at(&pointer, tree.path())?;
    Ok(ReadyTree {
        tree,
        downloaded: true,
        substituted_by: substituted.served_by,
        warnings: substituted.warnings,
    })
}

fn point_at(pointer: &Path, target: &Path) -> Result<(), TreeStoreError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TreeStoreError::Io {
            path,
            cause: source,
        }
    };
    let dir = pointer.parent().unwrap_or(Path::new("."));
    fs_err::create_dir_all(dir).map_err(io(dir))?;
    agentpack_fs::write_symlink(
        target,
        pointer,
        agentpack_fs::TempName::Hidden,
        agentpack_fs::Durability::None,
    )
    .map_err(|err| io(pointer)(err.source))
}

/// Unpacks an npm tarball into `dest`, dropping the first path component (`package/`). Only
/// regular files and directories are written; links are skipped; a path with `..` or a root is
/// an error.
pub fn unpack_tarball(bytes: &[u8], dest: &Path) -> Result<(), String> {
    unpack_tarball_limited(bytes, dest, &Limits::default())
}

/// [`unpack_tarball`] within `limits`: entries, unpacked bytes and the compression ratio (checked
/// while decompressing); file contents are streamed to disk, never held whole in memory.
pub fn unpack_tarball_limited(bytes: &[u8], dest: &Path, limits: &Limits) -> Result<(), String> {
    let what = "the npm tarball";
    let (counted, compressed) = CountingReader::new(bytes);
    let guarded = RatioGuard::new(
        flate2::read::GzDecoder::new(counted),
        compressed,
        *limits,
        what,
    );
    let mut archive = tar::Archive::new(guarded);
    fs_err::create_dir_all(dest).map_err(|e| e.to_string())?;
    let entries = archive.entries().map_err(|e| e.to_string())?;
    let mut entries_seen = 0u64;
    let mut unpacked = 0u64;
    for entry in entries {
        let mut entry = entry.map_err(|e| e.to_string())?;
        entries_seen += 1;
        if entries_seen > limits.max_files {
            return Err(LimitExceeded::new(
                limits,
                LimitKind::Files,
                what,
                format!("holds more than {} entries", limits.max_files),
            )
            .to_string());
        }
        let kind = entry.header().entry_type();
        let raw = entry.path().map_err(|e| e.to_string())?.into_owned();
        let mut relative = PathBuf::new();
        for (i, component) in raw.components().enumerate() {
            match component {
                Component::Normal(part) if i > 0 => relative.push(part),
                Component::Normal(_) | Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(format!("`{}` leaves the package", raw.display()));
                }
            }
        }
        if relative.as_os_str().is_empty() {
            continue;
        }
        let target = dest.join(&relative);
        if kind.is_dir() {
            fs_err::create_dir_all(&target).map_err(|e| e.to_string())?;
        } else if kind.is_file() {
            if let Some(parent) = target.parent() {
                fs_err::create_dir_all(parent).map_err(|e| e.to_string())?;
            }
            let executable = entry.header().mode().is_ok_and(|m| m & 0o111 != 0);
            let _ = std::fs::remove_file(&target);
            let mut file = fs_err::File::create(&target).map_err(|e| e.to_string())?;
            let room = limits.max_extracted_bytes.saturating_sub(unpacked);
            let crossing = LimitExceeded::new(
                limits,
                LimitKind::ExtractedSize,
                what,
                format!(
                    "unpacks to more than {} (at {})",
                    limits.describe(LimitKind::ExtractedSize),
                    raw.display()
                ),
            );
            unpacked += std::io::copy(
                &mut CappedReader::new(&mut entry, room, crossing),
                &mut file,
            )
            .map_err(|e| match LimitExceeded::find(&e) {
                Some(limit) => limit.to_string(),
                None => format!("{}: {e}", raw.display()),
            })?;
            use std::os::unix::fs::PermissionsExt as _;
            let mode = if executable { 0o755 } else { 0o644 };
            fs_err::set_permissions(&target, std::fs::Permissions::from_mode(mode))
                .map_err(|e| e.to_string())?;
        }
        // Symlinks, hard links, devices and FIFOs are never written.
    }
    Ok(())
}

/// The script `node` runs for a spec in a ready tree.
pub fn bin_script(tree: &StorePath, spec: &ExecSpec) -> PathBuf {
    tree.path().join(spec.package_dir()).join(&spec.bin)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn tarball(files: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, bytes) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder
                .append_data(&mut header, format!("package/{name}"), bytes.as_slice())
                .unwrap();
        }
        let tar = builder.into_inner().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar).unwrap();
        gz.finish().unwrap()
    }

    #[test]
    fn npm_tarballs_are_unpacked_within_the_limits() {
        let dir = tempfile::tempdir().unwrap();
        let bomb = tarball(&[("zeros.bin", vec![0u8; 16 << 20])]);
        let error =
            unpack_tarball_limited(&bomb, &dir.path().join("a"), &Limits::default()).unwrap_err();
        assert!(error.contains("AGENTPACK_MAX_COMPRESSION_RATIO"), "{error}");
        let many: Vec<(String, Vec<u8>)> = (0..50)
            .map(|i| (format!("f{i}.js"), b"x".to_vec()))
            .collect();
        let many: Vec<(&str, Vec<u8>)> =
            many.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
        let limits = Limits {
            max_files: 10,
            ..Limits::default()
        };
        let error =
            unpack_tarball_limited(&tarball(&many), &dir.path().join("b"), &limits).unwrap_err();
        assert!(error.contains("AGENTPACK_MAX_FILES"), "{error}");
        let limits = Limits {
            max_extracted_bytes: 1000,
            ..Limits::default()
        };
        let big = tarball(&[("a.js", vec![b'a'; 4000])]);
        let error = unpack_tarball_limited(&big, &dir.path().join("c"), &limits).unwrap_err();
        assert!(error.contains("AGENTPACK_MAX_EXTRACTED_SIZE"), "{error}");
        unpack_tarball_limited(
            &tarball(&[("index.js", b"ok".to_vec())]),
            &dir.path().join("d"),
            &Limits::default(),
        )
        .unwrap();
        assert_eq!(std::fs::read(dir.path().join("d/index.js")).unwrap(), b"ok");
    }
}
