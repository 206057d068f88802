//! Test servers and fixtures for agentpack's tests.
//!
//! - [`FakeGitHub`]: REST + git smart HTTP on 127.0.0.1 over real git repositories ([`TestRepo`]).
//! - [`RawTar`]: hand-made (also malicious) tar archives.
//! - [`hostile_server`]: a GitHub that stalls, never ends, or sends bombs; peak-memory measurement.
//! - [`codex_daemon`]: a JSON-RPC client for Codex's app-server daemon, and a stand-in daemon.
//! - [`IsolatedHome`]: run the `agentpack` binary with a private home and the fake GitHub.
//! - [`Project`], [`Run`]: the `run`/`ok`/`fails` runner of the binary-level suites.
//! - [`files`]: `write`, `write_in`, `write_executable`, `copy_dir`, `skill_md`, `demo_plugin`,
//!   `examples_dir`, `tree_digest`.
//! - [`agents_bin`]: the pinned real agent clients (skip outside CI, fail in CI when missing).
//! - [`skip`]: the one way a test skips what its environment lacks (a failure under CI).
//!
//! Fixtures panic on setup failures: they are for tests only and never reach beyond 127.0.0.1.
#![allow(clippy::unwrap_used)]

pub mod codex_daemon;
pub mod fake_github;
pub mod files;
pub mod git_repo;
pub mod hostile_server;
mod http_serving;
pub mod isolated;
pub mod npm_registry;
pub mod pinned_agents;
pub mod project;
pub mod raw_tar;
pub mod registry;
pub mod skip;
pub mod users;

pub use fake_github::{Endpoint, FakeGitHub};
pub use files::{
    copy_dir, demo_plugin, examples_dir, make_writable, skill_md, tree_digest, write,
    write_executable, write_in,
};
pub use git_repo::{git, TestRepo};
pub use isolated::IsolatedHome;
pub use npm_registry::{NpmPackage, NpmRegistry};
pub use pinned_agents::{
    agents_bin, claude_init_stream, one_timed_client_run, run_pinned, writable_layer,
};
pub use project::{agentpack_bin, Project, Run};
pub use raw_tar::{gzip, RawTar};
pub use registry::TestRegistry;
pub use skip::{in_ci, skip};
