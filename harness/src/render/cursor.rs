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

use crate::agent::Agent;
use crate::plan::RenderPlan;
use crate::render::convert;
use crate::render::layout::{self, ArtifactLayout, Place};
use crate::render::{attribution, Context};

/// The marketplace directory, relative to the generation root.
pub const ROOT: &str = "cursor";
/// The plugin directory, relative to the generation root.
pub const BUNDLE: &str = "cursor/agentpack-bundle";

/// Where commands, agents and rules go in the bundle.
const LAYOUT: ArtifactLayout = ArtifactLayout {
    root: BUNDLE,
    with_overlay: false,
    command: Place::file("commands", "md", |a, _, _| convert::cursor_command(a)),
    agent: Place::file("agents", "md", |a, _, _| convert::cursor_agent(a)),
    rule: Place::file("rules", "mdc", |a, _, _| convert::cursor_rule(a)),
};

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
    layout::stage_full_bundle(
        ctx,
        &mut plan,
        &LAYOUT,
        layout::FullBundle {
            manifest: format!("{BUNDLE}/.cursor-plugin/plugin.json"),
            hooks: format!("{BUNDLE}/hooks/hooks.json"),
            mcp: format!("{BUNDLE}/mcp.json"),
        },
    );
    if !ctx.options.keep_attribution {
        plan.json(
            format!("{ROOT}/cli-config.json"),
            &attribution::cursor_cli_config(),
        );
    }
    plan
}
