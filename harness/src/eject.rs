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

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::plan::Agent;

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

/// The agents eject serves, in the order it writes them.
pub const SUPPORTED: [Agent; 4] = [
    Agent::Claude,
    Agent::Cursor,
    Agent::Codex,
    Agent::Antigravity,
];

/// Why eject refuses an agent, or `None` when it serves it.
pub fn refusal(agent: Agent) -> Option<String> {
    match agent {
        Agent::OpenCode | Agent::Grok => Some(format!(
            "{} runs in a terminal; use its launcher, `agentpack {}`, instead of eject",
            agent.display_name(),
            agent.as_str()
        )),
        _ => None,
    }
}

/// Parses an agent name as eject accepts it (`antigravity` is accepted for `agy`,
/// `cursor-agent`/`agent` for `cursor`).
pub fn parse_agent(name: &str) -> Option<Agent> {
    match name {
        "antigravity" => Some(Agent::Antigravity),
        "agent" | "cursor-agent" => Some(Agent::Cursor),
        other => Agent::from_name(other),
    }
}

/// The agent's tree inside a generation (and inside the ejected copy).
pub fn staged_root(agent: Agent) -> &'static str {
    match agent {
        Agent::Claude => "plugins/agentpack-bundle",
        Agent::Cursor => "cursor",
        Agent::OpenCode => "opencode",
        Agent::Codex => "codex-home",
        Agent::Grok => "grok",
        Agent::Antigravity => "agy/agentpack-bundle",
    }
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
        register(*agent, &rewritten, eject_root, &mut plan);
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

/// `mcpServers.<name>` of a staged MCP file as keys of `target`.
fn merge_servers(files: &[SourceFile], source: &str, target: &str, plan: &mut EjectPlan) {
    let Some(file) = find(files, source) else {
        return;
    };
    let Some(value) = parse_json(file, plan) else {
        return;
    };
    if let Some(servers) = value.get("mcpServers").and_then(Value::as_object) {
        for (name, server) in servers {
            refuse_credentials(name, server, plan);
            warn_secret_references(name, server, plan);
            plan.edits.push(JsonEdit {
                file: target.to_owned(),
                path: vec!["mcpServers".into(), name.clone()],
                kind: EditKind::Key,
                value: server.clone(),
            });
        }
    }
}

/// Whether `staged` is exactly the reference to `var`, in any agent's syntax (`${VAR}`,
/// `${env:VAR}`, `{env:VAR}`).
fn is_reference_to(staged: &str, var: &str) -> bool {
    let inner = staged
        .strip_prefix("${env:")
        .or_else(|| staged.strip_prefix("${"))
        .or_else(|| staged.strip_prefix("{env:"))
        .and_then(|rest| rest.strip_suffix('}'));
    inner == Some(var)
}

/// Refuses a staged server whose `url` or an argument is given at launch because it holds a
/// credential (rendering staged it as `AGENTPACK_MCP_<SERVER>_URL` / `_ARG_<i>`).
fn refuse_credentials(name: &str, server: &Value, plan: &mut EjectPlan) {
    use crate::mcp::{arg_secret, secret_var, URL_SECRET};
    let url_var = secret_var(name, URL_SECRET);
    let url = ["url", "serverUrl"]
        .iter()
        .filter_map(|key| server.get(*key).and_then(Value::as_str))
        .any(|url| is_reference_to(url, &url_var));
    if url {
        push_refusal(plan, format!(
            "MCP server `{name}`: its `url` carries credentials (user:password@ before the host), which eject would write into files people commit\n  fix  write references in its definition instead, e.g. url = \"https://${{MCP_USER}}:${{MCP_PASSWORD}}@host/path\", and set those variables where your editor starts (a launcher such as `agentpack claude` gives the value at launch without eject)"
        ));
    }
    let args: Vec<&str> = server
        .get("args")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (index, arg) in args.iter().enumerate() {
        if is_reference_to(arg, &secret_var(name, &arg_secret(index))) {
            let flag = index
                .checked_sub(1)
                .and_then(|i| args.get(i))
                .filter(|flag| crate::credentials::is_credential_flag(flag) && !flag.contains('='))
                .map(|flag| format!(" (the value of {flag})"))
                .unwrap_or_default();
            push_refusal(plan, format!(
                "MCP server `{name}`: `args[{index}]`{flag} holds a credential, which eject would write into files people commit\n  fix  write a reference in its definition instead (e.g. \"${{API_KEY}}\" or \"--api-key=${{API_KEY}}\") and set that variable where your editor starts (a launcher such as `agentpack claude` gives the value at launch without eject)"
            ));
        }
    }
}

fn push_refusal(plan: &mut EjectPlan, refusal: String) {
    if !plan.refusals.contains(&refusal) {
        plan.refusals.push(refusal);
    }
}

