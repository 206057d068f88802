//! The one table of per-agent knowledge: an [`AgentProfile`] row per [`Agent`], in [`PROFILES`].
//!
//! Everything that differs between agents and is not the agent's own renderer lives here: its
//! names and the aliases accepted wherever an agent is named, its binary and the variable that
//! overrides it, what `--yolo` becomes, its subtree of a generation, its hook event table and hook
//! document shape, how its MCP configuration writes `${VAR}` references and which fields it has,
//! whether it reads language servers, its home layer, the link its launch places in the checkout,
//! the native places it reads that agentpack does not manage, what eject does for it, and function
//! pointers for what cannot be data (render, launcher arguments, home-layer preparation, eject
//! registration).
//!
//! Code that needs per-agent behaviour reads the row (`agent.profile().launcher.binary`); a match
//! on [`Agent`] is kept only where it is exhaustive and clearer than a field, and never has a
//! `_ =>` arm, so a new variant cannot silently get another agent's defaults. Adding an agent is
//! one renderer module, one row here, one clap variant (see `docs/src/development.md`, "Adding an
//! agent"); the test at the bottom fails when a variant has no row or rows are out of order.
//!
//! Pure data; never does I/O. The file is longer than the ~600 lines of other modules on purpose:
//! the rows are one table, read side by side.

use std::ffi::OsString;
use std::fmt;
use std::path::Path;

use crate::launch::command::LaunchRequest;
use crate::launch::home_layer::{self, HomeLayerError, HomeLayerRequest, PreparedHome};
use crate::plan::{RenderPlan, SecretLayer};
use crate::render::eject::{self, EjectPlan, SourceFile};
use crate::render::hooks::{self, HookFormat};
use crate::render::{self, Context};

/// The agents agentpack stages for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Agent {
    Claude,
    Cursor,
    OpenCode,
    Codex,
    Grok,
    Antigravity,
}

impl Agent {
    /// How many agents there are.
    pub const COUNT: usize = 6;

    /// Every agent, in a fixed order (the order of [`PROFILES`]).
    pub const ALL: [Agent; Agent::COUNT] = [
        Agent::Claude,
        Agent::Cursor,
        Agent::OpenCode,
        Agent::Codex,
        Agent::Grok,
        Agent::Antigravity,
    ];

    /// This agent's row of the table.
    pub fn profile(self) -> &'static AgentProfile {
        &PROFILES[self as usize]
    }

    /// The short name used in messages, receipts and `hook-exec --agent`.
    pub fn as_str(self) -> &'static str {
        self.profile().name
    }

    /// The human name used in warnings.
    pub fn display_name(self) -> &'static str {
        self.profile().display_name
    }

    /// Parses [`Agent::as_str`] back (the short name only).
    pub fn from_name(name: &str) -> Option<Agent> {
        PROFILES.iter().find(|p| p.name == name).map(|p| p.agent)
    }

    /// Parses a short name or one of the row's [`AgentProfile::aliases`] (`antigravity`,
    /// `cursor-agent`, `agent`).
    pub fn parse(name: &str) -> Option<Agent> {
        PROFILES
            .iter()
            .find(|p| p.name == name || p.aliases.contains(&name))
            .map(|p| p.agent)
    }
}

impl fmt::Display for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every agent's short name, in [`Agent::ALL`] order (for `--agent` value lists and contracts).
pub const NAMES: [&str; Agent::COUNT] = names(&TABLE);

const fn names(table: &[AgentProfile; Agent::COUNT]) -> [&'static str; Agent::COUNT] {
    let mut out = [""; Agent::COUNT];
    let mut i = 0;
    while i < table.len() {
        out[i] = table[i].name;
        i += 1;
    }
    out
}

/// One row of the agent table.
pub struct AgentProfile {
    pub agent: Agent,
    /// Short name: messages, receipts, `hook-exec --agent`, `preflight --agent`, eject.
    pub name: &'static str,
    /// Human name for warnings.
    pub display_name: &'static str,
    /// Other names accepted wherever an agent is named ([`Agent::parse`]).
    pub aliases: &'static [&'static str],
    /// The agent's tree inside a generation (and inside an ejected copy).
    pub staged_root: &'static str,
    pub launcher: Launcher,
    pub hooks: Hooks,
    pub mcp: Mcp,
    pub lsp: Lsp,
    pub home_layer: HomeLayer,
    /// The link a launch places in the checkout, when the agent reads something only from there.
    pub workspace_link: Option<WorkspaceLink>,
    /// Places the agent reads that agentpack does not stage (what `preflight` lists), in order.
    pub native_places: &'static [NativePlace],
    /// What eject does for the agent; `None`: eject refuses it (see [`eject::refusal`]).
    pub eject: Option<Eject>,
    /// The agent's renderer (its module in [`crate::render`]).
    pub(crate) render: fn(&Context<'_>) -> RenderPlan,
}

