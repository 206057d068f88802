//! `contract.json`: requirements over an agent's effective plan, with evidence grades.
//!
//! Parsing validates everything before anything is evaluated, and names the JSON path of what it
//! rejects (unknown keys, categories, properties, targets, predicates, evidence levels, scopes,
//! duplicate ids, allowances without a known requirement or a rationale). Evaluation never promotes
//! evidence: a property known from the lock (`declared`) never satisfies a `generated` requirement,
//! and only a current probe receipt answers `observed` (through the caller's `observed` lookup):
//! without one an observed requirement stays unknown. Pure: no I/O but what the caller passes.

use serde::Serialize;
use serde_json::Value;

/// Evidence grades, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// From the lock.
    Declared,
    /// From the plan: what staging would write.
    Generated,
    /// From a native probe receipt.
    Observed,
}

impl Evidence {
    fn parse(text: &str) -> Option<Self> {
        match text {
            "declared" => Some(Self::Declared),
            "generated" => Some(Self::Generated),
            "observed" => Some(Self::Observed),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Declared => "declared",
            Self::Generated => "generated",
            Self::Observed => "observed",
        }
    }
}

/// What to do with a required observation that is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownRequired {
    Fail,
    Warn,
    Allow,
}

/// The predicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Predicate {
    Present,
    Absent,
    Equals,
    SourceAllowed,
    NativeProperty,
    CoverageComplete,
    NoWorkspaceWrite,
}

impl Predicate {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "present" => Self::Present,
            "absent" => Self::Absent,
            "equals" => Self::Equals,
            "source_allowed" => Self::SourceAllowed,
            "native_property" => Self::NativeProperty,
            "coverage_complete" => Self::CoverageComplete,
            "no_workspace_write" => Self::NoWorkspaceWrite,
            _ => return None,
        })
    }
}

