//! Discovery of commands, agents, skills and rules in one input tree.
//!
//! Reads every default location of every plugin format (`skills/<name>/SKILL.md`, `commands/`,
//! `agents/`, `rules/`, also under `.claude/`, `.cursor/`, `.opencode/`, `.agents/`, `.grok/`) and the
//! component paths declared in `.claude-plugin/`, `.cursor-plugin/` and `.codex-plugin/plugin.json`.
//! Links are followed only inside the tree; capitalised documentation files (README.md...) are not
//! artifacts; components written inline in a manifest are not staged. Problems become warnings, never
//! errors: the rest of the package is still staged. Reading file contents is the only I/O.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::input::tree::{join, Node, PackageTree};
use crate::render::frontmatter::{self, Document};
use crate::HarnessError;

/// The four artifact types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ArtifactKind {
    Command,
    Agent,
    Skill,
    Rule,
}

impl ArtifactKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactKind::Command => "command",
            ArtifactKind::Agent => "agent",
            ArtifactKind::Skill => "skill",
            ArtifactKind::Rule => "rule",
        }
    }
}

/// A file that belongs to a skill directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFile {
    /// Path inside the skill directory (`SKILL.md`, `scripts/run.sh`).
    pub relative: String,
    pub source: PathBuf,
    pub executable: bool,
}

/// One discovered artifact.
#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub kind: ArtifactKind,
    /// Commands/agents/rules: the path below their directory without extension (`git/commit`);
    /// skills: the directory name.
    pub name: String,
    /// The markdown file, relative to the tree root, as found (before links).
    pub source_relative: String,
    /// The markdown file on disk (links resolved inside the tree).
    pub source: PathBuf,
    pub executable: bool,
    /// `md` or `mdc`.
    pub extension: String,
    pub text: String,
    pub document: Document,
    /// For skills: every file of the directory, `SKILL.md` included.
    pub skill_files: Vec<SkillFile>,
}

/// Artifacts of one tree plus what could not be read.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    pub artifacts: Vec<Artifact>,
    pub warnings: Vec<String>,
}

const LOCATION_PREFIXES: [&str; 6] = [
    "",
    ".claude/",
    ".cursor/",
    ".opencode/",
    ".agents/",
    ".grok/",
];
const MANIFESTS: [&str; 3] = [
    ".claude-plugin/plugin.json",
    ".cursor-plugin/plugin.json",
    ".codex-plugin/plugin.json",
];

/// Whether a file name is a capitalised documentation file (README.md, CHANGELOG.md...).
pub fn is_capitalised_doc(file_name: &str) -> bool {
    let stem = file_name
        .rsplit_once('.')
        .map_or(file_name, |(stem, _)| stem);
    stem.chars().any(|c| c.is_ascii_uppercase()) && !stem.chars().any(|c| c.is_lowercase())
}

struct Finder<'a> {
    tree: &'a PackageTree,
    label: &'a str,
    seen_sources: BTreeSet<(ArtifactKind, String)>,
    seen_names: BTreeSet<(ArtifactKind, String)>,
    out: Discovery,
}

/// Finds every artifact of a tree. `label` names the tree in warnings (the module, or `.agents`);
/// `root_skill_name` names a skill whose `SKILL.md` sits at the tree root.
pub fn discover(
    tree: &PackageTree,
    label: &str,
    root_skill_name: &str,
) -> Result<Discovery, HarnessError> {
    let mut finder = Finder {
        tree,
        label,
        seen_sources: BTreeSet::new(),
        seen_names: BTreeSet::new(),
        out: Discovery::default(),
    };
    // A directory with a root `SKILL.md` (and no plugin manifest: a skill, not a plugin) is one
    // skill: everything below it (`agents/*.md`, `commands/`, `scripts/`) is the skill's files,
    // never artifacts of their own.
    if let Ok(Node::File(_)) = tree.resolve("SKILL.md") {
        finder.skill_dir("", root_skill_name, "SKILL.md")?;
        let is_plugin = MANIFESTS
            .iter()
            .any(|manifest| matches!(tree.resolve(manifest), Ok(Node::File(_))));
        if !is_plugin {
            return Ok(finder.out);
        }
    }
    for prefix in LOCATION_PREFIXES {
        finder.skills_dir(&format!("{prefix}skills"), false)?;
        finder.files_dir(&format!("{prefix}commands"), ArtifactKind::Command, false)?;
        finder.files_dir(&format!("{prefix}agents"), ArtifactKind::Agent, false)?;
        finder.files_dir(&format!("{prefix}rules"), ArtifactKind::Rule, false)?;
    }
    finder.files_dir(".opencode/command", ArtifactKind::Command, false)?;
    finder.files_dir(".opencode/agent", ArtifactKind::Agent, false)?;
    for manifest in MANIFESTS {
        finder.declared(manifest)?;
    }
    Ok(finder.out)
}

