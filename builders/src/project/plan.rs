//! Step 2, `plan(&Resolved, mode, agents) -> Plan`: everything a build would stage, computed
//! without writing anything.
//!
//! A [`Plan`] holds, for every agent asked for, every file it would stage (with the package or
//! layer it comes from), every collision and the package that kept the name, what rendering
//! reported (conversions that dropped or changed something), the MCP servers as they will run
//! (the lock's pins applied), the hook configurations as rendered, the store paths the build will
//! publish and the links a launch places in the workspace. It is serialisable
//! (`sync --dry-run --json`); the fields the build needs (the generation's inputs and the rendered
//! files) are kept beside it, not serialised.
//!
//! Reads: the overlay and eject's record ([`super::inputs`]), the package trees (rendering), the
//! store's record of each package's executable files. Writes nothing: the exec specs of
//! tree-locked MCP servers are named here and published by [`super::ProjectSession::build`].

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use agentpack_harness::{Agent, Collision, PlanEntry};
use serde::Serialize;

use crate::generation::{self, GenerationInputs, RenderedGeneration};
use crate::mcp_lock::{self, PlannedExecSpecs};

use super::inputs::{locked_packages, overlay_for};
use super::{PipelineError, ProjectSession, Resolved, ResolvedMode};

/// What changes rendering that the cli reads from its flags and environment.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// `--yolo`.
    pub yolo: bool,
    /// `AGENTPACK_KEEP_ATTRIBUTION`.
    pub keep_attribution: bool,
    /// `AGENTPACK_DOT_AGENTS` is not `0`: the workspace's `./.agents/` overlay is staged.
    pub dot_agents: bool,
    /// The running agentpack executable (hooks and `mcp-exec` run it).
    pub agentpack_exe: PathBuf,
}

/// Where a staged file comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    /// An unchanged file of a locked package.
    Package,
    /// An unchanged file of the workspace's `./.agents/` overlay.
    Overlay,
    /// Content rendered or converted for the agent (settings, hooks, MCP configs, converted
    /// commands and agents).
    Rendered,
    /// A link inside a package.
    Link,
}

/// One file a build would stage.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedStagedFile {
    /// Relative to the generation root.
    pub path: String,
    pub layer: Layer,
    /// The package it comes from, when it is a package's file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
}

/// An MCP server as the agents will run it.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedMcpServer {
    pub name: String,
    /// Where it is defined (`agentpack.toml`, `.agents/mcp.json`, `<module> (<file>)`).
    pub source: String,
    /// What runs instead of the written command, when the lock pins it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch: Option<Vec<String>>,
}

/// One rendered hook configuration (`hooks.json`, OpenCode's `agentpack-hooks.js`) as staged.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedHooks {
    /// Relative to the generation root.
    pub path: String,
    /// The file as rendered (hook commands run `agentpack hook-exec` over the package's hooks).
    pub text: String,
}

/// Everything a build would stage: see the module doc.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub mode: String,
    pub mode_dir: String,
    pub selectors: Vec<String>,
    /// The agents planned, sorted.
    pub agents: Vec<String>,
    /// The store path name the generation will have.
    pub generation: String,
    /// Where it will be.
    pub generation_path: PathBuf,
    /// The locked packages it stages from, by module, with their verified store paths.
    pub packages: BTreeMap<String, PathBuf>,
    /// The workspace overlay staged, when there is one.
    pub overlay: Option<PathBuf>,
    /// Every file per agent (`shared`: the package copies every agent's files point into).
    pub files: BTreeMap<String, Vec<PlannedStagedFile>>,
    /// Artifacts of two packages that would take one name, and how both are kept.
    pub collisions: Vec<Collision>,
    /// What rendering reported: conversions that dropped or changed something, unreadable
    /// inputs.
    pub warnings: Vec<String>,
    /// What reading the MCP definitions reported (an unreadable `.mcp.json`...); also in the
    /// session's warnings.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mcp_warnings: Vec<String>,
    /// Routine notes of rendering (hooks rendered, fields mapped).
    pub info: Vec<String>,
    pub mcp_servers: Vec<PlannedMcpServer>,
    /// Each agent's rendered hook configurations.
    pub hooks: BTreeMap<String, Vec<PlannedHooks>>,
    /// Store paths the build publishes besides the generation (MCP exec specs), by name.
    pub store_writes: Vec<String>,
    /// Links a launch of each agent places in the workspace.
    pub workspace_writes: BTreeMap<String, Vec<String>>,
    #[serde(skip)]
    pub(crate) inputs: GenerationInputs,
    #[serde(skip)]
    pub(crate) rendered: RenderedGeneration,
    #[serde(skip)]
    pub(crate) exec_specs: PlannedExecSpecs,
    #[serde(skip)]
    pub(crate) servers: Vec<agentpack_harness::MergedServer>,
}