/// One category's properties, each with the grade the plan knows it at.
pub type CategoryProperties = (&'static str, &'static [(&'static str, Option<Evidence>)]);

/// The property registry: each category's properties and the grade the plan knows them at
/// (`None`: only a receipt can tell).
pub const REGISTRY: &[CategoryProperties] = &[
    (
        "skill",
        &[
            ("presence", Some(Evidence::Generated)),
            ("rendered_digest", Some(Evidence::Generated)),
            ("winner", Some(Evidence::Generated)),
            ("source", Some(Evidence::Generated)),
            ("source_digest", Some(Evidence::Declared)),
            ("catalog_complete", None),
        ],
    ),
    (
        "command",
        &[
            ("presence", Some(Evidence::Generated)),
            ("rendered_digest", Some(Evidence::Generated)),
            ("winner", Some(Evidence::Generated)),
            ("source", Some(Evidence::Generated)),
            ("source_digest", Some(Evidence::Declared)),
            ("catalog_complete", None),
        ],
    ),
    (
        "agent",
        &[
            ("presence", Some(Evidence::Generated)),
            ("rendered_digest", Some(Evidence::Generated)),
            ("winner", Some(Evidence::Generated)),
            ("source", Some(Evidence::Generated)),
            ("source_digest", Some(Evidence::Declared)),
            ("catalog_complete", None),
        ],
    ),
    (
        "mcp_server",
        &[
            ("presence", Some(Evidence::Generated)),
            ("pin_status", Some(Evidence::Declared)),
        ],
    ),
    (
        "package",
        &[
            ("presence", Some(Evidence::Declared)),
            ("commit", Some(Evidence::Declared)),
            ("content_hash", Some(Evidence::Declared)),
        ],
    ),
    (
        "planned_write",
        &[("workspace_configuration", Some(Evidence::Generated))],
    ),
];

/// Observation scopes a receipt can carry.
pub const SCOPES: &[&str] = &[
    "native_catalog",
    "controlled_projection",
    "workspace_session",
];

/// Targets a requirement may name.
pub const TARGETS: &[&str] = &["claude", "cursor", "opencode", "codex", "grok", "agy"];

/// One requirement, validated.
#[derive(Debug, Clone)]
pub struct Requirement {
    pub id: String,
    pub target: String,
    pub category: String,
    pub name: Option<String>,
    pub property: String,
    pub scope: Option<String>,
    pub predicate: Predicate,
    pub expected: Option<Value>,
    pub minimum_evidence: Evidence,
    /// `warning` and `info` keep a mismatch nonblocking.
    pub blocking: bool,
    pub severity: String,
}

/// One allowance.
#[derive(Debug, Clone)]
pub struct Allowance {
    pub requirement: String,
    pub rationale: String,
}

/// A validated contract.
#[derive(Debug, Clone)]
pub struct Contract {
    pub unknown_required: UnknownRequired,
    pub requirements: Vec<Requirement>,
    pub allowances: Vec<Allowance>,
    /// `inheritance.allow`: the inherited places declared as intended, as `<scope>:<place>`
    /// (`user:~/.claude/skills`, `workspace:CLAUDE.md`); a declared place and everything under
    /// it is reported as info, never a violation.
    pub inheritance_allowed: Vec<String>,
}

impl Contract {
    /// Whether the inherited place `shown` (as `inherit` shows it) of `scope` is declared.
    pub fn declares_inherited(&self, scope: &str, shown: &str) -> bool {
        let shown = shown.trim_end_matches('/');
        self.inheritance_allowed.iter().any(|entry| {
            entry
                .split_once(':')
                .is_some_and(|(declared_scope, place)| {
                    let place = place.trim_end_matches('/');
                    declared_scope == scope
                        && (shown == place
                            || shown
                                .strip_prefix(place)
                                .is_some_and(|rest| rest.starts_with('/')))
                })
        })
    }
}

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

fn only_keys(
    object: &serde_json::Map<String, Value>,
    path: &str,
    allowed: &[&str],
) -> Result<(), ContractError> {
    for key in object.keys() {
        if !allowed.contains(&key.as_str()) {
            return Err(reject(
                format!("{path}.{key}"),
                format!("unknown key (known: {})", allowed.join(", ")),
            ));
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
            ))
        }
        None => {
            return Err(reject(
                "$.schema_version",
                "missing (write \"schema_version\": 1)",
            ))
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
            ))
        }
    };
    let mut requirements = Vec::new();
    match top.get("requirements") {
        None => {}
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
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
        }
        Some(_) => return Err(reject("$.requirements", "must be an array")),
    }
    let mut allowances = Vec::new();
    match top.get("allowances") {
        None => {}
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
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
        }
        Some(_) => return Err(reject("$.allowances", "must be an array")),
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
            super::inherit::places_for(
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
    let items = match object.get("allow") {
        None => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(reject("$.inheritance.allow", "must be an array")),
    };
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
        return Err(reject(
            format!("{path}.target"),
            format!("unknown target `{target}` (known: {})", TARGETS.join(", ")),
        ));
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
        let known: Vec<&str> = REGISTRY.iter().map(|(c, _)| *c).collect();
        return Err(reject(
            format!("{selector_path}.category"),
            format!(
                "unknown category `{category}` (known: {})",
                known.join(", ")
            ),
        ));
    };
    let default_property = match category {
        "planned_write" => "workspace_configuration",
        _ if predicate == Predicate::CoverageComplete => "catalog_complete",
        _ => "presence",
    };
    let property = string(selector, &selector_path, "property")?.unwrap_or(default_property);
    if !properties.iter().any(|(p, _)| *p == property) {
        let known: Vec<&str> = properties.iter().map(|(p, _)| *p).collect();
        return Err(reject(
            format!("{selector_path}.property"),
            format!(
                "unknown property `{property}` of category {category} (known: {})",
                known.join(", ")
            ),
        ));
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
            return Err(reject(
                format!("{selector_path}.scope"),
                format!("unknown scope `{scope}` (known: {})", SCOPES.join(", ")),
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
            ))
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

/// What the plan knows of one selected property.
#[derive(Debug, Clone, PartialEq)]
pub enum Known {
    /// The value, at a grade.
    Value(Value, Evidence),
    /// Not known (why).
    Unknown(String),
}

/// The outcome of one requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Satisfied,
    Violated,
    Allowed,
    Unknown,
    NotApplicable,
}

