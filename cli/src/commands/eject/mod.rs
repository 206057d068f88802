//! `agentpack eject [AGENT...] [--remove]`: for editors that do not start through a launcher, copy
//! the mode's staged trees into `<workspace>/.agentpack/eject/` and register them in the checkout
//! (the workspace: the editors open it, and its `./.agents/` is the overlay the sync reads; with
//! one root it is the project directory).
//!
//! This module owns the I/O of eject: it syncs, reads the generation, checks the plan of
//! [`agentpack_harness::render::eject`] against the project, and writes. It must never replace a file or a
//! JSON or TOML setting that `.agentpack/eject/manifest.json` does not record, and it checks every
//! one before it writes anything. `--remove` takes out exactly what the manifest records. It
//! never writes a credential: a server whose `url` or argument holds one is refused, before any
//! project file is written ([`agentpack_harness::render::eject::EjectPlan::refusals`]).
//!
//! Layout: `aside` (files set aside during the sync), `write` (writing a plan), `removal`
//! (`--remove`); this module holds the command, the plan check and reading the generation.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

use agentpack_harness::render::eject::{
    self, EjectManifest, EjectPlan, ProjectState, SourceFile, EJECT_DIR, MANIFEST_PATH,
};
use agentpack_harness::Agent;
use anyhow::{bail, Context as _, Result};
use clap::Args;
use serde_json::Value;

use crate::context::Context;
use crate::output;
use crate::pipeline::stage::{self, StageOptions};
use crate::project::Project;

mod aside;
mod removal;
mod write;

use aside::Aside;
use removal::{remove, remove_empty_dirs, restore_json};
use write::write_plan;

#[derive(Debug, Args)]
pub struct EjectArgs {
    /// The agents to eject for: claude, cursor, codex, agy (default: all four). OpenCode and Grok
    /// run in a terminal; use their launchers.
    #[arg(value_name = "AGENT")]
    pub agents: Vec<String>,

    /// Take out exactly what eject wrote (files, JSON keys, directories it created), as recorded
    /// in .agentpack/eject/manifest.json.
    #[arg(long, conflicts_with = "agents")]
    pub remove: bool,
}

