//! What the mode editor can toggle and what a mode stages: the I/O half of the editor.
//!
//! Owns [`ProjectContent`]: the locked packages whose content is in the cache, the `./.agents/`
//! overlay and the manifest's MCP servers, read once when the editor opens. From it come the
//! toggleable [`Item`]s (every package, each artifact file or skill directory inside it, every MCP
//! server, the `./.agents/` entries) and, per mode, a [`Preview`]: the same
//! `harness::render_generation` a sync runs, summarized per agent. Only reads files; never writes,
//! never fetches, never locks.

use std::collections::BTreeSet;
use std::path::PathBuf;

use agentpack_harness::input::artifact::{self, ArtifactKind};
use agentpack_harness::input::tree::PackageTree;
use agentpack_harness::launch::home_layer::AGY_OVERLAY_LINK;
use agentpack_harness::render::mcp::McpSource;
use agentpack_harness::{
    collect_mcp_servers, render_generation, Agent, ModeFilter, OverlayInput, PackageInput,
    PackageListings, PathFilter, RenderOptions, StageInputs,
};
use agentpack_lockfile::{Lockfile, Manifest, Mode, ModuleId, Selector};
use anyhow::{Context as _, Result};
use indexmap::IndexMap;

use super::state::{AgentSummary, Item, Preview, Target};
use crate::context::Context;
use crate::env::{self, EnvVars};
use crate::project::Project;

/// The project's stageable content, mode-independent.
#[derive(Debug, Clone)]
pub struct ProjectContent {
    /// Locked packages whose content is in the cache (their filter is replaced per mode).
    packages: Vec<PackageInput>,
    /// Locked packages whose content is not in the cache.
    missing: Vec<String>,
    overlay: Option<PathBuf>,
    mcp_servers: IndexMap<String, agentpack_lockfile::McpServer>,
    options: RenderOptions,
    /// The packages' listings (store paths), walked once for every mode previewed.
    listings: PackageListings,
}

impl ProjectContent {
    /// Reads the lock's packages from the cache and finds the overlay.
    pub fn load(ctx: &Context, project: &Project, manifest: &Manifest) -> Result<Self> {
        let lock: Lockfile = project.load_lock(manifest)?;
        let cache = project.home.root.join("cache");
        let mut packages = Vec::new();
        let mut missing = Vec::new();
        for package in &lock.packages {
            let slot = cache.join(package.cache_key.as_str());
            match fs_err::canonicalize(&slot) {
                // No executables: only the execute bit of staged files depends on them, not shown here.
                Ok(root) if root.is_dir() => packages.push(PackageInput::locked(package, root)),
                _ => missing.push(package.module.as_str().to_owned()),
            }
        }
        // Declared but not locked yet: shown as toggleable, without content.
        for module in manifest.dependencies.keys() {
            if !lock.packages.iter().any(|p| &p.module == module) {
                missing.push(module.as_str().to_owned());
            }
        }
        // The workspace's overlay, as a sync stages it (separate roots: not the definition's).
        let overlay_dir = project.workspace.join(".agents");
        let overlay = (env::var(EnvVars::AGENTPACK_DOT_AGENTS).as_deref() != Some("0")
            && overlay_dir.is_dir())
        .then_some(overlay_dir);
        let agentpack_exe = std::env::current_exe()
            .context("cannot find the path of the running agentpack executable")?;
        Ok(Self {
            packages,
            missing,
            options: RenderOptions {
                keep_attribution: env::flag(EnvVars::AGENTPACK_KEEP_ATTRIBUTION),
                dot_agents_enabled: overlay.is_some(),
                yolo: ctx.yolo,
                agentpack_exe,
                generation_root: project.staging_root.join("mode-tui-preview"),
                plugin_data_root: project.state_dir().join("plugin-data"),
            },
            overlay,
            mcp_servers: manifest.mcp_servers.clone(),
            listings: PackageListings::default(),
        })
    }

