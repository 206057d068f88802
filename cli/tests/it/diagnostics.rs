//! Diagnostics through the real binary: `-v` explains decisions on stderr (which source served each
//! package), `RUST_LOG` takes a full filter, and neither changes stdout, so `--json` stays parseable.
//! Without them nothing is logged.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::path::Path;
use std::process::Output;

use agentpack_test_support::{copy_dir, IsolatedHome, Run};

fn run(home: &IsolatedHome, args: &[&str], rust_log: Option<&str>) -> Output {
    let mut command = home.agentpack(args);
    if let Some(filter) = rust_log {
        command.env("RUST_LOG", filter);
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{:?}",
        Run::new(args, output.clone())
    );
    output
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A project with one path package (a copy of `examples/hello-skill`), locked but not synced.
fn project() -> IsolatedHome {
    let home = IsolatedHome::new();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/hello-skill");
    let package = home.project.parent().unwrap().join("hello-skill");
    copy_dir(&example, &package);
    run(&home, &["init", "--name", "demo"], None);
    run(&home, &["add", "../hello-skill", "--no-sync"], None);
    home
}

#[test]
fn verbose_names_the_source_of_each_package_on_stderr_only() {
    let home = project();
    let output = run(&home, &["-v", "sync", "--json"], None);
    let log = stderr(&output);
    assert!(
        log.contains("source: the path package's directory") && log.contains("hello-skill"),
        "-v names where the package came from:\n{log}"
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is still one JSON document ({e}):\n{log}"));
    assert!(json.get("schema_version").is_some());
}

#[test]
fn nothing_is_logged_without_a_flag_or_rust_log() {
    let home = project();
    let log = stderr(&run(&home, &["sync"], None));
    assert!(
        !log.contains("source:"),
        "no diagnostics by default:\n{log}"
    );
}

#[test]
fn rust_log_takes_a_full_filter() {
    let home = project();
    let only_store = stderr(&run(&home, &["sync"], Some("agentpack_store=trace")));
    assert!(
        !only_store.contains("source:"),
        "a filter naming only the store hides the builders' events:\n{only_store}"
    );
    let builders = stderr(&run(
        &home,
        &["sync", "--update-lock"],
        Some("agentpack_builders=debug"),
    ));
    assert!(
        builders.contains("source: the path package's directory"),
        "a filter naming the builders shows their events:\n{builders}"
    );
}
