//! Tests of the artifact conversions.

use super::*;
use crate::input::artifact::test_artifact as artifact;

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