    fn stage_inputs(&self, mode: &ModeFilter) -> StageInputs {
        StageInputs {
            packages: self
                .packages
                .iter()
                .map(|p| PackageInput {
                    filter: mode.package_filter(&p.module),
                    ..p.clone()
                })
                .collect(),
            overlay: self.overlay.as_ref().map(|root| OverlayInput {
                root: root.clone(),
                filter: mode.overlay_filter(),
            }),
            mcp_servers: self.mcp_servers.clone(),
            mcp_launch: Default::default(),
            mode: mode.clone(),
            options: self.options.clone(),
            listings: self.listings.clone(),
        }
    }

    /// Every toggleable item: each package then its artifact paths, the MCP servers, then the
    /// `./.agents/` entries. Returns warnings about what could not be read.
    pub fn items(&self) -> (Vec<Item>, Vec<String>) {
        let mut items = Vec::new();
        let mut warnings = Vec::new();
        let mut modules: Vec<&str> = self
            .packages
            .iter()
            .map(|p| p.module.as_str())
            .chain(self.missing.iter().map(String::as_str))
            .collect();
        modules.sort_unstable();
        modules.dedup();
        for module_text in modules {
            let Ok(module) = ModuleId::parse(module_text) else {
                continue;
            };
            let input = self.packages.iter().find(|p| p.module == module_text);
            items.push(Item {
                selector: Selector::Package(module.clone()),
                target: Target::PackageFile {
                    module: module_text.to_owned(),
                    path: String::new(),
                },
                note: if input.is_none() {
                    "not in the cache".to_owned()
                } else {
                    String::new()
                },
            });
            let Some(input) = input else { continue };
            match artifact_paths(input) {
                Ok(paths) => {
                    for path in paths {
                        items.push(Item {
                            selector: Selector::PackagePath {
                                module: module.clone(),
                                path: path.clone(),
                            },
                            target: Target::PackageFile {
                                module: module_text.to_owned(),
                                path,
                            },
                            note: String::new(),
                        });
                    }
                }
                Err(e) => warnings.push(format!("cannot list {module_text}: {e}")),
            }
        }
        match collect_mcp_servers(&self.stage_inputs(&ModeFilter::all())) {
            Ok((servers, more)) => {
                warnings.extend(more);
                let mut seen = BTreeSet::new();
                for server in servers {
                    if !seen.insert(server.name.clone()) {
                        continue;
                    }
                    let (module, note) = match &server.source {
                        McpSource::Plugin { module, .. } => (Some(module.clone()), module.clone()),
                        McpSource::Manifest => (None, "agentpack.toml".to_owned()),
                        McpSource::DotAgents => (None, ".agents/mcp.json".to_owned()),
                    };
                    items.push(Item {
                        selector: Selector::Mcp(server.name.clone()),
                        target: Target::Mcp {
                            name: server.name,
                            module,
                        },
                        note,
                    });
                }
            }
            Err(e) => warnings.push(format!("cannot read the MCP servers: {e}")),
        }
        if let Some(root) = &self.overlay {
            match overlay_paths(root) {
                Ok(paths) => {
                    for path in paths {
                        items.push(Item {
                            selector: Selector::Agents(path.clone()),
                            target: Target::Agents { path },
                            note: String::new(),
                        });
                    }
                }
                Err(e) => warnings.push(format!("cannot list {}: {e}", root.display())),
            }
        }
        (items, warnings)
    }

    /// What `mode` stages for each agent: the render plan of a sync, summarized.
    pub fn preview(&self, mode_name: &str, mode: &Mode) -> Preview {
        let filter = ModeFilter::from_mode(mode);
        let inputs = self.stage_inputs(&filter);
        let agents = render_generation(&inputs, &Agent::ALL)
            .map_err(|e| e.to_string())
            .and_then(|plan| {
                let servers = collect_mcp_servers(&inputs)
                    .map_err(|e| e.to_string())?
                    .0
                    .len();
                Ok(plan
                    .agents
                    .values()
                    .map(|agent_plan| {
                        let mut summary = summarize(agent_plan.entries.keys().map(String::as_str));
                        summary.agent = agent_plan.agent.as_str().to_owned();
                        summary.mcp_servers = servers;
                        summary
                    })
                    .collect())
            });
        Preview {
            mode_name: mode_name.to_owned(),
            mode: mode.clone(),
            agents,
            missing: self.missing.clone(),
        }
    }
}

