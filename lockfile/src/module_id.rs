//! Module IDs: the keys of `[dependencies]` and the `module` of every lock entry.
//!
//! Owns: [`ModuleId`] and its validation. A module ID is a GitHub path
//! `github.com/<owner>/<repo>[/<p1>/<p2>...]`, an OCI repository `oci://<registry>[:<port>]/<repository>`
//! (a package published as an OCI artifact or image, see [`OciModule`]), or a single-segment
//! local/alias name (`local-rules`). Host, owner and repo are lowercase (GitHub treats them case-insensitively, and
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

/// The parts of an `oci://` module ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OciModule<'a> {
    /// The registry host, with its `:port` when it has one (`ghcr.io`, `127.0.0.1:5000`).
    pub registry: &'a str,
    /// The repository inside the registry (`acme/skills/pdf`).
    pub repository: &'a str,
}

/// The scheme of OCI module IDs.
pub const OCI_SCHEME: &str = "oci://";

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
        if let Some(rest) = id.strip_prefix(OCI_SCHEME) {
            check_oci(id, rest)?;
            return Ok(Self(id.to_owned()));
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

    /// The registry and repository of an `oci://` module; `None` for any other.
    pub fn as_oci(&self) -> Option<OciModule<'_>> {
        let rest = self.0.strip_prefix(OCI_SCHEME)?;
        let (registry, repository) = rest.split_once('/')?;
        Some(OciModule {
            registry,
            repository,
        })
    }

    /// True for an `oci://` module.
    pub fn is_oci(&self) -> bool {
        self.0.starts_with(OCI_SCHEME)
    }

    /// True for a single-segment local/alias name.
    pub fn is_local_name(&self) -> bool {
        !self.0.contains('/')
    }
}

/// Checks `oci://<registry>[:<port>]/<repository>`: a lowercase host name or address with an
/// optional port, and a repository of lowercase path components as the OCI distribution spec
/// names them (`[a-z0-9]+` separated by `.`, `_`, `__` or `-`), no tag or digest (the pin goes in
/// the value: `{ tag = "1.2.0" }` or `{ digest = "sha256:..." }`).
fn check_oci(id: &str, rest: &str) -> Result<(), ModuleIdError> {
    let Some((registry, repository)) = rest.split_once('/') else {
        return Err(err(
            id,
            "it names no repository; write oci://<registry>/<repository>, e.g. oci://ghcr.io/acme/skills/pdf",
        ));
    };
    let (host, port) = match registry.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (registry, None),
    };
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-'))
        && !host.starts_with(['.', '-'])
        && !host.ends_with(['.', '-']);
    if !host_ok {
        return Err(err(
            id,
            format!("`{registry}` is not a registry host (lowercase letters, digits, `.` and `-`, then an optional :port)"),
        ));
    }
    if let Some(port) = port {
        if port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err(id, format!("`{port}` is not a port number")));
        }
    }
    if repository.contains(['@', ':']) {
        return Err(err(
            id,
            "a tag or digest goes in the value, not the key: \"oci://<registry>/<repository>\" = { tag = \"1.2.0\" }",
        ));
    }
    if repository.is_empty() || repository.ends_with('/') {
        return Err(err(
            id,
            "remove the trailing `/`; write oci://<registry>/<repository>",
        ));
    }
    for component in repository.split('/') {
        if !is_oci_repository_component(component) {
            return Err(err(
                id,
                format!("`{component}` is not an OCI repository component (lowercase letters and digits, separated by `.`, `_`, `__` or `-`)"),
            ));
        }
    }
    Ok(())
}

/// Is `component` one `/`-separated part of an OCI repository name
/// (`[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`, the distribution spec's grammar)?
pub fn is_oci_repository_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut index = 0;
    while index < bytes.len() {
        let b = bytes[index];
        if alnum(b) {
            index += 1;
            continue;
        }
        let start = index;
        while index < bytes.len() && !alnum(bytes[index]) {
            index += 1;
        }
        let separator = &component[start..index];
        let ok = separator == "."
            || separator == "_"
            || separator == "__"
            || separator.bytes().all(|b| b == b'-');
        if !ok {
            return false;
        }
    }
    true
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
    fn oci_modules() {
        let m = ModuleId::parse("oci://ghcr.io/acme/skills/pdf").unwrap();
        assert_eq!(
            m.as_oci(),
            Some(OciModule {
                registry: "ghcr.io",
                repository: "acme/skills/pdf"
            })
        );
        assert!(m.is_oci() && m.as_github().is_none() && !m.is_local_name());
        let local = ModuleId::parse("oci://127.0.0.1:5000/team/a__b-c.d").unwrap();
        assert_eq!(local.as_oci().unwrap().registry, "127.0.0.1:5000");
        for (input, needle) in [
            ("oci://ghcr.io", "no repository"),
            ("oci://ghcr.io/acme/pdf:1.2", "tag or digest"),
            ("oci://ghcr.io/acme/pdf@sha256:00", "tag or digest"),
            ("oci://GHCR.io/acme/pdf", "registry host"),
            ("oci://ghcr.io:x/acme/pdf", "port"),
            ("oci://ghcr.io/Acme/pdf", "component"),
            ("oci://ghcr.io/acme//pdf", "component"),
            ("oci://ghcr.io/acme/pdf/", "trailing"),
            ("oci://ghcr.io/a..b", "component"),
        ] {
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
