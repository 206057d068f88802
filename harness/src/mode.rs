//! Mode selection: which packages, package paths, MCP servers and `./.agents/` paths a mode stages.
//!
//! Owns the rule that decides whether one item is selected; the four selector kinds (`package:`,
//! `package-path:`, `mcp:`, `.agents:`) and their parsing are the lockfile crate's [`Selector`]. It never reads files: the generation builder
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

use agentpack_lockfile::Mode;
pub use agentpack_lockfile::{Base as ModeBase, Selector, SelectorError};

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
    /// The filter of a mode as the manifest declares it.
    pub fn from_mode(mode: &Mode) -> Self {
        Self {
            base: mode.base,
            enable: mode.enable.clone(),
            disable: mode.disable.clone(),
        }
    }

    /// Parses a mode from its base and selector lists, as written in `agentpack.toml`.
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

    /// What the selectors for which `matches` holds decide: a `disable` one wins, then an `enable`
    /// one; with neither, `otherwise`.
    fn decide(&self, matches: impl Fn(&Selector) -> bool, otherwise: bool) -> bool {
        if self.disable.iter().any(&matches) {
            false
        } else if self.enable.iter().any(&matches) {
            true
        } else {
            otherwise
        }
    }

    /// The path rules of the selectors for which `path` names a path (`enable` ones first, then
    /// `disable` ones, each in the order written).
    fn path_rules(&self, path: impl Fn(&Selector) -> Option<&str>) -> Vec<PathRule> {
        let mut rules = Vec::new();
        for (selected, list) in [(true, &self.enable), (false, &self.disable)] {
            for prefix in list.iter().filter_map(&path) {
                rules.push(PathRule {
                    prefix: prefix.trim_end_matches('/').to_owned(),
                    selected,
                });
            }
        }
        rules
    }

    /// Whether the package as a whole is selected (before `package-path:` selectors).
    pub fn package_selected(&self, module: &str) -> bool {
        self.decide(
            |s| matches!(s, Selector::Package(m) if m.as_str() == module),
            self.base_selected(),
        )
    }

    /// The path filter for one package's files.
    pub fn package_filter(&self, module: &str) -> PathFilter {
        PathFilter {
            default: self.package_selected(module),
            rules: self.path_rules(|selector| match selector {
                Selector::PackagePath { module: m, path } if m.as_str() == module => Some(path),
                _ => None,
            }),
        }
    }

    /// The path filter for the project's `./.agents/` overlay.
    pub fn overlay_filter(&self) -> PathFilter {
        PathFilter {
            default: self.base_selected(),
            rules: self.path_rules(|selector| match selector {
                Selector::Agents(path) => Some(path),
                _ => None,
            }),
        }
    }

    /// Whether an MCP server is selected. `inherited` is what its source says without an `mcp:`
    /// selector: for a plugin server, whether its package (and definition file) is selected; for a
    /// manifest or `.agents` server, pass [`ModeFilter::base_includes_mcp`].
    pub fn mcp_selected(&self, name: &str, inherited: bool) -> bool {
        self.decide(|s| matches!(s, Selector::Mcp(n) if n == name), inherited)
    }

    /// Whether any `mcp:<name>` selector is enabled (then servers of sources the mode otherwise
    /// leaves out are looked at too: see `mode_mcp`).
    pub fn enables_mcp_by_name(&self) -> bool {
        self.enable.iter().any(|s| matches!(s, Selector::Mcp(_)))
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
