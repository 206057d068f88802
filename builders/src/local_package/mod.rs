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
//! (`local:`). Files are streamed (hashed and copied in one pass, opened without blocking, never
//! read whole into memory). A FIFO, socket or device in the package is an error naming it; files
//! that look like private keys or `.env` files are refused, naming them, unless the package's own
//! `agentpack.toml` lists them in `allow-secret-files`; a `SKILL.md` with broken front matter (not
//! closed, YAML aliases, NUL, an absurd or path-like `name`) is a warning naming the file.
//! Never writes into the source directory; never reads through a link. Prints nothing.
//!
//! Layout: `copy` (collecting entries, the streaming copy and `dirhash40`), `secrets` (secret-
//! looking files), `frontmatter` (`SKILL.md` checks); this module holds the errors, the result
//! types and the two entry points.

use std::fmt;
use std::path::{Path, PathBuf};

use agentpack_lockfile::keys::{local_cache_key, path_cache_key};
use agentpack_lockfile::validate::CacheKey;

use crate::extract::ExtractError;

mod copy;
mod frontmatter;
mod secrets;

pub use copy::{collect_entries, collect_files, LocalEntry};
use copy::{copy_entries, DirHasher};
use frontmatter::frontmatter_problems;
pub use frontmatter::{frontmatter_problem, skill_name_problem, MAX_SKILL_NAME};
use secrets::refuse_secret_files;
pub use secrets::{looks_like_secret, ALLOW_SECRET_FILES_KEY};

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
    #[error("{module}: cannot copy {path}: {cause}")]
    Io {
        /// The module.
        module: String,
        /// The path.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// A file name that is not UTF-8.
    #[error("{module}: the file name {path:?} is not valid UTF-8")]
    NonUtf8 {
        /// The module.
        module: String,
        /// The path.
        path: PathBuf,
    },
    /// A FIFO, socket or device in the package: never copied, never opened (it could block).
    #[error("{module}: {path} is a {kind}; a package holds only files, directories and symbolic links\n  fix       move it out of the package, or git-ignore it there")]
    SpecialFile {
        /// The module.
        module: String,
        /// The entry.
        path: PathBuf,
        /// What it is (`FIFO`, `socket`, `character device`, `block device`).
        kind: &'static str,
    },
    /// Files that look like private keys or `.env` files, not listed in the package's opt-in.
    #[error("{module}: refusing to copy {files} from {} into the store: {count} file(s) that look like a private key or an environment file (the store is readable by every user)\n  fix       remove or git-ignore them in the package; if they are meant to be shipped, list them in `allow-secret-files = [...]` in {}/agentpack.toml", source_dir.display(), source_dir.display())]
    SecretFiles {
        /// The module.
        module: String,
        /// The source directory.
        source_dir: PathBuf,
        /// The files, relative, truncated for the message.
        files: String,
        /// How many.
        count: usize,
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
    /// Regular files that are executable in the source directory (copied 0644 all the same).
    pub executables: std::collections::BTreeSet<String>,
    /// `SKILL.md` files whose front matter is broken or names an unsafe skill, with why.
    pub frontmatter_problems: Vec<(String, String)>,
}

impl LocalCopy {
    /// One warning per skipped link and per broken `SKILL.md`, naming the module, the source
    /// directory and the entry.
    pub fn warnings(&self, module: &str) -> Vec<String> {
        self.skipped_links
            .iter()
            .map(|link| format!("{module} ({}): {link}", self.source.display()))
            .chain(self.frontmatter_problems.iter().map(|(file, problem)| {
                format!(
                    "{module} ({}): {file}: {problem}; its `name` is not used\n  fix       write the front matter as `---`, `name: my-skill`, `description: ...`, `---` (a short name of letters, digits and dashes)",
                    self.source.display()
                )
            }))
            .collect()
    }
}

/// Opens `path` for reading without blocking on a FIFO, and only if it is a regular file.
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    Ok(file)
}

