//! Reading the inputs of a render: the verified package trees and `./.agents/`, listed once
//! ([`tree`]) and searched for artifacts ([`artifact`]), hooks, language servers and MCP definitions.
//!
//! This is the render side's only I/O, and it only reads: [`load`] returns a [`Loaded`] value that
//! [`crate::render::render`] turns into a plan without touching the filesystem again (except
//! through the [`crate::render::ReadSource`] it is given to compare unchanged files). Problems with
//! a package's files are warnings in the result, never errors; an error is an input tree that
//! cannot be listed or read. Parsing is done by the pure parsers of [`crate::render`]
//! (frontmatter, MCP and hook definitions), so the two halves share one reader per format.

pub mod artifact;
pub mod hooks;
pub mod lsp;
pub mod mode_mcp;
pub mod tree;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;

use crate::input::artifact::Artifact;
use crate::input::mode_mcp::NamedPluginServer;
use crate::input::tree::{Node, PackageListings, PackageTree};
use crate::render::hooks::HookFile;
use crate::render::mcp::{self, McpServer, McpSource, MergedServer};
use crate::render::{convert, frontmatter};
use crate::{
    launch, path_text, plugin_root_dir, shadows, HarnessError, OverlayInput, PackageInput,
    RenderOptions, StageInputs,
};

/// A package after reading: its tree and what was found in it.
#[derive(Debug, Clone)]
pub struct LoadedPackage {
    pub input: PackageInput,
    pub tree: PackageTree,
    pub artifacts: Vec<Artifact>,
    pub hooks: Vec<HookFile>,
    pub lsp: IndexMap<String, Value>,
    pub servers: Vec<MergedServer>,
    /// `<generation>/plugin-roots/<prefix>` when servers, hooks or language servers run from it.
    pub plugin_root: Option<String>,
    pub plugin_data: String,
    /// The package's name as a prefix for a renamed collision loser: its plugin manifest's `name`,
    /// else the last segment of its module, as a skill name.
    pub name: String,
}

impl LoadedPackage {
    /// What the plugin-root variables (`${CLAUDE_PLUGIN_ROOT}`...) stand for in the package's
    /// definitions: its [`LoadedPackage::plugin_root`], else the package's own directory.
    pub fn plugin_root_or_dir(&self) -> String {
        self.plugin_root
            .clone()
            .unwrap_or_else(|| crate::path_text(&self.input.root))
    }
}

/// The `./.agents/` overlay after reading.
#[derive(Debug, Clone)]
pub struct LoadedOverlay {
    pub tree: PackageTree,
    pub artifacts: Vec<Artifact>,
    pub hooks: Vec<HookFile>,
    pub root: String,
}

/// Everything [`crate::render::render`] needs that had to be read.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// In layering order (see [`layered_packages`]).
    pub packages: Vec<LoadedPackage>,
    pub overlay: Option<LoadedOverlay>,
    /// `./.agents/mcp.json` servers read through the mode's overlay filter.
    pub overlay_servers: Vec<MergedServer>,
    /// Plugin servers only an `mcp:<name>` enable selects (see [`mode_mcp`]).
    pub plugin_servers_by_name: Vec<NamedPluginServer>,
    /// `./.agents/mcp.json` servers only an `mcp:<name>` enable selects.
    pub overlay_servers_by_name: Vec<MergedServer>,
    pub warnings: Vec<String>,
    pub info: Vec<String>,
}

/// Reads every input of `inputs`: the packages the mode stages, the overlay when enabled, and the
/// MCP definitions an `mcp:<name>` selects from outside them.
pub fn load(inputs: &StageInputs) -> Result<Loaded, HarnessError> {
    let options = &inputs.options;
    let mut warnings = Vec::new();
    let mut info = Vec::new();

    let mut packages = Vec::new();
    for input in layered_packages(&inputs.packages, &mut info) {
        packages.push(load_package(
            input,
            &inputs.listings,
            options,
            &mut warnings,
        )?);
    }

    let mut overlay = None;
    let mut overlay_servers = Vec::new();
    if options.dot_agents_enabled {
        if let Some(input) = &inputs.overlay {
            if let Some((loaded, servers)) = load_overlay(input, &mut warnings)? {
                overlay = Some(loaded);
                overlay_servers = servers;
            }
        }
    }
    let found: Vec<&str> = packages
        .iter()
        .flat_map(|p| p.servers.iter().map(|s| s.name.as_str()))
        .collect();
    let plugin_servers_by_name = mode_mcp::plugin_servers_enabled_by_name(inputs, &found)?;
    let found: Vec<&str> = overlay_servers.iter().map(|s| s.name.as_str()).collect();
    let overlay_servers_by_name = mode_mcp::overlay_servers_enabled_by_name(inputs, &found)?;
    Ok(Loaded {
        packages,
        overlay,
        overlay_servers,
        plugin_servers_by_name,
        overlay_servers_by_name,
        warnings,
        info,
    })
}

