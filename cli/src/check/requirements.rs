//! A contract requirement's finding (violated, unknown, allowed) and what the plan knows of a
//! selected property (`declared` from the lock and the package sources, `generated` from the
//! rendered plan). Reads the sources only when a requirement asks for them; never writes.

use std::path::Path;

use serde_json::Value;

use agentpack_builders::contract::{self, Contract, Known, Requirement, Status};
use agentpack_harness::{Agent, PlanEntry};
use finding::{code, Finding, Severity};

use super::sources::{self, Sources};
use super::{finding, inherit, plan};

/// The finding of a requirement that is not simply satisfied (or not applicable).
pub fn requirement_finding(
    contract: &Contract,
    outcome: &contract::Outcome,
    source: Option<&Path>,
) -> Option<Finding> {
    let source = source.map_or_else(String::new, |p| format!("{}#{}", p.display(), outcome.id));
    let target = outcome.target.clone();
    let (code, severity, remedy) = match outcome.status {
        Status::Satisfied | Status::NotApplicable => return None,
        Status::Allowed => (code::REQUIREMENT_ALLOWED, Severity::Info, String::new()),
        Status::Violated => (
            code::REQUIREMENT_VIOLATED,
            if outcome.blocking {
                Severity::Violation
            } else if outcome.severity == "info" {
                Severity::Info
            } else {
                Severity::Warning
            },
            "change the definition so the requirement holds, or add an allowance with a rationale"
                .to_owned(),
        ),
        Status::Unknown => (
            code::REQUIREMENT_UNKNOWN,
            match contract.unknown_required {
                contract::UnknownRequired::Fail => Severity::Violation,
                contract::UnknownRequired::Warn => Severity::Warning,
                contract::UnknownRequired::Allow => Severity::Info,
            },
            if outcome.needs_receipt {
                format!(
                    "run `agentpack probe --agent {}` for the current inputs and pass `--receipt latest`, or lower minimum_evidence / set unknown_required",
                    outcome.target
                )
            } else {
                "make the evidence available (for example `agentpack env restore`), or lower minimum_evidence".to_owned()
            },
        ),
    };
    Some(Finding::new(
        code,
        severity,
        source,
        target,
        format!("requirement `{}`: {}", outcome.id, outcome.message),
        remedy,
    ))
}

/// What a requirement's property is looked up in: the agent's plan, the lock, the inherited
/// places found, and the declared sources (package trees and the overlay, loaded on demand).
pub struct Facts<'a> {
    pub agent: Agent,
    pub plan: &'a plan::AgentPlan,
    pub lock: &'a agentpack_lockfile::Lockfile,
    pub inherited: &'a [inherit::Inherited],
    pub sources: &'a Sources<'a>,
}

impl Facts<'_> {
    /// Whether staging merges `./.agents/` into this agent's plan (Claude Code's bundle, Codex's
    /// skill and command projections); the other agents' launchers seed it themselves, outside the
    /// plan, so what they load of it is not modeled.
    fn plan_merges_overlay(&self) -> bool {
        matches!(self.agent, Agent::Claude | Agent::Codex)
    }

    /// Whether the agent has first-class rules (Cursor, Antigravity); elsewhere a rule is staged
    /// as a skill.
    fn has_rules(&self) -> bool {
        matches!(self.agent, Agent::Cursor | Agent::Antigravity)
    }

    /// Who holds the name, by the inheritance scan; a `./.agents/` copy the plan merges replaces
    /// the package's bytes inside the staged tree, so the checkout holds it (`workspace`).
    fn planned_winner(&self, category: &str, name: &str) -> Known {
        let scanned = inherit::planned_winner(self.inherited, category, name);
        let winner = if scanned == "package" && self.plan_merges_overlay() {
            match self.sources.in_overlay(category, name) {
                Ok(true) => "workspace",
                Ok(false) => scanned,
                Err(err) => return Known::Unknown(format!("{category}.winner: {err:#}")),
            }
        } else {
            scanned
        };
        Known::Value(
            Value::String(winner.to_owned()),
            contract::Evidence::Generated,
        )
    }

    fn incomplete(&self) -> Known {
        Known::Unknown(format!(
            "the plan is incomplete (no verified cache entry for {}), so absence is unknown",
            self.plan.left_out.join(", ")
        ))
    }

    /// An overlay artifact this agent's launcher seeds outside the plan: generated evidence of it
    /// is unknown, never invented.
    fn seeded_outside_plan(&self, category: &str, name: &str) -> Option<Known> {
        if self.plan_merges_overlay() {
            return None;
        }
        match self.sources.in_overlay(category, name) {
            Ok(true) => Some(Known::Unknown(format!(
                "{category} `{name}` comes from ./.agents/, which {} loads by its own route, outside agentpack's plan: only its source_digest (declared) is known",
                self.agent.display_name()
            ))),
            Ok(false) => None,
            Err(err) => Some(Known::Unknown(format!("{err:#}"))),
        }
    }
}

