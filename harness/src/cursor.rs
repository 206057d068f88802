//! Cursor Agent: a one-plugin marketplace at `cursor/`.
//!
//! ```text
//! cursor/
//!   .cursor-plugin/marketplace.json
//!   agentpack-bundle/
//!     .cursor-plugin/plugin.json
//!     commands/ agents/ skills/ rules/*.mdc
//!     hooks/hooks.json               Cursor's format, every hook through hook-exec dispatch
//!     mcp.json
//!   cli-config.json                  attribution off, for the fake HOME's .cursor/
//! ```
//!
//! Cursor reads workspace customization natively, so `./.agents/` is not merged here. Language
//! servers are not written (Cursor runs only its built-in ones).

use serde_json::json;

use crate::artifact::ArtifactKind;
use crate::convert;
use crate::layout::{self, Unit};
use crate::plan::{Agent, RenderPlan};
use crate::{attribution, lsp, mcp, Context};

/// The marketplace directory, relative to the generation root.
pub const ROOT: &str = "cursor";
/// The plugin directory, relative to the generation root.
pub const BUNDLE: &str = "cursor/agentpack-bundle";

pub(crate) fn render(ctx: &Context<'_>) -> RenderPlan {
    let mut plan = RenderPlan::new(Agent::Cursor);
    plan.json(
        format!("{ROOT}/.cursor-plugin/marketplace.json"),
        &json!({
            "name": "agentpack",
            "owner": {"name": "agentpack"},
            "plugins": [{
                "name": "agentpack-bundle",
                "source": "./agentpack-bundle",
                "description": "Packages staged by agentpack",
            }],
        }),
    );
    plan.json(
        format!("{BUNDLE}/.cursor-plugin/plugin.json"),
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
                convert::cursor_command(artifact),
            )],
            ArtifactKind::Agent => vec![Unit::file(
                format!("agents/{}.md", artifact.name),
                convert::cursor_agent(artifact),
            )],
            ArtifactKind::Rule => vec![Unit::file(
                format!("rules/{}.mdc", artifact.name),
                convert::cursor_rule(artifact),
            )],
        },
    );

    layout::stage_hooks(
        ctx,
        &mut plan,
        &ctx.package_hooks(),
        &format!("{BUNDLE}/hooks/hooks.json"),
    );

    let paths = ctx.plugin_path_refs();
    let servers = mcp::render_json_servers(
        Agent::Cursor,
        ctx.servers,
        &paths,
        &mut plan.warnings,
        &mut plan.secrets,
    );
    if servers.as_object().is_some_and(|m| !m.is_empty()) {
        plan.json(
            format!("{BUNDLE}/mcp.json"),
            &json!({"mcpServers": servers}),
        );
    }
    plan.warnings
        .extend(lsp::not_staged_warning(Agent::Cursor, &ctx.lsp));
    if !ctx.options.keep_attribution {
        plan.json(
            format!("{ROOT}/cli-config.json"),
            &attribution::cursor_cli_config(),
        );
    }
    plan
}
