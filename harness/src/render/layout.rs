//! What every agent's render shares: staging converted artifacts into the agent's tree, in
//! layering order, by the agent's [`ArtifactLayout`] table; the overlay's own subtree; hooks; the
//! bundle manifest; and the MCP servers in the agent's JSON or TOML shape.
//!
//! Packages are staged in the order the generation builder's layering gives (plugins by
//! cache_key, then bare skills, then `./.agents/`); a later unit (a skill directory, or one file)
//! with the same path replaces the earlier one whole, with a warning. Skills always become
//! `skills/<name>/`; where commands, agents and rules go is the agent's table. Pure: it only adds
//! entries and messages to a [`RenderPlan`].

use serde_json::{json, Value};

use crate::agent::Agent;
use crate::input::artifact::{Artifact, ArtifactKind};
use crate::plan::{PlanEntry, RenderPlan, SecretLayer};
use crate::render::convert::{self, SkillNames};
use crate::render::mcp::{self, MergedServer};
use crate::render::Context;

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
    // A nested name (`git/commit`) becomes `git-commit` by the conversion rule; other characters
    // a skill name cannot hold (`clean_gone`) are said.
    if base != artifact.name.replace('/', "-") {
        let message = format!(
            "{label}: {} `{}` is staged as skill `{base}`: a skill name is lowercase letters, digits and single dashes",
            artifact.kind.as_str(),
            artifact.name
        );
        if !warnings.contains(&message) {
            warnings.push(message);
        }
    }
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

/// Rewrites `${CLAUDE_PLUGIN_ROOT}`, `${CURSOR_PLUGIN_ROOT}`, `${PLUGIN_ROOT}` (and the plugin
/// data variables) in the staged text of `artifact` to its package's staged copy `root` (and data
/// directory `data`). Only the artifact's own file is rewritten (a skill's `SKILL.md`), never the
/// other files of a skill.
pub(crate) fn localize_plugin_root(
    entries: &mut [(String, PlanEntry)],
    artifact: &Artifact,
    root: &str,
    data: &str,
) {
    for (_, entry) in entries.iter_mut() {
        let text = match entry {
            PlanEntry::Bytes(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => text.to_string(),
                Err(_) => continue,
            },
            PlanEntry::FromFile { source, .. } if *source == artifact.source => {
                artifact.text.clone()
            }
            _ => continue,
        };
        let (out, changed) = mcp::substitute_plugin_vars(&text, root, data);
        if changed {
            *entry = PlanEntry::Bytes(out.into_bytes());
        }
    }
}

/// Stages every package's artifacts (and the overlay's, when the layout merges it) below the
/// layout's root. Two packages' artifacts under one name are both kept (see [`crate::render::collision`]).
pub(crate) fn stage(ctx: &Context<'_>, plan: &mut RenderPlan, layout: &ArtifactLayout) {
    let mut staging = crate::render::collision::Staging::new(layout, ctx.read_source);
    let mut sources: Vec<Source<'_>> = ctx
        .packages
        .iter()
        .map(|p| Source {
            label: p.input.module.as_str(),
            name: p.name.as_str(),
            artifacts: p.artifacts.as_slice(),
            plugin_root: p
                .plugin_root
                .as_deref()
                .map(|root| (root, p.plugin_data.as_str())),
        })
        .collect();
    if layout.with_overlay {
        if let Some(overlay) = ctx.overlay {
            sources.push(Source {
                label: crate::render::collision::OVERLAY,
                name: "agents",
                artifacts: overlay.artifacts.as_slice(),
                plugin_root: None,
            });
        }
    }
    for source in &sources {
        let mut names = SkillNames::new(
            source
                .artifacts
                .iter()
                .filter(|a| a.kind == ArtifactKind::Skill)
                .map(|a| a.name.as_str()),
        );
        for artifact in source.artifacts {
            let units = layout.units(artifact, source.label, &mut names, &mut plan.warnings);
            for (index, mut unit) in units.into_iter().enumerate() {
                if let Some((root, data)) = source.plugin_root {
                    localize_plugin_root(&mut unit.entries, artifact, root, data);
                }
                staging.add(plan, source, artifact, index, unit);
            }
        }
    }
    for (path, entry) in staging.into_entries() {
        plan.entries
            .insert(format!("{}/{path}", layout.root), entry);
    }
}

