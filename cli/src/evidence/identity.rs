//! The identities a report (and later a probe receipt) is bound to: source, lock, mode, workspace
//! inputs and policy. Pure digests over bytes this module reads; it never writes.
//!
//! The source identity hashes the manifest's and the lock's bytes only, never a path, so the same
//! definition in two relocated checkouts has the same source identity. The workspace input digest
//! covers the docs' fingerprint list (workspace `.agents`, `.claude`, `.cursor`, `.codex/skills`,
//! `.opencode/skills`, root `AGENTS.md` / `CLAUDE.md`, the user skill roots and the known adapter
//! configuration files), each entry's relative path, type, permission bits and bytes; a symbolic
//! link contributes its target text and what it resolves to, and a link cycle fails.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::env::{self, EnvVars};
use crate::evidence::receipt::BoundIdentities;
use crate::project::Project;

/// A place of the fingerprint list, named as the report names it.
#[derive(Debug, Clone)]
pub struct Place {
    /// `workspace:.claude`, `user:.claude/skills`...
    pub label: String,
    pub path: PathBuf,
}

/// The fingerprint list of `workspace` and the user's `home` (`config_home`: `XDG_CONFIG_HOME`).
pub fn fingerprint_places(
    workspace: &Path,
    home: Option<&Path>,
    config_home: Option<&Path>,
) -> Vec<Place> {
    let mut places: Vec<Place> = [
        ".agents",
        ".claude",
        ".cursor",
        ".codex/skills",
        ".opencode/skills",
        "AGENTS.md",
        "CLAUDE.md",
    ]
    .into_iter()
    .map(|relative| Place {
        label: format!("workspace:{relative}"),
        path: workspace.join(relative),
    })
    .collect();
    if let Some(home) = home {
        for relative in [
            ".claude/skills",
            ".claude/commands",
            ".claude/agents",
            ".claude/settings.json",
            ".claude/CLAUDE.md",
            ".codex/config.toml",
            ".codex/skills",
            ".agents/skills",
            ".cursor/skills",
        ] {
            places.push(Place {
                label: format!("user:~/{relative}"),
                path: home.join(relative),
            });
        }
    }
    if let Some(config) = config_home {
        places.push(Place {
            label: "user:$XDG_CONFIG_HOME/opencode".to_owned(),
            path: config.join("opencode"),
        });
    }
    places
}

/// A link cycle or an unreadable entry under a fingerprinted place.
#[derive(Debug, thiserror::Error)]
pub enum FingerprintError {
    #[error("symbolic link cycle at {path}: a link leads back to {target}")]
    Cycle { path: PathBuf, target: PathBuf },
    #[error("cannot read {path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
}

/// The digest of every place (absent places count as absent).
pub fn workspace_input_digest(places: &[Place]) -> Result<String, FingerprintError> {
    let mut digest = Sha256::new();
    field(&mut digest, b"agentpack-workspace-inputs-v1");
    for place in places {
        field(&mut digest, place.label.as_bytes());
        let mut ancestors = BTreeSet::new();
        entry(&mut digest, &place.path, "", &mut ancestors)?;
    }
    Ok(format!("sha256:{}", hex::encode(digest.finalize())))
}

fn field(digest: &mut Sha256, bytes: &[u8]) {
    digest.update((bytes.len() as u64).to_le_bytes());
    digest.update(bytes);
}

/// Hashes the entry at `path` (shown as `relative`). `ancestors` holds the canonical directories
/// being walked, so a link into one of them is a cycle.
fn entry(
    digest: &mut Sha256,
    path: &Path,
    relative: &str,
    ancestors: &mut BTreeSet<PathBuf>,
) -> Result<(), FingerprintError> {
    let io = |source| FingerprintError::Io {
        path: path.to_path_buf(),
        cause: source,
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            field(digest, format!("absent {relative}").as_bytes());
            return Ok(());
        }
        Err(err) => return Err(io(err)),
    };
    let mode = meta.permissions().mode() & 0o7777;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).map_err(io)?;
        field(digest, format!("link {relative} {mode:o}").as_bytes());
        field(digest, target.as_os_str().as_encoded_bytes());
        // What the link resolves to is part of what the agent reads.
        match std::fs::canonicalize(path) {
            Ok(resolved) => {
                if ancestors.contains(&resolved) {
                    return Err(FingerprintError::Cycle {
                        path: path.to_path_buf(),
                        target: resolved,
                    });
                }
                return resolved_entry(digest, &resolved, relative, ancestors);
            }
            Err(err) if err.raw_os_error() == Some(libc_eloop()) => {
                return Err(FingerprintError::Cycle {
                    path: path.to_path_buf(),
                    target: target.clone(),
                });
            }
            Err(_) => {
                field(digest, b"dangling");
                return Ok(());
            }
        }
    }
    if meta.is_dir() {
        field(digest, format!("dir {relative} {mode:o}").as_bytes());
        let canonical = std::fs::canonicalize(path).map_err(io)?;
        ancestors.insert(canonical.clone());
        let mut names: Vec<_> = std::fs::read_dir(path)
            .map_err(io)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .map_err(io)?;
        names.sort();
        for name in names {
            let child = format!("{relative}/{}", name.to_string_lossy());
            entry(digest, &path.join(&name), &child, ancestors)?;
        }
        ancestors.remove(&canonical);
        return Ok(());
    }
    field(digest, format!("file {relative} {mode:o}").as_bytes());
    let bytes = std::fs::read(path).map_err(io)?;
    field(digest, &bytes);
    Ok(())
}

