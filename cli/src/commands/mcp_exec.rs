//! `agentpack mcp-exec --spec FILE -- ARGS...`: what a staged config runs for a tree-locked npx
//! server.
//!
//! The first start downloads each tarball of the locked tree (from a substituter's npm-tree
//! artifact first, when `AGENTPACK_SUBSTITUTERS` or the config file name one, then from the npm
//! registry), checks it against its recorded integrity before anything is written, unpacks it
//! into an npm-tree store path and runs the package's executable with `node` (the process is
//! replaced, so the agent talks to the server directly over stdio). Later starts reuse the tree
//! after a cheap check. A tarball with the wrong integrity stops here and nothing runs. No package
//! script ever runs.
//!
//! It must never print on stdout: stdout belongs to the server's protocol.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use agentpack_builders::npm::prepare_exec_substituted;
use agentpack_store::LeaseOptions;
use anyhow::{Context as _, Result};

use crate::context::{Context, Home};
use crate::session;

#[derive(Debug, clap::Args)]
pub struct McpExecArgs {
    /// The staged spec naming the locked tree (written by sync).
    #[arg(long, value_name = "FILE")]
    pub spec: PathBuf,
    /// The server's own arguments, after `--`.
    #[arg(last = true, allow_hyphen_values = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
}

/// The agentpack home a spec in the store belongs to: `<home>/cache/store/<layout>/<path>/<file>`.
/// Agents may run servers with another HOME, so the spec's own location is trusted first.
fn home_of_spec(spec: &Path) -> Option<Home> {
    let spec = fs_err::canonicalize(spec).ok()?;
    let store_root = spec.parent()?.parent()?.parent()?;
    if store_root.file_name()? != "store" {
        return None;
    }
    let home = store_root.parent()?.parent()?;
    Some(Home {
        root: home.to_path_buf(),
    })
}

/// Runs `mcp-exec`; returns only when the server could not be started.
pub fn run(_ctx: &Context, args: &McpExecArgs) -> Result<ExitCode> {
    let home = match home_of_spec(&args.spec) {
        Some(home) => home,
        None => Home::from_env()?,
    };
    let store = session::open_store(&home)?;
    let limits = crate::env::limits()?;
    // Substituters are asked for a tree's tarballs before the npm registry (see
    // `agentpack_builders::substitute_npm`).
    let substituters = session::substituters(&crate::env::oci_transport()?)?;
    let plan = prepare_exec_substituted(&store, &args.spec, &limits, &substituters)?;
    for warning in &plan.ready.warnings {
        crate::output::warn(warning);
    }
    // A lease for this pid, which the server keeps after `exec`: GC leaves the tree alone while the
    // server runs, and the lease goes stale when it exits.
    store
        .acquire_lease(
            std::slice::from_ref(&plan.ready.tree),
            LeaseOptions::default(),
        )
        .context("cannot take a lease on the npm tree")?;
    session::flush_store_warnings(&store);
    let error = Command::new("node")
        .arg(&plan.script)
        .args(&args.args)
        .exec();
    Err(error).with_context(|| {
        format!(
            "cannot start `node {}`\n  fix  install Node.js (node must be on PATH to run this MCP server)",
            plan.script.display()
        )
    })
}
