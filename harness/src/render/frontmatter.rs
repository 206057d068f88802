//! Markdown frontmatter: a tolerant reader and a writer.
//!
//! The reader accepts what the agents accept: a UTF-8 BOM, CRLF lines, no frontmatter at all,
//! and frontmatter that is not valid YAML as a whole, which is read one top-level key at a time (a
//! value that does not parse, such as `argument-hint: [system] [--source <path>]`, is kept as the
//! text written). It never fails. The writer renders fields in order and the body unchanged.

use indexmap::IndexMap;
use serde_norway::Value;

/// One frontmatter value: parsed YAML, or the text as written when it does not parse.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    Yaml(Value),
    Raw(String),
}

impl FieldValue {
    /// The value as a plain string, for scalars and raw text.
    pub fn as_text(&self) -> Option<String> {
        match self {
            FieldValue::Raw(text) => Some(text.clone()),
            FieldValue::Yaml(Value::String(s)) => Some(s.clone()),
            FieldValue::Yaml(Value::Number(n)) => Some(n.to_string()),
            FieldValue::Yaml(Value::Bool(b)) => Some(b.to_string()),
            FieldValue::Yaml(_) => None,
        }
    }

    fn to_yaml(&self) -> Value {
        match self {
            FieldValue::Yaml(value) => value.clone(),
            FieldValue::Raw(text) => Value::String(text.clone()),
        }
    }
}

/// A parsed markdown document.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Top-level keys in the order written.
    pub fields: IndexMap<String, FieldValue>,
    /// The text after the frontmatter, unchanged.
    pub body: String,
    /// Whether the file opened with a `---` block.
    pub has_frontmatter: bool,
    /// Whether the block was valid YAML as a whole (true when there is none).
    pub valid_yaml: bool,
}

