//! Package specs as typed to `agentpack add` / `agentpack remove`.
//!
//! Owns: [`PackageSpec`] and [`parse_spec`]. Accepted forms:
//!
//! | typed | meaning |
//! | --- | --- |
//! | `github.com/<owner>/<repo>[/<path>][@<ref>]` | a module ID |
//! | `<owner>/<repo>[/<path>][@<ref>]` | shorthand for the same module ID |
//! | `https://github.com/<owner>/<repo>[.git]` | the repository root |
//! | `https://github.com/<owner>/<repo>/tree/<ref>[/<path>]` | a directory at a ref |
//! | `https://github.com/<owner>/<repo>/blob/<ref>/<path>/<file>` | the directory that holds the file |
//! | `<name>[@<ref>]` (one segment) | a local/alias name |
//! | `oci://<registry>/<repository>[:<tag>\|@sha256:<hex>]` | an OCI package (tag `latest` when neither) |
//! | `./x`, `../x`, `/abs`, `~`, `~/x`, `.`, `..` | a filesystem path (taken verbatim, no `@ref`) |
//!
//! Normalization: host, owner and repository are lowercased (GitHub treats them
//! case-insensitively; module IDs are lowercase); the in-repo path keeps its case because paths
//! inside a repository are case-sensitive and `cache_key` keeps the path's case. Leading and
//! trailing `/` of the path are dropped.
//!
//! A ref in a tree/blob URL is ambiguous when the branch name has a `/` (`feature/x`): the first
//! segment after `tree/` or `blob/` is taken as the ref and the rest as the path. Use the module ID
//! with `@feature/x` for such branches. A relative directory without `./` (`rules/x`) reads as
//! `owner/repo` shorthand: write `./rules/x` for the directory.
//!
//! An `@ref` is a branch, tag or commit, or a version constraint (`@^1.2`); classify it with
//! [`crate::manifest::Pin::from_reference`].
//!
//! Never resolves a ref, reads the filesystem or expands `~`: builders do.

use crate::module_id::{valid_owner, valid_repo, ModuleId, GITHUB_HOST};
use crate::version::{classify_ref, RefKind};

/// A parsed `add` spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackageSpec {
    /// A GitHub package.
    Github(GithubSpec),
    /// A single-segment local/alias name, looked up in the `local/` mirror or the alias map.
    Name {
        /// The name (a valid single-segment module ID).
        name: ModuleId,
        /// The `@ref` suffix, when given.
        reference: Option<String>,
    },
    /// A filesystem path, exactly as typed (`~` not expanded).
    Path(String),
    /// An `oci://` package.
    Oci(OciSpec),
}

/// An `oci://` package spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciSpec {
    /// `oci://<registry>/<repository>`.
    pub module: ModuleId,
    /// `Tag` for `:<tag>`, `Digest` for `@sha256:...`, `Unpinned` (the tag `latest`) for neither.
    pub pin: crate::manifest::Pin,
}

/// Parses `oci://<registry>/<repository>[:<tag>|@sha256:<hex>]`.
fn parse_oci(text: &str) -> Result<OciSpec, String> {
    use crate::lock::{valid_oci_digest, valid_oci_tag};
    use crate::manifest::Pin;
    let (body, pin) = if let Some((body, digest)) = text.rsplit_once('@') {
        if !valid_oci_digest(digest) {
            return Err(format!(
                "`{digest}` is not a manifest digest; write @sha256:<64 lowercase hex digits>"
            ));
        }
        (body, Pin::Digest(digest.to_owned()))
    } else {
        // A tag follows the last `:` after the last `/` (a `:` before it is the registry's port).
        let slash = text.rfind('/').unwrap_or(0);
        match text[slash..].rfind(':') {
            Some(colon) => {
                let (body, tag) = (&text[..slash + colon], &text[slash + colon + 1..]);
                if !valid_oci_tag(tag) {
                    return Err(format!("`{tag}` is not an OCI tag"));
                }
                (body, Pin::Tag(tag.to_owned()))
            }
            None => (text, Pin::Unpinned),
        }
    };
    let module = ModuleId::parse(body).map_err(|e| e.reason)?;
    Ok(OciSpec { module, pin })
}

