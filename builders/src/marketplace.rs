//! Marketplace catalogs: reading `marketplace.json` files and following `--plugin <name>` entries.
//!
//! A catalog lives at `.claude-plugin/marketplace.json`, `.cursor-plugin/marketplace.json` or
//! `.agents/plugins/marketplace.json` of a repository (or package) root. An entry says where its plugin
//! lives: a directory of the same repository (a relative path, or `{"source": "local"}`), or another
//! GitHub repository (`{"source": "github"}`, `{"source": "url"}`, `{"source": "git-subdir"}`), pinned by
//! `sha`, else `ref`. A `renames` map is followed. Entries that are not git repositories on github.com
//! are refused. Entries that define the plugin inline (`"strict": false`, e.g. language servers) carry
//! their own manifest. Pure parsing over files already on disk: no network, no writes.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::extract::clean_relative;
use crate::github::RepoId;

/// Catalog files, in the order they are consulted (Claude, Cursor, Codex).
pub const CATALOG_FILES: [&str; 3] = [
    ".claude-plugin/marketplace.json",
    ".cursor-plugin/marketplace.json",
    ".agents/plugins/marketplace.json",
];

/// Why a catalog could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A catalog file could not be read.
    #[error("cannot read {path}: {cause}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// A catalog file is not valid JSON of the expected shape.
    #[error("invalid marketplace catalog {path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// No catalog in the repository.
    #[error("{location} has no marketplace catalog ({files})\n  fix       drop --plugin to add the directory itself, or name the marketplace repository")]
    NoCatalog {
        /// What was searched.
        location: String,
        /// The files looked for.
        files: String,
    },
    /// The named plugin is not in any catalog.
    #[error("no plugin named {name:?} in {location}\n  plugins   {available}")]
    UnknownPlugin {
        /// The name asked for.
        name: String,
        /// The marketplace.
        location: String,
        /// The names the catalogs list.
        available: String,
    },
    /// The entry's source is not a git repository on github.com.
    #[error("cannot add plugin {name:?} from {location}: its source is {what}, not a git repository on github.com; agentpack installs GitHub repositories only")]
    NotGitHub {
        /// The plugin.
        name: String,
        /// The marketplace.
        location: String,
        /// What the source is.
        what: String,
    },
    /// A local source path leaves the repository.
    #[error("marketplace entry {name:?} in {catalog} points outside the repository ({path:?}); marketplace source paths must stay inside it")]
    OutsideRepository {
        /// The plugin.
        name: String,
        /// The catalog file.
        catalog: String,
        /// The source path.
        path: String,
    },
    /// A renames map loops.
    #[error("the renames map of {location} loops at {name:?}")]
    RenameLoop {
        /// The marketplace.
        location: String,
        /// Where the loop was found.
        name: String,
    },
}

/// One catalog file.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    /// Path relative to the catalog root (one of [`CATALOG_FILES`]).
    pub file: String,
    /// The catalog's `name`, when present.
    pub name: Option<String>,
    /// `metadata.pluginRoot`, when present.
    pub plugin_root: Option<String>,
    /// The plugin entries, as written.
    pub plugins: Vec<Map<String, Value>>,
    /// The `renames` map (old name -> new name).
    pub renames: Map<String, Value>,
}

/// Where a catalog entry's plugin lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    /// A directory of the marketplace repository (clean, relative to the catalog root, `""` = root).
    Local {
        /// The directory.
        path: String,
    },
    /// A directory of a GitHub repository.
    GitHub {
        /// The repository.
        repo: RepoId,
        /// The in-repo path (`""` = root).
        path: String,
        /// A commit pin (`sha`).
        sha: Option<String>,
        /// A ref pin (`ref`).
        reference: Option<String>,
    },
}

/// A catalog entry found by name.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogPlugin {
    /// The name after following renames.
    pub name: String,
    /// The catalog file it came from.
    pub catalog_file: String,
    /// Where it lives.
    pub source: PluginSource,
    /// The entry itself (the plugin manifest when it defines the plugin inline).
    pub entry: Map<String, Value>,
}

