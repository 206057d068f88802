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

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use toml::{Table, Value};

use crate::atomic::{write_if_changed, WriteError};
use crate::keys::github_cache_key;
use crate::manifest::key_segment;
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
/// a content hash. Path and `local/` entries use any other `url` (builders write `path:<dir>` and
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
    #[error("cannot read {}: {source}", path.display())]
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

    /// The canonical text (see the module docs).
    pub fn to_toml_string(&self) -> String {
        let mut w = Writer::default();
        w.int("lockfile_version", i64::from(self.lockfile_version()));
        w.header("[meta]");
        w.string("name", &self.meta.name);
        w.string("version", &self.meta.version);
        if !self.config.is_empty() {
            w.header("[config]");
            w.array("disabled_plugins", &self.config.disabled_plugins);
        }
        let mut packages: Vec<&LockedPackage> = self.packages.iter().collect();
        packages.sort_by(|a, b| a.module.cmp(&b.module));
        for p in packages {
            w.header("[[packages]]");
            w.string("module", p.module.as_str());
            if p.direct {
                w.line("direct = true");
            }
            w.string("kind", &p.kind);
            w.string("url", &p.url);
            w.string("owner", &p.owner);
            w.string("repo", &p.repo);
            if !p.path.is_empty() {
                w.string("path", &p.path);
            }
            w.string("commit", p.commit.as_str());
            w.string("cache_key", p.cache_key.as_str());
            w.opt(
                "content_hash",
                p.content_hash.as_ref().map(ContentHash::as_str),
            );
            w.opt("name", p.name.as_deref());
        }
        let mut servers: Vec<&McpRecord> = self.mcp_servers.iter().collect();
        servers.sort_by(|a, b| a.name.cmp(&b.name));
        for s in servers {
            w.header("[[mcp_servers]]");
            w.string("name", &s.name);
            w.string("source", &s.source);
            w.string("launcher", &s.launcher);
            w.string("status", s.status.as_str());
            w.string("definition", &s.definition);
            w.opt("requested", s.requested.as_deref());
            w.opt("package", s.package.as_deref());
            w.opt("version", s.version.as_deref());
            w.opt("integrity", s.integrity.as_deref());
            w.opt("registry", s.registry.as_deref());
            w.opt("host", s.host.as_deref());
            w.opt("command", s.command.as_deref());
            if s.allow_unpinned {
                w.line("allow_unpinned = true");
            }
            w.opt("reason", s.reason.as_deref());
            w.opt("bin", s.bin.as_deref());
            w.opt("tree_digest", s.tree_digest.as_deref());
            let mut tree: Vec<&TreeEntry> = s.tree.iter().collect();
            tree.sort_by(|a, b| a.path.cmp(&b.path));
            for t in tree {
                w.header("[[mcp_servers.tree]]");
                w.string("path", &t.path);
                w.string("version", &t.version);
                w.string("integrity", &t.integrity);
                if !t.os.is_empty() {
                    w.array("os", &t.os);
                }
                if !t.cpu.is_empty() {
                    w.array("cpu", &t.cpu);
                }
                if t.optional {
                    w.line("optional = true");
                }
            }
        }
        w.out
    }
}

/// Quotes `s` as a TOML basic string, escaping `"`, `\` and control characters.
pub(crate) fn toml_basic_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() && (c as u32) < 0x80 => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[derive(Default)]
struct Writer {
    out: String,
}

impl Writer {
    fn line(&mut self, text: &str) {
        self.out.push_str(text);
        self.out.push('\n');
    }
    fn header(&mut self, header: &str) {
        self.out.push('\n');
        self.line(header);
    }
    fn int(&mut self, key: &str, value: i64) {
        let _ = writeln!(self.out, "{key} = {value}");
    }
    fn string(&mut self, key: &str, value: &str) {
        let _ = writeln!(self.out, "{key} = {}", toml_basic_string(value));
    }
    fn opt(&mut self, key: &str, value: Option<&str>) {
        if let Some(v) = value {
            self.string(key, v);
        }
    }
    fn array(&mut self, key: &str, values: &[String]) {
        let items: Vec<String> = values.iter().map(|v| toml_basic_string(v)).collect();
        let _ = writeln!(self.out, "{key} = [{}]", items.join(", "));
    }
}

struct Reader<'a> {
    path: &'a Path,
}

/// Removes and returns fields of one table, and reports what is left as unknown.
struct Fields<'t> {
    table: &'t Table,
    used: Vec<String>,
    at: String,
}

impl<'a> Reader<'a> {
    fn invalid(&self, key: &str, message: impl Into<String>) -> LockError {
        LockError::Invalid {
            path: self.path.to_path_buf(),
            key: key.to_owned(),
            message: message.into(),
        }
    }

