//! Observed evidence: a probe receipt attached with `--receipt ID|PATH|latest`, only when every
//! identity it is bound to (source, lock, mode, workspace inputs, generation, policy) still
//! matches the current inputs, its capability revision is this agentpack's, and the probe
//! completed. A stale, failed, partial or unreadable receipt stays a
//! diagnostic finding and never answers a requirement; `latest` is the newest receipt of the
//! agent, never an older one. Reads the receipt; writes nothing.
//!
//! An attached receipt answers skill, command and agent requirements from the artifacts it
//! lists, and MCP server requirements from Claude Code's `plugin details` inventory of the
//! staged bundle (its `plugin_details` property, controlled projection).

use std::path::Path;

use serde_json::Value;

use crate::evidence::receipt::{self, BoundIdentities, Receipt};

use super::finding::{code, Finding, Severity};
use agentpack_builders::contract::{Evidence, Known, Requirement};

/// The receipt `reference` names, when it is current; and the findings about it.
pub fn attach(
    reference: &str,
    dir: &Path,
    agent: &str,
    cwd: &Path,
    current: &BoundIdentities,
) -> (Option<Receipt>, Vec<Finding>) {
    let reprobe = format!(
        "run `agentpack probe --agent {agent}` for the current inputs, then `agentpack preflight --agent {agent} --receipt latest`"
    );
    let mut findings = Vec::new();
    let path = match receipt::locate(dir, reference, agent, cwd) {
        Ok(located) => {
            if !located.skipped.is_empty() {
                findings.push(Finding::new(
                    code::RECEIPT_UNUSABLE,
                    Severity::Info,
                    dir.display().to_string(),
                    agent,
                    format!(
                        "`latest` passed over newer receipts that did not succeed: {}",
                        located.skipped.join(", ")
                    ),
                    "",
                ));
            }
            located.path
        }
        Err(err) => {
            return (
                None,
                vec![Finding::new(
                    code::RECEIPT_MISSING,
                    Severity::Warning,
                    dir.display().to_string(),
                    agent,
                    err.to_string()
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                    reprobe,
                )],
            );
        }
    };
    let (receipt, more) = check(&path, agent, current, reprobe);
    findings.extend(more);
    (receipt, findings)
}

/// Reads the receipt at `path` and checks it is a complete probe of `agent` for `current`.
fn check(
    path: &Path,
    agent: &str,
    current: &BoundIdentities,
    reprobe: String,
) -> (Option<Receipt>, Vec<Finding>) {
    let shown = path.display().to_string();
    // A receipt that satisfies nothing: one warning with the re-probe remedy.
    let refuse = |code: &'static str, message: String| -> (Option<Receipt>, Vec<Finding>) {
        let finding = Finding::new(code, Severity::Warning, &shown, agent, message, &reprobe);
        (None, vec![finding])
    };
    let found = match receipt::read(path) {
        Ok(found) => found,
        Err(err) => {
            let first_line = err
                .to_string()
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned();
            return refuse(code::RECEIPT_UNUSABLE, first_line);
        }
    };
    if found.agent != agent {
        return refuse(
            code::RECEIPT_UNUSABLE,
            format!(
                "the receipt {} is a probe of {}, not {agent}",
                found.id, found.agent
            ),
        );
    }
    if found.status != "complete" || found.catalog.is_none() {
        return refuse(
            code::RECEIPT_UNUSABLE,
            format!(
                "the receipt {} is {}: {}; it satisfies no requirement",
                found.id,
                found.status,
                found.reason.as_deref().unwrap_or("no catalog")
            ),
        );
    }
    let adapter = crate::evidence::adapter::adapter_revision(agent);
    if found.adapter != adapter {
        return refuse(
            code::RECEIPT_UNUSABLE,
            format!(
                "the receipt {} was read by the adapter revision `{}`, and this agentpack reads `{adapter}`",
                found.id, found.adapter
            ),
        );
    }
    let evidence = receipt::evidence_path(path);
    let evidence_ok = agentpack_lockfile::read_regular_file(&evidence)
        .map(|bytes| receipt::digest(&bytes) == found.evidence_digest)
        .unwrap_or(false);
    if !evidence_ok {
        return refuse(
            code::RECEIPT_UNUSABLE,
            format!(
                "the retained evidence of the receipt {} ({}) is missing or does not match its digest",
                found.id,
                evidence.display()
            ),
        );
    }
    let capability = crate::evidence::adapter::capability_revision(agent);
    if found.capability != capability {
        return refuse(
            code::RECEIPT_STALE,
            format!(
                "the receipt {} was made by capability revision {} of the {agent} probe, and this agentpack observes revision {capability} (what a probe observes changed): it satisfies no requirement",
                found.id, found.capability
            ),
        );
    }
    let stale = stale_identities(&found.identities, current);
    if !stale.is_empty() {
        return refuse(
            code::RECEIPT_STALE,
            format!(
                "the receipt {} was made for other inputs ({} changed since): it satisfies no requirement",
                found.id,
                stale.join(", ")
            ),
        );
    }
    let finding = Finding::new(
        code::RECEIPT_ATTACHED,
        Severity::Info,
        shown,
        agent,
        format!(
            "observed evidence from the receipt {} ({} {}, {})",
            found.id,
            agent,
            found.client.version.as_deref().unwrap_or("?"),
            found.scope
        ),
        "",
    );
    (Some(found), vec![finding])
}

