//! `agentpack eject [AGENT...] [--remove]`: for editors that do not start through a launcher, copy
//! the mode's staged trees into `<project>/.agentpack/eject/` and register them in the project.
//!
//! This module owns the I/O of eject: it syncs, reads the generation, checks the plan of
//! [`agentpack_harness::eject`] against the project, and writes. It must never replace a file or a
//! JSON or TOML setting that `.agentpack/eject/manifest.json` does not record, and it checks every
//! one before it writes anything. `--remove` takes out exactly what the manifest records. It
//! never writes a credential: a server whose `url` or argument holds one is refused, before any
//! project file is written ([`agentpack_harness::eject::EjectPlan::refusals`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agentpack_harness::eject::{
    self, EjectManifest, EjectPlan, ManifestFile, ManifestJsonFile, ProjectState, SourceFile,
    EJECT_DIR, MANIFEST_PATH, MANIFEST_VERSION,
};
use agentpack_harness::Agent;
use anyhow::{bail, Context as _, Result};
use clap::Args;
use serde_json::Value;

use crate::commands::sync::{run_sync, SyncOptions};
use crate::context::Context;
use crate::output;
use crate::project::Project;

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
    let previous = load_manifest(&project.root)?;
    if args.remove {
        return remove(ctx, &project.root, previous);
    }
    let agents = parse_agents(&args.agents)?;
    // Eject's own copies under ./.agents/ would be read back as the project overlay by the sync
    // below: they are set aside while it runs, so the copy is taken from the same generation a
    // launcher would build.
    let aside = Aside::set(&project.root, &previous)?;
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
    let manifest = write_plan(&project.root, &plan, &previous, &generation_text)?;
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
    // Codex's secret-bearing server values never enter the generation: rendering them for Codex
    // (in memory only) lets eject name what the ejected servers lack.
    let options = SyncOptions {
        agent: agents.contains(&Agent::Codex).then_some(Agent::Codex),
        ..SyncOptions::default()
    };
    let staged = run_sync(ctx, project, &options)?;
    // Links a launcher placed in the workspace are agentpack's own; eject puts real files there.
    let mut links = agentpack_harness::home_layer::WorkspaceLinks::load(&staged.state_dir)?;
    for warning in links.remove_all_except(None)? {
        output::warn(&warning);
    }
    links.save()?;

    let files = read_generation(&staged.generation)?;
    let eject_root = project.root.join(EJECT_DIR);
    let generation_text = staged.generation.to_string_lossy().into_owned();
    let pointer_text = staged.pointer.to_string_lossy().into_owned();
    let mut plan = eject::plan(
        agents,
        &files,
        &[&generation_text, &pointer_text],
        &eject_root.to_string_lossy(),
    );
    if let Some(secret_config) = staged
        .secrets
        .get(&Agent::Codex)
        .filter(|_| agents.contains(&Agent::Codex))
        .and_then(|layer| layer.config_toml.as_ref())
    {
        plan.warnings
            .extend(eject::codex_secret_warnings(secret_config));
    }
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
        root: &project.root,
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

/// Eject's previous files under `./.agents/`, moved to `.agentpack/eject/.aside/` while the sync
/// reads the overlay, and the recorded directories that became empty (removed).
struct Aside {
    root: PathBuf,
    moved: Vec<String>,
}

const ASIDE_DIR: &str = ".agentpack/eject/.aside";

impl Aside {
    fn set(root: &Path, previous: &EjectManifest) -> Result<Self> {
        let mut aside = Aside {
            root: root.to_path_buf(),
            moved: Vec::new(),
        };
        // A leftover of an interrupted run goes back first.
        aside.recover_leftover()?;
        for file in previous
            .files
            .iter()
            .filter(|f| f.path.starts_with(".agents/"))
        {
            let from = root.join(&file.path);
            if !from.is_file() {
                continue;
            }
            let to = root.join(ASIDE_DIR).join(&file.path);
            if let Some(parent) = to.parent() {
                fs_err::create_dir_all(parent)?;
            }
            fs_err::rename(&from, &to)?;
            aside.moved.push(file.path.clone());
        }
        let mut dirs: Vec<&String> = previous
            .dirs
            .iter()
            .filter(|d| *d == ".agents" || d.starts_with(".agents/"))
            .collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
        for dir in dirs {
            let _ = fs_err::remove_dir(root.join(dir));
        }
        Ok(aside)
    }

