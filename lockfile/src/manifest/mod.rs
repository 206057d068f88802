//! The `agentpack.toml` model and its parser.
//!
//! Owns: [`Manifest`] (top-level `name` and `version`, `[dependencies]`, `[modes.<name>]`,
//! `[mcp.servers.<name>]`), and [`ManifestError`], whose messages name the file, the key and what
//! to do. The parser is strict: unknown keys, a `[package]` table, conflicting pins and malformed
//! module IDs or selectors are refused. Never edits the file (see [`crate::edit`]) and never
//! resolves a pin (builders do, with [`crate::version`]).
//!
//! Layout: this module holds the model and the top-level reader; `dependencies` parses
//! `[dependencies]`, `mcp` parses `[mcp]`.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use toml::{Table, Value};

use crate::keys::{mcp_definition_digest, DefinitionInput};
use crate::module_id::ModuleId;
use crate::selector::{SelectionTarget, Selector};
use crate::validate::CommitSha;
use crate::version::{classify_ref, RefKind, VersionConstraint};

mod dependencies;
mod mcp;

use dependencies::parse_dependencies;
use mcp::parse_mcp;

/// The manifest's file name.
pub const MANIFEST_FILE: &str = "agentpack.toml";

/// The reserved mode that applies when `--mode` is omitted.
pub const DEFAULT_MODE: &str = "default";

/// A parsed `agentpack.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Project name (lock metadata and diagnostics).
    pub name: String,
    /// Project version, a SemVer string.
    pub version: String,
    /// Direct dependencies, in file order.
    pub dependencies: IndexMap<ModuleId, Dependency>,
    /// Declared modes, in file order. `default` may be absent; see [`Manifest::mode`].
    pub modes: IndexMap<String, Mode>,
    /// `[mcp.servers.<name>]`, in file order.
    pub mcp_servers: IndexMap<String, McpServer>,
}

/// One `[dependencies]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dependency {
    /// Fetched from GitHub (or the `local/` mirror / alias map for a single-segment name).
    Remote(Pin),
    /// `{ path = "..." }`: read from disk, relative to the project root; never fetched.
    Path(String),
}

/// What a remote dependency asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pin {
    /// `{}`: nothing pinned; the resolver picks (highest SemVer tag, else the default branch).
    Unpinned,
    /// A SemVer constraint: short string `"^1.2"` or `{ version = "^1.2" }`.
    Version(VersionConstraint),
    /// `{ branch = "main" }`.
    Branch(String),
    /// `{ tag = "v2.1.0" }`.
    Tag(String),
    /// `{ commit = "<40 hex>" }`, or a short string of 40 hex digits.
    Commit(CommitSha),
    /// A short string that is neither a constraint nor a commit: a branch or tag name.
    Ref(String),
    /// `{ digest = "sha256:<64 hex>" }`: an `oci://` package's manifest digest.
    Digest(String),
}

impl Pin {
    /// The pin a short string (or an `add` spec's `@ref`) means: a constraint, a 40-hex commit,
    /// or a branch/tag name (see [`classify_ref`]).
    pub fn from_short(text: &str) -> Result<Self, crate::version::VersionError> {
        Ok(match classify_ref(text)? {
            RefKind::Constraint(c) => Self::Version(c),
            RefKind::Commit(c) => Self::Commit(c),
            RefKind::Name(n) => Self::Ref(n),
        })
    }

    /// The pin for an optional `@ref`: [`Pin::Unpinned`] when there is none.
    pub fn from_reference(reference: Option<&str>) -> Result<Self, crate::version::VersionError> {
        reference.map_or(Ok(Self::Unpinned), Self::from_short)
    }
}

/// A mode's starting point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Base {
    /// `base = "all"` (also when `base` is omitted): start with everything selected.
    #[default]
    All,
    /// `base = "none"`: start with nothing selected.
    None,
}

