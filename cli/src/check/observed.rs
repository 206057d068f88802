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

use std::path::{Path, PathBuf};

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
    match receipt::locate(dir, reference, agent, cwd) {
        Ok(located) => attach_located(located, dir, agent, current),
        Err(err) => (
            None,
            vec![Finding::new(
                code::RECEIPT_MISSING,
                Severity::Warning,
                dir.display().to_string(),
                agent,
                first_line(&err),
                reprobe(agent),
            )],
        ),
    }
}

/// [`attach`] of a receipt already located in `dir` (the receipt `latest` read is not read again).
pub fn attach_located(
    located: receipt::Located,
    dir: &Path,
    agent: &str,
    current: &BoundIdentities,
) -> (Option<Receipt>, Vec<Finding>) {
    let mut findings = Vec::new();
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
    let shown = located.path.display().to_string();
    let read = located
        .receipt
        .map_or_else(|| receipt::read(&located.path), Ok);
    let (code, message) = match read {
        Ok(found) => match refusal(&found, &located.path, agent, current) {
            None => {
                findings.push(attached(&found, &shown, agent));
                return (Some(found), findings);
            }
            Some(refusal) => (refusal.code(), refusal.to_string()),
        },
        Err(err) => (code::RECEIPT_UNUSABLE, first_line(&err)),
    };
    // A receipt that satisfies nothing: one warning with the re-probe remedy.
    findings.push(Finding::new(
        code,
        Severity::Warning,
        &shown,
        agent,
        message,
        reprobe(agent),
    ));
    (None, findings)
}

/// The remedy of a receipt that is missing or answers nothing.
fn reprobe(agent: &str) -> String {
    format!(
        "run `agentpack probe --agent {agent}` for the current inputs, then `agentpack preflight --agent {agent} --receipt latest`"
    )
}

fn first_line(err: &receipt::ReceiptError) -> String {
    err.to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The finding of a receipt that was attached.
fn attached(found: &Receipt, shown: &str, agent: &str) -> Finding {
    Finding::new(
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
    )
}

/// Why a receipt read from `path` answers no requirement; its `Display` is the finding's message.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("the receipt {id} is a probe of {found}, not {agent}")]
    OtherAgent {
        id: String,
        found: String,
        agent: String,
    },
    #[error("the receipt {id} is {status}: {reason}; it satisfies no requirement")]
    Incomplete {
        id: String,
        status: String,
        reason: String,
    },
    #[error(
        "the receipt {id} was read by the adapter revision `{found}`, and this agentpack reads `{adapter}`"
    )]
    OtherAdapter {
        id: String,
        found: String,
        adapter: &'static str,
    },
    #[error(
        "the retained evidence of the receipt {id} ({}) is missing or does not match its digest",
        evidence.display()
    )]
    Evidence { id: String, evidence: PathBuf },
    #[error(
        "the receipt {id} was made by capability revision {found} of the {agent} probe, and this agentpack observes revision {capability} (what a probe observes changed): it satisfies no requirement"
    )]
    OtherCapability {
        id: String,
        found: u32,
        agent: String,
        capability: u32,
    },
    #[error(
        "the receipt {id} was made for other inputs ({} changed since): it satisfies no requirement",
        stale.join(", ")
    )]
    OtherInputs {
        id: String,
        stale: Vec<&'static str>,
    },
}

impl Refusal {
    /// The finding's code: a receipt of an older probe or of other inputs is stale.
    fn code(&self) -> &'static str {
        match self {
            Refusal::OtherCapability { .. } | Refusal::OtherInputs { .. } => code::RECEIPT_STALE,
            Refusal::OtherAgent { .. }
            | Refusal::Incomplete { .. }
            | Refusal::OtherAdapter { .. }
            | Refusal::Evidence { .. } => code::RECEIPT_UNUSABLE,
        }
    }
}

/// The first check `found` (read from `path`) fails as a complete probe of `agent` for `current`,
/// in order; the retained evidence is read only when the checks before it pass.
fn refusal(
    found: &Receipt,
    path: &Path,
    agent: &str,
    current: &BoundIdentities,
) -> Option<Refusal> {
    let id = found.id.clone();
    if found.agent != agent {
        let (found, agent) = (found.agent.clone(), agent.to_owned());
        return Some(Refusal::OtherAgent { id, found, agent });
    }
    if found.status != "complete" || found.catalog.is_none() {
        let status = found.status.clone();
        let reason = found.reason.as_deref().unwrap_or("no catalog").to_owned();
        return Some(Refusal::Incomplete { id, status, reason });
    }
    let adapter = crate::evidence::adapter::adapter_revision(agent);
    if found.adapter != adapter {
        let found = found.adapter.clone();
        return Some(Refusal::OtherAdapter { id, found, adapter });
    }
    let evidence = receipt::evidence_path(path);
    let evidence_ok = agentpack_lockfile::read_regular_file(&evidence)
        .is_ok_and(|bytes| receipt::digest(&bytes) == found.evidence_digest);
    if !evidence_ok {
        return Some(Refusal::Evidence { id, evidence });
    }
    let capability = crate::evidence::adapter::capability_revision(agent);
    if found.capability != capability {
        let (found, agent) = (found.capability, agent.to_owned());
        return Some(Refusal::OtherCapability {
            id,
            found,
            agent,
            capability,
        });
    }
    let stale = stale_identities(&found.identities, current);
    (!stale.is_empty()).then_some(Refusal::OtherInputs { id, stale })
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
