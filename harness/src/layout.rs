//! What every agent's render shares: staging converted artifacts into the agent's tree, in
//! layering order, by the agent's [`ArtifactLayout`] table; the overlay's own subtree; hooks; the
//! bundle manifest; and the MCP servers in the agent's JSON or TOML shape.
//!
//! Packages are staged in the order the generation builder's layering gives (plugins by
//! cache_key, then bare skills, then `./.agents/`); a later unit (a skill directory, or one file)
//! with the same path replaces the earlier one whole, with a warning. Skills always become
//! `skills/<name>/`; where commands, agents and rules go is the agent's table. Pure: it only adds
//! entries and messages to a [`RenderPlan`].

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::artifact::{Artifact, ArtifactKind};
use crate::convert::{self, SkillNames};
use crate::mcp;
use crate::plan::{PlanEntry, RenderPlan};
use crate::Context;

/// What one artifact becomes: units keyed by their path below the agent root.
pub(crate) struct Unit {
    pub key: String,
    pub entries: Vec<(String, PlanEntry)>,
}

impl Unit {
    pub fn file(path: String, entry: PlanEntry) -> Self {
        Self {
            key: path.clone(),
            entries: vec![(path, entry)],
        }
    }
}

/// The files of a skill directory under `skills/<name>/`, its `SKILL.md` normalized.
fn skill_unit(artifact: &Artifact) -> Unit {
    let name = &artifact.name;
    let key = format!("skills/{name}");
    let entries = artifact
        .skill_files
        .iter()
        .map(|file| {
            let entry = if file.relative == "SKILL.md" {
                convert::normalized_skill(artifact, name)
            } else {
                PlanEntry::FromFile {
                    source: file.source.clone(),
                    executable: file.executable,
                }
            };
            (format!("{key}/{}", file.relative), entry)
        })
        .collect();
    Unit { key, entries }
}

/// A converted command, agent or rule as a skill, named per the collision rule.
pub(crate) fn fallback_skill(
    artifact: &Artifact,
    label: &str,
    names: &mut SkillNames,
    warnings: &mut Vec<String>,
) -> Unit {
    let base = convert::skill_name(&artifact.name);
    let (name, warning) = names.claim(&base, artifact.kind, label);
    warnings.extend(warning);
    Unit {
        key: format!("skills/{name}"),
        entries: vec![(
            format!("skills/{name}/SKILL.md"),
            convert::as_skill(artifact, &name, label),
        )],
    }
}

/// An agent's conversion of one artifact into its native file, given the package's label (for
/// warnings) and the plan's warnings.
pub(crate) type Convert = fn(&Artifact, &str, &mut Vec<String>) -> PlanEntry;

/// Units an agent builds itself from one artifact, given the label, the package's skill names and
/// the plan's warnings.
pub(crate) type BuildUnits = fn(&Artifact, &str, &mut SkillNames, &mut Vec<String>) -> Vec<Unit>;

/// Where an agent puts one kind of artifact.
pub(crate) enum Place {
    /// `<dir>/<artifact name>.<extension>`, converted by `convert`.
    File {
        dir: &'static str,
        extension: &'static str,
        convert: Convert,
    },
    /// A skill (the agent has no such type), named per the collision rule.
    Skill,
    /// What the agent's own function builds.
    Units(BuildUnits),
}

impl Place {
    /// `<dir>/<artifact name>.<extension>`, converted by `convert`.
    pub const fn file(dir: &'static str, extension: &'static str, convert: Convert) -> Self {
        Place::File {
            dir,
            extension,
            convert,
        }
    }
}

/// One agent's tree of converted artifacts: where it is, whether `./.agents/` is merged into it,
/// and where its commands, agents and rules go (skills always go to `skills/<name>/`).
pub(crate) struct ArtifactLayout {
    /// The tree, relative to the generation root.
    pub root: &'static str,
    /// Whether the overlay's artifacts are staged too (last).
    pub with_overlay: bool,
    pub command: Place,
    pub agent: Place,
    pub rule: Place,
}

impl ArtifactLayout {
    /// What one artifact becomes in this layout.
    fn units(
        &self,
        artifact: &Artifact,
        label: &str,
        names: &mut SkillNames,
        warnings: &mut Vec<String>,
    ) -> Vec<Unit> {
        let place = match artifact.kind {
            ArtifactKind::Skill => return vec![skill_unit(artifact)],
            ArtifactKind::Command => &self.command,
            ArtifactKind::Agent => &self.agent,
            ArtifactKind::Rule => &self.rule,
        };
        match place {
            Place::File {
                dir,
                extension,
                convert,
            } => vec![Unit::file(
                format!("{dir}/{}.{extension}", artifact.name),
                convert(artifact, label, warnings),
            )],
            Place::Skill => vec![fallback_skill(artifact, label, names, warnings)],
            Place::Units(build) => build(artifact, label, names, warnings),
        }
    }
}

