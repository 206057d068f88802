//! Local packages: `path` dependencies and the `$AGENTPACK_HOME/local/<owner>/<repo>` offline mirror.
//!
//! Both are copied from disk on every lock/sync by the extraction rules of a GitHub archive
//! ([`SafeTreeWriter`]), so a package under development copies to the same tree it will extract to
//! once published: regular files written 0644, `.git` and git-ignored files left out, a symbolic link
//! kept as a link when its target is a clean relative path inside the package and written as an empty
//! file otherwise. Every link that cannot be followed inside the copy (absolute, leaving the package,
//! not clean, dangling, looping) is returned as a [`SkippedLink`] for the caller to warn about.
//! The copy's `dirhash40` (ADDENDUM: regular files of the directory, links skipped) stands in for a
//! commit and names the cache slot together with the canonical directory (`path:`) or the spec
//! (`local:`). Never writes into the source directory; never reads through a link. Prints nothing.

use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use agentpack_harness::tree::{LinkProblem, Node, PackageTree, TreeEntry};
use agentpack_lockfile::keys::{dirhash40_from_entries, local_cache_key, path_cache_key};
use agentpack_lockfile::validate::CacheKey;

use crate::extract::{ExtractError, SafeTreeWriter};

/// Why a local package could not be copied.
#[derive(Debug, thiserror::Error)]
pub enum LocalPackageError {
    /// The source directory is missing.
    #[error("{module}: the directory {path} does not exist\n  fix       create it, or fix the `path` in agentpack.toml")]
    Missing {
        /// The module.
        module: String,
        /// The directory.
        path: PathBuf,
    },
    /// A filesystem operation failed.
    #[error("{module}: cannot copy {path}: {source}")]
    Io {
        /// The module.
        module: String,
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file name that is not UTF-8.
    #[error("{module}: the file name {path:?} is not valid UTF-8")]
    NonUtf8 {
        /// The module.
        module: String,
        /// The path.
        path: PathBuf,
    },
    /// The copy could not be written by the extraction rules.
    #[error("{module}: cannot copy {source_dir}: {error}")]
    Copy {
        /// The module.
        module: String,
        /// The source directory.
        source_dir: PathBuf,
        /// The cause.
        error: ExtractError,
    },
}

/// Why a symbolic link of a local package is not followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkIssue {
    /// The target is an absolute path (copied as an empty file).
    Absolute,
    /// The target climbs out of the package with `..` (copied as an empty file).
    LeavesPackage,
    /// The target has empty or `.` components, or is empty (copied as an empty file).
    NotClean,
    /// The target is not valid UTF-8 (copied as an empty file).
    NonUtf8Target,
    /// The target names nothing in the copy (kept as a link).
    Dangling,
    /// The target loops: a chain of links back to itself, or a directory that contains the link
    /// (kept as a link).
    Loops,
}

impl LinkIssue {
    /// Is the link kept as a link in the copy (else it is an empty regular file)?
    pub fn kept_as_link(self) -> bool {
        matches!(self, LinkIssue::Dangling | LinkIssue::Loops)
    }

    fn reason(self) -> &'static str {
        match self {
            LinkIssue::Absolute => "is absolute",
            LinkIssue::LeavesPackage => "leaves the package",
            LinkIssue::NotClean => "is not a clean relative path",
            LinkIssue::NonUtf8Target => "has a target that is not valid UTF-8",
            LinkIssue::Dangling => "points to nothing in the package",
            LinkIssue::Loops => "loops",
        }
    }

    fn fix(self) -> &'static str {
        match self {
            LinkIssue::Absolute | LinkIssue::LeavesPackage => {
                "copy what it points to into the package and link to it with a relative path, or remove the link"
            }
            LinkIssue::NotClean => {
                "write the target without `.` or empty components (`dup`, not `./dup`)"
            }
            LinkIssue::NonUtf8Target => "give its target a UTF-8 name, or remove the link",
            LinkIssue::Dangling => {
                "create what it points to, or remove the link (git-ignored files are not copied)"
            }
            LinkIssue::Loops => "point it at a directory that does not contain it, or remove it",
        }
    }
}

/// A symbolic link of a local package that the copy does not follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedLink {
    /// The link, relative to the package, `/`-separated.
    pub path: String,
    /// Its target as written (lossy UTF-8).
    pub target: String,
    /// Why it is not followed.
    pub issue: LinkIssue,
}

