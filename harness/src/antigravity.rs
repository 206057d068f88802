//! Antigravity: the workspace plugin at `agy/agentpack-bundle/`.
//!
//! ```text
//! agy/agentpack-bundle/
//!   plugin.json
//!   skills/ agents/ commands/ rules/   rules preserved (.mdc re-rendered with `trigger`)
//!   mcp_config.json                    remote servers use serverUrl
//!   hooks.json                         one named hook, `agentpack`, keyed by Antigravity events
//!   rules/agentpack-no-attribution.md  always-apply guidance
//! ```
//!
//! Antigravity reads workspace customization natively, so `./.agents/` is not merged here.

use serde_json::json;

use crate::artifact::ArtifactKind;
use crate::convert;
use crate::layout::{self, Unit};
use crate::plan::{Agent, RenderPlan};
use crate::{attribution, lsp, mcp, Context};

/// The plugin directory, relative to the generation root.
pub const BUNDLE: &str = "agy/agentpack-bundle";

pub(crate) fn render(ctx: &Context<'_>) -> RenderPlan {
    let mut plan = RenderPlan::new(Agent::Antigravity);
    plan.json(
        format!("{BUNDLE}/plugin.json"),
        &json!({
            "name": "agentpack-bundle",
            "version": "0.0.0",
            "description": "Skills, commands, agents, rules, hooks and MCP servers staged by agentpack",
        }),
    );
    layout::stage(
        ctx,
        &mut plan,
        BUNDLE,
        false,
        &|artifact, _label, _names, _warnings| match artifact.kind {
            ArtifactKind::Skill => vec![layout::skill_unit(artifact, &artifact.name, true)],
            ArtifactKind::Command => vec![Unit::file(
                format!("commands/{}.md", artifact.name),
                convert::claude_command(artifact),
            )],
            ArtifactKind::Agent => vec![Unit::file(
                format!("agents/{}.md", artifact.name),
                convert::claude_agent(artifact),
            )],
            ArtifactKind::Rule => vec![Unit::file(
                format!("rules/{}.md", artifact.name),
                convert::antigravity_rule(artifact),
            )],
        },
    );

    layout::stage_hooks(
        ctx,
        &mut plan,
        &ctx.package_hooks(),
        &format!("{BUNDLE}/hooks.json"),
    );

    let paths = ctx.plugin_path_refs();
    let servers = mcp::render_json_servers(
        Agent::Antigravity,
        ctx.servers,
        &paths,
        &mut plan.warnings,
        &mut plan.secrets,
    );
    if servers.as_object().is_some_and(|m| !m.is_empty()) {
        plan.json(
            format!("{BUNDLE}/mcp_config.json"),
            &json!({"mcpServers": servers}),
        );
    }
    plan.warnings
        .extend(lsp::not_staged_warning(Agent::Antigravity, &ctx.lsp));
    if !ctx.options.keep_attribution {
        plan.bytes(
            format!("{BUNDLE}/rules/agentpack-no-attribution.md"),
            attribution::antigravity_rule(),
        );
    }
    plan
}
