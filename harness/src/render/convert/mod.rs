//! Per-agent shapes of the four artifact types: the wrapper changes, the body is preserved.
//!
//! Owns the conversion table (command, agent, skill, rule -> each agent's native file), the
//! skill fallback for agents without a first-class type (with the rule's scope noted), the
//! OpenCode agent field conversion (with a warning per value left out), Codex custom agents, and
//! the `-command`/`-agent`/`-rule`, `-2`, `-3` names for converted skills. An artifact whose file
//! needs no change is returned as [`PlanEntry::FromFile`] so it is linked, not copied.

use std::collections::BTreeSet;

use indexmap::IndexMap;
use serde_norway::Value as Yaml;

use crate::input::artifact::{Artifact, ArtifactKind};
use crate::plan::PlanEntry;
use crate::render::frontmatter::{self, text_field, Document, FieldValue};

mod opencode;
#[cfg(test)]
mod tests;

pub use opencode::{opencode_agent, opencode_command};

/// The artifact's file, unchanged.
pub fn unchanged(artifact: &Artifact) -> PlanEntry {
    PlanEntry::FromFile {
        source: artifact.source.clone(),
        executable: artifact.executable,
    }
}

fn rendered(fields: &IndexMap<String, FieldValue>, body: &str) -> PlanEntry {
    PlanEntry::Bytes(frontmatter::render(fields, body).into_bytes())
}

/// The last segment of a command/agent/rule name (`git/commit` -> `commit`).
pub fn leaf_name(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// A skill directory name: lowercase letters, digits and single dashes.
pub fn skill_name(raw: &str) -> String {
    let mut out = String::new();
    for c in raw.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() {
        "skill".into()
    } else {
        out
    }
}

fn description_or(artifact: &Artifact, fallback: impl FnOnce() -> String) -> String {
    artifact.document.description().unwrap_or_else(fallback)
}

/// The body without the blank lines that follow the frontmatter.
fn body_text(doc: &Document) -> &str {
    doc.body.trim_start_matches(['\n', '\r'])
}

/// An agent's `name` (as written, else the leaf of its path) and `description` (as written or
/// read from the body, else `Agent <name>`).
fn agent_name_and_description(artifact: &Artifact) -> IndexMap<String, FieldValue> {
    let name = leaf_name(&artifact.name).to_string();
    let written = artifact.document.text("name");
    let mut fields = IndexMap::new();
    fields.insert(
        "name".to_string(),
        text_field(written.unwrap_or_else(|| name.clone())),
    );
    fields.insert(
        "description".to_string(),
        text_field(description_or(artifact, || format!("Agent {name}"))),
    );
    fields
}

/// Adds the document's fields other than `name` and `description`, as written.
fn extend_with_other_fields(fields: &mut IndexMap<String, FieldValue>, doc: &Document) {
    for (key, value) in &doc.fields {
        if key != "name" && key != "description" {
            fields.insert(key.clone(), value.clone());
        }
    }
}

/// Adds the document's `keys` that are present, as written.
fn copy_fields(fields: &mut IndexMap<String, FieldValue>, doc: &Document, keys: &[&str]) {
    for key in keys {
        if let Some(value) = doc.fields.get(*key) {
            fields.insert(key.to_string(), value.clone());
        }
    }
}

/// The names taken in one package's skill namespace for one agent.
#[derive(Debug, Clone, Default)]
pub struct SkillNames {
    taken: BTreeSet<String>,
}

impl SkillNames {
    /// Starts with the package's own skills.
    pub fn new<'a>(skills: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            taken: skills.into_iter().map(str::to_string).collect(),
        }
    }

    /// Claims a name for a converted item: `name`, else `name-<kind>`, else `name-<kind>-2`, `-3`...
    /// Returns the name and, when it changed, a warning.
    pub fn claim(
        &mut self,
        name: &str,
        kind: ArtifactKind,
        label: &str,
    ) -> (String, Option<String>) {
        if self.taken.insert(name.to_string()) {
            return (name.to_string(), None);
        }
        let base = format!("{name}-{}", kind.as_str());
        let mut candidate = base.clone();
        let mut n = 1;
        while !self.taken.insert(candidate.clone()) {
            n += 1;
            candidate = format!("{base}-{n}");
        }
        let warning = format!(
            "{label}: {} `{name}` is staged as skill `{candidate}` because skill `{name}` already exists",
            kind.as_str()
        );
        (candidate, Some(warning))
    }
}