impl Document {
    /// A field as text (see [`FieldValue::as_text`]), empty strings treated as missing.
    pub fn text(&self, key: &str) -> Option<String> {
        self.fields
            .get(key)
            .and_then(FieldValue::as_text)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// The `description` field, else the first line of prose in the body.
    pub fn description(&self) -> Option<String> {
        self.text("description")
            .or_else(|| description_from_body(&self.body))
    }
}

/// Reads a markdown document. Never fails.
pub fn parse(text: &str) -> Document {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let no_frontmatter = || Document {
        fields: IndexMap::new(),
        body: text.to_string(),
        has_frontmatter: false,
        valid_yaml: true,
    };
    let Some(after_open) = strip_delimiter_line(text) else {
        return no_frontmatter();
    };
    let mut offset = 0;
    let mut block_end = None;
    for line in after_open.split_inclusive('\n') {
        if line.trim_end_matches(['\n', '\r']).trim_end() == "---" {
            block_end = Some((offset, offset + line.len()));
            break;
        }
        offset += line.len();
    }
    let Some((block_len, body_start)) = block_end else {
        return no_frontmatter();
    };
    let block = &after_open[..block_len];
    let body = after_open[body_start..].to_string();
    let (fields, valid_yaml) = parse_block(block);
    Document {
        fields,
        body,
        has_frontmatter: true,
        valid_yaml,
    }
}

fn strip_delimiter_line(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("---")?;
    let rest = rest.trim_start_matches([' ', '\t']);
    rest.strip_prefix("\r\n")
        .or_else(|| rest.strip_prefix('\n'))
}

fn parse_block(block: &str) -> (IndexMap<String, FieldValue>, bool) {
    if block.trim().is_empty() {
        return (IndexMap::new(), true);
    }
    if let Ok(Value::Mapping(mapping)) = serde_norway::from_str::<Value>(block) {
        let mut fields = IndexMap::new();
        for (key, value) in mapping {
            if let Some(key) = key_text(&key) {
                fields.insert(key, FieldValue::Yaml(value));
            }
        }
        return (fields, true);
    }
    (parse_key_by_key(block), false)
}

fn key_text(key: &Value) -> Option<String> {
    match key {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Splits a block into top-level `key: value` chunks (a chunk runs until the next line that
/// starts a new top-level key) and parses each on its own.
fn parse_key_by_key(block: &str) -> IndexMap<String, FieldValue> {
    let mut chunks: Vec<(String, String)> = Vec::new();
    for line in block.lines() {
        let starts_key = !line.starts_with([' ', '\t', '-', '#'])
            && line
                .split_once(':')
                .is_some_and(|(key, _)| !key.is_empty() && !key.contains(char::is_whitespace));
        if starts_key {
            let (key, _) = line.split_once(':').unwrap_or((line, ""));
            chunks.push((key.trim().to_string(), format!("{line}\n")));
        } else if let Some((_, chunk)) = chunks.last_mut() {
            chunk.push_str(line);
            chunk.push('\n');
        }
    }
    let mut fields = IndexMap::new();
    for (key, chunk) in chunks {
        let parsed = serde_norway::from_str::<Value>(&chunk)
            .ok()
            .and_then(|value| match value {
                Value::Mapping(mut m) => m.remove(Value::String(key.clone())),
                _ => None,
            });
        let value = match parsed {
            Some(value) => FieldValue::Yaml(value),
            None => {
                let raw = chunk.split_once(':').map_or("", |(_, v)| v);
                FieldValue::Raw(raw.trim().to_string())
            }
        };
        fields.insert(key, value);
    }
    fields
}

/// The first line of prose in a body: headings' `#` marks removed, at most 200 characters.
pub fn description_from_body(body: &str) -> Option<String> {
    let mut in_fence = false;
    for line in body.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || trimmed.is_empty() || trimmed.starts_with("<!--") {
            continue;
        }
        let text = trimmed.trim_start_matches('#').trim();
        if text.is_empty() {
            continue;
        }
        let mut text: String = text.chars().take(200).collect();
        if text.len() < trimmed.len() && text.chars().count() == 200 {
            text.push('…');
        }
        return Some(text);
    }
    None
}

/// Renders a document: `---`, the fields as YAML in order, `---`, then the body unchanged.
/// With no fields, the body alone.
pub fn render(fields: &IndexMap<String, FieldValue>, body: &str) -> String {
    if fields.is_empty() {
        return body.to_string();
    }
    let mut mapping = serde_norway::Mapping::new();
    for (key, value) in fields {
        mapping.insert(Value::String(key.clone()), value.to_yaml());
    }
    let yaml = serde_norway::to_string(&Value::Mapping(mapping)).unwrap_or_default();
    let mut out = String::from("---\n");
    out.push_str(&yaml);
    if !yaml.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("---\n");
    out.push_str(body);
    out
}

/// Shorthand to build a string field.
pub fn text_field(value: impl Into<String>) -> FieldValue {
    FieldValue::Yaml(Value::String(value.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_valid_frontmatter_with_bom_and_crlf() {
        let doc = parse("\u{feff}---\r\nname: x\r\ndescription: Does x\r\n---\r\nBody\r\n");
        assert!(doc.has_frontmatter && doc.valid_yaml);
        assert_eq!(doc.text("name").as_deref(), Some("x"));
        assert_eq!(doc.text("description").as_deref(), Some("Does x"));
        assert_eq!(doc.body, "Body\r\n");
    }

    #[test]
    fn reads_invalid_yaml_key_by_key_keeping_raw_text() {
        let doc = parse(
            "---\ndescription: Import data\nargument-hint: [system] [--source <path>]\nallowed-tools:\n  - Read\n  - Bash\n---\nDo it.\n",
        );
        assert!(!doc.valid_yaml);
        assert_eq!(doc.text("description").as_deref(), Some("Import data"));
        assert_eq!(
            doc.fields["argument-hint"],
            FieldValue::Raw("[system] [--source <path>]".into())
        );
        assert!(
            matches!(&doc.fields["allowed-tools"], FieldValue::Yaml(Value::Sequence(s)) if s.len() == 2)
        );
        assert_eq!(doc.body, "Do it.\n");
    }

    #[test]
    fn no_readable_key_means_no_fields_and_description_from_body() {
        let doc = parse("---\n: : :\n  nonsense\n---\n\n# Review code\n\nCarefully.\n");
        assert!(doc.fields.is_empty());
        assert_eq!(doc.description().as_deref(), Some("Review code"));
    }

    #[test]
    fn unterminated_frontmatter_is_body() {
        let doc = parse("---\nname: x\nno end\n");
        assert!(!doc.has_frontmatter);
        assert_eq!(doc.body, "---\nname: x\nno end\n");
    }

    #[test]
    fn render_round_trips_and_quotes_raw_values() {
        let mut fields = IndexMap::new();
        fields.insert("name".to_string(), text_field("x"));
        fields.insert(
            "argument-hint".to_string(),
            FieldValue::Raw("[a] [b]".into()),
        );
        let text = render(&fields, "Body\n");
        let doc = parse(&text);
        assert!(doc.valid_yaml);
        assert_eq!(doc.text("argument-hint").as_deref(), Some("[a] [b]"));
        assert_eq!(doc.body, "Body\n");
        assert_eq!(render(&IndexMap::new(), "just body"), "just body");
    }
}