impl CatalogPlugin {
    /// Does the entry define the plugin itself (`"strict": false`), so it is the plugin's manifest?
    pub fn is_inline_definition(&self) -> bool {
        self.entry.get("strict").and_then(Value::as_bool) == Some(false)
    }

    /// The plugin manifest an inline entry stands for: the entry without the catalog-only keys.
    pub fn inline_manifest(&self) -> Map<String, Value> {
        let mut manifest = self.entry.clone();
        for key in ["source", "strict", "category", "tags"] {
            manifest.remove(key);
        }
        manifest
    }
}

/// Reads every catalog file present under `root`.
pub fn read_catalogs(root: &Path) -> Result<Vec<Catalog>, CatalogError> {
    let mut catalogs = Vec::new();
    for file in CATALOG_FILES {
        let path = root.join(file);
        match fs_err::symlink_metadata(&path) {
            Ok(meta) if meta.is_file() => {}
            _ => continue,
        }
        let text = fs_err::read_to_string(&path).map_err(|source| CatalogError::Io {
            path: path.clone(),
            cause: source,
        })?;
        catalogs.push(
            parse_catalog(file, &text).map_err(|reason| CatalogError::Invalid { path, reason })?,
        );
    }
    Ok(catalogs)
}

/// Parses one catalog's JSON text.
pub fn parse_catalog(file: &str, text: &str) -> Result<Catalog, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let object = value
        .as_object()
        .ok_or("the catalog is not a JSON object")?;
    let plugins = match object.get("plugins") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_object()
                    .cloned()
                    .ok_or_else(|| "a `plugins` entry is not an object".to_owned())
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`plugins` is not an array".to_owned()),
    };
    for plugin in &plugins {
        if plugin.get("name").and_then(Value::as_str).is_none() {
            return Err("a plugin entry has no `name`".to_owned());
        }
    }
    Ok(Catalog {
        file: file.to_owned(),
        name: object
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned),
        plugin_root: object
            .get("metadata")
            .and_then(|m| m.get("pluginRoot"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        plugins,
        renames: object
            .get("renames")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    })
}

