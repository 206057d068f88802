//! SemVer constraints and tag selection (ADDENDUM "Version constraints").
//!
//! Owns: [`VersionConstraint`] (parsing and matching), [`parse_tag`] (`vX.Y.Z` or `X.Y.Z`),
//! [`VersionConstraint::select`] (the highest satisfying tag wins), and [`classify_ref`], which
//! decides whether a bare manifest string is a constraint, a 40-hex commit or a branch/tag name.
//! Never lists tags or resolves refs: the caller brings the tag names.
//!
//! | constraint | matches |
//! | --- | --- |
//! | `^1.2` | `>=1.2.0, <2.0.0` (`^0.3` is `>=0.3.0, <0.4.0`) |
//! | `~1.2` | `>=1.2.0, <1.3.0` |
//! | `=1.2.3`, `1.2.3` | exactly 1.2.3 |
//! | `1.2`, `1` | bare partial versions are exact at the precision given: `1.2.*`, `1.*` |
//! | `>=1.0, <2.0` | a comma means "and" |
//! | `*` | any release |
//! | `1.x`, `1.2.*` | wildcards |
//!
//! Pre-release tags match only when a comparator names a pre-release of the same `X.Y.Z`
//! (`^1.2.0-beta.1` matches `1.2.0-beta.2`, `^1.2` matches no pre-release). This is the `semver`
//! crate's rule; the one place we differ from its `VersionReq` is a bare version, which it reads as
//! `^` and we read as exact.

use std::fmt;

use semver::{Version, VersionReq};

use crate::validate::CommitSha;

/// A parsed version constraint, keeping the text the user wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionConstraint {
    text: String,
    req: VersionReq,
}

/// Why a constraint was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid version constraint {text:?}: {reason}; write e.g. \"^1.2\", \"~1.2\", \"=1.2.3\", \">=1.0, <2.0\", \"*\" or \"1.x\"")]
pub struct VersionError {
    /// The refused text.
    pub text: String,
    /// What the SemVer parser said.
    pub reason: String,
}

/// The tag [`VersionConstraint::select`] picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectedTag<'t> {
    /// The tag name as listed (`v1.2.3` or `1.2.3`).
    pub tag: &'t str,
    /// Its version.
    pub version: Version,
}

impl VersionConstraint {
    /// Parses a constraint of the table above. Surrounding whitespace is ignored.
    pub fn parse(text: &str) -> Result<Self, VersionError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(VersionError {
                text: text.to_owned(),
                reason: "it is empty".to_owned(),
            });
        }
        let mut parts = Vec::new();
        for part in trimmed.split(',') {
            let part = part.trim();
            if part.starts_with(|c: char| c.is_ascii_digit()) {
                parts.push(format!("={part}"));
            } else {
                parts.push(part.to_owned());
            }
        }
        let req = VersionReq::parse(&parts.join(", ")).map_err(|e| VersionError {
            text: text.to_owned(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            text: trimmed.to_owned(),
            req,
        })
    }

    /// The constraint as written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// True when `version` satisfies the constraint.
    pub fn matches(&self, version: &Version) -> bool {
        self.req.matches(version)
    }

    /// The highest tag whose version satisfies the constraint; tags that are not SemVer are
    /// ignored. When `v1.2.3` and `1.2.3` both exist, the `v`-prefixed one is returned.
    pub fn select<'t, I>(&self, tags: I) -> Option<SelectedTag<'t>>
    where
        I: IntoIterator<Item = &'t str>,
    {
        let mut best: Option<SelectedTag<'t>> = None;
        for tag in tags {
            let Some(version) = parse_tag(tag) else {
                continue;
            };
            if !self.matches(&version) {
                continue;
            }
            let better = match &best {
                None => true,
                Some(current) => {
                    version > current.version
                        || (version == current.version
                            && tag.starts_with('v')
                            && !current.tag.starts_with('v'))
                }
            };
            if better {
                best = Some(SelectedTag { tag, version });
            }
        }
        best
    }
}

impl fmt::Display for VersionConstraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The version of a SemVer tag `vX.Y.Z` or `X.Y.Z` (pre-release and build parts allowed);
/// `None` for any other tag.
pub fn parse_tag(tag: &str) -> Option<Version> {
    let bare = tag.strip_prefix('v').unwrap_or(tag);
    if !bare.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    Version::parse(bare).ok()
}

/// The shortest all-digit string [`classify_ref`] reads as a short commit (git's default
/// abbreviation length).
pub const SHORT_COMMIT_DIGITS: usize = 7;

/// What a bare manifest string (or an `@ref` suffix) means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefKind {
    /// A SemVer constraint, matched against tags.
    Constraint(VersionConstraint),
    /// A full 40-hex commit, taken as is.
    Commit(CommitSha),
    /// Anything else: a branch or tag name (resolved by GitHub, which tries both).
    Name(String),
}

