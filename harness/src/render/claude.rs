//! Claude Code: the `--plugin-dir` bundle at `plugins/agentpack-bundle/`.
//!
//! ```text
//! plugins/agentpack-bundle/
//!   .claude-plugin/plugin.json
//!   commands/ agents/ skills/       converted artifacts (rules become skills)
//!   hooks/hooks.json                every hook calls agentpack hook-exec dispatch
//!   .mcp.json  .lsp.json
//!   agentpack-settings.json         passed inline with --settings
//! ```
//!
//! The `./.agents/` overlay is merged here, last (its `claude/` subtree at the bundle root).

use serde_json::json;

use crate::input::tree::Node;
use crate::plan::PlanEntry;
use crate::render::hooks::{HookEntry, HookFile, HookFormat, PackageHooks};

use crate::agent::Agent;
use crate::plan::RenderPlan;
use crate::render::convert;
use crate::render::layout::{self, ArtifactLayout, Place};
use crate::render::{attribution, lsp, Context};

/// Where the overlay's guidance is staged inside the bundle.
pub const GUIDANCE: &str = "agentpack-guidance.md";

/// The overlay's top-level `CLAUDE.md` (else `AGENTS.md`): staged in the bundle and printed by a
/// SessionStart hook, whose output Claude Code adds to the session's context.
fn guidance(ctx: &Context<'_>, plan: &mut RenderPlan) -> Option<PackageHooks> {
    let overlay = ctx.overlay?;
    let resolved = ["CLAUDE.md", "AGENTS.md"].into_iter().find_map(|name| {
        match overlay.tree.resolve(name) {
            Ok(Node::File(resolved)) => Some(resolved),
            _ => None,
        }
    })?;
    let staged = format!("{BUNDLE}/{GUIDANCE}");
    plan.entries.insert(
        staged.clone(),
        PlanEntry::FromFile {
            source: overlay.tree.absolute(&resolved),
            executable: false,
        },
    );
    let mut handler = serde_json::Map::new();
    handler.insert("type".into(), json!("command"));
    handler.insert("command".into(), json!("cat"));
    handler.insert(
        "args".into(),
        json!([format!("{}/{staged}", ctx.generation_root())]),
    );
    Some(PackageHooks {
        module: ".agents".into(),
        plugin_root: overlay.root.clone(),
        plugin_data: String::new(),
        files: vec![HookFile {
            format: HookFormat::Claude,
            source: format!(".agents {resolved}"),
            entries: vec![HookEntry {
                event: "SessionStart".into(),
                matcher: None,
                handler,
            }],
        }],
    })
}

/// The bundle directory, relative to the generation root.
pub const BUNDLE: &str = "plugins/agentpack-bundle";

/// Claude Code's commands, `commands/<name>.md` (Grok and Antigravity read the same shape).
pub(crate) const COMMANDS: Place =
    Place::file("commands", "md", |a, _, _| convert::claude_command(a));

/// Claude Code's subagents, `agents/<name>.md` (Grok and Antigravity read the same shape).
pub(crate) const AGENTS: Place = Place::file("agents", "md", |a, _, _| convert::claude_agent(a));

/// Where commands, agents and rules go in the bundle (rules become skills).
const LAYOUT: ArtifactLayout = ArtifactLayout {
    root: BUNDLE,
    with_overlay: true,
    command: COMMANDS,
    agent: AGENTS,
    rule: Place::Skill,
};

pub(crate) fn render(ctx: &Context<'_>) -> RenderPlan {
    let mut plan = RenderPlan::new(Agent::Claude);
    let mut manifest = layout::bundle_manifest(
        "Skills, commands, agents, hooks and MCP servers staged by agentpack",
    );
    manifest["author"] = json!({"name": "agentpack"});
    plan.json(format!("{BUNDLE}/.claude-plugin/plugin.json"), &manifest);
    layout::stage(ctx, &mut plan, &LAYOUT);
    layout::overlay_subtree(ctx, &mut plan, "claude", BUNDLE);

    let mut hook_packages = ctx.package_hooks();
    hook_packages.extend(ctx.overlay_hooks());
    hook_packages.extend(guidance(ctx, &mut plan));
    layout::stage_hooks(
        ctx,
        &mut plan,
        &hook_packages,
        &format!("{BUNDLE}/hooks/hooks.json"),
    );

    let names = layout::stage_json_servers(ctx, &mut plan, format!("{BUNDLE}/.mcp.json"));
    if !ctx.lsp.is_empty() {
        plan.json(
            format!("{BUNDLE}/.lsp.json"),
            &lsp::servers_object(&ctx.lsp),
        );
    }
    plan.json(
        format!("{BUNDLE}/agentpack-settings.json"),
        &attribution::claude_settings(ctx.options.keep_attribution, &names),
    );
    plan
}