impl Finder<'_> {
    fn warn(&mut self, message: String) {
        self.out.warnings.push(format!("{}: {message}", self.label));
    }

    fn skills_dir(&mut self, dir: &str, declared: bool) -> Result<(), HarnessError> {
        let resolved = match self.tree.resolve(dir) {
            Ok(Node::Dir(resolved)) => resolved,
            Ok(Node::File(_)) => return Ok(()),
            Err(problem) => {
                if declared || !matches!(problem, crate::input::tree::LinkProblem::Missing) {
                    self.warn(format!("skipped skills path: {}", problem.describe(dir)));
                }
                return Ok(());
            }
        };
        if let Ok(Node::File(_)) = self.tree.resolve(&join(&resolved, "SKILL.md")) {
            let name = resolved.rsplit('/').next().unwrap_or(&resolved).to_string();
            return self.skill_dir(dir, &name, &join(dir, "SKILL.md"));
        }
        for child in self.tree.children(&resolved) {
            let shown = join(dir, &child);
            match self.tree.resolve(&join(&resolved, &child)) {
                Ok(Node::Dir(skill)) => {
                    if let Ok(Node::File(_)) = self.tree.resolve(&join(&skill, "SKILL.md")) {
                        self.skill_dir(&shown, &child, &join(&shown, "SKILL.md"))?;
                    }
                }
                Ok(Node::File(_)) => {}
                Err(problem) => self.warn(format!("skipped skill: {}", problem.describe(&shown))),
            }
        }
        Ok(())
    }

    fn skill_dir(&mut self, dir: &str, name: &str, skill_md: &str) -> Result<(), HarnessError> {
        let Ok(Node::File(resolved_md)) = self.tree.resolve(skill_md) else {
            return Ok(());
        };
        if !self
            .seen_sources
            .insert((ArtifactKind::Skill, resolved_md.clone()))
        {
            return Ok(());
        }
        if !self
            .seen_names
            .insert((ArtifactKind::Skill, name.to_string()))
        {
            self.warn(format!(
                "skill `{name}` at `{dir}` has the name of a skill found earlier; the first one is staged"
            ));
            return Ok(());
        }
        let resolved_dir = match self.tree.resolve(dir) {
            Ok(Node::Dir(resolved)) => resolved,
            _ => String::new(),
        };
        let (files, problems) = self.tree.files_under(&resolved_dir);
        for (path, problem) in problems {
            self.warn(format!(
                "skipped file in skill `{name}`: {}",
                problem.describe(&path)
            ));
        }
        let skill_files = files
            .into_iter()
            .map(|(relative, resolved)| SkillFile {
                source: self.tree.absolute(&resolved),
                executable: self.tree.executable(&resolved),
                relative,
            })
            .collect();
        let text = self.tree.read_text(&resolved_md)?;
        self.out.artifacts.push(Artifact {
            kind: ArtifactKind::Skill,
            name: name.to_string(),
            source_relative: skill_md.to_string(),
            source: self.tree.absolute(&resolved_md),
            executable: self.tree.executable(&resolved_md),
            extension: "md".into(),
            document: frontmatter::parse(&text),
            text,
            skill_files,
        });
        Ok(())
    }

    fn files_dir(
        &mut self,
        dir: &str,
        kind: ArtifactKind,
        declared: bool,
    ) -> Result<(), HarnessError> {
        let resolved = match self.tree.resolve(dir) {
            Ok(Node::Dir(resolved)) => resolved,
            Ok(Node::File(_)) => return self.file(dir, dir, kind, declared),
            Err(problem) => {
                if declared || !matches!(problem, crate::input::tree::LinkProblem::Missing) {
                    self.warn(format!(
                        "skipped {} path: {}",
                        kind.as_str(),
                        problem.describe(dir)
                    ));
                }
                return Ok(());
            }
        };
        let (files, problems) = self.tree.files_under(&resolved);
        for (path, problem) in problems {
            self.warn(format!(
                "skipped {}: {}",
                kind.as_str(),
                problem.describe(&path)
            ));
        }
        for (relative, _) in files {
            self.file(&join(dir, &relative), &relative, kind, false)?;
        }
        Ok(())
    }

    fn file(
        &mut self,
        path: &str,
        name_path: &str,
        kind: ArtifactKind,
        declared: bool,
    ) -> Result<(), HarnessError> {
        let file_name = path.rsplit('/').next().unwrap_or(path);
        let Some((stem_path, extension)) = name_path.rsplit_once('.') else {
            return Ok(());
        };
        let extension = extension.to_ascii_lowercase();
        let accepted = extension == "md" || (kind == ArtifactKind::Rule && extension == "mdc");
        if !accepted || is_capitalised_doc(file_name) {
            if declared && !accepted {
                self.warn(format!(
                    "declared {} `{path}` is not a markdown file; skipped",
                    kind.as_str()
                ));
            }
            return Ok(());
        }
        let Ok(Node::File(resolved)) = self.tree.resolve(path) else {
            return Ok(());
        };
        if !self.seen_sources.insert((kind, resolved.clone())) {
            return Ok(());
        }
        let name = if declared {
            stem_path
                .rsplit('/')
                .next()
                .unwrap_or(stem_path)
                .to_string()
        } else {
            stem_path.to_string()
        };
        if !self.seen_names.insert((kind, name.clone())) {
            self.warn(format!(
                "{} `{name}` at `{path}` has the name of one found earlier; the first one is staged",
                kind.as_str()
            ));
            return Ok(());
        }
        let text = self.tree.read_text(&resolved)?;
        self.out.artifacts.push(Artifact {
            kind,
            name,
            source_relative: path.to_string(),
            source: self.tree.absolute(&resolved),
            executable: self.tree.executable(&resolved),
            extension,
            document: frontmatter::parse(&text),
            text,
            skill_files: Vec::new(),
        });
        Ok(())
    }

    fn declared(&mut self, manifest: &str) -> Result<(), HarnessError> {
        let Ok(Node::File(resolved)) = self.tree.resolve(manifest) else {
            return Ok(());
        };
        let text = self.tree.read_text(&resolved)?;
        let value: serde_json::Value = match serde_json::from_str(&text) {
            Ok(value) => value,
            Err(error) => {
                self.warn(format!(
                    "cannot read `{manifest}` ({error}); its declared components are skipped"
                ));
                return Ok(());
            }
        };
        for (key, kind) in [
            ("skills", ArtifactKind::Skill),
            ("commands", ArtifactKind::Command),
            ("agents", ArtifactKind::Agent),
            ("rules", ArtifactKind::Rule),
        ] {
            let Some(field) = value.get(key) else {
                continue;
            };
            let paths: Vec<&str> = match field {
                serde_json::Value::String(path) => vec![path.as_str()],
                serde_json::Value::Array(items) => {
                    let mut paths = Vec::new();
                    for item in items {
                        match item.as_str() {
                            Some(path) => paths.push(path),
                            None => self.warn(format!(
                                "`{key}` in `{manifest}` holds an inline component; inline components are not staged"
                            )),
                        }
                    }
                    paths
                }
                _ => {
                    self.warn(format!(
                        "`{key}` in `{manifest}` is written inline; inline components are not staged"
                    ));
                    continue;
                }
            };
            for path in paths {
                let clean = clean_declared(path);
                if path.starts_with('/') || clean.starts_with("..") {
                    self.warn(format!("skipped {key} path `{path}` declared in `{manifest}`: it leaves the package"));
                    continue;
                }
                // A manifest naming a kind's conventional directory (`"skills": "./skills/"`)
                // declares nothing new: when it is missing, it is as quiet as the default.
                let declared = clean != key;
                if kind == ArtifactKind::Skill {
                    if clean.ends_with("SKILL.md") {
                        let dir = clean
                            .trim_end_matches("SKILL.md")
                            .trim_end_matches('/')
                            .to_string();
                        self.skills_dir(&dir, true)?;
                    } else {
                        self.skills_dir(&clean, declared)?;
                    }
                } else {
                    self.files_dir(&clean, kind, declared)?;
                }
            }
        }
        Ok(())
    }
}

