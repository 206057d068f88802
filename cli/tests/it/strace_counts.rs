//! How often one `agentpack add <local package>` touches each file, counted with strace: the
//! pipeline reads `agentpack.toml` and `pack.lock` once per process and passes them on, opens the
//! store once, and resolves once (each package file is read at most twice: copied into the store
//! and hashed). A regression that reads a file again, opens a second store handle or resolves twice
//! fails here.
//!
//! What is counted, from `strace -f -e trace=%file` of the whole process tree:
//! - `agentpack.toml`, `pack.lock`: successful `open`/`openat` of the project's files (any flags;
//!   a write goes through a temporary file renamed over it, which is not an open of the file);
//! - the store: `Store::open` is the only code that looks at the store root's hygiene file
//!   `<store>/CACHEDIR.TAG` (it writes it when missing), so the syscalls naming it count the store
//!   handles. The store lock `<store>/v1/lock` is taken once per publication by design and is not
//!   a measure of handles;
//! - package files: every read-only `open`/`openat` of a path ending in one of the packages' file
//!   paths, per distinct path (the source file, the copy in a work directory, the published store
//!   path): none at most twice.
//!
//! A full `sync` and a fast one (the fingerprint of the last full sync hashes both files) are held
//! to the same bounds for the manifest, the lock and the store. `preflight` opens its store
//! read-only (no `CACHEDIR.TAG` is looked at, as `Store::open_read_only` writes no hygiene file)
//! and no syscall of it creates, writes, renames or removes anything. `store verify --repair` that
//! removed a store path with no good copy stages the project again over the handle it verified
//! with: one store handle.
//!
//! A sync that builds a new generation lists each package's store path once for its inputs and
//! reads each of its files once there, however many times it reads the inputs (MCP definitions,
//! rendering, rendering again under the final name).
//!
//! A strict launch (`--strict-external claude`) that takes the fast path evaluates the contract
//! over the project it discovered and the bytes the fast path read: `agentpack.toml` and
//! `pack.lock` opened once each, and the newest probe receipt once.
//!
//! Needs `/usr/bin/strace` (or `strace` on PATH); without it the tests are skipped, except under
//! `CI=true`, where a missing strace fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use agentpack_test_support::{skip, IsolatedHome};