/// A skill's `SKILL.md` with `name` (the directory name) and `description`.
pub fn normalized_skill(artifact: &Artifact, name: &str) -> PlanEntry {
    let doc = &artifact.document;
    if doc.valid_yaml
        && doc.text("name").as_deref() == Some(name)
        && doc.text("description").is_some()
    {
        return unchanged(artifact);
    }
    let mut fields = IndexMap::new();
    fields.insert("name".to_string(), text_field(name));
    fields.insert(
        "description".to_string(),
        text_field(description_or(artifact, || format!("Skill {name}"))),
    );
    extend_with_other_fields(&mut fields, doc);
    rendered(&fields, &doc.body)
}

/// Claude Code (and Grok, Antigravity) command: the file as written when its frontmatter
/// parses, else re-rendered from what could be read.
pub fn claude_command(artifact: &Artifact) -> PlanEntry {
    let doc = &artifact.document;
    if !doc.has_frontmatter || doc.valid_yaml {
        unchanged(artifact)
    } else {
        rendered(&doc.fields, &doc.body)
    }
}

/// Claude Code agent: `name` and `description` are required.
pub fn claude_agent(artifact: &Artifact) -> PlanEntry {
    let doc = &artifact.document;
    if doc.valid_yaml && doc.text("name").is_some() && doc.text("description").is_some() {
        return unchanged(artifact);
    }
    let mut fields = agent_name_and_description(artifact);
    extend_with_other_fields(&mut fields, doc);
    rendered(&fields, &doc.body)
}

fn yaml_truthy(value: Option<&FieldValue>) -> bool {
    match value {
        Some(FieldValue::Yaml(Yaml::Bool(b))) => *b,
        Some(value) => value
            .as_text()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("true")),
        None => false,
    }
}

fn globs_text(artifact: &Artifact) -> Option<String> {
    let field = artifact
        .document
        .fields
        .get("globs")
        .or_else(|| artifact.document.fields.get("paths"))?;
    match field {
        FieldValue::Yaml(Yaml::Sequence(items)) => {
            let list: Vec<String> = items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            (!list.is_empty()).then(|| list.join(","))
        }
        other => other.as_text().filter(|t| !t.trim().is_empty()),
    }
}

/// How a rule applies, in words: always, to files matching globs, when relevant, or on request.
pub fn rule_scope(artifact: &Artifact) -> String {
    let doc = &artifact.document;
    let trigger = doc.text("trigger");
    if yaml_truthy(doc.fields.get("alwaysApply")) || trigger.as_deref() == Some("always_on") {
        return "always applied".into();
    }
    if let Some(globs) = globs_text(artifact) {
        return format!("applied to files matching `{globs}`");
    }
    if trigger.as_deref() == Some("manual") {
        return "applied only when asked for".into();
    }
    if let Some(description) = doc.text("description") {
        return format!("applied when relevant: {description}");
    }
    if doc.fields.contains_key("alwaysApply") {
        return "applied only when asked for".into();
    }
    "always applied".into()
}

/// A command, agent or rule as a skill named `name`, with where it came from noted.
pub fn as_skill(artifact: &Artifact, name: &str, label: &str) -> PlanEntry {
    let original = leaf_name(&artifact.name);
    let note = match artifact.kind {
        ArtifactKind::Command => format!(
            "> Staged by agentpack from the slash command `/{}` of {label}.",
            artifact.name.replace('/', ":")
        ),
        ArtifactKind::Agent => {
            format!("> Staged by agentpack from the subagent `{original}` of {label}.")
        }
        ArtifactKind::Rule => format!(
            "> Staged by agentpack from the rule `{}` of {label}, {}.",
            artifact.source_relative,
            rule_scope(artifact)
        ),
        ArtifactKind::Skill => String::new(),
    };
    let description = description_or(artifact, || {
        format!("{} {original} from {label}", artifact.kind.as_str())
    });
    let mut fields = IndexMap::new();
    fields.insert("name".to_string(), text_field(name));
    fields.insert("description".to_string(), text_field(description));
    let body = format!("\n{note}\n\n{}", body_text(&artifact.document));
    rendered(&fields, &body)
}

