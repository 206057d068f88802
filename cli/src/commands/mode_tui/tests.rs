//! Unit tests of the editor's state machine, its edits of the manifest text and its drawing.

use std::path::Path;

use agentpack_lockfile::{ModuleId, Selector};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::style::{Color, Modifier};
use ratatui::Terminal;

use super::catalog::summarize;
use super::state::{Action, AgentSummary, Editor, Item, Preview, Target};
use super::view;

const MANIFEST: &str = r#"# project manifest
name = "demo"
version = "0.1.0"

[dependencies]
"rules" = { path = "../rules" } # the house rules
"review" = { path = "../review" }

# Modes we use
[modes.default]
base = "all"

[modes.writing]
base    = "none"   # allowlist
enable  = [
  "package:rules",
]

[mcp.servers.filesystem]
command = "npx"
"#;

fn module(text: &str) -> ModuleId {
    ModuleId::parse(text).unwrap()
}

fn package(text: &str) -> Item {
    Item {
        selector: Selector::Package(module(text)),
        target: Target::PackageFile {
            module: text.to_owned(),
            path: String::new(),
        },
        note: String::new(),
    }
}

fn package_path(text: &str, path: &str) -> Item {
    Item {
        selector: Selector::PackagePath {
            module: module(text),
            path: path.to_owned(),
        },
        target: Target::PackageFile {
            module: text.to_owned(),
            path: path.to_owned(),
        },
        note: String::new(),
    }
}

fn catalog() -> Vec<Item> {
    vec![
        package("review"),
        package_path("review", "commands/review.md"),
        package("rules"),
        Item {
            selector: Selector::Mcp("filesystem".into()),
            target: Target::Mcp {
                name: "filesystem".into(),
                module: None,
            },
            note: "agentpack.toml".into(),
        },
        Item {
            selector: Selector::Agents("rules".into()),
            target: Target::Agents {
                path: "rules".into(),
            },
            note: String::new(),
        },
    ]
}

