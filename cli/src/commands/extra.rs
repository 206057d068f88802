//! `agentpack extra sync-claude`: reconciles the project's `.claude/skills` and `.agents/skills` so
//! a local skill authored under either one reaches both.
//!
//! Both are the workspace's (the checkout's; with separate roots, not the definition root's).
//! A skill (a directory) present on one side only is copied to the other; one present on both with
//! different content is replaced by the copy whose newest file is newer. Only those two directories
//! of the project are touched; staging and the cache have nothing to do with it. `--dry-run` reports
//! without writing; `--json` prints the actions.
//!
//! It must never lose a file without saying so: the plan names every file an update takes out of
//! the older copy, and every replaced copy is kept under the project's state directory
//! (`$AGENTPACK_HOME/projects/<hash>/sync-claude/<time>/`). A failed run leaves both directories as
//! they were: every new copy is built beside its destination (and every replaced copy saved) before
//! the first one is renamed into place, and a failed rename puts back the ones done.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::{bail, Context as _, Result};
use serde::Serialize;

use crate::context::{Context, Home};
use crate::output;
use crate::project::Project;

/// `agentpack extra`'s subcommands.
#[derive(Debug, clap::Args)]
pub struct ExtraArgs {
    #[command(subcommand)]
    pub command: ExtraCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum ExtraCommand {
    /// Reconcile .claude/skills and .agents/skills in the project, in both directions.
    SyncClaude(SyncClaudeArgs),
}

#[derive(Debug, clap::Args)]
pub struct SyncClaudeArgs {
    /// Show what would change without writing.
    #[arg(long)]
    pub dry_run: bool,
}

/// One change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Action {
    /// `copy` (missing on one side) or `update` (both sides differ; the newer wins).
    pub action: &'static str,
    pub skill: String,
    pub from: PathBuf,
    pub to: PathBuf,
    /// Files (and links) of the older copy that the newer one does not have: the update takes them
    /// out of `to`. Empty for a copy.
    pub removes: Vec<PathBuf>,
    /// Where the replaced copy was kept (an update that ran; `None` with `--dry-run`).
    pub kept: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
struct Report {
    dry_run: bool,
    actions: Vec<Action>,
}

/// Runs `extra`.
pub fn run(ctx: &Context, args: &ExtraArgs) -> Result<ExitCode> {
    match &args.command {
        ExtraCommand::SyncClaude(sync) => run_sync_claude(ctx, sync),
    }
}

fn run_sync_claude(ctx: &Context, args: &SyncClaudeArgs) -> Result<ExitCode> {
    // The checkout's two directories: the workspace (with separate roots, not the definition
    // root), whose `.agents/` a sync stages; the current directory outside a project.
    let (root, state_dir) = match Project::discover(ctx) {
        Ok(project) => (project.workspace.clone(), Some(project.state_dir())),
        Err(_) => (ctx.cwd.clone(), None),
    };
    let claude = root.join(".claude/skills");
    let agents = root.join(".agents/skills");
    let mut actions = plan(&claude, &agents)?;
    let mut kept_in = None;
    if !args.dry_run && !actions.is_empty() {
        let backups = backups_dir(&root, state_dir)?;
        kept_in = apply(&root, &mut actions, &backups)?;
    }
    let text = !ctx.json && ctx.says();
    if text && actions.is_empty() {
        output::stdout(".claude/skills and .agents/skills are in sync\n")?;
    }
    let verb = if args.dry_run { "would " } else { "" };
    for action in &actions {
        if text {
            output::stdout(&format!(
                "{verb}{} {} -> {}\n",
                action.action,
                relative(&root, &action.from),
                relative(&root, &action.to)
            ))?;
        }
        if action.removes.is_empty() {
            continue;
        }
        let what = format!(
            "{} ({} does not have {})",
            list(&root, &action.removes),
            relative(&root, &action.from),
            if action.removes.len() == 1 {
                "it"
            } else {
                "them"
            },
        );
        if args.dry_run {
            if text {
                output::stdout(&format!("  would remove {what}\n"))?;
            }
        } else {
            // Files taken out of an older copy are named even with --quiet or --json.
            let kept = action
                .kept
                .as_ref()
                .map(|kept| format!("; the replaced copy is kept in {}", kept.display()))
                .unwrap_or_default();
            output::warn(&format!("removed {what}{kept}"));
        }
    }
    if let (true, Some(kept_in)) = (text, &kept_in) {
        output::stdout(&format!(
            "the replaced copies are kept in {}\n",
            kept_in.display()
        ))?;
    }
    if ctx.json {
        output::json(&Report {
            dry_run: args.dry_run,
            actions,
        })?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `.claude/skills/s/a.md, .claude/skills/s/refs/b.md` for messages.
fn list(root: &Path, files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| relative(root, f))
        .collect::<Vec<_>>()
        .join(", ")
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The skill directories of a skills directory, by name.
fn skills(dir: &Path) -> Result<BTreeMap<String, PathBuf>> {
    let mut out = BTreeMap::new();
    let entries = match fs_err::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e.into()),
    };
    for entry in entries {
        let entry = entry?;
        // A link to a skill directory counts as that skill (followed, never replaced by a copy
        // when both sides already agree).
        // A build directory an interrupted run left behind is not a skill.
        let leftover = entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX);
        if !leftover && fs_err::metadata(entry.path()).is_ok_and(|m| m.is_dir()) {
            out.insert(
                entry.file_name().to_string_lossy().into_owned(),
                entry.path(),
            );
        }
    }
    Ok(out)
}

