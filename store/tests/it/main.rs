//! The integration tests of agentpack-store, one binary: one module per suite; `common` holds
//! their shared fixtures.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (HELPERS.md)

mod adopt;
mod common;
mod gc;
mod index;
mod link_modes;
mod multi_host;
mod multi_user;
mod names;
mod publish;
mod read_only;
mod shared;
mod stress;
mod tree_hash;
mod two_users;
mod verify;
