//! The pure half of the harness: every agent's staged tree, MCP servers, hooks, language servers,
//! attribution and the eject plan, as data, from inputs already read.
//!
//! [`render`] takes the [`Loaded`] inputs (what [`crate::input`] read from the verified package
//! trees and `./.agents/`) and returns a [`GenerationPlan`]. Nothing in this module or below it
//! touches the filesystem, spawns a process, reads an environment variable or the clock, or
//! prints: file contents arrive already read (artifacts, hooks, MCP and LSP definitions), and the
//! one place that compares the bytes of unchanged package files (collision detection) gets them
//! through the [`ReadSource`] the caller passes in. Equal inputs give equal plans; the property
//! test in `harness/tests/it/render_pure.rs` renders twice and from another working directory and
//! compares. `grep -rnE "fs_err|std::fs|std::process|std::env|Command" harness/src/render` stays
//! empty.
//!
//! Per agent: one module ([`claude`], [`cursor`], [`opencode`], [`codex`], [`grok`],
//! [`antigravity`]) whose `render` the agent's [`crate::agent::AgentProfile`] row points at. Shared
//! formats: [`layout`] (artifact placement), [`collision`], [`convert`], [`frontmatter`], [`mcp`],
//! [`hooks`], [`lsp`], [`attribution`], [`credentials`], [`eject`].

pub mod antigravity;
pub mod attribution;
pub mod claude;
pub mod codex;
pub(crate) mod collision;
pub mod convert;
pub mod credentials;
mod css_colors;
pub mod cursor;
pub mod eject;
pub mod frontmatter;
pub mod grok;
pub mod hooks;
pub(crate) mod layout;
pub mod lsp;
pub mod mcp;
pub mod opencode;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;

use crate::input::tree::TreeEntry;
use crate::input::{Loaded, LoadedOverlay, LoadedPackage};
use crate::plan::{GenerationPlan, PlanEntry, SharedPlan};
use crate::render::hooks::PackageHooks;
use crate::render::mcp::{McpServer, MergedServer};
use crate::{path_text, plugin_root_dir, Agent, RenderOptions, StageInputs};

/// Reads the bytes of an unchanged input file a plan entry names ([`PlanEntry::FromFile`]), for
/// comparing two packages' files of one name; `None` when it cannot be read (then they differ).
pub type ReadSource<'a> = &'a dyn Fn(&Path) -> Option<Vec<u8>>;

/// What the agent renderers share.
pub(crate) struct Context<'a> {
    pub packages: &'a [LoadedPackage],
    pub overlay: Option<&'a LoadedOverlay>,
    pub servers: &'a [MergedServer],
    pub lsp: IndexMap<String, Value>,
    pub options: &'a RenderOptions,
    pub plugin_paths: Vec<String>,
    pub read_source: ReadSource<'a>,
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

/// The manifest's `[mcp.servers]` the active mode selects, in manifest order.
pub(crate) fn selected_manifest_servers(inputs: &StageInputs) -> IndexMap<String, McpServer> {
    let mode = &inputs.mode;
    inputs
        .mcp_servers
        .iter()
        .filter(|(name, _)| mode.mcp_selected(name, mode.base_includes_mcp()))
        .map(|(n, s)| (n.clone(), s.clone()))
        .collect()
}

/// Renders every agent in `agents` from the loaded inputs. Pure (see the module doc).
pub fn render(
    loaded: &Loaded,
    inputs: &StageInputs,
    agents: &[Agent],
    read_source: ReadSource<'_>,
) -> GenerationPlan {
    let options = &inputs.options;
    let packages = &loaded.packages;
    let mut info = loaded.info.clone();

    // MCP: select by mode, localize plugin servers, merge, apply lock launches.
    let mode = &inputs.mode;
    let mut plugin_servers = Vec::new();
    for package in packages {
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
    // `mcp:<name>` selects a server whatever its source (see `input::mode_mcp`).
    for named in &loaded.plugin_servers_by_name {
        let mut server = named.server.clone();
        mcp::localize_plugin_server(&mut server.server, &named.plugin_root, &named.plugin_data);
        plugin_servers.push(server);
    }
    let manifest = selected_manifest_servers(inputs);
    let overlay_servers = loaded
        .overlay_servers
        .iter()
        .filter(|s| mode.mcp_selected(&s.name, mode.base_includes_mcp()))
        .chain(&loaded.overlay_servers_by_name)
        .cloned()
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
    for package in packages {
        for (name, definition) in &package.lsp {
            let text = definition.to_string();
            let root = package.plugin_root_or_dir();
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
        packages,
        overlay: loaded.overlay.as_ref(),
        servers: &servers,
        lsp: lsp_servers,
        options,
        plugin_paths,
        read_source,
    };
    let plans = agents
        .iter()
        .map(|agent| (*agent, (agent.profile().render)(&context)))
        .collect::<BTreeMap<_, _>>();
    GenerationPlan {
        agents: plans,
        shared,
        warnings: loaded.warnings.clone(),
        info,
    }
}
