//! The mode editor's state and key handling: a pure state machine.
//!
//! Owns [`Editor`] (what is on screen and what the user has changed), [`Editor::handle`] (one key
//! in, one [`Action`] out) and the edit log. Edits are kept as a list of [`Op`]s and replayed on the
//! manifest text through the same format-preserving [`ManifestDocument`] edits the `agentpack mode`
//! subcommands use, so saving writes exactly what those commands would have written. Toggling an
//! item back to what the file already says drops its op, so the file is left as it was.
//!
//! Never reads or writes files, never draws: the shell (`super::run`) does I/O, `super::view` draws.

use std::path::{Path, PathBuf};

use agentpack_lockfile::{
    Base, EditError, Manifest, ManifestDocument, ManifestError, Mode, SelectionTarget, Selector,
};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What an item of the selector list stands for, as staging sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A package (`path` empty) or one of its files or directories.
    PackageFile { module: String, path: String },
    /// An MCP server and, for a plugin's server, the package that brings it.
    Mcp {
        name: String,
        module: Option<String>,
    },
    /// A file or directory of `./.agents/`.
    Agents { path: String },
}

impl Target {
    fn as_selection(&self) -> SelectionTarget<'_> {
        match self {
            Target::PackageFile { module, path } => SelectionTarget::PackageFile { module, path },
            Target::Mcp { name, module } => SelectionTarget::McpServer {
                name,
                module: module.as_deref(),
            },
            Target::Agents { path } => SelectionTarget::AgentsFile { path },
        }
    }
}

/// One toggleable row: a selector and what it selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub selector: Selector,
    pub target: Target,
    /// Where it comes from, shown after the name (`agentpack.toml`, a package...), or empty.
    pub note: String,
}

impl Item {
    /// The row for a selector the mode lists but the project does not have (any more).
    fn for_listed(selector: &Selector) -> Self {
        let target = match selector {
            Selector::Package(m) => Target::PackageFile {
                module: m.as_str().to_owned(),
                path: String::new(),
            },
            Selector::PackagePath { module, path } => Target::PackageFile {
                module: module.as_str().to_owned(),
                path: path.trim_end_matches('/').to_owned(),
            },
            Selector::Mcp(name) => Target::Mcp {
                name: name.clone(),
                module: None,
            },
            Selector::Agents(path) => Target::Agents {
                path: path.trim_end_matches('/').to_owned(),
            },
        };
        Self {
            selector: selector.clone(),
            target,
            note: "not in the project".to_owned(),
        }
    }
}

/// What one agent stages for the selected mode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentSummary {
    pub agent: String,
    pub skills: Vec<String>,
    pub commands: Vec<String>,
    pub agents: Vec<String>,
    pub rules: Vec<String>,
    pub mcp_servers: usize,
}

/// The staged-content summary of one mode, as it was when computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    pub mode_name: String,
    pub mode: Mode,
    /// One summary per agent, or why none could be computed.
    pub agents: Result<Vec<AgentSummary>, String>,
    /// Packages left out because their content is not in the cache.
    pub missing: Vec<String>,
}

/// One edit, replayed in order on the manifest text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Create {
        name: String,
        base: Base,
    },
    Delete {
        name: String,
    },
    Base {
        name: String,
        base: Base,
    },
    Toggle {
        mode: String,
        selector: Selector,
        on: bool,
    },
}

impl Op {
    fn mode(&self) -> &str {
        match self {
            Op::Create { name, .. } | Op::Delete { name } | Op::Base { name, .. } => name,
            Op::Toggle { mode, .. } => mode,
        }
    }

    fn apply(&self, document: &mut ManifestDocument) -> Result<(), EditError> {
        match self {
            Op::Create { name, base } => document.create_mode(name, *base),
            Op::Delete { name } => document.delete_mode(name),
            Op::Base { name, base } => document.set_mode_base(name, *base),
            Op::Toggle { mode, selector, on } => if *on {
                document.mode_enable(mode, selector)
            } else {
                document.mode_disable(mode, selector)
            }
            .map(|_| ()),
        }
    }
}

