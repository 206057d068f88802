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

use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use agentpack_harness::tree::{LinkProblem, Node, PackageTree, TreeEntry};
use agentpack_lockfile::keys::{local_cache_key, path_cache_key};
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

/// The key of a package's own `agentpack.toml` listing files that look like secrets but are meant
/// to be shipped (`allow-secret-files = [".env.example", "certs/test.pem"]`, package-relative).
pub const ALLOW_SECRET_FILES_KEY: &str = "allow-secret-files";

/// Is the file at `relative` (with `absolute` to peek into) one that looks like a private key or an
/// environment file? `id_rsa`, `id_dsa`, `id_ecdsa`, `id_ed25519` (and their `_sk` forms), `.env`,
/// `.env.*` (except the templates `.env.example`, `.env.sample`, `.env.template`, `.env.dist`), and
/// `*.pem` / `*.key` files with a `PRIVATE KEY` header.
pub fn looks_like_secret(relative: &str, absolute: &Path) -> bool {
    const KEYS: [&str; 6] = [
        "id_rsa",
        "id_dsa",
        "id_ecdsa",
        "id_ed25519",
        "id_ecdsa_sk",
        "id_ed25519_sk",
    ];
    let name = relative.rsplit('/').next().unwrap_or(relative);
    if KEYS.contains(&name) || name == ".env" {
        return true;
    }
    if let Some(suffix) = name.strip_prefix(".env.") {
        return !matches!(suffix, "example" | "sample" | "template" | "dist");
    }
    if name.ends_with(".pem") || name.ends_with(".key") {
        return has_private_key_header(absolute);
    }
    false
}

