//! Module IDs: the keys of `[dependencies]` and the `module` of every lock entry.
//!
//! Owns: [`ModuleId`] and its validation. A module ID is either a GitHub path
//! `github.com/<owner>/<repo>[/<p1>/<p2>...]` or a single-segment local/alias name
//! (`local-rules`). Host, owner and repo are lowercase (GitHub treats them case-insensitively, and
//! the docs say module IDs are lowercase); the in-repo path keeps its case, because files inside a
//! repository are case-sensitive and the ADDENDUM's `cache_key` keeps the path's case. Never
//! resolves anything: it checks text only.

use std::fmt;

/// The only host remote packages live on.
pub const GITHUB_HOST: &str = "github.com";

/// A validated module ID.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ModuleId(String);

/// The parts of a GitHub module ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GithubModule<'a> {
    /// Repository owner, lowercase.
    pub owner: &'a str,
    /// Repository name, lowercase.
    pub repo: &'a str,
    /// In-repo path without leading/trailing `/`, case kept; `""` for the repository root.
    pub path: &'a str,
}

/// Why a module ID was refused. The message says what is wrong and what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid module ID {id:?}: {reason}")]
pub struct ModuleIdError {
    /// The refused text.
    pub id: String,
    /// What is wrong and what to do.
    pub reason: String,
}

fn err(id: &str, reason: impl Into<String>) -> ModuleIdError {
    ModuleIdError {
        id: id.to_owned(),
        reason: reason.into(),
    }
}

/// Characters never allowed anywhere in a module ID: `:` separates selector parts, `@` starts a
/// ref in specs, `\` is not a path separator here.
fn forbidden_char(c: char) -> bool {
    c.is_whitespace() || c.is_control() || matches!(c, ':' | '@' | '\\' | '"')
}

