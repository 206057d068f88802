//! OpenCode: the config root at `opencode/` (`OPENCODE_CONFIG_DIR` points at a writable home
//! layer that links into it).
//!
//! ```text
//! opencode/
//!   opencode.json                    mcp, lsp, instructions, permission (--yolo)
//!   agentpack-no-attribution.md
//!   agents/ commands/ skills/        converted artifacts (rules become skills)
//!   plugins/agentpack-hooks.js       hooks through hook-exec dispatch
//! ```
//!
//! OpenCode validates every agent file strictly, so agents get the field conversion of
//! [`crate::render::convert::opencode_agent`]. `./.agents/` is not merged (OpenCode reads it natively).

use serde_json::{json, Map, Value};

use crate::agent::Agent;
use crate::plan::RenderPlan;
use crate::render::convert;
use crate::render::layout::{self, ArtifactLayout, Place};
use crate::render::{attribution, lsp, mcp, Context};

/// The config root, relative to the generation root.
pub const ROOT: &str = "opencode";

/// Where commands, agents and rules go in the config root (rules become skills).
const LAYOUT: ArtifactLayout = ArtifactLayout {
    root: ROOT,
    with_overlay: false,
    command: Place::file("commands", "md", convert::opencode_command),
    agent: Place::file("agents", "md", convert::opencode_agent),
    rule: Place::Skill,
};

pub(crate) fn render(ctx: &Context<'_>) -> RenderPlan {
    let mut plan = RenderPlan::new(Agent::OpenCode);
    layout::stage(ctx, &mut plan, &LAYOUT);

    layout::stage_hooks(
        ctx,
        &mut plan,
        &ctx.package_hooks(),
        &format!("{ROOT}/plugins/agentpack-hooks.js"),
    );

    let mut config = Map::new();
    config.insert("$schema".into(), json!("https://opencode.ai/config.json"));
    if !ctx.options.keep_attribution {
        let instruction = format!("{ROOT}/agentpack-no-attribution.md");
        config.insert(
            "instructions".into(),
            json!([format!("{}/{instruction}", ctx.generation_root())]),
        );
        plan.bytes(instruction, attribution::opencode_instruction());
    }
    let paths = ctx.plugin_path_refs();
    let servers = mcp::render_opencode(ctx.servers, &paths, &mut plan.warnings, &mut plan.secrets);
    if servers.as_object().is_some_and(|m| !m.is_empty()) {
        config.insert("mcp".into(), servers);
    }
    if !ctx.lsp.is_empty() {
        config.insert(
            "lsp".into(),
            lsp::render_opencode(&ctx.lsp, &mut plan.warnings),
        );
    }
    if ctx.options.yolo {
        config.insert("permission".into(), json!("allow"));
    }
    plan.json(format!("{ROOT}/opencode.json"), &Value::Object(config));
    plan
}
