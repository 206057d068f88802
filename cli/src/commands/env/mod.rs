//! `agentpack env`: portable environments, definitions kept outside the checkout.
//!
//! An environment is a directory under `$AGENTPACK_HOME/environments/<NAME>` (or `env --dir`)
//! holding `agentpack.toml`, `pack.lock` and an optional `contract.json`: a *definition root*.
//! `env init` creates one (copied from a project with `--from`), `env use` binds a checkout to one,
//! `env unuse` removes the binding, `env status` says which roots are in force and why, `env list`
//! lists them, `env export` / `env import` move one between machines as a bundle (see [`bundle`]),
//! `env restore` stages exactly what the lock pins (see [`restore`]).
//!
//! Never writes into a checkout or a source project: only the environments directory and the
//! bindings under `AGENTPACK_HOME`.

pub mod bundle;
pub mod definition;
pub mod offline;
pub mod restore;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _, Result};
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::context::{Context, Home, LOCK_FILE};
use crate::environment::binding::{self, Binding};
use crate::environment::location;
use crate::output;
use crate::project::Project;
use definition::{DefinitionFiles, CONTRACT_FILE};

#[derive(Debug, Args)]
pub struct EnvArgs {
    /// The directory that holds the environments (default: $AGENTPACK_HOME/environments).
    #[arg(long, global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    #[command(subcommand)]
    pub command: EnvCommand,
}

#[derive(Debug, Subcommand)]
pub enum EnvCommand {
    /// Create an environment (a copy of a project's manifest, lock and contract with --from).
    Init(InitArgs),
    /// Bind a checkout to an environment: commands run there use it as their definition root.
    #[command(visible_alias = "bind")]
    Use(UseArgs),
    /// Remove the binding of a checkout.
    Unuse(UnuseArgs),
    /// Which roots are in force here, and why.
    Status,
    /// The environments there are, and the checkouts bound to each.
    List,
    /// Write a bundle (manifest, unchanged lock, optional contract, bundle.json) to share.
    Export(bundle::ExportArgs),
    /// Create an environment from a bundle.
    Import(bundle::ImportArgs),
    /// Fetch exactly the locked content (verified) and build the mode's generation; frozen: never
    /// rewrites pack.lock or writes the checkout.
    Restore,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The new environment's name.
    pub name: String,
    /// The project to copy agentpack.toml, pack.lock and contract.json from (default: a new,
    /// empty definition).
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct UseArgs {
    /// The environment.
    pub name: String,
    /// The checkout to bind.
    #[arg(long, value_name = "DIR")]
    pub project: PathBuf,
}

#[derive(Debug, Args)]
pub struct UnuseArgs {
    /// The bound checkout (default: the bound directory of --workspace, else of the current
    /// directory).
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
}

pub fn run(ctx: &Context, args: &EnvArgs) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let environments = match &args.dir {
        Some(dir) => ctx.cwd.join(dir),
        None => location::environments_dir(&home.root),
    };
    match &args.command {
        EnvCommand::Init(init) => run_init(ctx, &home, &environments, init),
        EnvCommand::Use(use_args) => run_use(ctx, &home, &environments, use_args),
        EnvCommand::Unuse(unuse) => run_unuse(ctx, &home, unuse),
        EnvCommand::Status => run_status(ctx),
        EnvCommand::List => run_list(ctx, &home, &environments),
        EnvCommand::Export(export) => bundle::run_export(ctx, &environments, export),
        EnvCommand::Import(import) => bundle::run_import(ctx, &home, &environments, import),
        EnvCommand::Restore => restore::run_restore(ctx),
    }
}

/// `<environments>/<name>`, after checking the name.
pub fn environment_path(environments: &Path, name: &str) -> Result<PathBuf> {
    location::check_name(name)?;
    Ok(environments.join(name))
}

/// An environment that must exist (it has an `agentpack.toml`).
pub fn existing_environment(environments: &Path, name: &str) -> Result<PathBuf> {
    let dir = environment_path(environments, name)?;
    if !dir.join(crate::context::MANIFEST_FILE).is_file() {
        bail!(
            "environment `{name}` does not exist: no agentpack.toml in {}\n  fix  create it with `agentpack env init {name}` or `agentpack env import`; `agentpack env list` shows the ones there are",
            dir.display()
        );
    }
    Ok(fs_err::canonicalize(&dir)?)
}

