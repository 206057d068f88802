//! Drawing the mode editor: a pure function of [`Editor`] onto a ratatui [`Buffer`].
//!
//! Monochrome by design: no colour is ever set, so the terminal's own foreground and background
//! show through; the cursor row is reverse video in the focused list and bold in the other one,
//! headings are bold. Never changes state and never does I/O.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

use super::state::{file_name, AgentSummary, Editor, Focus, Item, Prompt};
use agentpack_lockfile::Selector;

/// The key help shown on the last line.
pub const HELP: &str =
    "↑↓ move  Tab/←→ pane  Space toggle  b base  n new  d delete  s save  q quit";

fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

fn cursor_style(focused: bool) -> Style {
    if focused {
        Style::default().add_modifier(Modifier::REVERSED)
    } else {
        bold()
    }
}

/// The first row to show so that `cursor` is visible in `height` rows.
fn scroll_offset(cursor: usize, height: usize) -> usize {
    if height == 0 {
        0
    } else {
        cursor.saturating_sub(height - 1)
    }
}

fn pane(title: String, focused: bool) -> Block<'static> {
    let title = if focused {
        Span::styled(format!(" {title} "), bold())
    } else {
        Span::raw(format!(" {title} "))
    };
    Block::default().borders(Borders::ALL).title(title)
}

/// The text of one selector row (without the check box).
fn item_label(item: &Item) -> String {
    let mut text = match &item.selector {
        Selector::Package(m) => format!("package  {m}"),
        Selector::PackagePath { path, .. } => format!("path  {path}"),
        Selector::Mcp(name) => format!("mcp      {name}"),
        Selector::Agents(path) => format!(".agents  {path}"),
    };
    if !item.note.is_empty() {
        text.push_str(&format!("  ({})", item.note));
    }
    text
}

fn names(label: &str, names: &[String]) -> Option<String> {
    if names.is_empty() {
        return None;
    }
    let plural = if names.len() == 1 { "" } else { "s" };
    Some(format!(
        "{} {label}{plural}: {}",
        names.len(),
        names.join(", ")
    ))
}

/// One line per agent: counts and names of what the mode stages for it.
fn summary_line(summary: &AgentSummary) -> String {
    let mut parts: Vec<String> = [
        names("skill", &summary.skills),
        names("command", &summary.commands),
        names("agent", &summary.agents),
        names("rule", &summary.rules),
    ]
    .into_iter()
    .flatten()
    .collect();
    if summary.mcp_servers > 0 {
        parts.push(format!("{} MCP", summary.mcp_servers));
    }
    if parts.is_empty() {
        parts.push("nothing".to_owned());
    }
    format!("{:<9}{}", summary.agent, parts.join(" · "))
}

/// Draws the whole editor into `area` of `buf`.
pub fn render(editor: &Editor, area: Rect, buf: &mut Buffer) {
    let [title, body, preview, status, help] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(5),
        Constraint::Length(8),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);

    let dirty = if editor.is_dirty() {
        "  [modified]"
    } else {
        ""
    };
    Line::from(vec![
        Span::styled("agentpack mode tui", bold()),
        Span::raw(format!("  {}{dirty}", file_name(editor.path()))),
    ])
    .render(title, buf);

    let [modes_area, items_area] =
        Layout::horizontal([Constraint::Length(24), Constraint::Min(20)]).areas(body);
    render_modes(editor, modes_area, buf);
    render_items(editor, items_area, buf);
    render_preview(editor, preview, buf);

    let status_line = match &editor.prompt {
        Some(Prompt::NewModeName(name)) => Line::from(vec![
            Span::styled("New mode name: ", bold()),
            Span::raw(name.clone()),
            Span::styled(" ", Style::default().add_modifier(Modifier::REVERSED)),
            Span::raw("   Enter create  Esc cancel"),
        ]),
        Some(Prompt::ConfirmDelete(name)) => {
            Line::from(Span::styled(format!("Delete mode `{name}`? y/n"), bold()))
        }
        Some(Prompt::ConfirmQuit) => {
            Line::from(Span::styled("Quit without saving your edits? y/n", bold()))
        }
        None => Line::from(editor.message.clone().unwrap_or_default()),
    };
    status_line.render(status, buf);
    Line::from(HELP).render(help, buf);
}