    fn recover_leftover(&mut self) -> Result<()> {
        let aside_root = self.root.join(ASIDE_DIR);
        if !aside_root.is_dir() {
            return Ok(());
        }
        for file in read_generation(&aside_root)? {
            self.moved.push(file.relative);
        }
        self.restore_moved()?;
        self.moved.clear();
        Ok(())
    }

    fn restore_moved(&self) -> Result<()> {
        for path in &self.moved {
            let to = self.root.join(path);
            if let Some(parent) = to.parent() {
                fs_err::create_dir_all(parent)?;
            }
            if !to.exists() {
                fs_err::rename(self.root.join(ASIDE_DIR).join(path), &to)?;
            }
        }
        remove_tree_if_present(&self.root.join(ASIDE_DIR))
    }

    /// Puts everything back (the plan was refused).
    fn restore(self) -> Result<()> {
        self.restore_moved()
    }

    /// Drops the set-aside copies (the plan writes them again).
    fn discard(self) -> Result<()> {
        remove_tree_if_present(&self.root.join(ASIDE_DIR))
    }
}

fn remove_tree_if_present(path: &Path) -> Result<()> {
    match fs_err::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// The named agents (all supported ones when none), refusing OpenCode, Grok and unknown names.
fn parse_agents(names: &[String]) -> Result<Vec<Agent>> {
    if names.is_empty() {
        return Ok(eject::SUPPORTED.to_vec());
    }
    let mut agents = BTreeSet::new();
    for name in names {
        let Some(agent) = eject::parse_agent(name) else {
            bail!("unknown agent `{name}`\n  fix  name one of: claude, cursor, codex, agy");
        };
        if let Some(reason) = eject::refusal(agent) {
            bail!("cannot eject {name}: {reason}");
        }
        agents.insert(agent);
    }
    Ok(eject::SUPPORTED
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

/// Creates the directories of `relative` (a directory path) that are missing, recording them.
fn create_dirs(root: &Path, relative: &str, created: &mut Vec<String>) -> Result<()> {
    let mut current = String::new();
    for component in relative.split('/') {
        if !current.is_empty() {
            current.push('/');
        }
        current.push_str(component);
        let path = root.join(&current);
        if fs_err::symlink_metadata(&path).is_err() {
            fs_err::create_dir(&path)?;
            if !created.contains(&current) {
                created.push(current.clone());
            }
        }
    }
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8], executable: bool) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    if let Ok(metadata) = fs_err::symlink_metadata(path) {
        if metadata.is_file() {
            // Eject's own earlier copy: make sure it can be replaced.
            fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o644))?;
        }
    }
    fs_err::write(path, bytes)?;
    let mode = if executable { 0o755 } else { 0o644 };
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// Writes a checked plan, replaces or takes out what the previous eject wrote and the plan no
/// longer has, and records the result.
fn write_plan(
    root: &Path,
    plan: &EjectPlan,
    previous: &EjectManifest,
    generation: &str,
) -> Result<EjectManifest> {
    let mut dirs: Vec<String> = previous
        .dirs
        .iter()
        .filter(|dir| root.join(dir).is_dir())
        .cloned()
        .collect();
    let mut files = Vec::new();
    create_dirs(root, EJECT_DIR, &mut dirs)?;
    for file in &plan.files {
        if let Some((parent, _)) = file.path.rsplit_once('/') {
            create_dirs(root, parent, &mut dirs)?;
        }
        write_file(&root.join(&file.path), &file.bytes, file.executable)?;
        files.push(ManifestFile {
            path: file.path.clone(),
            sha256: eject::sha256_hex(&file.bytes),
        });
    }
    for dir in &plan.owned_dirs {
        create_dirs(root, dir, &mut dirs)?;
    }
    let planned: BTreeSet<&str> = plan.files.iter().map(|f| f.path.as_str()).collect();
    for stale in previous
        .files
        .iter()
        .filter(|f| !planned.contains(f.path.as_str()))
    {
        remove_file_if_present(&root.join(&stale.path))?;
    }

    let mut json_files = Vec::new();
    let targets: BTreeSet<&str> = plan
        .edits
        .iter()
        .map(|e| e.file.as_str())
        .chain(previous.json_files.iter().map(|f| f.file.as_str()))
        .collect();
    for target in targets {
        let new_edits: Vec<_> = plan.edits.iter().filter(|e| e.file == target).collect();
        let recorded = previous.json_file(target);
        if new_edits.is_empty() {
            if let Some(recorded) = recorded {
                for warning in restore_json(root, recorded, previous)?.warnings {
                    output::warn(&warning);
                }
            }
            continue;
        }
        let path = root.join(target);
        let current = read_optional(&path)?;
        let original = match recorded {
            Some(recorded) => recorded.original.clone(),
            None => current.clone(),
        };
        let text = if eject::is_toml(target) {
            let previous_edits: Vec<_> =
                previous.edits.iter().filter(|e| e.file == target).collect();
            eject::merge_toml(
                current.as_deref(),
                &previous_edits,
                &new_edits,
                original.as_deref(),
            )
            .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?
        } else {
            merged_json(
                &path,
                current.as_deref(),
                original.as_deref(),
                target,
                &new_edits,
                previous,
            )?
        };
        if let Some((parent, _)) = target.rsplit_once('/') {
            create_dirs(root, parent, &mut dirs)?;
        }
        fs_err::write(&path, &text)?;
        json_files.push(ManifestJsonFile {
            file: target.to_owned(),
            original,
            written_sha256: eject::sha256_hex(text.as_bytes()),
        });
    }
    let _removed = remove_empty_dirs(root, &mut dirs, &needed_dirs(plan, &json_files));

    let manifest = EjectManifest {
        version: MANIFEST_VERSION,
        agents: plan.agents.iter().map(|a| a.as_str().to_owned()).collect(),
        generation: generation.to_owned(),
        files,
        dirs,
        edits: plan.edits.clone(),
        json_files,
    };
    let mut text = serde_json::to_string_pretty(&manifest)?;
    text.push('\n');
    fs_err::write(root.join(MANIFEST_PATH), text)?;
    Ok(manifest)
}

