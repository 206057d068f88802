//! `agentpack eject`: the pure plan of what eject writes into a project, its manifest, and the JSON
//! and TOML merges that register ejected content in files the user also edits (TOML edits are
//! format-preserving, through `toml_edit`).
//!
//! Eject copies a generation's per-agent trees to `.agentpack/eject/` (mirroring the generation's
//! layout, so every path a rendered file names is rewritten by replacing one prefix) and registers
//! the copy where each editor reads project configuration:
//!
//! ```text
//! Claude Code   .claude/skills/<name>/ .claude/commands/ .claude/agents/
//!               .mcp.json mcpServers.<name>; .claude/settings.json hooks.<Event>[] and the
//!               bundle's agentpack-settings.json keys
//! Cursor        .cursor/rules/ .cursor/commands/ .cursor/agents/ .cursor/skills/<name>/
//!               .cursor/mcp.json mcpServers.<name>; .cursor/hooks.json version, hooks.<event>[]
//! Codex         .agents/skills/<name>/ .codex/agents/<name>.toml; .codex/config.toml
//!               [mcp_servers.<name>] (format-preserving); .codex/hooks.json hooks.<Event>[]
//! Antigravity   .agents/plugins/agentpack-bundle/ (a real directory)
//! ```
//!
//! This module never touches the filesystem: the caller reads the generation into [`SourceFile`]s,
//! checks the plan against the project and its previous [`EjectManifest`], and writes. It must never
//! decide to replace something the manifest does not record; [`check_conflicts`] is the one place that
//! rule lives.
//!
//! Submodules: [`register`] (per agent, where the copy is registered; each agent's function is
//! its row's [`crate::agent::Eject::register`]), `conflicts` (what eject will not replace), `edits`
//! (JSON and format-preserving TOML edits and their undo).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::agent::Agent;
use crate::plan::SecretLayer;

mod conflicts;
mod edits;
pub(crate) mod register;
#[cfg(test)]
mod tests;

pub use conflicts::{check_conflicts, Conflict, ProjectState};
pub use edits::{
    apply_edit, is_toml, merge_toml, prune_empty, remove_edit, render_json, toml_to_json,
    unmerge_toml, UnmergedToml,
};
pub use register::codex_secret_warnings;

/// The ejected copy, relative to the project root.
pub const EJECT_DIR: &str = ".agentpack/eject";
/// The manifest of everything eject wrote, relative to the project root.
pub const MANIFEST_PATH: &str = ".agentpack/eject/manifest.json";
/// Codex's project configuration, where eject merges `[mcp_servers.<name>]`.
pub const CODEX_PROJECT_CONFIG: &str = ".codex/config.toml";
/// Codex's project hooks, where eject merges `hooks.<Event>[]`.
pub const CODEX_PROJECT_HOOKS: &str = ".codex/hooks.json";
/// The manifest format version.
pub const MANIFEST_VERSION: u32 = 1;

/// The agents eject serves, in the order it writes them: those whose
/// [`crate::agent::AgentProfile::eject`] is set, in [`Agent::ALL`] order.
pub fn supported() -> Vec<Agent> {
    Agent::ALL
        .into_iter()
        .filter(|agent| agent.profile().eject.is_some())
        .collect()
}

/// Why eject refuses an agent, or `None` when it serves it.
pub fn refusal(agent: Agent) -> Option<String> {
    agent.profile().eject.is_none().then(|| {
        format!(
            "{} runs in a terminal; use its launcher, `agentpack {}`, instead of eject",
            agent.display_name(),
            agent.profile().launcher.subcommand
        )
    })
}

/// The agents among `agents` whose secret-bearing MCP values eject must have rendered in memory
/// (their row's [`crate::agent::Eject::secret_warnings`] is set), in the order given: the stage
/// step returns a [`SecretLayer`] for each, for [`secret_warnings`].
pub fn secrets_agents(agents: &[Agent]) -> Vec<Agent> {
    rendering_secrets(agents, |agent| secret_warnings_of(agent).is_some())
}

/// Those of `agents` whose row `renders` secrets for eject, in order (every one, not the first).
fn rendering_secrets(agents: &[Agent], renders: impl Fn(Agent) -> bool) -> Vec<Agent> {
    agents
        .iter()
        .copied()
        .filter(|agent| renders(*agent))
        .collect()
}