/// A GitHub package spec, normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GithubSpec {
    /// `github.com/<owner>/<repo>[/<path>]`.
    pub module: ModuleId,
    /// Lowercase owner.
    pub owner: String,
    /// Lowercase repository.
    pub repo: String,
    /// In-repo path, case kept, `""` for the root.
    pub path: String,
    /// The `@ref` suffix or the URL's ref, when given. Classify it with
    /// [`crate::version::classify_ref`].
    pub reference: Option<String>,
}

/// Why a spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid package spec {spec:?}: {reason}")]
pub struct SpecError {
    /// The refused text.
    pub spec: String,
    /// What is wrong and what to type instead.
    pub reason: String,
}

const FORMS: &str = "write github.com/<owner>/<repo>[/<path>], <owner>/<repo>[/<path>], a https://github.com/... URL, a local name, or a path starting with ./";

/// Parses a spec; see the module docs for the forms.
pub fn parse_spec(text: &str) -> Result<PackageSpec, SpecError> {
    let fail = |reason: String| SpecError {
        spec: text.to_owned(),
        reason,
    };
    if text.trim().is_empty() {
        return Err(fail(format!("it is empty; {FORMS}")));
    }
    if text != text.trim() {
        return Err(fail("remove the surrounding spaces".to_owned()));
    }
    if text.chars().any(char::is_control) {
        return Err(fail("it contains a control character".to_owned()));
    }
    if is_filesystem_path(text) {
        return Ok(PackageSpec::Path(text.to_owned()));
    }
    if text.starts_with(crate::module_id::OCI_SCHEME) {
        return parse_oci(text).map(PackageSpec::Oci).map_err(fail);
    }
    if let Some(rest) = strip_scheme(text) {
        return parse_url(rest).map(PackageSpec::Github).map_err(fail);
    }
    if text.contains("://") || text.starts_with("git@") {
        return Err(fail(format!(
            "only https://github.com/ URLs are understood; {FORMS}"
        )));
    }
    let (body, reference) = split_ref(text).map_err(fail)?;
    if !body.contains('/') {
        let name = ModuleId::parse(body).map_err(|e| fail(e.reason))?;
        return Ok(PackageSpec::Name { name, reference });
    }
    let body = body.trim_end_matches('/');
    let segments: Vec<&str> = body.split('/').collect();
    let rest: &[&str] = if segments[0].contains('.') {
        if !segments[0].eq_ignore_ascii_case(GITHUB_HOST) {
            return Err(fail(format!(
                "unsupported host `{}`; packages come from github.com",
                segments[0]
            )));
        }
        &segments[1..]
    } else {
        &segments[..]
    };
    github_from_segments(rest, reference)
        .map(PackageSpec::Github)
        .map_err(fail)
}

fn is_filesystem_path(text: &str) -> bool {
    text == "."
        || text == ".."
        || text == "~"
        || text.starts_with("./")
        || text.starts_with("../")
        || text.starts_with('/')
        || text.starts_with("~/")
}

fn strip_scheme(text: &str) -> Option<&str> {
    let lower = text.get(..8).map(str::to_ascii_lowercase);
    match lower.as_deref() {
        Some("https://") => Some(&text[8..]),
        _ => {
            let lower7 = text.get(..7).map(str::to_ascii_lowercase);
            (lower7.as_deref() == Some("http://")).then(|| &text[7..])
        }
    }
}

fn check_ref(reference: &str) -> Result<(), String> {
    if reference.is_empty() {
        return Err(
            "the ref after `@` is empty; write e.g. @v1.2.0 or @main, or drop the `@`".to_owned(),
        );
    }
    if matches!(classify_ref(reference), Ok(RefKind::Constraint(_))) {
        return Ok(());
    }
    if reference.starts_with(['-', '/'])
        || reference.ends_with('/')
        || reference.contains("..")
        || reference
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '~' | '^' | ':' | '?' | '*' | '[' | '\\'))
    {
        return Err(format!(
            "`{reference}` is not a valid branch, tag or commit name"
        ));
    }
    Ok(())
}

fn split_ref(text: &str) -> Result<(&str, Option<String>), String> {
    match text.split_once('@') {
        None => Ok((text, None)),
        Some((body, reference)) => {
            check_ref(reference)?;
            if body.is_empty() {
                return Err(format!("nothing before `@`; {FORMS}"));
            }
            Ok((body, Some(reference.to_owned())))
        }
    }
}

