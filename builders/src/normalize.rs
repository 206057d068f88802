//! Package roots and layout normalization: the fixed steps between an upstream tree and what is hashed.
//!
//! "What exactly is hashed" lists them, and a change to any of them changes every content hash, so
//! this module is deliberately small and literal:
//! 1. a single-plugin marketplace root (one plugin name across the Claude, Cursor and Codex catalogs,
//!    each pointing at a local directory inside the repository) is merged into one package;
//!    several plugin names are refused with a message naming `--plugin`;
//! 2. a catalog entry that defines its plugin inline (`"strict": false`, language servers) is written
//!    as the package's `.claude-plugin/plugin.json`;
//! 3. plugin manifest stubs for the harnesses the package did not ship one for;
//! 4. `mcp.json` copied from a legacy `.mcp.json`.
//!
//! It only adds files inside the package directory it is given; it never deletes or edits upstream
//! files and never follows a link out of the package.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::extract::{link_stays_inside, FILE_MODE};
use crate::marketplace::{self, CatalogError, CatalogPlugin, PluginSource};

/// Files whose presence makes a directory a package root.
pub const PACKAGE_MARKERS: [&str; 8] = [
    "SKILL.md",
    "agentpack.toml",
    ".claude-plugin/plugin.json",
    ".cursor-plugin/plugin.json",
    ".codex-plugin/plugin.json",
    ".claude-plugin/marketplace.json",
    ".cursor-plugin/marketplace.json",
    ".agents/plugins/marketplace.json",
];

/// Plugin manifests, one per harness family, in precedence order (the one list, the renderers').
pub use agentpack_harness::render::mcp::PLUGIN_MANIFESTS;

/// Manifest keys a stub copies from the package's existing manifest.
const STUB_KEYS: [&str; 8] = [
    "name",
    "version",
    "description",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
];

/// Is `dir` a package root (does it hold one of [`PACKAGE_MARKERS`])?
pub fn is_package_root(dir: &Path) -> bool {
    PACKAGE_MARKERS
        .iter()
        .any(|marker| is_file(&dir.join(marker)))
}

fn is_file(path: &Path) -> bool {
    fs_err::symlink_metadata(path).is_ok_and(|meta| meta.is_file())
}

/// The package kind recorded in the lock: `plugin` when it has a plugin manifest (after
/// normalization), `skill` otherwise.
pub fn package_kind(dir: &Path) -> &'static str {
    if PLUGIN_MANIFESTS
        .iter()
        .any(|manifest| is_file(&dir.join(manifest)))
    {
        "plugin"
    } else {
        "skill"
    }
}

/// The display name of a package: its plugin manifest's `name`, else the `name:` of `SKILL.md`'s front
/// matter, else `None`.
pub fn package_name(dir: &Path) -> Option<String> {
    for manifest in PLUGIN_MANIFESTS {
        if let Some(name) = read_json(&dir.join(manifest))
            .ok()
            .flatten()
            .and_then(|v| v.get("name").and_then(Value::as_str).map(str::to_owned))
        {
            return Some(name);
        }
    }
    let skill = fs_err::read_to_string(dir.join("SKILL.md")).ok()?;
    let front = skill.strip_prefix("---")?;
    let end = front.find("\n---")?;
    front[..end].lines().find_map(|line| {
        let value = line
            .trim()
            .strip_prefix("name:")?
            .trim()
            .trim_matches('"')
            .trim_matches('\'');
        // A name that is a path, absurdly long or holds control characters is never used.
        (!value.is_empty() && crate::local_package::skill_name_problem(value).is_none())
            .then(|| value.to_owned())
    })
}

