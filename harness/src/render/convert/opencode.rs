//! OpenCode's agents and commands: the frontmatter fields OpenCode has (tools, model, colour,
//! mode...), converted from Claude Code's, with a warning per value left out.

use super::*;

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
        other => return crate::render::css_colors::css_color_hex(other),
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
        let mut map = serde_norway::Mapping::new();
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
