//! The `pack.lock` model, its strict reader and its byte-stable writer (ADDENDUM "pack.lock
//! serialization").
//!
//! Owns: [`Lockfile`] and its records, [`LockError`], the `lockfile_version` rule, and the
//! canonical text layout. Reading accepts versions 2, 3 and 4 and the old key spelling
//! `lockfile-version`; unknown fields, the old `[[skills]]`/`[[plugins]]` layout, malformed digests
//! and inconsistent entries are refused. Never fetches, hashes trees or touches the store.
//!
//! # Canonical layout
//!
//! [`Lockfile::to_toml_string`] writes, and only writes, this shape:
//!
//! ```toml
//! lockfile_version = 3
//!
//! [meta]
//! name = "my-project"
//! version = "0.0.1"
//!
//! [config]
//! disabled_plugins = ["a", "b"]
//!
//! [[packages]]
//! module = "github.com/acme/skills/demo"
//! direct = true
//! kind = "skill"
//! url = "https://github.com/acme/skills/tree/<40 hex>/demo"
//! owner = "acme"
//! repo = "skills"
//! path = "demo"
//! commit = "<40 hex>"
//! cache_key = "<64 hex>"
//! content_hash = "sha256-tree-v1:<64 hex>"
//!
//! [[mcp_servers]]
//! name = "playwright"
//! ...
//!
//! [[mcp_servers.tree]]
//! path = "node_modules/playwright-core"
//! version = "1.0.0"
//! integrity = "sha512-..."
//! ```
//!
//! One `key = value` per line with single spaces around `=`; strings are TOML basic strings with
//! `"`, `\` and control characters escaped (`\b \t \n \f \r`, else `\uXXXX`); arrays are inline,
//! `["a", "b"]`; one blank line before every table header; the file ends with one newline. Optional
//! fields are left out when absent (`direct` when false, `path` when empty, `allow_unpinned` and
//! `optional` when false, `os`/`cpu` when empty). Packages are sorted by module, MCP servers by
//! name and tree records by path. Hence `parse(write(x)) == x` for a sorted `x` and
//! `write(parse(bytes)) == bytes` for every file this writer produced.
//!
//! Layout: this module holds the model, the errors and the file I/O; `read` is the strict reader,
//! `write` the canonical writer.

use std::path::{Path, PathBuf};

use crate::atomic::{write_if_changed, WriteError};
use crate::keys::{github_cache_key, oci_cache_key};
use crate::module_id::ModuleId;
use crate::validate::{CacheKey, CommitSha, ContentHash, IntegrityError};

/// The lock's file name.
pub const LOCK_FILE: &str = "pack.lock";

/// The lowest and highest `lockfile_version` this crate reads.
pub const SUPPORTED_VERSIONS: std::ops::RangeInclusive<i64> = 2..=4;

/// A whole `pack.lock`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Lockfile {
    /// `[meta]`.
    pub meta: LockMeta,
    /// `[config]` (written only when non-empty).
    pub config: LockConfig,
    /// `[[packages]]`, direct and transitive.
    pub packages: Vec<LockedPackage>,
    /// `[[mcp_servers]]`.
    pub mcp_servers: Vec<McpRecord>,
}

/// `[meta]`: the project's identity at lock time.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LockMeta {
    /// The manifest's `name`.
    pub name: String,
    /// The manifest's `version`.
    pub version: String,
}

/// `[config]`: bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LockConfig {
    /// Plugins the user disabled.
    pub disabled_plugins: Vec<String>,
}

impl LockConfig {
    /// True when nothing would be written.
    pub fn is_empty(&self) -> bool {
        self.disabled_plugins.is_empty()
    }
}

