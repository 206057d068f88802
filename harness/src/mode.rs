//! Mode selection: which packages, package paths, MCP servers and `./.agents/` paths a mode stages.
//!
//! Owns the parsing of the four selector kinds (`package:`, `package-path:`, `mcp:`, `.agents:`) and
//! the rule that decides whether one item is selected. It never reads files: the generation builder
//! builds a [`ModeFilter`] from `[modes.<name>]` and hands the per-package [`PathFilter`]s to the renderers.
//!
//! The rule: start from `base` (`all` selects everything, `none` nothing), then the most specific
//! matching selector decides (a `package-path:` or `.agents:` selector is more specific than a
//! `package:` one, and a longer path more specific than a shorter one). Between an `enable` and a
//! `disable` of the same specificity, `disable` wins.
//!
//! ```
//! use agentpack_harness::mode::{ModeBase, ModeFilter};
//! let mode = ModeFilter::new(
//!     ModeBase::None,
//!     &["package:github.com/acme/rules".to_string()],
//!     &["package-path:github.com/acme/rules:commands/noise.md".to_string()],
//! ).unwrap();
//! let filter = mode.package_filter("github.com/acme/rules");
//! assert!(filter.includes("commands/review.md"));
//! assert!(!filter.includes("commands/noise.md"));
//! assert!(!mode.package_filter("github.com/acme/other").includes_anything());
//! ```

use std::fmt;

/// Where a mode starts before its `enable` and `disable` lists apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeBase {
    /// `base = "all"`: a denylist mode.
    All,
    /// `base = "none"`: an allowlist mode.
    None,
}

/// One parsed selector.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Selector {
    /// `package:<module>`: every artifact and MCP server of that package.
    Package(String),
    /// `package-path:<module>:<relative-path>`: one file or directory inside that package.
    PackagePath { module: String, path: String },
    /// `mcp:<name>`: one MCP server, whatever its source.
    Mcp(String),
    /// `.agents:<relative-path>`: one file or directory of the project's `./.agents/` overlay.
    DotAgents(String),
}

/// A selector that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid mode selector `{selector}`: {reason}; expected package:<module>, package-path:<module>:<path>, mcp:<name> or .agents:<path>")]
pub struct SelectorError {
    pub selector: String,
    pub reason: &'static str,
}

impl Selector {
    /// Parses one selector string as written in `[modes]`.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let error = |reason| SelectorError {
            selector: text.to_string(),
            reason,
        };
        let (kind, rest) = text
            .split_once(':')
            .ok_or_else(|| error("no kind prefix"))?;
        if rest.is_empty() {
            return Err(error("nothing after the kind"));
        }
        match kind {
            "package" => Ok(Self::Package(rest.trim_end_matches('/').to_string())),
            "package-path" => {
                let (module, path) = rest
                    .split_once(':')
                    .ok_or_else(|| error("package-path needs <module>:<path>"))?;
                let path = normalize_selector_path(path);
                if module.is_empty() || path.is_empty() {
                    return Err(error("package-path needs both a module and a path"));
                }
                Ok(Self::PackagePath {
                    module: module.trim_end_matches('/').to_string(),
                    path,
                })
            }
            "mcp" => Ok(Self::Mcp(rest.to_string())),
            ".agents" => {
                let path = normalize_selector_path(rest);
                if path.is_empty() {
                    return Err(error(".agents needs a path"));
                }
                Ok(Self::DotAgents(path))
            }
            _ => Err(error("unknown kind")),
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Package(module) => write!(f, "package:{module}"),
            Self::PackagePath { module, path } => write!(f, "package-path:{module}:{path}"),
            Self::Mcp(name) => write!(f, "mcp:{name}"),
            Self::DotAgents(path) => write!(f, ".agents:{path}"),
        }
    }
}

fn normalize_selector_path(path: &str) -> String {
    path.trim_start_matches("./")
        .trim_matches('/')
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// One mode: a base and its enable/disable selectors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeFilter {
    base: ModeBase,
    enable: Vec<Selector>,
    disable: Vec<Selector>,
}