impl Plan {
    /// The generation's inputs (what its name is a function of).
    pub fn inputs(&self) -> &GenerationInputs {
        &self.inputs
    }

    /// What rendering produced, file by file.
    pub fn rendered(&self) -> &RenderedGeneration {
        &self.rendered
    }

    /// The agents planned.
    pub fn agent_list(&self) -> &[Agent] {
        &self.rendered.agents
    }

    /// The MCP servers as their sources define them (before the lock's pins; `mcp_servers` is
    /// how they run).
    pub fn merged_servers(&self) -> &[agentpack_harness::MergedServer] {
        &self.servers
    }

    /// Every entry the plan stages for `agent`, by path relative to the generation; `None` when
    /// `agent` was not planned.
    pub fn agent_entries(&self, agent: Agent) -> Option<&BTreeMap<String, PlanEntry>> {
        self.rendered
            .plan
            .agents
            .get(&agent)
            .map(|plan| &plan.entries)
    }

    /// The `./.agents/` overlay as the renderer reads it (the mode's filter applied), when one
    /// is staged.
    pub fn overlay_input(&self) -> Option<agentpack_harness::OverlayInput> {
        self.inputs
            .overlay
            .as_ref()
            .map(|(root, _)| agentpack_harness::OverlayInput {
                root: root.clone(),
                filter: self.inputs.mode.overlay_filter(),
            })
    }

    /// The locked packages as the renderer reads them: verified roots, the mode's filter and
    /// executable files applied, in lock order.
    pub fn package_inputs(&self) -> Vec<agentpack_harness::PackageInput> {
        self.inputs
            .packages
            .iter()
            .map(|package| agentpack_harness::PackageInput {
                filter: self.inputs.mode.package_filter(&package.input.module),
                ..package.input.clone()
            })
            .collect()
    }
}

/// What [`ProjectSession::planned_inputs`] computes before any rendering.
#[derive(Debug, Clone)]
pub struct PlannedInputs {
    /// The generation's inputs, MCP launches and exec-spec references included.
    pub inputs: GenerationInputs,
    /// The MCP servers as their sources define them.
    pub servers: Vec<agentpack_harness::MergedServer>,
    /// The exec specs of tree-locked MCP servers, named, published by a build.
    pub exec_specs: PlannedExecSpecs,
    /// What reading the MCP definitions reported (also in the session's warnings).
    pub mcp_warnings: Vec<String>,
}

impl ProjectSession {
    /// The generation inputs of `resolved` in `mode` (everything but the MCP launches, which
    /// [`ProjectSession::plan`] adds from the lock), with the overlay's warnings collected.
    pub fn generation_inputs(
        &self,
        resolved: &Resolved,
        mode: &ResolvedMode,
        options: &PlanOptions,
    ) -> Result<GenerationInputs, PipelineError> {
        let packages = locked_packages(self.store(), &resolved.lock, &resolved.slots)?;
        let overlaid = overlay_for(mode, &self.roots().workspace, options.dot_agents)?;
        self.warn_all(overlaid.warnings);
        let inputs = GenerationInputs {
            mode_name: mode.name.clone(),
            mode_dir: mode.dir.clone(),
            mode: overlaid.filter,
            mode_selectors: overlaid.selectors,
            packages,
            overlay: overlaid.overlay,
            mcp_servers: self.manifest().mcp_servers.clone(),
            mcp_launch: BTreeMap::new(),
            keep_attribution: options.keep_attribution,
            yolo: options.yolo,
            agentpack_exe: options.agentpack_exe.clone(),
            plugin_data_root: self.roots().state_dir().join("plugin-data"),
            extra_references: Vec::new(),
            listings: self.listings.clone(),
        };
        Ok(generation::resolve_source_executables(
            self.store(),
            &inputs,
        ))
    }