/// Relative path -> (bytes or link target, modification time) of every file under `dir`.
fn contents(dir: &Path) -> Result<BTreeMap<PathBuf, (Vec<u8>, SystemTime)>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in fs_err::read_dir(&current)? {
            let entry = entry?;
            let path = entry.path();
            let kind = entry.file_type()?;
            let relative = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
            let modified = fs_err::symlink_metadata(&path)?
                .modified()
                .unwrap_or(SystemTime::UNIX_EPOCH);
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_symlink() {
                let target = fs_err::read_link(&path)?;
                out.insert(
                    relative,
                    (target.as_os_str().as_encoded_bytes().to_vec(), modified),
                );
            } else if kind.is_file() {
                out.insert(relative, (fs_err::read(&path)?, modified));
            } else {
                bail!(
                    "{} is not a regular file, a directory or a link; sync-claude copies nothing else\n  fix  move it out of the skill directory and run `agentpack extra sync-claude` again",
                    path.display()
                );
            }
        }
    }
    Ok(out)
}

fn newest(files: &BTreeMap<PathBuf, (Vec<u8>, SystemTime)>) -> SystemTime {
    files
        .values()
        .map(|(_, t)| *t)
        .max()
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// What reconciling the two directories takes.
pub fn plan(claude: &Path, agents: &Path) -> Result<Vec<Action>> {
    let left = skills(claude)?;
    let right = skills(agents)?;
    let mut actions = Vec::new();
    let mut names: Vec<&String> = left.keys().chain(right.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let copy = |from: &PathBuf, to: PathBuf| -> Result<Action> {
            // Only directories are skills: anything else at that name is the user's, in the way.
            if fs_err::symlink_metadata(&to).is_ok() {
                bail!(
                    "{} is not a skill directory, so the skill {name} cannot be copied there\n  fix  move it away and run `agentpack extra sync-claude` again",
                    to.display()
                );
            }
            contents(from)?;
            Ok(Action {
                action: "copy",
                skill: name.clone(),
                from: from.clone(),
                to,
                removes: Vec::new(),
                kept: None,
            })
        };
        match (left.get(name), right.get(name)) {
            (Some(from), None) => actions.push(copy(from, agents.join(name))?),
            (None, Some(from)) => actions.push(copy(from, claude.join(name))?),
            (Some(a), Some(b)) => {
                let (ca, cb) = (contents(a)?, contents(b)?);
                let same = ca.len() == cb.len()
                    && ca
                        .iter()
                        .zip(cb.iter())
                        .all(|((pa, (ba, _)), (pb, (bb, _)))| pa == pb && ba == bb);
                if same {
                    continue;
                }
                let (from, to, newer, older) = if newest(&ca) >= newest(&cb) {
                    (a, b, &ca, &cb)
                } else {
                    (b, a, &cb, &ca)
                };
                let removes = older
                    .keys()
                    .filter(|file| !newer.contains_key(*file))
                    .map(|file| to.join(file))
                    .collect();
                actions.push(Action {
                    action: "update",
                    skill: name.clone(),
                    from: from.clone(),
                    to: to.clone(),
                    removes,
                    kept: None,
                });
            }
            (None, None) => {}
        }
    }
    Ok(actions)
}

/// The name prefix of the directories new copies are built in, beside their destination.
const TEMP_PREFIX: &str = ".agentpack-sync-";

/// `$AGENTPACK_HOME/projects/<hash>/sync-claude`: where replaced copies are kept, outside the
/// project (so they are neither read as skills nor committed). `state_dir`: the project's (of the
/// (definition, workspace) pair); without a project, the hash of `root`.
fn backups_dir(root: &Path, state_dir: Option<PathBuf>) -> Result<PathBuf> {
    let state_dir = match state_dir {
        Some(dir) => dir,
        None => {
            let canonical = fs_err::canonicalize(root)?;
            let hash = agentpack_lockfile::keys::project_hash(&canonical);
            Home::from_env()?.root.join("projects").join(hash)
        }
    };
    Ok(state_dir.join("sync-claude"))
}

/// Creates this run's directory under `backups`, named by the UTC time (`20261201T031800Z`, with a
/// `-2`, `-3`… suffix when a run in the same second made one).
fn create_run_dir(backups: &Path) -> Result<PathBuf> {
    fs_err::create_dir_all(backups)?;
    let stamp: String = humantime::format_rfc3339_seconds(SystemTime::now())
        .to_string()
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    for attempt in 1..=100 {
        let name = if attempt == 1 {
            stamp.clone()
        } else {
            format!("{stamp}-{attempt}")
        };
        let dir = backups.join(name);
        match fs_err::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e.into()),
        }
    }
    bail!(
        "cannot create a directory for the replaced copies in {}: too many runs this second; run it again",
        backups.display()
    )
}