/// Secret-bearing values are staged as `${AGENTPACK_...}` references that a launcher fills in;
/// an editor started without the launcher must have them in its environment.
fn warn_secret_references(name: &str, server: &Value, plan: &mut EjectPlan) {
    let text = server.to_string();
    let mut names = BTreeSet::new();
    for piece in text.split("${").skip(1) {
        let var = piece.trim_start_matches("env:");
        if let Some(end) = var.find('}') {
            if var[..end].starts_with("AGENTPACK_") {
                names.insert(var[..end].to_owned());
            }
        }
    }
    if !names.is_empty() {
        plan.warnings.push(format!(
            "MCP server `{name}` reads {} from the environment; eject writes no secret values, so set them where your editor starts",
            names.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
}

/// `[mcp_servers.<name>]` of the staged Codex `config.toml` as keys of the project's
/// `.codex/config.toml`, and the note that Codex reads that file only in a trusted project.
fn merge_toml_servers(file: &SourceFile, eject_root: &str, plan: &mut EjectPlan) {
    let parsed = std::str::from_utf8(&file.bytes)
        .map_err(|error| error.to_string())
        .and_then(toml_to_json);
    let value = match parsed {
        Ok(value) => value,
        Err(error) => {
            plan.warnings.push(format!(
                "{} in the generation does not parse ({error}); its MCP servers are not registered",
                file.relative
            ));
            return;
        }
    };
    let Some(servers) = value.get("mcp_servers").and_then(Value::as_object) else {
        return;
    };
    for (name, server) in servers {
        refuse_credentials(name, server, plan);
        warn_secret_references(name, server, plan);
        plan.edits.push(JsonEdit {
            file: CODEX_PROJECT_CONFIG.to_owned(),
            path: vec!["mcp_servers".into(), name.clone()],
            kind: EditKind::Key,
            value: server.clone(),
        });
    }
    if !servers.is_empty() {
        let project = eject_root
            .strip_suffix(EJECT_DIR)
            .map(|p| p.trim_end_matches('/'))
            .filter(|p| !p.is_empty())
            .unwrap_or("<project>");
        plan.notes.push(format!(
            "codex: MCP servers are in {CODEX_PROJECT_CONFIG}, which Codex reads once the project is trusted (`[projects.\"{project}\"] trust_level = \"trusted\"` in $CODEX_HOME/config.toml); eject does not change your Codex configuration"
        ));
    }
}

/// Codex's secret-bearing server values are not in the generation at all (the launcher merges
/// them into its home layer's `config.toml`): one warning per server of the launcher's secret
/// fragment (`[mcp_servers.<name>.env]`, `[mcp_servers.<name>.http_headers]`) naming what the
/// ejected server lacks. Never includes a value.
pub fn codex_secret_warnings(secret_config: &toml::Table) -> Vec<String> {
    let Some(servers) = secret_config
        .get("mcp_servers")
        .and_then(toml::Value::as_table)
    else {
        return Vec::new();
    };
    let mut warnings = Vec::new();
    for (name, server) in servers {
        let mut names = Vec::new();
        for (section, label) in [("env", "env"), ("http_headers", "header")] {
            if let Some(values) = server.get(section).and_then(toml::Value::as_table) {
                names.extend(values.keys().map(|key| format!("{label} {key}")));
            }
        }
        if !names.is_empty() {
            warnings.push(format!(
                "MCP server `{name}` (codex): eject writes no secret values, so {CODEX_PROJECT_CONFIG} lacks {}; give them to Codex yourself (its `env_vars` and `env_http_headers` read them from the environment Codex starts in)",
                names.join(", ")
            ));
        }
    }
    warnings
}

/// Each event's entries of `{"hooks": {event: [...]}}` as array entries of `target`.
fn merge_hooks(value: &Value, target: &str, plan: &mut EjectPlan) {
    if let Some(events) = value.get("hooks").and_then(Value::as_object) {
        for (event, entries) in events {
            for entry in entries.as_array().into_iter().flatten() {
                plan.edits.push(JsonEdit {
                    file: target.to_owned(),
                    path: vec!["hooks".into(), event.clone()],
                    kind: EditKind::Entry,
                    value: entry.clone(),
                });
            }
        }
    }
}

/// Points Codex hook commands that name their spec relative to `CODEX_HOME` (which an editor's
/// Codex sets to the user's own home) at the ejected copy instead.
fn anchor_codex_specs(value: &mut Value, eject_root: &str) {
    let marker = format!("--spec {}", crate::hooks::CODEX_HOME_SPEC);
    let Some(events) = value.get_mut("hooks").and_then(Value::as_object_mut) else {
        return;
    };
    for groups in events.values_mut() {
        for group in groups.as_array_mut().into_iter().flatten() {
            let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
                continue;
            };
            for handler in handlers {
                let Some(command) = handler.get("command").and_then(Value::as_str) else {
                    continue;
                };
                if let Some((program, relative)) = command.split_once(&marker) {
                    let spec = format!("{eject_root}/{}/{relative}", staged_root(Agent::Codex));
                    handler["command"] = Value::String(format!(
                        "{program}--spec {}",
                        crate::hooks::shell_quote(&spec)
                    ));
                }
            }
        }
    }
}

fn register(agent: Agent, files: &[SourceFile], eject_root: &str, plan: &mut EjectPlan) {
    match agent {
        Agent::Claude => {
            let bundle = staged_root(agent);
            copy_dir(
                files,
                &format!("{bundle}/skills"),
                ".claude/skills",
                true,
                plan,
            );
            copy_dir(
                files,
                &format!("{bundle}/commands"),
                ".claude/commands",
                false,
                plan,
            );
            copy_dir(
                files,
                &format!("{bundle}/agents"),
                ".claude/agents",
                false,
                plan,
            );
            merge_servers(files, &format!("{bundle}/.mcp.json"), ".mcp.json", plan);
            if let Some(file) = find(files, &format!("{bundle}/hooks/hooks.json")) {
                if let Some(value) = parse_json(file, plan) {
                    merge_hooks(&value, ".claude/settings.json", plan);
                }
            }
            if let Some(file) = find(files, &format!("{bundle}/agentpack-settings.json")) {
                if let Some(Value::Object(settings)) = parse_json(file, plan) {
                    for (key, value) in settings {
                        match value {
                            Value::Array(items) => {
                                for item in items {
                                    plan.edits.push(JsonEdit {
                                        file: ".claude/settings.json".into(),
                                        path: vec![key.clone()],
                                        kind: EditKind::Entry,
                                        value: item,
                                    });
                                }
                            }
                            value => plan.edits.push(JsonEdit {
                                file: ".claude/settings.json".into(),
                                path: vec![key],
                                kind: EditKind::Key,
                                value,
                            }),
                        }
                    }
                }
            }
            if find(files, &format!("{bundle}/.lsp.json")).is_some() {
                plan.warnings.push(
                    "claude: language servers are read from plugins only; .lsp.json stays in the ejected copy and is not registered".into(),
                );
            }
        }
        Agent::Cursor => {
            let bundle = "cursor/agentpack-bundle";
            copy_dir(
                files,
                &format!("{bundle}/rules"),
                ".cursor/rules",
                false,
                plan,
            );
            copy_dir(
                files,
                &format!("{bundle}/commands"),
                ".cursor/commands",
                false,
                plan,
            );
            copy_dir(
                files,
                &format!("{bundle}/agents"),
                ".cursor/agents",
                false,
                plan,
            );
            copy_dir(
                files,
                &format!("{bundle}/skills"),
                ".cursor/skills",
                true,
                plan,
            );
            merge_servers(
                files,
                &format!("{bundle}/mcp.json"),
                ".cursor/mcp.json",
                plan,
            );
            if let Some(file) = find(files, &format!("{bundle}/hooks/hooks.json")) {
                if let Some(value) = parse_json(file, plan) {
                    if let Some(version) = value.get("version") {
                        plan.edits.push(JsonEdit {
                            file: ".cursor/hooks.json".into(),
                            path: vec!["version".into()],
                            kind: EditKind::Key,
                            value: version.clone(),
                        });
                    }
                    merge_hooks(&value, ".cursor/hooks.json", plan);
                }
            }
        }
        Agent::Codex => {
            copy_dir(files, "codex-home/skills", ".agents/skills", true, plan);
            if let Some(file) = find(files, "codex-home/config.toml") {
                merge_toml_servers(file, eject_root, plan);
            }
            // Custom agents and hooks: Codex reads a trusted project's `.codex/agents/<name>.toml`
            // and `.codex/hooks.json` (Claude Code's hook format), like its MCP servers (checked
            // with Codex 0.171.0: `hooks/list` reports them with source `project`).
            copy_dir(files, "codex-home/agents", ".codex/agents", false, plan);
            if let Some(file) = find(files, "codex-home/hooks.json") {
                if let Some(mut value) = parse_json(file, plan) {
                    anchor_codex_specs(&mut value, eject_root);
                    merge_hooks(&value, CODEX_PROJECT_HOOKS, plan);
                    plan.warnings.push(format!(
                        "codex: hooks are in {CODEX_PROJECT_HOOKS}; Codex runs them once the project is trusted and you have reviewed and trusted each hook in Codex"
                    ));
                }
            }
        }
        Agent::Antigravity => {
            let target = ".agents/plugins/agentpack-bundle";
            let config = format!("{}/mcp_config.json", staged_root(agent));
            if let Some(value) = find(files, &config).and_then(|file| parse_json(file, plan)) {
                if let Some(servers) = value.get("mcpServers").and_then(Value::as_object) {
                    for (name, server) in servers {
                        refuse_credentials(name, server, plan);
                    }
                }
            }
            copy_dir(files, staged_root(agent), target, false, plan);
            plan.owned_dirs.push(target.to_owned());
        }
        Agent::OpenCode | Agent::Grok => {}
    }
}

/// Something eject will not replace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Project-relative path (with `#/key/path` for a JSON setting).
    pub what: String,
    pub reason: String,
}

/// What the caller found in the project at the plan's paths.
pub trait ProjectState {
    /// Whether anything (file, directory or link) exists at the project-relative path.
    fn exists(&self, path: &str) -> bool;
    /// Whether the path exists and is a real directory (not a link).
    fn is_real_dir(&self, path: &str) -> bool;
    /// A JSON file's parsed content: `Ok(None)` when absent, `Err` when it cannot be read or parsed.
    fn json(&self, path: &str) -> Result<Option<Value>, String>;
}

/// Every conflict between a plan and the project, given what eject wrote last time. Also drops
/// edits whose value is already in place and not eject's (they need no writing and must survive
/// `--remove`).
pub fn check_conflicts(
    plan: &mut EjectPlan,
    previous: &EjectManifest,
    project: &dyn ProjectState,
) -> Vec<Conflict> {
    let mut conflicts = Vec::new();
    let mut parents = BTreeSet::new();
    for file in &plan.files {
        if project.exists(&file.path) && !previous.has_file(&file.path) {
            conflicts.push(Conflict {
                what: file.path.clone(),
                reason: "exists and was not written by eject".into(),
            });
        }
        let mut parent = file.path.as_str();
        while let Some((dir, _)) = parent.rsplit_once('/') {
            parents.insert(dir.to_owned());
            parent = dir;
        }
    }
    for dir in parents {
        if project.exists(&dir) && !project.is_real_dir(&dir) && !previous.has_dir(&dir) {
            conflicts.push(Conflict {
                what: dir,
                reason: "is a file or a link where eject needs a directory".into(),
            });
        }
    }
    for dir in &plan.owned_dirs {
        if project.exists(dir) && !previous.has_dir(dir) {
            conflicts.push(Conflict {
                what: dir.clone(),
                reason: "exists and was not created by eject".into(),
            });
        }
    }
    let mut documents: BTreeMap<String, Option<Value>> = BTreeMap::new();
    for edit in &plan.edits {
        if !documents.contains_key(&edit.file) {
            match project.json(&edit.file) {
                Ok(document) => {
                    documents.insert(edit.file.clone(), document);
                }
                Err(reason) => {
                    conflicts.push(Conflict {
                        what: edit.file.clone(),
                        reason,
                    });
                    documents.insert(edit.file.clone(), None);
                }
            }
        }
    }
    let mut kept = Vec::new();
    for edit in std::mem::take(&mut plan.edits) {
        let document = documents.get(&edit.file).cloned().flatten();
        // What the user has there, with eject's own previous value taken out.
        let theirs = document.map(|mut document| {
            if let Some(recorded) = previous.edit_at(&edit) {
                remove_edit(&mut document, recorded);
            }
            document
        });
        let mut drop = false;
        match edit.kind {
            EditKind::Key => {
                if let Some(existing) = theirs.as_ref().and_then(|d| get(d, &edit.path)) {
                    if *existing == edit.value {
                        drop = true;
                    } else {
                        conflicts.push(Conflict {
                            what: edit.describe(),
                            reason: "is already set to a different value that eject did not write"
                                .into(),
                        });
                    }
                } else if let Some(parent) = theirs
                    .as_ref()
                    .and_then(|d| first_non_object(d, &edit.path[..edit.path.len() - 1]))
                {
                    conflicts.push(Conflict {
                        what: edit.describe(),
                        reason: format!("`{parent}` is not a JSON object"),
                    });
                }
            }
            EditKind::Entry => match theirs.as_ref().and_then(|d| get(d, &edit.path)) {
                Some(Value::Array(items)) => {
                    let recorded_here = previous
                        .edits
                        .iter()
                        .any(|r| r.same_place(&edit) && r.value == edit.value);
                    if items.contains(&edit.value) && !recorded_here {
                        drop = true;
                    }
                }
                Some(_) => conflicts.push(Conflict {
                    what: edit.describe(),
                    reason: "is not a JSON array".into(),
                }),
                None => {
                    if let Some(parent) = theirs
                        .as_ref()
                        .and_then(|d| first_non_object(d, &edit.path[..edit.path.len() - 1]))
                    {
                        conflicts.push(Conflict {
                            what: edit.describe(),
                            reason: format!("`{parent}` is not a JSON object"),
                        });
                    }
                }
            },
        }
        if !drop {
            kept.push(edit);
        }
    }
    plan.edits = kept;
    conflicts
}

fn get<'a>(document: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(document, |value, key| value.as_object()?.get(key))
}