fn github_from_segments(
    segments: &[&str],
    reference: Option<String>,
) -> Result<GithubSpec, String> {
    let [owner, repo, path @ ..] = segments else {
        return Err(
            "too few segments: a GitHub spec needs an owner and a repository (<owner>/<repo>)"
                .to_owned(),
        );
    };
    if !valid_owner(owner) {
        return Err(format!(
            "`{owner}` is not a GitHub owner (letters, digits, `-` and `_` only)"
        ));
    }
    let repo = repo.strip_suffix(".git").unwrap_or(repo);
    if !valid_repo(repo) {
        return Err(format!(
            "`{repo}` is not a GitHub repository name (letters, digits, `-`, `_` and `.` only)"
        ));
    }
    for segment in path {
        match *segment {
            "" => return Err("the path has an empty segment (`//`)".to_owned()),
            "." | ".." => {
                return Err(format!(
                    "`{segment}` is not allowed in a repository path; name the directory directly"
                ))
            }
            s if s.chars().any(|c| c.is_whitespace() || matches!(c, ':' | '@' | '\\' | '"')) => {
                return Err(format!("the path segment `{s}` has a character module IDs do not allow (spaces, `:`, `@`, `\\`, quotes)"))
            }
            _ => {}
        }
    }
    let path = path.join("/");
    let module = ModuleId::github(owner, repo, &path).map_err(|e| e.reason)?;
    Ok(GithubSpec {
        module,
        owner: owner.to_ascii_lowercase(),
        repo: repo.to_ascii_lowercase(),
        path,
        reference,
    })
}