/// What the plan and the lock know of the property a requirement selects.
pub fn known(requirement: &Requirement, facts: &Facts<'_>) -> Known {
    use contract::Evidence::{Declared, Generated};
    let plan = facts.plan;
    let name = requirement.name.clone().unwrap_or_default();
    match requirement.category.as_str() {
        category @ ("skill" | "command" | "agent") => {
            let category: &'static str = match category {
                "skill" => "skill",
                "command" => "command",
                _ => "agent",
            };
            let artifact = plan.artifacts.get(&(category, name.clone()));
            if artifact.is_none() && requirement.property != "source_digest" {
                if let Some(unknown) = facts.seeded_outside_plan(category, &name) {
                    return unknown;
                }
            }
            match (requirement.property.as_str(), artifact) {
                ("presence", Some(_)) => Known::Value(Value::Bool(true), Generated),
                ("presence", None) if plan.complete() => {
                    Known::Value(Value::Bool(false), Generated)
                }
                ("presence", None) => facts.incomplete(),
                ("source_digest", artifact) => {
                    // The plan names the package it stages from; an artifact it stages without
                    // one is the overlay's when the overlay holds it and the plan merges it.
                    let module = match artifact.map(|a| a.module.as_deref()) {
                        Some(Some(module)) => Some(module),
                        Some(None)
                            if facts.plan_merges_overlay()
                                && facts.sources.in_overlay(category, &name).unwrap_or(false) =>
                        {
                            Some(sources::OVERLAY)
                        }
                        _ => None,
                    };
                    source_digest_known(facts, category, &name, module)
                }
                (_, None) => Known::Unknown(format!("the plan has no {category} `{name}`")),
                ("rendered_digest", Some(a)) => {
                    Known::Value(Value::String(a.rendered_digest.clone()), Generated)
                }
                ("winner", Some(_)) => facts.planned_winner(category, &name),
                ("source", Some(a)) => match &a.module {
                    Some(module) => Known::Value(Value::String(module.clone()), Generated),
                    None => Known::Unknown(format!(
                        "the plan generates {category} `{name}` without naming its package"
                    )),
                },
                (property, Some(_)) => Known::Unknown(format!(
                    "{category}.{property} is not computed by preflight"
                )),
            }
        }
        "rule" => rule_known(requirement, facts, &name),
        "mcp_server" => match requirement.property.as_str() {
            "presence" => {
                let present = plan.mcp_servers.iter().any(|s| s.name == name);
                if present || plan.complete() {
                    Known::Value(Value::Bool(present), Generated)
                } else {
                    facts.incomplete()
                }
            }
            _ => Known::Value(
                Value::String(
                    facts
                        .lock
                        .mcp_server(&name)
                        .map_or("unlocked", |record| record.status.as_str())
                        .to_owned(),
                ),
                Declared,
            ),
        },
        "package" => {
            let package =
                facts.lock.packages.iter().find(|p| {
                    p.module.as_str() == name || p.name.as_deref() == Some(name.as_str())
                });
            match (requirement.property.as_str(), package) {
                ("presence", package) => Known::Value(Value::Bool(package.is_some()), Declared),
                (_, None) => Known::Unknown(format!("pack.lock has no package `{name}`")),
                ("commit", Some(p)) => {
                    Known::Value(Value::String(p.commit.as_str().to_owned()), Declared)
                }
                (_, Some(p)) => Known::Value(
                    p.content_hash
                        .as_ref()
                        .map_or(Value::Null, |h| Value::String(h.as_str().to_owned())),
                    Declared,
                ),
            }
        }
        _ => {
            if plan.workspace_writes.is_empty() && !plan.complete() {
                return facts.incomplete();
            }
            Known::Value(
                Value::Array(
                    plan.workspace_writes
                        .iter()
                        .cloned()
                        .map(Value::String)
                        .collect(),
                ),
                Generated,
            )
        }
    }
}

