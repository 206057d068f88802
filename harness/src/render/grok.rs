//! Grok: the plugin bundle at `grok/agentpack-bundle/` and the fragments Grok's home layer uses.
//!
//! ```text
//! grok/
//!   agentpack-bundle/
//!     plugin.json
//!     commands/ agents/ skills/      Claude-compatible shapes (rules become skills)
//!     hooks/hooks.json               every package's hooks merged (Claude Code's format, not
//!                                    translated), plugin-root paths at each package's staged copy
//!   config.fragment.toml             [mcp_servers], [plugins] enabled, [features] lsp_tools
//!   lsp.json                         language servers for $GROK_HOME/lsp.json
//!   AGENTS.md                        attribution guidance for the home
//! ```

use serde_json::{json, Map, Value};

use crate::agent::Agent;
use crate::plan::RenderPlan;
use crate::render::hooks::HookFormat;
use crate::render::layout::{self, ArtifactLayout, Place};
use crate::render::{attribution, claude, lsp, mcp, Context};

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

    stage_hooks(ctx, &mut plan);
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

/// Every package's hooks in one `hooks/hooks.json` (Grok reads Claude Code's format): for each
/// package its Claude Code hook files, else its Codex ones (the same event names); a package with
/// only Cursor hooks has none Grok runs, said in a warning. `${CLAUDE_PLUGIN_ROOT}` (and the other
/// plugin variables) become the package's staged copy, where the scripts the hooks call are.
fn stage_hooks(ctx: &Context<'_>, plan: &mut RenderPlan) {
    let mut events: Map<String, Value> = Map::new();
    for package in ctx.packages {
        if package.hooks.is_empty() {
            continue;
        }
        let pick = |format: HookFormat| {
            package
                .hooks
                .iter()
                .filter(|file| file.format == format)
                .collect::<Vec<_>>()
        };
        let mut files = pick(HookFormat::Claude);
        if files.is_empty() {
            files = pick(HookFormat::Codex);
        }
        if files.is_empty() {
            plan.warnings.push(format!(
                "hook for grok skipped: {} has only Cursor hooks, whose events Grok does not have",
                package.input.module
            ));
            continue;
        }
        let root = package.plugin_root_or_dir();
        for file in files {
            for entry in &file.entries {
                let handler = Value::Object(entry.handler.clone()).to_string();
                let (handler, _) =
                    mcp::substitute_plugin_vars(&handler, &root, &package.plugin_data);
                let handler: Value =
                    serde_json::from_str(&handler).unwrap_or(Value::Object(entry.handler.clone()));
                let mut group = Map::new();
                if let Some(matcher) = &entry.matcher {
                    group.insert("matcher".into(), json!(matcher));
                }
                group.insert("hooks".into(), json!([handler]));
                if let Some(groups) = events
                    .entry(entry.event.clone())
                    .or_insert_with(|| json!([]))
                    .as_array_mut()
                {
                    groups.push(Value::Object(group));
                }
            }
            plan.info.push(format!(
                "hook for grok: {} merged as written (Grok hooks are not translated)",
                file.source
            ));
        }
    }
    if !events.is_empty() {
        plan.json(
            format!("{BUNDLE}/hooks/hooks.json"),
            &json!({"hooks": Value::Object(events)}),
        );
    }
}