/// One `[[packages]]` entry.
///
/// A GitHub entry has a `url` starting with `https://github.com/` (see [`LockedPackage::github_url`]);
/// its `cache_key` must be [`github_cache_key`] of its owner, repo, path and commit whenever it has
/// a content hash. An `oci://` entry pins its manifest digest in its `url`
/// (`oci://<registry>/<repository>[:<tag>]@sha256:<64 hex>`, see [`LockedPackage::oci_url`]); its
/// `commit` is the first 40 hex digits of that digest, its `cache_key` is [`oci_cache_key`] of it,
/// `owner`, `repo` and `path` are empty, and it always has a content hash. Path and `local/` entries use any other `url` (builders write `path:<dir>` and
/// `local:<spec>`); their `commit` is the `dirhash40` of the copied files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedPackage {
    /// The module ID.
    pub module: ModuleId,
    /// True for a dependency of the project's own manifest.
    pub direct: bool,
    /// What the package is (`skill`, `plugin`, ...).
    pub kind: String,
    /// Where it came from.
    pub url: String,
    /// GitHub owner (may be empty for path and local packages).
    pub owner: String,
    /// GitHub repository (may be empty for path and local packages).
    pub repo: String,
    /// In-repo path, `""` for the repository root.
    pub path: String,
    /// The resolved commit.
    pub commit: CommitSha,
    /// The cache slot name.
    pub cache_key: CacheKey,
    /// `sha256-tree-v1` digest of the cached tree; `None` means the key is absent.
    pub content_hash: Option<ContentHash>,
    /// A display name, when the package has one.
    pub name: Option<String>,
}

impl LockedPackage {
    /// The canonical URL of a GitHub package:
    /// `https://github.com/<owner>/<repo>/tree/<commit>[/<path>]`.
    pub fn github_url(owner: &str, repo: &str, commit: &CommitSha, path: &str) -> String {
        let path = path.trim_matches('/');
        if path.is_empty() {
            format!("https://github.com/{owner}/{repo}/tree/{commit}")
        } else {
            format!("https://github.com/{owner}/{repo}/tree/{commit}/{path}")
        }
    }

    /// The `url` of an `oci://` package: `oci://<registry>/<repository>[:<tag>]@<manifest digest>`
    /// (the tag it was resolved from, when it came from a tag pin).
    pub fn oci_url(registry: &str, repository: &str, tag: Option<&str>, digest: &str) -> String {
        match tag {
            Some(tag) => format!("oci://{registry}/{repository}:{tag}@{digest}"),
            None => format!("oci://{registry}/{repository}@{digest}"),
        }
    }

    /// The `commit` of an `oci://` package: the first 40 hex digits of its manifest digest.
    pub fn oci_commit(digest: &str) -> Option<CommitSha> {
        let hex = digest.strip_prefix("sha256:")?;
        CommitSha::parse(hex.get(..40)?).ok()
    }

    /// What an `oci://` entry pins (its `url` read back); `None` for other entries or a `url`
    /// that does not name this module.
    pub fn oci_pin(&self) -> Option<OciPin> {
        let module = self.module.as_oci()?;
        let rest = self.url.strip_prefix("oci://")?;
        let (reference, digest) = rest.rsplit_once('@')?;
        let hex = digest.strip_prefix("sha256:")?;
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
        let base = format!("{}/{}", module.registry, module.repository);
        let tag = match reference.strip_prefix(base.as_str())? {
            "" => None,
            tag => Some(tag.strip_prefix(':')?.to_owned()).filter(|t| valid_oci_tag(t)),
        };
        if reference != base && tag.is_none() {
            return None;
        }
        Some(OciPin {
            registry: module.registry.to_owned(),
            repository: module.repository.to_owned(),
            tag,
            digest: digest.to_owned(),
        })
    }

    /// True for an `oci://` package.
    pub fn is_oci(&self) -> bool {
        self.module.is_oci()
    }

    /// True for a package fetched from GitHub (its `url` starts with `https://github.com/`).
    pub fn is_github(&self) -> bool {
        self.url.starts_with("https://github.com/")
    }

