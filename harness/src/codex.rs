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

use crate::artifact::ArtifactKind;
use crate::convert;
use crate::layout::{self, Unit};
use crate::plan::{Agent, PlanEntry, RenderPlan};
use crate::tree::Node;
use crate::{lsp, mcp, Context};

/// The home content directory, relative to the generation root.
pub const ROOT: &str = "codex-home";

pub(crate) fn render(ctx: &Context<'_>) -> RenderPlan {
    let mut plan = RenderPlan::new(Agent::Codex);
    layout::stage(
        ctx,
        &mut plan,
        ROOT,
        true,
        &|artifact, label, names, warnings| match artifact.kind {
            ArtifactKind::Skill => vec![layout::skill_unit(artifact, &artifact.name, true)],
            ArtifactKind::Command | ArtifactKind::Rule => {
                vec![layout::fallback_skill(artifact, label, names, warnings)]
            }
            ArtifactKind::Agent => {
                let name = convert::leaf_name(&artifact.name).to_string();
                vec![
                    Unit::file(
                        format!("agents/{name}.toml"),
                        PlanEntry::Bytes(convert::codex_agent_toml(artifact, &name, label)),
                    ),
                    layout::fallback_skill(artifact, label, names, warnings),
                ]
            }
        },
    );
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
    let paths = ctx.plugin_path_refs();
    let servers = mcp::render_toml_servers(
        Agent::Codex,
        ctx.servers,
        &paths,
        &mut plan.warnings,
        &mut plan.secrets,
    );
    if !servers.is_empty() {
        config.insert("mcp_servers".into(), servers.into());
    }
    plan.bytes(
        format!("{ROOT}/config.toml"),
        toml::to_string(&config).unwrap_or_default(),
    );
    plan.warnings
        .extend(lsp::not_staged_warning(Agent::Codex, &ctx.lsp));
    plan
}