/// Registers an ejected copy in the project files the agent reads.
pub type EjectRegisterFn = fn(&[SourceFile], &str, &mut EjectPlan);

/// Names, per MCP server, the secret-bearing values an ejected copy lacks, from the agent's
/// [`SecretLayer`] (never a value).
pub type EjectSecretWarningsFn = fn(&SecretLayer) -> Vec<String>;

/// What eject does for an agent.
pub struct Eject {
    /// The directories of the staged tree eject copies to where the agent reads them in a
    /// project, in order (before [`Eject::register`] runs).
    pub dirs: &'static [EjectDir],
    /// Registers the copy in the project files the agent reads (MCP servers, hooks, settings).
    pub register: EjectRegisterFn,
    /// Set when the agent's secret-bearing MCP values never enter the generation (the launcher
    /// merges them into its home layer): eject has them rendered in memory and warns with this.
    /// `None`: the staged `${AGENTPACK_...}` references already name what is missing.
    pub secret_warnings: Option<EjectSecretWarningsFn>,
}

/// A directory of the agent's staged tree that eject copies into the project.
pub struct EjectDir {
    /// Below [`AgentProfile::staged_root`].
    pub staged: &'static str,
    /// Relative to the project root.
    pub project: &'static str,
    /// Each entry is a unit (a skill directory) that eject must own as a whole.
    pub units: bool,
}

const fn eject_dir(staged: &'static str, project: &'static str, units: bool) -> EjectDir {
    EjectDir {
        staged,
        project,
        units,
    }
}

/// How the agent's binary is found and run.
pub struct Launcher {
    /// The `agentpack` subcommand that launches it.
    pub subcommand: &'static str,
    /// The binary looked up on `PATH`.
    pub binary: &'static str,
    /// The variable naming the binary instead.
    pub override_var: &'static str,
    pub yolo: Yolo,
    /// The flag that names the workspace directory, added unless the user passed it.
    pub workspace_flag: Option<&'static str>,
    /// A settings file of the staged tree the launcher inlines into the command (Claude Code's
    /// `--settings`), relative to [`AgentProfile::staged_root`].
    pub settings_file: Option<&'static str>,
    /// Arguments before the yolo flag (the Claude Code bundle and settings, Cursor's `--trust`).
    pub(crate) leading_args: fn(&LaunchRequest<'_>) -> Vec<OsString>,
}

/// What `--yolo` becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Yolo {
    /// A command-line flag.
    Flag(&'static str),
    /// A setting written at sync time (OpenCode's `"permission": "allow"`), no flag.
    RenderedConfig,
}

impl Yolo {
    pub fn flag(self) -> Option<&'static str> {
        match self {
            Yolo::Flag(flag) => Some(flag),
            Yolo::RenderedConfig => None,
        }
    }
}

/// Hooks: which events the agent fires and the document it reads them from.
pub struct Hooks {
    pub events: HookEvents,
    /// The hook file format the agent reads natively (its own files are preferred).
    pub native_format: Option<HookFormat>,
    pub document: HookDocument,
    /// Handler types (besides `command`) the agent runs itself, staged as written.
    pub native_handler_types: &'static [&'static str],
    /// `hook-exec` never passes an `"allow"` decision on (Antigravity would approve the tool
    /// without asking), and merges even a single handler's answer to strip it.
    pub strips_allow: bool,
}

/// The events an agent fires, given the Claude Code name of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvents {
    /// Claude Code's names, those in the list.
    ClaudeNames(&'static [&'static str]),
    /// Cursor's own names (a mapping table in [`hooks`]).
    Cursor,
    /// Antigravity's own names (a mapping in [`hooks`]).
    Antigravity,
    /// The agent has no hooks.
    None,
}

/// The shape of the hook document the agent reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookDocument {
    /// `{"hooks": {Event: [{matcher, hooks: [handler]}]}}`, one spec per handler under
    /// `hook-specs/<agent>/`.
    Groups,
    /// The same shape, specs inside the agent's home (`codex-home/hook-specs/`, content-named).
    GroupsWithHomeSpecs,
    /// `{"version": 1, "hooks": {event: [{command, matcher, ...}]}}`.
    Flat,
    /// `{"agentpack": {Event: ...}}`, one spec per event.
    NamedGroup,
    /// A generated OpenCode plugin module, one spec per event.
    OpenCodePlugin,
    /// No hook document.
    None,
}

