//! The full error output of common failures, as insta snapshots: each cause is printed once (an
//! error never repeats the cause its `source` prints on the next line, and a path is named once per
//! cause), with the temporary directory shown as `[tmp]`.
//!
//! The shape under test is `cli/src/output.rs`'s `print_error` over the errors of the store, the
//! lockfile and the filesystem toolkit (`agentpack-fs`). A changed snapshot is a changed message:
//! review the `.snap.new` file insta writes beside the old one before accepting it.

#![allow(clippy::unwrap_used)] // tests may unwrap (HELPERS.md)

use agentpack_test_support::{Project, Run};

/// The run as the snapshot shows it: exit code and stderr, the temporary directory as `[tmp]`.
fn shown(project: &Project, run: &Run) -> String {
    assert_eq!(run.stdout, "", "a failure prints nothing on stdout");
    let tmp = project.dir().parent().unwrap().display().to_string();
    format!(
        "exit: {}\n{}",
        run.status
            .code()
            .map_or("signal".to_owned(), |code| code.to_string()),
        run.stderr
    )
    .replace(&tmp, "[tmp]")
}

/// No line of the error repeats a later line: a cause printed on its own line is not also inside
/// the line above it, and no line names the same path twice.
#[track_caller]
fn assert_each_cause_once(stderr: &str) {
    let lines: Vec<&str> = stderr
        .lines()
        .filter_map(|line| {
            line.strip_prefix("error: ")
                .or_else(|| line.strip_prefix("  caused by: "))
        })
        .collect();
    assert!(!lines.is_empty(), "no error printed:\n{stderr}");
    for (index, line) in lines.iter().enumerate() {
        for later in &lines[index + 1..] {
            assert!(
                !line.contains(later),
                "`{later}` is printed twice:\n{stderr}"
            );
        }
        for word in line.split_whitespace().filter(|word| word.starts_with('/')) {
            let path = word.trim_matches(|c: char| "`'\":,;()".contains(c));
            assert!(
                line.matches(path).count() == 1,
                "{path} is named twice in one line:\n{stderr}"
            );
        }
    }
}

#[test]
fn gc_with_agentpack_home_a_regular_file() {
    let project = Project::new();
    let home = &project.home.agentpack_home;
    std::fs::remove_dir_all(home).unwrap();
    std::fs::write(home, b"not a directory\n").unwrap();
    let run = project.fails(&["gc"]);
    assert_each_cause_once(&run.stderr);
    insta::assert_snapshot!("gc_home_is_a_file", shown(&project, &run));
}

#[test]
fn sync_with_pack_lock_a_directory() {
    let project = Project::new();
    project.write("agentpack.toml", "name = \"chains\"\nversion = \"0.1.0\"\n");
    std::fs::create_dir(project.path("pack.lock")).unwrap();
    let run = project.fails(&["sync"]);
    assert_each_cause_once(&run.stderr);
    insta::assert_snapshot!("sync_lock_is_a_directory", shown(&project, &run));
}

#[test]
fn sync_with_the_store_directory_a_regular_file() {
    let project = Project::new();
    project.write(
        "packages/hello/skills/hello/SKILL.md",
        "---\nname: hello\ndescription: Says hello.\n---\nHello.\n",
    );
    project.write(
        "agentpack.toml",
        "name = \"chains\"\nversion = \"0.1.0\"\n\n[dependencies]\nhello = { path = \"./packages/hello\" }\n",
    );
    let cache = project.home.agentpack_home.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("store"), b"not a directory\n").unwrap();
    let run = project.fails(&["sync"]);
    assert_each_cause_once(&run.stderr);
    insta::assert_snapshot!("sync_store_is_a_file", shown(&project, &run));
}