fn editor() -> Editor {
    Editor::new(Path::new("/p/agentpack.toml"), MANIFEST, catalog()).unwrap()
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn press(editor: &mut Editor, keys: &str) -> Action {
    let mut last = Action::None;
    for c in keys.chars() {
        let code = match c {
            '\n' => KeyCode::Enter,
            '\t' => KeyCode::Tab,
            '↓' => KeyCode::Down,
            '↑' => KeyCode::Up,
            '⎋' => KeyCode::Esc,
            c => KeyCode::Char(c),
        };
        last = editor.handle(key(code));
    }
    last
}

#[test]
fn create_a_mode_and_disable_a_package_edits_only_that() {
    let mut e = editor();
    press(&mut e, "nlean\n");
    assert_eq!(e.selected_mode_name(), "lean");
    // Items: the first row is `package:review`, selected by base all.
    press(&mut e, "\t ");
    assert!(e.is_dirty());
    let text = e.edited_text();
    // Every original line is kept, in order; the new table is the only addition.
    let mut original = MANIFEST.lines().peekable();
    let mut added = Vec::new();
    for line in text.lines() {
        if original.peek() == Some(&line) {
            original.next();
        } else {
            added.push(line);
        }
    }
    assert_eq!(original.next(), None, "{text}");
    added.retain(|l| !l.is_empty());
    assert_eq!(
        added,
        [
            "[modes.lean]",
            "base = \"all\"",
            "disable = [\"package:review\"]"
        ],
        "{text}"
    );
    insta::assert_snapshot!(text);
}

#[test]
fn toggling_back_leaves_the_file_as_it_was() {
    let mut e = editor();
    // writing: base none, enables rules. Move to it and to its items.
    press(&mut e, "↓\t");
    assert_eq!(e.selected_mode_name(), "writing");
    press(&mut e, " ");
    assert!(e.edited_text().contains("\"package:review\""));
    press(&mut e, " ");
    assert_eq!(e.edited_text(), MANIFEST);
    assert!(!e.is_dirty());
    assert!(e.ops().is_empty());
}

#[test]
fn disabling_an_enabled_package_uses_the_mode_disable_edit() {
    let mut e = editor();
    press(&mut e, "↓\t↓↓");
    let items = e.items();
    assert_eq!(items[2].selector.to_string(), "package:rules");
    assert_eq!(e.item_state(&items[2]), (true, Some(true)));
    press(&mut e, " ");
    let text = e.edited_text();
    // `mode disable` removes it from the multi-line enable list (dropping the emptied key) and
    // adds it to a new disable list.
    assert!(!text.contains("enable  = ["), "{text}");
    assert!(text.contains("disable = [\"package:rules\"]"), "{text}");
    assert!(text.contains("base    = \"none\"   # allowlist"), "{text}");
    let items = e.items();
    assert_eq!(e.item_state(&items[2]), (false, Some(false)));
}

#[test]
fn a_package_path_follows_its_package_until_toggled() {
    let mut e = editor();
    press(&mut e, "\t↓");
    let items = e.items();
    assert_eq!(e.item_state(&items[1]), (true, None));
    press(&mut e, " ");
    let items = e.items();
    assert_eq!(e.item_state(&items[0]), (true, None), "the package stays");
    assert_eq!(e.item_state(&items[1]), (false, Some(false)));
    assert!(e.edited_text().contains(
        "[modes.default]\nbase = \"all\"\ndisable = [\"package-path:review:commands/review.md\"]"
    ));
}

#[test]
fn base_toggles_and_back() {
    let mut e = editor();
    press(&mut e, "b");
    assert_eq!(e.selected_mode().base.as_str(), "none");
    assert!(e.edited_text().contains("[modes.default]\nbase = \"none\""));
    let items = e.items();
    assert_eq!(
        e.item_state(&items[3]),
        (false, None),
        "mcp follows the base"
    );
    press(&mut e, "b");
    assert_eq!(e.edited_text(), MANIFEST);
}

#[test]
fn delete_asks_and_default_is_reserved() {
    let mut e = editor();
    press(&mut e, "d");
    assert!(e.message.as_deref().unwrap().contains("reserved"));
    assert!(e.prompt.is_none());
    press(&mut e, "↓d");
    assert!(e.prompt.is_some());
    press(&mut e, "n");
    assert_eq!(e.mode_names(), ["default", "writing"]);
    press(&mut e, "dy");
    assert_eq!(e.mode_names(), ["default"]);
    assert!(!e.edited_text().contains("[modes.writing]"));
    assert!(e.edited_text().contains("[mcp.servers.filesystem]"));
    // A mode created and deleted in one session leaves no trace.
    let mut e = editor();
    press(&mut e, "ntmp\n");
    assert!(e.is_dirty());
    press(&mut e, "dy");
    assert!(!e.is_dirty());
    assert!(e.ops().is_empty());
}

#[test]
fn a_bad_or_duplicate_name_is_refused_without_an_edit() {
    let mut e = editor();
    press(&mut e, "nwriting\n");
    assert!(e.message.as_deref().unwrap().contains("already exists"));
    press(&mut e, "n\n");
    assert!(e.message.as_deref().unwrap().contains("needs a name"));
    press(&mut e, "nab⎋");
    assert!(!e.is_dirty());
    assert_eq!(e.mode_names().len(), 2);
}

#[test]
fn quit_asks_only_with_unsaved_edits() {
    let mut e = editor();
    assert_eq!(press(&mut e, "q"), Action::Quit);
    let mut e = editor();
    press(&mut e, "b");
    assert_eq!(press(&mut e, "q"), Action::None);
    assert!(e.prompt.is_some());
    assert_eq!(press(&mut e, "n"), Action::None);
    assert!(e.is_dirty(), "still editing");
    assert_eq!(press(&mut e, "q"), Action::None);
    assert_eq!(press(&mut e, "y"), Action::Quit);
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    let mut e = editor();
    press(&mut e, "b");
    assert_eq!(e.handle(ctrl_c), Action::None);
    assert_eq!(e.handle(ctrl_c), Action::Quit);
}

#[test]
fn save_then_edits_start_from_the_saved_text() {
    let mut e = editor();
    press(&mut e, "b");
    assert_eq!(press(&mut e, "s"), Action::Save);
    let text = e.edited_text();
    e.saved(&text);
    assert!(!e.is_dirty());
    assert!(e.ops().is_empty());
    assert!(e.message.as_deref().unwrap().starts_with("Saved"));
}

#[test]
fn a_listed_selector_the_project_lacks_is_still_shown() {
    let text = MANIFEST.replace(
        "\"package:rules\",\n]",
        "\"package:rules\",\n  \"mcp:gone\",\n]",
    );
    let mut e = Editor::new(Path::new("/p/agentpack.toml"), &text, catalog()).unwrap();
    press(&mut e, "↓");
    let items = e.items();
    let last = items.last().unwrap();
    assert_eq!(last.selector.to_string(), "mcp:gone");
    assert_eq!(last.note, "not in the project");
}

#[test]
fn previews_are_requested_per_mode_and_kept_until_the_mode_changes() {
    let mut e = editor();
    let (name, mode) = e.preview_request().unwrap();
    assert_eq!(name, "default");
    e.set_preview(Preview {
        mode_name: name,
        mode,
        agents: Ok(vec![]),
        missing: vec![],
    });
    assert!(e.preview_request().is_none());
    press(&mut e, "b");
    assert!(e.preview_request().is_some(), "the mode changed");
}

#[test]
fn summarize_sorts_plan_paths_by_kind() {
    let summary = summarize(
        [
            "plugins/agentpack-bundle/skills/hello/SKILL.md",
            "plugins/agentpack-bundle/skills/hello/scripts/run.sh",
            "plugins/agentpack-bundle/skills/hello/commands/x.md",
            "plugins/agentpack-bundle/commands/review.md",
            "plugins/agentpack-bundle/agents/reviewer.md",
            "cursor/agentpack-bundle/rules/style.mdc",
            "codex-home/agents/reviewer.toml",
            "plugins/agentpack-bundle/.claude-plugin/plugin.json",
        ]
        .into_iter(),
    );
    assert_eq!(summary.skills, ["hello"]);
    assert_eq!(summary.commands, ["review"]);
    assert_eq!(summary.agents, ["reviewer"]);
    assert_eq!(summary.rules, ["style"]);
}

fn draw(editor: &Editor, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|frame| view::render(editor, frame.area(), frame.buffer_mut()))
        .unwrap();
    terminal
}

