//! Per-agent shapes of the four artifact types: the wrapper changes, the body is preserved.
//!
//! Owns the conversion table (command, agent, skill, rule -> each agent's native file), the
//! skill fallback for agents without a first-class type (with the rule's scope noted), the
//! OpenCode agent field conversion (with a warning per value left out), Codex custom agents, and
//! the `-command`/`-agent`/`-rule`, `-2`, `-3` names for converted skills. An artifact whose file
//! needs no change is returned as [`PlanEntry::FromFile`] so it is linked, not copied.

use std::collections::BTreeSet;

use indexmap::IndexMap;
use serde_yaml::Value as Yaml;

use crate::artifact::{Artifact, ArtifactKind};
use crate::frontmatter::{self, text_field, Document, FieldValue};
use crate::plan::PlanEntry;

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

const OPENCODE_TOOLS: [&str; 12] = [
    "read",
    "write",
    "edit",
    "bash",
    "grep",
    "glob",
    "list",
    "webfetch",
    "websearch",
    "task",
    "todowrite",
    "skill",
];

fn opencode_tool(claude: &str) -> Option<&'static str> {
    let base = claude.split('(').next().unwrap_or(claude).trim();
    let mapped = match base {
        "Read" => "read",
        "Write" => "write",
        "Edit" | "MultiEdit" => "edit",
        "Bash" => "bash",
        "Grep" => "grep",
        "Glob" => "glob",
        "LS" => "list",
        "WebFetch" => "webfetch",
        "WebSearch" => "websearch",
        "Task" | "Agent" => "task",
        "TodoWrite" => "todowrite",
        "Skill" => "skill",
        other => return OPENCODE_TOOLS.iter().copied().find(|t| *t == other),
    };
    Some(mapped)
}

