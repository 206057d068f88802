//! Attribution: the per-agent ways of keeping AI credit lines out of commits and pull requests.
//!
//! Claude Code and Cursor have real settings; OpenCode, Grok and Antigravity get prompt-level
//! guidance; Codex's legacy `commit_attribution` is stripped by the home layer ([`crate::home`]).
//! Everything here is skipped when the user keeps attribution (`AGENTPACK_KEEP_ATTRIBUTION=1`).

use serde_json::{json, Value};

/// The guidance text for agents without a setting.
pub const NO_ATTRIBUTION_GUIDANCE: &str = "Do not add AI attribution to anything you write for this project: no \
`Co-Authored-By` trailers naming an AI agent in commit messages, and no \"Generated with ...\" footers or \
similar credit lines in commits, pull requests, issues or code comments.\n";

/// Claude Code's `agentpack-settings.json`, passed with `--settings`.
pub fn claude_settings(keep_attribution: bool, enabled_mcp_servers: &[String]) -> Value {
    if keep_attribution {
        json!({"enabledMcpjsonServers": enabled_mcp_servers})
    } else {
        json!({
            "includeCoAuthoredBy": false,
            "attribution": {"commit": "", "pr": ""},
            "enabledMcpjsonServers": enabled_mcp_servers,
        })
    }
}

/// Cursor's `cli-config.json` settings with attribution off.
pub fn cursor_cli_config() -> Value {
    json!({"attribution": {"attributeCommitsToAgent": false, "attributePRsToAgent": false}})
}

/// OpenCode's instruction file.
pub fn opencode_instruction() -> String {
    format!("# Attribution\n\n{NO_ATTRIBUTION_GUIDANCE}")
}

/// Antigravity's always-apply plugin rule.
pub fn antigravity_rule() -> String {
    format!("---\ntrigger: always_on\ndescription: Do not add AI attribution\n---\n\n{NO_ATTRIBUTION_GUIDANCE}")
}

/// Grok's home-layer `AGENTS.md` guidance.
pub fn grok_agents_md() -> String {
    format!("# Attribution\n\n{NO_ATTRIBUTION_GUIDANCE}")
}