/// Cursor command: plain markdown (the body).
pub fn cursor_command(artifact: &Artifact) -> PlanEntry {
    if !artifact.document.has_frontmatter {
        return unchanged(artifact);
    }
    PlanEntry::Bytes(body_text(&artifact.document).as_bytes().to_vec())
}

/// Cursor agent markdown: `name` and `description`.
pub fn cursor_agent(artifact: &Artifact) -> PlanEntry {
    let doc = &artifact.document;
    let only_known = doc.fields.keys().all(|k| k == "name" || k == "description");
    if doc.valid_yaml
        && only_known
        && doc.text("name").is_some()
        && doc.text("description").is_some()
    {
        return unchanged(artifact);
    }
    rendered(&agent_name_and_description(artifact), &doc.body)
}

/// Cursor rule: an `.mdc` as written, else an `.mdc` with `description`, `globs`, `alwaysApply`.
pub fn cursor_rule(artifact: &Artifact) -> PlanEntry {
    if artifact.extension == "mdc" {
        return unchanged(artifact);
    }
    let doc = &artifact.document;
    let mut fields = IndexMap::new();
    if let Some(description) = doc.text("description") {
        fields.insert("description".to_string(), text_field(description));
    }
    let globs = globs_text(artifact);
    if let Some(globs) = &globs {
        fields.insert("globs".to_string(), text_field(globs.clone()));
    }
    let always = rule_scope(artifact) == "always applied";
    fields.insert(
        "alwaysApply".to_string(),
        FieldValue::Yaml(Yaml::Bool(always)),
    );
    rendered(&fields, &doc.body)
}

/// Antigravity rule: a markdown rule as written, an `.mdc` re-rendered with `trigger`.
pub fn antigravity_rule(artifact: &Artifact) -> PlanEntry {
    let doc = &artifact.document;
    // A markdown rule with Cursor's or Claude Code's scope fields (`alwaysApply`, `globs`, `paths`)
    // and no `trigger` is given the `trigger` Antigravity reads; one without them is kept as written.
    let foreign_scope = !doc.fields.contains_key("trigger")
        && ["alwaysApply", "globs", "paths"]
            .iter()
            .any(|key| doc.fields.contains_key(*key));
    if artifact.extension == "md" && (!doc.has_frontmatter || doc.valid_yaml) && !foreign_scope {
        return unchanged(artifact);
    }
    let mut fields = IndexMap::new();
    let scope = rule_scope(artifact);
    let globs = globs_text(artifact);
    let trigger = if scope == "always applied" {
        "always_on"
    } else if globs.is_some() {
        "glob"
    } else if doc.text("description").is_some() {
        "model_decision"
    } else {
        "manual"
    };
    fields.insert("trigger".to_string(), text_field(trigger));
    if let Some(globs) = globs {
        fields.insert("globs".to_string(), text_field(globs));
    }
    if let Some(description) = doc.text("description") {
        fields.insert("description".to_string(), text_field(description));
    }
    rendered(&fields, &doc.body)
}
/// Codex custom agent: `agents/<name>.toml` with name, description, developer_instructions.
pub fn codex_agent_toml(artifact: &Artifact, name: &str, label: &str) -> Vec<u8> {
    let mut table = toml::Table::new();
    table.insert("name".into(), name.to_string().into());
    table.insert(
        "description".into(),
        description_or(artifact, || format!("Agent {name} from {label}")).into(),
    );
    table.insert(
        "developer_instructions".into(),
        body_text(&artifact.document).to_string().into(),
    );
    toml::to_string(&table).unwrap_or_default().into_bytes()
}
