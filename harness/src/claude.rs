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

use crate::hooks::{HookEntry, HookFile, HookFormat, PackageHooks};
use crate::plan::PlanEntry;
use crate::tree::Node;

use crate::artifact::ArtifactKind;
use crate::convert;
use crate::layout::{self, Unit};
use crate::plan::{Agent, RenderPlan};
use crate::{attribution, mcp, Context};

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

pub(crate) fn render(ctx: &Context<'_>) -> RenderPlan {
    let mut plan = RenderPlan::new(Agent::Claude);
    plan.json(
        format!("{BUNDLE}/.claude-plugin/plugin.json"),
        &json!({
            "name": "agentpack-bundle",
            "version": "0.0.0",
            "description": "Skills, commands, agents, hooks and MCP servers staged by agentpack",
            "author": {"name": "agentpack"},
        }),
    );
    layout::stage(
        ctx,
        &mut plan,
        BUNDLE,
        true,
        &|artifact, label, names, warnings| match artifact.kind {
            ArtifactKind::Skill => vec![layout::skill_unit(artifact, &artifact.name, true)],
            ArtifactKind::Command => vec![Unit::file(
                format!("commands/{}.md", artifact.name),
                convert::claude_command(artifact),
            )],
            ArtifactKind::Agent => vec![Unit::file(
                format!("agents/{}.md", artifact.name),
                convert::claude_agent(artifact),
            )],
            ArtifactKind::Rule => vec![layout::fallback_skill(artifact, label, names, warnings)],
        },
    );
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

    let paths = ctx.plugin_path_refs();
    let servers = mcp::render_json_servers(
        Agent::Claude,
        ctx.servers,
        &paths,
        &mut plan.warnings,
        &mut plan.secrets,
    );
    let names: Vec<String> = servers
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    if !names.is_empty() {
        plan.json(
            format!("{BUNDLE}/.mcp.json"),
            &json!({"mcpServers": servers}),
        );
    }
    if !ctx.lsp.is_empty() {
        let map: serde_json::Map<String, serde_json::Value> = ctx.lsp.clone().into_iter().collect();
        plan.json(
            format!("{BUNDLE}/.lsp.json"),
            &serde_json::Value::Object(map),
        );
    }
    plan.json(
        format!("{BUNDLE}/agentpack-settings.json"),
        &attribution::claude_settings(ctx.options.keep_attribution, &names),
    );
    plan
}