/// One input tree's artifacts, as [`stage`] layers them.
pub(crate) struct Source<'a> {
    /// The module (or `.agents`), in messages.
    pub label: &'a str,
    /// The prefix of a renamed collision loser.
    pub name: &'a str,
    pub artifacts: &'a [Artifact],
    /// The package's staged copy and data directory, when its text names them.
    pub plugin_root: Option<(&'a str, &'a str)>,
}

/// What one artifact becomes in `layout` (for re-staging a renamed artifact).
pub(crate) fn units_of(
    layout: &ArtifactLayout,
    artifact: &Artifact,
    label: &str,
    plugin_root: Option<(&str, &str)>,
) -> Vec<Unit> {
    let mut ignored = Vec::new();
    let mut units = layout.units(artifact, label, &mut SkillNames::default(), &mut ignored);
    if let Some((root, data)) = plugin_root {
        for unit in &mut units {
            localize_plugin_root(&mut unit.entries, artifact, root, data);
        }
    }
    units
}

/// Copies the overlay's `<subtree>/` (its `claude/` or `codex/` directory) unchanged below `prefix`.
pub(crate) fn overlay_subtree(
    ctx: &Context<'_>,
    plan: &mut RenderPlan,
    subtree: &str,
    prefix: &str,
) {
    let Some(overlay) = ctx.overlay else { return };
    let Ok(crate::input::tree::Node::Dir(resolved)) = overlay.tree.resolve(subtree) else {
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
    packages: &[crate::render::hooks::PackageHooks],
    file: &str,
) {
    let exe = ctx.exe();
    let generation_root = ctx.generation_root();
    let hook_context = crate::render::hooks::HookContext {
        agentpack_exe: &exe,
        generation_root: &generation_root,
    };
    let rendered = crate::render::hooks::render(plan.agent, packages, file, &hook_context);
    add_hooks(plan, rendered);
}

/// Adds a hook render's files and messages to a plan.
pub(crate) fn add_hooks(plan: &mut RenderPlan, rendered: crate::render::hooks::HookRender) {
    for (path, bytes) in rendered.files {
        plan.bytes(path, bytes);
    }
    plan.warnings.extend(rendered.warnings);
    plan.info.extend(rendered.info);
}

/// Where a plugin bundle that carries every kind of artifact keeps its files, relative to the
/// generation root.
pub(crate) struct FullBundle {
    /// The plugin manifest.
    pub manifest: String,
    /// The hooks file, every hook through hook-exec dispatch.
    pub hooks: String,
    /// The `{"mcpServers": ...}` file.
    pub mcp: String,
}

/// Stages a plugin bundle of everything (Cursor, Antigravity): its manifest, `layout`'s artifacts,
/// the packages' hooks and the MCP servers at `bundle`'s paths; language servers are not staged
/// (the plan warns when there are some).
pub(crate) fn stage_full_bundle(
    ctx: &Context<'_>,
    plan: &mut RenderPlan,
    layout: &ArtifactLayout,
    bundle: FullBundle,
) {
    plan.json(
        bundle.manifest,
        &bundle_manifest(
            "Skills, commands, agents, rules, hooks and MCP servers staged by agentpack",
        ),
    );
    stage(ctx, plan, layout);
    stage_hooks(ctx, plan, &ctx.package_hooks(), &bundle.hooks);
    stage_json_servers(ctx, plan, bundle.mcp);
    plan.warnings
        .extend(crate::render::lsp::not_staged_warning(plan.agent, &ctx.lsp));
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
    let servers = render_servers(ctx, plan, mcp::render_json_servers);
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
    let servers = render_servers(ctx, plan, mcp::render_toml_servers);
    if !servers.is_empty() {
        config.insert("mcp_servers".into(), servers.into());
    }
}

/// One of [`mcp`]'s server renderers: [`mcp::render_json_servers`] or [`mcp::render_toml_servers`].
type ServerRenderer<T> =
    fn(Agent, &[MergedServer], &[&str], &mut Vec<String>, &mut SecretLayer) -> T;

/// The context's merged MCP servers rendered by `render` (JSON or TOML) for the plan's agent,
/// with the plugin paths a value may name; warnings and secrets go to the plan.
fn render_servers<T>(ctx: &Context<'_>, plan: &mut RenderPlan, render: ServerRenderer<T>) -> T {
    let paths = ctx.plugin_path_refs();
    render(
        plan.agent,
        ctx.servers,
        &paths,
        &mut plan.warnings,
        &mut plan.secrets,
    )
}
