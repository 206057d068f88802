//! agentpack-harness: everything agentpack knows about the agents it stages for, in three parts.
//!
//! - [`agent`]: the one table of per-agent knowledge ([`AgentProfile`], one row per [`Agent`]):
//!   names, binaries, flags, layouts, hook events, MCP syntax, eject targets, and the functions
//!   that render and launch each agent.
//! - [`input`] and [`render`], the plumbing: [`render_generation`] takes [`StageInputs`] (the
//!   packages of the lock with their mode filters, the project's `./.agents/` overlay, the
//!   manifest's MCP servers and the [`RenderOptions`]), reads the input trees ([`input::load`],
//!   read-only) and renders a [`GenerationPlan`] ([`render::render`], pure): for each agent a
//!   [`RenderPlan`] of entries relative to the generation root, plus the shared `plugin-roots/`
//!   copies. Nothing is written, fetched or printed. Equal inputs give equal plans. Secrets (MCP
//!   `env`, header values, OAuth client secrets) never enter a plan entry: they are referenced by
//!   variable name and returned in each plan's [`SecretLayer`].
//! - [`launch`], the runtime: home layers, launch commands, running the agent as a child,
//!   `hook-exec`, the Codex app-server client and the macOS keychain. It does I/O and runs
//!   processes; it never prints.
//!
//! Generation layout:
//!
//! ```text
//! plugins/agentpack-bundle/   Claude Code plugin (render/claude.rs)
//! opencode/                   OpenCode config root (render/opencode.rs)
//! codex-home/                 Codex home content (render/codex.rs)
//! cursor/                     Cursor plugin marketplace + bundle (render/cursor.rs)
//! grok/                       Grok bundle + home-layer fragments (render/grok.rs)
//! agy/agentpack-bundle/       Antigravity workspace plugin (render/antigravity.rs)
//! plugin-roots/<key prefix>/  package copies that servers and hooks run in
//! hook-specs/<agent>/         what `agentpack hook-exec dispatch` runs (Codex's: codex-home/hook-specs/)
//! ```

pub mod agent;
pub mod input;
pub mod launch;
pub mod mode;
pub mod plan;
pub mod render;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;

pub use agent::{Agent, AgentProfile};
pub use input::collect_mcp_servers;
pub use input::tree::PackageListings;
pub use mode::{ModeBase, ModeFilter, PathFilter, Selector, SelectorError};
pub use plan::{Collision, GenerationPlan, PlanEntry, RenderPlan, SecretLayer, SharedPlan};
pub use render::mcp::{McpLaunch, McpOAuth, McpServer, MergedServer};

/// Failures reading an input tree. Everything else is a warning in the plan.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("cannot list {path}: {message}; run `agentpack sync --repair` if it is a cache entry")]
    Walk { path: PathBuf, message: String },
}

impl HarnessError {
    pub(crate) fn io(error: std::io::Error) -> Self {
        HarnessError::Io(error)
    }
}

/// One package of the lock, as the generation builder hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageInput {
    pub module: String,
    pub cache_key: String,
    pub owner: String,
    pub repo: String,
    /// In-repo path, no leading or trailing `/` (empty for the repository root).
    pub path: String,
    pub commit: String,
    /// The lock's `kind` (`plugin`, `skill`, ...). `skill` packages are layered after the others
    /// and can be shadowed by a plugin of the same repository and commit.
    pub kind: String,
    /// The verified, read-only package tree.
    pub root: PathBuf,
    /// Which paths of the package the mode selects (see [`ModeFilter::package_filter`]).
    pub filter: PathFilter,
    /// Regular files that were executable in the package's source (the store keeps the tree's
    /// files 0444): staged with the execute bit.
    pub executables: BTreeSet<String>,
}

impl PackageInput {
    /// The locked `package`, its verified tree at `root`: every path selected and no executables
    /// (set `filter` and `executables` where they are known).
    pub fn locked(package: &agentpack_lockfile::LockedPackage, root: PathBuf) -> Self {
        PackageInput {
            module: package.module.as_str().to_owned(),
            cache_key: package.cache_key.as_str().to_owned(),
            owner: package.owner.clone(),
            repo: package.repo.clone(),
            path: package.path.clone(),
            commit: package.commit.as_str().to_owned(),
            kind: package.kind.clone(),
            root,
            filter: PathFilter::all(),
            executables: BTreeSet::new(),
        }
    }
}

/// The project's `./.agents/` directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayInput {
    pub root: PathBuf,
    /// See [`ModeFilter::overlay_filter`].
    pub filter: PathFilter,
}