/// The identities of `receipt` that differ from `current` (a missing one never matches).
fn stale_identities(receipt: &BoundIdentities, current: &BoundIdentities) -> Vec<&'static str> {
    let mut stale = Vec::new();
    let mut check = |name, a: Option<&String>, b: Option<&String>| {
        if a.is_none() || a != b {
            stale.push(name);
        }
    };
    check("source", Some(&receipt.source), Some(&current.source));
    check("lock", receipt.lock.as_ref(), current.lock.as_ref());
    check("mode", Some(&receipt.mode), Some(&current.mode));
    check(
        "workspace inputs",
        receipt.workspace_inputs.as_ref(),
        current.workspace_inputs.as_ref(),
    );
    check(
        "generation",
        receipt.generation.as_ref(),
        current.generation.as_ref(),
    );
    // A receipt fits only a preflight under the policy it was made for (`local` when the probe
    // had no `--policy`); one without a policy never fits.
    check("policy", receipt.policy.as_ref(), current.policy.as_ref());
    stale
}

/// What `receipt` observed of the property `requirement` selects (`unavailable`: why there is no
/// receipt to ask).
pub fn lookup(receipt: Option<&Receipt>, unavailable: &str, requirement: &Requirement) -> Known {
    let Some((receipt, catalog)) = receipt.and_then(|r| r.catalog.as_ref().map(|c| (r, c))) else {
        return Known::Unknown(unavailable.to_owned());
    };
    // Unscoped means the native catalog, which no probe observes (it would need the user's
    // ambient configuration): only an explicitly scoped requirement takes a bounded observation.
    // The receipt's own scope, or a second scope the probe observed beside it (`other_scopes`:
    // Claude Code's controlled projection, Codex's workspace session).
    let scope = requirement.scope.as_deref().unwrap_or("native_catalog");
    if requirement.category == "mcp_server" {
        return mcp_server(catalog, scope, requirement);
    }
    let listing: Vec<&crate::evidence::catalog::Observed> = if scope == receipt.scope {
        catalog.artifacts.iter().collect()
    } else {
        catalog
            .other_scopes
            .iter()
            .filter(|a| a.scope == scope)
            .collect()
    };
    if scope != receipt.scope && listing.is_empty() {
        return Known::Unknown(format!(
            "the receipt observed the {} scope and the requirement needs {scope}: name that scope in the selector to accept the bounded observation",
            receipt.scope
        ));
    }
    let category = requirement.category.as_str();
    if !matches!(category, "skill" | "command" | "agent") {
        return Known::Unknown(format!("a probe does not observe {category} properties"));
    }
    // Codex has neither commands nor agents: agentpack renders them as skills, observed as such
    // and reported under their own category. Claude Code's init event and OpenCode's resolved
    // configuration (`debug config`, a staged agent confirmed by `agent list`) list commands and
    // agents themselves: only an artifact of that category answers.
    let listed_as = if crate::evidence::adapter::lists_commands_and_agents(&receipt.agent) {
        category
    } else {
        "skill"
    };
    let name = requirement.name.clone().unwrap_or_default();
    let found = listing
        .into_iter()
        .find(|a| a.category == listed_as && (a.name == name || a.native_id == name));
    let observed = |value| Known::Value(value, Evidence::Observed);
    match (requirement.property.as_str(), found) {
        // A bounded scope excludes user-level configuration: absence stays unknown.
        ("presence", Some(_)) => observed(Value::Bool(true)),
        ("presence", None) => Known::Unknown(format!(
            "the receipt does not list the {category} `{name}`, and absence stays unknown in the {scope} scope (it excludes user-level configuration)"
        )),
        ("catalog_complete", _) => Known::Unknown(format!(
            "the {scope} scope is not a complete catalog"
        )),
        ("winner", Some(a)) => observed(Value::String(a.winner.clone())),
        (_, None) => Known::Unknown(format!("the receipt observed no {category} `{name}`")),
        (property, Some(_)) => Known::Unknown(format!(
            "{category}.{property} is not observed by this probe"
        )),
    }
}