    fn read(&self, text: &str) -> Result<Lockfile, LockError> {
        let table: Table = text
            .parse()
            .map_err(|e: toml::de::Error| LockError::Syntax {
                path: self.path.to_path_buf(),
                message: e.to_string().trim_end().to_owned(),
            })?;
        if table.contains_key("skills") || table.contains_key("plugins") {
            return Err(LockError::OldLayout {
                path: self.path.to_path_buf(),
            });
        }
        let version_of = |key: &str| -> Result<Option<i64>, LockError> {
            match table.get(key) {
                None => Ok(None),
                Some(Value::Integer(n)) => Ok(Some(*n)),
                Some(other) => Err(LockError::UnsupportedVersion {
                    path: self.path.to_path_buf(),
                    found: other.to_string(),
                }),
            }
        };
        let snake = version_of("lockfile_version")?;
        let kebab = version_of("lockfile-version")?;
        let version = match (snake, kebab) {
            (Some(s), Some(k)) if s != k => {
                return Err(LockError::VersionKeysDisagree {
                    path: self.path.to_path_buf(),
                    snake: s,
                    kebab: k,
                })
            }
            (Some(v), _) | (None, Some(v)) => v,
            (None, None) => {
                return Err(self.invalid(
                    "lockfile_version",
                    "missing; a pack.lock starts with `lockfile_version = 3`",
                ))
            }
        };
        if !SUPPORTED_VERSIONS.contains(&version) {
            return Err(LockError::UnsupportedVersion {
                path: self.path.to_path_buf(),
                found: version.to_string(),
            });
        }

        let mut top = Fields::new(&table, String::new());
        top.take("lockfile_version");
        top.take("lockfile-version");
        let mut lock = Lockfile::default();
        let meta = top
            .take("meta")
            .ok_or_else(|| self.invalid("meta", "missing [meta] table with name and version"))?;
        let mut meta = self.fields(meta, "meta")?;
        lock.meta.name = self.req_string(&mut meta, "name")?;
        lock.meta.version = self.req_string(&mut meta, "version")?;
        self.finish(&meta, "[meta] holds name and version")?;

        if let Some(config) = top.take("config") {
            let mut config = self.fields(config, "config")?;
            if let Some(v) = config.take("disabled_plugins") {
                lock.config.disabled_plugins = self.strings(v, "config.disabled_plugins")?;
            }
            self.finish(&config, "[config] holds disabled_plugins")?;
        }

        if let Some(packages) = top.take("packages") {
            for (i, item) in self
                .array_of_tables(packages, "packages")?
                .iter()
                .enumerate()
            {
                let package = self.package(item, i)?;
                if lock.package(package.module.as_str()).is_some() {
                    return Err(self.invalid(
                        &format!("packages[{i}]"),
                        format!("a second entry for {}", package.module),
                    ));
                }
                lock.packages.push(package);
            }
        }
        if let Some(servers) = top.take("mcp_servers") {
            for (i, item) in self
                .array_of_tables(servers, "mcp_servers")?
                .iter()
                .enumerate()
            {
                let server = self.mcp(item, i)?;
                if lock.mcp_server(&server.name).is_some() {
                    return Err(self.invalid(
                        &format!("mcp_servers[{i}]"),
                        format!("a second record for server {:?}", server.name),
                    ));
                }
                lock.mcp_servers.push(server);
            }
        }
        self.finish(
            &top,
            "a pack.lock holds lockfile_version, [meta], [config], [[packages]] and [[mcp_servers]]; upgrade agentpack if a newer version wrote it",
        )?;
        lock.check_integrity()?;
        Ok(lock)
    }