/// The first prefix of `path` that exists and is not an object, if any.
fn first_non_object(document: &Value, path: &[String]) -> Option<String> {
    let mut value = document;
    if !value.is_object() {
        return Some("(the document)".into());
    }
    for (index, key) in path.iter().enumerate() {
        match value.as_object().and_then(|o| o.get(key)) {
            None => return None,
            Some(next) if next.is_object() => value = next,
            Some(_) => return Some(path[..=index].join("/")),
        }
    }
    None
}

/// Applies one edit to a document (an object); containers on the way are created.
pub fn apply_edit(document: &mut Value, edit: &JsonEdit) {
    let (parent_path, last) = match edit.kind {
        EditKind::Key => match edit.path.split_last() {
            Some((last, parent)) => (parent, Some(last)),
            None => return,
        },
        EditKind::Entry => (edit.path.as_slice(), None),
    };
    if !document.is_object() {
        *document = Value::Object(Map::new());
    }
    let mut value = document;
    for (index, key) in parent_path.iter().enumerate() {
        let Some(object) = value.as_object_mut() else {
            return;
        };
        let default = if last.is_none() && index + 1 == parent_path.len() {
            Value::Array(Vec::new())
        } else {
            Value::Object(Map::new())
        };
        value = object.entry(key.clone()).or_insert(default);
    }
    match last {
        Some(key) => {
            if let Some(object) = value.as_object_mut() {
                object.insert(key.clone(), edit.value.clone());
            }
        }
        None => {
            if let Some(items) = value.as_array_mut() {
                if !items.contains(&edit.value) {
                    items.push(edit.value.clone());
                }
            }
        }
    }
}

