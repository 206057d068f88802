//! Parsers of what the native clients print, tied to the client versions they were validated on.
//! Pure: bytes in, a catalog or a reason out. A version they were not validated on is `unknown`,
//! never a guess; output that is malformed or stops early is an error, never an empty catalog.

use serde_json::Value;

pub use crate::evidence::adapter::{
    adapter, adapter_revision, Client, CLAUDE_VALIDATED, CODEX_VALIDATED, OPENCODE_VALIDATED,
};
pub use crate::evidence::catalog::{Catalog, HookOutcome, Observed, WinnersSeen};

/// The plugin name the staged Claude bundle has.
const BUNDLE: &str = "agentpack-bundle";

/// Why output did not become a catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseFailure {
    /// The client is a version no parser was validated on.
    UnknownVersion(String),
    /// The output is not what the validated version prints.
    Malformed(String),
}

/// The version `claude --version` or `codex --version` prints (`2.1.328 (Claude Code)`,
/// `codex-cli 0.171.0`); `None` when there is no version-looking word.
pub fn version_of(text: &str) -> Option<String> {
    text.split_whitespace()
        .find(|word| {
            let mut parts = word.split('.');
            parts.clone().count() >= 2
                && parts.all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_owned)
}

fn split_bundle(id: &str) -> (String, &'static str) {
    match id
        .strip_prefix(BUNDLE)
        .and_then(|rest| rest.strip_prefix(':'))
    {
        Some(name) => (name.to_owned(), "package"),
        None => (id.to_owned(), "other"),
    }
}

/// Claude Code's print-mode stream up to its `init` event.
pub fn claude_init(stdout: &[u8]) -> Result<Catalog, ParseFailure> {
    let text = std::str::from_utf8(stdout)
        .map_err(|_| ParseFailure::Malformed("the stream is not UTF-8".to_owned()))?;
    let mut hooks = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let event: Value = serde_json::from_str(line).map_err(|err| {
            ParseFailure::Malformed(format!(
                "a stream line is not JSON ({err}): {}",
                excerpt(line)
            ))
        })?;
        match event["subtype"].as_str() {
            Some("hook_response") => hooks.push(HookOutcome {
                event: event["hook_event"].as_str().unwrap_or_default().to_owned(),
                name: event["hook_name"].as_str().unwrap_or_default().to_owned(),
                exit_code: event["exit_code"].as_i64(),
                outcome: event["outcome"].as_str().unwrap_or_default().to_owned(),
            }),
            Some("init") => {
                let version = event["claude_code_version"].as_str().unwrap_or_default();
                if version != CLAUDE_VALIDATED {
                    return Err(ParseFailure::UnknownVersion(version.to_owned()));
                }
                let list = |key: &str| -> Result<Vec<String>, ParseFailure> {
                    event[key]
                        .as_array()
                        .ok_or_else(|| {
                            ParseFailure::Malformed(format!("the init event has no `{key}` list"))
                        })?
                        .iter()
                        .map(|v| {
                            v.as_str().map(str::to_owned).ok_or_else(|| {
                                ParseFailure::Malformed(format!("`{key}` holds a non-string"))
                            })
                        })
                        .collect()
                };
                let skills = list("skills")?;
                let commands = list("slash_commands")?;
                let agents = list("agents")?;
                let mut artifacts = Vec::new();
                let mut push = |category: &str, id: &str| {
                    let (name, winner) = split_bundle(id);
                    artifacts.push(Observed {
                        category: category.to_owned(),
                        name,
                        native_id: id.to_owned(),
                        winner: winner.to_owned(),
                        scope: "workspace_session".to_owned(),
                    });
                };
                for id in &skills {
                    push("skill", id);
                }
                // Claude lists skills among the slash commands too: the rest are commands.
                for id in commands.iter().filter(|c| !skills.contains(c)) {
                    push("command", id);
                }
                for id in &agents {
                    push("agent", id);
                }
                return Ok(Catalog {
                    artifacts,
                    hooks,
                    ..Catalog::default()
                });
            }
            _ => {}
        }
    }
    Err(ParseFailure::Malformed(
        "the stream ended before the init event".to_owned(),
    ))
}

