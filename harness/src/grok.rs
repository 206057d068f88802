//! Grok: the plugin bundle at `grok/agentpack-bundle/` and the fragments Grok's home layer uses.
//!
//! ```text
//! grok/
//!   agentpack-bundle/
//!     plugin.json
//!     commands/ agents/ skills/      Claude-compatible shapes (rules become skills)
//!     hooks/hooks.json               a package's file, copied unchanged (not translated)
//!   config.fragment.toml             [mcp_servers], [plugins] enabled, [features] lsp_tools
//!   lsp.json                         language servers for $GROK_HOME/lsp.json
//!   AGENTS.md                        attribution guidance for the home
//! ```

use crate::layout::{self, ArtifactLayout, Place};
use crate::plan::{Agent, PlanEntry, RenderPlan};
use crate::tree::Node;
use crate::{attribution, claude, lsp, Context};

/// The bundle directory, relative to the generation root.
pub const BUNDLE: &str = "grok/agentpack-bundle";
/// The config fragment the home layer merges into `config.toml`.
pub const CONFIG_FRAGMENT: &str = "grok/config.fragment.toml";
/// The language servers for `$GROK_HOME/lsp.json`.
pub const LSP: &str = "grok/lsp.json";

/// Where commands, agents and rules go in the bundle (Claude Code's shapes; rules become skills).
const LAYOUT: ArtifactLayout = ArtifactLayout {
    root: BUNDLE,
    with_overlay: false,
    command: claude::COMMANDS,
    agent: claude::AGENTS,
    rule: Place::Skill,
};

pub(crate) fn render(ctx: &Context<'_>) -> RenderPlan {
    let mut plan = RenderPlan::new(Agent::Grok);
    plan.json(
        format!("{BUNDLE}/plugin.json"),
        &layout::bundle_manifest("Skills, commands and agents staged by agentpack"),
    );
    layout::stage(ctx, &mut plan, &LAYOUT);

    let mut hooks_from: Option<&str> = None;
    for package in ctx.packages {
        if let Ok(Node::File(resolved)) = package.tree.resolve("hooks/hooks.json") {
            if let Some(previous) = hooks_from {
                plan.warnings.push(format!(
                    "grok: hooks/hooks.json from {} replaces the one from {previous}",
                    package.input.module
                ));
            }
            hooks_from = Some(&package.input.module);
            plan.entries.insert(
                format!("{BUNDLE}/hooks/hooks.json"),
                PlanEntry::FromFile {
                    source: package.tree.absolute(&resolved),
                    executable: false,
                },
            );
            plan.info.push(format!(
                "hook for grok: {} hooks/hooks.json copied unchanged (Grok hooks are not translated)",
                package.input.module
            ));
        }
    }

    let mut config = toml::Table::new();
    let mut plugins = toml::Table::new();
    plugins.insert(
        "enabled".into(),
        toml::Value::Array(vec!["agentpack-bundle".into()]),
    );
    config.insert("plugins".into(), plugins.into());
    layout::insert_toml_servers(ctx, &mut plan, &mut config);
    if !ctx.lsp.is_empty() {
        let mut features = toml::Table::new();
        features.insert("lsp_tools".into(), true.into());
        config.insert("features".into(), features.into());
        plan.json(LSP.to_string(), &lsp::servers_object(&ctx.lsp));
    }
    plan.bytes(
        CONFIG_FRAGMENT.to_string(),
        toml::to_string(&config).unwrap_or_default(),
    );
    if !ctx.options.keep_attribution {
        plan.bytes("grok/AGENTS.md".to_string(), attribution::grok_agents_md());
    }
    plan
}
