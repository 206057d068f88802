//! Mode selectors (ADDENDUM "Mode selectors"): what `enable` and `disable` lists name.
//!
//! Owns: [`Selector`], its parsing from and rendering to the text written in `agentpack.toml`.
//! `Display` gives back exactly the text `parse` accepted, so edits can compare selectors as text.
//! Never decides what a selector matches in a package: staging does that.

use std::fmt;

use crate::module_id::{ModuleId, ModuleIdError};

/// One entry of a mode's `enable` or `disable` list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Selector {
    /// `package:<module>`: every artifact and MCP server of that package.
    Package(ModuleId),
    /// `package-path:<module>:<relative-path>`: one file or directory inside that package.
    PackagePath {
        /// The package.
        module: ModuleId,
        /// A `/`-separated path relative to the package root.
        path: String,
    },
    /// `mcp:<name>`: one MCP server, whatever its source.
    Mcp(String),
    /// `.agents:<relative-path>`: one file or directory of the project's `./.agents/` overlay.
    Agents(String),
}

/// Why a selector was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid selector {text:?}: {reason}")]
pub struct SelectorError {
    /// The refused text.
    pub text: String,
    /// What is wrong and what to write.
    pub reason: String,
}

const KINDS: &str = "write package:<module>, package-path:<module>:<relative-path>, mcp:<name> or .agents:<relative-path>";

fn check_relative(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("the relative path is empty".to_owned());
    }
    if path.starts_with('/') || path.contains('\\') {
        return Err("the path must be relative and use `/` separators".to_owned());
    }
    let body = path.strip_suffix('/').unwrap_or(path);
    for segment in body.split('/') {
        match segment {
            "" => return Err("the path has an empty segment (`//`)".to_owned()),
            "." | ".." => return Err(format!("`{segment}` is not allowed in the path")),
            _ => {}
        }
    }
    if path.chars().any(char::is_control) {
        return Err("the path contains a control character".to_owned());
    }
    Ok(())
}

impl Selector {
    /// Parses one selector as written in a mode list.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let fail = |reason: String| SelectorError {
            text: text.to_owned(),
            reason,
        };
        let module_err = |e: ModuleIdError| fail(e.to_string());
        if let Some(rest) = text.strip_prefix("package-path:") {
            // An `oci://` module holds `:` itself (the scheme, a port): the path follows the
            // first `:` after its repository starts.
            let split = match rest.strip_prefix(crate::module_id::OCI_SCHEME) {
                Some(oci) => oci.find('/').and_then(|slash| {
                    let at = crate::module_id::OCI_SCHEME.len() + slash;
                    rest[at..]
                        .find(':')
                        .map(|colon| (&rest[..at + colon], &rest[at + colon + 1..]))
                }),
                None => rest.split_once(':'),
            };
            let Some((module, path)) = split else {
                return Err(fail(
                    "package-path needs a module and a path: package-path:<module>:<relative-path>"
                        .to_owned(),
                ));
            };
            let module = ModuleId::parse(module).map_err(module_err)?;
            check_relative(path).map_err(fail)?;
            Ok(Self::PackagePath {
                module,
                path: path.to_owned(),
            })
        } else if let Some(rest) = text.strip_prefix("package:") {
            Ok(Self::Package(ModuleId::parse(rest).map_err(module_err)?))
        } else if let Some(name) = text.strip_prefix("mcp:") {
            if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
                return Err(fail("mcp: needs a server name without spaces".to_owned()));
            }
            Ok(Self::Mcp(name.to_owned()))
        } else if let Some(path) = text.strip_prefix(".agents:") {
            check_relative(path).map_err(fail)?;
            Ok(Self::Agents(path.to_owned()))
        } else {
            Err(fail(format!("unknown selector kind; {KINDS}")))
        }
    }

    /// The package this selector names, for `package:` and `package-path:`.
    pub fn module(&self) -> Option<&ModuleId> {
        match self {
            Self::Package(m) | Self::PackagePath { module: m, .. } => Some(m),
            Self::Mcp(_) | Self::Agents(_) => None,
        }
    }
}

/// Something a mode can switch on or off, as staging sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectionTarget<'a> {
    /// A file or directory of a package: its module and `/`-separated path in the package.
    PackageFile {
        /// The package.
        module: &'a str,
        /// Path relative to the package root.
        path: &'a str,
    },
    /// An MCP server: its name and, for a plugin's server, the package that brings it.
    McpServer {
        /// Server name.
        name: &'a str,
        /// The package that defines it (`None` for the manifest and `./.agents/`).
        module: Option<&'a str>,
    },
    /// A file or directory of the project's `./.agents/` overlay.
    AgentsFile {
        /// Path relative to `./.agents/`.
        path: &'a str,
    },
}

