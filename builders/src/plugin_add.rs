//! `agentpack add <marketplace> --plugin <name>`: from a catalog entry to a manifest dependency.
//!
//! Resolves the marketplace repository at the `@ref` given (else its default branch), reads its
//! catalogs, follows `renames`, and turns the entry into the module id and pin to write: a directory of
//! the marketplace repository follows the marketplace `@ref`, and without one is pinned to the commit
//! the catalog was read at (the newest tag may predate the plugin); another GitHub repository is
//! pinned by the entry's `sha`, else its `ref`. The plugin's directory is checked to exist at the
//! resolved commit and to be a package, or a directory Claude Code loads as a plugin without a
//! manifest (one with `commands/`, `agents/`, `skills/`, `hooks/hooks.json`, `.mcp.json` or
//! `.lsp.json`), or to be defined inline by the entry. Non-GitHub sources are refused. Writes
//! nothing: the cli edits the manifest and runs the normal resolution.

use agentpack_lockfile::manifest::Pin;
use agentpack_lockfile::module_id::ModuleId;
use agentpack_lockfile::validate::CommitSha;

use crate::github::resolver::{RefRequest, ResolveError};
use crate::github::RepoId;
use crate::marketplace::{self, CatalogError, PluginSource};
use crate::normalize;
use crate::snapshot::{FetchError, SnapshotFetcher};

/// What to add to the manifest for one catalog plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginAddition {
    /// The plugin's own module id (its repository and path).
    pub module: ModuleId,
    /// The pin to write.
    pub pin: Pin,
    /// The commit the pin resolves to now.
    pub commit: String,
    /// The plugin name after following renames.
    pub name: String,
    /// The catalog entry defines the plugin itself (`"strict": false`, e.g. a language server).
    pub inline_definition: bool,
    /// Warnings for the cli to print.
    pub warnings: Vec<String>,
}

/// Why a `--plugin` add failed.
#[derive(Debug, thiserror::Error)]
pub enum PluginAddError {
    /// A ref could not be resolved.
    #[error(transparent)]
    Ref(Box<ResolveError>),
    /// A download failed.
    #[error(transparent)]
    Fetch(Box<FetchError>),
    /// The catalog could not be used.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The entry's directory is not a package.
    #[error("cannot add plugin {name:?}: {location} has no plugin at {path:?} (no SKILL.md, agentpack.toml, plugin manifest or plugin component (commands/, agents/, skills/, hooks/hooks.json, .mcp.json, .lsp.json) there, and the catalog entry does not define the plugin inline)")]
    NotAPackage {
        /// The plugin.
        name: String,
        /// Repository and commit.
        location: String,
        /// The in-repo path.
        path: String,
    },
    /// The module id or commit is invalid.
    #[error("{0}")]
    Invalid(String),
}

impl From<ResolveError> for PluginAddError {
    fn from(error: ResolveError) -> Self {
        PluginAddError::Ref(Box::new(error))
    }
}

impl From<FetchError> for PluginAddError {
    fn from(error: FetchError) -> Self {
        PluginAddError::Fetch(Box::new(error))
    }
}

/// What Claude Code loads from a plugin directory that has no manifest.
const MANIFESTLESS_COMPONENTS: [&str; 6] = [
    "commands",
    "agents",
    "skills",
    "hooks/hooks.json",
    ".mcp.json",
    ".lsp.json",
];

/// Whether Claude Code loads `dir` as a plugin although it has no manifest.
fn loads_without_manifest(dir: &std::path::Path) -> bool {
    MANIFESTLESS_COMPONENTS
        .iter()
        .any(|component| dir.join(component).exists())
}

fn join(base: &str, path: &str) -> String {
    match (base.trim_matches('/'), path.trim_matches('/')) {
        ("", p) => p.to_owned(),
        (b, "") => b.to_owned(),
        (b, p) => format!("{b}/{p}"),
    }
}

/// Resolves `plugin` in the marketplace at `marketplace` (repository) / `marketplace_path` (in-repo
/// directory holding the catalogs, usually `""`), at `reference` or the default branch.
pub fn resolve_plugin(
    fetcher: &SnapshotFetcher,
    marketplace: &RepoId,
    marketplace_path: &str,
    reference: Option<&str>,
    plugin: &str,
) -> Result<PluginAddition, PluginAddError> {
    let resolver = fetcher.resolver();
    let mut warnings = Vec::new();
    let marketplace_module = format!("github.com/{}", join(&marketplace.key(), marketplace_path));
    let request = RefRequest::Name(reference.unwrap_or("HEAD").to_owned());
    let resolved = resolver.resolve(&marketplace_module, marketplace, &request)?;
    warnings.extend(resolved.warnings);
    let snapshot = fetcher.snapshot(marketplace, &resolved.commit)?;
    let catalogs =
        marketplace::read_catalogs(&snapshot.root.join(marketplace_path.trim_matches('/')))?;
    let location = format!(
        "{}@{}",
        join(&marketplace.to_string(), marketplace_path),
        &resolved.commit[..12]
    );
    let found = marketplace::find_plugin(&catalogs, plugin, &location)?;
    let inline = found.is_inline_definition();
    let (repo, path, pin, commit) = match &found.source {
        PluginSource::Local { path } => {
            let pin = match reference {
                Some(reference) => Pin::Ref(reference.to_owned()),
                // The commit the catalog was read at: a plugin added to the catalog after the
                // newest tag is not in that tag.
                None => Pin::Commit(
                    CommitSha::parse(&resolved.commit)
                        .map_err(|e| PluginAddError::Invalid(e.to_string()))?,
                ),
            };
            (
                marketplace.clone(),
                join(marketplace_path, path),
                pin,
                resolved.commit.clone(),
            )
        }
        PluginSource::GitHub {
            repo,
            path,
            sha,
            reference,
        } => {
            let module = format!("github.com/{}", join(&repo.key(), path));
            let (pin, request) = match (sha, reference) {
                (Some(sha), _) if CommitSha::parse(sha).is_ok() => {
                    let commit = CommitSha::parse(sha)
                        .map_err(|e| PluginAddError::Invalid(e.to_string()))?;
                    (Pin::Commit(commit), RefRequest::Commit(sha.clone()))
                }
                (Some(sha), _) => (Pin::Ref(sha.clone()), RefRequest::Name(sha.clone())),
                (None, Some(reference)) => (
                    Pin::Ref(reference.clone()),
                    RefRequest::Name(reference.clone()),
                ),
                (None, None) => (Pin::Unpinned, RefRequest::Latest),
            };
            let resolved = resolver.resolve(&module, repo, &request)?;
            warnings.extend(resolved.warnings);
            (repo.clone(), path.clone(), pin, resolved.commit)
        }
    };
    let snapshot = fetcher.snapshot(&repo, &commit)?;
    let dir = snapshot.root.join(&path);
    let is_package =
        dir.is_dir() && (normalize::is_package_root(&dir) || loads_without_manifest(&dir));
    if !is_package && !(inline && (dir.is_dir() || path.is_empty())) {
        return Err(PluginAddError::NotAPackage {
            name: found.name,
            location: format!("github.com/{repo}@{}", &commit[..12.min(commit.len())]),
            path,
        });
    }
    let module = ModuleId::github(&repo.owner, &repo.repo, &path)
        .map_err(|e| PluginAddError::Invalid(e.to_string()))?;
    Ok(PluginAddition {
        module,
        pin,
        commit,
        name: found.name,
        inline_definition: inline,
        warnings,
    })
}