    fn fields<'t>(&self, value: &'t Value, at: &str) -> Result<Fields<'t>, LockError> {
        match value {
            Value::Table(t) => Ok(Fields::new(t, at.to_owned())),
            other => Err(self.invalid(at, format!("expected a table, found {}", other.type_str()))),
        }
    }

    fn array_of_tables<'t>(&self, value: &'t Value, at: &str) -> Result<&'t Vec<Value>, LockError> {
        match value {
            Value::Array(items) if items.iter().all(Value::is_table) => Ok(items),
            other => Err(self.invalid(
                at,
                format!(
                    "expected an array of tables ([[{at}]]), found {}",
                    other.type_str()
                ),
            )),
        }
    }

    fn finish(&self, fields: &Fields<'_>, allowed: &str) -> Result<(), LockError> {
        match fields.unknown() {
            Some(key) => {
                let at = if fields.at.is_empty() {
                    key_segment(key)
                } else {
                    format!("{}.{}", fields.at, key_segment(key))
                };
                Err(self.invalid(&at, format!("unknown field `{key}`; {allowed}")))
            }
            None => Ok(()),
        }
    }

    fn string(&self, value: &Value, at: &str) -> Result<String, LockError> {
        value.as_str().map(str::to_owned).ok_or_else(|| {
            self.invalid(at, format!("expected a string, found {}", value.type_str()))
        })
    }

    fn strings(&self, value: &Value, at: &str) -> Result<Vec<String>, LockError> {
        match value {
            Value::Array(items) => items.iter().map(|v| self.string(v, at)).collect(),
            other => Err(self.invalid(
                at,
                format!("expected an array of strings, found {}", other.type_str()),
            )),
        }
    }

    fn boolean(&self, value: &Value, at: &str) -> Result<bool, LockError> {
        value.as_bool().ok_or_else(|| {
            self.invalid(
                at,
                format!("expected true or false, found {}", value.type_str()),
            )
        })
    }

    fn req_string(&self, fields: &mut Fields<'_>, key: &str) -> Result<String, LockError> {
        let at = fields.key(key);
        match fields.take(key) {
            Some(v) => self.string(v, &at),
            None => Err(self.invalid(&at, "missing required field")),
        }
    }

    fn opt_string(&self, fields: &mut Fields<'_>, key: &str) -> Result<Option<String>, LockError> {
        let at = fields.key(key);
        fields.take(key).map(|v| self.string(v, &at)).transpose()
    }

    fn package(&self, item: &Value, i: usize) -> Result<LockedPackage, LockError> {
        let mut f = self.fields(item, &format!("packages[{i}]"))?;
        let module_text = self.req_string(&mut f, "module")?;
        let module = ModuleId::parse(&module_text)
            .map_err(|e| self.invalid(&f.key("module"), e.to_string()))?;
        f.at = format!("packages[{i}] ({module})");
        let direct = match f.take("direct") {
            Some(v) => self.boolean(v, &f.key("direct"))?,
            None => false,
        };
        let kind = self.req_string(&mut f, "kind")?;
        let url = self.req_string(&mut f, "url")?;
        let owner = self.req_string(&mut f, "owner")?;
        let repo = self.req_string(&mut f, "repo")?;
        let path = self.opt_string(&mut f, "path")?.unwrap_or_default();
        let commit_text = self.req_string(&mut f, "commit")?;
        let commit = CommitSha::parse(&commit_text)
            .map_err(|e| self.invalid(&f.key("commit"), e.to_string()))?;
        let key_text = self.req_string(&mut f, "cache_key")?;
        let cache_key = CacheKey::parse(&key_text)
            .map_err(|e| self.invalid(&f.key("cache_key"), e.to_string()))?;
        let content_hash = match f.take("content_hash") {
            None => None,
            Some(v) => {
                let found = match v.as_str() {
                    Some(s) => s.to_owned(),
                    None => v.to_string(),
                };
                Some(ContentHash::parse(&found).map_err(|_| {
                    IntegrityError::InvalidContentHash {
                        module: module.to_string(),
                        found,
                        lockfile: self.path.to_path_buf(),
                    }
                })?)
            }
        };
        let name = self.opt_string(&mut f, "name")?;
        self.finish(
            &f,
            "a package holds module, direct, kind, url, owner, repo, path, commit, cache_key, content_hash and name; upgrade agentpack if a newer version wrote it",
        )?;
        Ok(LockedPackage {
            module,
            direct,
            kind,
            url,
            owner,
            repo,
            path,
            commit,
            cache_key,
            content_hash,
            name,
        })
    }

    fn mcp(&self, item: &Value, i: usize) -> Result<McpRecord, LockError> {
        let mut f = self.fields(item, &format!("mcp_servers[{i}]"))?;
        let name = self.req_string(&mut f, "name")?;
        f.at = format!("mcp_servers[{i}] ({name})");
        let source = self.req_string(&mut f, "source")?;
        let launcher = self.req_string(&mut f, "launcher")?;
        let status_text = self.req_string(&mut f, "status")?;
        let status = McpStatus::parse(&status_text).ok_or_else(|| {
            self.invalid(
                &f.key("status"),
                format!("{status_text:?} is not a status; expected pinned, unpinned or unpinnable"),
            )
        })?;
        let definition = self.req_string(&mut f, "definition")?;
        let def_ok = definition.strip_prefix("sha256:").is_some_and(|h| {
            h.len() == 64
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if !def_ok {
            return Err(self.invalid(
                &f.key("definition"),
                format!("{definition:?} is not sha256:<64 lowercase hex digits>"),
            ));
        }
        let mut record = McpRecord::new(&name, &source, &launcher, status, &definition);
        record.requested = self.opt_string(&mut f, "requested")?;
        record.package = self.opt_string(&mut f, "package")?;
        record.version = self.opt_string(&mut f, "version")?;
        record.integrity = self.opt_string(&mut f, "integrity")?;
        record.registry = self.opt_string(&mut f, "registry")?;
        record.host = self.opt_string(&mut f, "host")?;
        record.command = self.opt_string(&mut f, "command")?;
        if let Some(v) = f.take("allow_unpinned") {
            record.allow_unpinned = self.boolean(v, &f.key("allow_unpinned"))?;
        }
        record.reason = self.opt_string(&mut f, "reason")?;
        record.bin = self.opt_string(&mut f, "bin")?;
        record.tree_digest = self.opt_string(&mut f, "tree_digest")?;
        if let Some(tree) = f.take("tree") {
            let at = f.key("tree");
            for (j, entry) in self.array_of_tables(tree, &at)?.iter().enumerate() {
                let mut t = self.fields(entry, &format!("{at}[{j}]"))?;
                let mut rec = TreeEntry {
                    path: self.req_string(&mut t, "path")?,
                    version: self.req_string(&mut t, "version")?,
                    integrity: self.req_string(&mut t, "integrity")?,
                    ..TreeEntry::default()
                };
                if let Some(v) = t.take("os") {
                    rec.os = self.strings(v, &t.key("os"))?;
                }
                if let Some(v) = t.take("cpu") {
                    rec.cpu = self.strings(v, &t.key("cpu"))?;
                }
                if let Some(v) = t.take("optional") {
                    rec.optional = self.boolean(v, &t.key("optional"))?;
                }
                self.finish(
                    &t,
                    "a tree record holds path, version, integrity, os, cpu and optional",
                )?;
                record.tree.push(rec);
            }
        }
        self.finish(
            &f,
            "an MCP record holds name, source, launcher, status, definition, requested, package, version, integrity, registry, host, command, allow_unpinned, reason, bin, tree_digest and [[mcp_servers.tree]]; upgrade agentpack if a newer version wrote it",
        )?;
        Ok(record)
    }
}

impl<'t> Fields<'t> {
    fn new(table: &'t Table, at: String) -> Self {
        Self {
            table,
            used: Vec::new(),
            at,
        }
    }

    fn take(&mut self, key: &str) -> Option<&'t Value> {
        let v = self.table.get(key)?;
        self.used.push(key.to_owned());
        Some(v)
    }

    fn key(&self, key: &str) -> String {
        if self.at.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.at)
        }
    }

    fn unknown(&self) -> Option<&'t str> {
        self.table
            .keys()
            .map(String::as_str)
            .find(|k| !self.used.iter().any(|u| u == k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_string_escapes() {
        assert_eq!(toml_basic_string("plain"), "\"plain\"");
        assert_eq!(toml_basic_string("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(toml_basic_string("\t\n\r\u{8}\u{c}"), r#""\t\n\r\b\f""#);
        assert_eq!(
            toml_basic_string("\u{0}\u{1f}\u{7f}"),
            r#""\u0000\u001F\u007F""#
        );
        assert_eq!(toml_basic_string("é\u{85}🦀"), "\"é\u{85}🦀\"");
    }

    #[test]
    fn github_url_shape() {
        let c = CommitSha::parse("8fc7add0e2b00906426adfb1ab9bf0f0bb40de2d").unwrap();
        assert_eq!(
            LockedPackage::github_url("acme", "x", &c, "/a/b/"),
            "https://github.com/acme/x/tree/8fc7add0e2b00906426adfb1ab9bf0f0bb40de2d/a/b"
        );
        assert_eq!(
            LockedPackage::github_url("acme", "x", &c, ""),
            "https://github.com/acme/x/tree/8fc7add0e2b00906426adfb1ab9bf0f0bb40de2d"
        );
    }

    #[test]
    fn status_round_trips() {
        for s in [
            McpStatus::Pinned,
            McpStatus::Unpinned,
            McpStatus::Unpinnable,
        ] {
            assert_eq!(McpStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(McpStatus::parse("Pinned"), None);
    }

    #[test]
    fn a_lock_recording_the_same_is_not_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let spaced = "lockfile-version = 2\n\n\n[meta]\nname    = \"demo\"\nversion = \"0.1.0\"\n";
        std::fs::write(&path, spaced).unwrap();
        let lock = Lockfile::new("demo", "0.1.0");
        assert!(!lock.save_unless_unchanged(&path).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), spaced);
        let renamed = Lockfile::new("demo-2", "0.1.0");
        assert!(renamed.save_unless_unchanged(&path).unwrap());
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .starts_with("lockfile_version = 2\n"));
    }
}
