//! Parsing and validation of `contract.json` bytes: everything is checked before anything is
//! evaluated, and each rejection names its JSON path. Pure.

use serde_json::Value;

use super::model::{
    Allowance, Contract, Evidence, Predicate, Requirement, UnknownRequired, REGISTRY, SCOPES,
    TARGETS,
};

/// What validation rejected, at a JSON path.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct ContractError {
    pub path: String,
    pub problem: String,
}

fn reject(path: impl Into<String>, problem: impl Into<String>) -> ContractError {
    ContractError {
        path: path.into(),
        problem: problem.into(),
    }
}

/// `{path}.{field}` names none of `known`: "unknown {what} (known: ...)".
fn unknown<'a>(
    path: &str,
    field: &str,
    what: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> ContractError {
    let known: Vec<&str> = known.into_iter().collect();
    reject(
        format!("{path}.{field}"),
        format!("unknown {what} (known: {})", known.join(", ")),
    )
}

fn only_keys(
    object: &serde_json::Map<String, Value>,
    path: &str,
    allowed: &[&str],
) -> Result<(), ContractError> {
    for key in object.keys() {
        if !allowed.contains(&key.as_str()) {
            return Err(unknown(path, key, "key", allowed.iter().copied()));
        }
    }
    Ok(())
}

fn string<'v>(
    object: &'v serde_json::Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<Option<&'v str>, ContractError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(reject(format!("{path}.{key}"), "must be a string")),
    }
}

/// The array at `key` of `object` (at `path`; empty when it is absent).
fn array<'v>(
    object: &'v serde_json::Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<&'v [Value], ContractError> {
    match object.get(key) {
        None => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(reject(format!("{path}.{key}"), "must be an array")),
    }
}

/// Parses and validates `bytes`.
pub fn parse(bytes: &[u8]) -> Result<Contract, ContractError> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|err| reject("$", format!("not JSON: {err}")))?;
    let Value::Object(top) = value else {
        return Err(reject("$", "must be an object"));
    };
    only_keys(
        &top,
        "$",
        &[
            "schema_version",
            "description",
            "unknown_required",
            "requirements",
            "allowances",
            "inheritance",
        ],
    )?;
    match top.get("schema_version") {
        Some(Value::Number(n)) if n.as_u64() == Some(1) => {}
        Some(_) => {
            return Err(reject(
                "$.schema_version",
                "unsupported schema version (this agentpack reads 1)",
            ));
        }
        None => {
            return Err(reject(
                "$.schema_version",
                "missing (write \"schema_version\": 1)",
            ));
        }
    }
    let unknown_required = match string(&top, "$", "unknown_required")? {
        None | Some("fail") => UnknownRequired::Fail,
        Some("warn") => UnknownRequired::Warn,
        Some("allow") => UnknownRequired::Allow,
        Some(other) => {
            return Err(reject(
                "$.unknown_required",
                format!("`{other}` is not fail, warn or allow"),
            ));
        }
    };
    let mut requirements = Vec::new();
    for (index, item) in array(&top, "$", "requirements")?.iter().enumerate() {
        let path = format!("$.requirements[{index}]");
        let requirement = parse_requirement(item, &path)?;
        if requirements
            .iter()
            .any(|r: &Requirement| r.id == requirement.id)
        {
            return Err(reject(
                format!("{path}.id"),
                format!("duplicate requirement id `{}`", requirement.id),
            ));
        }
        requirements.push(requirement);
    }
    let mut allowances = Vec::new();
    for (index, item) in array(&top, "$", "allowances")?.iter().enumerate() {
        let path = format!("$.allowances[{index}]");
        let Value::Object(object) = item else {
            return Err(reject(path, "must be an object"));
        };
        only_keys(object, &path, &["requirement", "rationale"])?;
        let requirement = string(object, &path, "requirement")?.ok_or_else(|| {
            reject(
                format!("{path}.requirement"),
                "missing: name the requirement id it allows",
            )
        })?;
        if !requirements.iter().any(|r| r.id == requirement) {
            return Err(reject(
                format!("{path}.requirement"),
                format!("no requirement has the id `{requirement}`"),
            ));
        }
        let rationale = string(object, &path, "rationale")?
            .filter(|text| !text.trim().is_empty())
            .ok_or_else(|| {
                reject(
                    format!("{path}.rationale"),
                    "missing: say why the violation is allowed",
                )
            })?;
        allowances.push(Allowance {
            requirement: requirement.to_owned(),
            rationale: rationale.to_owned(),
        });
    }
    let inheritance_allowed = parse_inheritance(top.get("inheritance"))?;
    Ok(Contract {
        unknown_required,
        requirements,
        allowances,
        inheritance_allowed,
    })
}

