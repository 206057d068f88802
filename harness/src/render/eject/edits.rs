//! The JSON and format-preserving TOML (`toml_edit`) edits that register ejected content in files
//! the user also edits, and their undo.

use serde_json::{Map, Value};

use super::conflicts::get;
use super::*;

/// Applies one edit to a document (an object); containers on the way are created.
pub fn apply_edit(document: &mut Value, edit: &JsonEdit) {
    let (parent_path, last) = match edit.kind {
        EditKind::Key => match edit.path.split_last() {
            Some((last, parent)) => (parent, Some(last)),
            None => return,
        },
        EditKind::Entry => (edit.path.as_slice(), None),
    };
    if !document.is_object() {
        *document = Value::Object(Map::new());
    }
    let mut value = document;
    for (index, key) in parent_path.iter().enumerate() {
        let Some(object) = value.as_object_mut() else {
            return;
        };
        let default = if last.is_none() && index + 1 == parent_path.len() {
            Value::Array(Vec::new())
        } else {
            Value::Object(Map::new())
        };
        value = object.entry(key.clone()).or_insert(default);
    }
    match last {
        Some(key) => {
            if let Some(object) = value.as_object_mut() {
                object.insert(key.clone(), edit.value.clone());
            }
        }
        None => {
            if let Some(items) = value.as_array_mut() {
                if !items.contains(&edit.value) {
                    items.push(edit.value.clone());
                }
            }
        }
    }
}

/// Takes one edit out of a document: the key when it still holds eject's value, or the first
/// equal array entry. Returns false when the value was not found (changed by the user).
pub fn remove_edit(document: &mut Value, edit: &JsonEdit) -> bool {
    match edit.kind {
        EditKind::Key => {
            let Some((last, parent)) = edit.path.split_last() else {
                return false;
            };
            let Some(object) = get_mut(document, parent).and_then(Value::as_object_mut) else {
                return false;
            };
            if object.get(last) == Some(&edit.value) {
                object.shift_remove(last);
                true
            } else {
                false
            }
        }
        EditKind::Entry => {
            let Some(items) = get_mut(document, &edit.path).and_then(Value::as_array_mut) else {
                return false;
            };
            match items.iter().position(|item| *item == edit.value) {
                Some(index) => {
                    items.remove(index);
                    true
                }
                None => false,
            }
        }
    }
}

fn get_mut<'a>(document: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter()
        .try_fold(document, |value, key| value.as_object_mut()?.get_mut(key))
}

/// Removes containers along `path` that are empty now and did not exist in `original`.
pub fn prune_empty(document: &mut Value, path: &[String], original: Option<&Value>) {
    for depth in (1..=path.len()).rev() {
        let prefix = &path[..depth];
        let existed = original.is_some_and(|o| get(o, prefix).is_some());
        if existed {
            continue;
        }
        let empty = match get(document, prefix) {
            Some(Value::Object(o)) => o.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        if empty {
            if let Some(parent) =
                get_mut(document, &prefix[..depth - 1]).and_then(Value::as_object_mut)
            {
                parent.shift_remove(&prefix[depth - 1]);
            }
        }
    }
}

/// Renders a JSON document the way eject writes it.
pub fn render_json(document: &Value) -> String {
    let mut text = serde_json::to_string_pretty(document).unwrap_or_else(|_| "{}".into());
    text.push('\n');
    text
}

/// Whether eject merges into `file` as TOML (format-preserving) rather than as JSON.
pub fn is_toml(file: &str) -> bool {
    file.ends_with(".toml")
}

/// A TOML document as its JSON equivalent (what the conflict check and the manifest compare).
pub fn toml_to_json(text: &str) -> Result<Value, String> {
    let table: toml::Table = toml::from_str(text).map_err(|error| error.to_string())?;
    serde_json::to_value(table).map_err(|error| error.to_string())
}

fn parse_toml_document(text: Option<&str>) -> Result<toml_edit::DocumentMut, String> {
    text.unwrap_or("")
        .parse::<toml_edit::DocumentMut>()
        .map_err(|error| error.to_string())
}

/// A JSON value as a TOML item laid out the way `toml` writes it (sub-tables as `[a.b]` sections),
/// with no document position, so it renders right after the table it is inserted into.
fn toml_item(key: &str, value: &Value) -> Result<toml_edit::Item, String> {
    let converted = toml::Value::try_from(value).map_err(|error| error.to_string())?;
    let mut root = toml::Table::new();
    root.insert(key.to_owned(), converted);
    let text = toml::to_string(&root).map_err(|error| error.to_string())?;
    let document = parse_toml_document(Some(&text))?;
    let mut item = document
        .get(key)
        .cloned()
        .ok_or_else(|| format!("`{key}` did not render"))?;
    clear_positions(&mut item);
    if let Some(table) = item.as_table_mut() {
        table.decor_mut().set_prefix("\n");
    }
    Ok(item)
}

fn clear_positions(item: &mut toml_edit::Item) {
    match item {
        toml_edit::Item::Table(table) => {
            table.set_position(None);
            for (_, child) in table.iter_mut() {
                clear_positions(child);
            }
        }
        toml_edit::Item::ArrayOfTables(tables) => {
            for table in tables.iter_mut() {
                table.set_position(None);
                for (_, child) in table.iter_mut() {
                    clear_positions(child);
                }
            }
        }
        _ => {}
    }
}

/// The table at `path`, created (implicit, so it has no header of its own) when missing; `None`
/// when something on the way is not a table.
fn toml_table_mut<'a>(
    document: &'a mut toml_edit::DocumentMut,
    path: &[String],
) -> Option<&'a mut dyn toml_edit::TableLike> {
    let mut table: &mut dyn toml_edit::TableLike = document.as_table_mut();
    for key in path {
        if table.get(key).is_none() {
            let mut created = toml_edit::Table::new();
            created.set_implicit(true);
            table.insert(key, toml_edit::Item::Table(created));
        }
        table = table.get_mut(key)?.as_table_like_mut()?;
    }
    Some(table)
}

