//! The validated contract: requirements, allowances, declared inheritance, evidence grades and
//! the registry of the properties each category has. Data only.

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
    pub(super) fn parse(text: &str) -> Option<Self> {
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
    pub(super) fn parse(text: &str) -> Option<Self> {
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

/// The properties of a staged artifact (skills, commands, agents alike).
const ARTIFACT_PROPERTIES: &[(&str, Option<Evidence>)] = &[
    ("presence", Some(Evidence::Generated)),
    ("rendered_digest", Some(Evidence::Generated)),
    ("winner", Some(Evidence::Generated)),
    ("source", Some(Evidence::Generated)),
    ("source_digest", Some(Evidence::Declared)),
    ("catalog_complete", None),
];

/// The properties of a rule: staged as a rule only for the agents with first-class rules (Cursor,
/// Antigravity), as a skill elsewhere; its source is known from the package trees, not the plan.
const RULE_PROPERTIES: &[(&str, Option<Evidence>)] = &[
    ("presence", Some(Evidence::Generated)),
    ("rendered_digest", Some(Evidence::Generated)),
    ("source", Some(Evidence::Declared)),
    ("source_digest", Some(Evidence::Declared)),
];

/// The property registry: each category's properties and the grade the plan knows them at
/// (`None`: only a receipt can tell).
pub const REGISTRY: &[CategoryProperties] = &[
    ("skill", ARTIFACT_PROPERTIES),
    ("command", ARTIFACT_PROPERTIES),
    ("agent", ARTIFACT_PROPERTIES),
    ("rule", RULE_PROPERTIES),
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

/// Whether only a receipt can tell `property` of `category` (the registry knows no grade for it).
pub fn observed_only(category: &str, property: &str) -> bool {
    REGISTRY
        .iter()
        .filter(|(c, _)| *c == category)
        .flat_map(|(_, properties)| properties.iter())
        .any(|(p, grade)| *p == property && grade.is_none())
}

/// Observation scopes a receipt can carry.
pub const SCOPES: &[&str] = &[
    "native_catalog",
    "controlled_projection",
    "workspace_session",
];

/// Targets a requirement may name.
pub const TARGETS: &[&str] = &agentpack_harness::agent::NAMES;

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
