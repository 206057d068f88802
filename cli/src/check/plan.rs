//! The effective plan of one agent, computed without writing anything: the lock's cache slots are
//! read directly (never through `Store::open`, which creates directories, hygiene files and an
//! index), and the same renderer staging uses (`harness::render_generation`) turns the verified
//! package trees, the workspace overlay and the manifest's MCP servers into the agent's planned
//! files. From those files come the planned artifacts (skills, commands, agents), their rendered
//! digests, the planned workspace writes, collisions and conversion warnings. An artifact's
//! source digest is read on demand from the same verified trees with staging's parser and the
//! mode's selectors.
//!
//! Never downloads, never repairs, never publishes: a slot that is missing or does not match the
//! lock is left out of the plan, and the plan says it is incomplete.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use agentpack_harness::input::artifact::{discover, ArtifactKind};
use agentpack_harness::input::tree::PackageTree;
use agentpack_harness::render::convert;
use agentpack_harness::{
    render_generation, Agent, Collision, MergedServer, ModeFilter, OverlayInput, PackageInput,
    PlanEntry, RenderOptions, StageInputs,
};
use agentpack_lockfile::{LockedPackage, Lockfile, Manifest};
use agentpack_store::{Match, StorePathMeta, TreeHash};
use anyhow::{Context as _, Result};
use sha2::{Digest as _, Sha256};

use crate::env::{self, EnvVars};
use agentpack_builders::project::ResolvedMode;

/// What a cache slot `$AGENTPACK_HOME/cache/<cache_key>` holds, read without the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotRead {
    Missing,
    /// A link whose store path is gone.
    Dangling(PathBuf),
    /// Something agentpack did not make.
    Foreign(PathBuf),
    /// A link to the store path `name` at `dir`.
    Linked {
        name: String,
        dir: PathBuf,
    },
    /// A plain directory (agentpack 0.4 and earlier).
    LegacyDir(PathBuf),
}

/// The store's layout below `$AGENTPACK_HOME/cache`.
const STORE_DIR: &str = "store/v1";

/// Reads slot `cache_key` under `cache_dir`.
pub fn read_slot(cache_dir: &Path, cache_key: &str) -> std::io::Result<SlotRead> {
    let slot = cache_dir.join(cache_key);
    let meta = match std::fs::symlink_metadata(&slot) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(SlotRead::Missing),
        Err(err) => return Err(err),
    };
    if meta.is_dir() {
        return Ok(SlotRead::LegacyDir(slot));
    }
    if !meta.file_type().is_symlink() {
        return Ok(SlotRead::Foreign(slot));
    }
    let target = std::fs::read_link(&slot)?;
    let name = target
        .strip_prefix(STORE_DIR)
        .ok()
        .and_then(|rest| rest.to_str())
        .filter(|rest| !rest.is_empty() && !rest.contains('/'))
        .map(str::to_owned);
    match name {
        Some(name) => {
            let dir = cache_dir.join(STORE_DIR).join(&name);
            if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
                Ok(SlotRead::Linked { name, dir })
            } else {
                Ok(SlotRead::Dangling(target))
            }
        }
        None => Ok(SlotRead::Foreign(target)),
    }
}

/// How one locked package's cache entry compares with the lock.
#[derive(Debug, Clone)]
pub enum SlotCheck {
    /// Matches `content_hash` (or has none to match: `LOCK_UNVERIFIED` says so); in the plan.
    Usable {
        dir: PathBuf,
        /// The store path name (none for a legacy directory).
        store_name: Option<String>,
    },
    Missing(String),
    Mismatch(String),
}