/// MCP: how the agent's configuration writes a server.
pub struct Mcp {
    pub references: ReferenceSyntax,
    /// A disabled server is staged with `disabled: true` (else left out, with a warning).
    pub stages_disabled: bool,
    /// The definition's `type` is written.
    pub writes_type: bool,
    /// The `type` written for a remote server that has none.
    pub default_remote_type: Option<&'static str>,
    /// The key of a remote server's URL.
    pub url_key: &'static str,
    /// `cwd` is staged (else left out, with a warning).
    pub cwd: bool,
    pub oauth: OAuthFields,
}

/// How `${VAR}` is written in the agent's MCP configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferenceSyntax {
    /// `${VAR}` as written.
    Dollar,
    /// `${env:VAR}` (Cursor).
    DollarEnv,
    /// `{env:VAR}` (OpenCode).
    BraceEnv,
}

/// Which OAuth client settings the agent's MCP configuration has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthFields {
    /// `oauth.clientId`, `callbackPort`, `authServerMetadataUrl` (Claude Code).
    ClaudeCode,
    /// `auth.CLIENT_ID`, `scopes` (Cursor).
    Cursor,
    /// `scopes` only (Codex's TOML).
    Scopes,
    /// None: OAuth client settings are left out with a warning.
    None,
}

/// Whether the agent reads language servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lsp {
    Staged,
    /// Not staged; the reason the warning gives.
    NotStaged(&'static str),
}

/// The writable per-user home a launch prepares.
pub struct HomeLayer {
    /// The variable that points the agent at it (`None`: the agent runs without a layer); set to
    /// the [`PreparedHome::root`] that `prepare` made.
    pub env_var: Option<&'static str>,
    /// Makes the layer and sets [`PreparedHome::root`] (and what else the agent needs).
    pub(crate) prepare: Option<PrepareFn>,
    /// Copies what the agent changed in its layer back after it exited.
    pub(crate) after_exit: Option<AfterExitFn>,
}

pub(crate) type PrepareFn =
    fn(&HomeLayerRequest<'_>, &mut PreparedHome) -> Result<(), HomeLayerError>;
pub(crate) type AfterExitFn = fn(&HomeLayerRequest<'_>, &Path) -> Result<(), HomeLayerError>;

/// A link in the checkout that a launch places (tracked by
/// [`home_layer::workspace_links`]).
pub struct WorkspaceLink {
    /// The directory of the generation it points at.
    pub generation_dir: &'static str,
    /// Where it is placed, relative to the workspace.
    pub workspace_path: &'static str,
    /// What it gives the agent, for the warning when something else is there.
    pub holds: &'static str,
    /// A link from an earlier launch is removed when the generation has nothing to link.
    pub removed_when_empty: bool,
    /// Why `--strict-external` refuses the launch.
    pub why: &'static str,
}

/// One place an agent reads that agentpack does not manage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativePlace {
    pub base: PlaceBase,
    /// Relative to the base; a trailing `/` marks a directory shown as such.
    pub path: &'static str,
    pub holds: Option<Holds>,
}

/// What a [`NativePlace`] is relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaceBase {
    /// `$HOME` (shown `~/...`).
    Home,
    /// `$XDG_CONFIG_HOME`, else `~/.config` (shown `$XDG_CONFIG_HOME/...`).
    ConfigHome,
    /// The workspace.
    Workspace,
}

/// How a directory's entries name artifacts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// `<name>/SKILL.md` directories.
    Skills,
    /// `<name>.md` files.
    Commands,
    /// `<name>.md` files.
    Agents,
}

impl Holds {
    pub fn category(self) -> &'static str {
        match self {
            Holds::Skills => "skill",
            Holds::Commands => "command",
            Holds::Agents => "agent",
        }
    }
}

const fn home(path: &'static str, holds: Option<Holds>) -> NativePlace {
    NativePlace {
        base: PlaceBase::Home,
        path,
        holds,
    }
}

const fn config(path: &'static str, holds: Option<Holds>) -> NativePlace {
    NativePlace {
        base: PlaceBase::ConfigHome,
        path,
        holds,
    }
}

