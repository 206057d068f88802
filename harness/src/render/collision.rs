//! Two packages' artifacts under one name in one agent's tree: nothing is lost.
//!
//! Packages are layered in order (plugins by cache_key, then bare skills, then `./.agents/`). When a
//! later package stages a unit (a skill directory, or one converted file) where an earlier package
//! already staged one:
//! - identical bytes: one copy, no warning;
//! - different bytes: the later package keeps the name, the earlier one's artifact is staged again
//!   under a name prefixed with its package's name (file or directory name and frontmatter `name`),
//!   with one warning naming both and a [`Collision`] in the plan;
//! - from `./.agents/`: the overlay replaces the package's file, an intended override (warned as before).
//!
//! A skill, command and agent of two packages under one invocation name (`/configure` as a skill of one
//! package and a command of another) clash the same way and are resolved the same way. Pure: it only
//! rearranges plan entries (comparing the bytes of unchanged package files through the caller's
//! [`ReadSource`]).

use std::collections::BTreeMap;

use crate::input::artifact::{Artifact, ArtifactKind};
use crate::plan::{Collision, PlanEntry, RenderPlan};
use crate::render::convert;
use crate::render::frontmatter::{self, text_field};
use crate::render::layout::{units_of, ArtifactLayout, Source, Unit};
use crate::render::ReadSource;

/// The label of the `./.agents/` overlay.
pub(crate) const OVERLAY: &str = ".agents";

/// A unit staged so far, with what is needed to stage it again under another name.
struct Staged {
    label: String,
    package_name: String,
    artifact: Artifact,
    /// Which of the artifact's units this is.
    index: usize,
    plugin_root: Option<(String, String)>,
    entries: Vec<(String, PlanEntry)>,
}

/// The units of one agent's tree, keyed by their path below the tree.
pub(crate) struct Staging<'l> {
    layout: &'l ArtifactLayout,
    read: ReadSource<'l>,
    units: BTreeMap<String, Staged>,
    /// Invocation name -> the key of the unit that has it.
    invocations: BTreeMap<String, String>,
}

/// The name a skill, command or agent is invoked by, from its unit key (`skills/x`,
/// `commands/x.md`, `agents/x.md`); `None` for other units (rules, Codex agent files).
fn invocation_name(key: &str) -> Option<String> {
    if let Some(name) = key.strip_prefix("skills/") {
        return (!name.contains('/')).then(|| name.to_string());
    }
    for dir in ["commands/", "agents/"] {
        if let Some(name) = key.strip_prefix(dir).and_then(|n| n.strip_suffix(".md")) {
            return Some(name.to_string());
        }
    }
    None
}

fn entry_bytes(entry: &PlanEntry, read: ReadSource<'_>) -> Option<Vec<u8>> {
    match entry {
        PlanEntry::Bytes(bytes) => Some(bytes.clone()),
        PlanEntry::FromFile { source, .. } => read(source),
        PlanEntry::Symlink(target) => Some(target.to_string_lossy().as_bytes().to_vec()),
    }
}

/// Whether two units stage the same paths with the same bytes.
fn same_content(
    a: &[(String, PlanEntry)],
    b: &[(String, PlanEntry)],
    read: ReadSource<'_>,
) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((path_a, entry_a), (path_b, entry_b))| {
                path_a == path_b
                    && match (entry_bytes(entry_a, read), entry_bytes(entry_b, read)) {
                        (Some(x), Some(y)) => x == y,
                        _ => false,
                    }
            })
}

/// Whether two artifacts are the same file: same kind, same text and, for skills, the same files.
/// (What is staged for them can still differ by the package it names, as in a converted skill's note.)
fn same_source(a: &Artifact, b: &Artifact, read: ReadSource<'_>) -> bool {
    let files = |artifact: &Artifact| -> Option<Vec<(String, Vec<u8>)>> {
        artifact
            .skill_files
            .iter()
            .map(|file| Some((file.relative.clone(), read(&file.source)?)))
            .collect()
    };
    a.kind == b.kind
        && a.text == b.text
        && a.skill_files.len() == b.skill_files.len()
        && (a.skill_files.is_empty()
            || matches!((files(a), files(b)), (Some(x), Some(y)) if x == y))
}

