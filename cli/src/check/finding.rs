//! One thing preflight found: a stable code, a severity, where it comes from, what it concerns, what
//! it means and what to do. Pure data; the codes are the fault table of docs/src/preflight.md.

use serde::Serialize;

/// How much a finding weighs. `violation` blocks (exit 3), `error` is an operational failure
/// (exit 5); `info` and `warning` leave the environment ready (exit 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warning,
    Violation,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Violation => "violation",
            Severity::Error => "error",
        }
    }
}

/// The stable finding codes (see the fault table in docs/src/preflight.md).
pub mod code {
    pub const LOCK_DRIFT: &str = "LOCK_DRIFT";
    pub const LOCK_UNVERIFIED: &str = "LOCK_UNVERIFIED";
    pub const CACHE_MISSING: &str = "CACHE_MISSING";
    pub const CACHE_MISMATCH: &str = "CACHE_MISMATCH";
    pub const STAGING_MISSING: &str = "STAGING_MISSING";
    pub const STAGING_STALE: &str = "STAGING_STALE";
    pub const MCP_UNLOCKED: &str = "MCP_UNLOCKED";
    pub const MCP_UNPINNED: &str = "MCP_UNPINNED";
    pub const SECRET_INLINE: &str = "SECRET_INLINE";
    pub const INHERITED_CONFIG: &str = "INHERITED_CONFIG";
    pub const INHERITED_SHADOW: &str = "INHERITED_SHADOW";
    pub const WORKSPACE_WRITE_PLANNED: &str = "WORKSPACE_WRITE_PLANNED";
    pub const PLAN_COLLISION: &str = "PLAN_COLLISION";
    pub const PLAN_WARNING: &str = "PLAN_WARNING";
    pub const PLAN_INCOMPLETE: &str = "PLAN_INCOMPLETE";
    pub const WORKSPACE_UNREADABLE: &str = "WORKSPACE_UNREADABLE";
    pub const RECEIPT_MISSING: &str = "RECEIPT_MISSING";
    pub const RECEIPT_STALE: &str = "RECEIPT_STALE";
    pub const RECEIPT_UNUSABLE: &str = "RECEIPT_UNUSABLE";
    pub const RECEIPT_ATTACHED: &str = "RECEIPT_ATTACHED";
    pub const REQUIREMENT_VIOLATED: &str = "REQUIREMENT_VIOLATED";
    pub const REQUIREMENT_UNKNOWN: &str = "REQUIREMENT_UNKNOWN";
    pub const REQUIREMENT_ALLOWED: &str = "REQUIREMENT_ALLOWED";
}

/// One finding of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub code: &'static str,
    pub severity: Severity,
    /// Where it comes from: a file, a lock entry, a contract requirement.
    pub source: String,
    /// What it concerns: the agent, a package, a server, an artifact.
    pub target: String,
    pub message: String,
    /// What to do; empty when nothing needs doing.
    pub remedy: String,
}

impl Finding {
    pub fn new(
        code: &'static str,
        severity: Severity,
        source: impl Into<String>,
        target: impl Into<String>,
        message: impl Into<String>,
        remedy: impl Into<String>,
    ) -> Self {
        Self {
            code,
            severity,
            source: source.into(),
            target: target.into(),
            message: message.into(),
            remedy: remedy.into(),
        }
    }
}