/// The new text of a JSON file eject merges into: eject's previous keys taken out, the plan's put in.
fn merged_json(
    path: &Path,
    current: Option<&str>,
    original: Option<&str>,
    target: &str,
    new_edits: &[&eject::JsonEdit],
    previous: &EjectManifest,
) -> Result<String> {
    let original_value: Option<Value> = original.and_then(|t| serde_json::from_str(t).ok());
    let mut document: Value = match current {
        Some(text) => serde_json::from_str(text)
            .with_context(|| format!("{} does not parse as JSON", path.display()))?,
        None => Value::Object(serde_json::Map::new()),
    };
    for edit in previous.edits.iter().filter(|e| e.file == target) {
        eject::remove_edit(&mut document, edit);
        eject::prune_empty(&mut document, &edit.path, original_value.as_ref());
    }
    for edit in new_edits {
        eject::apply_edit(&mut document, edit);
    }
    Ok(eject::render_json(&document))
}

/// Directories the current plan writes into (they stay even when empty of other files).
fn needed_dirs(plan: &EjectPlan, json_files: &[ManifestJsonFile]) -> BTreeSet<String> {
    let mut needed = BTreeSet::from([EJECT_DIR.to_owned(), ".agentpack".to_owned()]);
    let paths = plan
        .files
        .iter()
        .map(|f| f.path.as_str())
        .chain(json_files.iter().map(|f| f.file.as_str()));
    for path in paths {
        let mut rest = path;
        while let Some((dir, _)) = rest.rsplit_once('/') {
            needed.insert(dir.to_owned());
            rest = dir;
        }
    }
    needed.extend(plan.owned_dirs.iter().cloned());
    needed
}

/// Removes recorded directories that are empty and not needed, deepest first; they leave the record.
/// Returns the directories it removed (not those that were already gone).
fn remove_empty_dirs(
    root: &Path,
    dirs: &mut Vec<String>,
    needed: &BTreeSet<String>,
) -> Vec<String> {
    let mut ordered = dirs.clone();
    ordered.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
    let mut removed = Vec::new();
    for dir in ordered {
        if needed.contains(&dir) {
            continue;
        }
        // Only an empty directory is removed; one holding the user's files stays.
        if fs_err::remove_dir(root.join(&dir)).is_ok() {
            removed.push(dir.clone());
            dirs.retain(|d| *d != dir);
        } else if !root.join(&dir).exists() {
            dirs.retain(|d| *d != dir);
        }
    }
    removed
}

