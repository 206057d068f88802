//! `agentpack eject --remove`: taking out exactly what `.agentpack/eject/manifest.json` records
//! (files, JSON settings restored to what they were, emptied directories) and reporting it.
//!
//! Must never remove a file or setting the manifest does not record, or one the user changed since.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agentpack_harness::render::eject::{self, EjectManifest, ManifestJsonFile, MANIFEST_PATH};
use anyhow::Result;
use serde_json::Value;

use super::*;
use crate::context::Context;
use crate::output;

/// Removes recorded directories that are empty and not needed, deepest first; they leave the record.
/// Returns the directories it removed (not those that were already gone).
pub(super) fn remove_empty_dirs(
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
pub(super) fn remove_file_if_present(path: &Path) -> Result<bool> {
    match fs_err::remove_file(path) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// What happened to one merged JSON or TOML file on `--remove`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum JsonFileOutcome {
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
pub(super) struct SettingRef {
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
pub(super) struct RestoredJson {
    pub(super) outcome: JsonFileOutcome,
    /// Eject's keys and entries taken out.
    pub(super) removed: Vec<SettingRef>,
    /// Eject's keys and entries left in place (changed since, or the file no longer parses).
    pub(super) left: Vec<SettingRef>,
    pub(super) warnings: Vec<String>,
}

/// Puts one merged JSON file back: byte for byte when it still holds what eject wrote, otherwise
/// key by key. Says what it did, with warnings for keys the user changed since.
pub(super) fn restore_json(
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
    // The file no longer parses as `format`: left as it is, every key of eject's still in it.
    let unparsable = |format: String| {
        let warning = format!(
            "{} no longer parses as {format}; left it as it is (remove eject's keys by hand)",
            path.display()
        );
        done(
            JsonFileOutcome::Unparsable,
            Vec::new(),
            all(),
            vec![warning],
        )
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
            Err(error) => return Ok(unparsable(format!("TOML ({error})"))),
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
        return Ok(unparsable("JSON".to_owned()));
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
pub(super) struct RemoveReport {
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
pub(super) struct Removed {
    /// Files deleted: eject's copies, and merged files eject had created.
    files: Vec<String>,
    /// Keys and array entries taken out of merged files.
    settings: Vec<SettingRef>,
    /// Directories eject created, deleted because they were empty.
    dirs: Vec<String>,
}

#[derive(Debug, Default, serde::Serialize)]
pub(super) struct Left {
    /// Recorded keys and entries left in place (changed since, or in a file that no longer parses).
    settings: Vec<SettingRef>,
    /// Directories eject created that hold files it did not write.
    dirs: Vec<String>,
}

#[derive(Debug, serde::Serialize)]
pub(super) struct JsonFileReport {
    file: String,
    outcome: JsonFileOutcome,
}

pub(super) fn remove(ctx: &Context, root: &Path, manifest: EjectManifest) -> Result<ExitCode> {
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
