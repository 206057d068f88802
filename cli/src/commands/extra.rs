//! `agentpack extra sync-claude`: reconciles the project's `.claude/skills` and `.agents/skills` so
//! a local skill authored under either one reaches both.
//!
//! A skill (a directory) present on one side only is copied to the other; one present on both with
//! different content is replaced by the copy whose newest file is newer. Only those two directories
//! of the project are touched; staging and the cache have nothing to do with it. `--dry-run` reports
//! without writing; `--json` prints the actions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::{Context as _, Result};
use serde::Serialize;

use crate::context::Context;
use crate::output;

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
    let root = ctx.project_root().unwrap_or_else(|_| ctx.cwd.clone());
    let claude = root.join(".claude/skills");
    let agents = root.join(".agents/skills");
    let actions = plan(&claude, &agents)?;
    if !args.dry_run {
        for action in &actions {
            replace_with_copy(&action.from, &action.to)?;
        }
    }
    if ctx.json {
        output::json(&Report {
            dry_run: args.dry_run,
            actions,
        })?;
    } else if ctx.says() {
        if actions.is_empty() {
            output::info(".claude/skills and .agents/skills are in sync");
        }
        let verb = if args.dry_run { "would " } else { "" };
        for action in &actions {
            let what = if action.action == "copy" {
                "copy"
            } else {
                "update"
            };
            output::info(&format!(
                "{verb}{what} {} -> {}",
                relative(&root, &action.from),
                relative(&root, &action.to)
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
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
        if entry.file_type()?.is_dir() {
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
            } else {
                out.insert(relative, (fs_err::read(&path)?, modified));
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
        match (left.get(name), right.get(name)) {
            (Some(from), None) => actions.push(Action {
                action: "copy",
                skill: name.clone(),
                from: from.clone(),
                to: agents.join(name),
            }),
            (None, Some(from)) => actions.push(Action {
                action: "copy",
                skill: name.clone(),
                from: from.clone(),
                to: claude.join(name),
            }),
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
                let (from, to) = if newest(&ca) >= newest(&cb) {
                    (a, b)
                } else {
                    (b, a)
                };
                actions.push(Action {
                    action: "update",
                    skill: name.clone(),
                    from: from.clone(),
                    to: to.clone(),
                });
            }
            (None, None) => {}
        }
    }
    Ok(actions)
}

/// Replaces `to` with a copy of `from` (built beside it, then renamed into place).
fn replace_with_copy(from: &Path, to: &Path) -> Result<()> {
    let parent = to.parent().context("a skill directory has a parent")?;
    fs_err::create_dir_all(parent)?;
    let temp = tempfile::Builder::new()
        .prefix(".agentpack-sync-")
        .tempdir_in(parent)
        .with_context(|| {
            format!(
                "cannot create a temporary directory in {}",
                parent.display()
            )
        })?;
    let staged = temp.path().join("skill");
    copy_tree(from, &staged)?;
    if to.exists() {
        let old = temp.path().join("old");
        fs_err::rename(to, &old)?;
    }
    fs_err::rename(&staged, to)?;
    Ok(())
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