/// `artifact` named `<prefix>-<name>`: its name, and its frontmatter `name` when it has one (always
/// for agents and skills, whose frontmatter name is what the agents show).
fn renamed_artifact(artifact: &Artifact, prefix: &str) -> Artifact {
    let mut renamed = artifact.clone();
    let leaf = convert::leaf_name(&artifact.name);
    let new_leaf = if artifact.kind == ArtifactKind::Skill {
        convert::skill_name(&format!("{prefix}-{leaf}"))
    } else {
        format!("{prefix}-{leaf}")
    };
    renamed.name = match artifact.name.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{new_leaf}"),
        None => new_leaf.clone(),
    };
    let written = artifact.document.text("name");
    let frontmatter_name = match (artifact.kind, &written) {
        (ArtifactKind::Skill, _) => Some(new_leaf),
        (_, Some(written)) => Some(format!("{prefix}-{written}")),
        (ArtifactKind::Agent, None) => Some(new_leaf),
        _ => None,
    };
    if let Some(name) = frontmatter_name {
        let fields = &mut renamed.document.fields;
        if fields.contains_key("name") {
            fields.insert("name".into(), text_field(name));
        } else {
            fields.shift_insert(0, "name".into(), text_field(name));
        }
        renamed.text = frontmatter::render(&renamed.document.fields, &renamed.document.body);
        renamed.document = frontmatter::parse(&renamed.text);
    }
    renamed
}

impl<'l> Staging<'l> {
    pub(crate) fn new(layout: &'l ArtifactLayout, read: ReadSource<'l>) -> Self {
        Self {
            layout,
            read,
            units: BTreeMap::new(),
            invocations: BTreeMap::new(),
        }
    }

    /// Stages `unit` (the `index`-th unit of `artifact` from `source`), keeping both sides of any
    /// collision with what is staged already.
    pub(crate) fn add(
        &mut self,
        plan: &mut RenderPlan,
        source: &Source<'_>,
        artifact: &Artifact,
        index: usize,
        unit: Unit,
    ) {
        let key = unit.key.clone();
        let invocation = invocation_name(&key);
        if let Some(existing) = self.units.get(&key) {
            if existing.label != source.label {
                if source.label == OVERLAY {
                    plan.warnings.push(format!(
                        "{}: `{key}` from {OVERLAY} replaces the one from {}",
                        plan.agent, existing.label
                    ));
                } else if same_content(&existing.entries, &unit.entries, self.read)
                    || same_source(&existing.artifact, artifact, self.read)
                {
                    return;
                } else {
                    self.rename_earlier(plan, &key, "path", source.label, artifact);
                }
            }
        } else if let Some(name) = &invocation {
            let clashing = self.invocations.get(name).cloned().filter(|other| {
                source.label != OVERLAY
                    && self
                        .units
                        .get(other)
                        .is_some_and(|staged| staged.label != source.label)
            });
            if let Some(other) = clashing {
                self.rename_earlier(plan, &other, "invocation", source.label, artifact);
            }
        }
        if let Some(name) = invocation {
            self.invocations.insert(name, key.clone());
        }
        self.units.insert(
            key,
            Staged {
                label: source.label.to_string(),
                package_name: source.name.to_string(),
                artifact: artifact.clone(),
                index,
                plugin_root: source
                    .plugin_root
                    .map(|(root, data)| (root.to_string(), data.to_string())),
                entries: unit.entries,
            },
        );
    }

