//! A damaged GitHub package slot (an edit through a staged hard link) restored from a verified
//! source, the kept repo snapshot or a fresh download, with the files that differed named.
//!
//! It never publishes a source whose bytes do not match the lock's content hash.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agentpack_lockfile::validate::ContentHash;

use crate::package_store::{OnExisting, PackageStore};
use crate::resolve::{download_normalized, GithubPackage, ResolutionError};

/// A GitHub package's slot that does not match the lock's content hash.
pub(crate) struct Damaged<'a> {
    /// The lock's cache key.
    pub cache_key: &'a agentpack_lockfile::validate::CacheKey,
    /// The lock's content hash.
    pub expected: &'a ContentHash,
    /// The store path the slot names (the damaged copy).
    pub cache: PathBuf,
    /// What it hashes to.
    pub actual: ContentHash,
}

/// Restores a damaged GitHub package slot from a verified source: the kept repo snapshot (checked
/// against its record before use) or a fresh download, copied into `tree`, checked against the
/// lock's content hash and published in place of the damaged copy. Returns the new slot and the
/// warning naming each file that differed ("restored <module>: ... (edited through a hard link?)").
/// When neither source can be reached, [`ResolutionError::Unrestored`] (the content hash mismatch
/// with its `sync --repair` remedy and why); a source whose bytes do not match the lock is refused
/// ([`ResolutionError::FetchedMismatch`]) and nothing is published.
pub(crate) fn restore_damaged(
    package: GithubPackage<'_>,
    store: &dyn PackageStore,
    damaged: Damaged<'_>,
    tree: &Path,
) -> Result<(PathBuf, String), ResolutionError> {
    let GithubPackage { module, commit, .. } = package;
    let Damaged {
        cache_key,
        expected,
        cache,
        actual,
    } = damaged;
    let downloaded = match download_normalized(package, store, tree) {
        Ok(downloaded) => downloaded,
        Err(ResolutionError::Fetch(error)) => {
            tracing::debug!(module, %error, "no verified source to restore the cache slot from");
            let mismatch = ResolutionError::CacheMismatch {
                module: module.to_owned(),
                expected: expected.to_string(),
                actual: actual.to_string(),
                cache,
                commit: commit.to_owned(),
            };
            return Err(ResolutionError::Unrestored {
                mismatch: Box::new(mismatch),
                why: format!(
                    "no verified source: no usable kept snapshot, and {}",
                    error.to_string().lines().next().unwrap_or_default()
                ),
            });
        }
        Err(other) => return Err(other),
    };
    downloaded.check_matches(store, tree, expected, module, commit)?;
    let files = differing_files(&cache, tree).map_err(|source| ResolutionError::Io {
        path: cache.clone(),
        cause: source,
    })?;
    let slot = store.publish(cache_key, module, tree, expected, OnExisting::Repair)?;
    store.record_executables(&slot, &downloaded.fetched.executables)?;
    let named = if files.is_empty() {
        "file modes or links".to_owned()
    } else {
        files.join(", ")
    };
    Ok((
        slot,
        format!(
            "restored {module}: {named} (edited through a hard link?)\n  was       {} ({actual})\n  now       {expected}, verified against pack.lock",
            cache.display()
        ),
    ))
}

/// The package-relative paths whose content or kind differs between the damaged copy and the
/// restored tree (changed, added or removed), sorted.
fn differing_files(damaged: &Path, restored: &Path) -> std::io::Result<Vec<String>> {
    let damaged_entries = tree_entries(damaged)?;
    let restored_entries = tree_entries(restored)?;
    let mut differing = Vec::new();
    let names: BTreeSet<&String> = damaged_entries
        .keys()
        .chain(restored_entries.keys())
        .collect();
    for name in names {
        let same = match (damaged_entries.get(name), restored_entries.get(name)) {
            (Some(Entry::File(a)), Some(Entry::File(b))) => same_content(a, b)?,
            (Some(Entry::Link(a)), Some(Entry::Link(b))) => a == b,
            (Some(Entry::Dir), Some(Entry::Dir)) => true,
            _ => false,
        };
        if !same {
            differing.push(name.clone());
        }
    }
    Ok(differing)
}

enum Entry {
    File(PathBuf),
    Link(PathBuf),
    Dir,
}

fn tree_entries(root: &Path) -> std::io::Result<BTreeMap<String, Entry>> {
    let mut entries = BTreeMap::new();
    for entry in walkdir::WalkDir::new(root).follow_links(false).min_depth(1) {
        let entry = entry.map_err(std::io::Error::other)?;
        let relative = entry
            .path()
            .strip_prefix(root)
            .map_err(std::io::Error::other)?
            .to_string_lossy()
            .into_owned();
        let file_type = entry.file_type();
        let value = if file_type.is_dir() {
            Entry::Dir
        } else if file_type.is_symlink() {
            Entry::Link(fs_err::read_link(entry.path())?)
        } else {
            Entry::File(entry.path().to_path_buf())
        };
        entries.insert(relative, value);
    }
    Ok(entries)
}

/// Whether two files hold the same bytes (streamed, never read whole).
fn same_content(a: &Path, b: &Path) -> std::io::Result<bool> {
    use std::io::Read as _;
    if fs_err::metadata(a)?.len() != fs_err::metadata(b)?.len() {
        return Ok(false);
    }
    let mut a = std::io::BufReader::new(fs_err::File::open(a)?);
    let mut b = std::io::BufReader::new(fs_err::File::open(b)?);
    let mut left = vec![0u8; 64 * 1024];
    let mut right = vec![0u8; 64 * 1024];
    loop {
        let read = a.read(&mut left)?;
        if read == 0 {
            return Ok(b.read(&mut right[..1])? == 0);
        }
        let mut filled = 0;
        while filled < read {
            let more = b.read(&mut right[filled..read])?;
            if more == 0 {
                return Ok(false);
            }
            filled += more;
        }
        if left[..read] != right[..read] {
            return Ok(false);
        }
    }
}
