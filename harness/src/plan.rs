//! The renderers' output: what one agent's staged tree holds, as data.
//!
//! A [`RenderPlan`] lists entries by their path relative to the generation root (for example
//! `plugins/agentpack-bundle/skills/foo/SKILL.md`). An unchanged package file is a
//! [`PlanEntry::FromFile`] so the builder can hard-link it from the store; converted or generated
//! content is [`PlanEntry::Bytes`]. Secret-bearing values never appear here: they go to the plan's
//! [`SecretLayer`], which the launcher writes outside the store. Plans are ordered maps, so equal
//! inputs give byte-equal plans.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::agent::Agent;

/// One file or link of a staged tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanEntry {
    /// An unchanged file of a verified input tree: link or copy it, bytes unchanged.
    FromFile { source: PathBuf, executable: bool },
    /// Generated or converted content.
    Bytes(Vec<u8>),
    /// A symbolic link with this target text (only in-package relative links).
    Symlink(PathBuf),
}

/// Values that must not enter the store, for one agent. The launcher writes them into the
/// per-user home layer (0600) or exports them into the agent's environment.
///
/// Values are kept as the definition wrote them: a secret template (`postgres://app:pw@${HOST}`)
/// still holds its `${VAR}` references, which the launcher expands from its own environment at
/// each launch ([`SecretLayer::expanded`]), so a recorded layer never freezes them. A literal
/// value has no `${` in it (that would make it a template), so expanding leaves it unchanged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SecretLayer {
    /// Variables the launcher sets in the agent's environment; the staged config references them
    /// by name (`${AGENTPACK_MCP_...}` and the like).
    pub env: BTreeMap<String, String>,
    /// A TOML fragment to merge into the home layer's `config.toml` (Codex and Grok), holding
    /// the secret-bearing `[mcp_servers.<name>]` values.
    pub config_toml: Option<toml::Table>,
}

impl SecretLayer {
    /// True when there is nothing secret to write.
    pub fn is_empty(&self) -> bool {
        self.env.is_empty() && self.config_toml.as_ref().is_none_or(|t| t.is_empty())
    }

    /// The layer with every `${VAR}` / `${VAR:-default}` reference expanded from `lookup` (the
    /// launching environment), as [`crate::render::mcp::expand_references`] does. A variable that is unset
    /// becomes empty, as in a shell; each one gives a warning naming where it is read and the
    /// variable, never a value.
    pub fn expanded(&self, lookup: &dyn Fn(&str) -> Option<String>) -> (SecretLayer, Vec<String>) {
        let mut warnings = Vec::new();
        let mut expand = |place: &str, text: &str| {
            let (value, unset) = crate::render::mcp::expand_references(text, lookup);
            for var in unset {
                warnings.push(format!(
                    "MCP value {place} reads `{var}`, which is not set; it is expanded as empty (set {var} before launching, or write `${{{var}:-default}}`)"
                ));
            }
            value
        };
        let env = self
            .env
            .iter()
            .map(|(name, value)| (name.clone(), expand(name, value)))
            .collect();
        let config_toml = self.config_toml.as_ref().map(|table| {
            let mut table = table.clone();
            expand_table(&mut table, "", &mut expand);
            table
        });
        (SecretLayer { env, config_toml }, warnings)
    }
}

/// Expands every string of `table` (recursively) with `expand(dotted key, text)`.
fn expand_table(
    table: &mut toml::Table,
    prefix: &str,
    expand: &mut dyn FnMut(&str, &str) -> String,
) {
    for (key, value) in table.iter_mut() {
        let place = format!("{prefix}{key}");
        match value {
            toml::Value::String(text) => *text = expand(&place, text),
            toml::Value::Table(inner) => expand_table(inner, &format!("{place}."), expand),
            _ => {}
        }
    }
}

/// Everything one agent gets from one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderPlan {
    pub agent: Agent,
    /// Entries by path relative to the generation root, `/`-separated.
    pub entries: BTreeMap<String, PlanEntry>,
    /// Things the user should know were skipped or changed.
    pub warnings: Vec<String>,
    /// Routine information (`hook for claude: ...`), left out by `--quiet`.
    pub info: Vec<String>,
    pub secrets: SecretLayer,
    /// Artifacts of two packages that would have taken one name, and how both were kept.
    pub collisions: Vec<Collision>,
}

/// Two packages staged different artifacts under one name for one agent: the later package keeps
/// the name (layering), the earlier one's artifact is staged under a name prefixed with its package's
/// name. Identical bytes are not a collision (one copy is staged); the `./.agents/` overlay replacing
/// a package's file is an intended override, not a collision.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Collision {
    pub agent: String,
    /// `path`: the same staged path; `invocation`: a skill, command or agent of another kind under
    /// the same invocation name.
    pub clash: String,
    /// The contested staged path, relative to the agent's tree (`agents/reviewer.md`).
    pub path: String,
    /// The package that keeps the name (the later one).
    pub kept_by: String,
    /// The package whose artifact was renamed (the earlier one).
    pub renamed_from: String,
    /// Where the renamed artifact is staged, relative to the agent's tree.
    pub renamed_to: String,
}

impl RenderPlan {
    pub(crate) fn new(agent: Agent) -> Self {
        Self {
            agent,
            entries: BTreeMap::new(),
            warnings: Vec::new(),
            info: Vec::new(),
            secrets: SecretLayer::default(),
            collisions: Vec::new(),
        }
    }

    pub(crate) fn bytes(&mut self, path: String, bytes: impl Into<Vec<u8>>) {
        self.entries.insert(path, PlanEntry::Bytes(bytes.into()));
    }

    pub(crate) fn json(&mut self, path: String, value: &serde_json::Value) {
        self.bytes(path, crate::json_bytes(value));
    }
}

/// Paths shared by every agent of a generation: the `plugin-roots/` package copies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedPlan {
    pub entries: BTreeMap<String, PlanEntry>,
}

/// The whole generation: one plan per rendered agent plus the shared entries.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationPlan {
    pub agents: BTreeMap<Agent, RenderPlan>,
    pub shared: SharedPlan,
    /// Warnings about the inputs themselves (unreadable manifests, links leaving a package...),
    /// reported once rather than per agent.
    pub warnings: Vec<String>,
    pub info: Vec<String>,
}
