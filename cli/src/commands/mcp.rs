//! `agentpack mcp add|remove|list`: manage `[mcp.servers]` and the server records in pack.lock.
//!
//! `add` and `remove` are transactions over `agentpack.toml` and `pack.lock`: the record is computed
//! first (an npm server is resolved against its registry; an unreachable registry fails unless
//! `--allow-unpinned`, and nothing is written), then `pipeline::edit::apply_manifest_edit` re-locks, writes both
//! files and syncs unless `--no-sync`, putting both files back if any step fails. `add` refuses a
//! name `./.agents/mcp.json` defines (merged last, it would shadow the added server). `list` reads
//! only: the servers the generation merges, each with its lock status against its definition.
//! Nothing here prints an env value, a header or an OAuth setting, a URL's userinfo (`***`) or an
//! argument that holds a credential (`***`).

use std::process::ExitCode;

use agentpack_builders::mcp_lock::{self, definition_digest};
use agentpack_builders::project::{ProjectSession, ResolvePolicy, ResolvedMode};
use agentpack_harness::render::credentials::redact_url_userinfo;
use agentpack_harness::render::mcp::McpSource;
use agentpack_harness::MergedServer;
use agentpack_lockfile::{Lockfile, McpRecord, McpServer, McpStatus};
use anyhow::{bail, Context as _, Result};
use indexmap::IndexMap;
use serde::Serialize;

use crate::context::Context;
use crate::output;
use crate::pipeline;
use crate::pipeline::edit::{lock_options, ManifestEditSession};
use crate::project::Project;

#[derive(Debug, clap::Args)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: McpCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum McpCommand {
    /// Add (or replace) a server in [mcp.servers], record it in pack.lock and sync.
    Add(McpAddArgs),
    /// Remove a server from [mcp.servers] and its record from pack.lock, and sync.
    Remove(McpRemoveArgs),
    /// Every server with its definition, provenance (manifest / plugin / .agents) and lock status.
    List(McpListArgs),
}

#[derive(Debug, clap::Args)]
pub struct McpAddArgs {
    /// The server name.
    pub name: String,
    /// The program that starts the server (npx, uvx, docker, node, ...).
    #[arg(long, required_unless_present = "url")]
    pub command: Option<String>,
    /// One argument of the program (repeat the flag for each: `--args -y --args pkg@latest`).
    #[arg(long, allow_hyphen_values = true, value_name = "ARG")]
    pub args: Vec<String>,
    /// The URL of a remote server (instead of --command).
    #[arg(long, conflicts_with = "command")]
    pub url: Option<String>,
    /// The transport type (stdio, http, sse).
    #[arg(long = "type", value_name = "TYPE")]
    pub server_type: Option<String>,
    /// An environment variable for the server, K=V (repeatable; never written to pack.lock).
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// The server's working directory.
    #[arg(long)]
    pub cwd: Option<String>,
    /// Record an npm server as unpinned when its registry cannot be reached, instead of failing.
    #[arg(long)]
    pub allow_unpinned: bool,
    /// Update the files, but do not stage.
    #[arg(long)]
    pub no_sync: bool,
}

#[derive(Debug, clap::Args)]
pub struct McpRemoveArgs {
    /// The server name.
    pub name: String,
    /// Update the files, but do not stage.
    #[arg(long)]
    pub no_sync: bool,
}

#[derive(Debug, clap::Args)]
pub struct McpListArgs {}

/// Runs `mcp`.
pub fn run(ctx: &Context, args: &McpArgs) -> Result<ExitCode> {
    match &args.command {
        McpCommand::Add(add) => run_add(ctx, add),
        McpCommand::Remove(remove) => run_remove(ctx, remove),
        McpCommand::List(_) => run_list(ctx),
    }
}

fn parse_env(pairs: &[String]) -> Result<IndexMap<String, String>> {
    let mut env = IndexMap::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=').filter(|(k, _)| !k.is_empty()) else {
            bail!("--env {pair:?} is not K=V\n  fix  write --env NAME=value");
        };
        env.insert(key.to_owned(), value.to_owned());
    }
    Ok(env)
}