/// Takes one edit out of a document: the key when it still holds eject's value, or the first
/// equal array entry. Returns false when the value was not found (changed by the user).
pub fn remove_edit(document: &mut Value, edit: &JsonEdit) -> bool {
    match edit.kind {
        EditKind::Key => {
            let Some((last, parent)) = edit.path.split_last() else {
                return false;
            };
            let Some(object) = get_mut(document, parent).and_then(Value::as_object_mut) else {
                return false;
            };
            if object.get(last) == Some(&edit.value) {
                object.shift_remove(last);
                true
            } else {
                false
            }
        }
        EditKind::Entry => {
            let Some(items) = get_mut(document, &edit.path).and_then(Value::as_array_mut) else {
                return false;
            };
            match items.iter().position(|item| *item == edit.value) {
                Some(index) => {
                    items.remove(index);
                    true
                }
                None => false,
            }
        }
    }
}

fn get_mut<'a>(document: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter()
        .try_fold(document, |value, key| value.as_object_mut()?.get_mut(key))
}

/// Removes containers along `path` that are empty now and did not exist in `original`.
pub fn prune_empty(document: &mut Value, path: &[String], original: Option<&Value>) {
    for depth in (1..=path.len()).rev() {
        let prefix = &path[..depth];
        let existed = original.is_some_and(|o| get(o, prefix).is_some());
        if existed {
            continue;
        }
        let empty = match get(document, prefix) {
            Some(Value::Object(o)) => o.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        if empty {
            if let Some(parent) =
                get_mut(document, &prefix[..depth - 1]).and_then(Value::as_object_mut)
            {
                parent.shift_remove(&prefix[depth - 1]);
            }
        }
    }
}

/// Renders a JSON document the way eject writes it.
pub fn render_json(document: &Value) -> String {
    let mut text = serde_json::to_string_pretty(document).unwrap_or_else(|_| "{}".into());
    text.push('\n');
    text
}

/// Whether eject merges into `file` as TOML (format-preserving) rather than as JSON.
pub fn is_toml(file: &str) -> bool {
    file.ends_with(".toml")
}

/// A TOML document as its JSON equivalent (what the conflict check and the manifest compare).
pub fn toml_to_json(text: &str) -> Result<Value, String> {
    let table: toml::Table = toml::from_str(text).map_err(|error| error.to_string())?;
    serde_json::to_value(table).map_err(|error| error.to_string())
}

fn parse_toml_document(text: Option<&str>) -> Result<toml_edit::DocumentMut, String> {
    text.unwrap_or("")
        .parse::<toml_edit::DocumentMut>()
        .map_err(|error| error.to_string())
}

/// A JSON value as a TOML item laid out the way `toml` writes it (sub-tables as `[a.b]` sections),
/// with no document position, so it renders right after the table it is inserted into.
fn toml_item(key: &str, value: &Value) -> Result<toml_edit::Item, String> {
    let converted = toml::Value::try_from(value).map_err(|error| error.to_string())?;
    let mut root = toml::Table::new();
    root.insert(key.to_owned(), converted);
    let text = toml::to_string(&root).map_err(|error| error.to_string())?;
    let document = parse_toml_document(Some(&text))?;
    let mut item = document
        .get(key)
        .cloned()
        .ok_or_else(|| format!("`{key}` did not render"))?;
    clear_positions(&mut item);
    if let Some(table) = item.as_table_mut() {
        table.decor_mut().set_prefix("\n");
    }
    Ok(item)
}

fn clear_positions(item: &mut toml_edit::Item) {
    match item {
        toml_edit::Item::Table(table) => {
            table.set_position(None);
            for (_, child) in table.iter_mut() {
                clear_positions(child);
            }
        }
        toml_edit::Item::ArrayOfTables(tables) => {
            for table in tables.iter_mut() {
                table.set_position(None);
                for (_, child) in table.iter_mut() {
                    clear_positions(child);
                }
            }
        }
        _ => {}
    }
}

/// The table at `path`, created (implicit, so it has no header of its own) when missing; `None`
/// when something on the way is not a table.
fn toml_table_mut<'a>(
    document: &'a mut toml_edit::DocumentMut,
    path: &[String],
) -> Option<&'a mut dyn toml_edit::TableLike> {
    let mut table: &mut dyn toml_edit::TableLike = document.as_table_mut();
    for key in path {
        if table.get(key).is_none() {
            let mut created = toml_edit::Table::new();
            created.set_implicit(true);
            table.insert(key, toml_edit::Item::Table(created));
        }
        table = table.get_mut(key)?.as_table_like_mut()?;
    }
    Some(table)
}