fn parse_url(rest: &str) -> Result<GithubSpec, String> {
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let host_lower = host.to_ascii_lowercase();
    if host_lower != GITHUB_HOST && host_lower != "www.github.com" {
        // Never the userinfo (`user:token@`): a message holds no credential.
        let shown = match host.rsplit_once('@') {
            Some((_, host)) => format!("***@{host}"),
            None => host.to_owned(),
        };
        return Err(format!(
            "unsupported host `{shown}`; packages come from github.com"
        ));
    }
    let decoded: Vec<String> = path
        .trim_end_matches('/')
        .split('/')
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
    match segments.as_slice() {
        [owner, repo] => github_from_segments(&[owner, repo], None),
        [owner, repo, kind @ ("tree" | "blob"), reference, path @ ..] => {
            check_ref(reference)?;
            let mut parts = vec![*owner, *repo];
            if *kind == "blob" {
                let [dirs @ .., _file] = path else {
                    return Err("a blob URL needs a file path after the ref".to_owned());
                };
                parts.extend_from_slice(dirs);
            } else {
                parts.extend_from_slice(path);
            }
            github_from_segments(&parts, Some((*reference).to_owned()))
        }
        [_, _, "tree" | "blob"] => Err("the URL has no ref after tree/ or blob/".to_owned()),
        [_, _, other, ..] => Err(format!(
            "a GitHub URL of kind `{other}` is not a package; use the repository URL or a /tree/<ref>/<path> URL"
        )),
        _ => Err("too few segments: the URL needs an owner and a repository".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gh(text: &str) -> GithubSpec {
        match parse_spec(text).unwrap() {
            PackageSpec::Github(g) => g,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn oci_specs() {
        use crate::manifest::Pin;
        let digest = format!("sha256:{}", "a".repeat(64));
        let cases = [
            (
                "oci://ghcr.io/acme/skills/pdf:1.2.0",
                "oci://ghcr.io/acme/skills/pdf",
                Pin::Tag("1.2.0".into()),
            ),
            (
                "oci://127.0.0.1:5000/acme/pdf",
                "oci://127.0.0.1:5000/acme/pdf",
                Pin::Unpinned,
            ),
            (
                "oci://127.0.0.1:5000/acme/pdf:v1",
                "oci://127.0.0.1:5000/acme/pdf",
                Pin::Tag("v1".into()),
            ),
        ];
        for (text, module, pin) in cases {
            let PackageSpec::Oci(spec) = parse_spec(text).unwrap() else {
                panic!("{text}")
            };
            assert_eq!(spec.module.as_str(), module);
            assert_eq!(spec.pin, pin);
        }
        let PackageSpec::Oci(spec) =
            parse_spec(&format!("oci://ghcr.io/acme/pdf@{digest}")).unwrap()
        else {
            panic!()
        };
        assert_eq!(spec.pin, Pin::Digest(digest));
        assert!(parse_spec("oci://ghcr.io/acme/pdf@sha256:00").is_err());
        assert!(parse_spec("oci://ghcr.io/Acme/pdf").is_err());
    }

    #[test]
    fn module_ids_and_shorthand() {
        let g = gh("anthropics/skills/skills/canvas-design");
        assert_eq!(
            g.module.as_str(),
            "github.com/anthropics/skills/skills/canvas-design"
        );
        assert_eq!(g.path, "skills/canvas-design");
        assert_eq!(g.reference, None);
        let g = gh("github.com/acme/monorepo/packages/rules@v1.2.0");
        assert_eq!(g.module.as_str(), "github.com/acme/monorepo/packages/rules");
        assert_eq!(g.reference.as_deref(), Some("v1.2.0"));
        let g = gh("Acme/Repo/Skills/X/@feature/y");
        assert_eq!(g.module.as_str(), "github.com/acme/repo/Skills/X");
        assert_eq!((g.owner.as_str(), g.repo.as_str()), ("acme", "repo"));
        assert_eq!(g.reference.as_deref(), Some("feature/y"));
        assert_eq!(
            gh("anthropics/claude-plugins-official@f359d43")
                .reference
                .as_deref(),
            Some("f359d43")
        );
        assert_eq!(gh("GitHub.com/a/b").module.as_str(), "github.com/a/b");
    }

    #[test]
    fn urls() {
        let g = gh("https://github.com/anthropics/skills/tree/main/skills/canvas-design");
        assert_eq!(
            g.module.as_str(),
            "github.com/anthropics/skills/skills/canvas-design"
        );
        assert_eq!(g.reference.as_deref(), Some("main"));
        let g = gh("https://github.com/acme/x/blob/v1.0.0/skills/demo/SKILL.md");
        assert_eq!(g.module.as_str(), "github.com/acme/x/skills/demo");
        assert_eq!(g.reference.as_deref(), Some("v1.0.0"));
        let g = gh("https://github.com/acme/x/blob/main/SKILL.md");
        assert_eq!(g.module.as_str(), "github.com/acme/x");
        let g = gh("https://www.github.com/Acme/X.git");
        assert_eq!(g.module.as_str(), "github.com/acme/x");
        let g = gh("https://github.com/acme/x/tree/main/My%2DDir?tab=readme#top");
        assert_eq!(g.module.as_str(), "github.com/acme/x/My-Dir");
        let e = parse_spec("https://github.com/acme/x/tree/main/My%20Dir").unwrap_err();
        assert!(e.reason.contains("spaces"), "{e}");
    }

    #[test]
    fn names_and_paths() {
        assert_eq!(
            parse_spec("local-rules@main").unwrap(),
            PackageSpec::Name {
                name: ModuleId::parse("local-rules").unwrap(),
                reference: Some("main".into())
            }
        );
        for p in [
            "./local-rules",
            "../x",
            "/abs/dir",
            "~",
            "~/x",
            ".",
            "..",
            "./a@b",
        ] {
            assert_eq!(parse_spec(p).unwrap(), PackageSpec::Path(p.to_owned()));
        }
    }

    #[test]
    fn malformed() {
        for (text, needle) in [
            ("", "empty"),
            ("  ", "empty"),
            (" a/b", "spaces"),
            ("github.com/acme", "too few segments"),
            ("github.com", "too few segments"),
            ("gitlab.com/a/b", "unsupported host"),
            ("https://gitlab.com/a/b", "unsupported host"),
            ("https://github.com/a", "too few segments"),
            ("https://github.com/a/b/tree", "no ref"),
            ("https://github.com/a/b/blob/main", "file path"),
            ("https://github.com/a/b/pulls/1", "kind `pulls`"),
            ("ssh://github.com/a/b", "only https"),
            ("git@github.com:a/b.git", "only https"),
            ("a/b/../c", "`..`"),
            ("a/b//c", "empty segment"),
            ("a.b/c", "unsupported host"),
            ("ac!me/x", "not a GitHub owner"),
            ("acme/x y", "not a GitHub repository"),
            ("acme/x@", "ref after `@` is empty"),
            ("acme/x@a..b", "not a valid branch"),
            ("@main", "nothing before"),
            ("Local", "lowercase"),
        ] {
            let e = parse_spec(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }
}