/// True when `selector_path` names `path` itself or a directory above it.
fn path_covers(selector_path: &str, path: &str) -> bool {
    let dir = selector_path.trim_end_matches('/');
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

impl Selector {
    /// How specifically this selector matches `target`: `None` when it does not match; larger
    /// is more specific (`package:` 1, `mcp:` 2, `package-path:` and `.agents:` 2 plus the
    /// number of path segments).
    pub fn specificity(&self, target: &SelectionTarget<'_>) -> Option<usize> {
        let depth = |p: &str| 2 + p.trim_end_matches('/').split('/').count();
        match (self, target) {
            (Self::Package(m), SelectionTarget::PackageFile { module, .. })
                if m.as_str() == *module =>
            {
                Some(1)
            }
            (
                Self::Package(m),
                SelectionTarget::McpServer {
                    module: Some(module),
                    ..
                },
            ) if m.as_str() == *module => Some(1),
            (
                Self::PackagePath { module: m, path: p },
                SelectionTarget::PackageFile { module, path },
            ) if m.as_str() == *module && path_covers(p, path) => Some(depth(p)),
            (Self::Mcp(n), SelectionTarget::McpServer { name, .. }) if n == name => Some(2),
            (Self::Agents(p), SelectionTarget::AgentsFile { path }) if path_covers(p, path) => {
                Some(depth(p))
            }
            _ => None,
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Package(m) => write!(f, "package:{m}"),
            Self::PackagePath { module, path } => write!(f, "package-path:{module}:{path}"),
            Self::Mcp(name) => write!(f, "mcp:{name}"),
            Self::Agents(path) => write!(f, ".agents:{path}"),
        }
    }
}

impl std::str::FromStr for Selector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oci_modules_in_selectors() {
        let selector =
            Selector::parse("package-path:oci://127.0.0.1:5000/acme/pdf:skills/x").unwrap();
        assert_eq!(
            selector,
            Selector::PackagePath {
                module: ModuleId::parse("oci://127.0.0.1:5000/acme/pdf").unwrap(),
                path: "skills/x".into()
            }
        );
        assert_eq!(
            selector.to_string(),
            "package-path:oci://127.0.0.1:5000/acme/pdf:skills/x"
        );
        let package = Selector::parse("package:oci://ghcr.io/acme/pdf").unwrap();
        assert_eq!(package.module().unwrap().as_str(), "oci://ghcr.io/acme/pdf");
        assert!(Selector::parse("package-path:oci://ghcr.io/acme/pdf").is_err());
    }

    #[test]
    fn specificity_and_prefixes() {
        let file = SelectionTarget::PackageFile {
            module: "github.com/a/b",
            path: "commands/noise.md",
        };
        assert_eq!(
            Selector::parse("package:github.com/a/b")
                .unwrap()
                .specificity(&file),
            Some(1)
        );
        assert_eq!(
            Selector::parse("package-path:github.com/a/b:commands")
                .unwrap()
                .specificity(&file),
            Some(3)
        );
        assert_eq!(
            Selector::parse("package-path:github.com/a/b:commands/")
                .unwrap()
                .specificity(&file),
            Some(3)
        );
        assert_eq!(
            Selector::parse("package-path:github.com/a/b:commands/noise.md")
                .unwrap()
                .specificity(&file),
            Some(4)
        );
        assert_eq!(
            Selector::parse("package-path:github.com/a/b:command")
                .unwrap()
                .specificity(&file),
            None
        );
        assert_eq!(
            Selector::parse("package:github.com/a/c")
                .unwrap()
                .specificity(&file),
            None
        );
        let server = SelectionTarget::McpServer {
            name: "fs",
            module: Some("github.com/a/b"),
        };
        assert_eq!(
            Selector::parse("package:github.com/a/b")
                .unwrap()
                .specificity(&server),
            Some(1)
        );
        assert_eq!(
            Selector::parse("mcp:fs").unwrap().specificity(&server),
            Some(2)
        );
        let agents = SelectionTarget::AgentsFile {
            path: "rules/backend.mdc",
        };
        assert_eq!(
            Selector::parse(".agents:rules")
                .unwrap()
                .specificity(&agents),
            Some(3)
        );
        assert_eq!(
            Selector::parse(".agents:rules/backend.mdc")
                .unwrap()
                .specificity(&file),
            None
        );
    }

    #[test]
    fn parses_and_renders_every_kind() {
        for text in [
            "package:github.com/acme/shared-rules",
            "package-path:github.com/acme/heavy-pack:commands/noise.md",
            "package-path:github.com/acme/heavy-pack:commands/",
            "mcp:filesystem",
            ".agents:rules/backend.mdc",
            "package:local-rules",
        ] {
            let s = Selector::parse(text).unwrap();
            assert_eq!(s.to_string(), text);
        }
        let s = Selector::parse("package-path:github.com/a/b/c:x/y.md").unwrap();
        assert_eq!(s.module().unwrap().as_str(), "github.com/a/b/c");
        assert_eq!(Selector::parse("mcp:x").unwrap().module(), None);
    }

    #[test]
    fn refuses_malformed() {
        for (text, needle) in [
            ("github.com/a/b", "unknown selector kind"),
            ("package:", "empty"),
            ("package-path:github.com/a/b", "needs a module and a path"),
            ("package-path:github.com/a/b:", "empty"),
            ("package-path:github.com/a/b:../x", "`..`"),
            (".agents:/etc/passwd", "relative"),
            ("mcp:", "server name"),
            ("mcp:a b", "server name"),
            ("package:gitlab.com/a/b", "unsupported host"),
        ] {
            let e = Selector::parse(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }
}