/// The plugin names every catalog lists (deduplicated, sorted).
pub fn plugin_names(catalogs: &[Catalog]) -> Vec<String> {
    let mut names: Vec<String> = catalogs
        .iter()
        .flat_map(|c| {
            c.plugins
                .iter()
                .filter_map(|p| p.get("name").and_then(Value::as_str).map(str::to_owned))
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Finds `name` (following renames) and works out where it lives. `location` names the marketplace in
/// messages (e.g. `anthropics/claude-plugins-official`).
pub fn find_plugin(
    catalogs: &[Catalog],
    name: &str,
    location: &str,
) -> Result<CatalogPlugin, CatalogError> {
    if catalogs.is_empty() {
        return Err(CatalogError::NoCatalog {
            location: location.to_owned(),
            files: CATALOG_FILES.join(", "),
        });
    }
    let mut current = name.to_owned();
    let mut seen = vec![current.clone()];
    loop {
        for catalog in catalogs {
            if let Some(entry) = catalog
                .plugins
                .iter()
                .find(|p| p.get("name").and_then(Value::as_str) == Some(current.as_str()))
            {
                let source = entry_source(catalog, entry, &current, location)?;
                return Ok(CatalogPlugin {
                    name: current,
                    catalog_file: catalog.file.clone(),
                    source,
                    entry: entry.clone(),
                });
            }
        }
        let renamed = catalogs.iter().find_map(|c| {
            c.renames
                .get(&current)
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        match renamed {
            Some(next) if seen.contains(&next) => {
                return Err(CatalogError::RenameLoop {
                    location: location.to_owned(),
                    name: next,
                })
            }
            Some(next) => {
                seen.push(next.clone());
                current = next;
            }
            None => {
                return Err(CatalogError::UnknownPlugin {
                    name: name.to_owned(),
                    location: location.to_owned(),
                    available: plugin_names(catalogs).join(", "),
                })
            }
        }
    }
}

fn local_path(catalog: &Catalog, raw: &str, name: &str) -> Result<PluginSource, CatalogError> {
    let outside = || CatalogError::OutsideRepository {
        name: name.to_owned(),
        catalog: catalog.file.clone(),
        path: raw.to_owned(),
    };
    let joined = match (
        &catalog.plugin_root,
        raw.starts_with("./") || raw.starts_with("../") || raw == ".",
    ) {
        (Some(root), false) => format!("{root}/{raw}"),
        _ => raw.to_owned(),
    };
    if joined.starts_with('/') {
        return Err(outside());
    }
    // Resolve `..` lexically; climbing above the root leaves the repository.
    let mut parts: Vec<&str> = Vec::new();
    for component in joined.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                parts.pop().ok_or_else(outside)?;
            }
            other => parts.push(other),
        }
    }
    let path = clean_relative(&parts.join("/")).map_err(|_| outside())?;
    Ok(PluginSource::Local { path })
}

/// Parses `https://github.com/<owner>/<repo>[.git][/]` (also `git@github.com:` and `github.com/` forms).
pub fn github_repo_from_url(url: &str) -> Option<RepoId> {
    let rest = url
        .strip_prefix("https://github.com/")
        .or_else(|| url.strip_prefix("http://github.com/"))
        .or_else(|| url.strip_prefix("git@github.com:"))
        .or_else(|| url.strip_prefix("ssh://git@github.com/"))
        .or_else(|| url.strip_prefix("github.com/"))?;
    let rest = rest.trim_end_matches('/');
    let rest = rest.strip_suffix(".git").unwrap_or(rest);
    let mut parts = rest.split('/');
    let (owner, repo) = (parts.next()?, parts.next()?);
    if owner.is_empty() || repo.is_empty() || parts.next().is_some() {
        return None;
    }
    Some(RepoId::new(owner, repo))
}

fn entry_source(
    catalog: &Catalog,
    entry: &Map<String, Value>,
    name: &str,
    location: &str,
) -> Result<PluginSource, CatalogError> {
    let not_github = |what: String| CatalogError::NotGitHub {
        name: name.to_owned(),
        location: location.to_owned(),
        what,
    };
    let source = entry
        .get("source")
        .cloned()
        .unwrap_or(Value::String("./".to_owned()));
    let text = |object: &Map<String, Value>, key: &str| {
        object.get(key).and_then(Value::as_str).map(str::to_owned)
    };
    match &source {
        Value::String(path) => local_path(catalog, path, name),
        Value::Object(object) => {
            let kind = text(object, "source").unwrap_or_default();
            let sha = text(object, "sha").or_else(|| text(entry, "sha"));
            let reference = text(object, "ref").or_else(|| text(entry, "ref"));
            let sub_path = text(object, "path").unwrap_or_default();
            let sub_path =
                clean_relative(&sub_path).map_err(|_| CatalogError::OutsideRepository {
                    name: name.to_owned(),
                    catalog: catalog.file.clone(),
                    path: sub_path.clone(),
                })?;
            let github = |repo| {
                Ok(PluginSource::GitHub {
                    repo,
                    path: sub_path,
                    sha,
                    reference,
                })
            };
            match kind.as_str() {
                "local" | "directory" => local_path(
                    catalog,
                    &text(object, "path").unwrap_or_else(|| "./".into()),
                    name,
                ),
                "github" => {
                    let repo = text(object, "repo")
                        .and_then(|r| github_repo_from_url(&format!("github.com/{r}")))
                        .ok_or_else(|| {
                            not_github(format!(
                                "a github source without a valid `repo` ({object:?})"
                            ))
                        })?;
                    github(repo)
                }
                "url" | "git-subdir" | "git" => {
                    let url = text(object, "url").unwrap_or_default();
                    let repo = github_repo_from_url(&url)
                        .ok_or_else(|| not_github(format!("the git URL {url:?}")))?;
                    github(repo)
                }
                registry @ ("npm" | "pip") => Err(not_github(format!(
                    "the {registry} package {:?}",
                    text(object, "package").unwrap_or_default()
                ))),
                other => Err(not_github(format!("a {other:?} source"))),
            }
        }
        other => Err(not_github(format!("{other}"))),
    }
}
