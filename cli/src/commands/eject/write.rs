//! Writing an [`EjectPlan`] into the project in one transaction: directories, files, merged JSON
//! and TOML settings, each recorded in the manifest.
//!
//! Must never replace a file or setting the manifest does not record; every check happens before
//! the first write.

use std::collections::BTreeSet;
use std::path::Path;

use agentpack_harness::render::eject::{
    self, EjectManifest, EjectPlan, ManifestFile, ManifestJsonFile, EJECT_DIR, MANIFEST_PATH,
    MANIFEST_VERSION,
};
use anyhow::{Context as _, Result};
use serde_json::Value;

use super::*;
use crate::output;

/// Creates the directories of `relative` (a directory path) that are missing, recording them.
pub(super) fn create_dirs(
    tx: &mut agentpack_fs::Transaction,
    root: &Path,
    relative: &str,
    created: &mut Vec<String>,
) -> Result<()> {
    let mut current = String::new();
    for component in relative.split('/') {
        if !current.is_empty() {
            current.push('/');
        }
        current.push_str(component);
        let path = root.join(&current);
        if fs_err::symlink_metadata(&path).is_err() {
            tx.create_dir_all(&path)?;
            if !created.contains(&current) {
                created.push(current.clone());
            }
        }
    }
    Ok(())
}

/// Writes one of eject's own files atomically, mode 0755 or 0644 (an earlier read-only copy is
/// replaced, not written into).
pub(super) fn write_file(
    tx: &mut agentpack_fs::Transaction,
    path: &Path,
    bytes: &[u8],
    executable: bool,
) -> Result<()> {
    let options = agentpack_fs::WriteOptions {
        mode: agentpack_fs::FileMode::Exact(if executable { 0o755 } else { 0o644 }),
        durability: agentpack_fs::Durability::None,
        temp: agentpack_fs::TempName::Hidden,
    };
    tx.write(path, bytes, &options)?;
    Ok(())
}

/// Writes a merged settings file of the user's: through a symbolic link to the file it names (a
/// dotfiles link stays a link), keeping the file's mode.
pub(super) fn write_user_file(
    tx: &mut agentpack_fs::Transaction,
    path: &Path,
    text: &str,
) -> Result<()> {
    let target = match fs_err::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => fs_err::canonicalize(path)?,
        _ => path.to_path_buf(),
    };
    let options =
        agentpack_fs::WriteOptions::shared_file().durability(agentpack_fs::Durability::None);
    tx.write(&target, text.as_bytes(), &options)?;
    Ok(())
}

/// Writes a checked plan, replaces or takes out what the previous eject wrote and the plan no
/// longer has, and records the result.
pub(super) fn write_plan(
    root: &Path,
    plan: &EjectPlan,
    previous: &EjectManifest,
    generation: &str,
) -> Result<EjectManifest> {
    // One transaction: a failure part way puts back every file written or removed before it.
    crate::fs_transaction::run(|tx| write_plan_in(tx, root, plan, previous, generation))
}

pub(super) fn write_plan_in(
    tx: &mut agentpack_fs::Transaction,
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
    create_dirs(tx, root, EJECT_DIR, &mut dirs)?;
    for file in &plan.files {
        if let Some((parent, _)) = file.path.rsplit_once('/') {
            create_dirs(tx, root, parent, &mut dirs)?;
        }
        write_file(tx, &root.join(&file.path), &file.bytes, file.executable)?;
        files.push(ManifestFile {
            path: file.path.clone(),
            sha256: eject::sha256_hex(&file.bytes),
        });
    }
    for dir in &plan.owned_dirs {
        create_dirs(tx, root, dir, &mut dirs)?;
    }
    let planned: BTreeSet<&str> = plan.files.iter().map(|f| f.path.as_str()).collect();
    for stale in previous
        .files
        .iter()
        .filter(|f| !planned.contains(f.path.as_str()))
    {
        tx.remove_file(&root.join(&stale.path))?;
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
            create_dirs(tx, root, parent, &mut dirs)?;
        }
        write_user_file(tx, &path, &text)?;
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
    tx.write(
        &root.join(MANIFEST_PATH),
        text.as_bytes(),
        &agentpack_fs::WriteOptions::shared_file(),
    )?;
    Ok(manifest)
}

/// The new text of a JSON file eject merges into: eject's previous keys taken out, the plan's put in.
pub(super) fn merged_json(
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
pub(super) fn needed_dirs(plan: &EjectPlan, json_files: &[ManifestJsonFile]) -> BTreeSet<String> {
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