fn render_modes(editor: &Editor, area: Rect, buf: &mut Buffer) {
    let focused = editor.focus == Focus::Modes;
    let block = pane("Modes".to_owned(), focused);
    let inner = block.inner(area);
    block.render(area, buf);
    let width = usize::from(inner.width).saturating_sub(1);
    let list = CursorList {
        cursor: editor.mode_cursor,
        focused,
        inner,
    };
    list.render(&editor.mode_names(), buf, |name| format!(" {name:<width$}"));
}

fn render_items(editor: &Editor, area: Rect, buf: &mut Buffer) {
    let focused = editor.focus == Focus::Items;
    let mode = editor.selected_mode();
    let block = pane(
        format!(
            "Mode {} · base {}",
            editor.selected_mode_name(),
            mode.base.as_str()
        ),
        focused,
    );
    let inner = block.inner(area);
    block.render(area, buf);
    let items = editor.items();
    if items.is_empty() {
        Paragraph::new("No packages, MCP servers or .agents entries in this project")
            .render(inner, buf);
        return;
    }
    let width = usize::from(inner.width);
    let list = CursorList {
        cursor: editor.item_cursor,
        focused,
        inner,
    };
    list.render(&items, buf, |item| {
        let (selected, listed) = editor.item_state(item);
        let mark = if selected { "[x]" } else { "[ ]" };
        let listed = match listed {
            Some(true) => "  enable",
            Some(false) => "  disable",
            None => "",
        };
        let indent = if matches!(item.selector, Selector::PackagePath { .. }) {
            "   "
        } else {
            " "
        };
        let text = format!("{indent}{mark} {}{listed}", item_label(item));
        format!("{text:<width$}")
    });
}

/// A pane's list of one line per entry, scrolled so that the cursor's entry shows, the cursor's
/// line highlighted (brighter when the pane has the focus).
struct CursorList {
    cursor: usize,
    focused: bool,
    inner: Rect,
}

impl CursorList {
    fn render<T>(&self, entries: &[T], buf: &mut Buffer, text: impl Fn(&T) -> String) {
        let offset = scroll_offset(self.cursor, usize::from(self.inner.height));
        let lines: Vec<Line<'_>> = entries
            .iter()
            .enumerate()
            .skip(offset)
            .map(|(index, entry)| {
                if index == self.cursor {
                    Line::styled(text(entry), cursor_style(self.focused))
                } else {
                    Line::raw(text(entry))
                }
            })
            .collect();
        Paragraph::new(lines).render(self.inner, buf);
    }
}

fn render_preview(editor: &Editor, area: Rect, buf: &mut Buffer) {
    let block = pane(
        format!("Staged by mode {}", editor.selected_mode_name()),
        false,
    );
    let inner = block.inner(area);
    block.render(area, buf);
    let lines: Vec<Line<'_>> = match editor.preview() {
        None => vec![Line::raw("computing…")],
        Some(preview) => match &preview.agents {
            Err(e) => vec![Line::raw(format!("cannot compute: {e}"))],
            Ok(agents) => {
                let mut lines: Vec<Line<'_>> = agents
                    .iter()
                    .map(|summary| Line::raw(summary_line(summary)))
                    .collect();
                if !preview.missing.is_empty() {
                    lines.push(Line::raw(format!(
                        "not in the cache (run `agentpack sync`): {}",
                        preview.missing.join(", ")
                    )));
                }
                lines
            }
        },
    };
    Paragraph::new(lines).render(inner, buf);
}
