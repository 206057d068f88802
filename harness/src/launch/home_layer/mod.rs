//! Home layers: the writable, per-user directories a launched agent runs in, prepared from a
//! generation (read-only, in the store) and the user's own configuration.
//!
//! A layer lives outside the store, per project, mode and generation, so an agent keeps the layer of
//! the generation it was launched with while later syncs switch the pointer:
//!
//! ```text
//! $AGENTPACK_HOME/projects/<hash>/homes/<mode>/<gen>/opencode/     OPENCODE_CONFIG_DIR
//! $AGENTPACK_HOME/projects/<hash>/homes/<mode>/<gen>/cursor-home/  Cursor's synthetic HOME
//! $AGENTPACK_HOME/projects/<hash>/grok-homes/<mode>/<gen>/          GROK_HOME
//! <short root>/ap-c/<hash>/<mode>/g-<gen>/                          CODEX_HOME (socket length limit)
//! $AGENTPACK_HOME/projects/<hash>/codex-config/<mode>/g-<gen>/      its config.toml (linked from it)
//! ```
//!
//! Pack content is hard-linked (else copied) or symlinked from the generation; the user's config is
//! seeded (merged with the pure functions of [`merge`], or linked); secret-bearing config is
//! written only here, 0600. Preparing is idempotent and takes milliseconds. A layer that mirrors the
//! generation file by file (Codex, OpenCode) is stamped with the generation it mirrors and is not
//! re-mirrored while the stamp matches (see [`fsops::mirror_stamped`]).
//!
//! This module writes only inside the layer, into the two documented workspace links (tracked by
//! [`workspace_links`]), and the documented native paths: Codex's `sessions/`, `archived_sessions/`
//! and `history.jsonl`, Grok's `sessions/`, and the Cursor profile directories under
//! `$XDG_CONFIG_HOME`. It never writes anything else of the user's real `~/.claude`, `~/.cursor`,
//! `~/.codex`, `~/.config/opencode`, `~/.grok` or `~/.gemini`. It never prints.

pub(crate) mod codex;
pub mod codex_daemon;
pub mod codex_keychain;
mod codex_state;
pub(crate) mod cursor;
pub(crate) mod fsops;
pub(crate) mod grok;
pub mod merge;
pub(crate) mod opencode;
mod prune;
pub mod workspace_links;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::agent::Agent;
use crate::plan::SecretLayer;

pub use codex::{
    codex_home_dir, ensure_codex_history, private_config_dir, CODEX_SOCKET_SUFFIX, MAX_SOCKET_PATH,
    PRIVATE_CONFIG_DIR,
};
pub use codex_keychain::SecurityCli;
pub use grok::save_grok_credentials;
pub use opencode::LSP_TOOL_VAR as OPENCODE_LSP_TOOL_VAR;
pub use prune::{layer_dirs, prune_layers, prune_orphan_codex_homes, DaemonPolicy, PruneReport};
pub use workspace_links::{WorkspaceLink, WorkspaceLinks};

/// Where `agentpack agy` links the generation's workspace plugin, relative to `./.agents/`. As a
/// link it is agentpack's own, not project content: the overlay, its hash and the launch
/// fingerprint leave it out (a real directory there, as eject writes, is content).
pub const AGY_OVERLAY_LINK: &str = "plugins/agentpack-bundle";

