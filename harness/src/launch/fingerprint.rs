//! The launch fast path's fingerprint: one digest over everything a launch's staging depends on
//! that can be checked without hashing package content.
//!
//! It covers the manifest's and the lock's bytes, the `./.agents/` tree's metadata, the mode, the
//! target agent, the behaviour toggles, the generation path the pointer resolved to, and the
//! metadata of every cache entry the lock names (each file's path, type, permission bits, size and
//! modification time, the documented "Launches that skip the sync" contract). The launcher records
//! it after a full sync and compares it on the next launch; any difference sends the launch through
//! a full sync. Reading metadata is the only I/O.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::plan::Agent;

/// What a fingerprint is computed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FingerprintInputs {
    pub agent: Agent,
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

fn field(hasher: &mut Sha256, bytes: &[u8]) {
    hasher.update((bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}

fn file_bytes(hasher: &mut Sha256, path: &Path) {
    match fs::read(path) {
        Ok(bytes) => {
            field(hasher, b"present");
            field(hasher, &bytes);
        }
        Err(_) => field(hasher, b"missing"),
    }
}

fn metadata_line(meta: &fs::Metadata) -> String {
    let kind = if meta.file_type().is_symlink() {
        'l'
    } else if meta.is_dir() {
        'd'
    } else {
        'f'
    };
    format!(
        "{kind} {:o} {} {}.{}",
        meta.mode() & 0o7777,
        if meta.is_dir() { 0 } else { meta.size() },
        meta.mtime(),
        meta.mtime_nsec()
    )
}

/// `root`, or where it points when it is a symbolic link (a cache slot): one `readlink`, not a full
/// canonicalization, because the fast path runs it for every package on every launch.
fn resolve_root(root: &Path) -> Option<PathBuf> {
    match fs::read_link(root) {
        Ok(target) if target.is_absolute() => Some(target),
        Ok(target) => Some(root.parent().unwrap_or(Path::new("/")).join(target)),
        Err(_) => root.symlink_metadata().ok().map(|_| root.to_path_buf()),
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
/// nothing below followed).
fn tree_metadata(hasher: &mut Sha256, root: &Path, cover: Cover) {
    let Some(resolved) = resolve_root(root) else {
        if matches!(cover, Cover::All) {
            field(hasher, b"missing");
        }
        return;
    };
    if matches!(cover, Cover::All) {
        field(hasher, resolved.as_os_str().as_encoded_bytes());
    }
    let mut lines: Vec<(Vec<u8>, String)> = Vec::new();
    for entry in walkdir::WalkDir::new(&resolved).follow_links(false) {
        let Ok(entry) = entry else {
            field(hasher, b"unreadable");
            continue;
        };
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let relative = entry
            .path()
            .strip_prefix(&resolved)
            .unwrap_or(entry.path())
            .as_os_str()
            .as_encoded_bytes()
            .to_vec();
        if matches!(cover, Cover::Overlay)
            && (meta.is_dir()
                || (meta.is_symlink()
                    && relative == crate::home_layer::AGY_OVERLAY_LINK.as_bytes()))
        {
            continue;
        }
        lines.push((relative, metadata_line(&meta)));
    }
    lines.sort();
    for (path, line) in lines {
        field(hasher, &path);
        field(hasher, line.as_bytes());
    }
}

/// Computes the fingerprint (lowercase hex SHA-256).
pub fn compute(inputs: &FingerprintInputs) -> String {
    let mut hasher = Sha256::new();
    field(&mut hasher, b"agentpack-launch-fingerprint-v1");
    field(&mut hasher, inputs.agent.as_str().as_bytes());
    field(&mut hasher, inputs.mode.as_bytes());
    for toggle in &inputs.toggles {
        field(&mut hasher, toggle.as_bytes());
    }
    file_bytes(&mut hasher, &inputs.manifest);
    file_bytes(&mut hasher, &inputs.lock);
    match &inputs.overlay {
        Some(overlay) => tree_metadata(&mut hasher, overlay, Cover::Overlay),
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
    for entry in &inputs.cache_entries {
        field(&mut hasher, entry.as_os_str().as_encoded_bytes());
        tree_metadata(&mut hasher, entry, Cover::All);
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
            agent: Agent::Claude,
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
        other.agent = Agent::Codex;
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
}