impl Base {
    /// The text written in the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::None => "none",
        }
    }

    /// Parses `all` or `none`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "all" => Some(Self::All),
            "none" => Some(Self::None),
            _ => None,
        }
    }
}

/// One `[modes.<name>]` table: start from `base`, then apply `enable` and `disable`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mode {
    /// The starting point.
    pub base: Base,
    /// Selectors switched on.
    pub enable: Vec<Selector>,
    /// Selectors switched off.
    pub disable: Vec<Selector>,
}

impl Mode {
    /// Whether this mode stages `target`. The most specific matching selector decides
    /// (`package-path:` deeper than shallower, both over `package:`; `mcp:` over `package:`); on
    /// a tie `disable` wins; when no selector matches, `base` decides.
    pub fn selects(&self, target: &SelectionTarget<'_>) -> bool {
        let best = |list: &[Selector]| list.iter().filter_map(|s| s.specificity(target)).max();
        match (best(&self.enable), best(&self.disable)) {
            (None, None) => self.base == Base::All,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(on), Some(off)) => on > off,
        }
    }
}

/// One `[mcp.servers.<name>]` definition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct McpServer {
    /// `type` (`stdio`, `http`, `sse`, ...).
    pub server_type: Option<String>,
    /// `command`.
    pub command: Option<String>,
    /// `args`.
    pub args: Vec<String>,
    /// `env` (never written to pack.lock).
    pub env: IndexMap<String, String>,
    /// `url`.
    pub url: Option<String>,
    /// `disabled`.
    pub disabled: bool,
    /// `headers` (never written to pack.lock).
    pub headers: IndexMap<String, String>,
    /// `cwd`.
    pub cwd: Option<String>,
    /// `[mcp.servers.<name>.oauth]` (never written to pack.lock).
    pub oauth: Option<McpOAuth>,
}

/// `[mcp.servers.<name>.oauth]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct McpOAuth {
    /// `client_id`.
    pub client_id: Option<String>,
    /// `client_secret`.
    pub client_secret: Option<String>,
    /// `callback_port`.
    pub callback_port: Option<u16>,
    /// `scopes`.
    pub scopes: Vec<String>,
    /// `metadata_url`.
    pub metadata_url: Option<String>,
}

impl McpServer {
    /// [`crate::keys::mcp_definition_digest`] over this server as written, credentials included:
    /// the digest older versions recorded. pack.lock records the digest of the credential-free
    /// form (`agentpack_builders::mcp_lock::definition_digest`, which knows the credential rule);
    /// compare records with `agentpack_builders::mcp_lock::definition_matches`, not with this.
    pub fn definition_digest(&self) -> String {
        mcp_definition_digest(&DefinitionInput {
            server_type: self.server_type.as_deref(),
            command: self.command.as_deref(),
            url: self.url.as_deref(),
            args: &self.args,
            cwd: self.cwd.as_deref(),
        })
    }
}

/// Why `agentpack.toml` could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read {}", path.display())]
    Io {
        /// The manifest path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("{} is not valid TOML: {message}\n  fix  correct the syntax at the position shown", path.display())]
    Syntax {
        /// The manifest path.
        path: PathBuf,
        /// The TOML parser's message (with line and column).
        message: String,
    },
    /// A key is missing, unknown or has a value agentpack does not accept.
    #[error("invalid {} at `{key}`: {message}", path.display())]
    Invalid {
        /// The manifest path.
        path: PathBuf,
        /// The dotted key (`dependencies."github.com/acme/x".branch`).
        key: String,
        /// What is wrong and what to do.
        message: String,
    },
}

/// Renders one key segment as TOML would need it in a dotted key.
pub(crate) fn key_segment(key: &str) -> String {
    if !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        key.to_owned()
    } else {
        format!("{key:?}")
    }
}