pub(crate) fn valid_owner(owner: &str) -> bool {
    !owner.is_empty()
        && owner
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

pub(crate) fn valid_repo(repo: &str) -> bool {
    !repo.is_empty()
        && repo != "."
        && repo != ".."
        && repo
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

pub(crate) fn check_path_segments(id: &str, path: &str) -> Result<(), ModuleIdError> {
    for segment in path.split('/') {
        match segment {
            "" => return Err(err(id, "it has an empty path segment (`//`); remove the extra `/`")),
            "." | ".." => {
                return Err(err(
                    id,
                    format!("`{segment}` is not allowed as a path segment; name the directory inside the repository directly"),
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

impl ModuleId {
    /// Validates `id` as written in a manifest key or a lock entry.
    pub fn parse(id: &str) -> Result<Self, ModuleIdError> {
        if id.is_empty() {
            return Err(err(
                id,
                "it is empty; write github.com/<owner>/<repo>[/<path>] or a local name",
            ));
        }
        if let Some(c) = id.chars().find(|c| forbidden_char(*c)) {
            return Err(err(
                id,
                format!("the character {c:?} is not allowed in a module ID (no spaces, `:`, `@`, `\\` or quotes); a ref goes in the value, e.g. {{ tag = \"v1.0.0\" }}"),
            ));
        }
        if id.starts_with('/') || id.ends_with('/') {
            return Err(err(id, "remove the leading or trailing `/`"));
        }
        let mut segments = id.splitn(4, '/');
        let first = segments.next().unwrap_or_default();
        let Some(owner) = segments.next() else {
            return Self::parse_local(id);
        };
        if !first.contains('.') {
            return Err(err(
                id,
                format!(
                    "it has no host; dependency keys are module IDs such as \"github.com/{id}\""
                ),
            ));
        }
        if !first.eq_ignore_ascii_case(GITHUB_HOST) {
            return Err(err(
                id,
                format!("unsupported host `{first}`; remote packages come from github.com"),
            ));
        }
        let Some(repo) = segments.next() else {
            return Err(err(
                id,
                "too few segments; write github.com/<owner>/<repo>[/<path>]",
            ));
        };
        let path = segments.next().unwrap_or_default();
        if !valid_owner(owner) {
            return Err(err(
                id,
                format!("`{owner}` is not a GitHub owner (letters, digits, `-` and `_` only)"),
            ));
        }
        if !valid_repo(repo) {
            return Err(err(
                id,
                format!("`{repo}` is not a GitHub repository name (letters, digits, `-`, `_` and `.` only)"),
            ));
        }
        if !path.is_empty() {
            check_path_segments(id, path)?;
        }
        let lower_prefix = format!(
            "{GITHUB_HOST}/{}/{}",
            owner.to_ascii_lowercase(),
            repo.to_ascii_lowercase()
        );
        if first != GITHUB_HOST
            || owner != owner.to_ascii_lowercase()
            || repo != repo.to_ascii_lowercase()
        {
            let suggestion = if path.is_empty() {
                lower_prefix
            } else {
                format!("{lower_prefix}/{path}")
            };
            return Err(err(
                id,
                format!("host, owner and repository must be lowercase; write \"{suggestion}\""),
            ));
        }
        Ok(Self(id.to_owned()))
    }

    fn parse_local(id: &str) -> Result<Self, ModuleIdError> {
        if id == "." || id == ".." {
            return Err(err(
                id,
                "a path is not a module ID; write a name and give the path as { path = \"...\" }",
            ));
        }
        if id.eq_ignore_ascii_case(GITHUB_HOST) {
            return Err(err(
                id,
                "too few segments; write github.com/<owner>/<repo>[/<path>]",
            ));
        }
        let ok = id.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
        });
        if !ok {
            let lower = id.to_ascii_lowercase();
            let hint = if lower != id && Self::parse_local(&lower).is_ok() {
                format!("local names are lowercase; write \"{lower}\"")
            } else {
                "a local name uses lowercase letters, digits, `-`, `_` and `.` only".to_owned()
            };
            return Err(err(id, hint));
        }
        Ok(Self(id.to_owned()))
    }

    /// Builds the ID of a GitHub package from its parts: owner and repo are lowercased, leading
    /// and trailing `/` of `path` are trimmed and its case kept.
    pub fn github(owner: &str, repo: &str, path: &str) -> Result<Self, ModuleIdError> {
        let path = path.trim_matches('/');
        let id = if path.is_empty() {
            format!(
                "{GITHUB_HOST}/{}/{}",
                owner.to_ascii_lowercase(),
                repo.to_ascii_lowercase()
            )
        } else {
            format!(
                "{GITHUB_HOST}/{}/{}/{path}",
                owner.to_ascii_lowercase(),
                repo.to_ascii_lowercase()
            )
        };
        Self::parse(&id)
    }

    /// The ID as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The owner, repo and path of a GitHub module; `None` for a local name.
    pub fn as_github(&self) -> Option<GithubModule<'_>> {
        let rest = self.0.strip_prefix("github.com/")?;
        let mut parts = rest.splitn(3, '/');
        let owner = parts.next()?;
        let repo = parts.next()?;
        let path = parts.next().unwrap_or_default();
        Some(GithubModule { owner, repo, path })
    }

    /// True for a single-segment local/alias name.
    pub fn is_local_name(&self) -> bool {
        !self.0.contains('/')
    }
}

impl fmt::Display for ModuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for ModuleId {
    type Err = ModuleIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl AsRef<str> for ModuleId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_documented_forms() {
        for ok in [
            "github.com/acme/lint-rules",
            "github.com/acme/monorepo/agents/python",
            "github.com/mccteam/minecraft-console-client/.skills/humanizer",
            "github.com/acme/repo.js/Skills/Demo",
            "local-rules",
            "mcp-retrieval",
        ] {
            ModuleId::parse(ok).unwrap();
        }
        let m = ModuleId::parse("github.com/acme/monorepo/agents/python").unwrap();
        assert_eq!(
            m.as_github(),
            Some(GithubModule {
                owner: "acme",
                repo: "monorepo",
                path: "agents/python"
            })
        );
        assert_eq!(
            ModuleId::parse("github.com/a/b")
                .unwrap()
                .as_github()
                .unwrap()
                .path,
            ""
        );
        assert!(ModuleId::parse("local-rules")
            .unwrap()
            .as_github()
            .is_none());
    }

    #[test]
    fn refuses_with_reason() {
        let cases = [
            ("", "empty"),
            ("github.com", "too few"),
            ("github.com/acme", "too few"),
            ("gitlab.com/acme/x", "unsupported host"),
            ("acme/x", "no host"),
            ("github.com/Acme/X/Path", "write \"github.com/acme/x/Path\""),
            ("GitHub.com/acme/x", "lowercase"),
            ("github.com/acme/x/../y", "`..`"),
            ("github.com/acme/x//y", "empty path segment"),
            ("github.com/acme/x/", "trailing"),
            ("github.com/acme/x@v1", "`@`"),
            ("github.com/ac me/x", "not allowed"),
            ("github.com/a.b/x", "not a GitHub owner"),
            ("github.com/a/..", "not a GitHub repository"),
            ("Local", "write \"local\""),
            ("..", "path"),
        ];
        for (input, needle) in cases {
            let e = ModuleId::parse(input).unwrap_err().to_string();
            assert!(e.contains(needle), "{input:?}: {e}");
        }
    }

    #[test]
    fn github_constructor_normalizes() {
        let m = ModuleId::github("Acme", "Skills", "/Skills/Demo/").unwrap();
        assert_eq!(m.as_str(), "github.com/acme/skills/Skills/Demo");
    }
}
