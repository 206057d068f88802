//! Diagnostic logging: the `tracing` subscriber behind `-v`, `-vv` and `RUST_LOG`.
//!
//! The libraries emit `tracing` events (which source served a package, which slot was re-hashed, why
//! a fast path was declined); only the binary decides whether and where they are shown. Without `-v`
//! and without `RUST_LOG` no subscriber is installed, so a launch or a no-op sync pays nothing for
//! them. Events go to stderr, never stdout, so `--json` output stays parseable.

use tracing_subscriber::EnvFilter;

/// The variable that takes a full `tracing` filter (`RUST_LOG=agentpack_store=trace`).
const RUST_LOG: &str = "RUST_LOG";

/// Our crates, the targets `-v` turns on.
const OUR_CRATES: &[&str] = &[
    "agentpack",
    "agentpack_cli",
    "agentpack_builders",
    "agentpack_store",
    "agentpack_harness",
    "agentpack_lockfile",
];

/// Installs the stderr subscriber when `-v` was given or `RUST_LOG` is set.
pub fn init(verbose: u8) {
    let from_env = std::env::var(RUST_LOG)
        .ok()
        .filter(|value| !value.is_empty());
    let Some(filter) = filter_directives(verbose, from_env.as_deref()) else {
        return;
    };
    let filter = EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(verbose >= 2)
        .without_time()
        .try_init();
}

/// The filter for a verbosity and an optional `RUST_LOG`; `None` when nothing is to be shown.
/// `RUST_LOG` wins over `-v`, as in other Rust tools.
fn filter_directives(verbose: u8, rust_log: Option<&str>) -> Option<String> {
    if let Some(filter) = rust_log {
        return Some(filter.to_owned());
    }
    let level = match verbose {
        0 => return None,
        1 => "debug",
        _ => "trace",
    };
    Some(
        OUR_CRATES
            .iter()
            .map(|target| format!("{target}={level}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

#[cfg(test)]
mod tests {
    use super::filter_directives;

    #[test]
    fn quiet_by_default() {
        assert_eq!(filter_directives(0, None), None);
    }

    #[test]
    fn one_v_shows_our_decisions_and_two_every_step() {
        let one = filter_directives(1, None).unwrap();
        assert!(one.contains("agentpack_store=debug"));
        assert!(!one.contains("trace"));
        let two = filter_directives(2, None).unwrap();
        assert!(two.contains("agentpack_builders=trace"));
    }

    #[test]
    fn rust_log_wins() {
        assert_eq!(
            filter_directives(2, Some("agentpack_store=info")).as_deref(),
            Some("agentpack_store=info")
        );
    }
}