/// Checks the slot of `package`: present, and its tree hash equal to the lock's `content_hash`.
pub fn check_slot(cache_dir: &Path, package: &LockedPackage) -> SlotCheck {
    let read = match read_slot(cache_dir, package.cache_key.as_str()) {
        Ok(read) => read,
        Err(err) => return SlotCheck::Missing(format!("cannot read the cache entry: {err}")),
    };
    let (dir, store_name) = match read {
        SlotRead::Missing => return SlotCheck::Missing("no cache entry".to_owned()),
        SlotRead::Dangling(target) => {
            return SlotCheck::Missing(format!(
                "the cache entry links to {}, which is gone",
                target.display()
            ));
        }
        SlotRead::Foreign(target) => {
            return SlotCheck::Mismatch(format!(
                "the cache entry is not one agentpack made ({})",
                target.display()
            ));
        }
        SlotRead::Linked { name, dir } => (dir, Some(name)),
        SlotRead::LegacyDir(dir) => (dir, None),
    };
    let Some(expected) = &package.content_hash else {
        return SlotCheck::Usable { dir, store_name };
    };
    let expected: TreeHash = match expected.as_str().parse() {
        Ok(hash) => hash,
        Err(err) => return SlotCheck::Mismatch(format!("the lock's content_hash: {err}")),
    };
    match agentpack_store::matches_tree_hash(&dir, &expected) {
        Ok(Match::Exact | Match::Legacy) => SlotCheck::Usable { dir, store_name },
        Ok(Match::Mismatch { actual }) => SlotCheck::Mismatch(format!(
            "the cache entry hashes to {actual}, the lock records {expected}"
        )),
        Err(err) => SlotCheck::Mismatch(format!("cannot hash the cache entry: {err}")),
    }
}

/// One planned artifact of the agent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Artifact {
    /// `skill`, `command` or `agent`.
    pub category: &'static str,
    pub name: String,
    /// The package whose files it stages, when the plan links them from a package tree.
    pub module: Option<String>,
    /// SHA-256 over the rendered files (relative path and bytes, in order).
    pub rendered_digest: String,
    /// The planned paths, relative to the generation.
    pub files: Vec<String>,
}

