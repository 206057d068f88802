//! `SKILL.md` front matter checks for local packages: a usable skill `name`, a closed block without
//! YAML aliases or NUL. Problems are warnings naming the file.
//!
//! Must never refuse a package for its front matter; it only reports.

use super::*;

/// The longest skill name accepted from front matter.
pub const MAX_SKILL_NAME: usize = 128;

/// Why a skill `name` from front matter cannot be used (it could name a path outside the
/// package, or is absurd), or `None` when it is fine.
pub fn skill_name_problem(name: &str) -> Option<String> {
    if name.len() > MAX_SKILL_NAME {
        return Some(format!(
            "its `name` is {} bytes long (at most {MAX_SKILL_NAME})",
            name.len()
        ));
    }
    if name.chars().any(char::is_control) {
        return Some("its `name` contains a control character (NUL, newline...)".to_owned());
    }
    if name.contains('/') || name.contains('\\') || name.starts_with('.') {
        return Some(format!(
            "its `name` {name:?} is a path (`/`, `\\`, or a leading `.`), not a name"
        ));
    }
    None
}

/// Checks the front matter of one `SKILL.md` (its first bytes; `complete` when that is the whole
/// file): `None` when it is fine or absent.
pub fn frontmatter_problem(text: &[u8], complete: bool) -> Option<String> {
    if text.contains(&0) {
        return Some("it contains a NUL byte".to_owned());
    }
    let text = String::from_utf8_lossy(text);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let after = text.strip_prefix("---")?;
    let mut lines = after.split_inclusive('\n');
    lines.next()?; // the rest of the opening line
    let mut block = String::new();
    let mut closed = false;
    for line in lines {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        block.push_str(line);
    }
    if !closed {
        return Some(if complete {
            "its front matter is not closed (no `---` line after the opening one)".to_owned()
        } else {
            "its front matter is not closed within the first 64 KiB".to_owned()
        });
    }
    if uses_yaml_aliases(&block) {
        return Some(
            "its front matter uses YAML anchors or aliases (`&x` / `*x`), which are not expanded"
                .to_owned(),
        );
    }
    for line in block.lines() {
        let Some(value) = line.strip_prefix("name:") else {
            continue;
        };
        let value = value.trim().trim_matches('"').trim_matches('\'');
        if let Some(problem) = skill_name_problem(value) {
            return Some(problem);
        }
    }
    None
}

/// Does a YAML block use an anchor or alias outside quotes (`key: &a [...]`, `- *a`)?
pub(super) fn uses_yaml_aliases(block: &str) -> bool {
    block.lines().any(|line| {
        let mut quote = None;
        let mut previous = ' ';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            let starts_name = chars
                .peek()
                .is_some_and(|next| next.is_alphanumeric() || *next == '_');
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if c == '"' || c == '\'' => quote = Some(c),
                None if c == '#' && previous.is_whitespace() => break,
                None if (c == '&' || c == '*')
                    && starts_name
                    && (previous.is_whitespace() || matches!(previous, '[' | ',' | ':' | '-')) =>
                {
                    return true
                }
                None => {}
            }
            previous = c;
        }
        false
    })
}

/// The `SKILL.md` files of `entries` with a front-matter problem.
pub(super) fn frontmatter_problems(entries: &[(String, LocalEntry)]) -> Vec<(String, String)> {
    use std::io::Read as _;
    const HEAD: usize = 64 * 1024;
    let mut problems = Vec::new();
    for (relative, entry) in entries {
        let LocalEntry::File(absolute) = entry else {
            continue;
        };
        if relative.rsplit('/').next() != Some("SKILL.md") {
            continue;
        }
        let Ok(file) = open_regular(absolute) else {
            continue;
        };
        let mut head = Vec::new();
        if file.take(HEAD as u64 + 1).read_to_end(&mut head).is_err() {
            continue;
        }
        let complete = head.len() <= HEAD;
        head.truncate(HEAD);
        if let Some(problem) = frontmatter_problem(&head, complete) {
            problems.push((relative.clone(), problem));
        }
    }
    problems
}