fn has_private_key_header(path: &Path) -> bool {
    use std::io::Read as _;
    let Ok(file) = open_regular(path) else {
        return false;
    };
    let mut head = Vec::new();
    if file.take(64 * 1024).read_to_end(&mut head).is_err() {
        return false;
    }
    let text = String::from_utf8_lossy(&head);
    text.contains("-----BEGIN") && text.contains("PRIVATE KEY-----")
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

/// The files of `source/agentpack.toml`'s `allow-secret-files` (package-relative, cleaned).
fn allowed_secret_files(source: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(source.join("agentpack.toml")) else {
        return Vec::new();
    };
    let Ok(table) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    table
        .get(ALLOW_SECRET_FILES_KEY)
        .and_then(toml::Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(toml::Value::as_str)
                .map(|item| {
                    item.trim_start_matches("./")
                        .trim_end_matches('/')
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Refuses secret-looking files of `entries` that the package's opt-in does not list.
fn refuse_secret_files(
    module: &str,
    source: &Path,
    entries: &[(String, LocalEntry)],
) -> Result<(), LocalPackageError> {
    let allowed = allowed_secret_files(source);
    let found: Vec<&str> = entries
        .iter()
        .filter_map(|(relative, entry)| match entry {
            LocalEntry::File(absolute) => Some((relative.as_str(), absolute)),
            LocalEntry::Link(_) => None,
        })
        .filter(|(relative, absolute)| looks_like_secret(relative, absolute))
        .filter(|(relative, _)| !allowed.iter().any(|a| a == relative))
        .map(|(relative, _)| relative)
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    Err(LocalPackageError::SecretFiles {
        module: module.to_owned(),
        source_dir: source.to_path_buf(),
        files: crate::limits::truncate_list(&found, crate::limits::LISTED_IN_MESSAGES),
        count: found.len(),
    })
}

/// The longest skill name accepted from front matter.
pub const MAX_SKILL_NAME: usize = 128;

/// Why a skill `name` from front matter cannot be used (it could name a path outside the
/// package, or is absurd), or `None` when it is fine.
pub fn skill_name_problem(name: &str) -> Option<String> {
    if name.len() > MAX_SKILL_NAME {
        return Some(format!(
            "its `name` is {} bytes long (at most {MAX_SKILL_NAME})",
            name.len()
        ));
    }
    if name.chars().any(char::is_control) {
        return Some("its `name` contains a control character (NUL, newline...)".to_owned());
    }
    if name.contains('/') || name.contains('\\') || name.starts_with('.') {
        return Some(format!(
            "its `name` {name:?} is a path (`/`, `\\`, or a leading `.`), not a name"
        ));
    }
    None
}

/// Checks the front matter of one `SKILL.md` (its first bytes; `complete` when that is the whole
/// file): `None` when it is fine or absent.
pub fn frontmatter_problem(text: &[u8], complete: bool) -> Option<String> {
    if text.contains(&0) {
        return Some("it contains a NUL byte".to_owned());
    }
    let text = String::from_utf8_lossy(text);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let after = text.strip_prefix("---")?;
    let mut lines = after.split_inclusive('\n');
    lines.next()?; // the rest of the opening line
    let mut block = String::new();
    let mut closed = false;
    for line in lines {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        block.push_str(line);
    }
    if !closed {
        return Some(if complete {
            "its front matter is not closed (no `---` line after the opening one)".to_owned()
        } else {
            "its front matter is not closed within the first 64 KiB".to_owned()
        });
    }
    if uses_yaml_aliases(&block) {
        return Some(
            "its front matter uses YAML anchors or aliases (`&x` / `*x`), which are not expanded"
                .to_owned(),
        );
    }
    for line in block.lines() {
        let Some(value) = line.strip_prefix("name:") else {
            continue;
        };
        let value = value.trim().trim_matches('"').trim_matches('\'');
        if let Some(problem) = skill_name_problem(value) {
            return Some(problem);
        }
    }
    None
}

/// Does a YAML block use an anchor or alias outside quotes (`key: &a [...]`, `- *a`)?
fn uses_yaml_aliases(block: &str) -> bool {
    block.lines().any(|line| {
        let mut quote = None;
        let mut previous = ' ';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            let starts_name = chars
                .peek()
                .is_some_and(|next| next.is_alphanumeric() || *next == '_');
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if c == '"' || c == '\'' => quote = Some(c),
                None if c == '#' && previous.is_whitespace() => break,
                None if (c == '&' || c == '*')
                    && starts_name
                    && (previous.is_whitespace() || matches!(previous, '[' | ',' | ':' | '-')) =>
                {
                    return true
                }
                None => {}
            }
            previous = c;
        }
        false
    })
}

/// The `SKILL.md` files of `entries` with a front-matter problem.
fn frontmatter_problems(entries: &[(String, LocalEntry)]) -> Vec<(String, String)> {
    use std::io::Read as _;
    const HEAD: usize = 64 * 1024;
    let mut problems = Vec::new();
    for (relative, entry) in entries {
        let LocalEntry::File(absolute) = entry else {
            continue;
        };
        if relative.rsplit('/').next() != Some("SKILL.md") {
            continue;
        }
        let Ok(file) = open_regular(absolute) else {
            continue;
        };
        let mut head = Vec::new();
        if file.take(HEAD as u64 + 1).read_to_end(&mut head).is_err() {
            continue;
        }
        let complete = head.len() <= HEAD;
        head.truncate(HEAD);
        if let Some(problem) = frontmatter_problem(&head, complete) {
            problems.push((relative.clone(), problem));
        }
    }
    problems
}

/// `dirhash40` computed while files stream through (the documented `dirhash40_from_entries`
/// without holding the bytes): files must be fed in bytewise path order.
#[derive(Default)]
struct DirHasher {
    hasher: sha2::Sha256,
    files: usize,
}

/// A file's bytes on their way to the copy, fed to the [`DirHasher`].
struct HashingReader<'h, R> {
    inner: R,
    hasher: &'h mut sha2::Sha256,
    /// A read of the source failed (as opposed to a write of the copy).
    failed: bool,
}

impl<R: std::io::Read> std::io::Read for HashingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use sha2::Digest as _;
        let n = self.inner.read(buf).inspect_err(|_| self.failed = true)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

impl DirHasher {
    fn file<R: std::io::Read>(&mut self, relative: &str, inner: R) -> HashingReader<'_, R> {
        use sha2::Digest as _;
        self.hasher.update(relative.as_bytes());
        self.hasher.update(b"\0");
        self.files += 1;
        HashingReader {
            inner,
            hasher: &mut self.hasher,
            failed: false,
        }
    }

    fn finish(self) -> String {
        use sha2::Digest as _;
        let digest: [u8; 32] = self.hasher.finalize().into();
        hex::encode(digest)[..40].to_owned()
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
        if file_type.is_dir() {
            continue;
        }
        if !file_type.is_file() && !file_type.is_symlink() {
            use std::os::unix::fs::FileTypeExt as _;
            let kind = if file_type.is_fifo() {
                "FIFO"
            } else if file_type.is_socket() {
                "socket"
            } else if file_type.is_char_device() {
                "character device"
            } else if file_type.is_block_device() {
                "block device"
            } else {
                "special file"
            };
            return Err(LocalPackageError::SpecialFile {
                module: module.to_owned(),
                path: entry.path().to_path_buf(),
                kind,
            });
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
    executables: std::collections::BTreeSet<String>,
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
    let mut dirhash = DirHasher::default();
    let mut listing = BTreeMap::new();
    let mut targets = BTreeMap::new();
    for (relative, entry) in entries {
        match entry {
            LocalEntry::File(absolute) => {
                // Streamed: hashed and copied in one pass, never read whole into memory; opened
                // without blocking, so a file swapped for a FIFO meanwhile is an error, not a hang.
                let file = open_regular(absolute).map_err(|e| io(absolute, e))?;
                let executable = file
                    .metadata()
                    .map_err(|e| io(absolute, e))?
                    .permissions()
                    .mode()
                    & 0o111
                    != 0;
                let mut reader = dirhash.file(relative, file);
                let written = writer.file_from_source(relative, &mut reader, executable);
                let source_failed = reader.failed;
                written.map_err(|error| match error {
                    ExtractError::Io { source, .. } if source_failed => io(absolute, source),
                    other => copy_error(other),
                })?;
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
        files: dirhash.files,
        links: report.links_kept,
        dirhash40: dirhash.finish(),
        skipped_links,
        executables: report.executables,
    })
}

/// `dirhash40` of a directory as it is now (without copying; files are streamed).
pub fn dirhash40(module: &str, source: &Path) -> Result<String, LocalPackageError> {
    let files = collect_files(module, source)?;
    let mut dirhash = DirHasher::default();
    for (relative, absolute) in &files {
        let io = |e| LocalPackageError::Io {
            module: module.to_owned(),
            path: absolute.clone(),
            source: e,
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
    let entries = collect_entries(module, &source)?;
    refuse_secret_files(module, &source, &entries)?;
    let copied = copy_entries(module, &source, &entries, destination)?;
    Ok(LocalCopy {
        cache_key: path_cache_key(&source, &copied.dirhash40),
        dirhash40: copied.dirhash40,
        files: copied.files,
        links: copied.links,
        skipped_links: copied.skipped_links,
        executables: copied.executables,
        frontmatter_problems: frontmatter_problems(&entries),
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
    refuse_secret_files(module, &source, &entries)?;
    let copied = copy_entries(module, &source, &entries, destination)?;
    Ok(LocalCopy {
        cache_key: local_cache_key(spec, &copied.dirhash40),
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