fn strace() -> Option<PathBuf> {
    let fixed = PathBuf::from("/usr/bin/strace");
    if fixed.is_file() {
        return Some(fixed);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("strace"))
        .find(|candidate| candidate.is_file())
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A package directory with a skill and a rules file; returns the files' paths in the package.
fn package(dir: &Path, name: &str) -> Vec<String> {
    let skill = format!("skills/{name}/SKILL.md");
    write(
        &dir.join(&skill),
        &format!("---\nname: {name}\ndescription: The {name} skill.\n---\nSay {name}.\n"),
    );
    write(&dir.join("AGENTS.md"), &format!("# rules of {name}\n"));
    vec![skill, "AGENTS.md".to_owned()]
}

fn agentpack(iso: &IsolatedHome) -> Command {
    iso.command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
}

/// The path and the flags of each successful open in `trace`.
fn opens(trace: &str) -> Vec<(String, String)> {
    trace
        .lines()
        .filter(|line| line.contains("open(") || line.contains("openat("))
        .filter(|line| !line.contains("= -1 "))
        .filter_map(|line| {
            let start = line.find('"')? + 1;
            let end = start + line[start..].find('"')?;
            let flags = line[end + 1..].split(',').nth(1).unwrap_or("").trim();
            Some((line[start..end].to_owned(), flags.to_owned()))
        })
        .collect()
}

/// The `%file` trace of `agentpack <args>` in `iso`'s project; `None` (the test skips) when
/// strace is missing or cannot trace here, which fails under `CI=true`.
fn traced(iso: &IsolatedHome, args: &[&str]) -> Option<String> {
    let mut command = agentpack(iso);
    command.args(args);
    let (trace, output) = traced_run(iso, &command)?;
    assert!(
        output.status.success(),
        "{args:?} failed under strace: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(trace)
}

/// The `%file` trace of `command` (its program, arguments, environment and directory) and its
/// output; `None` (the test skips) when strace is missing or cannot trace here, which fails under
/// `CI=true`.
fn traced_run(iso: &IsolatedHome, command: &Command) -> Option<(String, std::process::Output)> {
    let Some(strace) = strace() else {
        skip("strace is not installed (Debian: apt-get install strace)");
        return None;
    };
    let trace_file = iso.home.join("command.trace");
    let traced = Command::new(&strace)
        .args(["-f", "-qq", "-e", "trace=%file", "-o"])
        .arg(&trace_file)
        .arg(command.get_program())
        .args(command.get_args())
        .env_clear()
        .envs(
            command
                .get_envs()
                .filter_map(|(key, value)| value.map(|value| (key.to_owned(), value.to_owned()))),
        )
        .current_dir(command.get_current_dir().unwrap())
        .output()
        .unwrap();
    if !traced.status.success() {
        let stderr = String::from_utf8_lossy(&traced.stderr);
        // A container without ptrace cannot trace: that is the machine, not agentpack.
        if stderr.contains("ptrace") || stderr.contains("Operation not permitted") {
            skip(format!("strace cannot trace here: {stderr}"));
            return None;
        }
    }
    Some((std::fs::read_to_string(&trace_file).unwrap(), traced))
}

/// How often `trace` opens `path`, and how often it names the store's `CACHEDIR.TAG` (the store
/// handles).
fn opened(trace: &str, path: &Path) -> usize {
    let text = path.to_string_lossy();
    opens(trace).iter().filter(|(p, _)| *p == text).count()
}

fn store_opens(trace: &str) -> usize {
    trace
        .lines()
        .filter(|line| line.contains("/store/CACHEDIR.TAG\""))
        .count()
}

fn ok(iso: &IsolatedHome, args: &[&str]) {
    let output = agentpack(iso).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn add_of_a_local_package_reads_each_file_at_most_twice() {
    let iso = IsolatedHome::new();
    let mut files = package(&iso.project.join("pkgs/one"), "one");
    files.extend(package(&iso.project.join("pkgs/two"), "two"));
    ok(&iso, &["init"]);
    ok(&iso, &["add", "./pkgs/one"]);
    let Some(trace) = traced(&iso, &["add", "./pkgs/two"]) else {
        return;
    };
    let opened_files = opens(&trace);

    let project = std::fs::canonicalize(&iso.project).unwrap();
    let manifest = opened(&trace, &project.join("agentpack.toml"));
    let lock = opened(&trace, &project.join("pack.lock"));
    assert!(manifest <= 2, "agentpack.toml opened {manifest} times");
    assert!(lock <= 2, "pack.lock opened {lock} times");
    let stores = store_opens(&trace);
    assert_eq!(stores, 1, "the store was opened {stores} times");

    let mut reads: BTreeMap<&str, usize> = BTreeMap::new();
    for (path, flags) in &opened_files {
        if !flags.starts_with("O_RDONLY") {
            continue;
        }
        if files.iter().any(|file| path.ends_with(&format!("/{file}"))) {
            *reads.entry(path.as_str()).or_default() += 1;
        }
    }
    assert!(
        reads
            .keys()
            .any(|path| path.starts_with(project.to_str().unwrap())),
        "the trace shows the package sources being read: {reads:#?}"
    );
    let too_often: Vec<_> = reads.iter().filter(|(_, n)| **n > 2).collect();
    assert!(
        too_often.is_empty(),
        "package files read more than twice: {too_often:#?}"
    );
    // The add did what it says.
    let lock_text = std::fs::read_to_string(project.join("pack.lock")).unwrap();
    assert!(lock_text.contains("two"), "{lock_text}");
}

#[test]
fn a_full_sync_and_a_fast_one_read_the_manifest_and_the_lock_at_most_twice() {
    let iso = IsolatedHome::new();
    package(&iso.project.join("pkgs/one"), "one");
    ok(&iso, &["init"]);
    ok(&iso, &["add", "./pkgs/one"]);
    let project = std::fs::canonicalize(&iso.project).unwrap();
    // A package edit: the sync is a full one (resolve, plan, build, select, record the fast path).
    write(&project.join("pkgs/one/AGENTS.md"), "# rules, edited\n");
    for what in ["full", "fast"] {
        let Some(trace) = traced(&iso, &["sync"]) else {
            return;
        };
        let manifest = opened(&trace, &project.join("agentpack.toml"));
        let lock = opened(&trace, &project.join("pack.lock"));
        assert!(
            manifest <= 2,
            "{what} sync: agentpack.toml opened {manifest} times"
        );
        assert!(lock <= 2, "{what} sync: pack.lock opened {lock} times");
        let stores = store_opens(&trace);
        assert_eq!(
            stores, 1,
            "{what} sync: the store was opened {stores} times"
        );
        // The full one published a generation (renamed into the store); the fast one did not.
        let published = trace
            .lines()
            .any(|line| line.contains("rename") && line.contains("-generation-default\""));
        assert_eq!(
            published,
            what == "full",
            "{what} sync published: {published}"
        );
    }
}

#[test]
fn a_generation_rebuild_lists_and_reads_each_package_once() {
    let iso = IsolatedHome::new();
    let plugin = iso.project.join("pkgs/plug");
    write(
        &plugin.join(".claude-plugin/plugin.json"),
        r#"{"name": "plug", "description": "A plugin."}"#,
    );
    package(&plugin, "plug");
    write(
        &plugin.join("commands/go.md"),
        "---\ndescription: Go.\n---\nGo.\n",
    );
    ok(&iso, &["init"]);
    ok(&iso, &["add", "./pkgs/plug"]);
    let slot = std::fs::read_dir(iso.agentpack_home.join("cache"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.is_symlink() && path.join(".claude-plugin/plugin.json").is_file())
        .expect("the package's slot");
    let store_path = std::fs::canonicalize(&slot).unwrap();
    // A new overlay file: the next sync reads the package's MCP definitions, then renders and
    // publishes a new generation of it (each a read of the inputs). The one after `add` may hash
    // the package once (removing the add's scratch links moved its blobs' ctime after their stamps
    // were recorded); the next full sync is the one traced.
    write(&iso.project.join(".agents/rules/extra.md"), "# extra\n");
    ok(&iso, &["sync"]);
    write(
        &iso.project.join(".agents/rules/extra.md"),
        "# extra, again\n",
    );
    let Some(trace) = traced(&iso, &["sync"]) else {
        return;
    };
    assert!(
        trace
            .lines()
            .any(|line| line.contains("rename") && line.contains("-generation-default\"")),
        "the sync built a new generation"
    );
    let opens_of = |relative: &str, directory: bool| {
        let path = store_path.join(relative);
        opens(&trace)
            .iter()
            .filter(|(p, flags)| Path::new(p) == path && flags.contains("O_DIRECTORY") == directory)
            .count()
    };
    // Outside the inputs' one listing, the resolver reads the plugin's name from its manifest and
    // checks the store copy it verified before by a walk against its blob stamps (no file read).
    let manifest = opens_of(".claude-plugin/plugin.json", false);
    assert_eq!(
        manifest, 2,
        "the store copy's plugin.json read {manifest} times (name, inputs)"
    );
    let command = opens_of("commands/go.md", false);
    assert_eq!(
        command, 1,
        "the store copy's command read {command} times (inputs)"
    );
    let listed = opens_of("skills", true);
    assert_eq!(
        listed, 2,
        "the store copy's skills/ listed {listed} times (stamp check, inputs)"
    );
}

#[test]
fn preflight_opens_the_store_read_only_and_changes_nothing() {
    let iso = IsolatedHome::new();
    package(&iso.project.join("pkgs/one"), "one");
    ok(&iso, &["init"]);
    ok(&iso, &["add", "./pkgs/one"]);
    let Some(trace) = traced(&iso, &["preflight", "--agent", "claude", "--json"]) else {
        return;
    };
    let project = std::fs::canonicalize(&iso.project).unwrap();
    // One read of each: the read-only session's, which the checks and the plan share.
    assert_eq!(
        opened(&trace, &project.join("agentpack.toml")),
        1,
        "{trace}"
    );
    assert_eq!(opened(&trace, &project.join("pack.lock")), 1, "{trace}");
    assert_eq!(store_opens(&trace), 0, "a writable store handle was opened");
    // Each line is `<pid> <call>(<args>) = <result>`; the trace file itself is strace's write.
    const MUTATING: &[&str] = &[
        "mkdir",
        "mkdirat",
        "unlink",
        "unlinkat",
        "rename",
        "renameat",
        "renameat2",
        "symlink",
        "symlinkat",
        "link",
        "linkat",
        "rmdir",
        "chmod",
        "fchmodat",
        "truncate",
        "utimensat",
    ];
    let writes: Vec<&str> = trace
        .lines()
        .filter(|line| !line.contains("= -1 ") && !line.contains("command.trace"))
        .filter(|line| {
            let call = line
                .split_whitespace()
                .nth(1)
                .and_then(|word| word.split('(').next())
                .unwrap_or("");
            let opens_for_writing = (call == "open" || call == "openat")
                && ["O_CREAT", "O_WRONLY", "O_RDWR"]
                    .iter()
                    .any(|flag| line.contains(flag))
                && !line.contains("\"/dev/");
            MUTATING.contains(&call) || opens_for_writing
        })
        .collect();
    assert!(writes.is_empty(), "preflight wrote: {writes:#?}");
}

#[test]
fn store_verify_repair_stages_again_over_its_one_store_handle() {
    let iso = IsolatedHome::new();
    package(&iso.project.join("pkgs/one"), "one");
    ok(&iso, &["init"]);
    ok(&iso, &["add", "./pkgs/one"]);
    // Damage the package's store path and leave no good copy: every blob goes, and one file of
    // the store path is edited in place. Repair removes the path; the project is staged again.
    let cache = iso.agentpack_home.join("cache");
    let slot = std::fs::read_dir(&cache)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.is_symlink() && path.join("AGENTS.md").is_file())
        .expect("the package's slot");
    let file = std::fs::canonicalize(slot.join("AGENTS.md")).unwrap();
    let blobs = cache.join("store/v1/blobs");
    for shard in std::fs::read_dir(&blobs).unwrap() {
        let shard = shard.unwrap().path();
        if shard.is_dir() {
            for blob in std::fs::read_dir(&shard).unwrap() {
                std::fs::remove_file(blob.unwrap().path()).unwrap();
            }
        }
    }
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&file, "# tampered\n").unwrap();

    let Some(trace) = traced(&iso, &["store", "verify", "--repair"]) else {
        return;
    };
    let stores = store_opens(&trace);
    assert_eq!(
        stores, 1,
        "store verify --repair opened the store {stores} times"
    );
    let restaged = std::fs::read_to_string(slot.join("AGENTS.md")).unwrap();
    assert_eq!(
        restaged, "# rules of one\n",
        "the package was not staged again"
    );
}

#[test]
fn a_strict_fast_launch_reads_the_definition_the_lock_and_the_receipt_once() {
    let iso = IsolatedHome::new();
    let root = iso.project.parent().unwrap().to_path_buf();
    let standin = root.join("bin/claude-standin");
    write(&standin, &crate::strict_contract::probed_standin());
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&standin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mark = root.join("ran.txt");
    package(&iso.project.join("pkg"), "demo-skill");
    write(
        &iso.project.join("agentpack.toml"),
        "name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\n\"demo\" = { path = \"pkg\" }\n",
    );
    write(
        &iso.project.join("contract.json"),
        &crate::strict_contract::observed_contract().to_string(),
    );
    let strict = |args: &[&str]| {
        let mut command = agentpack(&iso);
        command
            .env("CLAUDE_PATH", &standin)
            .env("STANDIN_MARK", &mark)
            .arg("--strict-external")
            .args(args);
        command
    };
    for args in [
        &["sync"][..],
        &["probe", "--agent", "claude", "--json"][..],
        &["claude"][..],
    ] {
        let output = strict(args).output().unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    std::fs::remove_file(&mark).unwrap();
    // The traced launch: the fast path (the last one recorded it), the contract, the agent.
    let Some((trace, traced)) = traced_run(&iso, &strict(&["-v", "claude"])) else {
        return;
    };
    let stderr = String::from_utf8_lossy(&traced.stderr);
    assert!(traced.status.success(), "the strict launch: {stderr}");
    assert!(mark.exists(), "the agent ran: {stderr}");
    assert!(
        stderr.contains("launch fast path: inputs unchanged"),
        "the launch took the fast path: {stderr}"
    );
    let project = std::fs::canonicalize(&iso.project).unwrap();
    let manifest = opened(&trace, &project.join("agentpack.toml"));
    let lock = opened(&trace, &project.join("pack.lock"));
    assert_eq!(manifest, 1, "agentpack.toml opened {manifest} times");
    assert_eq!(lock, 1, "pack.lock opened {lock} times");
    let receipts: Vec<String> = opens(&trace)
        .into_iter()
        .map(|(path, _)| path)
        .filter(|path| path.contains("/probe-receipts/") && path.ends_with("-claude.json"))
        .collect();
    assert_eq!(
        receipts.len(),
        1,
        "the receipt opened {} times: {receipts:#?}",
        receipts.len()
    );
}