const fn ws(path: &'static str, holds: Option<Holds>) -> NativePlace {
    NativePlace {
        base: PlaceBase::Workspace,
        path,
        holds,
    }
}

const SKILLS: Option<Holds> = Some(Holds::Skills);
const COMMANDS: Option<Holds> = Some(Holds::Commands);
const AGENTS: Option<Holds> = Some(Holds::Agents);

fn no_leading_args(_: &LaunchRequest<'_>) -> Vec<OsString> {
    Vec::new()
}

const JSON_MCP: Mcp = Mcp {
    references: ReferenceSyntax::Dollar,
    stages_disabled: false,
    writes_type: true,
    default_remote_type: None,
    url_key: "url",
    cwd: false,
    oauth: OAuthFields::None,
};

const NO_HOOKS: Hooks = Hooks {
    events: HookEvents::None,
    native_format: None,
    document: HookDocument::None,
    native_handler_types: &[],
    strips_allow: false,
};

const NO_HOME_LAYER: HomeLayer = HomeLayer {
    env_var: None,
    prepare: None,
    after_exit: None,
};

const TABLE: [AgentProfile; Agent::COUNT] = [
    AgentProfile {
        agent: Agent::Claude,
        name: "claude",
        display_name: "Claude Code",
        aliases: &[],
        staged_root: render::claude::BUNDLE,
        launcher: Launcher {
            subcommand: "claude",
            binary: "claude",
            override_var: "CLAUDE_PATH",
            yolo: Yolo::Flag("--dangerously-skip-permissions"),
            workspace_flag: None,
            settings_file: Some("agentpack-settings.json"),
            leading_args: crate::launch::command::claude_args,
        },
        hooks: Hooks {
            events: HookEvents::ClaudeNames(&hooks::CLAUDE_EVENTS),
            native_format: Some(HookFormat::Claude),
            document: HookDocument::Groups,
            native_handler_types: &["prompt", "agent", "http"],
            strips_allow: false,
        },
        mcp: Mcp {
            default_remote_type: Some("http"),
            oauth: OAuthFields::ClaudeCode,
            ..JSON_MCP
        },
        lsp: Lsp::Staged,
        home_layer: NO_HOME_LAYER,
        workspace_link: None,
        native_places: &[
            home(".claude/skills", SKILLS),
            home(".claude/commands", COMMANDS),
            home(".claude/agents", AGENTS),
            home(".claude/settings.json", None),
            home(".claude/CLAUDE.md", None),
            ws(".claude/", None),
            ws(".claude/skills", SKILLS),
            ws(".claude/commands", COMMANDS),
            ws(".claude/agents", AGENTS),
            ws("CLAUDE.md", None),
        ],
        eject: Some(Eject {
            dirs: &[
                eject_dir("skills", ".claude/skills", true),
                eject_dir("commands", ".claude/commands", false),
                eject_dir("agents", ".claude/agents", false),
            ],
            register: eject::register::claude,
            secret_warnings: None,
        }),
        render: render::claude::render,
    },
    AgentProfile {
        agent: Agent::Cursor,
        name: "cursor",
        display_name: "Cursor",
        aliases: &["agent", "cursor-agent"],
        staged_root: render::cursor::ROOT,
        launcher: Launcher {
            subcommand: "agent",
            binary: "cursor-agent",
            override_var: "CURSOR_AGENT_PATH",
            yolo: Yolo::Flag("--force"),
            workspace_flag: Some("--workspace"),
            settings_file: None,
            leading_args: crate::launch::command::cursor_args,
        },
        hooks: Hooks {
            events: HookEvents::Cursor,
            native_format: Some(HookFormat::Cursor),
            document: HookDocument::Flat,
            native_handler_types: &[],
            strips_allow: false,
        },
        mcp: Mcp {
            references: ReferenceSyntax::DollarEnv,
            oauth: OAuthFields::Cursor,
            ..JSON_MCP
        },
        lsp: Lsp::NotStaged("it runs only its built-in language servers"),
        home_layer: HomeLayer {
            env_var: Some(home_layer::cursor::ENV_VAR),
            prepare: Some(home_layer::cursor::prepare),
            after_exit: None,
        },
        workspace_link: Some(WorkspaceLink {
            generation_dir: "cursor/agentpack-bundle/agents",
            workspace_path: ".cursor/agents",
            holds: "agents",
            removed_when_empty: true,
            why: "Cursor reads sub-agents only from the workspace, so its launch links ./.cursor/agents in the checkout",
        }),
        native_places: &[
            home(".cursor/skills", SKILLS),
            home(".cursor/rules", None),
            ws(".cursor/", None),
            ws(".cursor/skills", SKILLS),
            ws(".cursor/commands", COMMANDS),
            ws("AGENTS.md", None),
        ],
        eject: Some(Eject {
            dirs: &[
                eject_dir("agentpack-bundle/rules", ".cursor/rules", false),
                eject_dir("agentpack-bundle/commands", ".cursor/commands", false),
                eject_dir("agentpack-bundle/agents", ".cursor/agents", false),
                eject_dir("agentpack-bundle/skills", ".cursor/skills", true),
            ],
            register: eject::register::cursor,
            secret_warnings: None,
        }),
        render: render::cursor::render,
    },
    AgentProfile {
        agent: Agent::OpenCode,
        name: "opencode",
        display_name: "OpenCode",
        aliases: &[],
        staged_root: render::opencode::ROOT,
        launcher: Launcher {
            subcommand: "opencode",
            binary: "opencode",
            override_var: "OPENCODE_PATH",
            yolo: Yolo::RenderedConfig,
            workspace_flag: None,
            settings_file: None,
            leading_args: no_leading_args,
        },
        hooks: Hooks {
            events: HookEvents::ClaudeNames(&hooks::OPENCODE_EVENTS),
            native_format: None,
            document: HookDocument::OpenCodePlugin,
            native_handler_types: &[],
            strips_allow: false,
        },
        mcp: Mcp {
            references: ReferenceSyntax::BraceEnv,
            ..JSON_MCP
        },
        lsp: Lsp::Staged,
        home_layer: HomeLayer {
            env_var: Some(home_layer::opencode::ENV_VAR),
            prepare: Some(home_layer::opencode::prepare),
            after_exit: None,
        },
        workspace_link: None,
        native_places: &[
            // OpenCode also reads Claude-compatible skill directories.
            home(".claude/skills", SKILLS),
            config("opencode", None),
            config("opencode/skills", SKILLS),
            ws(".opencode/skills", SKILLS),
            ws(".claude/skills", SKILLS),
            ws("AGENTS.md", None),
            ws("CLAUDE.md", None),
        ],
        eject: None,
        render: render::opencode::render,
    },
    AgentProfile {
        agent: Agent::Codex,
        name: "codex",
        display_name: "Codex",
        aliases: &[],
        staged_root: render::codex::ROOT,
        launcher: Launcher {
            subcommand: "codex",
            binary: "codex",
            override_var: "CODEX_PATH",
            yolo: Yolo::Flag("--dangerously-bypass-approvals-and-sandbox"),
            workspace_flag: None,
            settings_file: None,
            leading_args: no_leading_args,
        },
        hooks: Hooks {
            events: HookEvents::ClaudeNames(&hooks::CODEX_EVENTS),
            native_format: Some(HookFormat::Codex),
            document: HookDocument::GroupsWithHomeSpecs,
            native_handler_types: &[],
            strips_allow: false,
        },
        mcp: Mcp {
            cwd: true,
            oauth: OAuthFields::Scopes,
            ..JSON_MCP
        },
        lsp: Lsp::NotStaged("Codex has no language server setting"),
        home_layer: HomeLayer {
            env_var: Some(home_layer::codex::ENV_VAR),
            prepare: Some(home_layer::codex::prepare),
            after_exit: Some(home_layer::codex::after_exit),
        },
        workspace_link: None,
        native_places: &[
            home(".codex/config.toml", None),
            home(".codex/skills", SKILLS),
            home(".agents/skills", SKILLS),
            ws(".codex/skills", SKILLS),
            ws("AGENTS.md", None),
        ],
        eject: Some(Eject {
            // Custom agents: Codex reads a trusted project's `.codex/agents/<name>.toml`.
            dirs: &[
                eject_dir("skills", ".agents/skills", true),
                eject_dir("agents", ".codex/agents", false),
            ],
            register: eject::register::codex,
            secret_warnings: Some(eject::register::codex_layer_secret_warnings),
        }),
        render: render::codex::render,
    },
    AgentProfile {
        agent: Agent::Grok,
        name: "grok",
        display_name: "Grok",
        aliases: &[],
        staged_root: "grok",
        launcher: Launcher {
            subcommand: "grok",
            binary: "grok",
            override_var: "GROK_PATH",
            yolo: Yolo::Flag("--always-approve"),
            workspace_flag: Some("--cwd"),
            settings_file: None,
            leading_args: no_leading_args,
        },
        hooks: NO_HOOKS,
        mcp: JSON_MCP,
        lsp: Lsp::Staged,
        home_layer: HomeLayer {
            env_var: Some(home_layer::grok::ENV_VAR),
            prepare: Some(home_layer::grok::prepare),
            after_exit: Some(home_layer::grok::after_exit),
        },
        workspace_link: None,
        native_places: &[home(".grok/user-settings.json", None), ws("AGENTS.md", None)],
        eject: None,
        render: render::grok::render,
    },
    AgentProfile {
        agent: Agent::Antigravity,
        name: "agy",
        display_name: "Antigravity",
        aliases: &["antigravity"],
        staged_root: "agy/agentpack-bundle",
        launcher: Launcher {
            subcommand: "agy",
            binary: "agy",
            override_var: "AGY_PATH",
            yolo: Yolo::Flag("--dangerously-skip-permissions"),
            workspace_flag: Some("--add-dir"),
            settings_file: None,
            leading_args: no_leading_args,
        },
        hooks: Hooks {
            events: HookEvents::Antigravity,
            native_format: None,
            document: HookDocument::NamedGroup,
            native_handler_types: &[],
            strips_allow: true,
        },
        mcp: Mcp {
            stages_disabled: true,
            writes_type: false,
            url_key: "serverUrl",
            cwd: true,
            ..JSON_MCP
        },
        lsp: Lsp::NotStaged("it runs only its built-in language servers"),
        home_layer: NO_HOME_LAYER,
        workspace_link: Some(WorkspaceLink {
            generation_dir: "agy/agentpack-bundle",
            workspace_path: ".agents/plugins/agentpack-bundle",
            holds: "plugin",
            removed_when_empty: false,
            why: "Antigravity reads the workspace plugin only from the checkout, so its launch links ./.agents/plugins/agentpack-bundle there",
        }),
        native_places: &[home(".gemini/GEMINI.md", None), ws("AGENTS.md", None)],
        eject: Some(Eject {
            // The whole bundle, as one directory (see the register function).
            dirs: &[],
            register: eject::register::antigravity,
            secret_warnings: None,
        }),
        render: render::antigravity::render,
    },
];