/// One new copy, built beside its destination.
struct Staged {
    temp: tempfile::TempDir,
    to: PathBuf,
}

impl Staged {
    fn new_copy(&self) -> PathBuf {
        self.temp.path().join("skill")
    }

    fn old_copy(&self) -> PathBuf {
        self.temp.path().join("old")
    }
}

/// Carries out the plan; a failure leaves both skill directories as they were. Every new copy is
/// built beside its destination and every replaced copy saved under a new directory of `backups`
/// (returned, when an update made one) before anything is renamed; a failed rename puts back those
/// done.
fn apply(root: &Path, actions: &mut [Action], backups: &Path) -> Result<Option<PathBuf>> {
    let mut created_dirs = Vec::new();
    let mut run_dir = None;
    let result = stage_and_swap(root, actions, backups, &mut created_dirs, &mut run_dir);
    if result.is_err() {
        if let Some(run_dir) = &run_dir {
            let _ = fs_err::remove_dir_all(run_dir);
        }
        for dir in created_dirs.iter().rev() {
            let _ = fs_err::remove_dir(dir);
        }
        for action in actions.iter_mut() {
            action.kept = None;
        }
    }
    result.map(|()| run_dir)
}

fn stage_and_swap(
    root: &Path,
    actions: &mut [Action],
    backups: &Path,
    created_dirs: &mut Vec<PathBuf>,
    run_dir: &mut Option<PathBuf>,
) -> Result<()> {
    let mut staged = Vec::new();
    for action in actions.iter_mut() {
        let parent = action
            .to
            .parent()
            .context("a skill directory has a parent")?;
        let mut missing = Vec::new();
        let mut current = Some(parent);
        while let Some(dir) = current.filter(|d| fs_err::symlink_metadata(d).is_err()) {
            missing.push(dir.to_path_buf());
            current = dir.parent();
        }
        fs_err::create_dir_all(parent)?;
        created_dirs.extend(missing.into_iter().rev());
        let temp = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .tempdir_in(parent)
            .with_context(|| {
                format!(
                    "cannot create a temporary directory in {}",
                    parent.display()
                )
            })?;
        copy_tree(&action.from, &temp.path().join("skill"))?;
        let replaces = fs_err::symlink_metadata(&action.to).is_ok();
        if replaces {
            let run = match run_dir {
                Some(run) => run.clone(),
                None => run_dir
                    .insert(create_run_dir(backups).with_context(|| {
                        format!(
                            "cannot keep a copy of {} before replacing it; nothing was changed",
                            action.to.display()
                        )
                    })?)
                    .clone(),
            };
            let kept = run.join(action.to.strip_prefix(root).unwrap_or(&action.to));
            copy_tree(&action.to, &kept).with_context(|| {
                format!(
                    "cannot keep a copy of {} before replacing it; nothing was changed",
                    action.to.display()
                )
            })?;
            action.kept = Some(kept);
        }
        staged.push(Staged {
            temp,
            to: action.to.clone(),
        });
    }
    // One transaction: each older copy goes aside into its temp directory, the new one into place;
    // a failed step puts back every one done before it.
    crate::fs_transaction::run(|swaps| {
        for step in &staged {
            swaps.install_via(&step.new_copy(), &step.to, &step.old_copy())?;
        }
        Ok(())
    })
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    fs_err::create_dir_all(to)?;
    for entry in fs_err::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(fs_err::read_link(entry.path())?, &target)
                .with_context(|| format!("cannot create the link {}", target.display()))?;
        } else {
            fs_err::copy(entry.path(), &target)?;
            let modified = fs_err::metadata(entry.path())?.modified()?;
            let file = fs_err::OpenOptions::new().write(true).open(&target)?;
            file.file().set_modified(modified)?;
        }
    }
    Ok(())
}
