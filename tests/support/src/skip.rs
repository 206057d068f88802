//! The one way a test skips what its environment cannot run (no root, no tmux, no pinned agents, a
//! filesystem without the feature under test): it says why on its output and returns, except under
//! CI, where the same call fails the test. CI must run every test for real, so a missing tool there
//! is a broken CI setup, never a silent pass.
//!
//! Never for skipping on a test's own logic: only for what the machine lacks.

use std::fmt::Display;

/// Whether this runs in CI: `CI` is set to anything but empty, `0` or `false` (`.ci/run` sets
/// `CI=true`, as hosted CI does).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| !matches!(value.as_str(), "" | "0" | "false"))
}

/// Skip the calling test because of `reason` (what the environment lacks, and how to get it): prints
/// `skipped: <reason>`, and the caller returns right after. Under CI it panics instead, naming the
/// reason, so the test fails.
#[track_caller]
#[allow(clippy::print_stdout)] // a skipped test says why on its output
pub fn skip(reason: impl Display) {
    assert!(
        !in_ci(),
        "CI must run this test, but the environment cannot: {reason}"
    );
    println!("skipped: {reason}");
}