/// Stages every package's artifacts (and the overlay's, when the layout merges it) below the
/// layout's root.
pub(crate) fn stage(ctx: &Context<'_>, plan: &mut RenderPlan, layout: &ArtifactLayout) {
    let mut units: BTreeMap<String, (String, Vec<(String, PlanEntry)>)> = BTreeMap::new();
    let mut sources: Vec<(&str, &[Artifact])> = ctx
        .packages
        .iter()
        .map(|p| (p.input.module.as_str(), p.artifacts.as_slice()))
        .collect();
    if layout.with_overlay {
        if let Some(overlay) = ctx.overlay {
            sources.push((".agents", overlay.artifacts.as_slice()));
        }
    }
    for (label, artifacts) in sources {
        let mut names = SkillNames::new(
            artifacts
                .iter()
                .filter(|a| a.kind == ArtifactKind::Skill)
                .map(|a| a.name.as_str()),
        );
        for artifact in artifacts {
            for unit in layout.units(artifact, label, &mut names, &mut plan.warnings) {
                if let Some((previous, _)) = units.get(&unit.key) {
                    if previous != label {
                        plan.warnings.push(format!(
                            "{}: `{}` from {label} replaces the one from {previous}",
                            plan.agent, unit.key
                        ));
                    }
                }
                units.insert(unit.key, (label.to_string(), unit.entries));
            }
        }
    }
    for (_, (_, entries)) in units {
        for (path, entry) in entries {
            plan.entries
                .insert(format!("{}/{path}", layout.root), entry);
        }
    }
}

/// Copies the overlay's `<subtree>/` (its `claude/` or `codex/` directory) unchanged below `prefix`.
pub(crate) fn overlay_subtree(
    ctx: &Context<'_>,
    plan: &mut RenderPlan,
    subtree: &str,
    prefix: &str,
) {
    let Some(overlay) = ctx.overlay else { return };
    let Ok(crate::tree::Node::Dir(resolved)) = overlay.tree.resolve(subtree) else {
        return;
    };
    let (files, problems) = overlay.tree.files_under(&resolved);
    for (path, problem) in problems {
        plan.warnings
            .push(format!(".agents: skipped {}", problem.describe(&path)));
    }
    for (relative, resolved) in files {
        plan.entries.insert(
            format!("{prefix}/{relative}"),
            PlanEntry::FromFile {
                source: overlay.tree.absolute(&resolved),
                executable: overlay.tree.executable(&resolved),
            },
        );
    }
}

/// Renders `packages`' hooks for the plan's agent into `file` (calling agentpack by its absolute path,
/// specs under the generation) and adds the files and messages to the plan.
pub(crate) fn stage_hooks(
    ctx: &Context<'_>,
    plan: &mut RenderPlan,
    packages: &[crate::hooks::PackageHooks],
    file: &str,
) {
    let exe = ctx.exe();
    let generation_root = ctx.generation_root();
    let hook_context = crate::hooks::HookContext {
        agentpack_exe: &exe,
        generation_root: &generation_root,
    };
    let rendered = crate::hooks::render(plan.agent, packages, file, &hook_context);
    add_hooks(plan, rendered);
}

/// Adds a hook render's files and messages to a plan.
pub(crate) fn add_hooks(plan: &mut RenderPlan, rendered: crate::hooks::HookRender) {
    for (path, bytes) in rendered.files {
        plan.bytes(path, bytes);
    }
    plan.warnings.extend(rendered.warnings);
    plan.info.extend(rendered.info);
}

/// A bundle's plugin manifest: named `agentpack-bundle`, version `0.0.0`, with `description`.
pub(crate) fn bundle_manifest(description: &str) -> Value {
    json!({
        "name": "agentpack-bundle",
        "version": "0.0.0",
        "description": description,
    })
}

/// The merged MCP servers as the plan's agent's JSON `mcpServers` map (Claude Code, Cursor,
/// Antigravity), written to `file` as `{"mcpServers": ...}` unless there are none. Returns the
/// names of the servers written.
pub(crate) fn stage_json_servers(
    ctx: &Context<'_>,
    plan: &mut RenderPlan,
    file: String,
) -> Vec<String> {
    let paths = ctx.plugin_path_refs();
    let servers = mcp::render_json_servers(
        plan.agent,
        ctx.servers,
        &paths,
        &mut plan.warnings,
        &mut plan.secrets,
    );
    let names: Vec<String> = servers
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    if !names.is_empty() {
        plan.json(file, &json!({"mcpServers": servers}));
    }
    names
}

/// The merged MCP servers as the plan's agent's `[mcp_servers]` table (Codex, Grok), inserted
/// into `config` unless there are none.
pub(crate) fn insert_toml_servers(
    ctx: &Context<'_>,
    plan: &mut RenderPlan,
    config: &mut toml::Table,
) {
    let paths = ctx.plugin_path_refs();
    let servers = mcp::render_toml_servers(
        plan.agent,
        ctx.servers,
        &paths,
        &mut plan.warnings,
        &mut plan.secrets,
    );
    if !servers.is_empty() {
        config.insert("mcp_servers".into(), servers.into());
    }
}
