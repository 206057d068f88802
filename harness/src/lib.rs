//! agentpack-harness: pure renderers from a set of verified package trees to every agent's staged
//! layout.
//!
//! [`render_generation`] takes [`StageInputs`] (the packages of the lock with their mode filters,
//! the project's `./.agents/` overlay, the manifest's MCP servers and the [`RenderOptions`]) and
//! returns a [`GenerationPlan`]: for each agent a [`RenderPlan`] of entries relative to the
//! generation root, plus the shared `plugin-roots/` copies. Listing and reading the input trees is
//! the only I/O; nothing is written, nothing is fetched, nothing is printed. Equal inputs give equal
//! plans. Secrets (MCP `env`, header values, OAuth client secrets) never enter a plan entry: they
//! are referenced by variable name and returned in each plan's [`SecretLayer`].
//!
//! Generation layout:
//!
//! ```text
//! plugins/agentpack-bundle/   Claude Code plugin (claude.rs)
//! opencode/                   OpenCode config root (opencode.rs)
//! codex-home/                 Codex home content (codex.rs)
//! cursor/                     Cursor plugin marketplace + bundle (cursor.rs)
//! grok/                       Grok bundle + home-layer fragments (grok.rs)
//! agy/agentpack-bundle/       Antigravity workspace plugin (antigravity.rs)
//! plugin-roots/<key prefix>/  package copies that servers and hooks run in
//! hook-specs/<agent>/         what `agentpack hook-exec dispatch` runs (Codex's: codex-home/hook-specs/)
//! ```

pub mod antigravity;
pub mod artifact;
pub mod attribution;
pub mod claude;
pub mod codex;
mod collision;
pub mod convert;
pub mod credentials;
mod css_colors;
pub mod cursor;
pub mod eject;
pub mod frontmatter;
pub mod grok;
pub mod home;
pub mod home_layer;
pub mod hook_exec;
pub mod hooks;
pub mod launch;
mod layout;
pub mod lsp;
pub mod mcp;
pub mod mode;
mod mode_mcp;
pub mod opencode;
pub mod plan;
pub mod tree;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;

pub use mcp::{McpLaunch, McpOAuth, McpServer, MergedServer};
pub use mode::{ModeBase, ModeFilter, PathFilter, Selector, SelectorError};
pub use plan::{Agent, Collision, GenerationPlan, PlanEntry, RenderPlan, SecretLayer, SharedPlan};

use crate::artifact::Artifact;
use crate::hooks::{HookFile, PackageHooks};
use crate::mcp::McpSource;
use crate::tree::{Node, PackageTree, TreeEntry};

/// Failures reading an input tree. Everything else is a warning in the plan.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("cannot list {path}: {message}; run `agentpack sync --repair` if it is a cache entry")]
    Walk { path: PathBuf, message: String },
}

impl HarnessError {
    pub(crate) fn io(error: std::io::Error) -> Self {
        HarnessError::Io(error)
    }
}

/// One package of the lock, as the generation builder hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageInput {
    pub module: String,
    pub cache_key: String,
    pub owner: String,
    pub repo: String,
    /// In-repo path, no leading or trailing `/` (empty for the repository root).
    pub path: String,
    pub commit: String,
    /// The lock's `kind` (`plugin`, `skill`, ...). `skill` packages are layered after the others
    /// and can be shadowed by a plugin of the same repository and commit.
    pub kind: String,
    /// The verified, read-only package tree.
    pub root: PathBuf,
    /// Which paths of the package the mode selects (see [`ModeFilter::package_filter`]).
    pub filter: PathFilter,
    /// Regular files that were executable in the package's source (the store keeps the tree's
    /// files 0444): staged with the execute bit.
    pub executables: BTreeSet<String>,
}

/// The project's `./.agents/` directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayInput {
    pub root: PathBuf,
    /// See [`ModeFilter::overlay_filter`].
    pub filter: PathFilter,
}