/// What changes behaviour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderOptions {
    /// `AGENTPACK_KEEP_ATTRIBUTION`: leave attribution settings and guidance out.
    pub keep_attribution: bool,
    /// `AGENTPACK_DOT_AGENTS` is not `0`: merge `./.agents/`.
    pub dot_agents_enabled: bool,
    /// `--yolo` at sync time (OpenCode's `"permission": "allow"`).
    pub yolo: bool,
    /// The absolute path of the agentpack executable hooks call.
    pub agentpack_exe: PathBuf,
    /// The final absolute path of the generation (known before the build).
    pub generation_root: PathBuf,
    /// `$AGENTPACK_HOME/projects/<hash>/plugin-data`: `${CLAUDE_PLUGIN_DATA}` becomes `<this>/<module>`.
    pub plugin_data_root: PathBuf,
}

/// Everything one generation is a function of.
#[derive(Debug, Clone, PartialEq)]
pub struct StageInputs {
    pub packages: Vec<PackageInput>,
    pub overlay: Option<OverlayInput>,
    /// The manifest's `[mcp.servers]`, in manifest order.
    pub mcp_servers: IndexMap<String, McpServer>,
    /// What runs instead of a server's written command (lock pins), by server name.
    pub mcp_launch: BTreeMap<String, McpLaunch>,
    /// The active mode (for `mcp:` selectors; package filters are in each [`PackageInput`]).
    pub mode: ModeFilter,
    pub options: RenderOptions,
    /// The packages' listings, read once for every use of these inputs (and of their clones).
    pub listings: input::tree::PackageListings,
}

pub(crate) fn path_text(path: &Path) -> String {
    path.to_string_lossy().trim_end_matches('/').to_string()
}

/// The directory name of a package's staged copy: the first 16 hex digits of its cache_key.
pub fn plugin_root_dir(cache_key: &str) -> String {
    format!(
        "plugin-roots/{}",
        cache_key.chars().take(16).collect::<String>()
    )
}

/// Whether `skill` is shadowed by the full plugin `plugin` (same owner/repo/commit, and the
/// skill's path is the plugin's path or below it; an empty plugin path shadows every skill).
pub fn shadows(plugin: &PackageInput, skill: &PackageInput) -> bool {
    plugin.kind != "skill"
        && skill.kind == "skill"
        && plugin.owner.eq_ignore_ascii_case(&skill.owner)
        && plugin.repo.eq_ignore_ascii_case(&skill.repo)
        && plugin.commit.eq_ignore_ascii_case(&skill.commit)
        && (plugin.path.is_empty()
            || skill.path == plugin.path
            || skill.path.starts_with(&format!("{}/", plugin.path)))
}

/// Pretty JSON with a trailing newline.
pub(crate) fn json_bytes(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// Pretty JSON text with a trailing newline.
pub(crate) fn json_string(value: &Value) -> String {
    String::from_utf8_lossy(&json_bytes(value)).into_owned()
}

/// Reads the inputs and renders every agent in `agents`: [`input::load`] then [`render::render`].
pub fn render_generation(
    inputs: &StageInputs,
    agents: &[Agent],
) -> Result<GenerationPlan, HarnessError> {
    let loaded = input::load(inputs)?;
    let sources = input::SourceReads::default();
    Ok(render::render(&loaded, inputs, agents, &|path| {
        sources.read(path)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(kind: &str, path: &str, commit: &str) -> PackageInput {
        PackageInput {
            module: format!("github.com/acme/repo/{path}"),
            cache_key: String::new(),
            owner: "Acme".into(),
            repo: "repo".into(),
            path: path.into(),
            commit: commit.into(),
            kind: kind.into(),
            root: PathBuf::new(),
            filter: PathFilter::all(),
            executables: BTreeSet::new(),
        }
    }

    #[test]
    fn a_plugin_shadows_the_skills_inside_it() {
        let c = "a".repeat(40);
        let plugin = input("plugin", "plugins/p", &c);
        assert!(shadows(&plugin, &input("skill", "plugins/p", &c)));
        assert!(shadows(&plugin, &input("skill", "plugins/p/skills/x", &c)));
        assert!(!shadows(
            &plugin,
            &input("skill", "plugins/pp/skills/x", &c)
        ));
        assert!(!shadows(
            &plugin,
            &input("skill", "plugins/p/skills/x", &"b".repeat(40))
        ));
        assert!(!shadows(&plugin, &input("plugin", "plugins/p/sub", &c)));
        let mut lower = input("skill", "anything", &c);
        lower.owner = "acme".into();
        assert!(shadows(&input("plugin", "", &c), &lower));
    }
}