/// Why the edits cannot be applied to a manifest text.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The text is not valid TOML, or an edit does not fit it (a mode that exists, ...).
    #[error(transparent)]
    Edit(#[from] EditError),
    /// The edited manifest is not valid (a mode name it refuses, ...).
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

/// Replays `ops` on `text` and checks the result is a valid manifest.
pub fn replay(
    text: &str,
    path: &Path,
    ops: &[Op],
) -> Result<(ManifestDocument, Manifest), ReplayError> {
    let mut document = ManifestDocument::parse(text, path)?;
    for op in ops {
        op.apply(&mut document)?;
    }
    let manifest = document.to_manifest()?;
    Ok((document, manifest))
}

/// Which list the arrow keys move in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Modes,
    Items,
}

/// A question or text field over the lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    NewModeName(String),
    ConfirmDelete(String),
    ConfirmQuit,
}

/// What the shell should do after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Redraw.
    None,
    /// Write the edits (see [`Editor::ops`]) and call [`Editor::saved`].
    Save,
    /// Leave without writing.
    Quit,
}

/// The editor.
#[derive(Debug, Clone)]
pub struct Editor {
    path: PathBuf,
    /// The manifest text the edits apply to (as loaded, or as last saved).
    original: String,
    ops: Vec<Op>,
    document: ManifestDocument,
    manifest: Manifest,
    catalog: Vec<Item>,
    pub(super) mode_cursor: usize,
    pub(super) item_cursor: usize,
    pub(super) focus: Focus,
    pub(super) prompt: Option<Prompt>,
    pub(super) message: Option<String>,
    preview: Option<Preview>,
}

impl Editor {
    /// An editor of the manifest `text` (at `path`), offering `catalog` as the toggleable items.
    pub fn new(path: &Path, text: &str, catalog: Vec<Item>) -> Result<Self, ReplayError> {
        let (document, manifest) = replay(text, path, &[])?;
        Ok(Self {
            path: path.to_path_buf(),
            original: text.to_owned(),
            ops: Vec::new(),
            document,
            manifest,
            catalog,
            mode_cursor: 0,
            item_cursor: 0,
            focus: Focus::Modes,
            prompt: None,
            message: None,
            preview: None,
        })
    }

    /// The manifest path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The manifest text the edits apply to (as loaded, or as last saved).
    pub fn original_text(&self) -> &str {
        &self.original
    }

    /// The edits not yet saved, in order.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The manifest text as it would be saved now.
    pub fn edited_text(&self) -> String {
        self.document.to_string()
    }

    /// True when saving would change the file.
    pub fn is_dirty(&self) -> bool {
        self.edited_text() != self.original
    }

    /// After a save: `text` is what the file now holds.
    pub fn saved(&mut self, text: &str) {
        match replay(text, &self.path, &[]) {
            Ok((document, manifest)) => {
                self.original = text.to_owned();
                self.ops.clear();
                self.document = document;
                self.manifest = manifest;
                self.clamp();
                self.message = Some(format!(
                    "Saved {}; run `agentpack sync` to stage it",
                    file_name(&self.path)
                ));
            }
            Err(e) => self.message = Some(e.to_string()),
        }
    }

    /// Puts the cursor on the mode called `name`; false when there is none.
    pub fn select_mode(&mut self, name: &str) -> bool {
        match self.mode_names().iter().position(|n| *n == name) {
            Some(index) => {
                self.mode_cursor = index;
                self.item_cursor = 0;
                true
            }
            None => false,
        }
    }

    /// Shows `text` in the status line.
    pub fn set_message(&mut self, text: impl Into<String>) {
        self.message = Some(text.into());
    }

    /// Every mode, `default` first.
    pub fn mode_names(&self) -> Vec<&str> {
        self.manifest.mode_names()
    }

    /// The mode under the cursor.
    pub fn selected_mode_name(&self) -> &str {
        let names = self.mode_names();
        names
            .get(self.mode_cursor)
            .or(names.first())
            .copied()
            .unwrap_or(agentpack_lockfile::DEFAULT_MODE)
    }

    /// The selected mode as the edited manifest declares it.
    pub fn selected_mode(&self) -> Mode {
        self.manifest
            .mode(self.selected_mode_name())
            .unwrap_or_default()
    }

    /// The rows for the selected mode: the project's items, then selectors the mode lists that
    /// name nothing in the project.
    pub fn items(&self) -> Vec<Item> {
        let mode = self.selected_mode();
        let mut items = self.catalog.clone();
        for selector in mode.enable.iter().chain(&mode.disable) {
            if !items.iter().any(|i| &i.selector == selector) {
                items.push(Item::for_listed(selector));
            }
        }
        items
    }