/// The inherited places of `scope` some agent reads, as shown (`~/.claude/skills`, `.cursor/`).
fn known_inherited_places(scope: &str) -> Vec<String> {
    let mut known: Vec<String> = agentpack_harness::Agent::ALL
        .into_iter()
        .flat_map(|agent| {
            super::places::places_for(
                agent,
                std::path::Path::new("/workspace"),
                Some(std::path::Path::new("/home")),
                Some(std::path::Path::new("/config")),
            )
        })
        .filter(|place| place.scope == scope)
        .map(|place| place.shown)
        .collect();
    known.sort();
    known.dedup();
    known
}

/// `inheritance: {"allow": ["user:~/.claude/skills", "workspace:CLAUDE.md"]}`.
fn parse_inheritance(value: Option<&Value>) -> Result<Vec<String>, ContractError> {
    let object = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(object)) => object,
        Some(_) => return Err(reject("$.inheritance", "must be an object")),
    };
    only_keys(object, "$.inheritance", &["allow"])?;
    let items = array(object, "$.inheritance", "allow")?;
    let mut allowed = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let path = format!("$.inheritance.allow[{index}]");
        let Value::String(entry) = item else {
            return Err(reject(
                path,
                "must be a string such as \"user:~/.claude/skills\"",
            ));
        };
        let Some((scope, place)) = entry.split_once(':') else {
            return Err(reject(
                path,
                format!("`{entry}` has no scope: write `user:<place>` or `workspace:<place>`"),
            ));
        };
        if !matches!(scope, "user" | "workspace") {
            return Err(reject(
                path,
                format!("`{scope}` is not a scope of inherited configuration (user, workspace)"),
            ));
        }
        if place.trim_end_matches('/').is_empty() {
            return Err(reject(path, "names no place after the scope"));
        }
        let known = known_inherited_places(scope);
        let probe = Contract {
            unknown_required: UnknownRequired::Fail,
            requirements: Vec::new(),
            allowances: Vec::new(),
            inheritance_allowed: vec![entry.clone()],
        };
        if !known
            .iter()
            .any(|shown| probe.declares_inherited(scope, shown))
        {
            return Err(reject(
                path,
                format!(
                    "`{place}` is not an inherited {scope} place any agent reads (known: {})",
                    known.join(", ")
                ),
            ));
        }
        allowed.push(entry.clone());
    }
    Ok(allowed)
}

