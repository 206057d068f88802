//! `agentpack mode ...`: read and edit `[modes]` in the manifest, keeping its formatting, and
//! `agentpack rollback`: select an earlier generation of a mode.
//!
//! Mode edits only touch `agentpack.toml`; the next sync builds the mode's generation. Rollback only
//! switches the mode's pointer to a generation the store's history still holds.

use std::process::ExitCode;

use agentpack_lockfile::{keys, Base, ManifestDocument, Selector};
use anyhow::{bail, Result};
use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;

use crate::context::Context;
use crate::output;
use crate::pipeline::{history_name, mode_name};
use crate::project::Project;

#[derive(Debug, Args)]
pub struct ModeArgs {
    #[command(subcommand)]
    pub command: ModeCommand,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BaseArg {
    All,
    None,
}

impl From<BaseArg> for Base {
    fn from(base: BaseArg) -> Self {
        match base {
            BaseArg::All => Base::All,
            BaseArg::None => Base::None,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum ModeCommand {
    /// Every declared mode (`default` is always present).
    List,
    /// One mode's base, enable and disable lists.
    Show { name: String },
    /// Declare a mode.
    Create {
        name: String,
        /// Where the mode starts: `all` (a denylist) or `none` (an allowlist).
        #[arg(long, value_enum, default_value = "all")]
        base: BaseArg,
    },
    /// Set a mode's base.
    Base {
        name: String,
        #[arg(value_enum)]
        base: BaseArg,
    },
    /// Enable a selector in a mode (package:, package-path:, mcp:, .agents:).
    Enable { name: String, selector: String },
    /// Disable a selector in a mode.
    Disable { name: String, selector: String },
    /// Delete a mode (`default` is reserved).
    Delete { name: String },
    /// Edit the modes in a terminal editor.
    Tui,
}

#[derive(Debug, Serialize)]
struct ModeView {
    name: String,
    base: &'static str,
    enable: Vec<String>,
    disable: Vec<String>,
}

pub fn run(ctx: &Context, args: &ModeArgs) -> Result<ExitCode> {
    let project = Project::discover(ctx)?;
    match &args.command {
        ModeCommand::List | ModeCommand::Show { .. } => {
            let manifest = project.load_manifest()?;
            let names: Vec<String> = match &args.command {
                ModeCommand::Show { name } => vec![name.clone()],
                _ => manifest
                    .mode_names()
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
            };
            let mut views = Vec::new();
            for name in names {
                let Some(mode) = manifest.mode(&name) else {
                    bail!("mode `{name}` is not declared in agentpack.toml\n  fix  `agentpack mode list` shows the declared modes");
                };
                views.push(ModeView {
                    base: mode.base.as_str(),
                    enable: mode.enable.iter().map(ToString::to_string).collect(),
                    disable: mode.disable.iter().map(ToString::to_string).collect(),
                    name,
                });
            }
            if ctx.json {
                match &args.command {
                    ModeCommand::Show { .. } => output::json(&views[0])?,
                    _ => output::json(&serde_json::json!({ "modes": views }))?,
                }
            } else {
                for view in &views {
                    if matches!(args.command, ModeCommand::List) {
                        output::stdout(&format!("{}\n", view.name))?;
                        continue;
                    }
                    output::stdout(&format!("mode     {}\nbase     {}\n", view.name, view.base))?;
                    for selector in &view.enable {
                        output::stdout(&format!("enable   {selector}\n"))?;
                    }
                    for selector in &view.disable {
                        output::stdout(&format!("disable  {selector}\n"))?;
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        edit => {
            let text = fs_err::read_to_string(&project.manifest_path)?;
            let mut document = ManifestDocument::parse(&text, &project.manifest_path)?;
            let said = match edit {
                ModeCommand::Create { name, base } => {
                    document.create_mode(name, (*base).into())?;
                    format!("Created mode `{name}`")
                }
                ModeCommand::Base { name, base } => {
                    document.set_mode_base(name, (*base).into())?;
                    format!(
                        "Mode `{name}` now starts from {}",
                        Base::from(*base).as_str()
                    )
                }
                ModeCommand::Enable { name, selector } => {
                    let parsed = Selector::parse(selector)?;
                    document.mode_enable(name, &parsed)?;
                    format!("Mode `{name}` enables {parsed}")
                }
                ModeCommand::Disable { name, selector } => {
                    let parsed = Selector::parse(selector)?;
                    document.mode_disable(name, &parsed)?;
                    format!("Mode `{name}` disables {parsed}")
                }
                ModeCommand::Delete { name } => {
                    document.delete_mode(name)?;
                    format!("Deleted mode `{name}`")
                }
                ModeCommand::List | ModeCommand::Show { .. } | ModeCommand::Tui => {
                    unreachable!("handled above (the dispatcher runs `mode tui`)")
                }
            };
            // Validate the whole edited manifest before writing it.
            document.to_manifest()?;
            agentpack_lockfile::write_if_changed(
                &project.manifest_path,
                document.to_string().as_bytes(),
            )?;
            if let ModeCommand::Delete { name } = &args.command {
                crate::mode_generations::forget(&project, [name.as_str()])?;
                if ctx.says() {
                    output::info(&format!("{said}; `agentpack gc` removes its generations"));
                }
            } else if ctx.says() {
                output::info(&format!("{said}; run `agentpack sync` to stage it"));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// How many generations back (1 = the one before the current).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub to: usize,
    /// List the mode's generations, newest first, instead.
    #[arg(long)]
    pub list: bool,
}

#[derive(Debug, Serialize)]
struct GenerationView {
    back: usize,
    name: String,
    created_unix_seconds: u64,
    current: bool,
}

pub fn run_rollback(ctx: &Context, args: &RollbackArgs) -> Result<ExitCode> {
    let project = Project::discover(ctx)?;
    let session = crate::pipeline::open(&project)?;
    let manifest = session.manifest();
    let name = mode_name(ctx).to_owned();
    if manifest.mode(&name).is_none() {
        bail!(
            "mode `{name}` is not declared in agentpack.toml (declared: {})\n  fix  pick one with --mode; `agentpack mode list` shows them",
            manifest.mode_names().join(", ")
        );
    }
    let mode_dir = keys::mode_dir_component(&name);
    crate::retired_homes::check_staging_root(&project.staging_root, &project.root, false)?;
    let store = session.store();
    let pointer = session.pointer(&mode_dir);
    let current = pointer
        .current()
        .and_then(|target| store.store_path_of(&target));
    let history = store.generation_history(&history_name(&project, &mode_dir))?;
    // The history may hold a generation twice (after a rollback): show each once, newest first.
    let mut seen = std::collections::HashSet::new();
    let generations: Vec<_> = history
        .into_iter()
        .filter(|g| seen.insert(g.name.clone()))
        .collect();
    // None when the pointer selects nothing of this history (never synced, or moved by hand).
    let current_index = current
        .as_ref()
        .and_then(|c| generations.iter().position(|g| &g.name == c.name()));
    if let (Some(selected), None) = (&current, current_index) {
        output::warn(&format!(
            "{} selects {}, which is not in the history of mode `{name}`; run `agentpack sync`",
            pointer.path().display(),
            selected.name()
        ));
    }
    if args.list {
        let views: Vec<GenerationView> = generations
            .iter()
            .enumerate()
            .map(|(index, g)| GenerationView {
                back: index,
                name: g.name.as_str().to_owned(),
                created_unix_seconds: u64::try_from(g.created_nanos / 1_000_000_000)
                    .unwrap_or(u64::MAX),
                current: Some(index) == current_index,
            })
            .collect();
        if ctx.json {
            output::json(&serde_json::json!({ "mode": name, "generations": views }))?;
        } else {
            for view in &views {
                let mark = if view.current { "*" } else { " " };
                output::stdout(&format!("{mark} {:>3}  {}\n", view.back, view.name))?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Counted from the selected generation, or from the newest when the pointer selects none of
    // them.
    let wanted = current_index.unwrap_or(0) + args.to;
    let Some(target) = generations.get(wanted) else {
        bail!(
            "mode `{name}` has {} generation(s) in its history; cannot go {} back\n  fix  `agentpack rollback --list` shows them (`gc` keeps --keep-generations of them)",
            generations.len(),
            args.to
        );
    };
    let Some(path) = store.get(&target.name) else {
        bail!("generation {} is no longer in the store\n  fix  run `agentpack sync` to build the current one", target.name.as_str());
    };
    // Nothing staged that was not verified: an older generation edited in place (through a hard
    // link of its files) is not selected again.
    let edited = store.changed_files(&path)?;
    if !edited.is_empty() {
        let shown: Vec<&str> = edited.iter().take(5).map(String::as_str).collect();
        let more = edited.len().saturating_sub(shown.len());
        bail!(
            "generation {} of mode `{name}` was changed in place since it was built ({}{}); it was not selected\n  fix  `agentpack store verify --repair` repairs (or removes) the damaged generation; `agentpack sync` builds the current one",
            target.name.as_str(),
            shown.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        );
    }
    store.add_generation_root(&history_name(&project, &mode_dir), &path)?;
    pointer.switch_to(path.path())?;
    // The rollback stays selected until the inputs change or a sync is asked for.
    crate::rollback_record::record(
        &project.state_dir(),
        &project,
        &name,
        &mode_dir,
        path.path(),
    )?;
    output::info(&format!(
        "Mode `{name}` now uses generation {} ({} back)",
        path.name().as_str(),
        args.to
    ));
    Ok(ExitCode::SUCCESS)
}
