//! The integration tests of agentpack-builders, one binary: one module per suite.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (HELPERS.md)

mod cold_fill;
mod concurrent_fetch;
mod exec_bits;
mod extract;
mod fetch_env;
mod github_resolve;
mod local_package;
mod normalize;
mod npm_mcp;
mod oci_package;
mod oci_registry;
mod plugin_add;
mod project_pipeline;
mod resolve_fetch;
mod snapshot;
