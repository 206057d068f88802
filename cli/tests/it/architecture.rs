//! The binary's module rules, checked on its source so they cannot regress:
//! - a command module (`cli/src/commands/<name>.rs` or `cli/src/commands/<name>/`) never uses
//!   another command module (its own sub-modules are fine); what two commands share lives in a
//!   shared module (`cli/src/check/`, `cli/src/evidence/`, `cli/src/pipeline/`...) or a library;
//! - a shared module never uses a command module (only the dispatcher `commands/mod.rs`, `args.rs`
//!   and `main.rs` name commands).
//!
//! The scan is textual: it reads `use` paths and inline `crate::commands::<name>` /
//! `super::<name>` paths, skipping comments.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The command modules: every `commands/<name>.rs` and `commands/<name>/` but the dispatcher.
fn command_names(commands: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(commands)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter_map(|path| {
            let stem = path.file_stem()?.to_str()?.to_owned();
            (path.is_dir() || path.extension().is_some_and(|e| e == "rs")).then_some(stem)
        })
        .filter(|name| name != "mod")
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The lines of `text` that are not comments.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line))
        .filter(|(_, line)| {
            let trimmed = line.trim_start();
            !(trimmed.starts_with("//") || trimmed.starts_with("/*") || trimmed.starts_with('*'))
        })
}

/// The command modules `text` names through `crate::commands::<name>` (or `commands::<name>`
/// after `use crate::commands`), and, for a file of a command at depth `depth` below
/// `commands/` (1: `commands/x.rs` or `commands/x/mod.rs`, 2: `commands/x/y.rs`...), through a
/// `super::` chain that climbs to `commands/` itself. `own` is the command the file belongs to.
fn named_commands(text: &str, own: Option<&str>, depth: usize, names: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    let climb = if depth == 0 {
        None
    } else {
        Some("super::".repeat(depth))
    };
    for (number, line) in code_lines(text) {
        let mut prefixes = vec!["crate::commands::".to_owned()];
        if let Some(climb) = &climb {
            // In a test module (indented), one more `super::` is the file itself: only
            // top-level lines climb from the file.
            if !line.starts_with(' ') {
                prefixes.push(climb.clone());
            }
        }
        for prefix in &prefixes {
            for (at, _) in line.match_indices(prefix.as_str()) {
                let rest = &line[at + prefix.len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if names.contains(&name) && own != Some(name.as_str()) {
                    found.push(format!("line {number}: {name}"));
                }
                if rest.starts_with('{') && prefix.starts_with("crate") {
                    found.push(format!(
                        "line {number}: a group import from crate::commands"
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn no_command_module_uses_another_command_module() {
    let commands = src().join("commands");
    let names = command_names(&commands);
    assert!(names.contains(&"preflight".to_owned()) && names.contains(&"probe".to_owned()));
    let mut files = Vec::new();
    rust_files(&commands, &mut files);
    let mut violations = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&commands).unwrap();
        let parts: Vec<&str> = relative.iter().map(|p| p.to_str().unwrap()).collect();
        if parts == ["mod.rs"] {
            continue; // the dispatcher composes commands
        }
        let own = Path::new(parts[0]).file_stem().unwrap().to_str().unwrap();
        // commands/x.rs and commands/x/mod.rs sit at depth 1; commands/x/y.rs at depth 2.
        let depth = if parts.last() == Some(&"mod.rs") {
            parts.len() - 1
        } else {
            parts.len()
        };
        let text = std::fs::read_to_string(&file).unwrap();
        for hit in named_commands(&text, Some(own), depth, &names) {
            violations.push(format!("{}: {hit}", file.display()));
        }
    }
    assert!(
        violations.is_empty(),
        "command modules use other command modules (move what they share to a shared module):\n{}",
        violations.join("\n")
    );
}

#[test]
fn shared_modules_use_no_command_module() {
    let root = src();
    let names = command_names(&root.join("commands"));
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut violations = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&root).unwrap();
        // The dispatcher, the argument table and main name the commands on purpose.
        if relative.starts_with("commands")
            || relative == Path::new("args.rs")
            || relative == Path::new("main.rs")
        {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for hit in named_commands(&text, None, 0, &names) {
            violations.push(format!("{}: {hit}", file.display()));
        }
    }
    assert!(
        violations.is_empty(),
        "shared modules use command modules (they must not: commands sit on top):\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_scan_finds_a_command_using_another() {
    let names = vec!["launch".to_owned(), "preflight".to_owned()];
    let bad = "use crate::commands::preflight::Policy;\n";
    assert_eq!(named_commands(bad, Some("launch"), 1, &names).len(), 1);
    let inline = "    let x = crate::commands::preflight::run(ctx);\n";
    assert_eq!(named_commands(inline, Some("launch"), 1, &names).len(), 1);
    let climbing = "use super::super::preflight::identity;\n";
    assert_eq!(named_commands(climbing, Some("launch"), 2, &names).len(), 1);
    let sibling = "use super::preflight;\n";
    assert_eq!(named_commands(sibling, Some("launch"), 1, &names).len(), 1);
    // Its own sub-modules, a test module's `super::*` and comments are fine.
    let fine =
        "use super::plan;\n// crate::commands::preflight\nmod tests {\n    use super::*;\n}\n";
    assert!(named_commands(fine, Some("launch"), 2, &names).is_empty());
    assert!(named_commands(
        "use crate::commands::launch::x;\n",
        Some("launch"),
        1,
        &names
    )
    .is_empty());
}