/// The servers the project's generations merge, as their sources define them: every package's
/// (read from its cache entry), then `[mcp.servers]`, then `./.agents/mcp.json` (later wins), over
/// every mode: the merge `sync` stages (the same inputs: `ProjectSession::mcp_servers`). A package
/// without a cache entry is named in a warning and its servers are missing. Reads only; never
/// contacts a registry.
fn merged_servers(
    ctx: &Context,
    session: &ProjectSession,
) -> Result<(Vec<MergedServer>, Vec<String>)> {
    let resolved = session.resolve(&ResolvePolicy::AsPresent, None)?;
    let servers = session.mcp_servers(
        &resolved,
        &ResolvedMode::all(),
        &pipeline::plan_options(ctx)?,
    )?;
    Ok((servers, session.take_warnings()))
}

fn run_add(ctx: &Context, args: &McpAddArgs) -> Result<ExitCode> {
    let mut edit = ManifestEditSession::open(ctx)?;
    // What runs under this name today: `./.agents/mcp.json` is merged last, so a server it
    // defines would shadow the one added here, which would be recorded but never run.
    let (current, _) = merged_servers(ctx, &edit.session)?;
    let shadowed_package = match current.iter().find(|s| s.name == args.name) {
        Some(existing) if existing.source == McpSource::DotAgents => bail!(
            "MCP server `{name}` is defined in .agents/mcp.json, which is merged after agentpack.toml: the server added here would never run; nothing was written\n  fix  add it under another name (`agentpack mcp add <other-name> ...`), or remove `{name}` from {overlay} first",
            name = args.name,
            overlay = edit.project.workspace.join(".agents/mcp.json").display()
        ),
        Some(MergedServer {
            source: McpSource::Plugin { module, .. },
            ..
        }) => Some(module.clone()),
        _ => None,
    };
    let server = McpServer {
        server_type: args.server_type.clone(),
        command: args.command.clone(),
        args: args.args.clone(),
        env: parse_env(&args.env)?,
        url: args.url.clone(),
        cwd: args.cwd.clone(),
        ..McpServer::default()
    };
    edit.document.set_mcp_server(&args.name, &server)?;
    let manifest = edit.document.to_manifest()?;
    let lock = edit.session.lock()?;
    let written = manifest
        .mcp_servers
        .get(&args.name)
        .context("internal error: the server just written is missing")?;
    let merged = MergedServer {
        name: args.name.clone(),
        server: written.clone(),
        source: McpSource::Manifest,
    };
    let options = lock_options(false, args.allow_unpinned, false);
    let mut recorder = mcp_lock::McpRecorder::new(&options);
    let record = recorder
        .record_server(&merged, lock.mcp_server(&args.name))
        .with_context(|| {
            format!(
                "`agentpack mcp add {}` failed; agentpack.toml and pack.lock are unchanged",
                args.name
            )
        })?;
    edit.apply(
        ctx,
        args.no_sync,
        format!("mcp add {}", args.name),
        |lock| {
            lock.mcp_servers.retain(|r| r.name != args.name);
            lock.mcp_servers.extend(record.clone());
            lock.sort();
            Ok(())
        },
    )?;
    for warning in &recorder.warnings {
        output::warn(warning);
    }
    if let Some(module) = shadowed_package.filter(|_| ctx.says()) {
        output::info(&format!(
            "`{}` in agentpack.toml overrides the MCP server of the same name in package {module}",
            args.name
        ));
    }
    if ctx.says() {
        let status = record
            .as_ref()
            .map_or_else(|| "no record".to_owned(), describe_status);
        output::info(&format!("Added MCP server `{}` ({status})", args.name));
    }
    Ok(ExitCode::SUCCESS)
}

