//! The integration tests of agentpack-test-support, one binary: one module per suite.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (HELPERS.md)

mod fake_github;
mod isolated;
