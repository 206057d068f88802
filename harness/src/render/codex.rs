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
//!   .agentpack-agent-fallbacks       the skills above that are agent fallbacks, one a line
//! ```
//!
//! An agent's skill fallback stays in the generation (for clients and tools that read
//! `codex-home/` directly); the launch's home layer leaves the listed skills out, since every
//! Codex a launch runs loads the custom agent itself (see `docs/src/conversion.md`). When the
//! skills a launch keeps overflow Codex's skill-metadata budget ([`shortens_descriptions`]), the
//! plan carries one warning with the count.
//!
//! Skill files are always regular-file entries (Codex ignores a `SKILL.md` that is a symlink).
//! `./.agents/` is merged here, last. Language servers are not written (Codex has no setting).

use crate::agent::Agent;
use crate::input::artifact::Artifact;
use crate::input::tree::Node;
use crate::plan::{PlanEntry, RenderPlan};
use crate::render::convert::{self, SkillNames};
use crate::render::layout::{self, ArtifactLayout, Place, Unit};
use crate::render::{lsp, Context};

/// The home content directory, relative to the generation root.
pub const ROOT: &str = "codex-home";

/// Codex has skills and custom agents: commands and rules become skills, an agent becomes both.
const LAYOUT: ArtifactLayout = ArtifactLayout {
    root: ROOT,
    with_overlay: true,
    command: Place::Skill,
    agent: Place::Units(agent_units),
    rule: Place::Skill,
};

/// An agent as `agents/<leaf name>.toml` and as a skill.
fn agent_units(
    artifact: &Artifact,
    label: &str,
    names: &mut SkillNames,
    warnings: &mut Vec<String>,
) -> Vec<Unit> {
    let name = convert::leaf_name(&artifact.name).to_string();
    vec![
        Unit::file(
            format!("agents/{name}.toml"),
            PlanEntry::Bytes(convert::codex_agent_toml(artifact, &name, label)),
        ),
        layout::fallback_skill(artifact, label, names, warnings),
    ]
}

pub(crate) fn render(ctx: &Context<'_>) -> RenderPlan {
    let mut plan = RenderPlan::new(Agent::Codex);
    layout::stage(ctx, &mut plan, &LAYOUT);
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
    layout::insert_toml_servers(ctx, &mut plan, &mut config);
    plan.bytes(
        format!("{ROOT}/config.toml"),
        toml::to_string(&config).unwrap_or_default(),
    );
    plan.warnings
        .extend(lsp::not_staged_warning(Agent::Codex, &ctx.lsp));

    let fallbacks = agent_fallback_skills(&plan);
    let kept = launched_skills(ctx, &plan, &fallbacks);
    plan.warnings.extend(shortening_warning(&kept));
    if !fallbacks.is_empty() {
        let mut list = fallbacks.join("\n");
        list.push('\n');
        plan.bytes(format!("{ROOT}/{AGENT_FALLBACKS_FILE}"), list);
    }
    plan
}

/// The list of agent-fallback skill directories (under `skills/`), one a line, in `codex-home/`.
pub const AGENT_FALLBACKS_FILE: &str = ".agentpack-agent-fallbacks";

/// The note [`convert::as_skill`] opens an agent's skill fallback with.
const AGENT_FALLBACK_NOTE: &str = "\n> Staged by agentpack from the subagent `";

/// The skill directories of the plan that are agent fallbacks (sorted).
fn agent_fallback_skills(plan: &RenderPlan) -> Vec<String> {
    plan.entries
        .iter()
        .filter_map(|(path, entry)| {
            let name = skill_dir_of(path)?;
            let PlanEntry::Bytes(bytes) = entry else {
                return None;
            };
            let text = String::from_utf8_lossy(bytes);
            text.contains(AGENT_FALLBACK_NOTE).then(|| name.to_string())
        })
        .collect()
}

/// `<name>` of `codex-home/skills/<name>/SKILL.md`.
fn skill_dir_of(path: &str) -> Option<&str> {
    let name = path
        .strip_prefix(ROOT)?
        .strip_prefix("/skills/")?
        .strip_suffix("/SKILL.md")?;
    (!name.contains('/')).then_some(name)
}

/// The skills a launched Codex lists: every staged skill but the agent fallbacks, as
/// `(name, description)`. A description comes from the staged bytes, or from the artifact whose
/// file is staged unchanged; a file of neither kind counts with no description.
fn launched_skills(
    ctx: &Context<'_>,
    plan: &RenderPlan,
    fallbacks: &[String],
) -> Vec<(String, String)> {
    let artifacts = ctx
        .packages
        .iter()
        .flat_map(|p| p.artifacts.iter())
        .chain(ctx.overlay.iter().flat_map(|o| o.artifacts.iter()));
    let by_source: std::collections::HashMap<&std::path::Path, &Artifact> =
        artifacts.map(|a| (a.source.as_path(), a)).collect();
    plan.entries
        .iter()
        .filter_map(|(path, entry)| {
            let name = skill_dir_of(path)?;
            if fallbacks.iter().any(|f| f == name) {
                return None;
            }
            let description = match entry {
                PlanEntry::Bytes(bytes) => {
                    crate::render::frontmatter::parse(&String::from_utf8_lossy(bytes))
                        .text("description")
                }
                PlanEntry::FromFile { source, .. } => by_source
                    .get(source.as_path())
                    .and_then(|a| a.document.text("description")),
                PlanEntry::Symlink(_) => None,
            };
            Some((name.to_string(), description.unwrap_or_default()))
        })
        .collect()
}