impl Default for ModeFilter {
    fn default() -> Self {
        Self::all()
    }
}

impl ModeFilter {
    /// Parses a mode from its base and selector lists.
    pub fn new(
        base: ModeBase,
        enable: &[String],
        disable: &[String],
    ) -> Result<Self, SelectorError> {
        Ok(Self {
            base,
            enable: enable
                .iter()
                .map(|s| Selector::parse(s))
                .collect::<Result<_, _>>()?,
            disable: disable
                .iter()
                .map(|s| Selector::parse(s))
                .collect::<Result<_, _>>()?,
        })
    }

    /// `base = "all"` with no selectors: the default mode.
    pub fn all() -> Self {
        Self {
            base: ModeBase::All,
            enable: Vec::new(),
            disable: Vec::new(),
        }
    }

    fn base_selected(&self) -> bool {
        self.base == ModeBase::All
    }

    /// Whether the package as a whole is selected (before `package-path:` selectors).
    pub fn package_selected(&self, module: &str) -> bool {
        let matches = |s: &Selector| matches!(s, Selector::Package(m) if m == module);
        if self.disable.iter().any(matches) {
            false
        } else if self.enable.iter().any(matches) {
            true
        } else {
            self.base_selected()
        }
    }

    /// The path filter for one package's files.
    pub fn package_filter(&self, module: &str) -> PathFilter {
        let mut rules = Vec::new();
        for (selected, list) in [(true, &self.enable), (false, &self.disable)] {
            for selector in list {
                if let Selector::PackagePath { module: m, path } = selector {
                    if m == module {
                        rules.push(PathRule {
                            prefix: path.clone(),
                            selected,
                        });
                    }
                }
            }
        }
        PathFilter {
            default: self.package_selected(module),
            rules,
        }
    }

    /// The path filter for the project's `./.agents/` overlay.
    pub fn overlay_filter(&self) -> PathFilter {
        let mut rules = Vec::new();
        for (selected, list) in [(true, &self.enable), (false, &self.disable)] {
            for selector in list {
                if let Selector::DotAgents(path) = selector {
                    rules.push(PathRule {
                        prefix: path.clone(),
                        selected,
                    });
                }
            }
        }
        PathFilter {
            default: self.base_selected(),
            rules,
        }
    }

    /// Whether an MCP server is selected. `inherited` is what its source says without an `mcp:`
    /// selector: for a plugin server, whether its package (and definition file) is selected; for a
    /// manifest or `.agents` server, pass [`ModeFilter::base_includes_mcp`].
    pub fn mcp_selected(&self, name: &str, inherited: bool) -> bool {
        let matches = |s: &Selector| matches!(s, Selector::Mcp(n) if n == name);
        if self.disable.iter().any(matches) {
            false
        } else if self.enable.iter().any(matches) {
            true
        } else {
            inherited
        }
    }

    /// What a manifest or `.agents` MCP server inherits: the base.
    pub fn base_includes_mcp(&self) -> bool {
        self.base_selected()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct PathRule {
    prefix: String,
    selected: bool,
}

/// Which relative paths of one tree (a package or `./.agents/`) are selected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathFilter {
    default: bool,
    rules: Vec<PathRule>,
}

impl Default for PathFilter {
    fn default() -> Self {
        Self::all()
    }
}

impl PathFilter {
    /// Selects every path.
    pub fn all() -> Self {
        Self {
            default: true,
            rules: Vec::new(),
        }
    }

    /// Selects no path.
    pub fn none() -> Self {
        Self {
            default: false,
            rules: Vec::new(),
        }
    }

    /// Whether `relative` (`/`-separated, relative to the tree root) is selected.
    pub fn includes(&self, relative: &str) -> bool {
        let relative = relative.trim_matches('/');
        let mut best: Option<(usize, bool)> = None;
        for rule in &self.rules {
            let hit = relative == rule.prefix
                || relative
                    .strip_prefix(rule.prefix.as_str())
                    .is_some_and(|rest| rest.starts_with('/'));
            if !hit {
                continue;
            }
            let length = rule.prefix.len();
            best = match best {
                Some((best_length, _)) if best_length > length => best,
                Some((best_length, false)) if best_length == length => best,
                _ => Some((length, rule.selected)),
            };
        }
        best.map_or(self.default, |(_, selected)| selected)
    }