/// `stdout` as JSON; `not_json` says what failed ("the skill list is not JSON").
fn json(stdout: &[u8], not_json: &str) -> Result<Value, ParseFailure> {
    serde_json::from_slice(stdout)
        .map_err(|err| ParseFailure::Malformed(format!("{not_json} ({err})")))
}

/// [`json`] of a client whose output is read only at the `validated` version.
fn validated_json(
    stdout: &[u8],
    version: &str,
    validated: &str,
    not_json: &str,
) -> Result<Value, ParseFailure> {
    if version != validated {
        return Err(ParseFailure::UnknownVersion(version.to_owned()));
    }
    json(stdout, not_json)
}

/// Codex's `debug prompt-input` JSON: the skills of its `<skills_instructions>` block. A skill
/// whose file is under `skills_root` (the staged skills, `CODEX_HOME/skills`, by the block's
/// table of skill roots) is the package's; every observation carries `scope`. A name listed more
/// than once with different winners is `varied`.
pub fn codex_prompt_input(
    stdout: &[u8],
    version: &str,
    skills_root: &std::path::Path,
    scope: &str,
) -> Result<Catalog, ParseFailure> {
    let value = validated_json(
        stdout,
        version,
        CODEX_VALIDATED,
        "the prompt input is not JSON",
    )?;
    let items = value
        .as_array()
        .filter(|items| !items.is_empty())
        .ok_or_else(|| {
            ParseFailure::Malformed("the prompt input is not a list of items".to_owned())
        })?;
    let mut block = None;
    for item in items {
        for content in item["content"].as_array().into_iter().flatten() {
            let Some(text) = content["text"].as_str() else {
                continue;
            };
            if let Some(start) = text.find("<skills_instructions>") {
                let rest = &text[start..];
                let end = rest.find("</skills_instructions>").ok_or_else(|| {
                    ParseFailure::Malformed("the skills block is not closed".to_owned())
                })?;
                block = Some(rest[..end].to_owned());
            }
        }
    }
    let block = block.ok_or_else(|| {
        ParseFailure::Malformed("the prompt input has no skills block".to_owned())
    })?;
    // The table of skill roots: "- `r0` = `/abs/path`".
    let staged_forms = [
        skills_root.to_path_buf(),
        std::fs::canonicalize(skills_root).unwrap_or_else(|_| skills_root.to_path_buf()),
    ];
    let mut roots: Vec<(String, bool)> = Vec::new();
    for line in block.lines() {
        let Some(rest) = line.strip_prefix("- `") else {
            continue;
        };
        let Some((key, path)) = rest.split_once("` = `") else {
            continue;
        };
        let path = std::path::Path::new(path.trim_end_matches('`'));
        roots.push((key.to_owned(), staged_forms.iter().any(|f| f == path)));
    }
    if roots.is_empty() {
        return Err(ParseFailure::Malformed(
            "the skills block has no table of skill roots".to_owned(),
        ));
    }
    let mut artifacts: Vec<Observed> = Vec::new();
    for line in block.lines() {
        let Some(entry) = line.strip_prefix("- ") else {
            continue;
        };
        let (Some((name, _)), Some(file_start)) = (entry.split_once(": "), entry.rfind("(file: "))
        else {
            continue;
        };
        let file = entry[file_start + 7..].trim_end_matches(')');
        if !file.ends_with(&format!("/{name}/SKILL.md")) {
            continue;
        }
        let root = file.split('/').next().unwrap_or_default();
        let Some((_, staged)) = roots.iter().find(|(key, _)| key == root) else {
            return Err(ParseFailure::Malformed(format!(
                "the skill `{name}` names the root `{root}`, which the table of skill roots lacks"
            )));
        };
        let winner = if *staged { "package" } else { "other" };
        if let Some(seen) = artifacts.iter_mut().find(|a| a.name == name) {
            if seen.winner != winner {
                seen.winner = "varied".to_owned();
            }
            continue;
        }
        artifacts.push(Observed {
            category: "skill".to_owned(),
            name: name.to_owned(),
            native_id: name.to_owned(),
            winner: winner.to_owned(),
            scope: scope.to_owned(),
        });
    }
    Ok(Catalog {
        artifacts,
        ..Catalog::default()
    })
}

