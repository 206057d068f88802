//! Parsing `[dependencies]`: GitHub modules with a version, branch, tag or commit, `path`
//! dependencies and `oci://` modules, each into a [`Dependency`] with its [`Pin`].
//!
//! Must never accept two pins on one dependency or a field it does not know.

use indexmap::IndexMap;
use toml::Value;

use super::*;
use crate::module_id::ModuleId;
use crate::validate::CommitSha;
use crate::version::VersionConstraint;

pub(super) const DEPENDENCY_FIELDS: &str = "version, branch, tag, commit and path";

pub(super) fn parse_dependencies(
    ctx: &Ctx<'_>,
    value: &Value,
) -> Result<IndexMap<ModuleId, Dependency>, ManifestError> {
    let mut out = IndexMap::new();
    for (key, dotted, value) in ctx.entries("dependencies", value)? {
        let module = ModuleId::parse(key).map_err(|e| ctx.invalid(&dotted, e.to_string()))?;
        let dependency = if module.is_oci() {
            parse_oci_dependency(ctx, &dotted, value)?
        } else {
            parse_dependency(ctx, &dotted, value)?
        };
        out.insert(module, dependency);
    }
    Ok(out)
}

pub(super) fn parse_dependency(
    ctx: &Ctx<'_>,
    dotted: &str,
    value: &Value,
) -> Result<Dependency, ManifestError> {
    match value {
        Value::String(text) => Pin::from_short(text)
            .map(Dependency::Remote)
            .map_err(|e| ctx.invalid(dotted, e.to_string())),
        Value::Table(table) => {
            let mut pins: Vec<(&str, Pin)> = Vec::new();
            let mut path = None;
            for (field, sub, v) in dotted_entries(dotted, table) {
                let text = ctx.string(&sub, v)?;
                if text.trim().is_empty() {
                    return Err(ctx.invalid(
                        &sub,
                        "must not be empty; remove the field to leave the pin open",
                    ));
                }
                match field {
                    "version" => {
                        let c = VersionConstraint::parse(&text)
                            .map_err(|e| ctx.invalid(&sub, e.to_string()))?;
                        pins.push(("version", Pin::Version(c)));
                    }
                    "branch" => pins.push(("branch", Pin::Branch(text))),
                    "tag" => pins.push(("tag", Pin::Tag(text))),
                    "commit" => {
                        let c = CommitSha::parse(&text).map_err(|_| {
                            ctx.invalid(&sub, format!("{text:?} is not a full commit; write all 40 hex digits, or use {{ tag = ... }} / {{ branch = ... }}"))
                        })?;
                        pins.push(("commit", Pin::Commit(c)));
                    }
                    "path" => path = Some(text),
                    other => {
                        let hint = match other {
                            "rev" | "sha" | "ref" => " (use `commit` for a commit, `tag` or `branch` for a name)",
                            "git" | "url" | "repo" => " (the repository is part of the key: \"github.com/<owner>/<repo>[/<path>]\")",
                            "subdir" | "dir" | "directory" => " (a subdirectory is part of the key: \"github.com/<owner>/<repo>/<subdir>\")",
                            _ => "",
                        };
                        return Err(ctx.invalid(
                            &sub,
                            format!("unknown field `{other}`; a dependency table accepts {DEPENDENCY_FIELDS}{hint}"),
                        ));
                    }
                }
            }
            if pins.len() > 1 {
                let names: Vec<&str> = pins.iter().map(|(n, _)| *n).collect();
                return Err(ctx.invalid(
                    dotted,
                    format!("conflicting fields {}; keep exactly one of version, branch, tag and commit", names.join(" and ")),
                ));
            }
            match (path, pins.pop()) {
                (Some(_), Some((name, _))) => Err(ctx.invalid(
                    dotted,
                    format!("`path` cannot be combined with `{name}`: a path dependency is read from disk as it is; remove `{name}`"),
                )),
                (Some(path), None) => Ok(Dependency::Path(path)),
                (None, Some((_, pin))) => Ok(Dependency::Remote(pin)),
                (None, None) => Ok(Dependency::Remote(Pin::Unpinned)),
            }
        }
        other => Err(ctx.invalid(
            dotted,
            format!(
                "expected a string or a table, found {}; write \"^1.2\" or {{ tag = \"v1.0.0\" }}",
                other.type_str()
            ),
        )),
    }
}

/// An `oci://` dependency: `"1.2.0"` or `{ tag = "1.2.0" }` (a tag), `{ digest = "sha256:..." }`
/// (a manifest digest), `{}` (the tag `latest`).
pub(super) fn parse_oci_dependency(
    ctx: &Ctx<'_>,
    dotted: &str,
    value: &Value,
) -> Result<Dependency, ManifestError> {
    use crate::lock::{valid_oci_digest, valid_oci_tag};
    let tag = |sub: &str, text: String| {
        if valid_oci_tag(&text) {
            Ok(Pin::Tag(text))
        } else {
            Err(ctx.invalid(sub, format!("{text:?} is not an OCI tag (letters, digits, `_`, `.` and `-`, at most 128, not starting with `.` or `-`)")))
        }
    };
    let digest = |sub: &str, text: String| {
        if valid_oci_digest(&text) {
            Ok(Pin::Digest(text))
        } else {
            Err(ctx.invalid(
                sub,
                format!(
                    "{text:?} is not a manifest digest; write sha256:<64 lowercase hex digits>"
                ),
            ))
        }
    };
    match value {
        Value::String(text) if text.starts_with("sha256:") => {
            digest(dotted, text.clone()).map(Dependency::Remote)
        }
        Value::String(text) => tag(dotted, text.clone()).map(Dependency::Remote),
        Value::Table(table) => {
            let mut pins = Vec::new();
            for (field, sub, v) in dotted_entries(dotted, table) {
                let text = ctx.string(&sub, v)?;
                match field {
                    "tag" => pins.push(("tag", tag(&sub, text)?)),
                    "digest" => pins.push(("digest", digest(&sub, text)?)),
                    other => {
                        return Err(ctx.invalid(
                            &sub,
                            format!("unknown field `{other}`; an oci:// dependency accepts tag or digest"),
                        ))
                    }
                }
            }
            if pins.len() > 1 {
                return Err(ctx.invalid(
                    dotted,
                    "conflicting fields tag and digest; keep exactly one",
                ));
            }
            Ok(Dependency::Remote(
                pins.pop().map_or(Pin::Unpinned, |(_, pin)| pin),
            ))
        }
        other => Err(ctx.invalid(
            dotted,
            format!(
                "expected a string or a table, found {}; write {{ tag = \"1.2.0\" }} or {{ digest = \"sha256:...\" }}",
                other.type_str()
            ),
        )),
    }
}
