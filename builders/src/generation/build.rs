//! Building a generation from its inputs: find one already published ([`reuse_published`]),
//! render without writing ([`render_for`]: a [`RenderedGeneration`]), publish what was rendered
//! ([`publish_rendered`]); [`build_generation_for`] is all three. Also the renders that never
//! reach the store: the MCP servers as their sources define them and the secret-bearing values.
//!
//! Unchanged skill directories are published as links into their packages' store paths where the
//! agent reads through them (`share`). Writes only in [`publish_rendered`] (through
//! `Store::publish_files`).

use std::collections::{BTreeMap, BTreeSet};

use agentpack_harness::{
    render_generation, Agent, OverlayInput, PackageInput, PlanEntry, RenderOptions, StageInputs,
};
use agentpack_store::{PlannedFile, Source, Store, StorePath, StorePathName};

use super::{
    share, staged, GenerationBuild, GenerationError, GenerationInputs, Machine, REPORT_FILE,
};

/// The published generation of `inputs` for `agents` (`None`: every agent), whatever machine
/// inputs it mentions.
fn published(
    store: &Store,
    inputs: &GenerationInputs,
    agents: Option<&[Agent]>,
) -> Option<StorePath> {
    Machine::all().find_map(|machine| store.get(&inputs.store_path_name_with(machine, agents)))
}

/// `inputs` with each package's source executables read from the store.
fn with_source_executables(store: &Store, inputs: &GenerationInputs) -> GenerationInputs {
    let mut inputs = inputs.clone();
    for package in &mut inputs.packages {
        if package.input.executables.is_empty() {
            package.input.executables = store
                .source_executables(&package.store_path)
                .into_iter()
                .collect();
        }
    }
    inputs
}

/// Builds the generation for `inputs` (every agent), or finds it already published.
pub fn build_generation(
    store: &Store,
    inputs: &GenerationInputs,
) -> Result<GenerationBuild, GenerationError> {
    build_generation_for(store, inputs, &Agent::ALL)
}

/// Builds the generation of `inputs` for `agents` only (a launcher's: "launches convert artifacts
/// and hooks only for the selected harness"), or finds one already published: the generation of
/// every agent when it exists (it holds theirs), else the one of exactly these agents. The warnings,
/// notes and collisions returned are those of the package trees and of `agents` only.
pub fn build_generation_for(
    store: &Store,
    inputs: &GenerationInputs,
    agents: &[Agent],
) -> Result<GenerationBuild, GenerationError> {
    let inputs = &with_source_executables(store, inputs);
    if let Some(reused) = reuse_published(store, inputs, agents) {
        return Ok(reused);
    }
    let rendered = render_for(store, inputs, agents)?;
    publish_rendered(store, inputs, rendered)
}

/// The published generation of `inputs` that serves `agents` (every agent's when it exists,
/// else the one of exactly these agents), with what its report says for them; `None` when
/// neither is published.
pub fn reuse_published(
    store: &Store,
    inputs: &GenerationInputs,
    agents: &[Agent],
) -> Option<GenerationBuild> {
    let agents = sorted_agents(agents);
    let every_agent = agents.len() == Agent::ALL.len();
    let path = published(store, inputs, None).or_else(|| {
        (!every_agent)
            .then(|| published(store, inputs, Some(&agents)))
            .flatten()
    })?;
    let report = staged::read_report(&path).for_agents(&agents);
    Some(GenerationBuild {
        path,
        reused: true,
        warnings: report.warnings,
        info: report.info,
        collisions: report.collisions,
        secrets: BTreeMap::new(),
    })
}

fn sorted_agents(agents: &[Agent]) -> Vec<Agent> {
    let mut agents: Vec<Agent> = agents.to_vec();
    agents.sort();
    agents.dedup();
    agents
}

