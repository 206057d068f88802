//! Generations: everything one project stages for one mode, for every agent, as one store path.
//!
//! A generation is a pure function of its inputs: the locked packages (by store path, which names
//! their content), the mode, the `./.agents/` overlay content, the manifest's MCP servers (secret
//! values by their staged form only), the lock's MCP launches, the toggles that change rendering
//! and the renderer's version. [`GenerationInputs::digest`] encodes exactly those; the store path
//! is named by its hash, so a sync whose inputs did not change finds the generation already
//! published and renders nothing ([`build_generation`] returns `reused`).
//!
//! The generation's final path is known before it is built, so rendered content (hooks, plugin-root
//! rewrites) may name it. Building is `harness::render_generation` then `Store::publish_files`: unchanged
//! package files are linked from their blobs, so identical bytes across agents, modes and projects are
//! stored once.
//!
//! This module never switches a project's pointer (see [`pointer`]) and never prints.

pub mod pointer;
pub mod staged;

use std::collections::BTreeMap;
use std::path::PathBuf;

use agentpack_harness::{
    render_generation, Agent, McpLaunch, McpServer, ModeFilter, OverlayInput, PackageInput,
    PlanEntry, RenderOptions, StageInputs,
};
use agentpack_lockfile::LockedPackage;
use agentpack_store::{PlannedFile, Source, Store, StoreError, StorePath, StorePathName};
use indexmap::IndexMap;

/// Bumped whenever rendering changes in a way the crate versions do not capture.
// v2: Codex hook specs in codex-home; v3: MCP values by their staged form, secret templates;
// v4: source execute bits, plugin-root references in artifacts, collisions keep both.
const GENERATION_FORMAT: &str = "agentpack-generation-v4";

/// The file inside every generation that records what rendering reported, so a reused generation
/// can say it again.
pub const REPORT_FILE: &str = "agentpack-generation.json";

/// One locked package, already in the store and verified.
#[derive(Debug, Clone)]
pub struct LockedPackageInput {
    pub module: String,
    pub cache_key: String,
    pub owner: String,
    pub repo: String,
    pub path: String,
    pub commit: String,
    pub kind: String,
    pub store_path: StorePath,
    /// Regular files executable in the package's source, as the store recorded them (filled by
    /// [`build_generation`] from the store when empty).
    pub executables: Vec<String>,
}

impl LockedPackageInput {
    /// A locked package staged from the store path holding its verified content.
    pub fn new(package: &LockedPackage, store_path: StorePath) -> Self {
        Self {
            module: package.module.as_str().to_owned(),
            cache_key: package.cache_key.as_str().to_owned(),
            owner: package.owner.clone(),
            repo: package.repo.clone(),
            path: package.path.clone(),
            commit: package.commit.as_str().to_owned(),
            kind: package.kind.clone(),
            store_path,
            executables: Vec::new(),
        }
    }
}

/// Everything a generation is a function of.
#[derive(Debug, Clone)]
pub struct GenerationInputs {
    /// The mode's name as the user wrote it (`default` when none).
    pub mode_name: String,
    /// The mode's directory component (`lockfile::keys::mode_dir_component`).
    pub mode_dir: String,
    pub mode: ModeFilter,
    /// The mode's selectors as written, for the digest.
    pub mode_selectors: Vec<String>,
    pub packages: Vec<LockedPackageInput>,
    /// The project's `./.agents/` directory and its tree hash, when it exists and is enabled.
    pub overlay: Option<(PathBuf, String)>,
    pub mcp_servers: IndexMap<String, McpServer>,
    pub mcp_launch: BTreeMap<String, McpLaunch>,
    pub keep_attribution: bool,
    pub yolo: bool,
    pub agentpack_exe: PathBuf,
    pub plugin_data_root: PathBuf,
    /// Store paths the generation uses besides its packages (MCP exec specs and their npm trees):
    /// referenced, so GC keeps them while the generation lives.
    pub extra_references: Vec<StorePath>,
}

/// What [`build_generation`] did.
#[derive(Debug)]
pub struct GenerationBuild {
    pub path: StorePath,
    /// True when the generation was already published and nothing was rendered.
    pub reused: bool,
    pub warnings: Vec<String>,
    pub info: Vec<String>,
    /// Collisions between packages and how both sides were kept (see `harness::Collision`).
    pub collisions: Vec<agentpack_harness::Collision>,
    /// Secret-bearing values per agent, for the launcher's home layer (empty when reused: the
    /// launcher renders them from the manifest when it needs them).
    pub secrets: BTreeMap<Agent, agentpack_harness::SecretLayer>,
}