/// Applies one [`EditKind::Key`] edit to a TOML document, keeping everything else as written.
fn apply_toml_edit(document: &mut toml_edit::DocumentMut, edit: &JsonEdit) -> Result<(), String> {
    let Some((last, parent)) = edit.path.split_last() else {
        return Ok(());
    };
    if edit.kind != EditKind::Key {
        return Err(format!("{}: TOML files take keys only", edit.describe()));
    }
    let item = toml_item(last, &edit.value)?;
    let table = toml_table_mut(document, parent)
        .ok_or_else(|| format!("{}: a parent is not a TOML table", edit.describe()))?;
    table.insert(last, item);
    Ok(())
}

/// Takes one key edit out of a TOML document when it still holds eject's value; false otherwise.
fn remove_toml_edit(document: &mut toml_edit::DocumentMut, edit: &JsonEdit) -> bool {
    let Some((last, parent)) = edit.path.split_last() else {
        return false;
    };
    let holds_value = toml_to_json(&document.to_string())
        .ok()
        .is_some_and(|value| get(&value, &edit.path) == Some(&edit.value));
    if edit.kind != EditKind::Key || !holds_value {
        return false;
    }
    let Some(table) = existing_toml_table_mut(document, parent) else {
        return false;
    };
    table.remove(last).is_some()
}

