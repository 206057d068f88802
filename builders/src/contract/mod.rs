//! `contract.json`: requirements over an agent's effective plan, with evidence grades.
//!
//! Parsing validates everything before anything is evaluated, and names the JSON path of what it
//! rejects (unknown keys, categories, properties, targets, predicates, evidence levels, scopes,
//! duplicate ids, allowances without a known requirement or a rationale). Evaluation never promotes
//! evidence: a property known from the lock (`declared`) never satisfies a `generated` requirement,
//! and only a current probe receipt answers `observed` (through the caller's `observed` lookup):
//! without one an observed requirement stays unknown. Pure: no I/O but what the caller passes.

//!
//! Layout: `model` (the validated contract and the property registry), `parse` (bytes to a
//! contract, naming the JSON path of what it rejects), `evaluate` (one requirement against what
//! the caller knows), `places` (the inherited places each agent reads, which `inheritance.allow`
//! may name). Used by `agentpack preflight`, the strict launch check and `agentpack env import`.

mod evaluate;
mod model;
mod parse;
pub mod places;

pub use evaluate::{evaluate, Known, Outcome, Status};
pub use model::{
    Allowance, CategoryProperties, Contract, Evidence, Predicate, Requirement, UnknownRequired,
    REGISTRY, SCOPES, TARGETS,
};
pub use parse::{parse, ContractError};

/// The contract file beside the definition.
pub const CONTRACT_FILE: &str = "contract.json";
