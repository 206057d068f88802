//! Format-preserving edits of `agentpack.toml` for the commands that change it (`init`, `add`,
//! `remove`, `mode ...`, `mcp add/remove`).
//!
//! Owns: [`ManifestDocument`] (a `toml_edit::DocumentMut`) and [`render_init_manifest`]. Every
//! edit touches only the keys it names: comments, key order, spacing and quoting elsewhere
//! survive. Edits do not validate the rest of the file; callers re-check the result with
//! [`ManifestDocument::to_manifest`] before writing it. Never writes files.

use std::fmt;
use std::path::{Path, PathBuf};

use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, TableLike, Value};

use crate::lock::toml_basic_string;
use crate::manifest::{Base, Dependency, Manifest, ManifestError, McpServer, Pin, DEFAULT_MODE};
use crate::module_id::ModuleId;
use crate::selector::Selector;

/// The text `agentpack init` writes: the two identity keys, a blank line and `[dependencies]`.
pub fn render_init_manifest(name: &str, version: &str) -> String {
    format!(
        "name = {}\nversion = {}\n\n[dependencies]\n",
        toml_basic_string(name),
        toml_basic_string(version)
    )
}

/// Why an edit could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The file is not valid TOML.
    #[error("{} is not valid TOML: {message}\n  fix  correct the syntax at the position shown", path.display())]
    Syntax {
        /// The manifest path.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A key the edit needs is not a table.
    #[error("cannot edit {}: `{key}` is not a table\n  fix  make `{key}` a table ([{key}]) and try again", path.display())]
    NotATable {
        /// The manifest path.
        path: PathBuf,
        /// The dotted key.
        key: String,
    },
    /// `mode create` for a mode that exists.
    #[error("mode {name:?} already exists in {}", path.display())]
    ModeExists {
        /// The manifest path.
        path: PathBuf,
        /// The mode.
        name: String,
    },
    /// A mode command for a mode that is not declared.
    #[error("no mode {name:?} in {}\n  fix  create it with `agentpack mode create {name}`", path.display())]
    UnknownMode {
        /// The manifest path.
        path: PathBuf,
        /// The mode.
        name: String,
    },
    /// `mode delete default`.
    #[error("the default mode is reserved and cannot be deleted; edit it with `agentpack mode base default ...` instead")]
    DefaultReserved,
}

/// An `agentpack.toml` open for editing.
#[derive(Debug, Clone)]
pub struct ManifestDocument {
    doc: DocumentMut,
    path: PathBuf,
}

impl fmt::Display for ManifestDocument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.doc)
    }
}

fn pin_value(dependency: &Dependency) -> Value {
    let table = |key: &str, value: &str| {
        let mut t = InlineTable::new();
        t.insert(key, Value::from(value));
        Value::InlineTable(t)
    };
    match dependency {
        Dependency::Path(p) => table("path", p),
        Dependency::Remote(pin) => match pin {
            Pin::Unpinned => Value::InlineTable(InlineTable::new()),
            Pin::Version(c) => Value::from(c.as_str()),
            Pin::Ref(name) => Value::from(name.as_str()),
            Pin::Branch(b) => table("branch", b),
            Pin::Tag(t) => table("tag", t),
            Pin::Commit(c) => table("commit", c.as_str()),
            Pin::Digest(d) => table("digest", d),
        },
    }
}

/// Replaces the value under `key` in `table`, keeping the key's spelling, its comments and
/// alignment, and the old value's trailing comment; inserts at the end when the key is new.
fn set_value(table: &mut dyn TableLike, key: &str, mut value: Value) {
    match table.get_mut(key) {
        Some(Item::Value(old)) => {
            *value.decor_mut() = old.decor().clone();
            *old = value;
        }
        Some(item) => *item = Item::Value(value),
        None => {
            table.insert(key, Item::Value(value));
        }
    }
}