impl fmt::Display for SkippedLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = if self.issue.kept_as_link() {
            "kept as a link, but nothing reads through it"
        } else {
            "not followed: the copy holds an empty file in its place, as the published package would"
        };
        write!(
            f,
            "symbolic link {} -> {} {}; {outcome}\n  fix       {}",
            self.path,
            self.target,
            self.issue.reason(),
            self.issue.fix()
        )
    }
}

/// A copied local package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalCopy {
    /// The canonical source directory.
    pub source: PathBuf,
    /// `dirhash40` of the copied files (what the lock records as `commit`).
    pub dirhash40: String,
    /// The cache slot name.
    pub cache_key: CacheKey,
    /// Number of regular files copied (links copied as empty files not counted).
    pub files: usize,
    /// Number of symbolic links kept as links.
    pub links: usize,
    /// Links the copy does not follow, sorted by path.
    pub skipped_links: Vec<SkippedLink>,
}

impl LocalCopy {
    /// One warning per skipped link, naming the module, the source directory and the link.
    pub fn warnings(&self, module: &str) -> Vec<String> {
        self.skipped_links
            .iter()
            .map(|link| format!("{module} ({}): {link}", self.source.display()))
            .collect()
    }
}

/// One entry of a local package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalEntry {
    /// A regular file, by absolute path.
    File(PathBuf),
    /// A symbolic link with its target (`None` when the target is not UTF-8).
    Link(Option<String>),
}