/// The table at `path` when every step exists and is a table.
fn existing_toml_table_mut<'a>(
    document: &'a mut toml_edit::DocumentMut,
    path: &[String],
) -> Option<&'a mut dyn toml_edit::TableLike> {
    let root: &mut dyn toml_edit::TableLike = document.as_table_mut();
    path.iter()
        .try_fold(root, |table, key| table.get_mut(key)?.as_table_like_mut())
}

/// Removes tables along `path` that are empty now and did not exist in `original`.
fn prune_empty_toml(
    document: &mut toml_edit::DocumentMut,
    path: &[String],
    original: Option<&Value>,
) {
    for depth in (1..path.len()).rev() {
        let prefix = &path[..depth];
        if original.is_some_and(|o| get(o, prefix).is_some()) {
            continue;
        }
        let Some(table) = existing_toml_table_mut(document, &prefix[..depth - 1]) else {
            continue;
        };
        let last = &prefix[depth - 1];
        let empty = table
            .get(last)
            .and_then(toml_edit::Item::as_table_like)
            .is_some_and(|t| t.is_empty());
        if empty {
            table.remove(last);
        }
    }
}

/// The new text of a TOML file eject merges into: `current` (the file as it is, `None` when
/// absent) with eject's `previous` keys taken out and `edits` put in; all other content is kept
/// byte for byte. `original` is the file before the first eject (tables it had are never pruned).
pub fn merge_toml(
    current: Option<&str>,
    previous: &[&JsonEdit],
    edits: &[&JsonEdit],
    original: Option<&str>,
) -> Result<String, String> {
    let mut document = parse_toml_document(current)?;
    let original_value = original.and_then(|text| toml_to_json(text).ok());
    for edit in previous {
        remove_toml_edit(&mut document, edit);
        prune_empty_toml(&mut document, &edit.path, original_value.as_ref());
    }
    for edit in edits {
        apply_toml_edit(&mut document, edit)?;
    }
    Ok(document.to_string())
}

/// A TOML file with eject's keys taken out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnmergedToml {
    pub text: String,
    /// Nothing but whitespace and comments is left.
    pub empty: bool,
    /// The edits whose key no longer holds eject's value (left in place).
    pub changed: Vec<String>,
}