/// OpenCode's `debug skill` JSON: a list of `{name, location, ...}`; a skill located under
/// `config_dir` (where the probe placed the staged tree) is the package's.
pub fn opencode_skills(
    stdout: &[u8],
    version: &str,
    config_dir: &std::path::Path,
) -> Result<Catalog, ParseFailure> {
    let artifacts = opencode_skill_locations(stdout, version)?
        .into_iter()
        .map(|(name, location)| {
            let winner = if std::path::Path::new(&location).starts_with(config_dir) {
                "package"
            } else {
                "other"
            };
            Observed {
                category: "skill".to_owned(),
                native_id: name.clone(),
                name,
                winner: winner.to_owned(),
                scope: "controlled_projection".to_owned(),
            }
        })
        .collect();
    Ok(Catalog {
        artifacts,
        ..Catalog::default()
    })
}

/// Each skill OpenCode's `debug skill` lists: its name and location (a path, or `<built-in>`).
pub fn opencode_skill_locations(
    stdout: &[u8],
    version: &str,
) -> Result<Vec<(String, String)>, ParseFailure> {
    let value = validated_json(
        stdout,
        version,
        OPENCODE_VALIDATED,
        "the skill list is not JSON",
    )?;
    let items = value
        .as_array()
        .ok_or_else(|| ParseFailure::Malformed("the skill list is not a list".to_owned()))?;
    items
        .iter()
        .map(
            |item| match (item["name"].as_str(), item["location"].as_str()) {
                (Some(name), Some(location)) => Ok((name.to_owned(), location.to_owned())),
                _ => Err(ParseFailure::Malformed(
                    "a listed skill has no name or location".to_owned(),
                )),
            },
        )
        .collect()
}

/// Merges samples of OpenCode's `debug skill` (each already parsed): a skill is the package's
/// only when every sample listed it with the package's copy as the winner; a skill whose winner
/// differed between samples is `varied`. Every winner seen is kept in `winners_seen`.
pub fn merge_skill_samples(samples: &[Catalog]) -> Catalog {
    let mut names: Vec<String> = Vec::new();
    for sample in samples {
        for artifact in &sample.artifacts {
            if !names.contains(&artifact.name) {
                names.push(artifact.name.clone());
            }
        }
    }
    let mut merged = Catalog::default();
    for name in names {
        let mut winners: Vec<(String, usize)> = Vec::new();
        let mut listed_in = 0;
        let mut first = None;
        for sample in samples {
            let mut listed = false;
            for artifact in sample.artifacts.iter().filter(|a| a.name == name) {
                listed = true;
                first.get_or_insert_with(|| artifact.clone());
                match winners.iter_mut().find(|(w, _)| *w == artifact.winner) {
                    Some((_, times)) => *times += 1,
                    None => winners.push((artifact.winner.clone(), 1)),
                }
            }
            listed_in += usize::from(listed);
        }
        let Some(mut observed) = first else { continue };
        observed.winner = match winners.as_slice() {
            [(only, _)] if listed_in == samples.len() => only.clone(),
            [(only, _)] if only == "other" => only.clone(),
            _ => "varied".to_owned(),
        };
        merged.winners_seen.push(WinnersSeen {
            category: observed.category.clone(),
            name: observed.name.clone(),
            winners,
            listed_in,
            samples: samples.len(),
        });
        merged.artifacts.push(observed);
    }
    merged
}

/// Claude Code's `plugin validate --json BUNDLE` (the staged bundle, a controlled projection):
/// the skills, commands and agents it `provides`, or `None` when its `provides` is null: Claude
/// Code 2.1.328 lists no components when the bundle holds links it did not read (unchanged skill
/// directories are links into their package, which a `--plugin-dir` session follows and the
/// validator does not). A report with errors is a failure naming the first, never an empty
/// catalog.
pub fn claude_validate(stdout: &[u8]) -> Result<Option<Vec<Observed>>, ParseFailure> {
    let value = json(stdout, "`plugin validate --json` did not print JSON")?;
    if value["success"] != Value::Bool(true) {
        let first = value["manifest"]["errors"][0]["message"]
            .as_str()
            .unwrap_or("no message");
        return Err(ParseFailure::Malformed(format!(
            "`claude plugin validate` rejected the staged bundle: {}",
            excerpt(first)
        )));
    }
    if value["provides"].is_null() {
        return Ok(None);
    }
    let mut observed = Vec::new();
    for (key, category) in [
        ("skills", "skill"),
        ("commands", "command"),
        ("agents", "agent"),
    ] {
        let ids = value["provides"][key].as_array().ok_or_else(|| {
            ParseFailure::Malformed(format!(
                "the validation report has no `provides.{key}` list"
            ))
        })?;
        for id in ids {
            let id = id.as_str().ok_or_else(|| {
                ParseFailure::Malformed(format!("a `provides.{key}` entry is not a string"))
            })?;
            let (name, winner) = split_bundle(id);
            observed.push(Observed {
                category: category.to_owned(),
                name,
                native_id: id.to_owned(),
                winner: winner.to_owned(),
                scope: "controlled_projection".to_owned(),
            });
        }
    }
    Ok(Some(observed))
}