/// The entries a local package consists of: `(relative path, entry)`, regular files and symbolic
/// links (never followed), `.git` skipped, git-ignored paths left out, sorted bytewise by path.
pub fn collect_entries(
    module: &str,
    source: &Path,
) -> Result<Vec<(String, LocalEntry)>, LocalPackageError> {
    let walker = ignore::WalkBuilder::new(source)
        .hidden(false)
        .ignore(false)
        .git_global(false)
        .git_exclude(true)
        .git_ignore(true)
        .require_git(false)
        .parents(true)
        .follow_links(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .build();
    let mut entries = Vec::new();
    for entry in walker {
        let entry = entry.map_err(|e| LocalPackageError::Io {
            module: module.to_owned(),
            path: source.to_path_buf(),
            source: std::io::Error::other(e),
        })?;
        let Some(file_type) = entry.file_type() else {
            continue;
        };
        if !file_type.is_file() && !file_type.is_symlink() {
            continue;
        }
        let Ok(relative) = entry.path().strip_prefix(source) else {
            continue;
        };
        let relative = relative
            .to_str()
            .ok_or_else(|| LocalPackageError::NonUtf8 {
                module: module.to_owned(),
                path: entry.path().to_path_buf(),
            })?;
        let local = if file_type.is_symlink() {
            let target =
                fs_err::read_link(entry.path()).map_err(|source| LocalPackageError::Io {
                    module: module.to_owned(),
                    path: entry.path().to_path_buf(),
                    source,
                })?;
            LocalEntry::Link(target.to_str().map(str::to_owned))
        } else {
            LocalEntry::File(entry.path().to_path_buf())
        };
        entries.push((relative.to_owned(), local));
    }
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(entries)
}

/// The regular files a local package consists of: `(relative path, absolute path)`, symlinks and
/// `.git` skipped, git-ignored files left out, sorted bytewise by relative path (what `dirhash40`
/// covers).
pub fn collect_files(
    module: &str,
    source: &Path,
) -> Result<Vec<(String, PathBuf)>, LocalPackageError> {
    Ok(collect_entries(module, source)?
        .into_iter()
        .filter_map(|(relative, entry)| match entry {
            LocalEntry::File(absolute) => Some((relative, absolute)),
            LocalEntry::Link(_) => None,
        })
        .collect())
}

/// Why extraction wrote a link to `target` as an empty file; only called for links that failed
/// [`crate::extract::link_stays_inside`], so a target that is neither absolute nor unclean climbs out.
fn emptied_issue(target: &str) -> LinkIssue {
    if target.starts_with('/') {
        LinkIssue::Absolute
    } else if target.split('/').any(|c| c.is_empty() || c == ".") {
        LinkIssue::NotClean
    } else {
        LinkIssue::LeavesPackage
    }
}

/// The links kept in the copy that cannot be followed inside it: dangling, a chain that loops, or a
/// directory that contains the link itself (a walk through it never ends).
fn unfollowable_links(
    copy_listing: BTreeMap<String, TreeEntry>,
    destination: &Path,
) -> Vec<(String, String, LinkIssue)> {
    let tree = PackageTree::from_entries(destination.to_path_buf(), copy_listing);
    let mut problems = Vec::new();
    for (path, entry) in tree.entries() {
        let TreeEntry::Symlink { target } = entry else {
            continue;
        };
        let issue = match tree.resolve(path) {
            Ok(Node::File(_)) => continue,
            Ok(Node::Dir(dir)) => {
                if dir.is_empty() || path.starts_with(&format!("{dir}/")) {
                    LinkIssue::Loops
                } else {
                    continue;
                }
            }
            Err(LinkProblem::Loop { .. }) => LinkIssue::Loops,
            Err(LinkProblem::Missing) => LinkIssue::Dangling,
            // Kept links stay inside by construction; a chain that still leaves is reported as such.
            Err(LinkProblem::Outside { .. }) => LinkIssue::LeavesPackage,
        };
        problems.push((path.clone(), target.clone(), issue));
    }
    problems
}

struct Copied {
    dirhash40: String,
    files: usize,
    links: usize,
    skipped_links: Vec<SkippedLink>,
}

fn copy_entries(
    module: &str,
    source: &Path,
    entries: &[(String, LocalEntry)],
    destination: &Path,
) -> Result<Copied, LocalPackageError> {
    let io = |path: &Path, source| LocalPackageError::Io {
        module: module.to_owned(),
        path: path.to_path_buf(),
        source,
    };
    let copy_error = |error| LocalPackageError::Copy {
        module: module.to_owned(),
        source_dir: source.to_path_buf(),
        error,
    };
    let mut writer = SafeTreeWriter::new(destination).map_err(copy_error)?;
    let mut hashed = Vec::new();
    let mut listing = BTreeMap::new();
    let mut targets = BTreeMap::new();
    for (relative, entry) in entries {
        match entry {
            LocalEntry::File(absolute) => {
                let bytes = fs_err::read(absolute).map_err(|e| io(absolute, e))?;
                writer
                    .file(relative, &mut bytes.as_slice())
                    .map_err(copy_error)?;
                hashed.push((relative.as_str(), bytes));
            }
            LocalEntry::Link(target) => {
                // A target that is not UTF-8 is no clean relative path: extraction empties it.
                writer
                    .symlink(relative, target.as_deref().unwrap_or(""))
                    .map_err(copy_error)?;
                targets.insert(relative.as_str(), target.as_deref());
            }
        }
    }
    let report = writer.finish();
    let mut skipped_links = Vec::new();
    for relative in &report.links_emptied {
        let target = targets.get(relative.as_str()).copied().flatten();
        let (target, issue) = match target {
            Some(target) => (target.to_owned(), emptied_issue(target)),
            None => {
                let raw = fs_err::read_link(source.join(relative)).unwrap_or_default();
                (
                    String::from_utf8_lossy(raw.as_os_str().as_bytes()).into_owned(),
                    LinkIssue::NonUtf8Target,
                )
            }
        };
        skipped_links.push(SkippedLink {
            path: relative.clone(),
            target,
            issue,
        });
    }
    for (relative, entry) in entries {
        let listed = match entry {
            LocalEntry::File(_) => TreeEntry::File { executable: false },
            LocalEntry::Link(_) if report.links_emptied.contains(relative) => {
                TreeEntry::File { executable: false }
            }
            LocalEntry::Link(target) => TreeEntry::Symlink {
                target: target.clone().unwrap_or_default(),
            },
        };
        listing.insert(relative.clone(), listed);
    }
    skipped_links.extend(unfollowable_links(listing, destination).into_iter().map(
        |(path, target, issue)| SkippedLink {
            path,
            target,
            issue,
        },
    ));
    skipped_links.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    Ok(Copied {
        files: hashed.len(),
        links: report.links_kept,
        dirhash40: dirhash40_from_entries(hashed),
        skipped_links,
    })
}

/// `dirhash40` of a directory as it is now (without copying).
pub fn dirhash40(module: &str, source: &Path) -> Result<String, LocalPackageError> {
    let files = collect_files(module, source)?;
    let mut hashed = Vec::with_capacity(files.len());
    for (relative, absolute) in &files {
        let bytes = fs_err::read(absolute).map_err(|e| LocalPackageError::Io {
            module: module.to_owned(),
            path: absolute.clone(),
            source: e,
        })?;
        hashed.push((relative.as_str(), bytes));
    }
    Ok(dirhash40_from_entries(hashed))
}

fn canonical(module: &str, dir: &Path) -> Result<PathBuf, LocalPackageError> {
    match fs_err::canonicalize(dir) {
        Ok(path) if path.is_dir() => Ok(path),
        _ => Err(LocalPackageError::Missing {
            module: module.to_owned(),
            path: dir.to_path_buf(),
        }),
    }
}

/// Copies a `path` dependency (`dir`, already joined to the project root) into `destination`.
pub fn copy_path_package(
    module: &str,
    dir: &Path,
    destination: &Path,
) -> Result<LocalCopy, LocalPackageError> {
    let source = canonical(module, dir)?;
    let entries = collect_entries(module, &source)?;
    let copied = copy_entries(module, &source, &entries, destination)?;
    Ok(LocalCopy {
        cache_key: path_cache_key(&source, &copied.dirhash40),
        dirhash40: copied.dirhash40,
        files: copied.files,
        links: copied.links,
        skipped_links: copied.skipped_links,
        source,
    })
}

/// The `local/` mirror directory of `spec` (`owner/repo[/path]`): `$AGENTPACK_HOME/local/<spec>`.
pub fn local_mirror_dir(agentpack_home: &Path, spec: &str) -> PathBuf {
    let mut dir = agentpack_home.join("local");
    for component in spec
        .split('/')
        .filter(|c| !c.is_empty() && *c != "." && *c != "..")
    {
        dir.push(component);
    }
    dir
}

/// Is `spec` present in the `local/` mirror?
pub fn has_local_mirror(agentpack_home: &Path, spec: &str) -> bool {
    local_mirror_dir(agentpack_home, spec).is_dir()
}

/// Copies the `local/` mirror package `spec` into `destination`.
pub fn copy_local_mirror_package(
    module: &str,
    agentpack_home: &Path,
    spec: &str,
    destination: &Path,
) -> Result<LocalCopy, LocalPackageError> {
    let source = canonical(module, &local_mirror_dir(agentpack_home, spec))?;
    let entries = collect_entries(module, &source)?;
    let copied = copy_entries(module, &source, &entries, destination)?;
    Ok(LocalCopy {
        cache_key: local_cache_key(spec, &copied.dirhash40),
        dirhash40: copied.dirhash40,
        files: copied.files,
        links: copied.links,
        skipped_links: copied.skipped_links,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::link_stays_inside;

    #[test]
    fn emptied_links_are_classified_by_the_extraction_rule() {
        for (link, target, issue) in [
            ("skills/escape", "/abs/outside", LinkIssue::Absolute),
            ("skills/climb", "../../outside", LinkIssue::LeavesPackage),
            ("skills/dotted", "./dup", LinkIssue::NotClean),
            ("skills/double", "a//b", LinkIssue::NotClean),
            ("skills/empty", "", LinkIssue::NotClean),
        ] {
            assert!(!link_stays_inside(link, target), "{link} -> {target}");
            assert_eq!(emptied_issue(target), issue, "{link} -> {target}");
        }
        assert!(link_stays_inside("skills/inside", "../skills/dup"));
    }

    #[test]
    fn kept_links_that_cannot_be_followed_are_found() {
        let listing: BTreeMap<String, TreeEntry> = [
            ("skills/dup/SKILL.md", None),
            ("skills/inside", Some("../skills/dup")),
            ("skills/loop/SKILL.md", None),
            ("skills/loop/self", Some("../loop")),
            ("skills/root", Some("..")),
            ("skills/dangling", Some("../nothing")),
            ("a", Some("b")),
            ("b", Some("a")),
        ]
        .into_iter()
        .map(|(path, target)| {
            let entry = match target {
                Some(target) => TreeEntry::Symlink {
                    target: target.to_owned(),
                },
                None => TreeEntry::File { executable: false },
            };
            (path.to_owned(), entry)
        })
        .collect();
        let found: Vec<(String, LinkIssue)> = unfollowable_links(listing, Path::new("/copy"))
            .into_iter()
            .map(|(path, _, issue)| (path, issue))
            .collect();
        assert_eq!(
            found,
            vec![
                ("a".to_owned(), LinkIssue::Loops),
                ("b".to_owned(), LinkIssue::Loops),
                ("skills/dangling".to_owned(), LinkIssue::Dangling),
                ("skills/loop/self".to_owned(), LinkIssue::Loops),
                ("skills/root".to_owned(), LinkIssue::Loops),
            ]
        );
        let warning = SkippedLink {
            path: "skills/loop/self".into(),
            target: "../loop".into(),
            issue: LinkIssue::Loops,
        }
        .to_string();
        assert!(
            warning.starts_with("symbolic link skills/loop/self -> ../loop loops; kept as a link")
                && warning.contains("fix"),
            "{warning}"
        );
    }
}