fn run_remove(ctx: &Context, args: &McpRemoveArgs) -> Result<ExitCode> {
    let mut edit = ManifestEditSession::open(ctx)?;
    if !edit.document.remove_mcp_server(&args.name) {
        let (servers, _) = merged_servers(ctx, &edit.session)?;
        match servers.iter().find(|s| s.name == args.name).map(|s| &s.source) {
            Some(McpSource::DotAgents) => bail!(
                "MCP server `{}` is not in [mcp.servers] of {}: it is defined in .agents/mcp.json\n  fix  remove it from {}",
                args.name,
                edit.project.manifest_path.display(),
                edit.project.workspace.join(".agents/mcp.json").display()
            ),
            Some(McpSource::Plugin { module, file }) => bail!(
                "MCP server `{}` is not in [mcp.servers] of {}: package {module} defines it ({file})\n  fix  disable it with the selector `mcp:{}` in a mode (see Modes), or remove the package with `agentpack remove {module}`",
                args.name,
                edit.project.manifest_path.display(),
                args.name
            ),
            _ => bail!(
                "no MCP server `{}` in [mcp.servers] of {}\n  fix  run `agentpack mcp list` to see the servers and where each is defined",
                args.name,
                edit.project.manifest_path.display()
            ),
        }
    }
    edit.apply(
        ctx,
        args.no_sync,
        format!("mcp remove {}", args.name),
        |lock| {
            lock.mcp_servers
                .retain(|r| !(r.name == args.name && r.source == "manifest"));
            Ok(())
        },
    )?;
    if ctx.says() {
        output::info(&format!("Removed MCP server `{}`", args.name));
    }
    Ok(ExitCode::SUCCESS)
}

/// `pinned @x/y@1.2.3, 12 packages locked`, `unpinned: reason`, ...
fn describe_status(record: &McpRecord) -> String {
    let reason = || {
        record
            .reason
            .as_deref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default()
    };
    match record.status {
        McpStatus::Pinned => {
            let what = match (&record.package, &record.version) {
                (Some(p), Some(v)) => format!("pinned {p}@{v}"),
                _ => format!("pinned {}", record.requested.as_deref().unwrap_or_default()),
            };
            if record.tree.is_empty() {
                what
            } else {
                format!("{what}, {} packages locked", record.tree.len())
            }
        }
        McpStatus::Unpinned => format!("unpinned{}", reason()),
        McpStatus::Unpinnable => format!("unpinnable{}", reason()),
    }
}

#[derive(Debug, Serialize)]
struct ListedRecord {
    status: &'static str,
    launcher: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    requested: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    package: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    integrity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    registry: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tree_digest: Option<String>,
    tree_packages: usize,
    allow_unpinned: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

#[derive(Debug, Serialize)]
struct ListedServer {
    name: String,
    /// `manifest`, `plugin` or `.agents`.
    source: String,
    /// The package that defines it (plugin servers).
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<String>,
    /// The file of the package that defines it (plugin servers).
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    server_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    args: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cwd: Option<String>,
    /// The definition digest of the current definition.
    definition: String,
    /// `current` (a current pinned record), `stale` (edited since it was locked), `none` (no
    /// record), `unpinned` or `unpinnable` (a current record with that status).
    lock: &'static str,
    /// The record pack.lock holds under this name (current or stale).
    record: Option<ListedRecord>,
}

fn listed_record(r: &McpRecord) -> ListedRecord {
    ListedRecord {
        status: r.status.as_str(),
        launcher: r.launcher.clone(),
        requested: r.requested.clone(),
        package: r.package.clone(),
        version: r.version.clone(),
        integrity: r.integrity.clone(),
        registry: r.registry.clone(),
        tree_digest: r.tree_digest.clone(),
        tree_packages: r.tree.len(),
        allow_unpinned: r.allow_unpinned,
        reason: r.reason.clone(),
    }
}

/// Lock status of `server` against its current definition (see [`ListedServer::lock`]).
fn lock_status(lock: &Lockfile, server: &MergedServer) -> &'static str {
    match lock.mcp_server(&server.name) {
        None => "none",
        Some(_) if mcp_lock::current_record(lock, server).is_none() => "stale",
        Some(r) => match r.status {
            McpStatus::Pinned => "current",
            McpStatus::Unpinned => "unpinned",
            McpStatus::Unpinnable => "unpinnable",
        },
    }
}