    /// Whether the selected mode stages `item`, and whether the mode lists its exact selector
    /// (`Some(true)` in `enable`, `Some(false)` in `disable`).
    pub fn item_state(&self, item: &Item) -> (bool, Option<bool>) {
        let mode = self.selected_mode();
        let listed = if mode.disable.contains(&item.selector) {
            Some(false)
        } else if mode.enable.contains(&item.selector) {
            Some(true)
        } else {
            None
        };
        (mode.selects(&item.target.as_selection()), listed)
    }

    /// The preview to show, when it is the selected mode's current one.
    pub fn preview(&self) -> Option<&Preview> {
        self.preview
            .as_ref()
            .filter(|p| p.mode_name == self.selected_mode_name() && p.mode == self.selected_mode())
    }

    /// The mode whose preview the shell should compute now, if the shown one is stale.
    pub fn preview_request(&self) -> Option<(String, Mode)> {
        self.preview()
            .is_none()
            .then(|| (self.selected_mode_name().to_owned(), self.selected_mode()))
    }

    /// Stores a computed preview.
    pub fn set_preview(&mut self, preview: Preview) {
        self.preview = Some(preview);
    }

    fn clamp(&mut self) {
        let modes = self.mode_names().len();
        self.mode_cursor = self.mode_cursor.min(modes.saturating_sub(1));
        let items = self.items().len();
        self.item_cursor = self.item_cursor.min(items.saturating_sub(1));
    }

    /// Applies `ops` if the result is a valid manifest; otherwise keeps the old ones and says why.
    fn commit(&mut self, ops: Vec<Op>) -> bool {
        match replay(&self.original, &self.path, &ops) {
            Ok((document, manifest)) => {
                self.ops = ops;
                self.document = document;
                self.manifest = manifest;
                self.clamp();
                true
            }
            Err(e) => {
                self.message = Some(e.to_string());
                false
            }
        }
    }

    /// The manifest the other ops give, without the ones `drop` matches.
    fn baseline(&self, drop: impl Fn(&Op) -> bool) -> Option<(Vec<Op>, Manifest)> {
        let ops: Vec<Op> = self.ops.iter().filter(|op| !drop(op)).cloned().collect();
        let (_, manifest) = replay(&self.original, &self.path, &ops).ok()?;
        Some((ops, manifest))
    }

    fn toggle_item(&mut self) {
        let items = self.items();
        let Some(item) = items.get(self.item_cursor) else {
            return;
        };
        let mode_name = self.selected_mode_name().to_owned();
        let (selected, _) = self.item_state(item);
        let want = !selected;
        let same = |op: &Op| matches!(op, Op::Toggle { mode, selector, .. } if *mode == mode_name && *selector == item.selector);
        let Some((mut ops, baseline)) = self.baseline(same) else {
            return;
        };
        let before = baseline
            .mode(&mode_name)
            .unwrap_or_default()
            .selects(&item.target.as_selection());
        if before != want {
            ops.push(Op::Toggle {
                mode: mode_name.clone(),
                selector: item.selector.clone(),
                on: want,
            });
        }
        let verb = if want { "enables" } else { "disables" };
        if self.commit(ops) {
            self.message = Some(format!("Mode `{mode_name}` {verb} {}", item.selector));
        }
    }

    fn toggle_base(&mut self) {
        let name = self.selected_mode_name().to_owned();
        let want = match self.selected_mode().base {
            Base::All => Base::None,
            Base::None => Base::All,
        };
        let same = |op: &Op| matches!(op, Op::Base { name: n, .. } if *n == name);
        let Some((mut ops, baseline)) = self.baseline(same) else {
            return;
        };
        if baseline.mode(&name).map(|m| m.base) != Some(want) {
            ops.push(Op::Base {
                name: name.clone(),
                base: want,
            });
        }
        if self.commit(ops) {
            self.message = Some(format!("Mode `{name}` now starts from {}", want.as_str()));
        }
    }

    fn create_mode(&mut self, name: &str) {
        let name = name.trim();
        if name.is_empty() {
            self.message = Some("A mode needs a name".to_owned());
            return;
        }
        if self.mode_names().contains(&name) {
            self.message = Some(format!("Mode `{name}` already exists"));
            return;
        }
        let mut ops = self.ops.clone();
        ops.push(Op::Create {
            name: name.to_owned(),
            base: Base::All,
        });
        if self.commit(ops) {
            self.select_mode(name);
            self.message = Some(format!("Created mode `{name}` (base all)"));
        }
    }