    /// The cache key this entry's owner, repo, path and commit give (GitHub entries only).
    pub fn expected_github_cache_key(&self) -> Option<CacheKey> {
        self.is_github()
            .then(|| github_cache_key(&self.owner, &self.repo, &self.path, &self.commit))
    }

    /// Checks that a GitHub entry with a content hash agrees with itself (docs: "An entry must
    /// agree with itself").
    pub fn check_consistent(&self) -> Result<(), IntegrityError> {
        if self.content_hash.is_none() {
            return Ok(());
        }
        if let Some(pin) = self.oci_pin() {
            let expected = oci_cache_key(&pin.registry, &pin.repository, &pin.digest);
            if expected != self.cache_key
                || LockedPackage::oci_commit(&pin.digest).as_ref() != Some(&self.commit)
            {
                return Err(IntegrityError::Inconsistent {
                    module: self.module.to_string(),
                    commit: self.commit.clone(),
                    cache_key: self.cache_key.clone(),
                    expected,
                });
            }
            return Ok(());
        }
        match self.expected_github_cache_key() {
            Some(expected) if expected != self.cache_key => Err(IntegrityError::Inconsistent {
                module: self.module.to_string(),
                commit: self.commit.clone(),
                cache_key: self.cache_key.clone(),
                expected,
            }),
            _ => Ok(()),
        }
    }
}

/// What an `oci://` lock entry pins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciPin {
    /// The registry host (with `:port`).
    pub registry: String,
    /// The repository.
    pub repository: String,
    /// The tag the digest was resolved from (`None` for a `{ digest = ... }` pin).
    pub tag: Option<String>,
    /// The manifest digest, `sha256:<64 hex>`.
    pub digest: String,
}

/// An OCI tag: `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}` (the distribution spec's grammar).
pub fn valid_oci_tag(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// An OCI manifest digest as the lock and the manifest write it: `sha256:<64 lowercase hex>`.
pub fn valid_oci_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// An MCP record's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum McpStatus {
    /// agentpack knows the exact artifact and stages it.
    Pinned,
    /// It could be pinned and is not.
    Unpinned,
    /// Nothing agentpack records can fix what runs.
    Unpinnable,
}

impl McpStatus {
    /// The text written in the lock.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pinned => "pinned",
            Self::Unpinned => "unpinned",
            Self::Unpinnable => "unpinnable",
        }
    }

    /// Parses `pinned`, `unpinned` or `unpinnable`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "pinned" => Some(Self::Pinned),
            "unpinned" => Some(Self::Unpinned),
            "unpinnable" => Some(Self::Unpinnable),
            _ => None,
        }
    }
}

/// One `[[mcp_servers]]` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpRecord {
    /// Server name.
    pub name: String,
    /// Where the definition came from (`manifest`, `plugin`, `.agents`).
    pub source: String,
    /// How it starts (`npm`, `pypi`, `docker`, ...).
    pub launcher: String,
    /// Pin status.
    pub status: McpStatus,
    /// `sha256:<64 hex>` of the definition (see [`crate::keys::mcp_definition_digest`]).
    pub definition: String,
    /// The spec as written (`@playwright/mcp@latest`).
    pub requested: Option<String>,
    /// The package name.
    pub package: Option<String>,
    /// The pinned version.
    pub version: Option<String>,
    /// The registry's integrity string.
    pub integrity: Option<String>,
    /// The registry URL.
    pub registry: Option<String>,
    /// The host of a remote server.
    pub host: Option<String>,
    /// The command.
    pub command: Option<String>,
    /// Recorded unpinned on purpose (`--allow-unpinned`); written only when true.
    pub allow_unpinned: bool,
    /// Why the server is unpinned or unpinnable.
    pub reason: Option<String>,
    /// The package's executable.
    pub bin: Option<String>,
    /// `sha256-npm-tree-v1:...` digest of `tree`.
    pub tree_digest: Option<String>,
    /// The locked npm dependency tree (`[[mcp_servers.tree]]`); non-empty makes the lock version 4.
    pub tree: Vec<TreeEntry>,
}