/// The agent row's [`crate::agent::Eject::secret_warnings`], if it ejects and has one.
fn secret_warnings_of(agent: Agent) -> Option<crate::agent::EjectSecretWarningsFn> {
    agent.profile().eject.as_ref()?.secret_warnings
}

/// What the ejected copies of `agents` lack because their agent keeps secret values out of the
/// generation, from the layers the stage step rendered (`secrets`, by agent). Never includes a
/// value.
pub fn secret_warnings(agents: &[Agent], secrets: &BTreeMap<Agent, SecretLayer>) -> Vec<String> {
    let mut warnings = Vec::new();
    for agent in agents {
        if let (Some(warn), Some(layer)) = (secret_warnings_of(*agent), secrets.get(agent)) {
            warnings.extend(warn(layer));
        }
    }
    warnings
}

/// Parses an agent name as eject accepts it (`antigravity` is accepted for `agy`,
/// `cursor-agent`/`agent` for `cursor`).
pub fn parse_agent(name: &str) -> Option<Agent> {
    Agent::parse(name)
}

/// The agent's tree inside a generation (and inside the ejected copy).
pub fn staged_root(agent: Agent) -> &'static str {
    agent.profile().staged_root
}

/// One regular file of the generation, as the caller read it (links followed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Relative to the generation root, `/`-separated.
    pub relative: String,
    pub bytes: Vec<u8>,
    pub executable: bool,
}

/// A file eject writes, relative to the project root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    pub path: String,
    pub bytes: Vec<u8>,
    pub executable: bool,
}

/// How a JSON edit registers a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EditKind {
    /// The object at `path[..len-1]` gets the key `path[len-1]` with the value.
    Key,
    /// The array at `path` gets the value appended (once).
    Entry,
}

/// One key or array entry eject adds to a JSON file of the project (or, for a `.toml` file, one
/// key of a TOML document, held here as its JSON equivalent; TOML files only get [`EditKind::Key`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonEdit {
    /// The file, relative to the project root.
    pub file: String,
    /// Object keys from the document root.
    pub path: Vec<String>,
    pub kind: EditKind,
    pub value: Value,
}

impl JsonEdit {
    /// `file#/a/b` for messages.
    pub fn describe(&self) -> String {
        format!("{}#/{}", self.file, self.path.join("/"))
    }

    fn same_place(&self, other: &JsonEdit) -> bool {
        self.file == other.file && self.path == other.path && self.kind == other.kind
    }
}

/// Everything one eject writes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EjectPlan {
    pub agents: Vec<Agent>,
    pub files: Vec<PlannedFile>,
    /// Directories that must be eject's own as a whole (a skill, the Antigravity plugin): an
    /// existing one that the manifest does not record is a conflict even when no file collides.
    pub owned_dirs: Vec<String>,
    pub edits: Vec<JsonEdit>,
    pub warnings: Vec<String>,
    /// Information for the user that is not a problem (how an agent picks the content up).
    pub notes: Vec<String>,
    /// Why eject must write nothing: an MCP server's `url` or argument holds a credential, which a
    /// launcher gives at launch and eject would have to write into files people commit. Each names
    /// the server and the field and says how to pass the value instead; none holds a value.
    pub refusals: Vec<String>,
}

/// A recorded file and the digest of the bytes eject wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    pub path: String,
    pub sha256: String,
}

/// A JSON file eject merged into, and how to put it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestJsonFile {
    pub file: String,
    /// The text before the first eject touched it; `None` when eject created the file.
    pub original: Option<String>,
    /// The digest of the text eject last wrote: when the file still has it, `--remove` restores
    /// `original` byte for byte; otherwise it removes the recorded keys one by one.
    pub written_sha256: String,
}

/// `.agentpack/eject/manifest.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EjectManifest {
    pub version: u32,
    pub agents: Vec<String>,
    /// The generation the copy was taken from.
    pub generation: String,
    pub files: Vec<ManifestFile>,
    /// Directories eject created (the rest of each path existed before).
    pub dirs: Vec<String>,
    pub edits: Vec<JsonEdit>,
    pub json_files: Vec<ManifestJsonFile>,
}

impl EjectManifest {
    pub fn has_file(&self, path: &str) -> bool {
        self.files.iter().any(|f| f.path == path)
    }

    pub fn has_dir(&self, path: &str) -> bool {
        self.dirs.iter().any(|d| d == path)
    }