    /// Whether any path can be selected at all (false for an unselected package with no
    /// `package-path:` enable).
    pub fn includes_anything(&self) -> bool {
        self.default || self.rules.iter().any(|rule| rule.selected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(base: ModeBase, enable: &[&str], disable: &[&str]) -> ModeFilter {
        let owned = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        ModeFilter::new(base, &owned(enable), &owned(disable)).unwrap()
    }

    #[test]
    fn parses_every_selector_kind() {
        assert_eq!(
            Selector::parse("package:github.com/a/b/skills/x").unwrap(),
            Selector::Package("github.com/a/b/skills/x".into())
        );
        assert_eq!(
            Selector::parse("package-path:github.com/a/b:./commands/noise.md").unwrap(),
            Selector::PackagePath {
                module: "github.com/a/b".into(),
                path: "commands/noise.md".into()
            }
        );
        assert_eq!(
            Selector::parse("mcp:linear").unwrap(),
            Selector::Mcp("linear".into())
        );
        assert_eq!(
            Selector::parse(".agents:skills/local/").unwrap(),
            Selector::DotAgents("skills/local".into())
        );
        for bad in [
            "linear",
            "pkg:x",
            "package:",
            "package-path:github.com/a/b",
            ".agents:/",
        ] {
            let error = Selector::parse(bad).unwrap_err();
            assert!(error.to_string().contains(bad), "{error}");
        }
        let s = "package-path:github.com/a/b:commands/x.md";
        assert_eq!(Selector::parse(s).unwrap().to_string(), s);
    }

    #[test]
    fn denylist_mode_disables_one_path_and_one_server() {
        let m = mode(
            ModeBase::All,
            &[],
            &[
                "package-path:github.com/acme/heavy:commands/noise.md",
                "mcp:filesystem",
            ],
        );
        let filter = m.package_filter("github.com/acme/heavy");
        assert!(filter.includes("commands/other.md"));
        assert!(!filter.includes("commands/noise.md"));
        assert!(filter.includes("commands/noise.md.bak"));
        assert!(m.package_filter("github.com/acme/light").includes("x"));
        assert!(!m.mcp_selected("filesystem", true));
        assert!(m.mcp_selected("other", m.base_includes_mcp()));
    }

    #[test]
    fn allowlist_mode_enables_packages_and_paths() {
        let m = mode(
            ModeBase::None,
            &[
                "package:github.com/acme/one",
                "package-path:github.com/acme/two:skills/keep",
                "mcp:linear",
                ".agents:skills",
            ],
            &["package-path:github.com/acme/two:skills/keep/big.bin"],
        );
        assert!(m
            .package_filter("github.com/acme/one")
            .includes("anything.md"));
        let two = m.package_filter("github.com/acme/two");
        assert!(two.includes_anything());
        assert!(two.includes("skills/keep/SKILL.md"));
        assert!(!two.includes("skills/keep/big.bin"));
        assert!(!two.includes("skills/other/SKILL.md"));
        assert!(!m
            .package_filter("github.com/acme/three")
            .includes_anything());
        assert!(m.mcp_selected("linear", false));
        assert!(!m.mcp_selected("other", m.base_includes_mcp()));
        let overlay = m.overlay_filter();
        assert!(overlay.includes("skills/local/SKILL.md"));
        assert!(!overlay.includes("mcp.json"));
    }

    #[test]
    fn disable_wins_over_enable_at_the_same_specificity() {
        let m = mode(
            ModeBase::All,
            &[
                "package:github.com/a/b",
                "package-path:github.com/a/b:rules",
                "mcp:x",
            ],
            &[
                "package:github.com/a/b",
                "package-path:github.com/a/b:rules",
                "mcp:x",
            ],
        );
        assert!(!m.package_selected("github.com/a/b"));
        assert!(!m.package_filter("github.com/a/b").includes("rules/r.md"));
        assert!(!m.mcp_selected("x", true));
    }
}
