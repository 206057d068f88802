//! Evaluation of one requirement against what the caller knows (`lookup`) and what a current
//! probe receipt observed (`observed`). Never promotes evidence; pure.

use serde::Serialize;
use serde_json::Value;

use super::model::{Contract, Evidence, Predicate, Requirement, UnknownRequired};

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
        )
        || super::model::observed_only(&requirement.category, &requirement.property);
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
    // Coverage is complete or unknown, never violated: incomplete or unobserved coverage stays
    // unknown. Native absence needs a complete catalog for the category and scope, backed by an
    // observed `catalog_complete` (a receipt's coverage label alone is insufficient).
    if requirement.predicate == Predicate::CoverageComplete && value != Value::Bool(true) {
        unknown(
            &mut outcome,
            format!(
                "{} coverage of the {} scope is {value}, not complete: coverage stays unknown until a probe observes a complete catalog",
                requirement.category,
                requirement.scope.as_deref().unwrap_or("native_catalog")
            ),
        );
        return outcome;
    }
    if needs_observation && requirement.predicate == Predicate::Absent && !truthy(&value) {
        let catalog = Requirement {
            property: "catalog_complete".to_owned(),
            name: None,
            ..requirement.clone()
        };
        if observed(&catalog) != Known::Value(Value::Bool(true), Evidence::Observed) {
            unknown(
                &mut outcome,
                format!(
                    "{} `{}` was not observed, and absence needs a complete {} catalog of the {} scope (an observed catalog_complete), which the receipt does not have",
                    requirement.category,
                    requirement.name.as_deref().unwrap_or_default(),
                    requirement.category,
                    requirement.scope.as_deref().unwrap_or("native_catalog")
                ),
            );
            return outcome;
        }
    }
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

    fn contract(requirement: &str) -> Contract {
        let text = format!(r#"{{"schema_version": 1, "requirements": [{requirement}]}}"#);
        super::super::parse(text.as_bytes()).unwrap()
    }

    fn run(contract: &Contract, observed: &dyn Fn(&Requirement) -> Known) -> Outcome {
        let plan = |_: &Requirement| Known::Value(Value::Bool(false), Evidence::Generated);
        evaluate(
            contract,
            &contract.requirements[0],
            "claude",
            &plan,
            observed,
        )
    }

    #[test]
    fn coverage_is_complete_or_unknown_never_violated() {
        let c = contract(
            r#"{"id": "c", "target": "claude", "selector": {"category": "skill", "scope": "workspace_session"}, "predicate": "coverage_complete", "minimum_evidence": "observed"}"#,
        );
        assert_eq!(c.requirements[0].property, "catalog_complete");
        let partial = |_: &Requirement| Known::Value(Value::Bool(false), Evidence::Observed);
        let outcome = run(&c, &partial);
        assert_eq!(outcome.status, Status::Unknown);
        assert!(outcome.blocking);
        let complete = |_: &Requirement| Known::Value(Value::Bool(true), Evidence::Observed);
        assert_eq!(run(&c, &complete).status, Status::Satisfied);
        // A generated `true` is never promoted to observed.
        let generated = |_: &Requirement| Known::Value(Value::Bool(true), Evidence::Generated);
        assert_eq!(run(&c, &generated).status, Status::Unknown);
    }

    #[test]
    fn observed_absence_needs_an_observed_complete_catalog() {
        let c = contract(
            r#"{"id": "a", "target": "claude", "selector": {"category": "skill", "name": "x", "scope": "workspace_session"}, "predicate": "absent", "minimum_evidence": "observed"}"#,
        );
        // Not listed, and the catalog is not known to be complete: unknown.
        let partial = |r: &Requirement| match r.property.as_str() {
            "catalog_complete" => Known::Unknown("partial".into()),
            _ => Known::Value(Value::Bool(false), Evidence::Observed),
        };
        let outcome = run(&c, &partial);
        assert_eq!(outcome.status, Status::Unknown, "{}", outcome.message);
        assert!(outcome.message.contains("complete"));
        // A complete catalog that lacks it: satisfied.
        let complete = |r: &Requirement| match r.property.as_str() {
            "catalog_complete" => Known::Value(Value::Bool(true), Evidence::Observed),
            _ => Known::Value(Value::Bool(false), Evidence::Observed),
        };
        assert_eq!(run(&c, &complete).status, Status::Satisfied);
        // Listed: violated, whatever the coverage.
        let listed = |_: &Requirement| Known::Value(Value::Bool(true), Evidence::Observed);
        assert_eq!(run(&c, &listed).status, Status::Violated);
    }

    #[test]
    fn a_property_only_a_receipt_knows_needs_one_whatever_the_minimum() {
        let c = contract(
            r#"{"id": "e", "target": "claude", "selector": {"category": "skill", "name": "x", "property": "catalog_complete"}, "predicate": "equals", "expected": true}"#,
        );
        let none = |_: &Requirement| Known::Unknown("no receipt".into());
        let outcome = run(&c, &none);
        assert_eq!(outcome.status, Status::Unknown);
        assert!(outcome.needs_receipt);
    }
}