/// One requirement's result, as the report shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub id: String,
    pub target: String,
    pub status: Status,
    /// The grade of the evidence used, when there was any.
    pub evidence: Option<Evidence>,
    pub minimum_evidence: Evidence,
    pub severity: String,
    /// Whether this outcome keeps the environment from being ready.
    pub blocking: bool,
    /// Whether the evidence needed is an observation (a probe receipt).
    pub needs_receipt: bool,
    /// The selected property's value, when it is known (at the grade `evidence` says).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    pub message: String,
}

/// Evaluates `requirement` for `agent`, with `lookup` answering what the plan knows and
/// `observed` what a current probe receipt observed (`Known::Unknown` when there is none).
pub fn evaluate(
    contract: &Contract,
    requirement: &Requirement,
    agent: &str,
    lookup: &dyn Fn(&Requirement) -> Known,
    observed: &dyn Fn(&Requirement) -> Known,
) -> Outcome {
    let mut outcome = Outcome {
        id: requirement.id.clone(),
        target: requirement.target.clone(),
        status: Status::NotApplicable,
        evidence: None,
        minimum_evidence: requirement.minimum_evidence,
        severity: requirement.severity.clone(),
        blocking: false,
        needs_receipt: false,
        value: None,
        message: String::new(),
    };
    if requirement.target != agent {
        outcome.message = format!("applies to {}, not {agent}", requirement.target);
        return outcome;
    }
    let needs_observation = requirement.minimum_evidence == Evidence::Observed
        || requirement.scope.is_some()
        || matches!(
            requirement.predicate,
            Predicate::NativeProperty | Predicate::CoverageComplete
        );
    let unknown = |outcome: &mut Outcome, why: String| {
        outcome.status = Status::Unknown;
        outcome.blocking = contract.unknown_required == UnknownRequired::Fail;
        outcome.message = why;
    };
    let known = if needs_observation {
        observed(requirement)
    } else {
        lookup(requirement)
    };
    let (value, grade) = match known {
        Known::Value(value, grade) => (value, grade),
        Known::Unknown(why) => {
            outcome.needs_receipt = needs_observation;
            unknown(&mut outcome, why);
            return outcome;
        }
    };
    outcome.evidence = Some(grade);
    outcome.value = Some(value.clone());
    if grade < requirement.minimum_evidence {
        unknown(
            &mut outcome,
            format!(
                "{}.{} is known only as {} evidence, and the requirement needs {}",
                requirement.category,
                requirement.property,
                grade.as_str(),
                requirement.minimum_evidence.as_str()
            ),
        );
        return outcome;
    }
    let truthy = |value: &Value| match value {
        Value::Bool(b) => *b,
        Value::Array(items) => !items.is_empty(),
        Value::Null => false,
        _ => true,
    };
    let (satisfied, said) = match requirement.predicate {
        Predicate::Present => (
            truthy(&value),
            format!("{} is {value}", requirement.property),
        ),
        Predicate::Absent | Predicate::NoWorkspaceWrite => (
            !truthy(&value),
            format!("{} is {value}", requirement.property),
        ),
        Predicate::Equals => {
            let expected = requirement.expected.clone().unwrap_or(Value::Null);
            (
                value == expected,
                format!("{} is {value}, expected {expected}", requirement.property),
            )
        }
        Predicate::SourceAllowed => {
            let allowed: Vec<&str> = match &requirement.expected {
                Some(Value::String(one)) => vec![one.as_str()],
                Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            let ok = value.as_str().is_some_and(|v| allowed.contains(&v));
            (
                ok,
                format!("{} is {value}, allowed {allowed:?}", requirement.property),
            )
        }
        Predicate::NativeProperty => {
            let expected = requirement.expected.clone().unwrap_or(Value::Null);
            (
                value == expected,
                format!(
                    "observed {} is {value}, expected {expected}",
                    requirement.property
                ),
            )
        }
        Predicate::CoverageComplete => (
            truthy(&value),
            format!("{} is {value}", requirement.property),
        ),
    };
    if satisfied {
        outcome.status = Status::Satisfied;
        outcome.message = said;
        return outcome;
    }
    if let Some(allowance) = contract
        .allowances
        .iter()
        .find(|a| a.requirement == requirement.id)
    {
        outcome.status = Status::Allowed;
        outcome.message = format!("{said}; allowed: {}", allowance.rationale);
        return outcome;
    }
    outcome.status = Status::Violated;
    outcome.blocking = requirement.blocking;
    outcome.message = said;
    outcome
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