/// Why a package could not be normalized.
#[derive(Debug, thiserror::Error)]
pub enum NormalizeError {
    /// A filesystem operation failed.
    #[error("cannot normalize {path}: {cause}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// A manifest is not valid JSON.
    #[error("invalid plugin manifest {path}: {reason}")]
    InvalidManifest {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A catalog problem.
    #[error("{module}: {cause}")]
    Catalog {
        /// The module.
        module: String,
        /// The cause.
        cause: CatalogError,
    },
    /// Several plugin names in the package's catalogs.
    #[error(
        "cannot install {module}: it is a marketplace catalog with {count} plugins ({names}), which is ambiguous for one dependency\n  fix       add one plugin with `agentpack add <marketplace> --plugin <name>`, or add the plugin's source directory directly"
    )]
    AmbiguousCatalog {
        /// The module.
        module: String,
        /// How many plugin names.
        count: usize,
        /// The names.
        names: String,
    },
    /// The provider directories name different plugins.
    #[error("cannot merge the marketplace of {module}: {catalog} points at {path:?}, whose manifest names plugin {found:?}, not {expected:?}")]
    NameMismatch {
        /// The module.
        module: String,
        /// The catalog file.
        catalog: String,
        /// The provider directory.
        path: String,
        /// The name in the provider manifest.
        found: String,
        /// The catalog's plugin name.
        expected: String,
    },
    /// The single catalog entry lives in another repository.
    #[error("cannot install {module}: its catalog entry {name:?} ({catalog}) points at another repository\n  fix       add it with `agentpack add <marketplace> --plugin {name}`")]
    RemoteEntry {
        /// The module.
        module: String,
        /// The plugin.
        name: String,
        /// The catalog file.
        catalog: String,
    },
    /// A catalog source directory does not exist.
    #[error("marketplace entry {name:?} of {module} ({catalog}) points at {path:?}, which is not a directory of the package")]
    MissingSource {
        /// The module.
        module: String,
        /// The plugin.
        name: String,
        /// The catalog file.
        catalog: String,
        /// The source path.
        path: String,
    },
}

/// What normalization added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NormalizeReport {
    /// Files added, relative to the package root, in the order written.
    pub added: Vec<String>,
    /// Regular files copied from elsewhere in the package: `(added path, the file it copies)`.
    pub copied: Vec<(String, String)>,
}

impl NormalizeReport {
    /// `executables` (the source's executable files, package-relative) plus the copies of them
    /// this normalization added.
    pub fn with_copied_executables(
        &self,
        executables: &std::collections::BTreeSet<String>,
    ) -> std::collections::BTreeSet<String> {
        let mut all = executables.clone();
        for (added, from) in &self.copied {
            if executables.contains(from) {
                all.insert(added.clone());
            }
        }
        all
    }
}

/// Inputs of [`normalize_package`] besides the directory.
#[derive(Debug, Clone, Copy, Default)]
pub struct NormalizeContext<'a> {
    /// The module id, for messages.
    pub module: &'a str,
    /// The repository snapshot the package was copied from, to find catalog entries that define this
    /// package's plugin inline; `None` for path and `local/` packages.
    pub repo_root: Option<&'a Path>,
    /// The package's in-repo path (`""` for the root).
    pub package_path: &'a str,
    /// An inline plugin manifest chosen by `--plugin` resolution.
    pub inline_manifest: Option<&'a Map<String, Value>>,
}

impl<'a> NormalizeContext<'a> {
    /// The context of a package copied from no repository snapshot (path, `local/` and OCI
    /// packages): only the module id, for messages.
    pub fn without_repo(module: &'a str) -> Self {
        NormalizeContext {
            module,
            ..Default::default()
        }
    }
}

fn io(path: &Path, source: std::io::Error) -> NormalizeError {
    NormalizeError::Io {
        path: path.to_path_buf(),
        cause: source,
    }
}

fn read_json(path: &Path) -> Result<Option<Value>, NormalizeError> {
    if !is_file(path) {
        return Ok(None);
    }
    let text = fs_err::read_to_string(path).map_err(|e| io(path, e))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| NormalizeError::InvalidManifest {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
}

fn write_new(
    package: &Path,
    relative: &str,
    bytes: &[u8],
    report: &mut NormalizeReport,
) -> Result<(), NormalizeError> {
    let path = package.join(relative);
    if let Some(parent) = path.parent() {
        write_dirs(package, parent)?;
    }
    let mut file = fs_err::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| io(&path, e))?;
    std::io::Write::write_all(&mut file, bytes).map_err(|e| io(&path, e))?;
    file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
        .map_err(|e| io(&path, e))?;
    report.added.push(relative.to_owned());
    Ok(())
}

