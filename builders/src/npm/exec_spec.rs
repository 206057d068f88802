//! The `mcp-exec` spec file: what a tree-locked server runs (package, version, bin, registry,
//! tree digest and tree), as JSON.
//!
//! It holds nothing secret (no env, headers or arguments), so it is published as a store path
//! file and shared by every project that locks the same tree. It must never carry a server's
//! environment.

use std::path::{Path, PathBuf};

use agentpack_lockfile::{McpRecord, McpStatus, TreeEntry};
use serde::{Deserialize, Serialize};

use super::tree::{is_safe_tree_path, tree_digest};

/// The spec format version.
pub const EXEC_SPEC_FORMAT: u32 = 1;
/// The file name of the spec inside its store path.
pub const EXEC_SPEC_FILE: &str = "mcp-exec.json";

/// One package of the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecTreeEntry {
    /// `node_modules/...` path.
    pub path: String,
    /// Exact version.
    pub version: String,
    /// SRI integrity.
    pub integrity: String,
    /// npm's `os` constraint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub os: Vec<String>,
    /// npm's `cpu` constraint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu: Vec<String>,
    /// npm's `optional` flag.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

impl From<&TreeEntry> for ExecTreeEntry {
    fn from(e: &TreeEntry) -> Self {
        Self {
            path: e.path.clone(),
            version: e.version.clone(),
            integrity: e.integrity.clone(),
            os: e.os.clone(),
            cpu: e.cpu.clone(),
            optional: e.optional,
        }
    }
}

impl ExecTreeEntry {
    /// Back to the lock's type.
    pub fn to_tree_entry(&self) -> TreeEntry {
        TreeEntry {
            path: self.path.clone(),
            version: self.version.clone(),
            integrity: self.integrity.clone(),
            os: self.os.clone(),
            cpu: self.cpu.clone(),
            optional: self.optional,
        }
    }
}

/// The spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecSpec {
    /// [`EXEC_SPEC_FORMAT`].
    pub format: u32,
    /// The server's package.
    pub package: String,
    /// Its exact version.
    pub version: String,
    /// Its executable, relative to the package directory.
    pub bin: String,
    /// The registry tarballs are downloaded from.
    pub registry: String,
    /// `sha256-npm-tree-v1:...`.
    pub tree_digest: String,
    /// Every package of the tree.
    pub tree: Vec<ExecTreeEntry>,
}

/// Why a spec cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ExecSpecError {
    /// The file could not be read.
    #[error("cannot read the mcp-exec spec {}: {cause}\n  fix  run `agentpack sync` to stage it again", path.display())]
    Io {
        /// The spec path.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// The file is not a spec, or its tree does not match its digest.
    #[error("the mcp-exec spec {} is not usable: {message}\n  fix  run `agentpack sync` to stage it again", path.display())]
    Invalid {
        /// The spec path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl ExecSpec {
    /// The spec of a pinned record with a locked tree and a bin; `None` otherwise.
    pub fn from_record(record: &McpRecord) -> Option<Self> {
        if record.status != McpStatus::Pinned || record.tree.is_empty() {
            return None;
        }
        Some(Self {
            format: EXEC_SPEC_FORMAT,
            package: record.package.clone()?,
            version: record.version.clone()?,
            bin: record.bin.clone()?,
            registry: record.registry.clone()?,
            tree_digest: record.tree_digest.clone()?,
            tree: record.tree.iter().map(ExecTreeEntry::from).collect(),
        })
    }

    /// The canonical bytes (pretty JSON, newline-terminated).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// The package's directory in the tree (`node_modules/<package>`).
    pub fn package_dir(&self) -> String {
        format!("node_modules/{}", self.package)
    }

    /// Checks the format, the paths, the bin and that the tree matches its digest.
    pub fn validate(&self) -> Result<(), String> {
        if self.format != EXEC_SPEC_FORMAT {
            return Err(format!("unknown format {}", self.format));
        }
        if let Some(bad) = self.tree.iter().find(|e| !is_safe_tree_path(&e.path)) {
            return Err(format!(
                "tree path `{}` is not a node_modules path",
                bad.path
            ));
        }
        if !self.tree.iter().any(|e| e.path == self.package_dir()) {
            return Err(format!("the tree does not contain {}", self.package_dir()));
        }
        if self.bin.split('/').any(|c| c == ".." || c.is_empty()) || self.bin.starts_with('/') {
            return Err(format!("bin `{}` leaves the package", self.bin));
        }
        let entries: Vec<TreeEntry> = self.tree.iter().map(ExecTreeEntry::to_tree_entry).collect();
        let digest = tree_digest(&entries);
        if digest != self.tree_digest {
            return Err(format!(
                "the tree digests to {digest}, not the recorded {}",
                self.tree_digest
            ));
        }
        Ok(())
    }

    /// Reads and validates a spec file.
    pub fn load(path: &Path) -> Result<Self, ExecSpecError> {
        let bytes = fs_err::read(path).map_err(|source| ExecSpecError::Io {
            path: path.to_path_buf(),
            cause: source,
        })?;
        let spec: ExecSpec =
            serde_json::from_slice(&bytes).map_err(|e| ExecSpecError::Invalid {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        spec.validate().map_err(|message| ExecSpecError::Invalid {
            path: path.to_path_buf(),
            message,
        })?;
        Ok(spec)
    }
}
