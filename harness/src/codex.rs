//! Codex: the content of a Codex home at `codex-home/` (the launcher's writable home layer links
//! into it and merges `config.toml` with the user's own, see [`crate::home`]).
//!
//! ```text
//! codex-home/
//!   config.toml                      fragment: [mcp_servers], credential stores
//!   skills/<name>/SKILL.md           skills; commands, agents and rules as skills
//!   agents/<name>.toml               custom agents (name, description, developer_instructions)
//!   hooks.json                       every hook through hook-exec dispatch
//!   AGENTS.md                        from ./.agents/AGENTS.md
//! ```
//!
//! Skill files are always regular-file entries (Codex ignores a `SKILL.md` that is a symlink).
//! `./.agents/` is merged here, last. Language servers are not written (Codex has no setting).

use crate::artifact::Artifact;
use crate::convert::{self, SkillNames};
use crate::layout::{self, ArtifactLayout, Place, Unit};
use crate::plan::{Agent, PlanEntry, RenderPlan};
use crate::tree::Node;
use crate::{lsp, Context};

/// The home content directory, relative to the generation root.
pub const ROOT: &str = "codex-home";

/// Codex has skills and custom agents: commands and rules become skills, an agent becomes both.
const LAYOUT: ArtifactLayout = ArtifactLayout {
    root: ROOT,
    with_overlay: true,
    command: Place::Skill,
    agent: Place::Units(agent_units),
    rule: Place::Skill,
};

/// An agent as `agents/<leaf name>.toml` and as a skill.
fn agent_units(
    artifact: &Artifact,
    label: &str,
    names: &mut SkillNames,
    warnings: &mut Vec<String>,
) -> Vec<Unit> {
    let name = convert::leaf_name(&artifact.name).to_string();
    vec![
        Unit::file(
            format!("agents/{name}.toml"),
            PlanEntry::Bytes(convert::codex_agent_toml(artifact, &name, label)),
        ),
        layout::fallback_skill(artifact, label, names, warnings),
    ]
}

pub(crate) fn render(ctx: &Context<'_>) -> RenderPlan {
    let mut plan = RenderPlan::new(Agent::Codex);
    layout::stage(ctx, &mut plan, &LAYOUT);
    layout::overlay_subtree(ctx, &mut plan, "codex", ROOT);
    if let Some(overlay) = ctx.overlay {
        if let Ok(Node::File(resolved)) = overlay.tree.resolve("AGENTS.md") {
            plan.entries.insert(
                format!("{ROOT}/AGENTS.md"),
                PlanEntry::FromFile {
                    source: overlay.tree.absolute(&resolved),
                    executable: false,
                },
            );
        }
    }

    let mut hook_packages = ctx.package_hooks();
    hook_packages.extend(ctx.overlay_hooks());
    layout::stage_hooks(
        ctx,
        &mut plan,
        &hook_packages,
        &format!("{ROOT}/hooks.json"),
    );

    let mut config = toml::Table::new();
    config.insert("cli_auth_credentials_store".into(), "file".into());
    config.insert("mcp_oauth_credentials_store".into(), "file".into());
    layout::insert_toml_servers(ctx, &mut plan, &mut config);
    plan.bytes(
        format!("{ROOT}/config.toml"),
        toml::to_string(&config).unwrap_or_default(),
    );
    plan.warnings
        .extend(lsp::not_staged_warning(Agent::Codex, &ctx.lsp));
    plan
}
