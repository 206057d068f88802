//! What eject will not replace: the one place the rule "never replace something the manifest does
//! not record" lives.

use serde_json::Value;

use super::*;

/// Something eject will not replace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Project-relative path (with `#/key/path` for a JSON setting).
    pub what: String,
    pub reason: String,
}

/// What the caller found in the project at the plan's paths.
pub trait ProjectState {
    /// Whether anything (file, directory or link) exists at the project-relative path.
    fn exists(&self, path: &str) -> bool;
    /// Whether the path exists and is a real directory (not a link).
    fn is_real_dir(&self, path: &str) -> bool;
    /// A JSON file's parsed content: `Ok(None)` when absent, `Err` when it cannot be read or parsed.
    fn json(&self, path: &str) -> Result<Option<Value>, String>;
}

/// Every conflict between a plan and the project, given what eject wrote last time. Also drops
/// edits whose value is already in place and not eject's (they need no writing and must survive
/// `--remove`).
pub fn check_conflicts(
    plan: &mut EjectPlan,
    previous: &EjectManifest,
    project: &dyn ProjectState,
) -> Vec<Conflict> {
    let mut conflicts = Vec::new();
    let mut parents = BTreeSet::new();
    for file in &plan.files {
        if project.exists(&file.path) && !previous.has_file(&file.path) {
            conflicts.push(Conflict {
                what: file.path.clone(),
                reason: "exists and was not written by eject".into(),
            });
        }
        let mut parent = file.path.as_str();
        while let Some((dir, _)) = parent.rsplit_once('/') {
            parents.insert(dir.to_owned());
            parent = dir;
        }
    }
    for dir in parents {
        if project.exists(&dir) && !project.is_real_dir(&dir) && !previous.has_dir(&dir) {
            conflicts.push(Conflict {
                what: dir,
                reason: "is a file or a link where eject needs a directory".into(),
            });
        }
    }
    for dir in &plan.owned_dirs {
        if project.exists(dir) && !previous.has_dir(dir) {
            conflicts.push(Conflict {
                what: dir.clone(),
                reason: "exists and was not created by eject".into(),
            });
        }
    }
    let mut documents: BTreeMap<String, Option<Value>> = BTreeMap::new();
    for edit in &plan.edits {
        if !documents.contains_key(&edit.file) {
            match project.json(&edit.file) {
                Ok(document) => {
                    documents.insert(edit.file.clone(), document);
                }
                Err(reason) => {
                    conflicts.push(Conflict {
                        what: edit.file.clone(),
                        reason,
                    });
                    documents.insert(edit.file.clone(), None);
                }
            }
        }
    }
    let mut kept = Vec::new();
    for edit in std::mem::take(&mut plan.edits) {
        let document = documents.get(&edit.file).cloned().flatten();
        // What the user has there, with eject's own previous value taken out.
        let theirs = document.map(|mut document| {
            if let Some(recorded) = previous.edit_at(&edit) {
                remove_edit(&mut document, recorded);
            }
            document
        });
        let mut drop = false;
        match edit.kind {
            EditKind::Key => {
                if let Some(existing) = theirs.as_ref().and_then(|d| get(d, &edit.path)) {
                    if *existing == edit.value {
                        drop = true;
                    } else {
                        conflicts.push(Conflict {
                            what: edit.describe(),
                            reason: "is already set to a different value that eject did not write"
                                .into(),
                        });
                    }
                } else {
                    conflicts.extend(parent_conflict(theirs.as_ref(), &edit));
                }
            }
            EditKind::Entry => match theirs.as_ref().and_then(|d| get(d, &edit.path)) {
                Some(Value::Array(items)) => {
                    let recorded_here = previous
                        .edits
                        .iter()
                        .any(|r| r.same_place(&edit) && r.value == edit.value);
                    if items.contains(&edit.value) && !recorded_here {
                        drop = true;
                    }
                }
                Some(_) => conflicts.push(Conflict {
                    what: edit.describe(),
                    reason: "is not a JSON array".into(),
                }),
                None => conflicts.extend(parent_conflict(theirs.as_ref(), &edit)),
            },
        }
        if !drop {
            kept.push(edit);
        }
    }
    plan.edits = kept;
    conflicts
}

/// The conflict of an edit whose place is missing from `theirs` because a parent of it is not a
/// JSON object (so the edit cannot add it).
fn parent_conflict(theirs: Option<&Value>, edit: &JsonEdit) -> Option<Conflict> {
    let parent = first_non_object(theirs?, &edit.path[..edit.path.len() - 1])?;
    Some(Conflict {
        what: edit.describe(),
        reason: format!("`{parent}` is not a JSON object"),
    })
}

pub(super) fn get<'a>(document: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(document, |value, key| value.as_object()?.get(key))
}

/// The first prefix of `path` that exists and is not an object, if any.
fn first_non_object(document: &Value, path: &[String]) -> Option<String> {
    let mut value = document;
    if !value.is_object() {
        return Some("(the document)".into());
    }
    for (index, key) in path.iter().enumerate() {
        match value.as_object().and_then(|o| o.get(key)) {
            None => return None,
            Some(next) if next.is_object() => value = next,
            Some(_) => return Some(path[..=index].join("/")),
        }
    }
    None
}