/// Failures preparing a home layer.
#[derive(Debug, thiserror::Error)]
pub enum HomeLayerError {
    #[error("cannot {action} {path}: {cause}")]
    Io {
        action: &'static str,
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error(transparent)]
    Merge(#[from] merge::HomeError),
    #[error("{path} is not a directory of agentpack's staging (no {what}); run `agentpack sync`")]
    MissingTree { path: PathBuf, what: String },
    /// Something the agent left in its layer could not be kept (the message says what).
    #[error("{0}")]
    NotKept(String),
}

/// The user's real environment, as the launcher read it (libraries do not read the environment).
#[derive(Debug, Clone, Default)]
pub struct UserEnv {
    /// `$HOME`.
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME` when set.
    pub xdg_config_home: Option<PathBuf>,
    /// The variables a layer may bridge or must not override (`CARGO_HOME`, `CURSOR_DATA_DIR`...),
    /// as they are set.
    pub vars: BTreeMap<String, OsString>,
}

impl UserEnv {
    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub fn config_home(&self) -> PathBuf {
        self.xdg_config_home
            .clone()
            .unwrap_or_else(|| self.home.join(".config"))
    }

    fn is_set(&self, name: &str) -> bool {
        self.vars.get(name).is_some_and(|v| !v.is_empty())
    }
}

/// Everything one layer is prepared from.
#[derive(Debug, Clone)]
pub struct HomeLayerRequest<'a> {
    pub agent: Agent,
    /// The resolved generation store path, used for the whole launch.
    pub generation: &'a Path,
    pub project_root: &'a Path,
    pub project_hash: &'a str,
    pub mode_dir: &'a str,
    pub agentpack_home: &'a Path,
    /// `AGENTPACK_STAGING_ROOT` when the user set it (Codex homes go under it when it is short).
    pub staging_root_override: Option<&'a Path>,
    /// `$AGENTPACK_HOME/projects/<hash>`.
    pub state_dir: &'a Path,
    pub user: &'a UserEnv,
    pub secrets: &'a SecretLayer,
    pub keep_attribution: bool,
    pub yolo: bool,
    /// Cursor's `--workspace` (default: where agentpack was invoked), Antigravity's working directory.
    pub workspace: &'a Path,
    /// The OS keychain Codex may keep its login in (`security` on macOS); `None` where there is
    /// none. Read only when `~/.codex/auth.json` does not exist.
    pub keychain: Option<&'a SecurityCli>,
}

impl HomeLayerRequest<'_> {
    /// A short id of the generation: the first 8 characters of its store path name.
    pub fn generation_id(&self) -> String {
        generation_id(self.generation)
    }

    /// The generation's `relative` directory (the tree a layer is made from), or
    /// [`HomeLayerError::MissingTree`] when the generation has none.
    fn staged_tree(&self, relative: &str) -> Result<PathBuf, HomeLayerError> {
        let tree = self.generation.join(relative);
        if tree.is_dir() {
            Ok(tree)
        } else {
            Err(HomeLayerError::MissingTree {
                path: self.generation.to_path_buf(),
                what: format!("{relative}/"),
            })
        }
    }

    fn layer_dir(&self) -> PathBuf {
        self.state_dir
            .join("homes")
            .join(self.mode_dir)
            .join(self.generation_id())
    }
}

/// The first 8 characters of a generation's directory name (its hash prefix).
pub fn generation_id(generation: &Path) -> String {
    generation
        .file_name()
        .map(|n| n.to_string_lossy().chars().take(8).collect())
        .unwrap_or_else(|| "current".to_string())
}

/// What preparing produced. Two are equal when they pass the same on to the agent (root,
/// environment, links, warnings); whether the mirror was reused is how, not what.
#[derive(Debug, Clone, Default)]
pub struct PreparedHome {
    /// The agent's home or config root in the layer (none for Claude Code and Antigravity).
    pub root: Option<PathBuf>,
    /// Variables to set in the agent's environment (the layer's paths, bridged variables, secrets).
    pub env: BTreeMap<String, OsString>,
    /// Workspace links made for this launch.
    pub workspace_links: Vec<WorkspaceLink>,
    pub warnings: Vec<String>,
    /// The layer already mirrored this generation's pack content (its stamp said so), so nothing
    /// was re-mirrored (Codex and OpenCode, whose layers mirror the generation file by file).
    pub mirror_reused: bool,
}

impl PartialEq for PreparedHome {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root
            && self.env == other.env
            && self.workspace_links == other.workspace_links
            && self.warnings == other.warnings
    }
}

/// Prepares the layer of `request.agent` and returns what the launcher passes on. The workspace
/// links of the other agents are removed first (see [`WorkspaceLinks::remove_all_except`]).
pub fn prepare(request: &HomeLayerRequest<'_>) -> Result<PreparedHome, HomeLayerError> {
    let mut prepared = PreparedHome::default();
    let mut links = WorkspaceLinks::load(request.state_dir)?;
    prepared
        .warnings
        .extend(links.remove_all_except(Some(request.agent))?);
    for (name, value) in &request.secrets.env {
        prepared.env.insert(name.clone(), value.into());
    }
    let profile = request.agent.profile();
    if let Some(prepare) = profile.home_layer.prepare {
        prepare(request, &mut prepared)?;
    }
    // The row's variable points the agent at the root its layer made.
    if let (Some(var), Some(root)) = (profile.home_layer.env_var, &prepared.root) {
        prepared
            .env
            .insert(var.into(), root.clone().into_os_string());
    }
    if let Some(spec) = &profile.workspace_link {
        let target = request.generation.join(spec.generation_dir);
        let link = request.workspace.join(spec.workspace_path);
        if target.is_dir() {
            place_workspace_link(&mut links, request.agent, &link, &target, &mut prepared)?;
        } else if spec.removed_when_empty {
            let warnings = links.remove_agent_link(request.agent, &link)?;
            prepared.warnings.extend(warnings);
        }
    }
    links.save()?;
    Ok(prepared)
}

fn place_workspace_link(
    links: &mut WorkspaceLinks,
    agent: Agent,
    link: &Path,
    target: &Path,
    prepared: &mut PreparedHome,
) -> Result<(), HomeLayerError> {
    match links.place(agent, link, target)? {
        Some(placed) => prepared.workspace_links.push(placed),
        None => prepared.warnings.push(format!(
            "{} exists and is not a link agentpack made; left it alone ({} will not see the pack's {})",
            link.display(),
            agent.display_name(),
            agent
                .profile()
                .workspace_link
                .as_ref()
                .map_or("files", |spec| spec.holds)
        )),
    }
    Ok(())
}

/// Copies what an agent changed in its layer back to where it is shared, after the agent exited
/// (Grok's credentials, the decisions Codex recorded in its `config.toml`). Nothing to do for the
/// other agents.
pub fn after_exit(
    request: &HomeLayerRequest<'_>,
    prepared: &PreparedHome,
) -> Result<(), HomeLayerError> {
    match (
        request.agent.profile().home_layer.after_exit,
        &prepared.root,
    ) {
        (Some(after_exit), Some(root)) => after_exit(request, root),
        (Some(_) | None, None) | (None, Some(_)) => Ok(()),
    }
}