/// What Claude Code's `plugin details` inventory of the staged bundle (the receipt's
/// `plugin_details` property) says of the MCP server `requirement` selects in `scope`: listed is
/// present; unlisted stays unknown (the bundle is not every place a server can come from), and
/// so does everything when the receipt holds no observed inventory for that scope.
fn mcp_server(
    catalog: &crate::evidence::catalog::Catalog,
    scope: &str,
    requirement: &Requirement,
) -> Known {
    let name = requirement.name.as_deref().unwrap_or_default();
    let Some(details) = catalog
        .properties
        .iter()
        .find(|p| p.name == "plugin_details" && p.scope == scope)
    else {
        return Known::Unknown(format!(
            "the receipt holds no `plugin details` inventory in the {scope} scope (Claude Code's controlled projection lists the bundle's MCP servers): name that scope in the selector"
        ));
    };
    let listed = details
        .value
        .as_ref()
        .and_then(|value| value["inventory"]["mcp_servers"].as_array())
        .filter(|_| details.status == "observed");
    let Some(listed) = listed else {
        return Known::Unknown(format!(
            "the `plugin details` inventory is {}: {}",
            details.status,
            details
                .reason
                .as_deref()
                .unwrap_or("no inventory was recorded")
        ));
    };
    let found = listed.iter().any(|server| server.as_str() == Some(name));
    match (requirement.property.as_str(), found) {
        ("presence", true) => Known::Value(Value::Bool(true), Evidence::Observed),
        ("presence", false) => Known::Unknown(format!(
            "`plugin details` does not list the MCP server `{name}`, and absence stays unknown in the {scope} scope (the staged bundle is not every place a server comes from)"
        )),
        (property, _) => Known::Unknown(format!(
            "mcp_server.{property} is not observed by this probe"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::catalog::{Catalog, Property};

    fn requirement(category: &str, name: &str, scope: &str) -> Requirement {
        let text = serde_json::json!({"schema_version": 1, "requirements": [{"id": "r",
            "target": "claude", "selector": {"category": category, "name": name, "scope": scope},
            "predicate": "present", "minimum_evidence": "observed"}]});
        agentpack_builders::contract::parse(&serde_json::to_vec(&text).unwrap())
            .unwrap()
            .requirements
            .remove(0)
    }

    fn details(status: &str, servers: &[&str]) -> Catalog {
        Catalog {
            properties: vec![Property {
                name: "plugin_details".to_owned(),
                scope: "controlled_projection".to_owned(),
                status: status.to_owned(),
                value: (status == "observed")
                    .then(|| serde_json::json!({"inventory": {"mcp_servers": servers}})),
                reason: (status != "observed").then(|| "no `plugin details`".to_owned()),
            }],
            ..Catalog::default()
        }
    }

    #[test]
    fn mcp_servers_are_answered_from_the_plugin_details_inventory() {
        let listed = details("observed", &["probe-mcp"]);
        let present = requirement("mcp_server", "probe-mcp", "controlled_projection");
        assert!(matches!(
            mcp_server(&listed, "controlled_projection", &present),
            Known::Value(Value::Bool(true), Evidence::Observed)
        ));
        let other = requirement("mcp_server", "other", "controlled_projection");
        assert!(matches!(
            mcp_server(&listed, "controlled_projection", &other),
            Known::Unknown(_)
        ));
        // Another scope, or an inventory the client could not give: unknown, never a guess.
        let session = requirement("mcp_server", "probe-mcp", "workspace_session");
        assert!(matches!(
            mcp_server(&listed, "workspace_session", &session),
            Known::Unknown(_)
        ));
        assert!(matches!(
            mcp_server(&details("unknown", &[]), "controlled_projection", &present),
            Known::Unknown(m) if m.contains("no `plugin details`")
        ));
    }
}
