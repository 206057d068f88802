//! The integration tests of agentpack-cli, one binary: one module per suite. They drive the real
//! `agentpack` binary (`CARGO_BIN_EXE_agentpack`) through `agentpack_test_support`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (HELPERS.md)

mod architecture;
mod cli_snapshots;
mod closed_stdout;
mod codex_fallback;
mod conformance;
mod diagnostics;
mod docs;
mod eject;
mod environments;
mod error_chains;
mod fidelity;
mod hot_paths;
mod init;
mod integrity;
mod launch;
mod launch_conformance;
mod launch_extra_sync_claude;
mod launch_hook_exec;
mod link_mode_warning;
mod mcp_cli;
mod mcp_secrets;
mod mode_tui;
mod nix_flake;
mod oci_npm_substitute;
mod oci_packages;
mod oci_push;
mod oci_substitute;
mod partial_rows;
mod path_links;
mod preflight;
mod preflight_mcp_exec;
mod preflight_oracles;
mod preflight_sources;
mod probe;
mod probe_all;
mod probe_diff_export;
mod progress_lines;
mod project_lock;
mod proxy;
mod readme;
mod repo_snapshots;
mod resolve_e2e;
mod resource_limits;
mod shared_skill_dirs;
mod shared_store;
mod staging_e2e;
mod store_accounting;
mod strace_counts;
mod strict_contract;
mod tamper;
mod workspace_links;
mod workspace_overlay;