fn tool_list(value: &FieldValue) -> Vec<String> {
    match value {
        FieldValue::Yaml(Yaml::Sequence(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        other => other
            .as_text()
            .map(|t| split_tool_list(&t))
            .unwrap_or_default(),
    }
}

/// Splits a comma-separated tool list at the commas outside parentheses, so `Agent(a, b), Read`
/// is two tools.
fn split_tool_list(text: &str) -> Vec<String> {
    let mut tools = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                tools.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    tools.push(current);
    tools
        .into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Sets the OpenCode counterpart of each tool `value` lists to `enabled`; returns the tools that
/// have none.
fn set_opencode_tools(
    tools: &mut IndexMap<String, bool>,
    value: &FieldValue,
    enabled: bool,
) -> Vec<String> {
    let mut unmapped = Vec::new();
    for tool in tool_list(value) {
        match opencode_tool(&tool) {
            Some(mapped) => {
                tools.insert(mapped.to_string(), enabled);
            }
            None => unmapped.push(tool),
        }
    }
    unmapped
}

fn color_hex(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "red" => "#ef4444",
        "orange" => "#f97316",
        "yellow" => "#eab308",
        "green" => "#22c55e",
        "cyan" => "#06b6d4",
        "blue" => "#3b82f6",
        "purple" => "#a855f7",
        "pink" => "#ec4899",
        "gray" | "grey" => "#6b7280",
        "white" => "#ffffff",
        "black" => "#000000",
        other => return crate::css_colors::css_color_hex(other),
    })
}

fn is_hex_color(text: &str) -> bool {
    text.strip_prefix('#')
        .is_some_and(|h| (h.len() == 6 || h.len() == 3) && h.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Adds the document's `model` when it is a provider/model id, the only form OpenCode takes;
/// returns a model left out.
fn insert_opencode_model(
    fields: &mut IndexMap<String, FieldValue>,
    doc: &Document,
) -> Option<String> {
    let model = doc.text("model")?;
    if model.contains('/') {
        fields.insert("model".into(), text_field(model));
        None
    } else {
        Some(model)
    }
}

/// OpenCode agent markdown, fields converted per the conversion table; each value left out is
/// named in a warning.
pub fn opencode_agent(artifact: &Artifact, label: &str, warnings: &mut Vec<String>) -> PlanEntry {
    let doc = &artifact.document;
    let name = leaf_name(&artifact.name);
    let mut warn =
        |what: String| warnings.push(format!("{label}: agent `{name}` for OpenCode: {what}"));
    let mut fields = IndexMap::new();
    fields.insert(
        "description".to_string(),
        text_field(description_or(artifact, || format!("Agent {name}"))),
    );
    let mode = doc.text("mode");
    match mode.as_deref() {
        Some(m @ ("subagent" | "primary" | "all")) => {
            fields.insert("mode".into(), text_field(m));
        }
        Some(other) => {
            warn(format!(
                "mode `{other}` left out (OpenCode knows subagent, primary, all)"
            ));
            fields.insert("mode".into(), text_field("subagent"));
        }
        None => {
            fields.insert("mode".into(), text_field("subagent"));
        }
    }
    if let Some(model) = insert_opencode_model(&mut fields, doc) {
        warn(format!(
            "model `{model}` left out; the agent uses the session's model"
        ));
    }
    let mut tools: IndexMap<String, bool> = IndexMap::new();
    if let Some(value) = doc.fields.get("tools") {
        if let FieldValue::Yaml(Yaml::Mapping(map)) = value {
            for (key, enabled) in map {
                if let (Some(key), Some(enabled)) = (key.as_str(), enabled.as_bool()) {
                    tools.insert(key.to_string(), enabled);
                }
            }
        } else {
            for tool in OPENCODE_TOOLS {
                tools.insert(tool.to_string(), false);
            }
            for tool in set_opencode_tools(&mut tools, value, true) {
                warn(format!(
                    "tool `{tool}` has no OpenCode counterpart; left out"
                ));
            }
        }
    }
    if let Some(value) = doc.fields.get("disallowedTools") {
        for tool in set_opencode_tools(&mut tools, value, false) {
            warn(format!(
                "disallowed tool `{tool}` has no OpenCode counterpart; left out"
            ));
        }
    }
    if !tools.is_empty() {
        let mut map = serde_yaml::Mapping::new();
        for (tool, enabled) in tools {
            map.insert(Yaml::String(tool), Yaml::Bool(enabled));
        }
        fields.insert("tools".into(), FieldValue::Yaml(Yaml::Mapping(map)));
    }
    if let Some(color) = doc.text("color") {
        if is_hex_color(&color) {
            fields.insert("color".into(), text_field(color));
        } else if let Some(hex) = color_hex(&color) {
            fields.insert("color".into(), text_field(hex));
        } else {
            warn(format!(
                "color `{color}` is neither a known name nor hex; left out"
            ));
        }
    }
    copy_fields(
        &mut fields,
        doc,
        &[
            "temperature",
            "top_p",
            "steps",
            "maxSteps",
            "hidden",
            "disable",
            "permission",
        ],
    );
    for key in doc.fields.keys() {
        let handled = matches!(
            key.as_str(),
            "name"
                | "description"
                | "mode"
                | "model"
                | "tools"
                | "disallowedTools"
                | "color"
                | "temperature"
                | "top_p"
                | "steps"
                | "maxSteps"
                | "hidden"
                | "disable"
                | "permission"
        );
        if !handled {
            warn(format!(
                "field `{key}` has no OpenCode equivalent; left out"
            ));
        }
    }
    rendered(&fields, &doc.body)
}

/// OpenCode command markdown: `description` (and a provider/model `model`); the body is the template.
pub fn opencode_command(artifact: &Artifact, label: &str, warnings: &mut Vec<String>) -> PlanEntry {
    let doc = &artifact.document;
    if !doc.has_frontmatter {
        return unchanged(artifact);
    }
    let mut fields = IndexMap::new();
    if let Some(description) = doc.description() {
        fields.insert("description".to_string(), text_field(description));
    }
    copy_fields(&mut fields, doc, &["agent", "subtask"]);
    if let Some(model) = insert_opencode_model(&mut fields, doc) {
        warnings.push(format!(
            "{label}: command `{}` for OpenCode: model `{model}` left out; the command uses the session's model",
            artifact.name
        ));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::test_artifact as artifact;

    fn text(entry: PlanEntry) -> String {
        match entry {
            PlanEntry::Bytes(bytes) => String::from_utf8(bytes).unwrap(),
            other => panic!("expected bytes, got {other:?}"),
        }
    }

    #[test]
    fn collisions_get_kind_suffix_then_numbers() {
        let mut names = SkillNames::new(["review"]);
        assert_eq!(names.claim("lint", ArtifactKind::Command, "p").0, "lint");
        let (name, warning) = names.claim("review", ArtifactKind::Command, "p");
        assert_eq!(name, "review-command");
        assert!(warning.unwrap().contains("`review-command`"));
        assert_eq!(
            names.claim("review", ArtifactKind::Command, "p").0,
            "review-command-2"
        );
        assert_eq!(
            names.claim("review", ArtifactKind::Command, "p").0,
            "review-command-3"
        );
        assert_eq!(
            names.claim("review", ArtifactKind::Rule, "p").0,
            "review-rule"
        );
    }

    #[test]
    fn opencode_agent_fields_follow_the_table() {
        let a = artifact(
            ArtifactKind::Agent,
            "reviewer",
            "---\nname: reviewer\ndescription: Reviews\ntools: Read, Grep, Bash(git:*), mcp__github__pr\ndisallowedTools: [Write]\ncolor: blue\nmodel: sonnet\nmode: weird\npermissionMode: plan\n---\nBody\n",
        );
        let mut warnings = Vec::new();
        let out = text(opencode_agent(&a, "p", &mut warnings));
        let doc = frontmatter::parse(&out);
        assert!(doc.valid_yaml);
        assert_eq!(doc.text("color").as_deref(), Some("#3b82f6"));
        assert_eq!(doc.text("mode").as_deref(), Some("subagent"));
        assert!(doc.fields.get("model").is_none());
        let FieldValue::Yaml(Yaml::Mapping(tools)) = &doc.fields["tools"] else {
            panic!()
        };
        assert_eq!(tools.len(), 12);
        assert_eq!(tools.get("read"), Some(&Yaml::Bool(true)));
        assert_eq!(tools.get("bash"), Some(&Yaml::Bool(true)));
        assert_eq!(tools.get("write"), Some(&Yaml::Bool(false)));
        assert_eq!(tools.get("edit"), Some(&Yaml::Bool(false)));
        assert_eq!(doc.body, "Body\n");
        for needle in [
            "`mcp__github__pr`",
            "model `sonnet`",
            "mode `weird`",
            "`permissionMode`",
        ] {
            assert!(
                warnings.iter().any(|w| w.contains(needle)),
                "{needle}: {warnings:?}"
            );
        }
        let odd = artifact(
            ArtifactKind::Agent,
            "x",
            "---\ncolor: chartreuse-ish\nmodel: anthropic/claude-sonnet-4\n---\nB\n",
        );
        let mut warnings = Vec::new();
        let doc = frontmatter::parse(&text(opencode_agent(&odd, "p", &mut warnings)));
        assert!(doc.fields.get("color").is_none());
        assert_eq!(
            doc.text("model").as_deref(),
            Some("anthropic/claude-sonnet-4")
        );
        assert!(warnings[0].contains("chartreuse-ish"));
    }

    #[test]
    fn rules_keep_their_scope() {
        let always = artifact(
            ArtifactKind::Rule,
            "style",
            "---\nalwaysApply: true\n---\nUse tabs.\n",
        );
        assert_eq!(rule_scope(&always), "always applied");
        let globbed = artifact(
            ArtifactKind::Rule,
            "ts",
            "---\nglobs: [\"*.ts\", \"*.tsx\"]\n---\nStrict.\n",
        );
        assert_eq!(
            rule_scope(&globbed),
            "applied to files matching `*.ts,*.tsx`"
        );
        let skill = text(as_skill(&globbed, "ts", "p"));
        assert!(
            skill.contains("applied to files matching `*.ts,*.tsx`"),
            "{skill}"
        );
        assert!(skill.ends_with("Strict.\n"));
        let mdc = text(cursor_rule(&globbed));
        assert!(
            mdc.contains("globs: '*.ts,*.tsx'") && mdc.contains("alwaysApply: false"),
            "{mdc}"
        );
    }

    #[test]
    fn valid_files_stay_unchanged() {
        let ok = artifact(
            ArtifactKind::Agent,
            "a",
            "---\nname: a\ndescription: d\n---\nB\n",
        );
        assert!(matches!(claude_agent(&ok), PlanEntry::FromFile { .. }));
        let missing = artifact(ArtifactKind::Agent, "a", "Review things.\n");
        let out = text(claude_agent(&missing));
        assert!(
            out.starts_with("---\nname: a\ndescription: Review things.\n---\n"),
            "{out}"
        );
        let codex = String::from_utf8(codex_agent_toml(&ok, "a", "p")).unwrap();
        assert!(
            codex.contains("name = \"a\"") && codex.contains("developer_instructions = "),
            "{codex}"
        );
    }
}