impl McpRecord {
    /// A record with the required fields and nothing else.
    pub fn new(
        name: &str,
        source: &str,
        launcher: &str,
        status: McpStatus,
        definition: &str,
    ) -> Self {
        Self {
            name: name.to_owned(),
            source: source.to_owned(),
            launcher: launcher.to_owned(),
            status,
            definition: definition.to_owned(),
            requested: None,
            package: None,
            version: None,
            integrity: None,
            registry: None,
            host: None,
            command: None,
            allow_unpinned: false,
            reason: None,
            bin: None,
            tree_digest: None,
            tree: Vec::new(),
        }
    }
}

/// One `[[mcp_servers.tree]]` record: a package npm would install.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TreeEntry {
    /// Path under the install root (`node_modules/x`).
    pub path: String,
    /// Exact version.
    pub version: String,
    /// Registry integrity (`sha512-...`).
    pub integrity: String,
    /// npm's `os` constraint (written only when non-empty).
    pub os: Vec<String>,
    /// npm's `cpu` constraint (written only when non-empty).
    pub cpu: Vec<String>,
    /// npm's `optional` flag (written only when true).
    pub optional: bool,
}

/// Why `pack.lock` could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The file could not be read.
    #[error("cannot read {}", path.display())]
    Io {
        /// The lock path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// Not valid TOML.
    #[error("{} is not valid TOML: {message}\n  fix  restore pack.lock from version control, or run `agentpack lock` to write a new one", path.display())]
    Syntax {
        /// The lock path.
        path: PathBuf,
        /// The TOML parser's message.
        message: String,
    },
    /// The pre-v2 `[[skills]]` / `[[plugins]]` layout.
    #[error("{} uses the old [[skills]] / [[plugins]] layout, which is no longer supported\n  fix  delete pack.lock and run `agentpack lock` to write a current one from agentpack.toml", path.display())]
    OldLayout {
        /// The lock path.
        path: PathBuf,
    },
    /// A version this crate does not read.
    #[error("unsupported lockfile_version {found} in {}: this agentpack reads versions 2 to 4\n  fix  upgrade agentpack if a newer version wrote it", path.display())]
    UnsupportedVersion {
        /// The lock path.
        path: PathBuf,
        /// The value found.
        found: String,
    },
    /// Both key spellings with different values.
    #[error("{} has both lockfile_version = {snake} and lockfile-version = {kebab}\n  fix  keep only lockfile_version, or restore pack.lock from version control", path.display())]
    VersionKeysDisagree {
        /// The lock path.
        path: PathBuf,
        /// `lockfile_version`.
        snake: i64,
        /// `lockfile-version`.
        kebab: i64,
    },
    /// A field is missing, unknown, duplicated or malformed.
    #[error("invalid {} at `{key}`: {message}\n  fix  restore pack.lock from version control, or run `agentpack lock` to write a new one", path.display())]
    Invalid {
        /// The lock path.
        path: PathBuf,
        /// Where (`packages[2].cache_key (github.com/acme/x)`).
        key: String,
        /// What is wrong.
        message: String,
    },
    /// An invalid content hash or an inconsistent entry.
    #[error(transparent)]
    Integrity(#[from] IntegrityError),
}

impl LockError {
    /// Whether `agentpack lock` may replace a lock that failed with this error (with a warning
    /// that it did): true for a lock it cannot parse (syntax, unknown or malformed fields, the old
    /// layout); false for an invalid content hash or an inconsistent entry (no command rewrites
    /// those), for a newer `lockfile_version`, and for I/O errors.
    pub fn is_replaceable_by_lock(&self) -> bool {
        matches!(
            self,
            Self::Syntax { .. }
                | Self::Invalid { .. }
                | Self::OldLayout { .. }
                | Self::VersionKeysDisagree { .. }
        )
    }
}

impl Lockfile {
    /// An empty lock for a project, as `init` writes it (version 2).
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            meta: LockMeta {
                name: name.into(),
                version: version.into(),
            },
            ..Self::default()
        }
    }

    /// The version this lock is written as: 4 when any MCP server has a locked tree, 3 when any
    /// package has a content hash or there is any MCP record, 2 otherwise.
    pub fn lockfile_version(&self) -> u32 {
        if self.mcp_servers.iter().any(|s| !s.tree.is_empty()) {
            4
        } else if !self.mcp_servers.is_empty()
            || self.packages.iter().any(|p| p.content_hash.is_some())
        {
            3
        } else {
            2
        }
    }

    /// The package with this module ID.
    pub fn package(&self, module: &str) -> Option<&LockedPackage> {
        self.packages.iter().find(|p| p.module.as_str() == module)
    }

    /// The MCP record with this name.
    pub fn mcp_server(&self, name: &str) -> Option<&McpRecord> {
        self.mcp_servers.iter().find(|s| s.name == name)
    }

    /// Packages without a content hash (unverified; the docs' warning counts them).
    pub fn unverified_packages(&self) -> impl Iterator<Item = &LockedPackage> {
        self.packages.iter().filter(|p| p.content_hash.is_none())
    }

    /// Sorts packages by module, MCP servers by name and tree records by path: the order
    /// [`Lockfile::to_toml_string`] writes.
    pub fn sort(&mut self) {
        self.packages.sort_by(|a, b| a.module.cmp(&b.module));
        self.mcp_servers.sort_by(|a, b| a.name.cmp(&b.name));
        for server in &mut self.mcp_servers {
            server.tree.sort_by(|a, b| a.path.cmp(&b.path));
        }
    }

    /// Every integrity check that runs on load: each GitHub entry with a content hash must have
    /// the cache key of its commit. (Content hash syntax is checked while parsing.)
    pub fn check_integrity(&self) -> Result<(), IntegrityError> {
        self.packages
            .iter()
            .try_for_each(LockedPackage::check_consistent)
    }

    /// Reads, parses and validates the lock at `path`.
    pub fn load(path: &Path) -> Result<Self, LockError> {
        let text = crate::atomic::read_regular_to_string(path).map_err(|source| LockError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Like [`Lockfile::load`], but `Ok(None)` when the file does not exist.
    pub fn load_if_exists(path: &Path) -> Result<Option<Self>, LockError> {
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            _ => Self::load(path).map(Some),
        }
    }

    /// Parses and validates lock text; `path` is used in messages only.
    pub fn parse(text: &str, path: &Path) -> Result<Self, LockError> {
        Reader { path }.read(text)
    }

    /// Writes the lock atomically unless the file already holds these exact bytes. Returns
    /// whether it wrote.
    pub fn save(&self, path: &Path) -> Result<bool, LockError> {
        Ok(write_if_changed(path, self.to_toml_string().as_bytes())?)
    }

    /// Writes the lock unless the file at `path` already records the same thing (what `sync` and
    /// the launchers do): a file that differs only in spacing, order or the old `lockfile-version`
    /// spelling is left as it is. Returns whether it wrote.
    pub fn save_unless_unchanged(&self, path: &Path) -> Result<bool, LockError> {
        if let Ok(Some(existing)) = Self::load_if_exists(path) {
            if existing.records_same_as(self) {
                return Ok(false);
            }
        }
        self.save(path)
    }

    /// Whether two locks record the same meta, config, packages and MCP servers, whatever order
    /// they list them in.
    pub fn records_same_as(&self, other: &Lockfile) -> bool {
        let mut mine = self.clone();
        let mut theirs = other.clone();
        mine.sort();
        theirs.sort();
        mine == theirs
    }
}

mod read;
#[cfg(test)]
mod tests;
mod write;

use read::Reader;
pub(crate) use write::toml_basic_string;
