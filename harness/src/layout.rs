//! Shared staging of converted artifacts into one agent's tree, in layering order.
//!
//! Packages are staged in the order the generation builder's layering gives (plugins by
//! cache_key, then bare skills, then `./.agents/`); a later unit (a skill directory, or one file)
//! with the same path replaces the earlier one whole, with a warning. Pure.

use std::collections::BTreeMap;

use crate::artifact::{Artifact, ArtifactKind};
use crate::convert::{self, SkillNames};
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
pub(crate) fn skill_unit(artifact: &Artifact, name: &str, normalize: bool) -> Unit {
    let key = format!("skills/{name}");
    let entries = artifact
        .skill_files
        .iter()
        .map(|file| {
            let entry = if file.relative == "SKILL.md" && normalize {
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

/// The shape of one agent: artifact -> units.
pub(crate) type Shape<'s> =
    dyn Fn(&Artifact, &str, &mut SkillNames, &mut Vec<String>) -> Vec<Unit> + 's;

/// Stages every package's artifacts (and the overlay's, when `with_overlay`) below `prefix`.
pub(crate) fn stage(
    ctx: &Context<'_>,
    plan: &mut RenderPlan,
    prefix: &str,
    with_overlay: bool,
    shape: &Shape<'_>,
) {
    let mut units: BTreeMap<String, (String, Vec<(String, PlanEntry)>)> = BTreeMap::new();
    let mut sources: Vec<(&str, &[Artifact])> = ctx
        .packages
        .iter()
        .map(|p| (p.input.module.as_str(), p.artifacts.as_slice()))
        .collect();
    if with_overlay {
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
            for unit in shape(artifact, label, &mut names, &mut plan.warnings) {
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
            plan.entries.insert(format!("{prefix}/{path}"), entry);
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