/// The table, one row per [`Agent`], in [`Agent::ALL`] order.
pub static PROFILES: [AgentProfile; Agent::COUNT] = TABLE;

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails to compile when a variant is added without updating this test, `Agent::ALL` and
    /// the table (the index is the variant's position in all three).
    fn position(agent: Agent) -> usize {
        match agent {
            Agent::Claude => 0,
            Agent::Cursor => 1,
            Agent::OpenCode => 2,
            Agent::Codex => 3,
            Agent::Grok => 4,
            Agent::Antigravity => 5,
        }
    }

    #[test]
    fn every_agent_has_its_own_row_in_order() {
        assert_eq!(PROFILES.len(), Agent::ALL.len());
        for (index, agent) in Agent::ALL.into_iter().enumerate() {
            assert_eq!(position(agent), index, "Agent::ALL is in declaration order");
            assert_eq!(agent as usize, index);
            assert_eq!(PROFILES[index].agent, agent, "row {index} is {agent:?}'s");
            assert_eq!(agent.profile().agent, agent);
        }
    }

    #[test]
    fn names_and_aliases_are_unique_and_parse_back() {
        let mut seen = std::collections::BTreeSet::new();
        for profile in &PROFILES {
            for name in std::iter::once(&profile.name).chain(profile.aliases) {
                assert!(seen.insert(*name), "`{name}` names two agents");
                assert_eq!(Agent::parse(name), Some(profile.agent));
            }
            assert_eq!(Agent::from_name(profile.name), Some(profile.agent));
        }
        assert_eq!(NAMES, Agent::ALL.map(Agent::as_str));
        assert_eq!(Agent::from_name("antigravity"), None);
    }

    #[test]
    fn a_row_with_a_home_layer_names_the_variable_that_points_at_it() {
        for profile in &PROFILES {
            let layer = &profile.home_layer;
            assert_eq!(
                layer.env_var.is_some(),
                layer.prepare.is_some(),
                "{}",
                profile.name
            );
            assert!(layer.after_exit.is_none() || layer.prepare.is_some());
        }
    }

    #[test]
    fn a_workspace_link_is_below_the_agents_staged_tree() {
        for profile in &PROFILES {
            if let Some(link) = &profile.workspace_link {
                assert!(link.generation_dir.starts_with(profile.staged_root));
            }
        }
    }
}