/// A generation rendered and not yet published: every file it stages (its report included)
/// under the name it will have.
#[derive(Debug, Clone)]
pub struct RenderedGeneration {
    /// The store path name (the machine inputs the files mention included).
    pub name: StorePathName,
    /// The agents rendered, sorted.
    pub agents: Vec<Agent>,
    /// What the renderers produced.
    pub plan: agentpack_harness::GenerationPlan,
    /// The files to publish, by their path in the generation (the report included).
    pub files: BTreeMap<String, PlannedFile>,
    pub report: staged::GenerationReport,
    pub warnings: Vec<String>,
    pub info: Vec<String>,
    pub collisions: Vec<agentpack_harness::Collision>,
    pub secrets: BTreeMap<Agent, agentpack_harness::SecretLayer>,
}

/// Renders the generation of `inputs` for `agents` without writing anything: under the portable
/// name first; when the staged files mention a machine input, the name includes it and the
/// generation, which may name itself, is rendered again under it. Reads the package trees (and
/// the store's record of their source executables when `inputs` lacks it).
pub fn render_for(
    store: &Store,
    inputs: &GenerationInputs,
    agents: &[Agent],
) -> Result<RenderedGeneration, GenerationError> {
    let inputs = &with_source_executables(store, inputs);
    let agents = sorted_agents(agents);
    let every_agent = agents.len() == Agent::ALL.len();
    let only = (!every_agent).then_some(agents.as_slice());
    let mut name = inputs.store_path_name_with(Machine::NONE, only);
    let mut plan = render_generation(&stage_inputs(store, inputs, &name), &agents)?;
    let machine = inputs.machine_mentioned(&plan_files(&plan));
    if machine != Machine::NONE {
        name = inputs.store_path_name_with(machine, only);
        plan = render_generation(&stage_inputs(store, inputs, &name), &agents)?;
    }

    let mut warnings = plan.warnings.clone();
    let mut info = plan.info.clone();
    let mut secrets = BTreeMap::new();
    let mut collisions = Vec::new();
    let mut files = plan_files(&plan);
    let mut by_agent = BTreeMap::new();
    for (agent, agent_plan) in &plan.agents {
        warnings.extend(agent_plan.warnings.iter().cloned());
        info.extend(agent_plan.info.iter().cloned());
        collisions.extend(agent_plan.collisions.iter().cloned());
        by_agent.insert(
            agent.as_str().to_owned(),
            staged::AgentReport {
                warnings: agent_plan.warnings.clone(),
                info: agent_plan.info.clone(),
            },
        );
        if !agent_plan.secrets.is_empty() {
            secrets.insert(*agent, agent_plan.secrets.clone());
        }
    }
    dedup_keep_order(&mut warnings);
    dedup_keep_order(&mut info);
    let references: BTreeSet<StorePathName> = inputs
        .packages
        .iter()
        .map(|package| package.store_path.name().clone())
        .collect();
    share::share_unconverted_dirs(store, &references, &mut files);
    let report = staged::GenerationReport {
        mode: inputs.mode_name.clone(),
        warnings: warnings.clone(),
        info: info.clone(),
        collisions: collisions.clone(),
        shared: Some(staged::AgentReport {
            warnings: plan.warnings.clone(),
            info: plan.info.clone(),
        }),
        agents: by_agent,
    };
    files.insert(
        REPORT_FILE.to_owned(),
        PlannedFile::new(
            REPORT_FILE,
            Source::Bytes(serde_json::to_vec_pretty(&report)?),
            false,
        ),
    );
    Ok(RenderedGeneration {
        name,
        agents,
        plan,
        files,
        report,
        warnings,
        info,
        collisions,
        secrets,
    })
}

/// Publishes a rendered generation of `inputs` (its packages and extra references referenced, so
/// GC keeps them while it lives). A generation of that name already published is the same one.
pub fn publish_rendered(
    store: &Store,
    inputs: &GenerationInputs,
    rendered: RenderedGeneration,
) -> Result<GenerationBuild, GenerationError> {
    let references: Vec<StorePath> = inputs
        .packages
        .iter()
        .map(|p| p.store_path.clone())
        .chain(inputs.extra_references.iter().cloned())
        .collect();
    let files: Vec<PlannedFile> = rendered.files.into_values().collect();
    let path = store.publish_files(&rendered.name, &files, &references)?;
    Ok(GenerationBuild {
        path,
        reused: false,
        warnings: rendered.warnings,
        info: rendered.info,
        collisions: rendered.collisions,
        secrets: rendered.secrets,
    })
}

