//! Evidence shared by `preflight`, `probe` and the strict launch check: the identities a report
//! or a receipt is bound to, probe receipts (their format, reading, writing and lookup), what a
//! probe observed, the per-agent adapter revisions, and the inheritance policy. No command owns
//! these modules and none of them calls a command module.

pub mod adapter;
pub mod catalog;
pub mod identity;
pub mod policy;
pub mod receipt;
