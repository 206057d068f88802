//! The effective plan of one agent: the [`Plan`] sync computes, from a read-only session
//! (`ProjectSession::open_read_only` over `Store::open_read_only`: nothing is created, locked,
//! fetched, imported or repaired). Its `Inspect` resolution checks every cache entry against the
//! lock; an entry that is missing or does not match is left out of the plan, said as a
//! [`SlotCheck`] (the caller's finding, with an `env restore` or `sync --repair` remedy), and the
//! plan says it is incomplete. From the agent's planned files come the planned artifacts (skills,
//! commands, agents), their rendered digests, the planned workspace writes, collisions and
//! conversion warnings. The verified package trees and the overlay it renders are kept for
//! `sources` (an artifact's source digest, read on demand).
//!
//! Owns: turning the Plan into what preflight reports. Never writes anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use agentpack_builders::project::{EntryCheck, Plan, ProjectSession, ResolvePolicy, ResolvedMode};
use agentpack_harness::{
    Agent, Collision, MergedServer, ModeFilter, OverlayInput, PackageInput, PlanEntry,
};
use anyhow::Result;

use super::sources::{entry_bytes, framed_digest};

use crate::context::Context;

/// How one locked package's cache entry compares with the lock (the session's [`EntryCheck`]).
#[derive(Debug, Clone)]
pub enum SlotCheck {
    /// Matches `content_hash` (or has none to match: `LOCK_UNVERIFIED` says so); in the plan.
    Usable {
        /// The store path name.
        store_name: Option<String>,
    },
    Missing(String),
    Mismatch(String),
}

impl From<&EntryCheck> for SlotCheck {
    fn from(check: &EntryCheck) -> SlotCheck {
        match check {
            EntryCheck::Usable { store_path, .. } => SlotCheck::Usable {
                store_name: store_path
                    .file_name()
                    .map(|name| name.to_string_lossy().into_owned()),
            },
            EntryCheck::Missing { reason } => SlotCheck::Missing(reason.clone()),
            EntryCheck::Mismatch { reason } => SlotCheck::Mismatch(reason.clone()),
        }
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
    /// The `./.agents/` overlay the plan stages, with the mode's filter (for `source_digest`).
    pub overlay: Option<OverlayInput>,
    /// The mode's filter, eject's files left out (as staged).
    pub filter: ModeFilter,
    /// The store path name the plan renders the generation under (rendered bytes that name it
    /// depend on where the generation is published).
    pub generation: String,
}

impl AgentPlan {
    /// Whether every locked package is in the plan (absence is only known then).
    pub fn complete(&self) -> bool {
        self.left_out.is_empty()
    }
}

/// The effective plan and the cache check it was planned from.
#[derive(Debug)]
pub struct Effective {
    /// Each locked package's cache entry, by module.
    pub slots: BTreeMap<String, SlotCheck>,
    pub plan: AgentPlan,
}

/// Plans `agent` in `mode` through `session` (read-only: `crate::pipeline::open_read_only`,
/// whose manifest, lock and file bytes the caller may use too, so nothing is read twice): see
/// the module doc. What reading the inputs said that the plan does not carry (an eject record that
/// does not parse) is printed as a warning.
pub fn effective_in(
    ctx: &Context,
    session: &ProjectSession,
    mode: &ResolvedMode,
    agent: Agent,
) -> Result<Effective> {
    let resolved = session.resolve(&ResolvePolicy::Inspect, None)?;
    let plan = session.plan(
        &resolved,
        mode,
        &[agent],
        &crate::pipeline::plan_options(ctx)?,
    )?;
    // MCP servers without a current lock record are findings of their own (MCP_UNLOCKED), and
    // what reading the MCP definitions said is in the plan's warnings.
    let said: BTreeSet<String> =
        agentpack_builders::mcp_lock::unlocked_warnings(&resolved.lock, plan.merged_servers())
            .into_iter()
            .chain(plan.mcp_warnings.iter().cloned())
            .collect();
    for warning in session.take_warnings() {
        if !said.contains(&warning) {
            crate::output::warn(&warning);
        }
    }
    let slots = resolved
        .entries
        .iter()
        .map(|(module, check)| (module.clone(), SlotCheck::from(check)))
        .collect();
    let left_out = resolved
        .old_lock
        .packages
        .iter()
        .map(|package| package.module.as_str())
        .filter(|module| {
            !matches!(
                resolved.entries.get(*module),
                Some(EntryCheck::Usable { .. })
            )
        })
        .map(str::to_owned)
        .collect();
    Ok(Effective {
        slots,
        plan: agent_plan(&plan, agent, left_out)?,
    })
}

/// The part of `plan` that concerns `agent`, with its artifacts and their rendered digests.
fn agent_plan(plan: &Plan, agent: Agent, left_out: Vec<String>) -> Result<AgentPlan> {
    let entries = plan.agent_entries(agent).cloned().unwrap_or_default();
    let module_of: BTreeMap<&str, &str> = plan
        .files
        .get(agent.as_str())
        .into_iter()
        .flatten()
        .filter_map(|file| Some((file.path.as_str(), file.package.as_deref()?)))
        .collect();
    let mut warnings = plan.mcp_warnings.clone();
    warnings.extend(plan.warnings.iter().cloned());
    dedup(&mut warnings);
    let mut files: BTreeMap<ArtifactKey, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    let mut modules: BTreeMap<ArtifactKey, Option<String>> = BTreeMap::new();
    for (path, entry) in &entries {
        let Some((category, name)) = artifact_of(path) else {
            continue;
        };
        let bytes = entry_bytes(entry)?;
        let key = (category, name);
        let slot = modules.entry(key.clone()).or_insert(None);
        if slot.is_none() {
            *slot = module_of
                .get(path.as_str())
                .map(|module| (*module).to_owned());
        }
        files.entry(key).or_default().push((path.clone(), bytes));
    }
    let artifacts = files
        .into_iter()
        .map(|(key, entries)| {
            let artifact = Artifact {
                category: key.0,
                name: key.1.clone(),
                module: modules.get(&key).cloned().flatten(),
                files: entries.iter().map(|(path, _)| path.clone()).collect(),
                rendered_digest: framed_digest(entries),
            };
            (key, artifact)
        })
        .collect();
    Ok(AgentPlan {
        artifacts,
        workspace_writes: plan
            .workspace_writes
            .get(agent.as_str())
            .cloned()
            .unwrap_or_default(),
        collisions: plan.collisions.clone(),
        warnings,
        mcp_servers: plan.merged_servers().to_vec(),
        left_out,
        entries,
        packages: plan.package_inputs(),
        overlay: plan.overlay_input(),
        filter: plan.inputs().mode.clone(),
        generation: plan.generation.clone(),
    })
}

/// The planned paths of `plan` that the staged generation at `staged` lacks or holds with other
/// bytes (bytes that name the planned generation, whose name depends on the agents planned, are
/// compared by presence only).
pub fn staged_differences(plan: &AgentPlan, staged: &Path) -> Vec<String> {
    let mut differences = Vec::new();
    for (path, entry) in &plan.entries {
        let staged_path = staged.join(path);
        let expected = match entry {
            PlanEntry::FromFile { source, .. } => std::fs::read(source).ok(),
            PlanEntry::Bytes(bytes) => {
                let name = plan.generation.as_bytes();
                let names_generation =
                    !name.is_empty() && bytes.windows(name.len()).any(|w| w == name);
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
    use super::artifact_of;

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