/// `table`'s entries, each with its dotted key `<key>.<entry>` for messages: the walk every
/// table's parser makes.
fn dotted_entries<'t>(
    key: &'t str,
    table: &'t Table,
) -> impl Iterator<Item = (&'t str, String, &'t Value)> + 't {
    table.iter().map(move |(entry, value)| {
        (
            entry.as_str(),
            format!("{key}.{}", key_segment(entry)),
            value,
        )
    })
}

struct Ctx<'a> {
    path: &'a Path,
}

impl Ctx<'_> {
    fn invalid(&self, key: &str, message: impl Into<String>) -> ManifestError {
        ManifestError::Invalid {
            path: self.path.to_path_buf(),
            key: key.to_owned(),
            message: message.into(),
        }
    }

    fn string(&self, key: &str, value: &Value) -> Result<String, ManifestError> {
        value.as_str().map(str::to_owned).ok_or_else(|| {
            self.invalid(
                key,
                format!("expected a string, found {}", value.type_str()),
            )
        })
    }

    fn strings(&self, key: &str, value: &Value) -> Result<Vec<String>, ManifestError> {
        let array = value.as_array().ok_or_else(|| {
            self.invalid(
                key,
                format!("expected an array of strings, found {}", value.type_str()),
            )
        })?;
        array.iter().map(|item| self.string(key, item)).collect()
    }

    fn table<'v>(&self, key: &str, value: &'v Value) -> Result<&'v Table, ManifestError> {
        value.as_table().ok_or_else(|| {
            self.invalid(key, format!("expected a table, found {}", value.type_str()))
        })
    }

    /// The entries of the table at `key` ([`dotted_entries`]), or the error when it is not one.
    fn entries<'v>(
        &self,
        key: &'v str,
        value: &'v Value,
    ) -> Result<impl Iterator<Item = (&'v str, String, &'v Value)> + 'v, ManifestError> {
        Ok(dotted_entries(key, self.table(key, value)?))
    }

    fn string_map(
        &self,
        key: &str,
        value: &Value,
    ) -> Result<IndexMap<String, String>, ManifestError> {
        self.entries(key, value)?
            .map(|(k, sub, v)| Ok((k.to_owned(), self.string(&sub, v)?)))
            .collect()
    }
}

impl Manifest {
    /// A manifest with identity only, as `init` writes it.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            dependencies: IndexMap::new(),
            modes: IndexMap::new(),
            mcp_servers: IndexMap::new(),
        }
    }

    /// Reads and parses the manifest at `path`.
    pub fn load(path: &Path) -> Result<Self, ManifestError> {
        let text =
            crate::atomic::read_regular_to_string(path).map_err(|source| ManifestError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        Self::parse(&text, path)
    }

    /// Parses manifest text; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ManifestError> {
        let ctx = Ctx { path };
        let table: Table = text
            .parse()
            .map_err(|e: toml::de::Error| ManifestError::Syntax {
                path: path.to_path_buf(),
                message: e.to_string().trim_end().to_owned(),
            })?;
        let mut name = None;
        let mut version = None;
        let mut dependencies = IndexMap::new();
        let mut modes = IndexMap::new();
        let mut mcp_servers = IndexMap::new();
        for (key, value) in &table {
            match key.as_str() {
                "name" => name = Some(ctx.string("name", value)?),
                "version" => version = Some(ctx.string("version", value)?),
                "package" => {
                    return Err(ctx.invalid(
                        "package",
                        "agentpack.toml has no [package] table; identity is two top-level keys: move `name` and `version` above the first table and delete [package]",
                    ))
                }
                "dependencies" => dependencies = parse_dependencies(&ctx, value)?,
                "modes" => modes = parse_modes(&ctx, value)?,
                "mcp" => mcp_servers = parse_mcp(&ctx, value)?,
                // Read by path packages (files that look like secrets but are shipped on purpose);
                // nothing for the project itself.
                "allow-secret-files" => {
                    let listed = value
                        .as_array()
                        .is_some_and(|items| items.iter().all(toml::Value::is_str));
                    if !listed {
                        return Err(ctx.invalid(
                            "allow-secret-files",
                            "must be a list of package-relative paths, e.g. [\".env.test\"]",
                        ));
                    }
                }
                other => {
                    return Err(ctx.invalid(
                        &key_segment(other),
                        "unknown key; agentpack.toml holds name, version, [dependencies], [modes] and [mcp.servers] only",
                    ))
                }
            }
        }
        let name = name.ok_or_else(|| {
            ctx.invalid(
                "name",
                "missing; add `name = \"my-project\"` at the top of the file",
            )
        })?;
        if name.trim().is_empty() {
            return Err(ctx.invalid("name", "must not be empty"));
        }
        let version = version.ok_or_else(|| {
            ctx.invalid(
                "version",
                "missing; add `version = \"0.0.1\"` at the top of the file",
            )
        })?;
        if let Err(e) = semver::Version::parse(&version) {
            return Err(ctx.invalid(
                "version",
                format!("{version:?} is not a SemVer version ({e}); write e.g. \"0.0.1\""),
            ));
        }
        Ok(Self {
            name,
            version,
            dependencies,
            modes,
            mcp_servers,
        })
    }

    /// The mode called `name`: the declared one, or for `default` when it is not declared the
    /// implicit `base = "all"` mode. `None` for an undeclared non-default mode.
    pub fn mode(&self, name: &str) -> Option<Mode> {
        match self.modes.get(name) {
            Some(mode) => Some(mode.clone()),
            None if name == DEFAULT_MODE => Some(Mode::default()),
            None => None,
        }
    }

    /// Every mode name: `default` first (always present), then the declared ones in file order.
    pub fn mode_names(&self) -> Vec<&str> {
        let mut names = vec![DEFAULT_MODE];
        names.extend(
            self.modes
                .keys()
                .map(String::as_str)
                .filter(|n| *n != DEFAULT_MODE),
        );
        names
    }
}