/// The bytes of an unchanged input file, for [`crate::render::ReadSource`].
pub fn read_source(path: &Path) -> Option<Vec<u8>> {
    fs_err::read(path).ok()
}

/// [`read_source`] for one render, each file read at most once: the collision checks compare a
/// package's files with another's once in every agent's tree.
#[derive(Debug, Default)]
pub(crate) struct SourceReads(std::cell::RefCell<HashMap<PathBuf, Option<Vec<u8>>>>);

impl SourceReads {
    pub(crate) fn read(&self, path: &Path) -> Option<Vec<u8>> {
        if let Some(bytes) = self.0.borrow().get(path) {
            return bytes.clone();
        }
        let bytes = read_source(path);
        self.0
            .borrow_mut()
            .insert(path.to_path_buf(), bytes.clone());
        bytes
    }
}

/// The name of a skill whose `SKILL.md` is at the package root, as staging names it: the
/// frontmatter `name`, else the last segment of the package path or module.
pub fn root_skill_name(input: &PackageInput, tree: &PackageTree) -> String {
    if let Ok(Node::File(resolved)) = tree.resolve("SKILL.md") {
        if let Ok(text) = tree.read_text(&resolved) {
            if let Some(name) = frontmatter::parse(&text).text("name") {
                return convert::skill_name(&name);
            }
        }
    }
    let last = input.path.rsplit('/').next().filter(|s| !s.is_empty());
    let last = last.unwrap_or_else(|| input.module.rsplit('/').next().unwrap_or(&input.module));
    convert::skill_name(last)
}

pub(crate) fn read_plugin_servers(
    tree: &PackageTree,
    module: &str,
    warnings: &mut Vec<String>,
) -> Result<Vec<MergedServer>, HarnessError> {
    let mut servers: IndexMap<String, MergedServer> = IndexMap::new();
    let add = |found: IndexMap<String, McpServer>,
               file: &str,
               servers: &mut IndexMap<String, MergedServer>| {
        for (name, server) in found {
            servers.insert(
                name.clone(),
                MergedServer {
                    name,
                    server,
                    source: McpSource::Plugin {
                        module: module.to_string(),
                        file: file.to_string(),
                    },
                },
            );
        }
    };
    let read_json = |path: &str,
                     warnings: &mut Vec<String>|
     -> Result<Option<Value>, HarnessError> {
        let clean = path.trim_start_matches("./");
        if clean.ends_with(".mcpb") || clean.contains("://") {
            warnings.push(format!(
                "{module}: MCP location `{path}` is a bundle or URL agentpack cannot read; skipped"
            ));
            return Ok(None);
        }
        match tree.resolve(clean) {
            Ok(Node::File(resolved)) => {
                match serde_json::from_str(&tree.read_text(&resolved)?) {
                    Ok(value) => Ok(Some(value)),
                    Err(error) => {
                        warnings.push(format!("{module}: `{clean}` does not parse ({error}); its MCP servers are skipped"));
                        Ok(None)
                    }
                }
            }
            Ok(Node::Dir(_)) => Ok(None),
            Err(problem) => {
                if !mcp::PLUGIN_MCP_FILES.contains(&clean) {
                    warnings.push(format!(
                        "{module}: skipped MCP location: {}",
                        problem.describe(clean)
                    ));
                }
                Ok(None)
            }
        }
    };
    let mut found = Vec::new();
    for file in mcp::PLUGIN_MCP_FILES {
        if let Some(value) = read_json(file, warnings)? {
            found.push((file, value));
        }
    }
    // `mcp.json` copied from a legacy `.mcp.json` (the normalization step) is read once, as the
    // later file, so its servers and their problems are not reported twice.
    if let [(_, first), (_, second)] = found.as_slice() {
        if first == second {
            found.remove(0);
        }
    }
    for (file, value) in found {
        let label = format!("{module} {file}");
        add(
            mcp::parse_servers(&value, &label, warnings),
            file,
            &mut servers,
        );
    }
    for manifest in mcp::PLUGIN_MANIFESTS {
        if tree.resolve(manifest).is_err() {
            continue;
        }
        let Some(value) = read_json(manifest, warnings)? else {
            continue;
        };
        for item in manifest_entries(&value, "mcpServers") {
            match &item {
                Value::String(path) => {
                    if path.starts_with('/') {
                        warnings.push(format!("{module}: skipped MCP location `{path}` declared in {manifest}: it leaves the package"));
                        continue;
                    }
                    if let Some(value) = read_json(path, warnings)? {
                        let clean = path.trim_start_matches("./");
                        let label = format!("{module} {clean}");
                        add(
                            mcp::parse_servers(&value, &label, warnings),
                            clean,
                            &mut servers,
                        );
                    }
                }
                Value::Object(_) => {
                    let label = format!("{module} {manifest}#mcpServers");
                    let file = format!("{manifest}#mcpServers");
                    add(
                        mcp::parse_servers(&item, &label, warnings),
                        &file,
                        &mut servers,
                    );
                }
                _ => warnings.push(format!(
                    "{module}: `mcpServers` in {manifest} is neither a path nor an object; skipped"
                )),
            }
        }
    }
    Ok(servers.into_values().collect())
}