    /// Stages the unit at `key` again under its package's prefix; `later` (whose `artifact` takes
    /// the name) is named in the warning.
    fn rename_earlier(
        &mut self,
        plan: &mut RenderPlan,
        key: &str,
        clash: &str,
        later: &str,
        later_artifact: &Artifact,
    ) {
        let Some(earlier) = self.units.remove(key) else {
            return;
        };
        if let Some(name) = invocation_name(key) {
            if self.invocations.get(&name).map(String::as_str) == Some(key) {
                self.invocations.remove(&name);
            }
        }
        let plugin_root = earlier
            .plugin_root
            .as_ref()
            .map(|(root, data)| (root.as_str(), data.as_str()));
        let mut attempt = 1;
        let (renamed, unit) = loop {
            let prefix = if attempt == 1 {
                earlier.package_name.clone()
            } else {
                format!("{}-{attempt}", earlier.package_name)
            };
            let renamed = renamed_artifact(&earlier.artifact, &prefix);
            let unit = units_of(self.layout, &renamed, &earlier.label, plugin_root)
                .into_iter()
                .nth(earlier.index);
            match unit {
                Some(unit) if !self.units.contains_key(&unit.key) => break (renamed, unit),
                Some(_) if attempt < 100 => attempt += 1,
                // Nothing to rename to: keep the later one only, as layering says.
                _ => {
                    plan.warnings.push(format!(
                        "{}: `{key}` from {later} replaces the one from {}",
                        plan.agent, earlier.label
                    ));
                    return;
                }
            }
        };
        let mut entries = unit.entries;
        for (_, entry) in &mut entries {
            if matches!(entry, PlanEntry::FromFile { source, .. } if *source == renamed.source) {
                *entry = PlanEntry::Bytes(renamed.text.clone().into_bytes());
            }
        }
        let earlier_name = convert::leaf_name(&earlier.artifact.name);
        let new_name = convert::leaf_name(&renamed.name);
        let earlier_kind = earlier.artifact.kind.as_str();
        let message = if earlier.artifact.kind == later_artifact.kind {
            format!(
                "{earlier_kind} `{earlier_name}` of {} differs from the one of {later}: {later} keeps the name, the one of {} is staged as `{new_name}`",
                earlier.label, earlier.label
            )
        } else {
            format!(
                "{earlier_kind} `{earlier_name}` of {} and {} `{}` of {later} share an invocation name: {later} keeps it, the {earlier_kind} of {} is staged as `{new_name}`",
                earlier.label,
                later_artifact.kind.as_str(),
                convert::leaf_name(&later_artifact.name),
                earlier.label
            )
        };
        if !plan.warnings.contains(&message) {
            plan.warnings.push(message);
        }
        plan.collisions.push(Collision {
            agent: plan.agent.as_str().to_string(),
            clash: clash.to_string(),
            path: key.to_string(),
            kept_by: later.to_string(),
            renamed_from: earlier.label.clone(),
            renamed_to: unit.key.clone(),
        });
        if let Some(name) = invocation_name(&unit.key) {
            self.invocations.insert(name, unit.key.clone());
        }
        self.units.insert(
            unit.key,
            Staged {
                artifact: renamed,
                entries,
                ..earlier
            },
        );
    }

    /// Every staged entry, by path below the agent's tree.
    pub(crate) fn into_entries(self) -> Vec<(String, PlanEntry)> {
        self.units
            .into_values()
            .flat_map(|staged| staged.entries)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::artifact::test_artifact as artifact;

    #[test]
    fn a_renamed_artifact_carries_the_prefix_in_its_name_and_frontmatter() {
        let agent = renamed_artifact(
            &artifact(
                ArtifactKind::Agent,
                "reviewer",
                "---\ndescription: R\n---\nBody\n",
            ),
            "first",
        );
        assert_eq!(agent.name, "first-reviewer");
        assert_eq!(
            agent.document.text("name").as_deref(),
            Some("first-reviewer")
        );
        assert!(
            agent.text.starts_with("---\nname: first-reviewer\n"),
            "{}",
            agent.text
        );
        assert!(agent.text.ends_with("Body\n"));
        // A command keeps its directory, and gets a frontmatter name only if it had one.
        let command = renamed_artifact(
            &artifact(ArtifactKind::Command, "git/commit", "Commit.\n"),
            "tools",
        );
        assert_eq!(command.name, "git/tools-commit");
        assert_eq!(command.text, "Commit.\n");
        let skill = renamed_artifact(
            &artifact(
                ArtifactKind::Skill,
                "configure",
                "---\nname: configure\ndescription: C\n---\nDo.\n",
            ),
            "My_Pkg",
        );
        assert_eq!(skill.name, "my-pkg-configure");
        assert_eq!(
            skill.document.text("name").as_deref(),
            Some("my-pkg-configure")
        );
    }

    #[test]
    fn invocation_names_come_from_skills_commands_and_agents() {
        assert_eq!(
            invocation_name("skills/configure").as_deref(),
            Some("configure")
        );
        assert_eq!(
            invocation_name("commands/configure.md").as_deref(),
            Some("configure")
        );
        assert_eq!(
            invocation_name("agents/configure.md").as_deref(),
            Some("configure")
        );
        assert_eq!(invocation_name("agents/configure.toml"), None);
        assert_eq!(invocation_name("rules/configure.mdc"), None);
    }
}