/// `args` as `mcp list` shows them: each one that holds a credential
/// ([`agentpack_harness::render::credentials::credential_args`]) as `***`.
fn shown_args(args: &[String]) -> Vec<String> {
    let credentials = agentpack_harness::render::credentials::credential_args(args);
    args.iter()
        .enumerate()
        .map(|(index, arg)| {
            if credentials.contains(&index) {
                "***".to_owned()
            } else {
                arg.clone()
            }
        })
        .collect()
}

/// Every merged server with its definition, provenance and lock status.
fn listed_servers(lock: &Lockfile, servers: &[MergedServer]) -> Vec<ListedServer> {
    let mut out: Vec<ListedServer> = servers
        .iter()
        .map(|s| {
            let (module, file) = match &s.source {
                McpSource::Plugin { module, file } => (Some(module.clone()), Some(file.clone())),
                _ => (None, None),
            };
            ListedServer {
                name: s.name.clone(),
                source: mcp_lock::source_label(&s.source).to_owned(),
                module,
                file,
                server_type: s.server.server_type.clone(),
                command: s.server.command.clone(),
                args: shown_args(&s.server.args),
                url: s.server.url.as_deref().map(redact_url_userinfo),
                cwd: s.server.cwd.clone(),
                definition: definition_digest(&s.server),
                lock: lock_status(lock, s),
                record: lock.mcp_server(&s.name).map(listed_record),
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The text of `mcp list`: per server its provenance, definition and lock status.
fn render_list(lock: &Lockfile, servers: &[ListedServer]) -> String {
    let mut text = String::new();
    for s in servers {
        let definition = match (&s.command, &s.url) {
            (Some(command), _) => std::iter::once(command.as_str())
                .chain(s.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            (None, Some(url)) => url.clone(),
            (None, None) => "(no command or url)".to_owned(),
        };
        let provenance = match &s.module {
            Some(module) => format!("{}: {module}", s.source),
            None => s.source.clone(),
        };
        let status = match s.lock {
            "none" => "no record: runs as written; run `agentpack lock` to pin it".to_owned(),
            "stale" => "edited since it was locked: runs as written; run `agentpack lock` to record it again".to_owned(),
            _ => lock
                .mcp_server(&s.name)
                .map(describe_status)
                .unwrap_or_default(),
        };
        text.push_str(&format!(
            "{}  [{provenance}]\n  definition  {definition}\n  lock        {status}\n",
            s.name
        ));
    }
    text
}

fn run_list(ctx: &Context) -> Result<ExitCode> {
    let project = Project::discover(ctx)?;
    let session = pipeline::open(&project)?;
    let lock = session.lock()?;
    let (merged, warnings) = merged_servers(ctx, &session)?;
    for warning in &warnings {
        output::warn(warning);
    }
    let servers = listed_servers(&lock, &merged);
    if ctx.json {
        output::json(&serde_json::json!({ "servers": servers }))?;
        return Ok(ExitCode::SUCCESS);
    }
    if servers.is_empty() {
        if ctx.says() {
            output::info("No MCP servers.");
        }
        return Ok(ExitCode::SUCCESS);
    }
    output::stdout(&render_list(&lock, &servers))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(subcommand)]
        command: McpCommand,
    }

    #[test]
    fn args_take_hyphen_values_one_per_flag() {
        let parsed = Wrapper::try_parse_from([
            "mcp",
            "add",
            "pw",
            "--command",
            "npx",
            "--args",
            "-y",
            "--args",
            "@playwright/mcp@latest",
            "--env",
            "K=V",
            "--allow-unpinned",
        ])
        .unwrap();
        let McpCommand::Add(add) = parsed.command else {
            panic!()
        };
        assert_eq!(add.args, vec!["-y", "@playwright/mcp@latest"]);
        assert_eq!(add.env, vec!["K=V"]);
        assert!(add.allow_unpinned);
    }
}
