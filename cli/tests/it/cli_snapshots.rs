//! What the CLI prints, as insta snapshots: a few representative commands (`lock`, `sync`,
//! `sync --dry-run`, `store info`, `preflight`, and a refusal), each in its human form and, where it
//! has one, its `--json` form, against one project with the two example packages as path
//! dependencies.
//!
//! What differs from run to run is filtered before the comparison, and only that: the temporary
//! directory (`[tmp]`), hex digests of 32 characters or more (`[hash]`), durations and timestamps,
//! and the store's allocated sizes and filesystem (they depend on the disk the test runs on). A
//! changed snapshot is a changed output: review the `.snap.new` file insta writes beside the old
//! one (or rerun with `INSTA_UPDATE=always` and read the diff) before accepting it.

#![allow(clippy::unwrap_used)] // tests may unwrap (HELPERS.md)

use agentpack_test_support::{copy_dir, examples_dir, Project, Run};
use serde_json::Value;

const MANIFEST: &str = r#"name = "snapshots"
version = "0.1.0"

[dependencies]
hello-skill = { path = "./packages/hello-skill" }
review-plugin = { path = "./packages/review-plugin" }
"#;

/// The regular expressions of what changes from run to run, and what stands for it.
const FILTERS: &[(&str, &str)] = &[
    (r"[0-9a-f]{32,}", "[hash]"),
    (
        r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
        "[timestamp]",
    ),
    (r"\b\d+(\.\d+)? ?(ns|µs|us|ms|s)\b", "[duration]"),
    (r"\b\d+(\.\d+)? (B|KiB|MiB|GiB)\b", "[size]"),
    (r"(?m)^(filesystem +)\S+$", "$1[filesystem]"),
    (
        r"(?m)^(link mode +auto \(files are linked by )\w+( here\))$",
        "$1[method]$2",
    ),
    (r"(?m)^(dedup ratio +)[0-9.]+", "$1[ratio]"),
];

/// The project: both examples copied under `packages/`, the manifest above, locked (not synced).
fn project() -> Project {
    let project = Project::new();
    for example in ["hello-skill", "review-plugin"] {
        copy_dir(
            &examples_dir().join(example),
            &project.path(&format!("packages/{example}")),
        );
    }
    project.write("agentpack.toml", MANIFEST);
    project
}

/// The temporary directory every path of `project` is under.
fn tmp(project: &Project) -> String {
    project.dir().parent().unwrap().display().to_string()
}

/// A run as the snapshot shows it: the exit code, stdout and stderr, the temporary directory
/// replaced by `[tmp]`.
fn shown(project: &Project, run: &Run) -> String {
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        run.status
            .code()
            .map_or("signal".to_owned(), |code| code.to_string()),
        run.stdout,
        run.stderr
    )
    .replace(&tmp(project), "[tmp]")
}

/// `--json` stdout as the snapshot shows it (pretty, the temporary directory replaced), after
/// `redact` put placeholders where the machine shows through; nothing on stderr.
fn shown_json(project: &Project, run: &Run, redact: impl FnOnce(&mut Value)) -> String {
    assert!(run.success(), "{}", shown(project, run));
    assert_eq!(run.stderr, "", "--json says nothing on stderr");
    let mut json = run.json();
    redact(&mut json);
    serde_json::to_string_pretty(&json)
        .unwrap()
        .replace(&tmp(project), "[tmp]")
}

/// Puts placeholders where `store info --json` shows the machine rather than the output: sizes on
/// disk (`allocated`, every `disk_bytes`), the dedup ratio computed from them, the filesystem and
/// the link method it allows.
fn redact_machine(json: &mut Value) {
    match json {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                let machine = matches!(
                    key.as_str(),
                    "filesystem"
                        | "link_method"
                        | "dedup_ratio"
                        | "disk_bytes"
                        | "copies_disk_bytes"
                );
                if machine {
                    *value = Value::from(format!("[{key}]"));
                } else if key == "allocated" {
                    if let Value::Object(sizes) = value {
                        sizes
                            .values_mut()
                            .for_each(|size| *size = Value::from("[size]"));
                    }
                } else {
                    redact_machine(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_machine),
        _ => {}
    }
}

macro_rules! assert_shown {
    ($name:literal, $text:expr) => {
        insta::with_settings!({ filters => FILTERS.to_vec() }, {
            insta::assert_snapshot!($name, $text);
        })
    };
}

#[test]
fn lock_writes_the_lock_then_finds_it_unchanged() {
    let project = project();
    let first = project.ok(&["lock"]);
    assert_shown!("lock_first", shown(&project, &first));
    let again = project.ok(&["lock"]);
    assert_shown!("lock_again", shown(&project, &again));
}

#[test]
fn sync_dry_run_says_what_it_would_do_and_writes_nothing() {
    let project = project();
    project.ok(&["lock"]);
    let human = project.ok(&["sync", "--dry-run"]);
    assert_shown!("sync_dry_run", shown(&project, &human));
    let json = project.ok(&["--json", "sync", "--dry-run"]);
    assert_shown!("sync_dry_run_json", shown_json(&project, &json, |_| {}));
    assert!(
        !project.home.staging_root.join("modes/default").exists(),
        "a dry run selects nothing"
    );
}

#[test]
fn sync_stages_the_mode() {
    let project = project();
    project.ok(&["lock"]);
    let human = project.ok(&["sync"]);
    assert_shown!("sync", shown(&project, &human));
    let json = project.ok(&["--json", "sync"]);
    assert_shown!("sync_json", shown_json(&project, &json, |_| {}));
}

#[test]
fn store_info_after_one_sync() {
    let project = project();
    project.ok(&["sync"]);
    let human = project.ok(&["store", "info"]);
    assert_shown!("store_info", shown(&project, &human));
    let json = project.ok(&["--json", "store", "info"]);
    let redacted = shown_json(&project, &json, redact_machine);
    assert_shown!("store_info_json", redacted);
}

#[test]
fn preflight_of_a_clean_project() {
    let project = project();
    project.ok(&["sync"]);
    let human = project.ok(&["preflight", "--agent", "claude"]);
    assert_shown!("preflight", shown(&project, &human));
    let json = project.ok(&["--json", "preflight", "--agent", "claude"]);
    assert_shown!("preflight_json", shown_json(&project, &json, |_| {}));
}

#[test]
fn sync_outside_a_project_is_refused() {
    let project = Project::new();
    let refusal = project.fails(&["sync"]);
    assert_shown!("sync_outside_a_project", shown(&project, &refusal));
}