fn run_init(ctx: &Context, home: &Home, environments: &Path, args: &InitArgs) -> Result<ExitCode> {
    let destination = environment_path(environments, &args.name)?;
    let (files, rebased) = match &args.from {
        Some(from) => {
            let from = ctx.cwd.join(from);
            let from = fs_err::canonicalize(&from).with_context(|| {
                format!(
                    "cannot read the project {}\n  fix  pass the directory that holds its agentpack.toml as --from",
                    from.display()
                )
            })?;
            let mut files = DefinitionFiles::read(&from)?;
            let rebased = definition::rebase_path_dependencies(&mut files, &from)?;
            (files, rebased)
        }
        None => {
            let manifest = agentpack_lockfile::render_init_manifest(&args.name, "0.0.1");
            let lock =
                agentpack_lockfile::Lockfile::new(args.name.clone(), "0.0.1").to_toml_string();
            let files = DefinitionFiles {
                manifest: manifest.into_bytes(),
                lock: Some(lock.into_bytes()),
                contract: None,
            };
            (files, Vec::new())
        }
    };
    home.ensure()?;
    definition::publish(environments, &destination, &files, true)?;
    if ctx.says() {
        for rebased in &rebased {
            output::info(&format!(
                "{}: path dependency {} rebased to {} (this environment stays machine-local: replace it with a pinned GitHub package before `env export`)",
                rebased.module, rebased.from, rebased.to
            ));
        }
        let copied: Vec<&str> = files.named().into_iter().map(|(name, _)| name).collect();
        output::info(&format!(
            "Created environment `{}` at {} ({})",
            args.name,
            destination.display(),
            copied.join(", ")
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn run_use(ctx: &Context, home: &Home, environments: &Path, args: &UseArgs) -> Result<ExitCode> {
    let definition_root = existing_environment(environments, &args.name)?;
    let project = ctx.cwd.join(&args.project);
    let project = fs_err::canonicalize(&project)
        .ok()
        .filter(|dir| dir.is_dir())
        .with_context(|| {
            format!(
                "{} is not a directory\n  fix  pass the checkout to bind as --project",
                project.display()
            )
        })?;
    home.ensure()?;
    let binding = Binding {
        project,
        environment: args.name.clone(),
        definition_root,
    };
    binding::write(&home.root, &binding)?;
    if binding
        .project
        .join(crate::context::MANIFEST_FILE)
        .is_file()
    {
        output::warn(&format!(
            "{} has its own agentpack.toml; the binding takes precedence there (pass --project-root {} to use that one)",
            binding.project.display(),
            binding.project.display()
        ));
    }
    if ctx.says() {
        output::info(&format!(
            "Bound {} to environment `{}` ({})",
            binding.project.display(),
            binding.environment,
            binding.definition_root.display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn run_unuse(ctx: &Context, home: &Home, args: &UnuseArgs) -> Result<ExitCode> {
    let removed = match &args.project {
        Some(project) => {
            let project = ctx.cwd.join(project);
            let canonical = fs_err::canonicalize(&project).unwrap_or(project);
            binding::read(&home.root, &canonical)?
        }
        None => {
            let start = ctx.workspace.as_deref().unwrap_or(&ctx.cwd);
            binding::nearest(&home.root, start)?
        }
    };
    let Some(removed) = removed else {
        bail!(
            "no binding to remove for {}\n  fix  `agentpack env list` shows the bound checkouts; pass one as --project",
            args.project
                .as_deref()
                .unwrap_or(ctx.workspace.as_deref().unwrap_or(&ctx.cwd))
                .display()
        );
    };
    binding::remove(&home.root, &removed.project)?;
    if ctx.says() {
        output::info(&format!(
            "Removed the binding of {} to environment `{}`",
            removed.project.display(),
            removed.environment
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// What `env status` reports.
#[derive(Debug, Serialize)]
struct Status {
    definition_root: PathBuf,
    workspace: PathBuf,
    /// True when the definition root is the workspace (`--project-root`, or a discovered project).
    single_root: bool,
    source: crate::context::RootsSource,
    /// Why, in words.
    reason: String,
    /// The environment's name, when the definition root is one.
    environment: Option<String>,
    project_hash: String,
    state_dir: PathBuf,
    staging_root: PathBuf,
    manifest: PathBuf,
    lock: Option<PathBuf>,
    contract: Option<PathBuf>,
}

fn run_status(ctx: &Context) -> Result<ExitCode> {
    let project = Project::discover(ctx)?;
    let environment = match &project.source {
        crate::context::RootsSource::EnvFlag { name } => Some(name.clone()),
        crate::context::RootsSource::Binding { environment, .. } => Some(environment.clone()),
        _ => None,
    };
    let present = |path: PathBuf| path.is_file().then_some(path);
    let status = Status {
        single_root: project.root == project.workspace,
        reason: project.source.describe(),
        source: project.source.clone(),
        environment,
        state_dir: project.state_dir(),
        manifest: project.manifest_path.clone(),
        lock: present(project.root.join(LOCK_FILE)),
        contract: present(project.root.join(CONTRACT_FILE)),
        definition_root: project.root,
        workspace: project.workspace,
        project_hash: project.hash,
        staging_root: project.staging_root,
    };
    if ctx.json {
        output::json(&status)?;
        return Ok(ExitCode::SUCCESS);
    }
    let optional = |path: &Option<PathBuf>| {
        path.as_ref()
            .map_or_else(|| "(none)".to_owned(), |p| p.display().to_string())
    };
    let mut rows = vec![
        (
            "definition root",
            status.definition_root.display().to_string(),
        ),
        ("workspace", status.workspace.display().to_string()),
        ("because", status.reason.to_string()),
    ];
    if let Some(environment) = &status.environment {
        rows.push(("environment", environment.to_string()));
    }
    rows.extend([
        ("lock", optional(&status.lock)),
        ("contract", optional(&status.contract)),
        ("state", status.state_dir.display().to_string()),
        ("staging root", status.staging_root.display().to_string()),
    ]);
    let text: String = rows
        .iter()
        .map(|(label, value)| format!("{label:<17}{value}\n"))
        .collect();
    output::stdout(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// One environment in `env list`.
#[derive(Debug, Serialize)]
struct Listed {
    name: String,
    path: PathBuf,
    lock: bool,
    contract: bool,
    bound_projects: Vec<PathBuf>,
}

fn run_list(ctx: &Context, home: &Home, environments: &Path) -> Result<ExitCode> {
    let mut listed = Vec::new();
    let entries = match fs_err::read_dir(environments) {
        Ok(entries) => Some(entries),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => return Err(err.into()),
    };
    let bindings = binding::all(&home.root)?;
    for entry in entries.into_iter().flatten() {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        // Temporary directories of a publication in progress, and anything else not an environment.
        if location::check_name(&name).is_err() {
            continue;
        }
        let path = entry.path();
        if !path.join(crate::context::MANIFEST_FILE).is_file() {
            continue;
        }
        let canonical = fs_err::canonicalize(&path).unwrap_or_else(|_| path.clone());
        listed.push(Listed {
            bound_projects: bindings
                .iter()
                .filter(|b| b.definition_root == canonical)
                .map(|b| b.project.clone())
                .collect(),
            lock: path.join(LOCK_FILE).is_file(),
            contract: path.join(CONTRACT_FILE).is_file(),
            name,
            path,
        });
    }
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    if ctx.json {
        output::json(&serde_json::json!({
            "environments_dir": environments,
            "environments": listed,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    if listed.is_empty() {
        if ctx.says() {
            output::info(&format!(
                "no environments in {}; create one with `agentpack env init NAME`",
                environments.display()
            ));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = String::new();
    for environment in &listed {
        text.push_str(&format!(
            "{}  {}",
            environment.name,
            environment.path.display()
        ));
        if !environment.bound_projects.is_empty() {
            let bound: Vec<String> = environment
                .bound_projects
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            text.push_str(&format!("  (bound: {})", bound.join(", ")));
        }
        text.push('\n');
    }
    output::stdout(&text)?;
    Ok(ExitCode::SUCCESS)
}