/// What changes behaviour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderOptions {
    /// `AGENTPACK_KEEP_ATTRIBUTION`: leave attribution settings and guidance out.
    pub keep_attribution: bool,
    /// `AGENTPACK_DOT_AGENTS` is not `0`: merge `./.agents/`.
    pub dot_agents_enabled: bool,
    /// `--yolo` at sync time (OpenCode's `"permission": "allow"`).
    pub yolo: bool,
    /// The absolute path of the agentpack executable hooks call.
    pub agentpack_exe: PathBuf,
    /// The final absolute path of the generation (known before the build).
    pub generation_root: PathBuf,
    /// `$AGENTPACK_HOME/projects/<hash>/plugin-data`: `${CLAUDE_PLUGIN_DATA}` becomes `<this>/<module>`.
    pub plugin_data_root: PathBuf,
}

/// Everything one generation is a function of.
#[derive(Debug, Clone, PartialEq)]
pub struct StageInputs {
    pub packages: Vec<PackageInput>,
    pub overlay: Option<OverlayInput>,
    /// The manifest's `[mcp.servers]`, in manifest order.
    pub mcp_servers: IndexMap<String, McpServer>,
    /// What runs instead of a server's written command (lock pins), by server name.
    pub mcp_launch: BTreeMap<String, McpLaunch>,
    /// The active mode (for `mcp:` selectors; package filters are in each [`PackageInput`]).
    pub mode: ModeFilter,
    pub options: RenderOptions,
}

/// A package after reading: its tree and what was found in it.
#[derive(Debug, Clone)]
pub(crate) struct LoadedPackage {
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

/// The `./.agents/` overlay after reading.
#[derive(Debug, Clone)]
pub(crate) struct LoadedOverlay {
    pub tree: PackageTree,
    pub artifacts: Vec<Artifact>,
    pub hooks: Vec<HookFile>,
    pub root: String,
}

/// What the agent renderers share.
pub(crate) struct Context<'a> {
    pub packages: &'a [LoadedPackage],
    pub overlay: Option<&'a LoadedOverlay>,
    pub servers: &'a [MergedServer],
    pub lsp: IndexMap<String, Value>,
    pub options: &'a RenderOptions,
    pub plugin_paths: Vec<String>,
}

impl Context<'_> {
    pub fn exe(&self) -> String {
        path_text(&self.options.agentpack_exe)
    }

    pub fn generation_root(&self) -> String {
        path_text(&self.options.generation_root)
    }

    pub fn plugin_path_refs(&self) -> Vec<&str> {
        self.plugin_paths.iter().map(String::as_str).collect()
    }

    /// Hook sources of the packages (not the overlay), with where they run.
    pub fn package_hooks(&self) -> Vec<PackageHooks> {
        self.packages
            .iter()
            .filter(|p| !p.hooks.is_empty())
            .map(|p| PackageHooks {
                module: p.input.module.clone(),
                plugin_root: p
                    .plugin_root
                    .clone()
                    .unwrap_or_else(|| path_text(&p.input.root)),
                plugin_data: p.plugin_data.clone(),
                files: p.hooks.clone(),
            })
            .collect()
    }

    /// The overlay's hooks (Claude Code and Codex only), run in `./.agents/` itself.
    pub fn overlay_hooks(&self) -> Option<PackageHooks> {
        let overlay = self.overlay?;
        (!overlay.hooks.is_empty()).then(|| PackageHooks {
            module: ".agents".into(),
            plugin_root: overlay.root.clone(),
            plugin_data: format!("{}/.agents", path_text(&self.options.plugin_data_root)),
            files: overlay.hooks.clone(),
        })
    }
}

pub(crate) fn path_text(path: &Path) -> String {
    path.to_string_lossy().trim_end_matches('/').to_string()
}