/// OpenCode's `debug config` JSON: the agents and commands of its `agent` and `command` objects;
/// one named in `staged` (`(category, name)`, the staged tree's) is the package's.
pub fn opencode_config(
    stdout: &[u8],
    version: &str,
    staged: &[(String, String)],
) -> Result<Vec<Observed>, ParseFailure> {
    let value = validated_json(
        stdout,
        version,
        OPENCODE_VALIDATED,
        "the resolved configuration is not JSON",
    )?;
    let mut observed = Vec::new();
    for (key, category) in [("agent", "agent"), ("command", "command")] {
        let entries = value[key].as_object().ok_or_else(|| {
            ParseFailure::Malformed(format!("the resolved configuration has no `{key}` object"))
        })?;
        for name in entries.keys() {
            let ours = staged.iter().any(|(c, n)| c == category && n == name);
            observed.push(Observed {
                category: category.to_owned(),
                name: name.clone(),
                native_id: name.clone(),
                winner: if ours { "package" } else { "other" }.to_owned(),
                scope: "controlled_projection".to_owned(),
            });
        }
    }
    Ok(observed)
}

/// OpenCode's `agent list`: the name of every agent it resolved. 1.18.33 prints each as a line
/// `NAME (MODE)` (`primary`, `subagent` or `all`) at the start of a line, followed by its
/// permission rules as indented JSON closed by `]` at the start of a line; anything else at the
/// start of a line, or no agent at all (the built-in ones are always listed), is malformed.
pub fn opencode_agent_list(stdout: &[u8]) -> Result<Vec<String>, ParseFailure> {
    let text = std::str::from_utf8(stdout)
        .map_err(|_| ParseFailure::Malformed("`agent list` is not UTF-8".to_owned()))?;
    let mut names = Vec::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with(' ') || line == "]" {
            continue;
        }
        let agent = line.rsplit_once(" (").and_then(|(name, mode)| {
            let mode = mode.strip_suffix(')')?;
            let known = matches!(mode, "primary" | "subagent" | "all");
            (known && !name.is_empty() && !name.contains(' ')).then(|| name.to_owned())
        });
        match agent {
            Some(name) => names.push(name),
            None => {
                return Err(ParseFailure::Malformed(format!(
                    "`agent list` printed a line that is not an agent: {}",
                    excerpt(line)
                )))
            }
        }
    }
    if names.is_empty() {
        return Err(ParseFailure::Malformed(
            "`agent list` listed no agent (not even the built-in ones)".to_owned(),
        ));
    }
    Ok(names)
}