/// An artifact's (category, name).
pub type ArtifactKey = (&'static str, String);

/// The agent's plan.
#[derive(Debug, Default)]
pub struct AgentPlan {
    /// By (category, name).
    pub artifacts: BTreeMap<(&'static str, String), Artifact>,
    /// Workspace paths a launch of this agent writes (links into the generation).
    pub workspace_writes: Vec<String>,
    pub collisions: Vec<Collision>,
    pub warnings: Vec<String>,
    pub mcp_servers: Vec<MergedServer>,
    /// Modules left out because their cache entry is missing or does not match the lock.
    pub left_out: Vec<String>,
    /// Every planned entry of the agent, by path relative to the generation.
    pub entries: BTreeMap<String, PlanEntry>,
    /// The verified package trees the plan renders, with the mode's selectors (for `source_digest`).
    pub packages: Vec<PackageInput>,
}

/// The generation root the plan is rendered for: no generation has this name, so rendered bytes
/// that name it are the ones that depend on where the generation is published.
pub const PLAN_GENERATION_NAME: &str = "preflight-plan";

impl AgentPlan {
    /// Whether every locked package is in the plan (absence is only known then).
    pub fn complete(&self) -> bool {
        self.left_out.is_empty()
    }
}

/// What the plan is computed from.
pub struct PlanInputs<'a> {
    pub agent: Agent,
    pub manifest: &'a Manifest,
    pub lock: &'a Lockfile,
    pub mode: &'a ResolvedMode,
    pub workspace: &'a Path,
    pub agentpack_home: &'a Path,
    pub state_dir: &'a Path,
    /// The slot check of each locked package, by module.
    pub slots: &'a BTreeMap<String, SlotCheck>,
    pub yolo: bool,
}

/// Renders the agent's plan in memory.
pub fn agent_plan(inputs: &PlanInputs<'_>) -> Result<AgentPlan> {
    let cache_dir = inputs.agentpack_home.join("cache");
    let store_dir = cache_dir.join(STORE_DIR);
    let (filter, overlay) = mode_and_overlay(inputs.mode, inputs.workspace)?;
    let mut plan = AgentPlan::default();
    let mut packages = Vec::new();
    let mut module_of_store: BTreeMap<PathBuf, String> = BTreeMap::new();
    for package in &inputs.lock.packages {
        let module = package.module.as_str();
        let Some(SlotCheck::Usable {
            dir, store_name, ..
        }) = inputs.slots.get(module)
        else {
            plan.left_out.push(module.to_owned());
            continue;
        };
        let executables = store_name
            .as_ref()
            .and_then(|name| {
                StorePathMeta::read(&store_dir.join("meta").join(format!("{name}.json"))).ok()
            })
            .map(|meta| meta.source_executables.into_iter().collect())
            .unwrap_or_default();
        module_of_store.insert(dir.clone(), module.to_owned());
        packages.push(PackageInput {
            filter: filter.package_filter(module),
            executables,
            ..PackageInput::locked(package, dir.clone())
        });
    }
    let agentpack_exe = std::env::current_exe()
        .and_then(fs_err::canonicalize)
        .context("cannot find the path of the running agentpack executable")?;
    let stage = StageInputs {
        packages,
        overlay: overlay.as_ref().map(|root| OverlayInput {
            root: root.clone(),
            filter: filter.overlay_filter(),
        }),
        mcp_servers: inputs.manifest.mcp_servers.clone(),
        mcp_launch: BTreeMap::new(),
        mode: filter.clone(),
        options: RenderOptions {
            keep_attribution: env::flag(EnvVars::AGENTPACK_KEEP_ATTRIBUTION),
            dot_agents_enabled: overlay.is_some(),
            yolo: inputs.yolo,
            agentpack_exe,
            generation_root: store_dir.join(PLAN_GENERATION_NAME),
            plugin_data_root: inputs.state_dir.join("plugin-data"),
        },
    };
    let (servers, server_warnings) = agentpack_harness::collect_mcp_servers(&stage)
        .context("cannot read the MCP servers of the plan")?;
    // What runs instead of a pinned npm server's written command, as staging renders it (a
    // tree-locked server's `mcp-exec` spec is a store path preflight does not publish: left out).
    let mut stage = stage;
    plan.packages.clone_from(&stage.packages);
    stage.mcp_launch = agentpack_builders::mcp_lock::launches_for(
        inputs.lock,
        &servers,
        &stage.options.agentpack_exe,
        &BTreeMap::new(),
    );
    plan.mcp_servers = servers;
    plan.warnings.extend(server_warnings);
    let rendered =
        render_generation(&stage, &[inputs.agent]).context("cannot render the agent's plan")?;
    plan.warnings.extend(rendered.warnings.iter().cloned());
    let Some(agent_plan) = rendered.agents.get(&inputs.agent) else {
        return Ok(plan);
    };
    plan.warnings.extend(agent_plan.warnings.iter().cloned());
    plan.collisions.clone_from(&agent_plan.collisions);
    plan.entries.clone_from(&agent_plan.entries);
    dedup(&mut plan.warnings);
    let module_of = |source: &Path| {
        module_of_store
            .iter()
            .find(|(root, _)| source.starts_with(root))
            .map(|(_, module)| module.clone())
    };
    let mut files: BTreeMap<ArtifactKey, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    let mut modules: BTreeMap<(&'static str, String), Option<String>> = BTreeMap::new();
    for (path, entry) in &agent_plan.entries {
        let Some((category, name)) = artifact_of(path) else {
            continue;
        };
        let (bytes, module) = match entry {
            PlanEntry::FromFile { source, .. } => (
                fs_err::read(source)
                    .with_context(|| format!("cannot read {} for the plan", source.display()))?,
                module_of(source),
            ),
            PlanEntry::Bytes(bytes) => (bytes.clone(), None),
            PlanEntry::Symlink(target) => {
                (target.to_string_lossy().into_owned().into_bytes(), None)
            }
        };
        let key = (category, name);
        let slot = modules.entry(key.clone()).or_insert(None);
        if slot.is_none() {
            *slot = module;
        }
        files.entry(key).or_default().push((path.clone(), bytes));
    }
    for (key, entries) in files {
        let mut digest = Sha256::new();
        for (path, bytes) in &entries {
            digest.update((path.len() as u64).to_le_bytes());
            digest.update(path.as_bytes());
            digest.update((bytes.len() as u64).to_le_bytes());
            digest.update(bytes);
        }
        plan.artifacts.insert(
            key.clone(),
            Artifact {
                category: key.0,
                name: key.1.clone(),
                module: modules.get(&key).cloned().flatten(),
                rendered_digest: format!("sha256:{}", hex::encode(digest.finalize())),
                files: entries.into_iter().map(|(path, _)| path).collect(),
            },
        );
    }
    // The links a launch places in the workspace, as the staging plan names them.
    plan.workspace_writes =
        agentpack_builders::project::plan::workspace_links(inputs.agent, &agent_plan.entries);
    Ok(plan)
}

/// The `source_digest` of each artifact of `category` (`skill`, `command`, `agent`) named `name` in
/// the verified package trees of the plan, found with staging's parser and the mode's selectors
/// (`harness::input::artifact::discover` over `PackageTree::read` with the package filter), by module, in
/// lock order. `only_module` restricts the search to the package the plan stages it from.
///
/// The digest is SHA-256 over the artifact's files as the store copy holds them, each in byte order
/// of its path: the path's length (u64, little endian), the path (UTF-8), the content's length
/// (u64, little endian) and the content. A skill's paths are relative to its directory (`SKILL.md`,
/// `scripts/run.sh`); a command's or agent's one path is its name with its extension (`review.md`,
/// `git/commit.md`). Executable bits and where the artifact sits in the package do not count.
pub fn source_digests(
    plan: &AgentPlan,
    category: &str,
    name: &str,
    only_module: Option<&str>,
) -> Result<Vec<(String, String)>> {
    let kind = match category {
        "skill" => ArtifactKind::Skill,
        "command" => ArtifactKind::Command,
        "agent" => ArtifactKind::Agent,
        _ => return Ok(Vec::new()),
    };
    let mut found = Vec::new();
    for package in &plan.packages {
        if only_module.is_some_and(|module| module != package.module) {
            continue;
        }
        let tree = PackageTree::read(&package.root, &package.filter)
            .with_context(|| format!("cannot read {} for source_digest", package.root.display()))?;
        let discovery = discover(
            &tree,
            &package.module,
            &agentpack_harness::input::root_skill_name(package, &tree),
        )
        .with_context(|| format!("cannot read {} for source_digest", package.root.display()))?;
        for artifact in discovery.artifacts.iter().filter(|a| a.kind == kind) {
            let matches = artifact.name == name
                || convert::leaf_name(&artifact.name) == name
                || (kind == ArtifactKind::Skill && convert::skill_name(&artifact.name) == name);
            if !matches {
                continue;
            }
            let mut files: Vec<(String, PathBuf)> = if kind == ArtifactKind::Skill {
                artifact
                    .skill_files
                    .iter()
                    .map(|file| (file.relative.clone(), file.source.clone()))
                    .collect()
            } else {
                vec![(
                    format!("{}.{}", artifact.name, artifact.extension),
                    artifact.source.clone(),
                )]
            };
            files.sort();
            let mut digest = Sha256::new();
            for (path, source) in &files {
                let bytes = fs_err::read(source).with_context(|| {
                    format!("cannot read {} for source_digest", source.display())
                })?;
                digest.update((path.len() as u64).to_le_bytes());
                digest.update(path.as_bytes());
                digest.update((bytes.len() as u64).to_le_bytes());
                digest.update(&bytes);
            }
            found.push((
                package.module.clone(),
                format!("sha256:{}", hex::encode(digest.finalize())),
            ));
        }
    }
    Ok(found)
}

/// The planned paths of `plan` that the staged generation at `staged` lacks or holds with other
/// bytes (bytes that name the generation's own path are compared by presence only).
pub fn staged_differences(plan: &AgentPlan, staged: &Path) -> Vec<String> {
    let mut differences = Vec::new();
    for (path, entry) in &plan.entries {
        let staged_path = staged.join(path);
        let expected = match entry {
            PlanEntry::FromFile { source, .. } => std::fs::read(source).ok(),
            PlanEntry::Bytes(bytes) => {
                let names_generation = bytes
                    .windows(PLAN_GENERATION_NAME.len())
                    .any(|w| w == PLAN_GENERATION_NAME.as_bytes());
                (!names_generation).then(|| bytes.clone())
            }
            PlanEntry::Symlink(target) => {
                if std::fs::read_link(&staged_path).ok().as_deref() != Some(target.as_path()) {
                    differences.push(path.clone());
                }
                continue;
            }
        };
        let Ok(actual) = std::fs::read(&staged_path) else {
            differences.push(path.clone());
            continue;
        };
        if expected.is_some_and(|expected| expected != actual) {
            differences.push(path.clone());
        }
    }
    differences
}

/// The mode filter (with what `eject` wrote under `.agents/` left out, as sync does) and the
/// overlay directory, when there is one to stage: the staging pipeline's own
/// (`agentpack_builders::project::inputs::overlay_for`).
fn mode_and_overlay(
    mode: &ResolvedMode,
    workspace: &Path,
) -> Result<(ModeFilter, Option<PathBuf>)> {
    let enabled = env::var(EnvVars::AGENTPACK_DOT_AGENTS).as_deref() != Some("0");
    let overlaid = agentpack_builders::project::inputs::overlay_for(mode, workspace, enabled)?;
    for warning in &overlaid.warnings {
        crate::output::warn(warning);
    }
    Ok((overlaid.filter, overlaid.overlay.map(|(dir, _)| dir)))
}

/// The artifact a planned path belongs to: the first `skills/<name>/`, `commands/<name>.md`,
/// `agents/<name>.md` (or singular, or Codex's `prompts/`) component pair of the path.
pub fn artifact_of(path: &str) -> Option<(&'static str, String)> {
    let parts: Vec<&str> = path.split('/').collect();
    for (index, part) in parts.iter().enumerate() {
        let category = match *part {
            "skills" | "skill" => "skill",
            "commands" | "command" | "prompts" => "command",
            "agents" | "agent" => "agent",
            _ => continue,
        };
        let rest = &parts[index + 1..];
        let name = rest.first()?;
        if category == "skill" {
            // A skill is a directory.
            return (rest.len() >= 2).then(|| (category, (*name).to_owned()));
        }
        if rest.len() != 1 {
            return None;
        }
        let stem = name
            .strip_suffix(".md")
            .or_else(|| name.strip_suffix(".toml"))
            .or_else(|| name.strip_suffix(".mdc"))?;
        return Some((category, stem.to_owned()));
    }
    None
}

fn dedup(lines: &mut Vec<String>) {
    let mut seen = BTreeSet::new();
    lines.retain(|line| seen.insert(line.clone()));
}

#[cfg(test)]
mod tests {
    use super::{artifact_of, source_digests, AgentPlan};
    use agentpack_harness::{PackageInput, PathFilter};
    use sha2::{Digest as _, Sha256};

    fn package(module: &str, root: &std::path::Path) -> PackageInput {
        PackageInput {
            module: module.to_owned(),
            cache_key: module.to_owned(),
            owner: "o".to_owned(),
            repo: module.to_owned(),
            path: String::new(),
            commit: "0".repeat(40),
            kind: "plugin".to_owned(),
            root: root.to_path_buf(),
            filter: PathFilter::all(),
            executables: Default::default(),
        }
    }

    #[test]
    fn a_skill_source_digest_frames_every_file_by_its_path_in_the_skill_directory() {
        let one = tempfile::tempdir().unwrap();
        let skill = one.path().join("skills/lint");
        std::fs::create_dir_all(skill.join("scripts")).unwrap();
        std::fs::write(skill.join("SKILL.md"), "---\nname: lint\n---\nLint.\n").unwrap();
        std::fs::write(skill.join("scripts/run.sh"), "#!/bin/sh\n").unwrap();
        let two = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(two.path().join(".claude/skills/lint")).unwrap();
        std::fs::write(
            two.path().join(".claude/skills/lint/SKILL.md"),
            "---\nname: lint\n---\nOther.\n",
        )
        .unwrap();
        let plan = AgentPlan {
            packages: vec![package("one", one.path()), package("two", two.path())],
            ..AgentPlan::default()
        };
        let mut expected = Sha256::new();
        for (path, bytes) in [
            ("SKILL.md", &b"---\nname: lint\n---\nLint.\n"[..]),
            ("scripts/run.sh", &b"#!/bin/sh\n"[..]),
        ] {
            expected.update((path.len() as u64).to_le_bytes());
            expected.update(path.as_bytes());
            expected.update((bytes.len() as u64).to_le_bytes());
            expected.update(bytes);
        }
        let expected = format!("sha256:{}", hex::encode(expected.finalize()));
        let found = source_digests(&plan, "skill", "lint", Some("one")).unwrap();
        assert_eq!(found, vec![("one".to_owned(), expected.clone())]);
        // Unrestricted, both packages hold the name, with different bytes.
        let found = source_digests(&plan, "skill", "lint", None).unwrap();
        assert_eq!(found.len(), 2);
        assert_ne!(found[0].1, found[1].1);
        assert!(source_digests(&plan, "command", "lint", None)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn planned_paths_name_their_artifacts() {
        assert_eq!(
            artifact_of("plugins/agentpack-bundle/skills/hello/SKILL.md"),
            Some(("skill", "hello".to_owned()))
        );
        assert_eq!(
            artifact_of("cursor/agentpack-bundle/agents/reviewer.md"),
            Some(("agent", "reviewer".to_owned()))
        );
        assert_eq!(
            artifact_of("opencode/command/review.md"),
            Some(("command", "review".to_owned()))
        );
        assert_eq!(artifact_of("plugins/agentpack-bundle/skills"), None);
        assert_eq!(artifact_of("opencode/opencode.json"), None);
    }
}