/// A plugin manifest's `field` (a path, an inline definition, or an array of them) as a list:
/// an array's items, else the one value; empty when the field is absent.
fn manifest_entries(manifest: &Value, field: &str) -> Vec<Value> {
    match manifest.get(field) {
        None => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(other) => vec![other.clone()],
    }
}

fn load_package(
    input: &PackageInput,
    listings: &PackageListings,
    options: &RenderOptions,
    warnings: &mut Vec<String>,
) -> Result<LoadedPackage, HarnessError> {
    let tree = listings
        .read(&input.root, &input.filter)?
        .with_executables(&input.executables);
    let label = input.module.as_str();
    let discovery = artifact::discover(&tree, label, &root_skill_name(input, &tree))?;
    warnings.extend(discovery.warnings);
    let hooks = hooks::read_hooks(&tree, label, warnings)?;
    let lsp = lsp::read_lsp(&tree, label, warnings)?;
    let servers = read_plugin_servers(&tree, label, warnings)?;
    let plugin_data = format!("{}/{}", path_text(&options.plugin_data_root), input.module);
    let lsp_uses_root = lsp.values().any(|v| v.to_string().contains("PLUGIN_ROOT}"));
    let artifacts_use_root = discovery
        .artifacts
        .iter()
        .any(|a| mcp::names_plugin_root(&a.text));
    let needs_root = !hooks.is_empty()
        || lsp_uses_root
        || artifacts_use_root
        || servers.iter().any(|s| mcp::uses_plugin_root(&s.server));
    let plugin_root = needs_root.then(|| {
        format!(
            "{}/{}",
            path_text(&options.generation_root),
            plugin_root_dir(&input.cache_key)
        )
    });
    let name = package_name(input, &tree);
    Ok(LoadedPackage {
        input: input.clone(),
        tree,
        artifacts: discovery.artifacts,
        hooks,
        lsp,
        servers,
        plugin_root,
        plugin_data,
        name,
    })
}

/// See [`LoadedPackage::name`].
fn package_name(input: &PackageInput, tree: &PackageTree) -> String {
    for manifest in mcp::PLUGIN_MANIFESTS {
        if let Ok(Node::File(resolved)) = tree.resolve(manifest) {
            let name = tree
                .read_text(&resolved)
                .ok()
                .and_then(|text| serde_json::from_str::<Value>(&text).ok())
                .and_then(|value| {
                    value
                        .get("name")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                });
            if let Some(name) = name.filter(|n| !n.trim().is_empty()) {
                return convert::skill_name(&name);
            }
        }
    }
    let last = input
        .path
        .rsplit('/')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| input.module.rsplit('/').next().unwrap_or(&input.module));
    convert::skill_name(last)
}

