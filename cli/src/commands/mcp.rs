//! `agentpack mcp add|remove|list`: manage `[mcp.servers]` and the server records in pack.lock.
//!
//! `add` and `remove` are transactions over `agentpack.toml` and `pack.lock`: the record is computed
//! first (an npm server is resolved against its registry; an unreachable registry fails unless
//! `--allow-unpinned`, and nothing is written), then `lock::apply_manifest_edit` re-locks, writes both
//! files and syncs unless `--no-sync`, putting both files back if any step fails. `list` reads only.
//! Nothing here prints an env value, a header or an OAuth setting.

use std::path::PathBuf;
use std::process::ExitCode;

use agentpack_builders::mcp_lock::{self, definition_digest, McpLockOptions};
use agentpack_harness::mcp::{parse_servers, McpSource};
use agentpack_harness::MergedServer;
use agentpack_lockfile::{Lockfile, ManifestDocument, McpRecord, McpServer, McpStatus};
use anyhow::{bail, Context as _, Result};
use indexmap::IndexMap;
use serde::Serialize;

use crate::commands::lock::apply_manifest_edit;
use crate::context::Context;
use crate::output;
use crate::project::Project;

/// The environment variable naming the npm registry (npm reads it case-insensitively).
const NPM_CONFIG_REGISTRY: [&str; 2] = ["npm_config_registry", "NPM_CONFIG_REGISTRY"];

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

/// The options `lock`, `add`, `sync` and `mcp add` pass to [`mcp_lock::record`], read from the
/// environment: npm on PATH and `npm_config_registry`.
pub fn lock_options(
    update: bool,
    allow_unpinned: bool,
    tolerate_unreachable: bool,
) -> McpLockOptions {
    McpLockOptions {
        update,
        allow_unpinned,
        tolerate_unreachable,
        npm: find_on_path("npm"),
        environment_registry: NPM_CONFIG_REGISTRY
            .iter()
            .find_map(|name| crate::env::var(name)),
    }
}

/// The first executable `name` on PATH.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
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