/// Pretty JSON with a trailing newline.
pub(crate) fn json_bytes(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// Pretty JSON text with a trailing newline.
pub(crate) fn json_string(value: &Value) -> String {
    String::from_utf8_lossy(&json_bytes(value)).into_owned()
}

/// The directory name of a package's staged copy: the first 16 hex digits of its cache_key.
pub fn plugin_root_dir(cache_key: &str) -> String {
    format!(
        "plugin-roots/{}",
        cache_key.chars().take(16).collect::<String>()
    )
}

/// Whether `skill` is shadowed by the full plugin `plugin` (same owner/repo/commit, and the
/// skill's path is the plugin's path or below it; an empty plugin path shadows every skill).
pub fn shadows(plugin: &PackageInput, skill: &PackageInput) -> bool {
    plugin.kind != "skill"
        && skill.kind == "skill"
        && plugin.owner.eq_ignore_ascii_case(&skill.owner)
        && plugin.repo.eq_ignore_ascii_case(&skill.repo)
        && plugin.commit.eq_ignore_ascii_case(&skill.commit)
        && (plugin.path.is_empty()
            || skill.path == plugin.path
            || skill.path.starts_with(&format!("{}/", plugin.path)))
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

fn read_plugin_servers(
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
        let items = match value.get("mcpServers") {
            None => continue,
            Some(Value::Array(items)) => items.clone(),
            Some(other) => vec![other.clone()],
        };
        for item in items {
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

fn load_package(
    input: &PackageInput,
    options: &RenderOptions,
    warnings: &mut Vec<String>,
) -> Result<LoadedPackage, HarnessError> {
    let tree = PackageTree::read(&input.root, &input.filter)?.with_executables(&input.executables);
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
        .without_link(home_layer::AGY_OVERLAY_LINK);
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

/// The manifest's `[mcp.servers]` the active mode selects, in manifest order.
fn selected_manifest_servers(inputs: &StageInputs) -> IndexMap<String, McpServer> {
    let mode = &inputs.mode;
    inputs
        .mcp_servers
        .iter()
        .filter(|(name, _)| mode.mcp_selected(name, mode.base_includes_mcp()))
        .map(|(n, s)| (n.clone(), s.clone()))
        .collect()
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
        let tree = PackageTree::read(&input.root, &input.filter)?;
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
    let manifest = selected_manifest_servers(inputs);
    Ok((
        mcp::merge(plugin_servers, &manifest, overlay_servers, &mut info),
        warnings,
    ))
}

/// Reads the inputs and renders every agent in `agents`.
pub fn render_generation(
    inputs: &StageInputs,
    agents: &[Agent],
) -> Result<GenerationPlan, HarnessError> {
    let options = &inputs.options;
    let mut warnings = Vec::new();
    let mut info = Vec::new();

    let mut packages = Vec::new();
    for input in layered_packages(&inputs.packages, &mut info) {
        packages.push(load_package(input, options, &mut warnings)?);
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

    // MCP: select by mode, localize plugin servers, merge, apply lock launches.
    let mode = &inputs.mode;
    let mut plugin_servers = Vec::new();
    for package in &packages {
        for server in &package.servers {
            if !mode.mcp_selected(&server.name, true) {
                continue;
            }
            let mut server = server.clone();
            if let Some(root) = &package.plugin_root {
                mcp::localize_plugin_server(&mut server.server, root, &package.plugin_data);
            }
            plugin_servers.push(server);
        }
    }
    // `mcp:<name>` selects a server whatever its source (see `mode_mcp`).
    let found: Vec<&str> = packages
        .iter()
        .flat_map(|p| p.servers.iter().map(|s| s.name.as_str()))
        .collect();
    for named in mode_mcp::plugin_servers_enabled_by_name(inputs, &found)? {
        let mut server = named.server;
        mcp::localize_plugin_server(&mut server.server, &named.plugin_root, &named.plugin_data);
        plugin_servers.push(server);
    }
    let manifest = selected_manifest_servers(inputs);
    let found: Vec<&str> = overlay_servers.iter().map(|s| s.name.as_str()).collect();
    let by_name = mode_mcp::overlay_servers_enabled_by_name(inputs, &found)?;
    let overlay_servers = overlay_servers
        .into_iter()
        .filter(|s| mode.mcp_selected(&s.name, mode.base_includes_mcp()))
        .chain(by_name)
        .collect();
    let mut servers = mcp::merge(plugin_servers, &manifest, overlay_servers, &mut info);
    for server in &mut servers {
        if let Some(launch) = inputs.mcp_launch.get(&server.name) {
            server.server.command = Some(launch.command.clone());
            server.server.args = launch.args.clone();
        }
    }

    // Language servers, later packages win, plugin variables substituted.
    let mut lsp_servers = IndexMap::new();
    for package in &packages {
        for (name, definition) in &package.lsp {
            let text = definition.to_string();
            let root = package
                .plugin_root
                .clone()
                .unwrap_or_else(|| path_text(&package.input.root));
            let (text, _) = mcp::substitute_plugin_vars(&text, &root, &package.plugin_data);
            lsp_servers.insert(
                name.clone(),
                serde_json::from_str(&text).unwrap_or_else(|_| definition.clone()),
            );
        }
    }

    let mut shared = SharedPlan::default();
    for package in packages.iter().filter(|p| p.plugin_root.is_some()) {
        let dir = plugin_root_dir(&package.input.cache_key);
        for (relative, entry) in package.tree.entries() {
            let planned = match entry {
                TreeEntry::File { executable } => PlanEntry::FromFile {
                    source: package.tree.absolute(relative),
                    executable: *executable,
                },
                // Only links that stay inside the package are kept; the others were reported.
                TreeEntry::Symlink { target } => match package.tree.resolve(relative) {
                    Ok(_) => PlanEntry::Symlink(PathBuf::from(target)),
                    Err(_) => continue,
                },
            };
            shared.entries.insert(format!("{dir}/{relative}"), planned);
        }
    }

    let plugin_paths = vec![
        format!("{}/plugin-roots/", path_text(&options.generation_root)),
        mcp::plugin_data_prefix(&options.plugin_data_root),
    ];
    let context = Context {
        packages: &packages,
        overlay: overlay.as_ref(),
        servers: &servers,
        lsp: lsp_servers,
        options,
        plugin_paths,
    };
    let mut plans = BTreeMap::new();
    for agent in agents {
        let plan = match agent {
            Agent::Claude => claude::render(&context),
            Agent::Cursor => cursor::render(&context),
            Agent::OpenCode => opencode::render(&context),
            Agent::Codex => codex::render(&context),
            Agent::Grok => grok::render(&context),
            Agent::Antigravity => antigravity::render(&context),
        };
        plans.insert(*agent, plan);
    }
    Ok(GenerationPlan {
        agents: plans,
        shared,
        warnings,
        info,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(kind: &str, path: &str, commit: &str) -> PackageInput {
        PackageInput {
            module: format!("github.com/acme/repo/{path}"),
            cache_key: String::new(),
            owner: "Acme".into(),
            repo: "repo".into(),
            path: path.into(),
            commit: commit.into(),
            kind: kind.into(),
            root: PathBuf::new(),
            filter: PathFilter::all(),
            executables: BTreeSet::new(),
        }
    }

    #[test]
    fn a_plugin_shadows_the_skills_inside_it() {
        let c = "a".repeat(40);
        let plugin = input("plugin", "plugins/p", &c);
        assert!(shadows(&plugin, &input("skill", "plugins/p", &c)));
        assert!(shadows(&plugin, &input("skill", "plugins/p/skills/x", &c)));
        assert!(!shadows(
            &plugin,
            &input("skill", "plugins/pp/skills/x", &c)
        ));
        assert!(!shadows(
            &plugin,
            &input("skill", "plugins/p/skills/x", &"b".repeat(40))
        ));
        assert!(!shadows(&plugin, &input("plugin", "plugins/p/sub", &c)));
        let mut lower = input("skill", "anything", &c);
        lower.owner = "acme".into();
        assert!(shadows(&input("plugin", "", &c), &lower));
    }
}