fn load_overlay(
    overlay: &OverlayInput,
    warnings: &mut Vec<String>,
) -> Result<Option<(LoadedOverlay, Vec<MergedServer>)>, HarnessError> {
    if !overlay.root.is_dir() {
        return Ok(None);
    }
    let tree = PackageTree::read(&overlay.root, &overlay.filter)?
        .without_link(launch::home_layer::AGY_OVERLAY_LINK);
    let discovery = artifact::discover(&tree, ".agents", "agents")?;
    warnings.extend(discovery.warnings);
    // The overlay's own layout: claude/ and codex/ subtrees are agent-specific, not artifacts.
    let artifacts = discovery
        .artifacts
        .into_iter()
        .filter(|a| {
            !a.source_relative.starts_with("claude/") && !a.source_relative.starts_with("codex/")
        })
        .collect();
    let mut hook_warnings = Vec::new();
    let hooks = hooks::read_hooks(&tree, ".agents", &mut hook_warnings)?;
    warnings.extend(hook_warnings);
    let mut servers = Vec::new();
    if let Ok(Node::File(resolved)) = tree.resolve("mcp.json") {
        match serde_json::from_str::<Value>(&tree.read_text(&resolved)?) {
            Ok(value) => {
                for (name, server) in mcp::parse_servers(&value, ".agents/mcp.json", warnings) {
                    servers.push(MergedServer {
                        name,
                        server,
                        source: McpSource::DotAgents,
                    });
                }
            }
            Err(error) => warnings.push(format!(
                ".agents/mcp.json does not parse ({error}); its MCP servers are skipped"
            )),
        }
    }
    let root = path_text(&overlay.root);
    Ok(Some((
        LoadedOverlay {
            tree,
            artifacts,
            hooks,
            root,
        },
        servers,
    )))
}

/// The packages to stage, in layering order (plugins by cache_key, then bare skills), without
/// shadowed skills and packages the mode selects nothing of.
fn layered_packages<'a>(
    packages: &'a [PackageInput],
    info: &mut Vec<String>,
) -> Vec<&'a PackageInput> {
    let mut ordered: Vec<&PackageInput> = packages.iter().collect();
    ordered
        .sort_by(|a, b| (a.kind == "skill", &a.cache_key).cmp(&(b.kind == "skill", &b.cache_key)));
    let mut kept = Vec::new();
    for input in &ordered {
        if let Some(plugin) = ordered.iter().find(|p| shadows(p, input)) {
            info.push(format!(
                "skill package {} is shadowed by plugin {}, which contains it; not staged twice",
                input.module, plugin.module
            ));
            continue;
        }
        if input.filter.includes_anything() {
            kept.push(*input);
        }
    }
    kept
}

/// The merged MCP servers as their sources wrote them (variables kept, no lock launches
/// applied), with where each came from: what `agentpack lock` records and `mcp list` shows.
/// Reads only the packages' and the overlay's definition files. Returns warnings for servers and
/// locations that were skipped.
pub fn collect_mcp_servers(
    inputs: &StageInputs,
) -> Result<(Vec<MergedServer>, Vec<String>), HarnessError> {
    let mut warnings = Vec::new();
    let mut info = Vec::new();
    let mode = &inputs.mode;
    let mut plugin_servers = Vec::new();
    let mut read_names = Vec::new();
    for input in layered_packages(&inputs.packages, &mut info) {
        let tree = inputs.listings.read(&input.root, &input.filter)?;
        for server in read_plugin_servers(&tree, &input.module, &mut warnings)? {
            read_names.push(server.name.clone());
            if mode.mcp_selected(&server.name, true) {
                plugin_servers.push(server);
            }
        }
    }
    let found: Vec<&str> = read_names.iter().map(String::as_str).collect();
    plugin_servers.extend(
        mode_mcp::plugin_servers_enabled_by_name(inputs, &found)?
            .into_iter()
            .map(|named| named.server),
    );
    let mut overlay_servers = Vec::new();
    if inputs.options.dot_agents_enabled {
        if let Some(overlay) = &inputs.overlay {
            if let Some((_, servers)) = load_overlay(overlay, &mut Vec::new())? {
                let names: Vec<String> = servers.iter().map(|s| s.name.clone()).collect();
                overlay_servers = servers
                    .into_iter()
                    .filter(|s| mode.mcp_selected(&s.name, mode.base_includes_mcp()))
                    .collect();
                let found: Vec<&str> = names.iter().map(String::as_str).collect();
                overlay_servers.extend(mode_mcp::overlay_servers_enabled_by_name(inputs, &found)?);
            }
        }
    }
    let manifest = crate::render::selected_manifest_servers(inputs);
    Ok((
        mcp::merge(plugin_servers, &manifest, overlay_servers, &mut info),
        warnings,
    ))
}
