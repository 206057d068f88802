//! Locking an npx server's dependency tree: `npm install --package-lock-only --ignore-scripts` in
//! a temporary directory, read back as `[[mcp_servers.tree]]` records, and the `tree_digest`.
//!
//! It must never run a package script or install anything: npm only writes a package-lock.json
//! in a directory of our own, which is then deleted.
//!
//! `tree_digest` = `"sha256-npm-tree-v1:" + hex(SHA-256(concat over records sorted by path of
//! path + "\0" + version + "\0" + integrity + "\n"))`. Platform constraints are not part of it.

use std::path::{Path, PathBuf};
use std::process::Command;

use agentpack_lockfile::TreeEntry;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The prefix of a tree digest.
pub const TREE_DIGEST_PREFIX: &str = "sha256-npm-tree-v1:";

/// Why a tree could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// npm could not be started.
    #[error("cannot run npm ({}): {cause}", npm.display())]
    Spawn {
        /// The npm program.
        npm: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// npm ran and failed.
    #[error("npm could not resolve the tree of {package}@{version}: {stderr}")]
    Failed {
        /// The package.
        package: String,
        /// Its version.
        version: String,
        /// npm's last lines of stderr.
        stderr: String,
    },
    /// The temporary directory or the lock file could not be used.
    #[error("cannot {action} {}: {cause}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// The package-lock.json npm wrote cannot be used.
    #[error("npm's package-lock.json for {package}@{version} cannot be used: {message}")]
    Unusable {
        /// The package.
        package: String,
        /// Its version.
        version: String,
        /// What was wrong.
        message: String,
    },
}

/// Asks `npm` which packages `package@version` installs from `registry`.
pub fn lock_tree(
    npm: &Path,
    registry: &str,
    package: &str,
    version: &str,
) -> Result<Vec<TreeEntry>, TreeError> {
    let dir = tempfile::Builder::new()
        .prefix("agentpack-npm-tree-")
        .tempdir()
        .map_err(|source| TreeError::Io {
            action: "create a temporary directory in",
            path: std::env::temp_dir(),
            cause: source,
        })?;
    let manifest = serde_json::json!({
        "name": "agentpack-mcp-tree",
        "version": "0.0.0",
        "private": true,
        "dependencies": { package: version },
    });
    let manifest_path = dir.path().join("package.json");
    fs_err::write(&manifest_path, manifest.to_string()).map_err(|source| TreeError::Io {
        action: "write",
        path: manifest_path.clone(),
        cause: source,
    })?;
    let output = Command::new(npm)
        .current_dir(dir.path())
        .args([
            "install",
            "--package-lock-only",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--registry",
            registry,
        ])
        .env("npm_config_registry", registry)
        .env("npm_config_update_notifier", "false")
        .env("npm_config_ignore_scripts", "true")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|source| TreeError::Spawn {
            npm: npm.to_path_buf(),
            cause: source,
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
        return Err(TreeError::Failed {
            package: package.to_owned(),
            version: version.to_owned(),
            stderr: tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
        });
    }
    let lock_path = dir.path().join("package-lock.json");
    let text = fs_err::read_to_string(&lock_path).map_err(|source| TreeError::Io {
        action: "read",
        path: lock_path.clone(),
        cause: source,
    })?;
    let value: Value = serde_json::from_str(&text).map_err(|e| TreeError::Unusable {
        package: package.to_owned(),
        version: version.to_owned(),
        message: e.to_string(),
    })?;
    entries_from_package_lock(&value).map_err(|message| TreeError::Unusable {
        package: package.to_owned(),
        version: version.to_owned(),
        message,
    })
}

/// Whether a tree path is a plain `node_modules/...` path (no `..`, no absolute path).
pub fn is_safe_tree_path(path: &str) -> bool {
    path.starts_with("node_modules/")
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\\'))
}