#[test]
fn render_is_monochrome_with_reverse_video_for_the_cursor() {
    let mut e = editor();
    press(&mut e, "\t↓ ");
    let (mode_name, mode) = e.preview_request().unwrap();
    e.set_preview(Preview {
        mode_name,
        mode,
        agents: Ok(vec![AgentSummary {
            agent: "claude".into(),
            skills: vec!["hello".into()],
            commands: vec!["review".into()],
            agents: vec!["reviewer".into()],
            rules: vec![],
            mcp_servers: 1,
        }]),
        missing: vec!["later".into()],
    });
    let terminal = draw(&e, 100, 24);
    let buffer = terminal.backend().buffer();
    let mut reversed_rows = std::collections::BTreeSet::new();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            let cell = &buffer[(x, y)];
            assert_eq!(cell.fg, Color::Reset, "no foreground colour at {x},{y}");
            assert_eq!(cell.bg, Color::Reset, "no background colour at {x},{y}");
            if cell.modifier.contains(Modifier::REVERSED) {
                reversed_rows.insert(y);
            }
        }
    }
    // The item cursor; the modes list is not focused, so its cursor is bold, not reversed.
    assert_eq!(reversed_rows.len(), 1, "{reversed_rows:?}");
    insta::assert_snapshot!(terminal.backend());
}

#[test]
fn render_shows_the_prompts() {
    let mut e = editor();
    press(&mut e, "nrev");
    let terminal = draw(&e, 100, 24);
    let text = format!("{}", terminal.backend());
    assert!(text.contains("New mode name: rev"), "{text}");
    press(&mut e, "⎋b");
    press(&mut e, "q");
    let terminal = draw(&e, 100, 24);
    let text = format!("{}", terminal.backend());
    assert!(
        text.contains("Quit without saving your edits? y/n"),
        "{text}"
    );
    assert!(text.contains("[modified]"), "{text}");
    assert!(text.contains(view::HELP), "{text}");
}

#[test]
fn render_scrolls_to_keep_the_cursor_visible() {
    let many: Vec<Item> = (0..40)
        .map(|i| package_path("review", &format!("commands/c{i:02}.md")))
        .collect();
    let mut e = Editor::new(Path::new("/p/agentpack.toml"), MANIFEST, many).unwrap();
    press(&mut e, "\tG");
    let terminal = draw(&e, 100, 24);
    let text = format!("{}", terminal.backend());
    assert!(text.contains("commands/c39.md"), "{text}");
    assert!(!text.contains("commands/c00.md"), "{text}");
}

#[test]
fn render_fits_a_tiny_terminal_without_panicking() {
    let mut e = editor();
    press(&mut e, "\t↓");
    for (width, height) in [(1, 1), (10, 5), (30, 12)] {
        draw(&e, width, height);
    }
}

#[test]
fn select_mode_opens_on_the_named_mode() {
    let mut e = editor();
    assert!(e.select_mode("writing"));
    assert_eq!(e.selected_mode_name(), "writing");
    assert!(!e.select_mode("absent"));
    assert_eq!(e.selected_mode_name(), "writing");
}