/// The selectable paths of a package: each command, agent and rule file, each skill directory.
fn artifact_paths(input: &PackageInput) -> Result<Vec<String>, agentpack_harness::HarnessError> {
    let tree = PackageTree::read(&input.root, &PathFilter::all())?;
    let root_skill = input.module.rsplit('/').next().unwrap_or("skill");
    let discovery = artifact::discover(&tree, &input.module, root_skill)?;
    let mut paths = BTreeSet::new();
    for found in discovery.artifacts {
        let path = match found.kind {
            ArtifactKind::Skill => match found.source_relative.rsplit_once('/') {
                Some((dir, _)) => dir.to_owned(),
                // A skill at the package root is the package itself.
                None => continue,
            },
            _ => found.source_relative,
        };
        paths.insert(path);
    }
    Ok(paths.into_iter().collect())
}

/// The `./.agents/` entries: each top-level entry and the entries one level below a directory,
/// without agentpack's own Antigravity link.
fn overlay_paths(root: &std::path::Path) -> std::io::Result<Vec<String>> {
    let mut paths = Vec::new();
    let mut top: Vec<_> = fs_err::read_dir(root)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    for name in top {
        let dir = root.join(&name);
        let mut children: Vec<String> = if dir.is_dir() && !dir.is_symlink() {
            fs_err::read_dir(&dir)?
                .filter_map(|e| e.ok())
                .map(|e| format!("{name}/{}", e.file_name().to_string_lossy()))
                .filter(|path| path != AGY_OVERLAY_LINK)
                .collect()
        } else {
            Vec::new()
        };
        children.sort();
        if name == "plugins" && children.is_empty() && dir.join("agentpack-bundle").exists() {
            continue;
        }
        if Selector::parse(&format!(".agents:{name}")).is_ok() {
            paths.push(name);
        }
        paths.extend(
            children
                .into_iter()
                .filter(|p| Selector::parse(&format!(".agents:{p}")).is_ok()),
        );
    }
    Ok(paths)
}

/// Sorts the entries of one agent's render plan into skills, commands, agents and rules by where
/// they are staged (`.../skills/<name>/SKILL.md`, `.../commands/<name>.md`, ...).
pub fn summarize<'a>(paths: impl Iterator<Item = &'a str>) -> AgentSummary {
    let mut summary = AgentSummary::default();
    let stem = |file: &str| file.rsplit_once('.').map_or(file, |(s, _)| s).to_owned();
    for path in paths {
        let segments: Vec<&str> = path.split('/').collect();
        if let Some(at) = segments.iter().rposition(|s| *s == "skills") {
            if segments.len() == at + 3 && segments[at + 2] == "SKILL.md" {
                summary.skills.push(segments[at + 1].to_owned());
            }
            continue;
        }
        let Some((file, dirs)) = segments.split_last() else {
            continue;
        };
        let Some(dir) = dirs.last() else { continue };
        let is_doc = file.ends_with(".md") || file.ends_with(".mdc") || file.ends_with(".toml");
        if !is_doc {
            continue;
        }
        match *dir {
            "commands" | "command" | "prompts" => summary.commands.push(stem(file)),
            "agents" | "agent" => summary.agents.push(stem(file)),
            "rules" => summary.rules.push(stem(file)),
            _ => {}
        }
    }
    for list in [
        &mut summary.skills,
        &mut summary.commands,
        &mut summary.agents,
        &mut summary.rules,
    ] {
        list.sort();
        list.dedup();
    }
    summary
}
