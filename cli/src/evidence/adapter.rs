//! Which client observation reads each agent, the parser revision a receipt records, and the
//! client version each parser was validated on. Data only: the parsers live with the probe
//! command (`commands/probe/parse.rs`); preflight reads the revision to refuse a receipt another
//! parser revision wrote.

use agentpack_harness::Agent;

/// The Claude Code version the init-event parser was validated on.
pub const CLAUDE_VALIDATED: &str = "2.1.328";
/// The Codex version the prompt-input parser was validated on.
pub const CODEX_VALIDATED: &str = "0.171.0";

/// The OpenCode version the `debug skill` parser was validated on.
pub const OPENCODE_VALIDATED: &str = "1.18.33";

/// Which client observation a probe runs (see `probe_agent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// `claude -p` in the workspace: the init event's skills, commands and agents.
    ClaudeInit,
    /// `codex debug prompt-input` with the staged `CODEX_HOME`.
    CodexPromptInput,
    /// `opencode debug skill` / `debug config` with the staged config root.
    OpenCodeDebug,
}

/// How the probe reads one agent's client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adapter {
    pub client: Client,
    /// The revision of the parser: a receipt of another revision is not attached.
    pub revision: &'static str,
    /// The client version the parser was validated on.
    pub validated: &'static str,
    /// Whether the client's listing shows commands and agents (else skills only).
    pub lists_commands_and_agents: bool,
    /// The capability revision: bumped whenever what the probe observes changes (a command it
    /// runs, a scope, how winners are sampled), so that a receipt of an older revision is stale.
    pub capability: u32,
}

/// The probe's adapter for `agent`; `None`: the agent cannot be probed.
pub fn adapter(agent: Agent) -> Option<Adapter> {
    match agent {
        Agent::Claude => Some(Adapter {
            client: Client::ClaudeInit,
            revision: "claude-init-validate/2",
            validated: CLAUDE_VALIDATED,
            lists_commands_and_agents: true,
            // 2: `plugin details` cross-checks `plugin validate` (controlled projection).
            capability: 2,
        }),
        Agent::Codex => Some(Adapter {
            client: Client::CodexPromptInput,
            revision: "codex-prompt-input/2",
            validated: CODEX_VALIDATED,
            lists_commands_and_agents: false,
            // 2: cloud skills off, file credential stores, and the workspace session.
            capability: 2,
        }),
        Agent::OpenCode => Some(Adapter {
            client: Client::OpenCodeDebug,
            revision: "opencode-debug/3",
            validated: OPENCODE_VALIDATED,
            lists_commands_and_agents: true,
            // 2: 60 `debug skill` samples (bounded concurrency, per-call and total timeouts).
            // 3: one sample unless a skill name has more than one candidate, the sampling
            // recorded; agents and commands answered from `debug config` / `agent list`.
            capability: 3,
        }),
        Agent::Cursor | Agent::Grok | Agent::Antigravity => None,
    }
}

/// The capability revision of `agent`'s probe (0 for an agent without a probe).
pub fn capability_revision(agent: &str) -> u32 {
    Agent::from_name(agent)
        .and_then(adapter)
        .map_or(0, |adapter| adapter.capability)
}

/// Whether `agent`'s probe lists commands and agents as such (else only skills, under which
/// agentpack renders them).
pub fn lists_commands_and_agents(agent: &str) -> bool {
    Agent::from_name(agent)
        .and_then(adapter)
        .is_some_and(|adapter| adapter.lists_commands_and_agents)
}

/// The revision of the parser of `agent`'s output (`none` for an agent without a probe).
pub fn adapter_revision(agent: &str) -> &'static str {
    Agent::from_name(agent)
        .and_then(adapter)
        .map_or("none", |adapter| adapter.revision)
}
