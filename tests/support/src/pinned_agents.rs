//! Where the pinned real agent clients are: `AGENTPACK_TEST_AGENTS_BIN`, a `node_modules/.bin` with
//! `claude`, `codex` and `opencode` (`.ci/run` installs them). The conformance, fidelity and probe
//! suites use them as the oracle of what we stage.

use std::path::PathBuf;

/// The directory of the pinned clients, or `None` (the caller skips) when
/// `AGENTPACK_TEST_AGENTS_BIN` is unset or empty. Under `CI` an unset variable is a failure, never
/// a skip; outside CI the skip is printed with the remedy.
pub fn agents_bin() -> Option<PathBuf> {
    match std::env::var_os("AGENTPACK_TEST_AGENTS_BIN").filter(|dir| !dir.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must set AGENTPACK_TEST_AGENTS_BIN to the pinned clients' node_modules/.bin (see .ci/run)"
            );
            #[allow(clippy::print_stdout)] // a skip says why, in the test's output
            {
                println!("skipped: AGENTPACK_TEST_AGENTS_BIN is not set (npm install the pinned clients, see .ci/run)");
            }
            None
        }
    }
}