/// Deletes a file; `false` when there was none.
fn remove_file_if_present(path: &Path) -> Result<bool> {
    match fs_err::remove_file(path) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// What happened to one merged JSON or TOML file on `--remove`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum JsonFileOutcome {
    /// It held exactly what eject wrote: put back byte for byte as it was before the first eject.
    Restored,
    /// Eject created it and nothing else is left in it: deleted.
    Deleted,
    /// The user edited it since: eject's keys and entries taken out, the rest kept.
    Edited,
    /// It no longer parses: left as it is.
    Unparsable,
    /// It is gone already.
    Missing,
}

/// One recorded key or array entry, as `--remove --json` names it (without its value).
#[derive(Debug, Clone, serde::Serialize)]
struct SettingRef {
    file: String,
    path: Vec<String>,
    kind: eject::EditKind,
}

impl From<&eject::JsonEdit> for SettingRef {
    fn from(edit: &eject::JsonEdit) -> Self {
        Self {
            file: edit.file.clone(),
            path: edit.path.clone(),
            kind: edit.kind,
        }
    }
}

/// What restoring one merged file did.
struct RestoredJson {
    outcome: JsonFileOutcome,
    /// Eject's keys and entries taken out.
    removed: Vec<SettingRef>,
    /// Eject's keys and entries left in place (changed since, or the file no longer parses).
    left: Vec<SettingRef>,
    warnings: Vec<String>,
}

/// Puts one merged JSON file back: byte for byte when it still holds what eject wrote, otherwise
/// key by key. Says what it did, with warnings for keys the user changed since.
fn restore_json(
    root: &Path,
    recorded: &ManifestJsonFile,
    manifest: &EjectManifest,
) -> Result<RestoredJson> {
    let path = root.join(&recorded.file);
    let edits: Vec<&eject::JsonEdit> = manifest
        .edits
        .iter()
        .filter(|e| e.file == recorded.file)
        .collect();
    let all = || {
        edits
            .iter()
            .map(|e| SettingRef::from(*e))
            .collect::<Vec<_>>()
    };
    let done = |outcome, removed, left, warnings| RestoredJson {
        outcome,
        removed,
        left,
        warnings,
    };
    let Some(current) = read_optional(&path)? else {
        return Ok(done(
            JsonFileOutcome::Missing,
            Vec::new(),
            Vec::new(),
            Vec::new(),
        ));
    };
    if eject::sha256_hex(current.as_bytes()) == recorded.written_sha256 {
        let outcome = match &recorded.original {
            Some(original) => {
                fs_err::write(&path, original)?;
                JsonFileOutcome::Restored
            }
            None => {
                fs_err::remove_file(&path)?;
                JsonFileOutcome::Deleted
            }
        };
        return Ok(done(outcome, all(), Vec::new(), Vec::new()));
    }
    let original_empty_file = recorded.original.is_none();
    if eject::is_toml(&recorded.file) {
        let unmerged = match eject::unmerge_toml(&current, &edits, recorded.original.as_deref()) {
            Ok(unmerged) => unmerged,
            Err(error) => {
                let warning = format!(
                    "{} no longer parses as TOML ({error}); left it as it is (remove eject's keys by hand)",
                    path.display()
                );
                return Ok(done(
                    JsonFileOutcome::Unparsable,
                    Vec::new(),
                    all(),
                    vec![warning],
                ));
            }
        };
        let outcome = if original_empty_file && unmerged.empty {
            fs_err::remove_file(&path)?;
            JsonFileOutcome::Deleted
        } else {
            fs_err::write(&path, &unmerged.text)?;
            JsonFileOutcome::Edited
        };
        let (left, removed): (Vec<&eject::JsonEdit>, Vec<&eject::JsonEdit>) = edits
            .iter()
            .copied()
            .partition(|e| unmerged.changed.contains(&e.describe()));
        return Ok(done(
            outcome,
            removed.into_iter().map(SettingRef::from).collect(),
            left.into_iter().map(SettingRef::from).collect(),
            unmerged
                .changed
                .into_iter()
                .map(|what| format!("{what} was changed since eject wrote it; left it in place"))
                .collect(),
        ));
    }
    let Ok(mut document) = serde_json::from_str::<Value>(&current) else {
        let warning = format!(
            "{} no longer parses as JSON; left it as it is (remove eject's keys by hand)",
            path.display()
        );
        return Ok(done(
            JsonFileOutcome::Unparsable,
            Vec::new(),
            all(),
            vec![warning],
        ));
    };
    let original_value: Option<Value> = recorded
        .original
        .as_deref()
        .and_then(|t| serde_json::from_str(t).ok());
    let (mut removed, mut left, mut warnings) = (Vec::new(), Vec::new(), Vec::new());
    for edit in &edits {
        if eject::remove_edit(&mut document, edit) {
            removed.push(SettingRef::from(*edit));
        } else {
            warnings.push(format!(
                "{} was changed since eject wrote it; left it in place",
                edit.describe()
            ));
            left.push(SettingRef::from(*edit));
        }
        eject::prune_empty(&mut document, &edit.path, original_value.as_ref());
    }
    let empty = document.as_object().is_some_and(|o| o.is_empty());
    let outcome = if original_empty_file && empty {
        fs_err::remove_file(&path)?;
        JsonFileOutcome::Deleted
    } else {
        fs_err::write(&path, eject::render_json(&document))?;
        JsonFileOutcome::Edited
    };
    Ok(done(outcome, removed, left, warnings))
}