/// `dirhash40` of a directory as it is now (without copying; files are streamed).
pub fn dirhash40(module: &str, source: &Path) -> Result<String, LocalPackageError> {
    let files = collect_files(module, source)?;
    let mut dirhash = DirHasher::default();
    for (relative, absolute) in &files {
        let io = |e| LocalPackageError::Io {
            module: module.to_owned(),
            path: absolute.clone(),
            cause: e,
        };
        let file = open_regular(absolute).map_err(io)?;
        std::io::copy(&mut dirhash.file(relative, file), &mut std::io::sink()).map_err(io)?;
    }
    Ok(dirhash.finish())
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
    copy_package(module, source, destination, path_cache_key)
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
    copy_package(module, source, destination, |_, dirhash40| {
        local_cache_key(spec, dirhash40)
    })
}

/// Copies the package at `source` (canonical) into `destination`, refusing secret files;
/// `cache_key` names its slot from the source and the copy's dirhash.
fn copy_package(
    module: &str,
    source: PathBuf,
    destination: &Path,
    cache_key: impl FnOnce(&Path, &str) -> CacheKey,
) -> Result<LocalCopy, LocalPackageError> {
    let entries = collect_entries(module, &source)?;
    refuse_secret_files(module, &source, &entries)?;
    let copied = copy_entries(module, &source, &entries, destination)?;
    Ok(LocalCopy {
        cache_key: cache_key(&source, &copied.dirhash40),
        dirhash40: copied.dirhash40,
        files: copied.files,
        links: copied.links,
        skipped_links: copied.skipped_links,
        executables: copied.executables,
        frontmatter_problems: frontmatter_problems(&entries),
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use agentpack_harness::input::tree::TreeEntry;

    use super::copy::{emptied_issue, unfollowable_links};
    use super::*;
    use crate::extract::link_stays_inside;

    #[test]
    fn streaming_dirhash_matches_the_documented_one() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("a.txt"), b"one").unwrap();
        std::fs::write(dir.path().join("a/b"), vec![7u8; 200_000]).unwrap();
        let expected = agentpack_lockfile::keys::dirhash40_from_entries(vec![
            ("a.txt", b"one".to_vec()),
            ("a/b", vec![7u8; 200_000]),
        ]);
        assert_eq!(dirhash40("m", dir.path()).unwrap(), expected);
    }

    #[test]
    fn secret_looking_names() {
        let dir = tempfile::tempdir().unwrap();
        let pem = dir.path().join("k.pem");
        std::fs::write(&pem, "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n").unwrap();
        let cert = dir.path().join("c.pem");
        std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nx\n").unwrap();
        let none = Path::new("/nonexistent");
        assert!(looks_like_secret(".ssh/id_ed25519", none));
        assert!(looks_like_secret("id_rsa", none));
        assert!(!looks_like_secret("id_rsa.pub", none));
        assert!(looks_like_secret("app/.env", none));
        assert!(looks_like_secret(".env.local", none));
        assert!(!looks_like_secret(".env.example", none));
        assert!(looks_like_secret("k.pem", &pem));
        assert!(!looks_like_secret("c.pem", &cert));
    }

    #[test]
    fn broken_front_matter_is_named() {
        let ok = b"---\nname: my-skill\ndescription: x\n---\nbody\n";
        assert_eq!(frontmatter_problem(ok, true), None);
        assert_eq!(frontmatter_problem(b"no front matter", true), None);
        let unclosed = frontmatter_problem(b"---\nname: x\n", true).unwrap();
        assert!(unclosed.contains("not closed"), "{unclosed}");
        let bomb = b"---\nname: x\na: &a [\"lol\",\"lol\"]\nb: &b [*a,*a]\n---\n";
        assert!(frontmatter_problem(bomb, true).unwrap().contains("aliases"));
        let escape = frontmatter_problem(b"---\nname: ../../etc\n---\n", true).unwrap();
        assert!(escape.contains("is a path"), "{escape}");
        let long = format!("---\nname: {}\n---\n", "a".repeat(1 << 20));
        assert!(frontmatter_problem(long.as_bytes(), true)
            .unwrap()
            .contains("bytes long"));
        assert!(frontmatter_problem(b"---\nname: a\0b\n---\n", true)
            .unwrap()
            .contains("NUL"));
        assert_eq!(
            frontmatter_problem(b"---\nname: \"a & b\"\ndescription: x * y\n---\n", true),
            None
        );
    }

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