/// A rule's properties: planned as `rules/<name>.<ext>` for the agents with first-class rules,
/// its source and source digest from the package trees and the overlay.
fn rule_known(requirement: &Requirement, facts: &Facts<'_>, name: &str) -> Known {
    use contract::Evidence::{Declared, Generated};
    match requirement.property.as_str() {
        "source_digest" => source_digest_known(facts, "rule", name, None),
        "source" => match facts.sources.digests("rule", name, None) {
            Err(err) => Known::Unknown(format!("rule.source: {err:#}")),
            Ok(found) => {
                let modules: std::collections::BTreeSet<&str> =
                    found.iter().map(|(module, _)| module.as_str()).collect();
                match modules.into_iter().collect::<Vec<_>>().as_slice() {
                    [one] => Known::Value(Value::String((*one).to_owned()), Declared),
                    [] => Known::Unknown(format!("no verified source holds the rule `{name}`")),
                    several => Known::Unknown(format!(
                        "the rule `{name}` is in several sources ({}): the source is ambiguous",
                        several.join(", ")
                    )),
                }
            }
        },
        property => {
            if !facts.has_rules() {
                return Known::Unknown(format!(
                    "{} has no rules: agentpack stages a rule as a skill of its name (or `<name>-rule`); select that skill instead",
                    facts.agent.display_name()
                ));
            }
            let files: Vec<(&String, &PlanEntry)> = facts
                .plan
                .entries
                .iter()
                .filter(|(path, _)| rule_of(path) == Some(name))
                .collect();
            match property {
                "presence" if !files.is_empty() => Known::Value(Value::Bool(true), Generated),
                "presence" if facts.plan.complete() => Known::Value(Value::Bool(false), Generated),
                "presence" => facts.incomplete(),
                _ if files.is_empty() => Known::Unknown(format!("the plan has no rule `{name}`")),
                _ => {
                    let mut read = Vec::new();
                    for (path, entry) in files {
                        match sources::entry_bytes(entry) {
                            Ok(bytes) => read.push((path.clone(), bytes)),
                            Err(err) => return Known::Unknown(format!("{err:#}")),
                        }
                    }
                    Known::Value(Value::String(sources::framed_digest(read)), Generated)
                }
            }
        }
    }
}

/// The rule a planned path stages: `…/rules/<name>.mdc` or `.md` (the name may have directories).
fn rule_of(path: &str) -> Option<&str> {
    let (_, rest) = path
        .split_once("/rules/")
        .or_else(|| path.strip_prefix("rules/").map(|rest| ("", rest)))?;
    rest.strip_suffix(".mdc")
        .or_else(|| rest.strip_suffix(".md"))
}

/// The `source_digest` of a selected artifact: declared evidence, from the lock-verified tree of
/// the one package (or the overlay) that holds it (`module`, when the plan names where it stages
/// it from).
pub fn source_digest_known(
    facts: &Facts<'_>,
    category: &str,
    name: &str,
    module: Option<&str>,
) -> Known {
    let plan = facts.plan;
    let found = match facts.sources.digests(category, name, module) {
        Ok(found) => found,
        Err(err) => return Known::Unknown(format!("{category}.source_digest: {err:#}")),
    };
    let digests: std::collections::BTreeSet<&str> =
        found.iter().map(|(_, digest)| digest.as_str()).collect();
    match (digests.len(), found.first()) {
        (1, Some((_, digest))) => {
            Known::Value(Value::String(digest.clone()), contract::Evidence::Declared)
        }
        (0, _) if !plan.complete() => Known::Unknown(format!(
            "no verified source holds {category} `{name}`, and the plan is incomplete (no verified cache entry for {})",
            plan.left_out.join(", ")
        )),
        (0, _) => Known::Unknown(format!(
            "no locked package and no ./.agents/ file holds {category} `{name}`"
        )),
        _ => Known::Unknown(format!(
            "{category} `{name}` is in several sources with different bytes ({}): the source is ambiguous",
            found
                .iter()
                .map(|(module, _)| module.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::rule_of;

    #[test]
    fn planned_rule_paths_name_their_rule() {
        assert_eq!(
            rule_of("cursor/agentpack-bundle/rules/style.mdc"),
            Some("style")
        );
        assert_eq!(
            rule_of("agy/bundle/rules/git/commit.md"),
            Some("git/commit")
        );
        assert_eq!(
            rule_of("plugins/agentpack-bundle/skills/style/SKILL.md"),
            None
        );
    }
}
