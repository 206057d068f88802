//! The integration tests of agentpack-harness, one binary: one module per suite; `launch_common`
//! holds the launch suites' shared fixtures.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (HELPERS.md)

mod codex_daemon;
mod codex_keychain;
mod fidelity;
mod launch_common;
mod launch_conformance;
mod launch_home_layers;
mod render;
mod render_pure;
