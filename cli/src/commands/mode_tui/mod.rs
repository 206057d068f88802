//! `agentpack mode tui`: a terminal editor of `[modes]`.
//!
//! The shell around the pure parts: it refuses to start without a terminal, reads the project once
//! ([`catalog::ProjectContent`]), runs the key loop of [`state::Editor`] drawn by [`view::render`],
//! computes previews when the editor asks for one, and saves. Saving takes the project lock, re-reads
//! `agentpack.toml` and replays the edits on it with the `mode` subcommands' format-preserving edits,
//! so comments and formatting survive and a change made meanwhile by another command is kept. The
//! terminal is restored on every way out (return, error, panic). Never writes anything but the
//! manifest (and, for a deleted mode, what `agentpack mode delete` removes).

pub mod catalog;
pub mod state;
pub mod view;

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{bail, Result};
use crossterm::event::{self, Event, KeyEventKind};

use crate::context::Context;
use crate::project::Project;
use crate::project_lock::ProjectLock;
use state::{Action, Editor, Op};

/// Restores the terminal when dropped (ratatui's panic hook restores it on a panic).
struct TerminalGuard {
    terminal: ratatui::DefaultTerminal,
}

impl TerminalGuard {
    fn enter() -> Result<Self> {
        match ratatui::try_init() {
            Ok(terminal) => Ok(Self { terminal }),
            Err(e) => {
                // Raw mode may be on already.
                ratatui::restore();
                Err(anyhow::Error::new(e).context("cannot set up the terminal"))
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// Runs the editor.
pub fn run(ctx: &Context) -> Result<ExitCode> {
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        bail!(
            "`agentpack mode tui` needs an interactive terminal, and stdin or stdout is not one; nothing was changed\n  fix  use `agentpack mode list|show|create|base|enable|disable|delete` instead"
        );
    }
    let project = Project::discover(ctx)?;
    let text = fs_err::read_to_string(&project.manifest_path)?;
    let manifest = project.load_manifest()?;
    let content = catalog::ProjectContent::load(ctx, &project, &manifest)?;
    let (items, warnings) = content.items();
    let mut editor = Editor::new(&project.manifest_path, &text, items)?;
    if let Some(first) = warnings.first() {
        editor.set_message(format!("warning: {first}"));
    }
    // `--mode NAME` opens on that mode.
    if let Some(name) = &ctx.mode {
        if !editor.select_mode(name) {
            editor.set_message(format!("mode `{name}` is not declared; `n` creates a mode"));
        }
    }

    let mut guard = TerminalGuard::enter()?;
    loop {
        if let Some((name, mode)) = editor.preview_request() {
            editor.set_preview(content.preview(&name, &mode));
        }
        guard
            .terminal
            .draw(|frame| view::render(&editor, frame.area(), frame.buffer_mut()))?;
        let Event::Key(key) = event::read()? else {
            continue;
        };
        if key.kind != KeyEventKind::Press {
            continue;
        }
        match editor.handle(key) {
            Action::None => {}
            Action::Quit => break,
            Action::Save => match save(&project, &editor) {
                Ok(saved) => {
                    editor.saved(&saved.text);
                    if saved.changed_on_disk {
                        editor.set_message(format!(
                            "Saved; {} had changed on disk, your edits were applied to the new text",
                            state::file_name(&project.manifest_path)
                        ));
                    }
                }
                Err(e) => editor.set_message(format!("not saved: {e:#}")),
            },
        }
    }
    drop(guard);
    Ok(ExitCode::SUCCESS)
}

struct Saved {
    text: String,
    changed_on_disk: bool,
}

/// Writes the editor's edits under the project lock, replayed on the file as it is now.
fn save(project: &Project, editor: &Editor) -> Result<Saved> {
    let _lock = ProjectLock::acquire(&project.state_dir(), &project.root)?;
    let current = fs_err::read_to_string(&project.manifest_path)?;
    let (document, _) = state::replay(&current, &project.manifest_path, editor.ops())?;
    let text = document.to_string();
    agentpack_lockfile::write_if_changed(&project.manifest_path, text.as_bytes())?;
    // Every deleted mode's generations, over one store handle.
    crate::mode_generations::forget(
        project,
        editor.ops().iter().filter_map(|op| match op {
            Op::Delete { name } => Some(name.as_str()),
            _ => None,
        }),
    )?;
    Ok(Saved {
        changed_on_disk: editor.original_text() != current,
        text,
    })
}

#[cfg(test)]
mod tests;