/// Reads the `packages` map of a lockfileVersion 2/3 package-lock.json.
pub fn entries_from_package_lock(value: &Value) -> Result<Vec<TreeEntry>, String> {
    let packages = value
        .get("packages")
        .and_then(Value::as_object)
        .ok_or("no `packages` map (npm 7 or later is needed)")?;
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut entries = Vec::new();
    for (path, entry) in packages {
        if path.is_empty() {
            continue;
        }
        if !is_safe_tree_path(path) {
            return Err(format!("`{path}` is not a node_modules path"));
        }
        if entry.get("link").and_then(Value::as_bool) == Some(true) {
            return Err(format!("`{path}` is a link, not a registry package"));
        }
        let version = entry
            .get("version")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("`{path}` has no version"))?;
        let integrity = entry
            .get("integrity")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("`{path}` has no integrity (not from a registry?)"))?;
        entries.push(TreeEntry {
            path: path.clone(),
            version: version.to_owned(),
            integrity: integrity.to_owned(),
            os: strings(entry.get("os")),
            cpu: strings(entry.get("cpu")),
            optional: entry.get("optional").and_then(Value::as_bool) == Some(true),
        });
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(entries)
}

/// The `sha256-npm-tree-v1:` digest of a tree (see the module docs).
pub fn tree_digest(entries: &[TreeEntry]) -> String {
    let mut sorted: Vec<&TreeEntry> = entries.iter().collect();
    sorted.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    let mut hasher = Sha256::new();
    for e in sorted {
        hasher.update(e.path.as_bytes());
        hasher.update(b"\0");
        hasher.update(e.version.as_bytes());
        hasher.update(b"\0");
        hasher.update(e.integrity.as_bytes());
        hasher.update(b"\n");
    }
    format!("{TREE_DIGEST_PREFIX}{}", hex::encode(hasher.finalize()))
}

/// The package name at a tree path (`node_modules/a/node_modules/@s/b` -> `@s/b`).
pub fn package_name_at(path: &str) -> &str {
    path.rsplit_once("node_modules/").map_or(path, |(_, n)| n)
}

/// Whether a tree entry applies on this platform (`os`/`cpu` in Node's spelling, `!x` negations).
pub fn applies_on(entry: &TreeEntry, os: &str, cpu: &str) -> bool {
    fn allowed(list: &[String], value: &str) -> bool {
        if list.is_empty() {
            return true;
        }
        if list.iter().any(|x| x == &format!("!{value}")) {
            return false;
        }
        let positives: Vec<&String> = list.iter().filter(|x| !x.starts_with('!')).collect();
        positives.is_empty() || positives.iter().any(|x| *x == value)
    }
    allowed(&entry.os, os) && allowed(&entry.cpu, cpu)
}

/// This machine's platform in Node's spelling (`linux`, `darwin`; `x64`, `arm64`).
pub fn node_platform() -> (&'static str, &'static str) {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    };
    let cpu = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        "x86" => "ia32",
        other => other,
    };
    (os, cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, version: &str) -> TreeEntry {
        TreeEntry {
            path: path.into(),
            version: version.into(),
            integrity: "sha512-x".into(),
            ..TreeEntry::default()
        }
    }

    #[test]
    fn digest_is_order_independent_and_documented() {
        let a = vec![
            entry("node_modules/b", "1.0.0"),
            entry("node_modules/a", "2.0.0"),
        ];
        let b = vec![
            entry("node_modules/a", "2.0.0"),
            entry("node_modules/b", "1.0.0"),
        ];
        assert_eq!(tree_digest(&a), tree_digest(&b));
        let expected = hex::encode(Sha256::digest(
            b"node_modules/a\x002.0.0\x00sha512-x\nnode_modules/b\x001.0.0\x00sha512-x\n",
        ));
        assert_eq!(tree_digest(&a), format!("sha256-npm-tree-v1:{expected}"));
    }

    #[test]
    fn paths_and_platforms() {
        assert!(is_safe_tree_path("node_modules/@s/p"));
        assert!(!is_safe_tree_path("node_modules/../x"));
        assert!(!is_safe_tree_path("/etc"));
        assert_eq!(package_name_at("node_modules/a/node_modules/@s/b"), "@s/b");
        let mut e = entry("node_modules/x", "1.0.0");
        e.os = vec!["darwin".into()];
        assert!(!applies_on(&e, "linux", "x64"));
        e.os = vec!["!win32".into()];
        assert!(applies_on(&e, "linux", "x64"));
    }
}