    /// The MCP servers of `resolved` in `mode` (plugins, manifest, `./.agents/mcp.json`) as their
    /// sources define them, before any lock pin; their warnings go to the session.
    pub fn mcp_servers(
        &self,
        resolved: &Resolved,
        mode: &ResolvedMode,
        options: &PlanOptions,
    ) -> Result<Vec<agentpack_harness::MergedServer>, PipelineError> {
        let inputs = self.generation_inputs(resolved, mode, options)?;
        let (servers, warnings) = generation::merged_mcp_servers(self.store(), &inputs)?;
        self.warn_all(warnings);
        Ok(servers)
    }

    /// The complete generation inputs of `resolved` in `mode`, the MCP launches the lock pins
    /// included, without rendering anything: what a launch needs to find a published generation
    /// and render its agent's secret-bearing values. The MCP definitions' and the lock records'
    /// warnings go to the session.
    pub fn planned_inputs(
        &self,
        resolved: &Resolved,
        mode: &ResolvedMode,
        options: &PlanOptions,
    ) -> Result<PlannedInputs, PipelineError> {
        let mut inputs = self.generation_inputs(resolved, mode, options)?;
        // MCP servers run what the lock pins: an exact npm version, or `mcp-exec` over a locked
        // tree (its spec is a store path named now, published by the build).
        let (servers, mcp_warnings) = generation::merged_mcp_servers(self.store(), &inputs)?;
        self.warn_all(mcp_warnings.iter().cloned());
        let exec_specs = mcp_lock::plan_exec_specs(self.store(), &resolved.lock, &servers);
        inputs.mcp_launch = mcp_lock::launches_for(
            &resolved.lock,
            &servers,
            &inputs.agentpack_exe,
            &exec_specs.specs.paths,
        );
        inputs
            .extra_references
            .clone_from(&exec_specs.specs.references);
        self.warn_all(mcp_lock::unlocked_warnings(&resolved.lock, &servers));
        Ok(PlannedInputs {
            inputs,
            servers,
            exec_specs,
            mcp_warnings,
        })
    }

    /// Step 2 (see the module doc). Rendering's own warnings stay in the plan (the cli says them
    /// when the build renders); what reading the MCP definitions and the lock's records said goes
    /// to the session.
    pub fn plan(
        &self,
        resolved: &Resolved,
        mode: &ResolvedMode,
        agents: &[Agent],
        options: &PlanOptions,
    ) -> Result<Plan, PipelineError> {
        let planned = self.planned_inputs(resolved, mode, options)?;
        self.plan_of(planned, mode, agents)
    }