    /// The recorded edit at the same place as `edit`, if eject wrote one.
    pub fn edit_at(&self, edit: &JsonEdit) -> Option<&JsonEdit> {
        self.edits.iter().find(|recorded| recorded.same_place(edit))
    }

    pub fn json_file(&self, file: &str) -> Option<&ManifestJsonFile> {
        self.json_files.iter().find(|f| f.file == file)
    }
}

/// The hex SHA-256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Replaces every occurrence of the generation's path (and of the mode pointer's) with the ejected
/// copy's, in text files; binary files are returned unchanged.
pub fn rewrite_paths(bytes: &[u8], from: &[&str], to: &str) -> Vec<u8> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return bytes.to_vec();
    };
    let mut text = text.to_owned();
    for prefix in from.iter().filter(|p| !p.is_empty()) {
        text = text.replace(prefix, to);
    }
    text.into_bytes()
}

/// Builds the plan for `agents` from the generation's files.
///
/// `generation_paths` are the texts that name the generation in rendered files (its store path and
/// the mode pointer); `eject_root` is the absolute path of `<project>/.agentpack/eject`.
pub fn plan(
    agents: &[Agent],
    files: &[SourceFile],
    generation_paths: &[&str],
    eject_root: &str,
) -> EjectPlan {
    let mut plan = EjectPlan {
        agents: agents.to_vec(),
        ..EjectPlan::default()
    };
    let rewritten: Vec<SourceFile> = files
        .iter()
        .map(|file| SourceFile {
            relative: file.relative.clone(),
            bytes: rewrite_paths(&file.bytes, generation_paths, eject_root),
            executable: file.executable,
        })
        .collect();
    let mut copied = BTreeSet::new();
    for agent in agents {
        let roots = [
            format!("{}/", staged_root(*agent)),
            format!("hook-specs/{}/", agent.as_str()),
            "plugin-roots/".to_owned(),
        ];
        for file in &rewritten {
            if roots.iter().any(|root| file.relative.starts_with(root))
                && copied.insert(file.relative.clone())
            {
                plan.files.push(PlannedFile {
                    path: format!("{EJECT_DIR}/{}", file.relative),
                    bytes: file.bytes.clone(),
                    executable: file.executable,
                });
            }
        }
        if let Some(eject) = &agent.profile().eject {
            for dir in eject.dirs {
                let staged = format!("{}/{}", staged_root(*agent), dir.staged);
                copy_dir(&rewritten, &staged, dir.project, dir.units, &mut plan);
            }
            (eject.register)(&rewritten, eject_root, &mut plan);
        }
    }
    let mut seen = BTreeSet::new();
    plan.files.retain(|file| seen.insert(file.path.clone()));
    plan
}

/// Files below `<prefix>/` of the generation, with their path below it.
fn under<'a>(files: &'a [SourceFile], prefix: &str) -> Vec<(String, &'a SourceFile)> {
    let prefix = format!("{prefix}/");
    files
        .iter()
        .filter_map(|file| {
            file.relative
                .strip_prefix(&prefix)
                .map(|rest| (rest.to_owned(), file))
        })
        .collect()
}

fn find<'a>(files: &'a [SourceFile], relative: &str) -> Option<&'a SourceFile> {
    files.iter().find(|file| file.relative == relative)
}

/// Copies `<from>/**` to `<to>/**`; with `units`, each first-level directory is an owned unit.
fn copy_dir(files: &[SourceFile], from: &str, to: &str, units: bool, plan: &mut EjectPlan) {
    for (rest, file) in under(files, from) {
        if units {
            if let Some((unit, _)) = rest.split_once('/') {
                let dir = format!("{to}/{unit}");
                if !plan.owned_dirs.contains(&dir) {
                    plan.owned_dirs.push(dir);
                }
            }
        }
        plan.files.push(PlannedFile {
            path: format!("{to}/{rest}"),
            bytes: file.bytes.clone(),
            executable: file.executable,
        });
    }
}

fn parse_json(file: &SourceFile, plan: &mut EjectPlan) -> Option<Value> {
    match serde_json::from_slice(&file.bytes) {
        Ok(value) => Some(value),
        Err(error) => {
            plan.warnings.push(format!(
                "{} in the generation does not parse ({error}); it is not registered",
                file.relative
            ));
            None
        }
    }
}