/// `inputs` with each package's source executables read from the store (once: a plan keeps
/// them, so building it reads nothing again).
pub fn resolve_source_executables(store: &Store, inputs: &GenerationInputs) -> GenerationInputs {
    with_source_executables(store, inputs)
}

/// Every file a rendered plan stages, by its path in the generation.
fn plan_files(plan: &agentpack_harness::GenerationPlan) -> BTreeMap<String, PlannedFile> {
    let mut files = BTreeMap::new();
    for (path, entry) in &plan.shared.entries {
        files.insert(path.clone(), planned(path, entry));
    }
    for agent_plan in plan.agents.values() {
        for (path, entry) in &agent_plan.entries {
            files.insert(path.clone(), planned(path, entry));
        }
    }
    files
}

/// The renderer's inputs for the generation called `name`.
fn stage_inputs(store: &Store, inputs: &GenerationInputs, name: &StorePathName) -> StageInputs {
    let generation_root = store.store_dir().join(name.as_str());
    StageInputs {
        packages: inputs
            .packages
            .iter()
            .map(|package| PackageInput {
                filter: inputs.mode.package_filter(&package.input.module),
                ..package.input.clone()
            })
            .collect(),
        overlay: inputs.overlay.as_ref().map(|(root, _)| OverlayInput {
            root: root.clone(),
            filter: inputs.mode.overlay_filter(),
        }),
        mcp_servers: inputs.mcp_servers.clone(),
        mcp_launch: inputs.mcp_launch.clone(),
        mode: inputs.mode.clone(),
        options: RenderOptions {
            keep_attribution: inputs.keep_attribution,
            dot_agents_enabled: inputs.overlay.is_some(),
            yolo: inputs.yolo,
            agentpack_exe: inputs.agentpack_exe.clone(),
            generation_root,
            plugin_data_root: inputs.plugin_data_root.clone(),
        },
        listings: inputs.listings.clone(),
    }
}

/// The MCP servers of `inputs` (plugins, manifest, `./.agents/mcp.json`, filtered by the mode) as
/// their sources define them, before any lock pin is applied; plus warnings about unreadable ones.
pub fn merged_mcp_servers(
    store: &Store,
    inputs: &GenerationInputs,
) -> Result<(Vec<agentpack_harness::MergedServer>, Vec<String>), GenerationError> {
    let inputs = &with_source_executables(store, inputs);
    let stage = stage_inputs(store, inputs, &inputs.store_path_name());
    Ok(agentpack_harness::collect_mcp_servers(&stage)?)
}

/// The secret-bearing values `agent` needs from the generation of `inputs`, which never enter the
/// store. Renders that agent only; launchers call it when the generation was reused.
pub fn render_secrets(
    store: &Store,
    inputs: &GenerationInputs,
    agent: Agent,
) -> Result<agentpack_harness::SecretLayer, GenerationError> {
    let inputs = &with_source_executables(store, inputs);
    // Staged under the name of the published generation, which the secrets may name.
    let name = published(store, inputs, None)
        .or_else(|| published(store, inputs, Some(&[agent])))
        .map_or_else(|| inputs.store_path_name(), |path| path.name().clone());
    let stage = stage_inputs(store, inputs, &name);
    let plan = render_generation(&stage, &[agent])?;
    Ok(plan
        .agents
        .get(&agent)
        .map(|plan| plan.secrets.clone())
        .unwrap_or_default())
}

fn planned(path: &str, entry: &PlanEntry) -> PlannedFile {
    match entry {
        PlanEntry::FromFile { source, executable } => {
            PlannedFile::new(path, Source::ExistingFile(source.clone()), *executable)
        }
        PlanEntry::Bytes(bytes) => PlannedFile::new(path, Source::Bytes(bytes.clone()), false),
        PlanEntry::Symlink(target) => PlannedFile::new(
            path,
            Source::Symlink(target.to_string_lossy().into_owned()),
            false,
        ),
    }
}

fn dedup_keep_order(lines: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    lines.retain(|line| seen.insert(line.clone()));
}