fn excerpt(line: &str) -> String {
    line.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn codex_winners_come_from_the_table_of_skill_roots() {
        // As Codex 0.171.0 prints it in a checkout whose `.codex/skills` and `.agents/skills`
        // hold same-named copies: the checkout's roots come first and win.
        let block = "<skills_instructions>\n### Skill roots\n- `r0` = `/w/.codex/skills`\n- `r1` = `/h/skills`\n- `r2` = `/h/skills/.system`\n- `r3` = `/w/.agents/skills`\n### Available skills\n- imagegen: Images. (file: r2/imagegen/SKILL.md)\n- cmd1: A command. (file: r1/cmd1/SKILL.md)\n- sent: Workspace copy. (file: r3/sent/SKILL.md)\n- steady: Codex dir copy. (file: r0/steady/SKILL.md)\n</skills_instructions>";
        let printed =
            serde_json::to_vec(&serde_json::json!([{"content": [{"text": block}]}])).unwrap();
        let catalog = codex_prompt_input(
            &printed,
            CODEX_VALIDATED,
            Path::new("/h/skills"),
            "workspace_session",
        )
        .unwrap();
        let winner = |name: &str| {
            catalog
                .artifacts
                .iter()
                .find(|a| a.name == name)
                .map(|a| (a.winner.as_str(), a.scope.as_str()))
        };
        assert_eq!(winner("cmd1"), Some(("package", "workspace_session")));
        assert_eq!(winner("sent"), Some(("other", "workspace_session")));
        assert_eq!(winner("steady"), Some(("other", "workspace_session")));
        assert_eq!(winner("imagegen"), Some(("other", "workspace_session")));
        // A root the table lacks, or no table at all: malformed, never a guess.
        let unknown_root = serde_json::to_vec(
            &serde_json::json!([{"content": [{"text": block.replace("r3/sent", "r9/sent")}]}]),
        )
        .unwrap();
        assert!(
            codex_prompt_input(&unknown_root, CODEX_VALIDATED, Path::new("/h/skills"), "x")
                .is_err()
        );
        let no_table = serde_json::to_vec(&serde_json::json!([{"content": [{"text": "<skills_instructions>\n- s: S. (file: r0/s/SKILL.md)\n</skills_instructions>"}]}])).unwrap();
        assert!(
            codex_prompt_input(&no_table, CODEX_VALIDATED, Path::new("/h/skills"), "x").is_err()
        );
    }

    #[test]
    fn truncated_or_foreign_output_is_never_an_empty_catalog() {
        let init = format!(
            r#"{{"type":"system","subtype":"init","claude_code_version":"{CLAUDE_VALIDATED}","skills":["agentpack-bundle:s"],"slash_commands":["agentpack-bundle:s","c"],"agents":["a"]}}"#
        );
        let catalog = claude_init(init.as_bytes()).unwrap();
        assert_eq!(catalog.artifacts.len(), 3);
        assert_eq!(catalog.artifacts[0].name, "s");
        assert_eq!(catalog.artifacts[0].winner, "package");
        assert!(matches!(
            claude_init(&init.as_bytes()[..40]),
            Err(ParseFailure::Malformed(_))
        ));
        assert!(matches!(claude_init(b""), Err(ParseFailure::Malformed(_))));
        assert!(matches!(
            claude_init(init.replace(CLAUDE_VALIDATED, "9.9.9").as_bytes()),
            Err(ParseFailure::UnknownVersion(v)) if v == "9.9.9"
        ));
        assert!(matches!(
            codex_prompt_input(
                b"[]",
                CODEX_VALIDATED,
                Path::new("/h/skills"),
                "controlled_projection"
            ),
            Err(ParseFailure::Malformed(_))
        ));
        assert!(matches!(
            codex_prompt_input(
                b"[",
                "0.1.0",
                Path::new("/h/skills"),
                "controlled_projection"
            ),
            Err(ParseFailure::UnknownVersion(_))
        ));
        let dir = std::path::Path::new("/probe/opencode");
        let listed = br#"[{"name":"s","location":"/probe/opencode/skills/s/SKILL.md"},{"name":"b","location":"<built-in>"}]"#;
        let catalog = opencode_skills(listed, OPENCODE_VALIDATED, dir).unwrap();
        assert_eq!(catalog.artifacts[0].winner, "package");
        assert_eq!(catalog.artifacts[1].winner, "other");
        assert!(matches!(
            opencode_skills(&listed[..30], OPENCODE_VALIDATED, dir),
            Err(ParseFailure::Malformed(_))
        ));
        assert!(matches!(
            opencode_skills(br#"[{"name":"s"}]"#, OPENCODE_VALIDATED, dir),
            Err(ParseFailure::Malformed(_))
        ));
        assert!(matches!(
            opencode_skills(listed, "1.18.34", dir),
            Err(ParseFailure::UnknownVersion(_))
        ));
        assert_eq!(version_of("codex-cli 0.171.0").as_deref(), Some("0.171.0"));
        assert_eq!(
            version_of("2.1.328 (Claude Code)").as_deref(),
            Some("2.1.328")
        );
        assert_eq!(version_of("hello"), None);
    }

    #[test]
    fn skill_samples_keep_every_winner_and_a_varying_one_is_not_the_packages() {
        let dir = std::path::Path::new("/probe/opencode");
        let ours = br#"[{"name":"s","location":"/probe/opencode/skills/s/SKILL.md"},{"name":"t","location":"/probe/opencode/skills/t/SKILL.md"}]"#;
        let theirs = br#"[{"name":"s","location":"/elsewhere/s/SKILL.md"},{"name":"t","location":"/probe/opencode/skills/t/SKILL.md"}]"#;
        let sample = |bytes: &[u8]| opencode_skills(bytes, OPENCODE_VALIDATED, dir).unwrap();
        let merged = merge_skill_samples(&[sample(ours), sample(theirs), sample(ours)]);
        let s = merged.artifacts.iter().find(|a| a.name == "s").unwrap();
        assert_eq!(s.winner, "varied");
        let t = merged.artifacts.iter().find(|a| a.name == "t").unwrap();
        assert_eq!(t.winner, "package");
        let seen = merged.winners_seen.iter().find(|w| w.name == "s").unwrap();
        assert_eq!(
            seen.winners,
            vec![("package".to_owned(), 2), ("other".to_owned(), 1)]
        );
        assert_eq!((seen.listed_in, seen.samples), (3, 3));
        // Listed in only some samples: not reliably the package's.
        let one = br#"[{"name":"t","location":"/probe/opencode/skills/t/SKILL.md"}]"#;
        let merged = merge_skill_samples(&[sample(ours), sample(one)]);
        let s = merged.artifacts.iter().find(|a| a.name == "s").unwrap();
        assert_eq!(s.winner, "varied");
    }

    #[test]
    fn claude_validate_lists_what_the_bundle_provides_and_rejects_errors() {
        let report = br#"{"success":true,"provides":{"skills":["agentpack-bundle:s"],"commands":["agentpack-bundle:c"],"agents":[]}}"#;
        let observed = claude_validate(report).unwrap().unwrap();
        assert_eq!(observed.len(), 2);
        assert_eq!(
            (observed[1].category.as_str(), observed[1].name.as_str()),
            ("command", "c")
        );
        assert_eq!(observed[0].winner, "package");
        assert_eq!(observed[0].scope, "controlled_projection");
        let rejected = br#"{"success":false,"manifest":{"errors":[{"message":"bad name"}]}}"#;
        assert!(
            matches!(claude_validate(rejected), Err(ParseFailure::Malformed(m)) if m.contains("bad name"))
        );
        assert!(claude_validate(&report[..30]).is_err());
        assert!(claude_validate(br#"{"success":true,"provides":{"skills":[]}}"#).is_err());
        // Links the validator did not read: it lists nothing, which is not an empty bundle.
        assert_eq!(
            claude_validate(br#"{"success":true,"provides":null}"#).unwrap(),
            None
        );
    }

    #[test]
    fn opencode_config_and_agent_never_guess() {
        let staged = vec![("agent".to_owned(), "helper".to_owned())];
        let config = br#"{"agent":{"helper":{"name":"helper"},"mine":{}},"command":{"c":{}}}"#;
        let observed = opencode_config(config, OPENCODE_VALIDATED, &staged).unwrap();
        let winner = |name: &str| {
            observed
                .iter()
                .find(|o| o.name == name)
                .map(|o| (o.category.as_str(), o.winner.as_str()))
        };
        assert_eq!(winner("helper"), Some(("agent", "package")));
        assert_eq!(winner("mine"), Some(("agent", "other")));
        assert_eq!(winner("c"), Some(("command", "other")));
        assert!(matches!(
            opencode_config(br#"{"agent":{}}"#, OPENCODE_VALIDATED, &staged),
            Err(ParseFailure::Malformed(_))
        ));
        assert!(matches!(
            opencode_config(&config[..20], OPENCODE_VALIDATED, &staged),
            Err(ParseFailure::Malformed(_))
        ));
        assert!(matches!(
            opencode_config(config, "1.0.0", &staged),
            Err(ParseFailure::UnknownVersion(_))
        ));
        let listed =
            b"build (primary)\n  [\n  {\n    \"permission\": \"*\"\n  }\n]\nhelper (all)\n  [\n]\n";
        assert_eq!(
            opencode_agent_list(listed),
            Ok(vec!["build".to_owned(), "helper".to_owned()])
        );
        assert!(opencode_agent_list(b"").is_err());
        assert!(opencode_agent_list(b"garbage\n").is_err());
        assert!(opencode_agent_list(b"helper (unknown-mode)\n").is_err());
    }
}
