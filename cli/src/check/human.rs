//! The human summary of a report. Pure.

use agentpack_builders::contract::Status;

use super::finding::Finding;
use super::{Report, EXIT_UNKNOWN, EXIT_VIOLATED};

/// The human summary.
pub fn human(report: &Report) -> String {
    let mut out = format!(
        "preflight {} (mode {}, policy {}): {}\n",
        report.agent,
        report.mode,
        report.policy.as_str(),
        match report.exit_code {
            0 => "ready".to_owned(),
            EXIT_VIOLATED => "not ready: a requirement is violated (exit 3)".to_owned(),
            EXIT_UNKNOWN => "not ready: a required observation is unknown (exit 4)".to_owned(),
            code => format!("not ready (exit {code})"),
        }
    );
    let mut findings: Vec<&Finding> = report.findings.iter().collect();
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    for finding in findings {
        out.push_str(&format!(
            "  {:<9} {} {}: {}\n",
            finding.severity.as_str(),
            finding.code,
            finding.target,
            finding.message
        ));
        if !finding.remedy.is_empty() {
            out.push_str(&format!("            fix  {}\n", finding.remedy));
        }
    }
    if !report.requirements.is_empty() {
        let count = |status: Status| {
            report
                .requirements
                .iter()
                .filter(|o| o.status == status)
                .count()
        };
        out.push_str(&format!(
            "  contract: {} satisfied, {} violated, {} allowed, {} unknown, {} for other agents\n",
            count(Status::Satisfied),
            count(Status::Violated),
            count(Status::Allowed),
            count(Status::Unknown),
            count(Status::NotApplicable)
        ));
    }
    out.push_str(&format!(
        "  plan: {} artifact(s), {} MCP server(s), {} workspace write(s)\n",
        report.plan.artifacts.len(),
        report.plan.mcp_servers.len(),
        report.plan.workspace_writes.len()
    ));
    out
}
