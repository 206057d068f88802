//! The integration tests of agentpack-lockfile, one binary: one module per suite.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (HELPERS.md)

mod edit;
mod lock;
mod lock_roundtrip;
mod manifest;
mod spec;
