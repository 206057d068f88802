//! A read-only view of one input tree (a verified package or `./.agents/`), filtered by the mode.
//!
//! [`PackageTree::read`] is the crate's only directory walk: it lists regular files and symbolic
//! links (never following a link) and drops paths the mode does not select. Everything after that is
//! pure: [`PackageTree::resolve`] follows links inside the listing only, so a link that leaves the
//! tree, names nothing or loops is reported as a [`LinkProblem`] and never read through.
//! [`PackageTree::read_text`] reads each file once per listing: a plugin manifest is asked for its
//! components, hooks, LSP and MCP servers by separate readers.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::mode::PathFilter;
use crate::HarnessError;

/// Files found below a directory: `(path relative to it, resolved path relative to the root)`.
pub type FoundFiles = Vec<(String, String)>;
/// Paths that could not be followed, with why.
pub type LinkProblems = Vec<(String, LinkProblem)>;

/// One listed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeEntry {
    File { executable: bool },
    Symlink { target: String },
}

/// What a path resolves to, by its link-free path relative to the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File(String),
    Dir(String),
}

/// Why a path could not be followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkProblem {
    /// A link on the way points outside the tree (absolute, or `..` past the root).
    Outside {
        link: String,
        target: String,
    },
    Missing,
    Loop {
        link: String,
    },
}

impl LinkProblem {
    /// Describes the problem for a warning about `path`.
    pub fn describe(&self, path: &str) -> String {
        match self {
            LinkProblem::Outside { link, target } => {
                format!("`{path}` leaves the package (link `{link}` -> `{target}`)")
            }
            LinkProblem::Missing => format!("`{path}` does not exist in the package"),
            LinkProblem::Loop { link } => format!("`{path}` loops (link `{link}`)"),
        }
    }
}

/// A listed tree: root directory plus every selected file and link below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageTree {
    root: PathBuf,
    entries: BTreeMap<String, TreeEntry>,
    dirs: BTreeSet<String>,
    texts: TextCache,
}

/// The texts read from one listing, by resolved path. Not part of what a tree is: two trees with
/// the same listing are equal whatever each has read. Clones of a tree share it (the files of one
/// root are read once however many views of it are made).
#[derive(Debug, Default, Clone)]
struct TextCache(Arc<Mutex<BTreeMap<String, String>>>);

impl PartialEq for TextCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for TextCache {}

/// The listings of the package trees of one set of inputs, shared by every load of them: a
/// package root is a store path, which never changes, so a process that reads its inputs several
/// times (MCP definitions, then rendering, then rendering again under the generation's final name)
/// walks each package once and reads each of its files once. Clones share the listings. Never
/// used for `./.agents/`, which may change. Not part of what the inputs are: always equal.
#[derive(Debug, Default, Clone)]
pub struct PackageListings(Arc<Mutex<ListingsByRoot>>);

type ListingsByRoot = HashMap<PathBuf, Vec<(PathFilter, PackageTree)>>;