/// Applies one [`EditKind::Key`] edit to a TOML document, keeping everything else as written.
fn apply_toml_edit(document: &mut toml_edit::DocumentMut, edit: &JsonEdit) -> Result<(), String> {
    let Some((last, parent)) = edit.path.split_last() else {
        return Ok(());
    };
    if edit.kind != EditKind::Key {
        return Err(format!("{}: TOML files take keys only", edit.describe()));
    }
    let item = toml_item(last, &edit.value)?;
    let table = toml_table_mut(document, parent)
        .ok_or_else(|| format!("{}: a parent is not a TOML table", edit.describe()))?;
    table.insert(last, item);
    Ok(())
}

/// Takes one key edit out of a TOML document when it still holds eject's value; false otherwise.
fn remove_toml_edit(document: &mut toml_edit::DocumentMut, edit: &JsonEdit) -> bool {
    let Some((last, parent)) = edit.path.split_last() else {
        return false;
    };
    let holds_value = toml_to_json(&document.to_string())
        .ok()
        .is_some_and(|value| get(&value, &edit.path) == Some(&edit.value));
    if edit.kind != EditKind::Key || !holds_value {
        return false;
    }
    let Some(table) = existing_toml_table_mut(document, parent) else {
        return false;
    };
    table.remove(last).is_some()
}

/// The table at `path` when every step exists and is a table.
fn existing_toml_table_mut<'a>(
    document: &'a mut toml_edit::DocumentMut,
    path: &[String],
) -> Option<&'a mut dyn toml_edit::TableLike> {
    let root: &mut dyn toml_edit::TableLike = document.as_table_mut();
    path.iter()
        .try_fold(root, |table, key| table.get_mut(key)?.as_table_like_mut())
}

/// Removes tables along `path` that are empty now and did not exist in `original`.
fn prune_empty_toml(
    document: &mut toml_edit::DocumentMut,
    path: &[String],
    original: Option<&Value>,
) {
    for depth in (1..path.len()).rev() {
        let prefix = &path[..depth];
        if original.is_some_and(|o| get(o, prefix).is_some()) {
            continue;
        }
        let Some(table) = existing_toml_table_mut(document, &prefix[..depth - 1]) else {
            continue;
        };
        let last = &prefix[depth - 1];
        let empty = table
            .get(last)
            .and_then(toml_edit::Item::as_table_like)
            .is_some_and(|t| t.is_empty());
        if empty {
            table.remove(last);
        }
    }
}

/// The new text of a TOML file eject merges into: `current` (the file as it is, `None` when
/// absent) with eject's `previous` keys taken out and `edits` put in; all other content is kept
/// byte for byte. `original` is the file before the first eject (tables it had are never pruned).
pub fn merge_toml(
    current: Option<&str>,
    previous: &[&JsonEdit],
    edits: &[&JsonEdit],
    original: Option<&str>,
) -> Result<String, String> {
    let mut document = parse_toml_document(current)?;
    let original_value = original.and_then(|text| toml_to_json(text).ok());
    for edit in previous {
        remove_toml_edit(&mut document, edit);
        prune_empty_toml(&mut document, &edit.path, original_value.as_ref());
    }
    for edit in edits {
        apply_toml_edit(&mut document, edit)?;
    }
    Ok(document.to_string())
}

/// A TOML file with eject's keys taken out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnmergedToml {
    pub text: String,
    /// Nothing but whitespace and comments is left.
    pub empty: bool,
    /// The edits whose key no longer holds eject's value (left in place).
    pub changed: Vec<String>,
}

/// Takes `edits` out of a TOML file the user may have edited since, keeping the rest as written.
pub fn unmerge_toml(
    current: &str,
    edits: &[&JsonEdit],
    original: Option<&str>,
) -> Result<UnmergedToml, String> {
    let mut document = parse_toml_document(Some(current))?;
    let original_value = original.and_then(|text| toml_to_json(text).ok());
    let mut changed = Vec::new();
    for edit in edits {
        if !remove_toml_edit(&mut document, edit) {
            changed.push(edit.describe());
        }
        prune_empty_toml(&mut document, &edit.path, original_value.as_ref());
    }
    let text = document.to_string();
    Ok(UnmergedToml {
        empty: document.as_table().is_empty() && text.trim().is_empty(),
        text,
        changed,
    })
}