/// Failures building a generation.
#[derive(Debug, thiserror::Error)]
pub enum GenerationError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot render the staged trees: {0}")]
    Render(#[from] agentpack_harness::HarnessError),
    #[error("cannot encode the generation report: {0}")]
    Report(#[from] serde_json::Error),
}

impl GenerationInputs {
    /// The canonical encoding of every input, one JSON value per line. A manifest server is encoded
    /// as what rendering writes of it (`harness::mcp::staged_form`): each `env` value, header value
    /// and OAuth client secret in its staged form (a reference's name, a store-safe template's text,
    /// or only the fact that it is a secret: never a secret's bytes nor a hash of them, so a
    /// generation's name cannot be used to test guesses of a secret).
    pub fn digest(&self) -> Vec<u8> {
        let mut lines: Vec<serde_json::Value> = vec![
            serde_json::json!([
                GENERATION_FORMAT,
                env!("CARGO_PKG_VERSION"),
                self.agentpack_exe,
                self.plugin_data_root,
                self.keep_attribution,
                self.yolo
            ]),
            serde_json::json!(["mode", self.mode_name, self.mode_selectors]),
        ];
        for package in &self.packages {
            lines.push(serde_json::json!([
                "package",
                package.module,
                package.cache_key,
                package.owner,
                package.repo,
                package.path,
                package.commit,
                package.kind,
                package.store_path.name().as_str(),
                package.executables
            ]));
        }
        if let Some((_, hash)) = &self.overlay {
            lines.push(serde_json::json!(["overlay", hash]));
        }
        for (name, server) in &self.mcp_servers {
            lines.push(serde_json::json!([
                "mcp",
                name,
                agentpack_harness::mcp::staged_form(server, &self.plugin_data_root)
            ]));
        }
        for (name, launch) in &self.mcp_launch {
            lines.push(serde_json::json!([
                "launch",
                name,
                launch.command,
                // A credential argument is given at launch, never part of a store path's name.
                agentpack_harness::mcp::staged_args(&launch.args)
            ]));
        }
        let mut bytes = Vec::new();
        for line in lines {
            bytes.extend_from_slice(line.to_string().as_bytes());
            bytes.push(b'\n');
        }
        bytes
    }

    /// The generation's store path name.
    pub fn store_path_name(&self) -> StorePathName {
        StorePathName::from_inputs(&self.digest(), &format!("generation-{}", self.mode_dir))
    }

    /// The store path name of the generation of these inputs for `agents` only (sorted, fewer than
    /// all): the digest with the agents as one more line, the label naming them.
    pub fn store_path_name_for(&self, agents: &[Agent]) -> StorePathName {
        let names: Vec<&str> = agents.iter().map(|agent| agent.as_str()).collect();
        let mut digest = self.digest();
        digest.extend_from_slice(serde_json::json!(["agents", names]).to_string().as_bytes());
        digest.push(b'\n');
        StorePathName::from_inputs(
            &digest,
            &format!("generation-{}-{}", self.mode_dir, names.join("+")),
        )
    }
}

/// `inputs` with each package's source executables read from the store.
fn with_source_executables(store: &Store, inputs: &GenerationInputs) -> GenerationInputs {
    let mut inputs = inputs.clone();
    for package in &mut inputs.packages {
        if package.executables.is_empty() {
            package.executables = store.source_executables(&package.store_path);
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
    let mut agents: Vec<Agent> = agents.to_vec();
    agents.sort();
    agents.dedup();
    let every_agent = agents.len() == Agent::ALL.len();
    let all_name = inputs.store_path_name();
    let reusable = store.get(&all_name).or_else(|| {
        (!every_agent)
            .then(|| store.get(&inputs.store_path_name_for(&agents)))
            .flatten()
    });
    if let Some(path) = reusable {
        let report = staged::read_report(&path).for_agents(&agents);
        return Ok(GenerationBuild {
            path,
            reused: true,
            warnings: report.warnings,
            info: report.info,
            collisions: report.collisions,
            secrets: BTreeMap::new(),
        });
    }
    let name = if every_agent {
        all_name
    } else {
        inputs.store_path_name_for(&agents)
    };

    let stage = stage_inputs(store, inputs, &name);
    let plan = render_generation(&stage, &agents)?;

    let mut warnings = plan.warnings.clone();
    let mut info = plan.info.clone();
    let mut secrets = BTreeMap::new();
    let mut collisions = Vec::new();
    let mut files: BTreeMap<String, PlannedFile> = BTreeMap::new();
    let mut by_agent = BTreeMap::new();
    for (path, entry) in &plan.shared.entries {
        files.insert(path.clone(), planned(path, entry));
    }
    for (agent, agent_plan) in &plan.agents {
        for (path, entry) in &agent_plan.entries {
            files.insert(path.clone(), planned(path, entry));
        }
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

    let references: Vec<StorePath> = inputs
        .packages
        .iter()
        .map(|p| p.store_path.clone())
        .chain(inputs.extra_references.iter().cloned())
        .collect();
    let plan: Vec<PlannedFile> = files.into_values().collect();
    let path = store.publish_files(&name, &plan, &references)?;
    Ok(GenerationBuild {
        path,
        reused: false,
        warnings,
        info,
        collisions,
        secrets,
    })
}

/// The renderer's inputs for the generation called `name`.
fn stage_inputs(store: &Store, inputs: &GenerationInputs, name: &StorePathName) -> StageInputs {
    let generation_root = store.store_dir().join(name.as_str());
    StageInputs {
        packages: inputs
            .packages
            .iter()
            .map(|package| PackageInput {
                module: package.module.clone(),
                cache_key: package.cache_key.clone(),
                owner: package.owner.clone(),
                repo: package.repo.clone(),
                path: package.path.clone(),
                commit: package.commit.clone(),
                kind: package.kind.clone(),
                root: package.store_path.path().to_path_buf(),
                filter: inputs.mode.package_filter(&package.module),
                executables: package.executables.iter().cloned().collect(),
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
    let stage = stage_inputs(store, inputs, &inputs.store_path_name());
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

#[cfg(test)]
mod tests {
    use super::*;
    use agentpack_harness::ModeBase;

    fn inputs(env: &[(&str, &str)], headers: &[(&str, &str)]) -> GenerationInputs {
        let server = McpServer {
            command: Some("node".into()),
            args: vec!["s.js".into()],
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        };
        GenerationInputs {
            mode_name: "default".into(),
            mode_dir: "default".into(),
            mode: ModeFilter::new(ModeBase::All, &[], &[]).unwrap(),
            mode_selectors: Vec::new(),
            packages: Vec::new(),
            overlay: None,
            mcp_servers: [("svc".to_string(), server)].into_iter().collect(),
            mcp_launch: BTreeMap::new(),
            keep_attribution: false,
            yolo: false,
            agentpack_exe: PathBuf::from("/bin/agentpack"),
            plugin_data_root: PathBuf::from("/home/u/.agentpack/projects/p/plugin-data"),
            extra_references: Vec::new(),
        }
    }

    fn name(env: &[(&str, &str)], headers: &[(&str, &str)]) -> String {
        inputs(env, headers).store_path_name().as_str().to_owned()
    }

    #[test]
    fn the_digest_follows_what_is_staged_and_holds_no_secret() {
        // What rendering writes differs, so the generation differs.
        assert_ne!(
            name(&[("TOKEN", "${MY_TOKEN}")], &[]),
            name(&[("TOKEN", "sk-live-123")], &[])
        );
        assert_ne!(
            name(&[("TOKEN", "${MY_TOKEN}")], &[]),
            name(&[("TOKEN", "${OTHER_TOKEN}")], &[])
        );
        assert_ne!(
            name(&[], &[("Authorization", "Bearer ${TOK}")]),
            name(&[], &[("Authorization", "Token ${TOK}")])
        );
        assert_ne!(
            name(&[], &[("Authorization", "Bearer A_${TOK}")]),
            name(&[], &[("Authorization", "Bearer ${TOK}")])
        );
        // A secret (a literal, or a template whose text may hold one) is staged as a reference to
        // the launcher's variable whatever its bytes: its bytes never reach the name.
        assert_eq!(
            name(&[("TOKEN", "sk-live-123")], &[]),
            name(&[("TOKEN", "sk-live-456")], &[])
        );
        assert_eq!(
            name(&[], &[("Authorization", "Bearer A_${TOK}")]),
            name(&[], &[("Authorization", "Bearer B_${TOK}")])
        );
        let digest = inputs(
            &[("URL", "postgres://app:pw-SENTINEL@${DB_HOST}/app")],
            &[("Authorization", "Bearer SENTINEL2_${TOK}")],
        )
        .digest();
        let text = String::from_utf8(digest).unwrap();
        assert!(!text.contains("SENTINEL"), "{text}");
    }
}