    /// [`ProjectSession::plan`] from inputs [`ProjectSession::planned_inputs`] computed.
    pub fn plan_of(
        &self,
        planned: PlannedInputs,
        mode: &ResolvedMode,
        agents: &[Agent],
    ) -> Result<Plan, PipelineError> {
        let PlannedInputs {
            inputs,
            servers,
            exec_specs,
            mcp_warnings,
        } = planned;
        let rendered = generation::render_for(self.store(), &inputs, agents)?;

        let packages: BTreeMap<String, PathBuf> = inputs
            .packages
            .iter()
            .map(|p| (p.input.module.clone(), p.store_path.path().to_path_buf()))
            .collect();
        let overlay = inputs.overlay.as_ref().map(|(dir, _)| dir.clone());
        // A staged file's package is found by its ancestors (a few lookups per file, not one
        // comparison per package); of modules sharing one store path, the first by name.
        let mut module_of_root: HashMap<&Path, &String> = HashMap::with_capacity(packages.len());
        for (module, root) in &packages {
            module_of_root.entry(root.as_path()).or_insert(module);
        }
        let layer_of = |entry: &PlanEntry| -> (Layer, Option<String>) {
            match entry {
                PlanEntry::Bytes(_) => (Layer::Rendered, None),
                PlanEntry::Symlink(_) => (Layer::Link, None),
                PlanEntry::FromFile { source, .. } => {
                    if let Some(module) = source.ancestors().find_map(|dir| module_of_root.get(dir))
                    {
                        (Layer::Package, Some((*module).clone()))
                    } else if overlay.as_ref().is_some_and(|dir| source.starts_with(dir)) {
                        (Layer::Overlay, None)
                    } else {
                        (Layer::Package, None)
                    }
                }
            }
        };
        let view = |entries: &BTreeMap<String, PlanEntry>| -> Vec<PlannedStagedFile> {
            entries
                .iter()
                .map(|(path, entry)| {
                    let (layer, package) = layer_of(entry);
                    PlannedStagedFile {
                        path: path.clone(),
                        layer,
                        package,
                    }
                })
                .collect()
        };
        let mut files = BTreeMap::new();
        files.insert("shared".to_owned(), view(&rendered.plan.shared.entries));
        let mut workspace_writes = BTreeMap::new();
        let mut hooks = BTreeMap::new();
        for (agent, agent_plan) in &rendered.plan.agents {
            files.insert(agent.as_str().to_owned(), view(&agent_plan.entries));
            let rendered_hooks = hook_files(&agent_plan.entries);
            if !rendered_hooks.is_empty() {
                hooks.insert(agent.as_str().to_owned(), rendered_hooks);
            }
            let writes = workspace_links(*agent, &agent_plan.entries);
            if !writes.is_empty() {
                workspace_writes.insert(agent.as_str().to_owned(), writes);
            }
        }
        let mcp_servers = servers
            .iter()
            .map(|server| PlannedMcpServer {
                name: server.name.clone(),
                source: server.source.describe(),
                launch: inputs.mcp_launch.get(&server.name).map(|launch| {
                    std::iter::once(launch.command.clone())
                        .chain(launch.args.iter().cloned())
                        .collect()
                }),
            })
            .collect();
        Ok(Plan {
            mode: mode.name.clone(),
            mode_dir: mode.dir.clone(),
            selectors: inputs.mode_selectors.clone(),
            agents: rendered
                .agents
                .iter()
                .map(|agent| agent.as_str().to_owned())
                .collect(),
            generation: rendered.name.as_str().to_owned(),
            generation_path: self.store().store_dir().join(rendered.name.as_str()),
            packages: packages.clone(),
            overlay: overlay.clone(),
            files,
            collisions: rendered.collisions.clone(),
            warnings: rendered.warnings.clone(),
            mcp_warnings,
            info: rendered.info.clone(),
            mcp_servers,
            hooks,
            store_writes: exec_specs
                .planned
                .iter()
                .map(|spec| spec.name.as_str().to_owned())
                .collect(),
            workspace_writes,
            inputs,
            rendered,
            exec_specs,
            servers,
        })
    }
}

/// The rendered hook configurations among `entries`: the files the renderers write hooks into
/// (`hooks.json`, `agentpack-hooks.js`).
fn hook_files(entries: &BTreeMap<String, PlanEntry>) -> Vec<PlannedHooks> {
    entries
        .iter()
        .filter(|(path, _)| {
            let name = path.rsplit('/').next().unwrap_or(path);
            name == "hooks.json" || name == "agentpack-hooks.js"
        })
        .filter_map(|(path, entry)| match entry {
            PlanEntry::Bytes(bytes) => Some(PlannedHooks {
                path: path.clone(),
                text: String::from_utf8_lossy(bytes).into_owned(),
            }),
            _ => None,
        })
        .collect()
}

/// The links a launch of `agent` places in the workspace for what its plan stages (see
/// `harness::launch::home_layer::prepare`): the agent's [`agentpack_harness::agent::WorkspaceLink`]
/// (Cursor's `.cursor/agents`, agy's workspace plugin link), when the plan stages its target.
pub fn workspace_links(agent: Agent, entries: &BTreeMap<String, PlanEntry>) -> Vec<String> {
    let Some(link) = &agent.profile().workspace_link else {
        return Vec::new();
    };
    let prefix = format!("{}/", link.generation_dir);
    if entries.keys().any(|p| p.starts_with(&prefix)) {
        vec![link.workspace_path.to_owned()]
    } else {
        Vec::new()
    }
}