/// What `--remove` took out and what it left, as `--json` prints it.
#[derive(Debug, Default, serde::Serialize)]
struct RemoveReport {
    /// The agents the removed ejection was for.
    agents: Vec<String>,
    /// The manifest read (and deleted); `null` when there was none, so nothing was removed.
    manifest: Option<&'static str>,
    removed: Removed,
    /// Each merged JSON or TOML file and what happened to it.
    json_files: Vec<JsonFileReport>,
    left: Left,
}

#[derive(Debug, Default, serde::Serialize)]
struct Removed {
    /// Files deleted: eject's copies, and merged files eject had created.
    files: Vec<String>,
    /// Keys and array entries taken out of merged files.
    settings: Vec<SettingRef>,
    /// Directories eject created, deleted because they were empty.
    dirs: Vec<String>,
}

#[derive(Debug, Default, serde::Serialize)]
struct Left {
    /// Recorded keys and entries left in place (changed since, or in a file that no longer parses).
    settings: Vec<SettingRef>,
    /// Directories eject created that hold files it did not write.
    dirs: Vec<String>,
}

#[derive(Debug, serde::Serialize)]
struct JsonFileReport {
    file: String,
    outcome: JsonFileOutcome,
}

fn remove(ctx: &Context, root: &Path, manifest: EjectManifest) -> Result<ExitCode> {
    let mut report = RemoveReport::default();
    if !root.join(MANIFEST_PATH).is_file() {
        if ctx.json {
            output::json(&report)?;
        } else if ctx.says() {
            output::info(&format!(
                "Nothing to remove: no {MANIFEST_PATH} in {}",
                root.display()
            ));
        }
        return Ok(ExitCode::SUCCESS);
    }
    report.agents = manifest.agents.clone();
    report.manifest = Some(MANIFEST_PATH);
    for recorded in &manifest.json_files {
        let restored = restore_json(root, recorded, &manifest)?;
        for warning in &restored.warnings {
            output::warn(warning);
        }
        if restored.outcome == JsonFileOutcome::Deleted {
            report.removed.files.push(recorded.file.clone());
        }
        report.removed.settings.extend(restored.removed);
        report.left.settings.extend(restored.left);
        report.json_files.push(JsonFileReport {
            file: recorded.file.clone(),
            outcome: restored.outcome,
        });
    }
    for file in &manifest.files {
        let path = root.join(&file.path);
        if fs_err::read(&path).is_ok_and(|bytes| eject::sha256_hex(&bytes) != file.sha256) {
            output::warn(&format!(
                "{} was changed since eject wrote it; removed it anyway (it is eject's file)",
                path.display()
            ));
        }
        if remove_file_if_present(&path)? {
            report.removed.files.push(file.path.clone());
        }
    }
    // The manifest itself goes too (named by `manifest`, not listed among the files).
    remove_file_if_present(&root.join(MANIFEST_PATH))?;
    let mut dirs = manifest.dirs.clone();
    report.removed.dirs = remove_empty_dirs(root, &mut dirs, &BTreeSet::new());
    for dir in &dirs {
        output::warn(&format!(
            "{} holds files eject did not write; left it in place",
            PathBuf::from(root).join(dir).display()
        ));
    }
    report.left.dirs = dirs;
    if ctx.json {
        output::json(&report)?;
    } else if ctx.says() {
        output::info(&format!(
            "Removed what eject wrote: {} file(s), {} setting(s), {} directory(ies)",
            report.removed.files.len(),
            report.removed.settings.len(),
            report.removed.dirs.len()
        ));
    }
    Ok(ExitCode::SUCCESS)
}