fn parse_modes(ctx: &Ctx<'_>, value: &Value) -> Result<IndexMap<String, Mode>, ManifestError> {
    let mut out = IndexMap::new();
    for (name, dotted, value) in ctx.entries("modes", value)? {
        if name.trim().is_empty() || name.chars().any(char::is_control) {
            return Err(ctx.invalid(&dotted, "a mode name must be non-empty text"));
        }
        let mut mode = Mode::default();
        for (field, sub, v) in ctx.entries(&dotted, value)? {
            match field {
                "base" => {
                    let text = ctx.string(&sub, v)?;
                    mode.base = Base::parse(&text).ok_or_else(|| {
                        ctx.invalid(
                            &sub,
                            format!("{text:?} is not a base; write \"all\" or \"none\""),
                        )
                    })?;
                }
                "enable" | "disable" => {
                    let selectors = ctx
                        .strings(&sub, v)?
                        .iter()
                        .map(|s| Selector::parse(s).map_err(|e| ctx.invalid(&sub, e.to_string())))
                        .collect::<Result<Vec<_>, _>>()?;
                    if field == "enable" {
                        mode.enable = selectors;
                    } else {
                        mode.disable = selectors;
                    }
                }
                other => {
                    return Err(ctx.invalid(
                        &sub,
                        format!("unknown field `{other}`; a mode accepts base, enable and disable"),
                    ))
                }
            }
        }
        out.insert(name.to_owned(), mode);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oci_dependencies_take_a_tag_or_a_digest() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let text = format!(
            "name = \"x\"\nversion = \"0.1.0\"\n[dependencies]\n\"oci://ghcr.io/acme/a\" = {{ tag = \"1.2.0\" }}\n\"oci://ghcr.io/acme/b\" = {{ digest = \"{digest}\" }}\n\"oci://ghcr.io/acme/c\" = {{}}\n\"oci://ghcr.io/acme/d\" = \"2.0\"\n"
        );
        let manifest = Manifest::parse(&text, Path::new("agentpack.toml")).unwrap();
        let pins: Vec<&Dependency> = manifest.dependencies.values().collect();
        assert_eq!(pins[0], &Dependency::Remote(Pin::Tag("1.2.0".into())));
        assert_eq!(pins[1], &Dependency::Remote(Pin::Digest(digest.clone())));
        assert_eq!(pins[2], &Dependency::Remote(Pin::Unpinned));
        assert_eq!(pins[3], &Dependency::Remote(Pin::Tag("2.0".into())));
        for (value, needle) in [
            ("{ version = \"^1\" }", "accepts tag or digest"),
            (
                "{ tag = \"a\", digest = \"sha256:00\" }",
                "not a manifest digest",
            ),
            ("{ digest = \"sha256:00\" }", "not a manifest digest"),
            ("{ tag = \".bad\" }", "not an OCI tag"),
            ("{ path = \"x\" }", "unknown field `path`"),
        ] {
            let text = format!("name = \"x\"\nversion = \"0.1.0\"\n[dependencies]\n\"oci://ghcr.io/acme/a\" = {value}\n");
            let error = Manifest::parse(&text, Path::new("agentpack.toml"))
                .unwrap_err()
                .to_string();
            assert!(error.contains(needle), "{value}: {error}");
        }
        let text = "name = \"x\"\nversion = \"0.1.0\"\n[dependencies]\n\"github.com/a/b\" = { digest = \"sha256:00\" }\n";
        assert!(Manifest::parse(text, Path::new("agentpack.toml")).is_err());
    }

    #[test]
    fn key_segments_are_quoted_when_needed() {
        assert_eq!(key_segment("dependencies"), "dependencies");
        assert_eq!(key_segment("github.com/a/b"), "\"github.com/a/b\"");
        assert_eq!(key_segment(""), "\"\"");
    }

    #[test]
    fn mode_selection() {
        let sel = |s: &str| Selector::parse(s).unwrap();
        let file = |path| SelectionTarget::PackageFile {
            module: "github.com/a/b",
            path,
        };
        let deny = Mode {
            base: Base::All,
            enable: vec![sel("package-path:github.com/a/b:commands/keep.md")],
            disable: vec![sel("package:github.com/a/b"), sel("mcp:linear")],
        };
        assert!(!deny.selects(&file("skills/x/SKILL.md")));
        assert!(deny.selects(&file("commands/keep.md")));
        assert!(deny.selects(&SelectionTarget::PackageFile {
            module: "github.com/a/c",
            path: "x"
        }));
        assert!(!deny.selects(&SelectionTarget::McpServer {
            name: "linear",
            module: None
        }));
        assert!(!deny.selects(&SelectionTarget::McpServer {
            name: "fs",
            module: Some("github.com/a/b")
        }));
        let allow = Mode {
            base: Base::None,
            enable: vec![sel("package:github.com/a/b"), sel(".agents:rules")],
            disable: vec![
                sel("package-path:github.com/a/b:commands/noise.md"),
                sel("package:github.com/a/b"),
            ],
        };
        assert!(!allow.selects(&file("skills/x")), "a tie goes to disable");
        assert!(allow.selects(&SelectionTarget::AgentsFile {
            path: "rules/a.mdc"
        }));
        assert!(!allow.selects(&SelectionTarget::AgentsFile { path: "skills/a" }));
        assert!(Mode::default().selects(&file("anything")));
    }

    #[test]
    fn pins_from_refs() {
        assert_eq!(Pin::from_reference(None).unwrap(), Pin::Unpinned);
        assert_eq!(
            Pin::from_reference(Some("main")).unwrap(),
            Pin::Ref("main".into())
        );
        assert!(matches!(
            Pin::from_reference(Some("^1.2")).unwrap(),
            Pin::Version(_)
        ));
        assert!(matches!(
            Pin::from_reference(Some("a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2")).unwrap(),
            Pin::Commit(_)
        ));
        assert!(Pin::from_reference(Some("^x")).is_err());
    }
}
