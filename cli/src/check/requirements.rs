//! A contract requirement's finding (violated, unknown, allowed) and what the plan knows of a
//! selected property (`declared` from the lock, `generated` from the rendered plan). Pure.

use std::path::Path;

use serde_json::Value;

use agentpack_builders::contract::{self, Contract, Known, Requirement, Status};
use finding::{code, Finding, Severity};

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

/// What the plan and the lock know of the property a requirement selects.
pub fn known(
    requirement: &Requirement,
    plan: &plan::AgentPlan,
    lock: &agentpack_lockfile::Lockfile,
    inherited: &[inherit::Inherited],
) -> Known {
    use contract::Evidence::{Declared, Generated};
    let name = requirement.name.clone().unwrap_or_default();
    let incomplete = || {
        Known::Unknown(format!(
            "the plan is incomplete (no verified cache entry for {}), so absence is unknown",
            plan.left_out.join(", ")
        ))
    };
    match requirement.category.as_str() {
        category @ ("skill" | "command" | "agent") => {
            let category: &'static str = match category {
                "skill" => "skill",
                "command" => "command",
                _ => "agent",
            };
            let artifact = plan.artifacts.get(&(category, name.clone()));
            match (requirement.property.as_str(), artifact) {
                ("presence", Some(_)) => Known::Value(Value::Bool(true), Generated),
                ("presence", None) if plan.complete() => {
                    Known::Value(Value::Bool(false), Generated)
                }
                ("presence", None) => incomplete(),
                ("source_digest", artifact) => source_digest_known(
                    plan,
                    category,
                    &name,
                    artifact.and_then(|a| a.module.as_deref()),
                ),
                (_, None) => Known::Unknown(format!("the plan has no {category} `{name}`")),
                ("rendered_digest", Some(a)) => {
                    Known::Value(Value::String(a.rendered_digest.clone()), Generated)
                }
                ("winner", Some(_)) => Known::Value(
                    Value::String(inherit::planned_winner(inherited, category, &name).to_owned()),
                    Generated,
                ),
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
        "mcp_server" => match requirement.property.as_str() {
            "presence" => {
                let present = plan.mcp_servers.iter().any(|s| s.name == name);
                if present || plan.complete() {
                    Known::Value(Value::Bool(present), Generated)
                } else {
                    incomplete()
                }
            }
            _ => Known::Value(
                Value::String(
                    lock.mcp_server(&name)
                        .map_or("unlocked", |record| record.status.as_str())
                        .to_owned(),
                ),
                Declared,
            ),
        },
        "package" => {
            let package = lock
                .packages
                .iter()
                .find(|p| p.module.as_str() == name || p.name.as_deref() == Some(name.as_str()));
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
                return incomplete();
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

/// The `source_digest` of a selected artifact: declared evidence, from the lock-verified store copy
/// of the one package that holds it (`module`, when the plan names the package it stages it from).
pub fn source_digest_known(
    plan: &plan::AgentPlan,
    category: &'static str,
    name: &str,
    module: Option<&str>,
) -> Known {
    let found = match plan::source_digests(plan, category, name, module) {
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
            "no verified package holds {category} `{name}`, and the plan is incomplete (no verified cache entry for {})",
            plan.left_out.join(", ")
        )),
        (0, _) => Known::Unknown(format!(
            "no locked package holds {category} `{name}` (an artifact of the workspace overlay has no declared source)"
        )),
        _ => Known::Unknown(format!(
            "{category} `{name}` is in several packages with different sources ({}): the source is ambiguous",
            found
                .iter()
                .map(|(module, _)| module.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}