/// Takes `edits` out of a TOML file the user may have edited since, keeping the rest as written.
pub fn unmerge_toml(
    current: &str,
    edits: &[&JsonEdit],
    original: Option<&str>,
) -> Result<UnmergedToml, String> {
    let mut document = parse_toml_document(Some(current))?;
    let original_value = original.and_then(|text| toml_to_json(text).ok());
    let mut changed = Vec::new();
    for edit in edits {
        if !remove_toml_edit(&mut document, edit) {
            changed.push(edit.describe());
        }
        prune_empty_toml(&mut document, &edit.path, original_value.as_ref());
    }
    let text = document.to_string();
    Ok(UnmergedToml {
        empty: document.as_table().is_empty() && text.trim().is_empty(),
        text,
        changed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn source(relative: &str, text: &str) -> SourceFile {
        SourceFile {
            relative: relative.into(),
            bytes: text.as_bytes().to_vec(),
            executable: false,
        }
    }

    struct Fake(BTreeMap<String, Option<Value>>);
    impl ProjectState for Fake {
        fn exists(&self, path: &str) -> bool {
            self.0.contains_key(path)
        }
        fn is_real_dir(&self, _: &str) -> bool {
            true
        }
        fn json(&self, path: &str) -> Result<Option<Value>, String> {
            Ok(self.0.get(path).cloned().flatten())
        }
    }

    #[test]
    fn generation_paths_are_rewritten_to_the_copy() {
        let files = [source(
            "plugins/agentpack-bundle/.mcp.json",
            r#"{"mcpServers":{"s":{"command":"node","args":["/store/gen/plugin-roots/ab/s.js"]}}}"#,
        )];
        let plan = plan(
            &[Agent::Claude],
            &files,
            &["/store/gen"],
            "/p/.agentpack/eject",
        );
        assert_eq!(plan.edits.len(), 1);
        assert_eq!(
            plan.edits[0].value["args"][0],
            "/p/.agentpack/eject/plugin-roots/ab/s.js"
        );
        assert_eq!(
            plan.files[0].path,
            ".agentpack/eject/plugins/agentpack-bundle/.mcp.json"
        );
    }

    #[test]
    fn a_different_user_value_conflicts_and_an_equal_one_is_left_alone() {
        let files = [source(
            "plugins/agentpack-bundle/.mcp.json",
            r#"{"mcpServers":{"a":{"command":"x"},"b":{"command":"y"}}}"#,
        )];
        let mut plan = plan(&[Agent::Claude], &files, &[], "/e");
        let project = Fake(BTreeMap::from([(
            ".mcp.json".to_owned(),
            Some(json!({"mcpServers": {"a": {"command": "x"}, "b": {"command": "mine"}}})),
        )]));
        let conflicts = check_conflicts(&mut plan, &EjectManifest::default(), &project);
        assert_eq!(conflicts.len(), 1);
        assert_eq!(conflicts[0].what, ".mcp.json#/mcpServers/b");
        assert_eq!(plan.edits.len(), 1, "the equal server `a` needs no edit");
    }

    #[test]
    fn apply_then_remove_gives_the_document_back() {
        let original = json!({"hooks": {"Stop": [{"x": 1}]}, "other": true});
        let edits = [
            JsonEdit {
                file: "f".into(),
                path: vec!["hooks".into(), "Stop".into()],
                kind: EditKind::Entry,
                value: json!({"y": 2}),
            },
            JsonEdit {
                file: "f".into(),
                path: vec!["hooks".into(), "PreToolUse".into()],
                kind: EditKind::Entry,
                value: json!({"z": 3}),
            },
            JsonEdit {
                file: "f".into(),
                path: vec!["attribution".into()],
                kind: EditKind::Key,
                value: json!({"commit": ""}),
            },
        ];
        let mut document = original.clone();
        for edit in &edits {
            apply_edit(&mut document, edit);
        }
        assert_eq!(document["hooks"]["PreToolUse"], json!([{"z": 3}]));
        for edit in &edits {
            assert!(remove_edit(&mut document, edit));
            prune_empty(&mut document, &edit.path, Some(&original));
        }
        assert_eq!(document, original);
    }

    #[test]
    fn codex_servers_become_keys_of_the_project_config_toml_with_a_trust_note() {
        let files = [source(
            "codex-home/config.toml",
            "cli_auth_credentials_store = \"file\"\n\n[mcp_servers.fs]\ncommand = \"npx\"\nargs = [\"/store/gen/plugin-roots/x/s.js\"]\n\n[mcp_servers.fs.env]\nMODE = \"ro\"\n",
        )];
        let plan = plan(
            &[Agent::Codex],
            &files,
            &["/store/gen"],
            "/p/.agentpack/eject",
        );
        assert_eq!(plan.edits.len(), 1);
        assert_eq!(plan.edits[0].file, CODEX_PROJECT_CONFIG);
        assert_eq!(plan.edits[0].path, ["mcp_servers", "fs"]);
        assert_eq!(
            plan.edits[0].value,
            json!({"command": "npx", "args": ["/p/.agentpack/eject/plugin-roots/x/s.js"], "env": {"MODE": "ro"}})
        );
        assert!(plan.notes[0].contains("[projects.\"/p\"] trust_level = \"trusted\""));
        assert!(!plan.warnings.iter().any(|w| w.contains("MCP servers (")));
    }

    #[test]
    fn codex_secret_values_are_named_never_shown() {
        let layer: toml::Table = toml::from_str(
            "[mcp_servers.api.env]\nAPI_KEY = \"sk-secret\"\n[mcp_servers.api.http_headers]\nX-Token = \"t0ken\"\n",
        )
        .unwrap();
        let warnings = codex_secret_warnings(&layer);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("`api`"));
        assert!(warnings[0].contains("env API_KEY, header X-Token"));
        assert!(!warnings[0].contains("sk-secret") && !warnings[0].contains("t0ken"));
        assert!(codex_secret_warnings(&toml::Table::new()).is_empty());
    }

    #[test]
    fn toml_merge_keeps_the_users_text_and_unmerge_gives_it_back() {
        let original = "# my codex settings\nmodel = \"o3\" # inline\n\n[mcp_servers.mine]\ncommand = \"mine\"\n\n[profiles.x]\nmodel = \"y\"\n";
        let edit = JsonEdit {
            file: CODEX_PROJECT_CONFIG.into(),
            path: vec!["mcp_servers".into(), "fs".into()],
            kind: EditKind::Key,
            value: json!({"command": "npx", "env": {"A": "b"}}),
        };
        let merged = merge_toml(Some(original), &[], &[&edit], Some(original)).unwrap();
        assert!(merged.starts_with("# my codex settings\nmodel = \"o3\" # inline\n\n[mcp_servers.mine]\ncommand = \"mine\"\n"), "{merged}");
        let value = toml_to_json(&merged).unwrap();
        assert_eq!(value["mcp_servers"]["fs"], edit.value);
        assert_eq!(value["mcp_servers"]["mine"]["command"], "mine");
        assert_eq!(value["profiles"]["x"]["model"], "y");
        // Merging again over eject's own previous key changes nothing.
        assert_eq!(
            merge_toml(Some(&merged), &[&edit], &[&edit], Some(original)).unwrap(),
            merged
        );
        let unmerged = unmerge_toml(&merged, &[&edit], Some(original)).unwrap();
        assert_eq!(unmerged.text, original);
        assert!(unmerged.changed.is_empty());

        // In a file eject created, nothing is left.
        let created = merge_toml(None, &[], &[&edit], None).unwrap();
        let unmerged = unmerge_toml(&created, &[&edit], None).unwrap();
        assert!(unmerged.empty, "{:?}", unmerged.text);

        // A server the user changed since is left, and reported.
        let changed = created.replace("npx", "mine");
        let unmerged = unmerge_toml(&changed, &[&edit], None).unwrap();
        assert_eq!(unmerged.changed, [".codex/config.toml#/mcp_servers/fs"]);
        assert_eq!(unmerged.text, changed);
    }

    #[test]
    fn credentials_given_at_launch_are_refused_by_server_and_field() {
        let files = [
            source(
                "plugins/agentpack-bundle/.mcp.json",
                r#"{"mcpServers":{"db":{"url":"${AGENTPACK_MCP_DB_URL}","headers":{"X":"${AGENTPACK_MCP_DB_HEADER_X}"}},"k":{"command":"n","args":["--api-key","${AGENTPACK_MCP_K_ARG_1}"]}}}"#,
            ),
            source(
                "codex-home/config.toml",
                "[mcp_servers.k]\ncommand = \"n\"\nargs = [\"--api-key\", \"${AGENTPACK_MCP_K_ARG_1}\"]\n",
            ),
            source(
                "agy/agentpack-bundle/mcp_config.json",
                r#"{"mcpServers":{"db":{"serverUrl":"${AGENTPACK_MCP_DB_URL}"}}}"#,
            ),
        ];
        let plan = plan(
            &[Agent::Claude, Agent::Codex, Agent::Antigravity],
            &files,
            &["/store/gen"],
            "/p/.agentpack/eject",
        );
        assert_eq!(plan.refusals.len(), 2, "{:?}", plan.refusals);
        assert!(plan.refusals[0].starts_with("MCP server `db`: its `url` carries credentials"));
        assert!(plan.refusals[1]
            .starts_with("MCP server `k`: `args[1]` (the value of --api-key) holds a credential"));
        // A header given at launch is a warning, as before: eject names the variable.
        let plain = plan_for(&[Agent::Claude], &files[..1]);
        assert!(plain
            .warnings
            .iter()
            .any(|w| w.contains("AGENTPACK_MCP_DB_HEADER_X")));
        let clean = [source(
            "plugins/agentpack-bundle/.mcp.json",
            r#"{"mcpServers":{"k":{"command":"n","args":["--api-key","${API_KEY}"]}}}"#,
        )];
        assert!(plan_for(&[Agent::Claude], &clean).refusals.is_empty());
    }

    fn plan_for(agents: &[Agent], files: &[SourceFile]) -> EjectPlan {
        plan(agents, files, &["/store/gen"], "/p/.agentpack/eject")
    }

    #[test]
    fn opencode_and_grok_are_refused_with_their_launcher() {
        assert!(refusal(Agent::OpenCode)
            .unwrap()
            .contains("agentpack opencode"));
        assert!(refusal(Agent::Grok).unwrap().contains("terminal"));
        assert!(refusal(Agent::Cursor).is_none());
    }
}
