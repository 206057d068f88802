//! The launch runtime: everything that happens when an agent is started, as opposed to what
//! [`crate::render`] computes. This half does I/O and runs processes; it never prints (the binary
//! reports what it returns) and never writes inside the store.
//!
//! - [`command`]: each agent's binary, where it is found, and the argument list and environment a
//!   launcher runs it with (pure, given the environment it is handed);
//! - [`home_layer`]: the writable per-user homes a launched agent runs in, prepared from a
//!   generation and the user's own configuration (with the Codex app-server client
//!   [`home_layer::codex_daemon`] and the macOS keychain [`home_layer::codex_keychain`]);
//! - [`child`]: running the agent as a child with signals forwarded;
//! - [`fingerprint`]: the launch fast path's digest of what staging depends on;
//! - [`hook_exec`]: the `agentpack hook-exec dispatch` runtime that runs a staged hook's handlers.

pub mod child;
pub mod command;
pub mod fingerprint;
pub mod home_layer;
pub mod hook_exec;

pub use child::run_child;