pub fn run(ctx: &Context, args: &EjectArgs) -> Result<ExitCode> {
    let project = Project::discover(ctx)?;
    let previous = load_manifest(&project.workspace)?;
    if args.remove {
        return remove(ctx, &project.workspace, previous);
    }
    let agents = parse_agents(&args.agents)?;
    // Eject's own copies under ./.agents/ would be read back as the project overlay by the sync
    // below: they are set aside while it runs, so the copy is taken from the same generation a
    // launcher would build.
    let aside = Aside::set(&project.workspace, &previous)?;
    let planned = plan_against_project(ctx, &project, &agents, &previous);
    let (mut plan, generation_text) = match planned {
        Ok(planned) => {
            aside.discard()?;
            planned
        }
        Err(error) => {
            aside.restore()?;
            return Err(error);
        }
    };
    let mut seen = BTreeSet::new();
    plan.warnings.retain(|w| seen.insert(w.clone()));
    for warning in &plan.warnings {
        output::warn(warning);
    }
    if ctx.says() {
        for note in &plan.notes {
            output::info(note);
        }
    }
    let manifest = write_plan(&project.workspace, &plan, &previous, &generation_text)?;
    if ctx.json {
        output::json(&serde_json::json!({
            "agents": manifest.agents,
            "files": manifest.files.len(),
            "settings": manifest.edits.len(),
            "manifest": MANIFEST_PATH,
        }))?;
    } else if ctx.says() {
        output::info(&format!(
            "Ejected {} to {EJECT_DIR}: {} file(s), {} setting(s); recorded in {MANIFEST_PATH} (undo with `agentpack eject --remove`)",
            manifest.agents.join(", "),
            manifest.files.len(),
            manifest.edits.len()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// Syncs, reads the generation and checks the plan; `Err` when anything is in the way.
fn plan_against_project(
    ctx: &Context,
    project: &Project,
    agents: &[Agent],
    previous: &EjectManifest,
) -> Result<(EjectPlan, String)> {
    // An agent's secret-bearing server values may never enter the generation (Codex's):
    // rendering them (in memory only) lets eject name what the ejected servers lack.
    let options = StageOptions {
        agent: None,
        secrets_of: eject::secrets_agents(agents),
    };
    let mut session = crate::pipeline::open(project)?;
    let policy = agentpack_builders::project::ResolvePolicy::Sync {
        update: agentpack_builders::resolve::UpdatePolicy::KeepPins,
        repair: false,
    };
    let staged = stage::sync(ctx, project, &mut session, &policy, options)?;
    // Links a launcher placed in the workspace are agentpack's own; eject puts real files there.
    let mut links = agentpack_harness::launch::home_layer::WorkspaceLinks::load(&staged.state_dir)?;
    for warning in links.remove_all_except(None)? {
        output::warn(&warning);
    }
    links.save()?;

    let files = read_generation(&staged.generation)?;
    let eject_root = project.workspace.join(EJECT_DIR);
    let generation_text = staged.generation.to_string_lossy().into_owned();
    let pointer_text = staged.pointer.to_string_lossy().into_owned();
    let mut plan = eject::plan(
        agents,
        &files,
        &[&generation_text, &pointer_text],
        &eject_root.to_string_lossy(),
    );
    plan.warnings
        .extend(eject::secret_warnings(agents, &staged.secrets));
    if !plan.refusals.is_empty() {
        let mut message = String::from(
            "eject wrote nothing: an MCP server's url or argument holds a credential, and eject writes no secret into the project",
        );
        for refusal in &plan.refusals {
            message.push_str("\n  ");
            message.push_str(refusal);
        }
        bail!(message);
    }
    let disk = Disk {
        root: &project.workspace,
    };
    let conflicts = eject::check_conflicts(&mut plan, previous, &disk);
    if !conflicts.is_empty() {
        let mut message =
            String::from("eject wrote nothing: it does not replace what it did not write");
        for conflict in &conflicts {
            message.push_str(&format!("\n  {}  {}", conflict.what, conflict.reason));
        }
        message.push_str("\n  fix  move or rename these (or remove the settings), then run `agentpack eject` again");
        bail!(message);
    }
    Ok((plan, generation_text))
}

/// The named agents (all supported ones when none), refusing OpenCode, Grok and unknown names.
fn parse_agents(names: &[String]) -> Result<Vec<Agent>> {
    if names.is_empty() {
        return Ok(eject::supported());
    }
    let mut agents = BTreeSet::new();
    for name in names {
        let Some(agent) = eject::parse_agent(name) else {
            let names: Vec<&str> = eject::supported().into_iter().map(Agent::as_str).collect();
            bail!(
                "unknown agent `{name}`\n  fix  name one of: {}",
                names.join(", ")
            );
        };
        if let Some(reason) = eject::refusal(agent) {
            bail!("cannot eject {name}: {reason}");
        }
        agents.insert(agent);
    }
    Ok(eject::supported()
        .into_iter()
        .filter(|agent| agents.contains(agent))
        .collect())
}

fn load_manifest(root: &Path) -> Result<EjectManifest> {
    let path = root.join(MANIFEST_PATH);
    match fs_err::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).with_context(|| {
            format!(
                "{} does not parse\n  fix  restore it from version control; without it eject cannot tell its files from yours",
                path.display()
            )
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(EjectManifest::default()),
        Err(error) => Err(error.into()),
    }
}

/// Every regular file of the generation (links followed), relative to its root.
fn read_generation(generation: &Path) -> Result<Vec<SourceFile>> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut files = Vec::new();
    let mut pending = vec![(generation.to_path_buf(), String::new())];
    while let Some((dir, relative)) = pending.pop() {
        for entry in fs_err::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            let child = if relative.is_empty() {
                name
            } else {
                format!("{relative}/{name}")
            };
            let metadata = fs_err::metadata(&path)?;
            if metadata.is_dir() {
                pending.push((path, child));
            } else if metadata.is_file() {
                files.push(SourceFile {
                    relative: child,
                    bytes: fs_err::read(&path)?,
                    executable: metadata.permissions().mode() & 0o111 != 0,
                });
            }
        }
    }
    files.sort_by(|a, b| a.relative.cmp(&b.relative));
    Ok(files)
}

/// The project as eject's conflict check sees it.
struct Disk<'a> {
    root: &'a Path,
}

impl ProjectState for Disk<'_> {
    fn exists(&self, path: &str) -> bool {
        fs_err::symlink_metadata(self.root.join(path)).is_ok()
    }

    fn is_real_dir(&self, path: &str) -> bool {
        fs_err::symlink_metadata(self.root.join(path)).is_ok_and(|m| m.is_dir())
    }

    fn json(&self, path: &str) -> Result<Option<Value>, String> {
        match read_optional(&self.root.join(path)) {
            Ok(None) => Ok(None),
            Ok(Some(text)) if eject::is_toml(path) => {
                eject::toml_to_json(&text).map(Some).map_err(|error| {
                    format!("does not parse as TOML ({error}); eject cannot merge into it")
                })
            }
            Ok(Some(text)) => serde_json::from_str(&text).map(Some).map_err(|error| {
                format!("does not parse as JSON ({error}); eject cannot merge into it")
            }),
            Err(error) => Err(format!("cannot be read ({error})")),
        }
    }
}

fn read_optional(path: &Path) -> std::io::Result<Option<String>> {
    match fs_err::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}