/// Renders a JSON document the way normalization writes it: two-space indentation and a newline.
pub fn render_json(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// Applies the normalization steps to `package` (see the module docs).
pub fn normalize_package(
    package: &Path,
    context: &NormalizeContext<'_>,
) -> Result<NormalizeReport, NormalizeError> {
    let mut report = NormalizeReport::default();
    let has_manifest = |p: &Path| PLUGIN_MANIFESTS.iter().any(|m| is_file(&p.join(m)));

    if !has_manifest(package) {
        merge_marketplace(package, context, &mut report)?;
    }
    if !has_manifest(package) {
        let inline = match context.inline_manifest {
            Some(manifest) => Some(manifest.clone()),
            None => inline_entry_for(context)?.map(|entry| entry.inline_manifest()),
        };
        if let Some(manifest) = inline {
            write_new(
                package,
                PLUGIN_MANIFESTS[0],
                &render_json(&Value::Object(manifest)),
                &mut report,
            )?;
        }
    }
    write_stubs(package, &mut report)?;
    if is_file(&package.join(".mcp.json")) && !package.join("mcp.json").exists() {
        let bytes = fs_err::read(package.join(".mcp.json"))
            .map_err(|e| io(&package.join(".mcp.json"), e))?;
        write_new(package, "mcp.json", &bytes, &mut report)?;
    }
    Ok(report)
}

/// The catalog entry of the repository that points at this package and defines its plugin inline.
fn inline_entry_for(
    context: &NormalizeContext<'_>,
) -> Result<Option<CatalogPlugin>, NormalizeError> {
    let Some(root) = context.repo_root else {
        return Ok(None);
    };
    let catalogs = marketplace::read_catalogs(root).map_err(|source| NormalizeError::Catalog {
        module: context.module.to_owned(),
        cause: source,
    })?;
    for catalog in &catalogs {
        for entry in &catalog.plugins {
            let Some(name) = entry.get("name").and_then(Value::as_str) else {
                continue;
            };
            let Ok(found) =
                marketplace::find_plugin(std::slice::from_ref(catalog), name, context.module)
            else {
                continue;
            };
            let points_here = matches!(&found.source, PluginSource::Local { path } if path == context.package_path.trim_matches('/'));
            if points_here && found.is_inline_definition() {
                return Ok(Some(found));
            }
        }
    }
    Ok(None)
}

fn merge_marketplace(
    package: &Path,
    context: &NormalizeContext<'_>,
    report: &mut NormalizeReport,
) -> Result<(), NormalizeError> {
    let module = context.module.to_owned();
    let catalogs =
        marketplace::read_catalogs(package).map_err(|source| NormalizeError::Catalog {
            module: module.clone(),
            cause: source,
        })?;
    let names = marketplace::plugin_names(&catalogs);
    match names.len() {
        0 => return Ok(()),
        1 => {}
        count => {
            return Err(NormalizeError::AmbiguousCatalog {
                module,
                count,
                names: names.join(", "),
            })
        }
    }
    let name = &names[0];
    for catalog in &catalogs {
        let plugin = match marketplace::find_plugin(std::slice::from_ref(catalog), name, &module) {
            Ok(plugin) => plugin,
            Err(CatalogError::UnknownPlugin { .. }) => continue,
            Err(source) => {
                return Err(NormalizeError::Catalog {
                    module,
                    cause: source,
                })
            }
        };
        let path = match &plugin.source {
            PluginSource::Local { path } => path.clone(),
            PluginSource::GitHub { .. } => {
                return Err(NormalizeError::RemoteEntry {
                    module,
                    name: name.clone(),
                    catalog: catalog.file.clone(),
                })
            }
        };
        if plugin.is_inline_definition() {
            // Written by the inline step once no provider directory supplied a manifest.
            continue;
        }
        if path.is_empty() {
            continue;
        }
        let source = package.join(&path);
        if !fs_err::symlink_metadata(&source).is_ok_and(|m| m.is_dir()) {
            return Err(NormalizeError::MissingSource {
                module,
                name: name.clone(),
                catalog: catalog.file.clone(),
                path,
            });
        }
        for manifest in PLUGIN_MANIFESTS {
            let found = read_json(&source.join(manifest))?
                .and_then(|v| v.get("name").and_then(Value::as_str).map(str::to_owned));
            if let Some(found) = found {
                if &found != name {
                    return Err(NormalizeError::NameMismatch {
                        module,
                        catalog: catalog.file.clone(),
                        path,
                        found,
                        expected: name.clone(),
                    });
                }
            }
        }
        merge_directory(package, &source, report)?;
    }
    Ok(())
}

/// Copies `source` (a directory inside `package`) into the package root, never replacing a file.
fn merge_directory(
    package: &Path,
    source: &Path,
    report: &mut NormalizeReport,
) -> Result<(), NormalizeError> {
    for entry in walkdir::WalkDir::new(source)
        .follow_links(false)
        .sort_by_file_name()
        .min_depth(1)
    {
        let entry = entry.map_err(|e| io(source, std::io::Error::other(e)))?;
        let Ok(relative) = entry.path().strip_prefix(source) else {
            continue;
        };
        let Some(relative) = relative.to_str() else {
            continue;
        };
        let destination = package.join(relative);
        if entry.file_type().is_dir() || destination.symlink_metadata().is_ok() {
            continue;
        }
        if entry.file_type().is_symlink() {
            let target = fs_err::read_link(entry.path()).map_err(|e| io(entry.path(), e))?;
            let target = target.to_str().unwrap_or_default().to_owned();
            if link_stays_inside(relative, &target) {
                if let Some(parent) = destination.parent() {
                    write_dirs(package, parent)?;
                }
                std::os::unix::fs::symlink(&target, &destination)
                    .map_err(|e| io(&destination, e))?;
                report.added.push(relative.to_owned());
            } else {
                write_new(package, relative, b"", report)?;
            }
        } else if entry.file_type().is_file() {
            let bytes = fs_err::read(entry.path()).map_err(|e| io(entry.path(), e))?;
            write_new(package, relative, &bytes, report)?;
            if let Ok(from) = entry.path().strip_prefix(package) {
                let from = from.to_string_lossy().into_owned();
                report.copied.push((relative.to_owned(), from));
            }
        }
    }
    Ok(())
}

/// Creates `dir` (inside `package`) and its missing parents, refusing to create a directory
/// through a link or over a file.
fn write_dirs(package: &Path, dir: &Path) -> Result<(), NormalizeError> {
    let relative = dir
        .strip_prefix(package)
        .map_err(|_| io(dir, std::io::Error::other("outside the package")))?;
    let mut current = package.to_path_buf();
    for component in relative.components() {
        current.push(component);
        match fs_err::symlink_metadata(&current) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(io(
                    &current,
                    std::io::Error::other("exists and is not a directory"),
                ))
            }
            Err(_) => fs_err::create_dir(&current).map_err(|e| io(&current, e))?,
        }
    }
    Ok(())
}

fn write_stubs(package: &Path, report: &mut NormalizeReport) -> Result<(), NormalizeError> {
    let mut existing = None;
    for manifest in PLUGIN_MANIFESTS {
        if let Some(value) = read_json(&package.join(manifest))? {
            existing = Some(value);
            break;
        }
    }
    let Some(existing) = existing else {
        return Ok(());
    };
    let mut stub = Map::new();
    for key in STUB_KEYS {
        if let Some(value) = existing.get(key) {
            stub.insert(key.to_owned(), value.clone());
        }
    }
    let bytes = render_json(&Value::Object(stub));
    for manifest in PLUGIN_MANIFESTS {
        if fs_err::symlink_metadata(package.join(manifest)).is_err() {
            write_new(package, manifest, &bytes, report)?;
        }
    }
    Ok(())
}