/// Makes `old` hold exactly the keys of `new`: values of keys present in both are replaced in
/// place (key decor kept), keys only in `old` are removed, new keys are appended. Sub-tables are
/// merged the same way.
fn merge_table(old: &mut Table, new: Table) {
    let stale: Vec<String> = old
        .iter()
        .map(|(k, _)| k.to_owned())
        .filter(|k| !new.contains_key(k))
        .collect();
    for key in stale {
        old.remove(&key);
    }
    for (key, item) in new {
        match (old.get_mut(&key), item) {
            (Some(Item::Table(old_sub)), Item::Table(new_sub)) => merge_table(old_sub, new_sub),
            (Some(Item::Value(_)), Item::Value(v)) => set_value(old, &key, v),
            (_, item) => {
                old.insert(&key, item);
            }
        }
    }
}

fn string_array(values: &[String]) -> Value {
    let mut array = Array::new();
    for v in values {
        array.push(v.as_str());
    }
    Value::Array(array)
}

fn is_multiline(array: &Array) -> bool {
    array.iter().any(|v| {
        v.decor()
            .prefix()
            .and_then(|p| p.as_str())
            .is_some_and(|p| p.contains('\n'))
    })
}

/// Appends `text` to `array` in the array's own style (one per line when it is multi-line).
fn push_string(array: &mut Array, text: &str) {
    if is_multiline(array) {
        let prefix = array
            .iter()
            .last()
            .and_then(|v| {
                v.decor()
                    .prefix()
                    .and_then(|p| p.as_str())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| "\n  ".to_owned());
        array.push_formatted(Value::from(text).decorated(prefix, ""));
    } else {
        array.push(text);
    }
}

/// Removes every string in `array` for which `drop` is true; returns how many.
fn remove_strings(array: &mut Array, drop: impl Fn(&str) -> bool) -> usize {
    let before = array.len();
    let multiline = is_multiline(array);
    array.retain(|v| !v.as_str().is_some_and(&drop));
    if !multiline {
        array.fmt();
    }
    before - array.len()
}

/// Removes matching strings from the array `key` of `table`; drops the key when the removal
/// leaves the array empty. Returns how many strings were removed.
fn remove_from_list(table: &mut dyn TableLike, key: &str, drop: impl Fn(&str) -> bool) -> usize {
    let Some(array) = table.get_mut(key).and_then(Item::as_array_mut) else {
        return 0;
    };
    let removed = remove_strings(array, drop);
    if removed > 0 && array.is_empty() {
        table.remove(key);
    }
    removed
}

impl ManifestDocument {
    /// Parses manifest text for editing; `path` is used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, EditError> {
        let doc = text.parse::<DocumentMut>().map_err(|e| EditError::Syntax {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        Ok(Self {
            doc,
            path: path.to_path_buf(),
        })
    }

    /// The edited text re-parsed as a [`Manifest`]: the check to run before writing.
    pub fn to_manifest(&self) -> Result<Manifest, ManifestError> {
        Manifest::parse(&self.doc.to_string(), &self.path)
    }

    /// The underlying document, for edits this type does not offer.
    pub fn document(&self) -> &DocumentMut {
        &self.doc
    }

    fn not_a_table(&self, key: &str) -> EditError {
        EditError::NotATable {
            path: self.path.clone(),
            key: key.to_owned(),
        }
    }

    /// The table at `key` under the root, created (as a `[key]` header, or implicit when
    /// `implicit`) when absent.
    fn root_table(&mut self, key: &str, implicit: bool) -> Result<&mut dyn TableLike, EditError> {
        if !self.doc.contains_key(key) {
            let mut t = Table::new();
            t.set_implicit(implicit);
            self.doc.insert(key, Item::Table(t));
        }
        let err = self.not_a_table(key);
        self.doc
            .get_mut(key)
            .and_then(Item::as_table_like_mut)
            .ok_or(err)
    }

    /// Adds `module` under `[dependencies]`, or replaces its value in place (position, key
    /// spelling and trailing comment kept). Short forms are written as strings (`"^1.2"`,
    /// `"main"`), the others as inline tables (`{}`, `{ tag = "v2.1.0" }`, `{ path = "../x" }`).
    pub fn set_dependency(
        &mut self,
        module: &ModuleId,
        dependency: &Dependency,
    ) -> Result<(), EditError> {
        let deps = self.root_table("dependencies", false)?;
        set_value(deps, module.as_str(), pin_value(dependency));
        Ok(())
    }

    /// Removes `module` from `[dependencies]`; returns whether it was there.
    pub fn remove_dependency(&mut self, module: &ModuleId) -> bool {
        self.doc
            .get_mut("dependencies")
            .and_then(Item::as_table_like_mut)
            .and_then(|deps| deps.remove(module.as_str()))
            .is_some()
    }

    fn modes_table(&mut self) -> Result<&mut dyn TableLike, EditError> {
        self.root_table("modes", true)
    }

    fn mode_table(
        &mut self,
        name: &str,
        create_default: bool,
    ) -> Result<&mut dyn TableLike, EditError> {
        let path = self.path.clone();
        let modes = self.modes_table()?;
        if modes.get(name).is_none() {
            if !(create_default && name == DEFAULT_MODE) {
                return Err(EditError::UnknownMode {
                    path,
                    name: name.to_owned(),
                });
            }
            let mut t = Table::new();
            t.insert("base", toml_edit::value(Base::All.as_str()));
            modes.insert(name, Item::Table(t));
        }
        modes
            .get_mut(name)
            .and_then(Item::as_table_like_mut)
            .ok_or(EditError::NotATable {
                path,
                key: format!("modes.{name}"),
            })
    }

    /// `mode create`: adds `[modes.<name>]` with `base = "<base>"`. Refused when it exists.
    pub fn create_mode(&mut self, name: &str, base: Base) -> Result<(), EditError> {
        let path = self.path.clone();
        let modes = self.modes_table()?;
        if modes.contains_key(name) {
            return Err(EditError::ModeExists {
                path,
                name: name.to_owned(),
            });
        }
        let mut t = Table::new();
        t.insert("base", toml_edit::value(base.as_str()));
        modes.insert(name, Item::Table(t));
        Ok(())
    }

    /// `mode base`: sets `base`. The default mode is declared on first use; any other mode must
    /// exist.
    pub fn set_mode_base(&mut self, name: &str, base: Base) -> Result<(), EditError> {
        let mode = self.mode_table(name, true)?;
        set_value(mode, "base", Value::from(base.as_str()));
        Ok(())
    }

    /// `mode enable`: adds `selector` to `enable` (unless present) and removes it from
    /// `disable`. Returns whether the file changed.
    pub fn mode_enable(&mut self, name: &str, selector: &Selector) -> Result<bool, EditError> {
        self.toggle(name, selector, "enable", "disable")
    }

    /// `mode disable`: adds `selector` to `disable` (unless present) and removes it from
    /// `enable`. Returns whether the file changed.
    pub fn mode_disable(&mut self, name: &str, selector: &Selector) -> Result<bool, EditError> {
        self.toggle(name, selector, "disable", "enable")
    }

    fn toggle(
        &mut self,
        name: &str,
        selector: &Selector,
        add_to: &str,
        remove_from: &str,
    ) -> Result<bool, EditError> {
        let path = self.path.clone();
        let text = selector.to_string();
        let mode = self.mode_table(name, true)?;
        let mut changed = false;
        changed |= remove_from_list(mode, remove_from, |s| s == text) > 0;
        if mode.get(add_to).is_none() {
            mode.insert(add_to, Item::Value(Value::Array(Array::new())));
        }
        let list =
            mode.get_mut(add_to)
                .and_then(Item::as_array_mut)
                .ok_or(EditError::NotATable {
                    path,
                    key: format!("modes.{name}.{add_to}"),
                })?;
        if !list.iter().any(|v| v.as_str() == Some(text.as_str())) {
            push_string(list, &text);
            changed = true;
        }
        Ok(changed)
    }

    /// `mode delete`: removes `[modes.<name>]`. `default` is reserved.
    pub fn delete_mode(&mut self, name: &str) -> Result<(), EditError> {
        if name == DEFAULT_MODE {
            return Err(EditError::DefaultReserved);
        }
        let path = self.path.clone();
        let removed = self
            .doc
            .get_mut("modes")
            .and_then(Item::as_table_like_mut)
            .and_then(|modes| modes.remove(name));
        if removed.is_none() {
            return Err(EditError::UnknownMode {
                path,
                name: name.to_owned(),
            });
        }
        Ok(())
    }

    /// For `remove`: drops every `package:` and `package-path:` selector naming `module` from
    /// every mode's `enable` and `disable`. Returns how many were removed.
    pub fn remove_selectors_for_module(&mut self, module: &ModuleId) -> usize {
        let Some(modes) = self.doc.get_mut("modes").and_then(Item::as_table_like_mut) else {
            return 0;
        };
        let mut removed = 0;
        for (_, mode) in modes.iter_mut() {
            let Some(mode) = mode.as_table_like_mut() else {
                continue;
            };
            for list in ["enable", "disable"] {
                removed += remove_from_list(mode, list, |s| {
                    Selector::parse(s).is_ok_and(|sel| sel.module() == Some(module))
                });
            }
        }
        removed
    }

    /// `mcp add`: writes `[mcp.servers.<name>]` (replacing an existing definition in place).
    /// Keys are written in the order type, command, args, env, url, headers, cwd, disabled, then
    /// an `[mcp.servers.<name>.oauth]` table.
    pub fn set_mcp_server(&mut self, name: &str, server: &McpServer) -> Result<(), EditError> {
        let path = self.path.clone();
        let mcp = self.root_table("mcp", true)?;
        if mcp.get("servers").is_none() {
            let mut t = Table::new();
            t.set_implicit(true);
            mcp.insert("servers", Item::Table(t));
        }
        let servers = mcp
            .get_mut("servers")
            .and_then(Item::as_table_like_mut)
            .ok_or(EditError::NotATable {
                path,
                key: "mcp.servers".to_owned(),
            })?;
        let mut t = Table::new();
        let mut put = |key: &str, v: Value| {
            t.insert(key, Item::Value(v));
        };
        if let Some(v) = &server.server_type {
            put("type", Value::from(v.as_str()));
        }
        if let Some(v) = &server.command {
            put("command", Value::from(v.as_str()));
        }
        if !server.args.is_empty() {
            put("args", string_array(&server.args));
        }
        let map = |m: &indexmap::IndexMap<String, String>| {
            let mut it = InlineTable::new();
            for (k, v) in m {
                it.insert(k, Value::from(v.as_str()));
            }
            Value::InlineTable(it)
        };
        if !server.env.is_empty() {
            put("env", map(&server.env));
        }
        if let Some(v) = &server.url {
            put("url", Value::from(v.as_str()));
        }
        if !server.headers.is_empty() {
            put("headers", map(&server.headers));
        }
        if let Some(v) = &server.cwd {
            put("cwd", Value::from(v.as_str()));
        }
        if server.disabled {
            put("disabled", Value::from(true));
        }
        if let Some(oauth) = &server.oauth {
            let mut o = Table::new();
            if let Some(v) = &oauth.client_id {
                o.insert("client_id", toml_edit::value(v.as_str()));
            }
            if let Some(v) = &oauth.client_secret {
                o.insert("client_secret", toml_edit::value(v.as_str()));
            }
            if let Some(v) = oauth.callback_port {
                o.insert("callback_port", toml_edit::value(i64::from(v)));
            }
            if !oauth.scopes.is_empty() {
                o.insert("scopes", Item::Value(string_array(&oauth.scopes)));
            }
            if let Some(v) = &oauth.metadata_url {
                o.insert("metadata_url", toml_edit::value(v.as_str()));
            }
            t.insert("oauth", Item::Table(o));
        }
        match servers.get_mut(name) {
            Some(Item::Table(old)) => merge_table(old, t),
            _ => {
                servers.insert(name, Item::Table(t));
            }
        }
        Ok(())
    }

    /// `mcp remove`: removes `[mcp.servers.<name>]`; returns whether it was there.
    pub fn remove_mcp_server(&mut self, name: &str) -> bool {
        self.doc
            .get_mut("mcp")
            .and_then(Item::as_table_like_mut)
            .and_then(|mcp| mcp.get_mut("servers"))
            .and_then(Item::as_table_like_mut)
            .and_then(|servers| servers.remove(name))
            .is_some()
    }
}