fn resolved_entry(
    digest: &mut Sha256,
    resolved: &Path,
    relative: &str,
    ancestors: &mut BTreeSet<PathBuf>,
) -> Result<(), FingerprintError> {
    entry(digest, resolved, &format!("{relative}=>"), ancestors)
}

/// `ELOOP` (too many levels of symbolic links), the error a self-referencing link gives.
fn libc_eloop() -> i32 {
    nix::errno::Errno::ELOOP as i32
}

/// SHA-256 of the manifest's and the lock's bytes (the lock absent is recorded as absent).
pub fn source_identity(manifest: &[u8], lock: Option<&[u8]>) -> String {
    let mut digest = Sha256::new();
    field(&mut digest, b"agentpack-source-v1");
    field(&mut digest, manifest);
    optional_field(&mut digest, (b"lock", b"no-lock"), lock);
    format!("sha256:{}", hex::encode(digest.finalize()))
}

/// Feeds `bytes` under the label `present` (`labels.0`), or only the label `absent` (`labels.1`)
/// when there are none: an absent input never digests like an empty one.
fn optional_field(digest: &mut Sha256, labels: (&[u8], &[u8]), bytes: Option<&[u8]>) {
    match bytes {
        Some(bytes) => {
            field(digest, labels.0);
            field(digest, bytes);
        }
        None => field(digest, labels.1),
    }
}

/// SHA-256 of a generation's store path name and its staged manifest (the store's record of every
/// file, link and directory of it); `None` when the record cannot be read.
pub fn generation_digest(name: &str, cache_dir: &Path) -> Option<String> {
    let record =
        std::fs::read(cache_dir.join("store/v1/meta").join(format!("{name}.json"))).ok()?;
    let mut digest = Sha256::new();
    field(&mut digest, b"agentpack-generation-v1");
    field(&mut digest, name.as_bytes());
    field(&mut digest, &record);
    Some(format!("sha256:{}", hex::encode(digest.finalize())))
}

/// SHA-256 of the lock's bytes.
pub fn lock_identity(lock: Option<&[u8]>) -> Option<String> {
    lock.map(|bytes| format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
}

/// SHA-256 of the policy, the strict flag and the contract's bytes.
pub fn policy_digest(policy: &str, strict: bool, contract: Option<&[u8]>) -> String {
    let mut digest = Sha256::new();
    field(&mut digest, b"agentpack-policy-v1");
    field(&mut digest, policy.as_bytes());
    field(&mut digest, if strict { b"strict" } else { b"compat" });
    optional_field(&mut digest, (b"contract", b"no-contract"), contract);
    format!("sha256:{}", hex::encode(digest.finalize()))
}

/// The identities of the current inputs, as preflight computes them.
pub fn current_identities(
    project: &Project,
    manifest_bytes: &[u8],
    lock_bytes: Option<&[u8]>,
    mode: &str,
    staged: Option<&Path>,
) -> BoundIdentities {
    let home = env::var(EnvVars::HOME).map(PathBuf::from);
    let config_home = env::var(EnvVars::XDG_CONFIG_HOME)
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let places = fingerprint_places(&project.workspace, home.as_deref(), config_home.as_deref());
    let staged_generation =
        staged.and_then(|target| target.file_name().map(|n| n.to_string_lossy().into_owned()));
    let cache_dir = project.home.root.join("cache");
    BoundIdentities {
        source: source_identity(manifest_bytes, lock_bytes),
        lock: lock_identity(lock_bytes),
        mode: mode.to_owned(),
        workspace_inputs: workspace_input_digest(&places).ok(),
        generation: staged_generation
            .as_deref()
            .and_then(|name| generation_digest(name, &cache_dir)),
        staged_generation,
        policy: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_cycle_fails_and_link_targets_count() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join(".claude/skills")).unwrap();
        std::os::unix::fs::symlink("..", ws.join(".claude/skills/loop")).unwrap();
        let places = fingerprint_places(ws, None, None);
        assert!(matches!(
            workspace_input_digest(&places),
            Err(FingerprintError::Cycle { .. })
        ));
        std::fs::remove_file(ws.join(".claude/skills/loop")).unwrap();
        std::fs::write(ws.join("a.md"), "a").unwrap();
        std::fs::write(ws.join("b.md"), "b").unwrap();
        std::os::unix::fs::symlink("a.md", ws.join("AGENTS.md")).unwrap();
        let first = workspace_input_digest(&places).unwrap();
        std::fs::write(ws.join("a.md"), "changed").unwrap();
        let second = workspace_input_digest(&places).unwrap();
        assert_ne!(first, second, "the bytes behind a link are fingerprinted");
    }
}
