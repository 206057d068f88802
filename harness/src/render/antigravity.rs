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

use crate::agent::Agent;
use crate::plan::RenderPlan;
use crate::render::convert;
use crate::render::layout::{self, ArtifactLayout, Place};
use crate::render::{attribution, claude, Context};

/// The plugin directory, relative to the generation root.
pub const BUNDLE: &str = "agy/agentpack-bundle";

/// Where commands, agents and rules go in the plugin (commands and agents in Claude Code's shape).
const LAYOUT: ArtifactLayout = ArtifactLayout {
    root: BUNDLE,
    with_overlay: false,
    command: claude::COMMANDS,
    agent: claude::AGENTS,
    rule: Place::file("rules", "md", |a, _, _| convert::antigravity_rule(a)),
};

pub(crate) fn render(ctx: &Context<'_>) -> RenderPlan {
    let mut plan = RenderPlan::new(Agent::Antigravity);
    layout::stage_full_bundle(
        ctx,
        &mut plan,
        &LAYOUT,
        layout::FullBundle {
            manifest: format!("{BUNDLE}/plugin.json"),
            hooks: format!("{BUNDLE}/hooks.json"),
            mcp: format!("{BUNDLE}/mcp_config.json"),
        },
    );
    if !ctx.options.keep_attribution {
        plan.bytes(
            format!("{BUNDLE}/rules/agentpack-no-attribution.md"),
            attribution::antigravity_rule(),
        );
    }
    plan
}