impl PartialEq for PackageListings {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl PackageListings {
    /// [`PackageTree::read`] of the package at `root` through `filter`, listed once.
    pub fn read(&self, root: &Path, filter: &PathFilter) -> Result<PackageTree, HarnessError> {
        let listed = |listings: &ListingsByRoot| {
            listings
                .get(root)?
                .iter()
                .find(|(listed_filter, _)| listed_filter == filter)
                .map(|(_, tree)| tree.clone())
        };
        if let Some(tree) = listed(&self.lock()) {
            return Ok(tree);
        }
        let tree = PackageTree::read(root, filter)?;
        self.lock()
            .entry(root.to_path_buf())
            .or_default()
            .push((filter.clone(), tree.clone()));
        Ok(tree)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ListingsByRoot> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl PackageTree {
    /// Lists `root`, keeping the paths `filter` selects.
    pub fn read(root: &Path, filter: &PathFilter) -> Result<Self, HarnessError> {
        let mut entries = BTreeMap::new();
        if filter.includes_anything() {
            for item in walkdir::WalkDir::new(root)
                .follow_links(false)
                .sort_by_file_name()
            {
                let item = item.map_err(|error| HarnessError::Walk {
                    path: root.to_path_buf(),
                    message: error.to_string(),
                })?;
                let Ok(relative) = item.path().strip_prefix(root) else {
                    continue;
                };
                let relative = relative
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                if relative.is_empty() || relative == ".git" || relative.starts_with(".git/") {
                    continue;
                }
                let file_type = item.file_type();
                if file_type.is_dir() || !filter.includes(&relative) {
                    continue;
                }
                if file_type.is_symlink() {
                    let target = fs_err::read_link(item.path()).map_err(HarnessError::io)?;
                    entries.insert(
                        relative,
                        TreeEntry::Symlink {
                            target: target.to_string_lossy().into_owned(),
                        },
                    );
                } else if file_type.is_file() {
                    let metadata =
                        fs_err::symlink_metadata(item.path()).map_err(HarnessError::io)?;
                    entries.insert(
                        relative,
                        TreeEntry::File {
                            executable: is_executable(&metadata),
                        },
                    );
                }
            }
        }
        Ok(Self::from_entries(root.to_path_buf(), entries))
    }

    /// Builds a tree from a listing (tests, and trees already listed by the caller).
    pub fn from_entries(root: PathBuf, entries: BTreeMap<String, TreeEntry>) -> Self {
        let mut dirs = BTreeSet::new();
        dirs.insert(String::new());
        for path in entries.keys() {
            let mut parent = path.as_str();
            while let Some((head, _)) = parent.rsplit_once('/') {
                dirs.insert(head.to_string());
                parent = head;
            }
        }
        Self {
            root,
            entries,
            dirs,
            texts: TextCache::default(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Marks the listed regular files in `executables` as executable (a package's source modes,
    /// which the store keeps beside its read-only tree); other paths are ignored.
    pub fn with_executables(mut self, executables: &BTreeSet<String>) -> Self {
        for path in executables {
            if let Some(TreeEntry::File { executable }) = self.entries.get_mut(path) {
                *executable = true;
            }
        }
        self
    }

    /// Leaves out the entry at `relative` when it is a symbolic link (a link agentpack placed).
    pub(crate) fn without_link(mut self, relative: &str) -> Self {
        if matches!(self.entries.get(relative), Some(TreeEntry::Symlink { .. })) {
            self.entries.remove(relative);
            return Self::from_entries(self.root, self.entries);
        }
        self
    }

    /// Every listed path (files and links), sorted.
    pub fn entries(&self) -> &BTreeMap<String, TreeEntry> {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The absolute path of a listed relative path.
    pub fn absolute(&self, relative: &str) -> PathBuf {
        let mut path = self.root.clone();
        for part in relative.split('/').filter(|p| !p.is_empty()) {
            path.push(part);
        }
        path
    }

    /// Whether a resolved file is executable.
    pub fn executable(&self, resolved: &str) -> bool {
        matches!(
            self.entries.get(resolved),
            Some(TreeEntry::File { executable: true })
        )
    }

    /// Follows `relative` through links that stay inside the tree.
    pub fn resolve(&self, relative: &str) -> Result<Node, LinkProblem> {
        let mut remaining: Vec<String> = split(relative).into_iter().rev().collect();
        let mut current: Vec<String> = Vec::new();
        let mut hops = 0;
        while let Some(part) = remaining.pop() {
            match part.as_str() {
                "." => continue,
                ".." => {
                    if current.pop().is_none() {
                        return Err(LinkProblem::Outside {
                            link: relative.to_string(),
                            target: relative.to_string(),
                        });
                    }
                    continue;
                }
                _ => {}
            }
            current.push(part);
            let joined = current.join("/");
            if let Some(TreeEntry::Symlink { target }) = self.entries.get(&joined) {
                hops += 1;
                if hops > 40 {
                    return Err(LinkProblem::Loop { link: joined });
                }
                if target.starts_with('/') || Path::new(target).is_absolute() {
                    return Err(LinkProblem::Outside {
                        link: joined,
                        target: target.clone(),
                    });
                }
                current.pop();
                let mut base = current.clone();
                for piece in split(target) {
                    match piece.as_str() {
                        "." => {}
                        ".." => {
                            if base.pop().is_none() {
                                return Err(LinkProblem::Outside {
                                    link: joined,
                                    target: target.clone(),
                                });
                            }
                        }
                        _ => base.push(piece),
                    }
                }
                // Re-walk the target from the root so links inside it are followed too.
                for piece in base.into_iter().rev() {
                    remaining.push(piece);
                }
                current.clear();
            }
        }
        let joined = current.join("/");
        match self.entries.get(&joined) {
            Some(TreeEntry::File { .. }) => Ok(Node::File(joined)),
            Some(TreeEntry::Symlink { .. }) => Err(LinkProblem::Missing),
            None if self.dirs.contains(&joined) => Ok(Node::Dir(joined)),
            None => Err(LinkProblem::Missing),
        }
    }

    /// The names directly inside a resolved directory.
    pub fn children(&self, dir: &str) -> Vec<String> {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let mut names = BTreeSet::new();
        let under = self
            .entries
            .range(prefix.clone()..)
            .map(|(path, _)| path)
            .take_while(|path| path.starts_with(&prefix));
        for path in under {
            let rest = &path[prefix.len()..];
            let name = rest.split('/').next().unwrap_or(rest);
            names.insert(name.to_string());
        }
        names.into_iter().collect()
    }

    /// Every file below a resolved directory, following in-tree links: `(path relative to dir,
    /// resolved path)`. Problems are returned as `(path, problem)` for warnings.
    pub fn files_under(&self, dir: &str) -> (FoundFiles, LinkProblems) {
        let mut files = Vec::new();
        let mut problems = Vec::new();
        let mut visiting = vec![dir.to_string()];
        self.collect(dir, "", &mut files, &mut problems, &mut visiting);
        files.sort();
        (files, problems)
    }

    fn collect(
        &self,
        dir: &str,
        shown: &str,
        files: &mut FoundFiles,
        problems: &mut LinkProblems,
        visiting: &mut Vec<String>,
    ) {
        for name in self.children(dir) {
            let child = join(dir, &name);
            let shown_child = join(shown, &name);
            match self.resolve(&child) {
                Ok(Node::File(resolved)) => files.push((shown_child, resolved)),
                Ok(Node::Dir(resolved)) => {
                    if visiting.contains(&resolved) {
                        problems.push((child.clone(), LinkProblem::Loop { link: child }));
                        continue;
                    }
                    visiting.push(resolved.clone());
                    self.collect(&resolved, &shown_child, files, problems, visiting);
                    visiting.pop();
                }
                Err(problem) => problems.push((child, problem)),
            }
        }
    }

    /// Reads a resolved file as text (lossy UTF-8), from the disk the first time it is asked for.
    pub fn read_text(&self, resolved: &str) -> Result<String, HarnessError> {
        let mut texts = self
            .texts
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(text) = texts.get(resolved) {
            return Ok(text.clone());
        }
        let bytes = fs_err::read(self.absolute(resolved)).map_err(HarnessError::io)?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        texts.insert(resolved.to_string(), text.clone());
        Ok(text)
    }
}

pub(crate) fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

fn split(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(unix)]
fn is_executable(metadata: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    metadata.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_metadata: &std::fs::Metadata) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(entries: &[(&str, Option<&str>)]) -> PackageTree {
        PackageTree::from_entries(
            PathBuf::from("/pkg"),
            entries
                .iter()
                .map(|(path, link)| {
                    let entry = match link {
                        Some(target) => TreeEntry::Symlink {
                            target: target.to_string(),
                        },
                        None => TreeEntry::File { executable: false },
                    };
                    (path.to_string(), entry)
                })
                .collect(),
        )
    }

    #[test]
    fn follows_links_only_inside_the_tree() {
        let t = tree(&[
            ("engineering/skills/x/SKILL.md", None),
            (".codex/skills/x", Some("../../engineering/skills/x")),
            (".codex/skills/out", Some("../../../elsewhere")),
            (".codex/skills/abs", Some("/etc")),
            (".codex/skills/gone", Some("nothing")),
            ("loop/a", Some("b")),
            ("loop/b", Some("a")),
        ]);
        assert_eq!(
            t.resolve(".codex/skills/x/SKILL.md"),
            Ok(Node::File("engineering/skills/x/SKILL.md".into()))
        );
        assert_eq!(
            t.resolve(".codex/skills/x"),
            Ok(Node::Dir("engineering/skills/x".into()))
        );
        assert!(matches!(
            t.resolve(".codex/skills/out"),
            Err(LinkProblem::Outside { .. })
        ));
        assert!(matches!(
            t.resolve(".codex/skills/abs"),
            Err(LinkProblem::Outside { .. })
        ));
        assert_eq!(t.resolve(".codex/skills/gone"), Err(LinkProblem::Missing));
        assert!(matches!(t.resolve("loop/a"), Err(LinkProblem::Loop { .. })));
        let (files, problems) = t.files_under(".codex/skills");
        assert_eq!(
            files,
            vec![(
                "x/SKILL.md".to_string(),
                "engineering/skills/x/SKILL.md".to_string()
            )]
        );
        assert_eq!(problems.len(), 3);
    }

    #[test]
    fn directory_link_cycles_are_reported_not_followed() {
        let t = tree(&[("a/file.md", None), ("a/self", Some("."))]);
        let (files, problems) = t.files_under("a");
        assert_eq!(files.len(), 1);
        assert!(matches!(problems[0].1, LinkProblem::Loop { .. }));
    }

    #[test]
    fn listings_walk_a_package_once_per_filter_and_share_what_was_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("pkg");
        std::fs::create_dir_all(root.join("skills/a")).unwrap();
        std::fs::write(root.join("skills/a/SKILL.md"), "one").unwrap();
        let listings = PackageListings::default();
        let first = listings.read(&root, &PathFilter::all()).unwrap();
        assert_eq!(first.read_text("skills/a/SKILL.md").unwrap(), "one");

        // A store path never changes; these edits only show whether the disk is read again.
        std::fs::write(root.join("skills/a/SKILL.md"), "two").unwrap();
        std::fs::write(root.join("README.md"), "new").unwrap();
        let again = listings.clone().read(&root, &PathFilter::all()).unwrap();
        assert_eq!(again, first, "listed once: the new file is not seen");
        assert_eq!(
            again.read_text("skills/a/SKILL.md").unwrap(),
            "one",
            "a view of the same listing shares its texts"
        );
        let other_filter = listings.read(&root, &PathFilter::none()).unwrap();
        assert!(
            other_filter.entries().is_empty(),
            "another filter is its own listing"
        );
        assert!(PackageTree::read(&root, &PathFilter::all())
            .unwrap()
            .entries()
            .contains_key("README.md"));
    }
}
