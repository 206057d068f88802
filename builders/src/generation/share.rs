//! Sharing unconverted skill directories: a staged skill directory whose every file is an
//! unchanged file of one package directory (linked from it, or rendered to the same bytes), and
//! which holds exactly that directory's files, is
//! published as one directory symlink into the package's store path instead of a directory of
//! hard links. A generation's inode count then follows what it converts, not what it contains.
//!
//! Only where the agent reads through such a link the way it reads a real directory (observed with
//! the pinned clients, see docs/src/staging.md):
//! - OpenCode (`opencode/skills/<name>`) lists a symlinked skill directory under its staged name;
//! - Codex (`codex-home/skills/<name>`) follows one, but names the skill after the plugin manifest
//!   (`.codex-plugin/` or `.claude-plugin/`) of a directory the link resolves into: only a skill
//!   directory with no such manifest on its way from the package root is linked;
//! - Claude Code (`plugins/agentpack-bundle/skills/<name>`) loads a symlinked skill directory as
//!   `agentpack-bundle:<name>` whatever lies above its target (its session `init` event lists it);
//!   `claude plugin validate` passes the bundle without reading the linked skill, whose files are
//!   the package's own. Claude does not load a symlinked command or agent file, so only skill
//!   directories are ever links;
//! - Cursor, Grok and Antigravity have no client here to check: their trees keep real directories.
//!
//! The targets are absolute (a home layer that re-creates the links elsewhere keeps them working),
//! and only into store paths the generation references, so GC keeps every target while the
//! generation lives. Pure planning over the file map: it writes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use agentpack_store::{BlobId, Entry, PlannedFile, Source, Store, StorePathName};

/// A staged directory whose skill directories may be links.
struct SharedSkillRoot {
    /// The directory in the generation, with a trailing `/`.
    root: &'static str,
    /// Whether the agent names a skill after a plugin manifest above the link's target, which
    /// rules such targets out.
    renamed_below_a_plugin: bool,
}

/// One row per agent tree that reads skill directories through links.
const SHARED_SKILL_ROOTS: [SharedSkillRoot; 3] = [
    SharedSkillRoot {
        root: "plugins/agentpack-bundle/skills/",
        renamed_below_a_plugin: false,
    },
    SharedSkillRoot {
        root: "opencode/skills/",
        renamed_below_a_plugin: false,
    },
    SharedSkillRoot {
        root: "codex-home/skills/",
        renamed_below_a_plugin: true,
    },
];

/// Plugin manifests Codex names a skill after when its resolved path lies below one.
const CODEX_PLUGIN_MARKERS: [&str; 2] = [".codex-plugin", ".claude-plugin"];

/// Replaces, in `files`, each shareable skill directory by a symlink into the store path holding
/// it (one of `references`). Returns how many directories became links.
pub(super) fn share_unconverted_dirs(
    store: &Store,
    references: &BTreeSet<StorePathName>,
    files: &mut BTreeMap<String, PlannedFile>,
) -> usize {
    let mut candidates: BTreeMap<String, bool> = BTreeMap::new();
    for path in files.keys() {
        for shared in &SHARED_SKILL_ROOTS {
            let Some(rest) = path.strip_prefix(shared.root) else {
                continue;
            };
            if let Some((name, _)) = rest.split_once('/') {
                candidates.insert(
                    format!("{}{name}", shared.root),
                    shared.renamed_below_a_plugin,
                );
            }
        }
    }
    let mut shared = 0;
    for (dir, renamed_below_a_plugin) in candidates {
        let Some(target) = link_target(store, references, files, &dir, renamed_below_a_plugin)
        else {
            continue;
        };
        let prefix = format!("{dir}/");
        let inside: Vec<String> = files
            .range(prefix.clone()..)
            .map(|(path, _)| path)
            .take_while(|path| path.starts_with(&prefix))
            .cloned()
            .collect();
        for path in inside {
            files.remove(&path);
        }
        files.insert(
            dir.clone(),
            PlannedFile::new(
                dir,
                Source::Symlink(target.to_string_lossy().into_owned()),
                false,
            ),
        );
        shared += 1;
    }
    shared
}