fn parse_requirement(item: &Value, path: &str) -> Result<Requirement, ContractError> {
    let Value::Object(object) = item else {
        return Err(reject(path, "must be an object"));
    };
    only_keys(
        object,
        path,
        &[
            "id",
            "description",
            "target",
            "selector",
            "predicate",
            "expected",
            "minimum_evidence",
            "severity",
        ],
    )?;
    let id = string(object, path, "id")?
        .filter(|id| !id.is_empty())
        .ok_or_else(|| reject(format!("{path}.id"), "missing"))?
        .to_owned();
    let target = string(object, path, "target")?.ok_or_else(|| {
        reject(
            format!("{path}.target"),
            format!("missing (one of {})", TARGETS.join(", ")),
        )
    })?;
    if !TARGETS.contains(&target) {
        let what = format!("target `{target}`");
        return Err(unknown(path, "target", &what, TARGETS.iter().copied()));
    }
    let predicate_text = string(object, path, "predicate")?
        .ok_or_else(|| reject(format!("{path}.predicate"), "missing"))?;
    let predicate = Predicate::parse(predicate_text).ok_or_else(|| {
        reject(
            format!("{path}.predicate"),
            format!("unknown predicate `{predicate_text}` (known: present, absent, equals, source_allowed, native_property, coverage_complete, no_workspace_write)"),
        )
    })?;
    let selector_path = format!("{path}.selector");
    let empty = serde_json::Map::new();
    let selector = match object.get("selector") {
        Some(Value::Object(selector)) => selector,
        None if predicate == Predicate::NoWorkspaceWrite => &empty,
        None => return Err(reject(selector_path, "missing")),
        Some(_) => return Err(reject(selector_path, "must be an object")),
    };
    only_keys(
        selector,
        &selector_path,
        &["category", "name", "property", "scope"],
    )?;
    let default_category = (predicate == Predicate::NoWorkspaceWrite).then_some("planned_write");
    let category = string(selector, &selector_path, "category")?
        .or(default_category)
        .ok_or_else(|| reject(format!("{selector_path}.category"), "missing"))?;
    let Some((_, properties)) = REGISTRY.iter().find(|(c, _)| *c == category) else {
        let what = format!("category `{category}`");
        let known = REGISTRY.iter().map(|(c, _)| *c);
        return Err(unknown(&selector_path, "category", &what, known));
    };
    let default_property = match category {
        "planned_write" => "workspace_configuration",
        _ if predicate == Predicate::CoverageComplete => "catalog_complete",
        _ => "presence",
    };
    let property = string(selector, &selector_path, "property")?.unwrap_or(default_property);
    if !properties.iter().any(|(p, _)| *p == property) {
        let what = format!("property `{property}` of category {category}");
        let known = properties.iter().map(|(p, _)| *p);
        return Err(unknown(&selector_path, "property", &what, known));
    }
    if predicate == Predicate::NoWorkspaceWrite && (category != "planned_write") {
        return Err(reject(
            format!("{selector_path}.category"),
            "no_workspace_write checks the planned_write category",
        ));
    }
    let scope = string(selector, &selector_path, "scope")?;
    if let Some(scope) = scope {
        if !SCOPES.contains(&scope) {
            let what = format!("scope `{scope}`");
            return Err(unknown(
                &selector_path,
                "scope",
                &what,
                SCOPES.iter().copied(),
            ));
        }
    }
    let name = string(selector, &selector_path, "name")?;
    let needs_name =
        !matches!(category, "planned_write") && predicate != Predicate::CoverageComplete;
    if needs_name && name.is_none() {
        return Err(reject(
            format!("{selector_path}.name"),
            "missing: an exact storage name or full artifact id",
        ));
    }
    if name.is_some_and(|name| name.contains(['*', '?', '['])) {
        return Err(reject(
            format!("{selector_path}.name"),
            "globs are unsupported: use an exact name",
        ));
    }
    let expected = object.get("expected").cloned();
    match predicate {
        Predicate::Equals | Predicate::NativeProperty if expected.is_none() => {
            return Err(reject(
                format!("{path}.expected"),
                "missing: the value to compare with",
            ));
        }
        Predicate::SourceAllowed => {
            let valid = match &expected {
                Some(Value::String(_)) => true,
                Some(Value::Array(items)) => items.iter().all(Value::is_string),
                _ => false,
            };
            if !valid {
                return Err(reject(
                    format!("{path}.expected"),
                    "must be a string or a list of strings",
                ));
            }
            if !matches!(property, "winner" | "source") {
                return Err(reject(
                    format!("{selector_path}.property"),
                    "source_allowed compares `winner` or `source`",
                ));
            }
        }
        _ => {}
    }
    let minimum_evidence = match string(object, path, "minimum_evidence")? {
        None => Evidence::Generated,
        Some(text) => Evidence::parse(text).ok_or_else(|| {
            reject(
                format!("{path}.minimum_evidence"),
                format!("unknown evidence level `{text}` (known: declared, generated, observed)"),
            )
        })?,
    };
    let severity = string(object, path, "severity")?.unwrap_or("error");
    let blocking = match severity {
        "error" | "violation" => true,
        "warning" | "info" => false,
        other => {
            return Err(reject(
                format!("{path}.severity"),
                format!("unknown severity `{other}` (known: info, warning, error, violation)"),
            ));
        }
    };
    Ok(Requirement {
        id,
        target: target.to_owned(),
        category: category.to_owned(),
        name: name.map(str::to_owned),
        property: property.to_owned(),
        scope: scope.map(str::to_owned),
        predicate,
        expected,
        minimum_evidence,
        blocking,
        severity: severity.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn validation_names_the_json_path() {
        let base = r#"{"schema_version":1,"requirements":[{"id":"a","target":"claude","selector":{"category":"skill","name":"x"},"predicate":"present"}]}"#;
        assert!(parse(base.as_bytes()).is_ok());
        assert!(err(&base.replace("\"skill\"", "\"skil\""))
            .starts_with("$.requirements[0].selector.category: unknown category"));
        assert!(err(&base.replace("\"name\"", "\"nmae\""))
            .starts_with("$.requirements[0].selector.nmae: unknown key"));
        assert!(err(&base.replace("\"claude\"", "\"vim\"")).starts_with("$.requirements[0].target"));
        assert!(
            err(&base.replace("\"present\"", "\"present\",\"minimum_evidence\":\"seen\""))
                .starts_with("$.requirements[0].minimum_evidence")
        );
        assert!(
            err(&base.replace("\"x\"}", "\"x\",\"property\":\"colour\"}"))
                .starts_with("$.requirements[0].selector.property")
        );
        let dup = base.replace(
            "}]}",
            "},{\"id\":\"a\",\"target\":\"claude\",\"predicate\":\"no_workspace_write\"}]}",
        );
        assert!(err(&dup).starts_with("$.requirements[1].id: duplicate"));
        let allow = base.replace(
            "}]}",
            "}],\"allowances\":[{\"requirement\":\"b\",\"rationale\":\"r\"}]}",
        );
        assert!(err(&allow).starts_with("$.allowances[0].requirement"));
        let allow = base.replace("}]}", "}],\"allowances\":[{\"requirement\":\"a\"}]}");
        assert!(err(&allow).starts_with("$.allowances[0].rationale"));
    }
}