/// Classifies a bare string: 40 hex digits are a commit; a string that starts with `^`, `~`,
/// `=`, `<`, `>` or `*` must be a constraint (an error otherwise); a string that starts with a
/// digit is a constraint when it parses as one (`1.2.3`, `1.x`) and a name otherwise
/// (`2024-05-release`); everything else (`main`, `v2.1.0`, `release/1.x`) is a branch or tag name.
/// A release branch literally named `1.x` needs the table form `{ branch = "1.x" }`.
///
/// A run of [`SHORT_COMMIT_DIGITS`] or more decimal digits alone is a short commit that happens to
/// have no hex letter (`7959378132`), not a major version: one in about a hundred 10-digit
/// abbreviations looks like that. A major version that large needs `^` or `{ version = ... }`.
pub fn classify_ref(text: &str) -> Result<RefKind, VersionError> {
    let trimmed = text.trim();
    if let Ok(commit) = CommitSha::parse(trimmed) {
        return Ok(RefKind::Commit(commit));
    }
    if trimmed.len() >= SHORT_COMMIT_DIGITS && trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(RefKind::Name(trimmed.to_owned()));
    }
    if trimmed.starts_with(['^', '~', '=', '<', '>', '*']) {
        return VersionConstraint::parse(trimmed).map(RefKind::Constraint);
    }
    if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
        if let Ok(constraint) = VersionConstraint::parse(trimmed) {
            return Ok(RefKind::Constraint(constraint));
        }
    }
    if trimmed.is_empty() {
        return Err(VersionError {
            text: text.to_owned(),
            reason: "it is empty".to_owned(),
        });
    }
    Ok(RefKind::Name(trimmed.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAGS: &[&str] = &[
        "v0.2.9",
        "v0.3.0",
        "v0.3.5",
        "0.4.0",
        "v1.0.0",
        "v1.2.0",
        "v1.2.7",
        "1.3.0",
        "v1.9.9",
        "v2.0.0-beta.1",
        "v2.0.0",
        "v2.1.0",
        "latest",
        "v3",
        "release-1",
        "v1.10.0-rc.1",
    ];

    fn pick(c: &str) -> Option<&'static str> {
        VersionConstraint::parse(c)
            .unwrap()
            .select(TAGS.iter().copied())
            .map(|s| s.tag)
    }

    #[test]
    fn table_of_constraints() {
        assert_eq!(pick("^1.2"), Some("v1.9.9"));
        assert_eq!(pick("^0.3"), Some("v0.3.5"));
        assert_eq!(pick("~1.2"), Some("v1.2.7"));
        assert_eq!(pick("=1.2.0"), Some("v1.2.0"));
        assert_eq!(pick("1.2.0"), Some("v1.2.0"));
        assert_eq!(pick("1.3"), Some("1.3.0"));
        assert_eq!(pick(">=1.0, <2.0"), Some("v1.9.9"));
        assert_eq!(pick("*"), Some("v2.1.0"));
        assert_eq!(pick("1.x"), Some("v1.9.9"));
        assert_eq!(pick("1.2.*"), Some("v1.2.7"));
        assert_eq!(pick("^4"), None);
        assert_eq!(pick(">=0.4, <1"), Some("0.4.0"));
    }

    #[test]
    fn prereleases_only_when_named() {
        assert_eq!(pick("^2.0.0-beta.1"), Some("v2.1.0"));
        assert_eq!(pick("=2.0.0-beta.1"), Some("v2.0.0-beta.1"));
        assert_eq!(pick("<2.0.0"), Some("v1.9.9"));
        assert_eq!(pick(">=1.10.0-rc.0, <1.11"), Some("v1.10.0-rc.1"));
        assert_eq!(pick("~1.10"), None);
    }

    #[test]
    fn v_prefixed_tag_wins_a_tie() {
        let c = VersionConstraint::parse("^1").unwrap();
        assert_eq!(c.select(["1.0.0", "v1.0.0"]).unwrap().tag, "v1.0.0");
        assert_eq!(c.select(["v1.0.0", "1.0.0"]).unwrap().tag, "v1.0.0");
    }

    #[test]
    fn tags() {
        assert_eq!(parse_tag("v1.2.3"), Some(Version::new(1, 2, 3)));
        assert_eq!(parse_tag("1.2.3"), Some(Version::new(1, 2, 3)));
        assert_eq!(parse_tag("v1.2"), None);
        assert_eq!(parse_tag("vv1.2.3"), None);
        assert_eq!(parse_tag("release"), None);
    }

    #[test]
    fn classification() {
        let c = |s| classify_ref(s).unwrap();
        assert!(matches!(c("^1.2"), RefKind::Constraint(_)));
        assert!(matches!(c("1.2.3"), RefKind::Constraint(_)));
        assert!(matches!(c("*"), RefKind::Constraint(_)));
        assert!(matches!(c(">=1.0, <2.0"), RefKind::Constraint(_)));
        assert_eq!(c("main"), RefKind::Name("main".into()));
        assert_eq!(c("v2.1.0"), RefKind::Name("v2.1.0".into()));
        assert_eq!(
            c("2024-05-release"),
            RefKind::Name("2024-05-release".into())
        );
        assert_eq!(c("f359d43"), RefKind::Name("f359d43".into()));
        // A short commit with no hex letter is still a commit, not a major version.
        assert_eq!(c("7959378132"), RefKind::Name("7959378132".into()));
        assert_eq!(c("1234567"), RefKind::Name("1234567".into()));
        assert!(matches!(c("123456"), RefKind::Constraint(_)));
        assert!(matches!(c("^7959378132"), RefKind::Constraint(_)));
        let sha = "A1B2C3D4E5F6A1B2C3D4E5F6A1B2C3D4E5F6A1B2";
        assert_eq!(c(sha), RefKind::Commit(CommitSha::parse(sha).unwrap()));
        assert!(classify_ref("^1.x.y").is_err());
        assert!(classify_ref("").is_err());
        let e = classify_ref(">=banana").unwrap_err().to_string();
        assert!(e.contains("invalid version constraint \">=banana\""), "{e}");
    }
}