    fn delete_mode(&mut self, name: &str) {
        let Some((mut ops, baseline)) = self.baseline(|op| op.mode() == name) else {
            return;
        };
        if baseline.modes.contains_key(name) {
            ops.push(Op::Delete {
                name: name.to_owned(),
            });
        }
        if self.commit(ops) {
            self.message = Some(format!("Deleted mode `{name}`"));
        }
    }

    fn move_cursor(&mut self, delta: isize) {
        let (cursor, len) = match self.focus {
            Focus::Modes => (&mut self.mode_cursor, self.manifest.mode_names().len()),
            Focus::Items => {
                let len = self.items().len();
                (&mut self.item_cursor, len)
            }
        };
        if len == 0 {
            *cursor = 0;
            return;
        }
        let next = cursor.saturating_add_signed(delta);
        *cursor = next.min(len - 1);
        if self.focus == Focus::Modes {
            self.item_cursor = 0;
        }
    }

    /// One key press.
    pub fn handle(&mut self, key: KeyEvent) -> Action {
        let ctrl_c =
            key.modifiers.contains(KeyModifiers::CONTROL) && matches!(key.code, KeyCode::Char('c'));
        if let Some(prompt) = self.prompt.take() {
            return self.handle_prompt(prompt, key, ctrl_c);
        }
        self.message = None;
        match key.code {
            _ if ctrl_c => return self.quit(),
            KeyCode::Char('q') | KeyCode::Esc => return self.quit(),
            KeyCode::Char('s') => return Action::Save,
            KeyCode::Tab | KeyCode::BackTab | KeyCode::Left | KeyCode::Right => {
                self.focus = match (self.focus, key.code) {
                    (_, KeyCode::Left) => Focus::Modes,
                    (_, KeyCode::Right) => Focus::Items,
                    (Focus::Modes, _) => Focus::Items,
                    (Focus::Items, _) => Focus::Modes,
                };
            }
            KeyCode::Up | KeyCode::Char('k') => self.move_cursor(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_cursor(1),
            KeyCode::PageUp => self.move_cursor(-10),
            KeyCode::PageDown => self.move_cursor(10),
            KeyCode::Home | KeyCode::Char('g') => self.move_cursor(isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.move_cursor(isize::MAX / 2),
            KeyCode::Char(' ') | KeyCode::Enter => match self.focus {
                Focus::Items => self.toggle_item(),
                Focus::Modes => self.focus = Focus::Items,
            },
            KeyCode::Char('b') => self.toggle_base(),
            KeyCode::Char('n') => self.prompt = Some(Prompt::NewModeName(String::new())),
            KeyCode::Char('d') => {
                let name = self.selected_mode_name().to_owned();
                if name == agentpack_lockfile::DEFAULT_MODE {
                    self.message =
                        Some("The default mode is reserved and cannot be deleted".to_owned());
                } else {
                    self.prompt = Some(Prompt::ConfirmDelete(name));
                }
            }
            _ => {}
        }
        Action::None
    }

    fn quit(&mut self) -> Action {
        if self.is_dirty() {
            self.prompt = Some(Prompt::ConfirmQuit);
            Action::None
        } else {
            Action::Quit
        }
    }

    fn handle_prompt(&mut self, prompt: Prompt, key: KeyEvent, ctrl_c: bool) -> Action {
        let yes = matches!(key.code, KeyCode::Char('y') | KeyCode::Char('Y'));
        match prompt {
            Prompt::NewModeName(mut name) => match key.code {
                _ if ctrl_c => {}
                KeyCode::Esc => {}
                KeyCode::Enter => self.create_mode(&name),
                KeyCode::Backspace => {
                    name.pop();
                    self.prompt = Some(Prompt::NewModeName(name));
                }
                KeyCode::Char(c) if !c.is_control() => {
                    name.push(c);
                    self.prompt = Some(Prompt::NewModeName(name));
                }
                _ => self.prompt = Some(Prompt::NewModeName(name)),
            },
            Prompt::ConfirmDelete(name) => {
                if yes {
                    self.delete_mode(&name);
                }
            }
            Prompt::ConfirmQuit => {
                if yes || ctrl_c {
                    return Action::Quit;
                }
            }
        }
        Action::None
    }
}

/// The file name of `path`, for messages.
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}