/// Codex 0.171.0's skill-metadata budget for its default model (`gpt-6.2-sol`, a 500,000-token
/// context window): 2% of the window, in tokens (`codex-rs/core-skills/src/render.rs`,
/// `default_skill_metadata_budget`).
pub const SKILL_METADATA_BUDGET_TOKENS: usize = 10_000;

/// What the skills Codex 0.171.0 bundles (`skills/.system`: `imagegen`, `openai-docs`,
/// `skill-creator`, `skill-installer`) take of the budget, as calibrated with `codex debug
/// prompt-input`: 220-character, many-word descriptions were listed whole up to 152 skills and
/// shortened from 153 (see the tests). Their lines alone would cost 400; Codex 0.171.0 also weighs
/// a line's words, so this is an estimate that can be a skill or two off at the edge.
pub const SYSTEM_SKILLS_TOKENS: usize = 240;

/// Codex keeps at most this many characters of a description.
const MAX_DESCRIPTION_CHARS: usize = 1024;

/// What one skill's catalog line costs Codex: `- <name>: <description> (file: r0/<name>/SKILL.md)`
/// and its newline, in Codex's approximate tokens (a token per 4 bytes, rounded up).
pub fn skill_line_tokens(name: &str, description: &str) -> usize {
    let description: String = description.chars().take(MAX_DESCRIPTION_CHARS).collect();
    let line = if description.is_empty() {
        format!("- {name}: (file: r0/{name}/SKILL.md)\n")
    } else {
        format!("- {name}: {description} (file: r0/{name}/SKILL.md)\n")
    };
    line.len().div_ceil(4)
}

/// Whether Codex shortens the descriptions of these skills (with its own bundled ones): when
/// their full catalog lines cost more than [`SKILL_METADATA_BUDGET_TOKENS`].
pub fn shortens_descriptions(skills: &[(String, String)]) -> bool {
    catalog_tokens(skills) > SKILL_METADATA_BUDGET_TOKENS
}

fn catalog_tokens(skills: &[(String, String)]) -> usize {
    skills
        .iter()
        .map(|(name, description)| skill_line_tokens(name, description))
        .fold(SYSTEM_SKILLS_TOKENS, usize::saturating_add)
}

/// The one warning when Codex will shorten the descriptions of these skills.
fn shortening_warning(skills: &[(String, String)]) -> Option<String> {
    shortens_descriptions(skills).then(|| {
        format!(
            "codex: {} skills are staged for Codex; their descriptions take about {} of the {} tokens \
             Codex gives skill descriptions (2% of its default model's context window), so Codex \
             will shorten them; remove packages you do not use in Codex, or give it a mode that \
             leaves them out",
            skills.len(),
            catalog_tokens(skills),
            SKILL_METADATA_BUDGET_TOKENS
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The catalog of the measurement: `s-001`... with 220-character descriptions.
    fn catalog(count: usize) -> Vec<(String, String)> {
        (1..=count)
            .map(|i| {
                let mut description: String =
                    format!("Skill number {i:03} of the budget fixture. ")
                        .repeat(8)
                        .chars()
                        .take(219)
                        .collect();
                description.push('.');
                (format!("s-{i:03}"), description)
            })
            .collect()
    }

    #[test]
    fn a_catalog_line_costs_a_token_per_four_bytes_rounded_up() {
        // "- s-001: " + 220 + " (file: r0/s-001/SKILL.md)" + "\n" = 256 bytes.
        assert_eq!(skill_line_tokens("s-001", &"x".repeat(220)), 64);
        assert_eq!(skill_line_tokens("s-001", &"x".repeat(221)), 65);
        // "- a: (file: r0/a/SKILL.md)\n" = 27 bytes.
        assert_eq!(skill_line_tokens("a", ""), 7);
        assert_eq!(
            skill_line_tokens("a", &"x".repeat(5000)),
            skill_line_tokens("a", &"x".repeat(1024))
        );
    }

    #[test]
    fn the_budget_matches_where_codex_0_171_started_shortening_220_character_descriptions() {
        // Measured with `codex debug prompt-input`: 152 skills listed whole, 153 shortened.
        assert_eq!(
            catalog_tokens(&catalog(152)),
            152 * 64 + SYSTEM_SKILLS_TOKENS
        );
        assert!(!shortens_descriptions(&catalog(152)));
        assert!(shortens_descriptions(&catalog(153)));
        assert!(shortening_warning(&catalog(3)).is_none());
        let warning = shortening_warning(&catalog(160)).unwrap();
        assert!(warning.contains("160 skills"), "{warning}");
    }

    #[test]
    fn fallback_skills_are_found_by_the_note_of_their_conversion() {
        let mut plan = RenderPlan::new(Agent::Codex);
        plan.bytes(
            format!("{ROOT}/skills/reviewer/SKILL.md"),
            "---\nname: reviewer\n---\n\n> Staged by agentpack from the subagent `reviewer` of pkg.\n\nBody\n",
        );
        plan.bytes(
            format!("{ROOT}/skills/review/SKILL.md"),
            "---\nname: review\n---\n\n> Staged by agentpack from the slash command `/review` of pkg.\n",
        );
        plan.bytes(
            format!("{ROOT}/skills/reviewer/references/x.md"),
            "\n> Staged by agentpack from the subagent `x`",
        );
        assert_eq!(agent_fallback_skills(&plan), vec!["reviewer".to_string()]);
        assert_eq!(skill_dir_of("codex-home/skills/a/SKILL.md"), Some("a"));
        assert_eq!(skill_dir_of("codex-home/skills/a/b/SKILL.md"), None);
        assert_eq!(skill_dir_of("codex-home/agents/a.toml"), None);
    }
}