fn clean_declared(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_none_or(|last| *last == "..") {
                    parts.push("..");
                } else {
                    parts.pop();
                }
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// A markdown artifact of `kind` named `name` with `text`, as discovery would make it from
/// `/pkg/<name>.md` (for unit tests of the modules that convert and rename artifacts).
#[cfg(test)]
pub(crate) fn test_artifact(kind: ArtifactKind, name: &str, text: &str) -> Artifact {
    Artifact {
        kind,
        name: name.into(),
        source_relative: format!("{}s/{name}.md", kind.as_str()),
        source: PathBuf::from(format!("/pkg/{name}.md")),
        executable: false,
        extension: "md".into(),
        text: text.into(),
        document: crate::render::frontmatter::parse(text),
        skill_files: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capitalised_docs_are_recognised() {
        for name in [
            "README.md",
            "CHANGELOG.md",
            "LICENSE.md",
            "CONTRIBUTING.md",
            "CODE_OF_CONDUCT.md",
        ] {
            assert!(is_capitalised_doc(name), "{name}");
        }
        for name in ["review.md", "Review.md", "git-commit.md", "v2.md"] {
            assert!(!is_capitalised_doc(name), "{name}");
        }
    }

    #[test]
    fn declared_paths_are_cleaned() {
        assert_eq!(clean_declared("./.codex/skills/"), ".codex/skills");
        assert_eq!(clean_declared("../outside"), "../outside");
        assert_eq!(clean_declared("../../escape"), "../../escape");
        assert_eq!(clean_declared("a/../b"), "b");
    }
}