fn run_add(ctx: &Context, args: &McpAddArgs) -> Result<ExitCode> {
    let project = Project::discover(ctx)?;
    let text = fs_err::read_to_string(&project.manifest_path)?;
    let mut document = ManifestDocument::parse(&text, &project.manifest_path)?;
    let server = McpServer {
        server_type: args.server_type.clone(),
        command: args.command.clone(),
        args: args.args.clone(),
        env: parse_env(&args.env)?,
        url: args.url.clone(),
        cwd: args.cwd.clone(),
        ..McpServer::default()
    };
    document.set_mcp_server(&args.name, &server)?;
    let manifest = document.to_manifest()?;
    let lock = project.load_lock(&manifest)?;
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
    let mut warnings = Vec::new();
    let record = mcp_lock::record_server(
        &merged,
        lock.mcp_server(&args.name),
        &options,
        &mut None,
        &mut warnings,
    )
    .with_context(|| {
        format!(
            "`agentpack mcp add {}` failed; agentpack.toml and pack.lock are unchanged",
            args.name
        )
    })?;
    apply_manifest_edit(
        ctx,
        &project,
        &document,
        args.no_sync,
        &format!("mcp add {}", args.name),
        |lock| {
            lock.mcp_servers.retain(|r| r.name != args.name);
            lock.mcp_servers.extend(record.clone());
            lock.sort();
            Ok(())
        },
    )?;
    for warning in &warnings {
        output::warn(warning);
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
    let project = Project::discover(ctx)?;
    let text = fs_err::read_to_string(&project.manifest_path)?;
    let mut document = ManifestDocument::parse(&text, &project.manifest_path)?;
    if !document.remove_mcp_server(&args.name) {
        bail!(
            "no MCP server `{}` in [mcp.servers] of {}\n  fix  run `agentpack mcp list` to see the servers and where each is defined",
            args.name,
            project.manifest_path.display()
        );
    }
    apply_manifest_edit(
        ctx,
        &project,
        &document,
        args.no_sync,
        &format!("mcp remove {}", args.name),
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
        McpStatus::Unpinned => format!(
            "unpinned{}",
            record
                .reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ),
        McpStatus::Unpinnable => format!(
            "unpinnable{}",
            record
                .reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ),
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
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    args: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    /// The definition digest, when the definition is known here (plugin servers: from the lock).
    definition: String,
    /// `current`, `stale` (edited since it was locked) or `none` (no record).
    lock: &'static str,
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

/// The servers of the manifest and the overlay (overlay wins), plus the plugin servers the lock
/// records (their definitions live in the packages).
fn listed_servers(
    project: &Project,
    lock: &Lockfile,
    manifest_servers: Vec<MergedServer>,
) -> Result<(Vec<ListedServer>, Vec<String>)> {
    let mut warnings = Vec::new();
    let mut merged: IndexMap<String, MergedServer> = manifest_servers
        .into_iter()
        .map(|s| (s.name.clone(), s))
        .collect();
    let overlay = project.root.join(".agents/mcp.json");
    if overlay.is_file() {
        let text = fs_err::read_to_string(&overlay)?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not valid JSON", overlay.display()))?;
        for (name, server) in parse_servers(&value, ".agents/mcp.json", &mut warnings) {
            merged.insert(
                name.clone(),
                MergedServer {
                    name,
                    server,
                    source: McpSource::DotAgents,
                },
            );
        }
    }
    let mut out: Vec<ListedServer> = merged
        .values()
        .map(|s| {
            let digest = definition_digest(&s.server);
            let record = lock.mcp_server(&s.name);
            ListedServer {
                name: s.name.clone(),
                source: mcp_lock::source_label(&s.source).to_owned(),
                command: s.server.command.clone(),
                args: s.server.args.clone(),
                url: s.server.url.clone(),
                lock: match record {
                    None => "none",
                    Some(r) if r.definition == digest => "current",
                    Some(_) => "stale",
                },
                definition: digest,
                record: record.map(listed_record),
            }
        })
        .collect();
    for r in &lock.mcp_servers {
        if r.source == "plugin" && !merged.contains_key(&r.name) {
            out.push(ListedServer {
                name: r.name.clone(),
                source: r.source.clone(),
                command: r.command.clone(),
                args: Vec::new(),
                url: None,
                definition: r.definition.clone(),
                lock: "current",
                record: Some(listed_record(r)),
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((out, warnings))
}

fn run_list(ctx: &Context) -> Result<ExitCode> {
    let project = Project::discover(ctx)?;
    let manifest = project.load_manifest()?;
    let lock = project.load_lock(&manifest)?;
    let manifest_servers = manifest
        .mcp_servers
        .iter()
        .map(|(name, server)| MergedServer {
            name: name.clone(),
            server: server.clone(),
            source: McpSource::Manifest,
        })
        .collect();
    let (servers, warnings) = listed_servers(&project, &lock, manifest_servers)?;
    for warning in &warnings {
        output::warn(warning);
    }
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
    let mut text = String::new();
    for s in &servers {
        let definition = match (&s.command, &s.url) {
            (Some(command), _) => std::iter::once(command.as_str())
                .chain(s.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            (None, Some(url)) => url.clone(),
            (None, None) => "(defined in the package)".to_owned(),
        };
        let status = match (&s.record, s.lock) {
            (None, _) => "no record: runs as written; run `agentpack lock`".to_owned(),
            (Some(_), "stale") => {
                "edited since it was locked: runs as written; run `agentpack lock`".to_owned()
            }
            (Some(_), _) => lock
                .mcp_server(&s.name)
                .map(describe_status)
                .unwrap_or_default(),
        };
        text.push_str(&format!(
            "{}  [{}]\n  definition  {definition}\n  lock        {status}\n",
            s.name, s.source
        ));
    }
    output::stdout(&text)?;
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