/// The package directory the staged directory `dir` can be a link to, if any.
fn link_target(
    store: &Store,
    references: &BTreeSet<StorePathName>,
    files: &BTreeMap<String, PlannedFile>,
    dir: &str,
    renamed_below_a_plugin: bool,
) -> Option<PathBuf> {
    let prefix = format!("{dir}/");
    let mut source_dir: Option<PathBuf> = None;
    let mut planned: BTreeSet<&str> = BTreeSet::new();
    // Rendered bytes (a normalized `SKILL.md` that came out unchanged) must equal the package's
    // file of that path, blob for blob.
    let mut rendered: Vec<(&str, BlobId)> = Vec::new();
    for (path, file) in files.range(prefix.clone()..) {
        let Some(relative) = path.strip_prefix(&prefix) else {
            break;
        };
        // Package files are stored 0444: an executable staged copy needs its own inode.
        if file.executable {
            return None;
        }
        match &file.source {
            Source::ExistingFile(source) => {
                let base = strip_relative(source, relative)?;
                if source_dir.as_ref().is_some_and(|known| *known != base) {
                    return None;
                }
                source_dir = Some(base);
            }
            Source::Bytes(bytes) => rendered.push((relative, BlobId::of(bytes))),
            _ => return None,
        }
        planned.insert(relative);
    }
    let source_dir = source_dir?;
    let (store_path, inner, meta) = store.published_manifest_of(&source_dir)?;
    if !references.contains(store_path.name()) {
        return None;
    }
    let inner_prefix = if inner.is_empty() {
        String::new()
    } else {
        format!("{inner}/")
    };
    // The package directory must hold exactly the planned files: no other file, link or
    // directory a link would add.
    let mut stored_files = BTreeSet::new();
    let mut stored_dirs = BTreeSet::new();
    for entry in &meta.entries {
        let Some(relative) = entry.path().strip_prefix(&inner_prefix) else {
            continue;
        };
        match entry {
            Entry::File {
                exec: false, blob, ..
            } => {
                let same = rendered
                    .iter()
                    .find(|(path, _)| *path == relative)
                    .is_none_or(|(_, id)| {
                        blob.as_ref()
                            .map_or(*id == BlobId::of(b""), |blob| blob == id)
                    });
                if !same {
                    return None;
                }
                stored_files.insert(relative);
            }
            Entry::Dir { .. } => {
                stored_dirs.insert(relative);
            }
            _ => return None,
        }
    }
    if stored_files != planned {
        return None;
    }
    let implied_dirs: BTreeSet<&str> = planned
        .iter()
        .flat_map(|path| {
            path.match_indices('/')
                .map(move |(index, _)| &path[..index])
        })
        .collect();
    if stored_dirs != implied_dirs {
        return None;
    }
    if renamed_below_a_plugin && plugin_manifest_above(&meta.entries, &inner) {
        return None;
    }
    Some(store_path.path().join(&inner))
}

/// `source` without its trailing `relative` components: the directory the planned file's
/// relative path starts from.
fn strip_relative(source: &Path, relative: &str) -> Option<PathBuf> {
    let mut base = source;
    for component in relative.rsplit('/') {
        if base.file_name()?.to_str()? != component {
            return None;
        }
        base = base.parent()?;
    }
    Some(base.to_path_buf())
}

/// Whether the package directory `inner` or one of its ancestors in the package holds a plugin
/// manifest Codex would name the skill after.
fn plugin_manifest_above(entries: &[Entry], inner: &str) -> bool {
    let mut ancestors = vec![String::new()];
    let mut walked = String::new();
    for part in inner.split('/').filter(|part| !part.is_empty()) {
        if !walked.is_empty() {
            walked.push('/');
        }
        walked.push_str(part);
        ancestors.push(walked.clone());
    }
    ancestors.iter().any(|ancestor| {
        CODEX_PLUGIN_MARKERS.iter().any(|marker| {
            let path = if ancestor.is_empty() {
                (*marker).to_owned()
            } else {
                format!("{ancestor}/{marker}")
            };
            entries
                .binary_search_by(|entry| entry.path().cmp(path.as_str()))
                .is_ok()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_stripped_by_components() {
        assert_eq!(
            strip_relative(Path::new("/s/p/skills/a/refs/x.md"), "refs/x.md"),
            Some(PathBuf::from("/s/p/skills/a"))
        );
        assert_eq!(
            strip_relative(Path::new("/s/p/skills/a/SKILL.md"), "README.md"),
            None
        );
    }

    #[test]
    fn a_manifest_anywhere_above_the_directory_counts() {
        let entries = vec![
            Entry::Dir {
                path: ".claude-plugin".into(),
            },
            Entry::Dir {
                path: "skills".into(),
            },
        ];
        assert!(plugin_manifest_above(&entries, "skills/a"));
        assert!(!plugin_manifest_above(&entries[1..], "skills/a"));
    }
}
