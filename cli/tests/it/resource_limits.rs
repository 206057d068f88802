//! Bounded downloads and inputs, end to end: the real binary against a hostile server on 127.0.0.1
//! (stall, endless body, gzip bomb, very many files, endless JSON, endless tag pages), path packages
//! (secret-looking files, FIFOs, broken `SKILL.md`, a big file), FIFOs in place of project files, and
//! leftovers of killed runs in the store's `.tmp`.
//!
//! Each hostile case must be refused within its limit with an error naming the limit's variable,
//! with agentpack's peak memory under 100 MiB and nothing left in the store's `.tmp`. Limits are set
//! small through the `AGENTPACK_*` variables so every case finishes in seconds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use agentpack_test_support::hostile_server::{run_measured, HostileServer, Hostility, Measured};
use agentpack_test_support::IsolatedHome;

const MAX_PEAK_KIB: u64 = 100 * 1024;
const DEADLINE: Duration = Duration::from_secs(90);

/// The binary under test; `AGENTPACK_TEST_BIN` points the suite at another build (e.g. one from
/// before these limits, to see every test fail there).
fn bin() -> PathBuf {
    std::env::var_os("AGENTPACK_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| assert_cmd::cargo::cargo_bin("agentpack"))
}

fn command(home: &IsolatedHome, server: Option<&HostileServer>, args: &[&str]) -> Command {
    let mut command = home.command(&bin(), None);
    if let Some(server) = server {
        command
            .env("AGENTPACK_GITHUB_API_URL", server.url())
            .env("AGENTPACK_GITHUB_URL", server.url());
    }
    command.args(args);
    command
}

fn init(home: &IsolatedHome) {
    let out = command(home, None, &["init", "--name", "demo"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn stderr(measured: &Measured) -> String {
    String::from_utf8_lossy(&measured.output.stderr).into_owned()
}

/// Entries of the store's `.tmp`.
fn store_tmp_entries(home: &IsolatedHome) -> Vec<String> {
    let tmp = home.agentpack_home.join("cache/store/v1/.tmp");
    match std::fs::read_dir(&tmp) {
        Ok(entries) => entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Runs `add github.com/hostile/repo[@ref]` against `hostility` with `limits`, and checks what
/// every hostile case must show: refused, in time, the limit named, small, nothing left behind.
fn refused(hostility: Hostility, spec: &str, limits: &[(&str, &str)], named: &str) -> Measured {
    let server = HostileServer::start(hostility);
    let home = IsolatedHome::new();
    init(&home);
    let mut add = command(&home, Some(&server), &["add", spec]);
    for (name, value) in limits {
        add.env(name, value);
    }
    let measured = run_measured(&mut add, DEADLINE);
    let text = stderr(&measured);
    eprintln!(
        "{hostility:?}: refused in {:?}, peak {} KiB",
        measured.elapsed, measured.peak_kib
    );
    assert!(
        !measured.killed,
        "agentpack hung on {hostility:?} and was killed\n{text}"
    );
    assert!(
        !measured.output.status.success(),
        "{hostility:?} was accepted\n{text}"
    );
    assert!(
        text.contains(named),
        "{hostility:?}: the error does not name {named}\n{text}"
    );
    assert!(
        measured.peak_kib < MAX_PEAK_KIB,
        "{hostility:?}: peak memory {} KiB",
        measured.peak_kib
    );
    assert!(
        text.len() < 8 * 1024,
        "{hostility:?}: a {} byte message",
        text.len()
    );
    let left = store_tmp_entries(&home);
    assert!(
        left.is_empty(),
        "{hostility:?} left {left:?} in the store's .tmp"
    );
    let manifest = std::fs::read_to_string(home.project.join("agentpack.toml")).unwrap();
    assert!(!manifest.contains("hostile"), "{manifest}");
    measured
}

/// [`refused`] with a 500 ms read timeout, and refused well before the deadline.
fn refused_after_the_read_timeout(hostility: Hostility, spec: &str) {
    let measured = refused(
        hostility,
        spec,
        &[("AGENTPACK_READ_TIMEOUT", "500ms")],
        "AGENTPACK_READ_TIMEOUT",
    );
    assert!(
        measured.elapsed < Duration::from_secs(30),
        "{:?}",
        measured.elapsed
    );
}

/// [`refused`] of `github.com/hostile/repo`, with an error that also says `says`.
fn refused_saying(hostility: Hostility, limits: &[(&str, &str)], named: &str, says: &str) {
    let measured = refused(hostility, "github.com/hostile/repo", limits, named);
    assert!(stderr(&measured).contains(says), "{}", stderr(&measured));
}

#[test]
fn a_stalled_download_fails_after_the_read_timeout() {
    refused_after_the_read_timeout(Hostility::StallTarball, "github.com/hostile/repo");
}

#[test]
fn a_stalled_api_answer_fails_after_the_read_timeout() {
    refused_after_the_read_timeout(Hostility::StallCommits, "github.com/hostile/repo@main");
}

#[test]
fn an_endless_body_stops_at_the_download_cap() {
    refused_saying(
        Hostility::EndlessTarball,
        &[("AGENTPACK_MAX_DOWNLOAD_SIZE", "4M")],
        "AGENTPACK_MAX_DOWNLOAD_SIZE",
        "larger than 4 MiB",
    );
}

#[test]
fn a_gzip_bomb_is_refused_by_the_default_compression_ratio() {
    // 256 MiB of zeros in about 256 KiB: far past the default 100:1.
    refused_saying(
        Hostility::GzipBomb(256 << 20),
        &[],
        "AGENTPACK_MAX_COMPRESSION_RATIO",
        "decompression bomb",
    );
}

#[test]
fn a_tarball_of_200k_files_stops_at_the_file_limit() {
    refused(
        Hostility::ManyFiles(200_000),
        "github.com/hostile/repo",
        &[("AGENTPACK_MAX_FILES", "2000")],
        "AGENTPACK_MAX_FILES",
    );
}

#[test]
fn endless_json_stops_at_the_json_cap() {
    refused_saying(
        Hostility::EndlessJson,
        &[("AGENTPACK_MAX_JSON_SIZE", "1M")],
        "AGENTPACK_MAX_JSON_SIZE",
        "larger than 1 MiB",
    );
}

#[test]
fn endless_tag_pages_stop_at_the_tag_limit() {
    let server_pages = {
        let server = HostileServer::start(Hostility::EndlessTagPages);
        let home = IsolatedHome::new();
        init(&home);
        let mut add = command(&home, Some(&server), &["add", "github.com/hostile/repo"]);
        add.env("AGENTPACK_MAX_TAGS", "500");
        let measured = run_measured(&mut add, DEADLINE);
        let text = stderr(&measured);
        assert!(!measured.killed, "{text}");
        assert!(!measured.output.status.success(), "{text}");
        assert!(
            text.contains("AGENTPACK_MAX_TAGS") && text.contains("more than 500 tags"),
            "{text}"
        );
        assert!(measured.peak_kib < MAX_PEAK_KIB, "{}", measured.peak_kib);
        assert!(store_tmp_entries(&home).is_empty());
        server.tag_pages()
    };
    assert!(server_pages <= 8, "{server_pages} pages were fetched");
}

#[test]
fn a_long_tag_list_is_truncated_in_the_error() {
    let server = HostileServer::start(Hostility::ManyTags(30));
    let home = IsolatedHome::new();
    init(&home);
    let mut add = command(&home, Some(&server), &["add", "github.com/hostile/repo@^9"]);
    let measured = run_measured(&mut add, DEADLINE);
    let text = stderr(&measured);
    assert!(!measured.output.status.success(), "{text}");
    assert!(text.contains("satisfies"), "{text}");
    assert!(text.contains("… and 2980 more"), "{text}");
    assert!(
        text.len() < 4 * 1024,
        "a {} byte message:\n{text}",
        text.len()
    );
}

#[test]
fn a_normal_repository_still_adds_within_the_limits() {
    let server = HostileServer::start(Hostility::None);
    let home = IsolatedHome::new();
    init(&home);
    let mut add = command(
        &home,
        Some(&server),
        &["add", "github.com/hostile/repo", "--no-sync"],
    );
    add.env("AGENTPACK_MAX_FILES", "10")
        .env("AGENTPACK_READ_TIMEOUT", "2");
    let measured = run_measured(&mut add, DEADLINE);
    assert!(measured.output.status.success(), "{}", stderr(&measured));
}

#[test]
fn an_unusable_limit_value_is_an_error_naming_the_variable() {
    let home = IsolatedHome::new();
    init(&home);
    let mut add = command(&home, None, &["add", "github.com/hostile/repo"]);
    add.env("AGENTPACK_MAX_DOWNLOAD_SIZE", "lots");
    let measured = run_measured(&mut add, DEADLINE);
    let text = stderr(&measured);
    assert!(!measured.output.status.success());
    assert!(
        text.contains("AGENTPACK_MAX_DOWNLOAD_SIZE=\"lots\""),
        "{text}"
    );
}

// ----- leftovers of killed runs -----

#[test]
fn leftovers_of_a_dead_process_are_removed_by_the_next_sync() {
    let home = IsolatedHome::new();
    init(&home);
    let out = command(&home, None, &["sync"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // What a kill -9 during a download leaves: a work directory whose lock nobody holds.
    let tmp = home.agentpack_home.join("cache/store/v1/.tmp");
    let dead = tmp.join("work-999999-0-deadbeef");
    std::fs::create_dir_all(dead.join("snapshots-x")).unwrap();
    std::fs::write(dead.join("snapshots-x/partial.tar.gz"), vec![0u8; 1 << 20]).unwrap();
    let lock = dead.join(".lock");
    std::fs::write(&lock, b"").unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&lock)
        .unwrap()
        .set_modified(old)
        .unwrap();
    // A directory that is not a work directory is never touched.
    let other = tmp.join("trash-1-0-0");
    std::fs::create_dir_all(&other).unwrap();

    let out = command(&home, None, &["sync"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dead.exists(), "the leftover is still there");
    assert!(other.exists());
}

// ----- path packages -----

fn write(root: &Path, relative: &str, bytes: &[u8]) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn path_package(home: &IsolatedHome) -> PathBuf {
    let pkg = home.project.parent().unwrap().join("pkg");
    write(
        &pkg,
        "skills/tool/SKILL.md",
        b"---\nname: tool\ndescription: a tool\n---\nUse it.\n",
    );
    pkg
}

fn grep_tree(root: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            found.extend(grep_tree(&path, needle));
        } else if kind.is_file() {
            if let Ok(bytes) = std::fs::read(&path) {
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    found.push(path);
                }
            }
        }
    }
    found
}

#[test]
fn a_path_package_with_a_private_key_is_refused_unless_listed() {
    let home = IsolatedHome::new();
    init(&home);
    let pkg = path_package(&home);
    let secret = b"-----BEGIN OPENSSH PRIVATE KEY-----\nSENTINEL-KEY-BYTES\n-----END OPENSSH PRIVATE KEY-----\n";
    write(&pkg, ".ssh/id_ed25519", secret);
    write(&pkg, ".env", b"TOKEN=SENTINEL-ENV-BYTES\n");
    let measured = run_measured(&mut command(&home, None, &["add", "../pkg"]), DEADLINE);
    let text = stderr(&measured);
    assert!(!measured.output.status.success(), "{text}");
    assert!(
        text.contains(".ssh/id_ed25519") && text.contains(".env"),
        "{text}"
    );
    assert!(text.contains("allow-secret-files"), "{text}");
    for needle in [&b"SENTINEL-KEY-BYTES"[..], b"SENTINEL-ENV-BYTES"] {
        let copies = grep_tree(&home.agentpack_home, needle);
        assert!(copies.is_empty(), "the secret was copied to {copies:?}");
    }

    // Listed in the package's agentpack.toml: shipped on purpose.
    write(
        &pkg,
        "agentpack.toml",
        b"allow-secret-files = [\".ssh/id_ed25519\", \".env\"]\n",
    );
    let measured = run_measured(&mut command(&home, None, &["add", "../pkg"]), DEADLINE);
    assert!(measured.output.status.success(), "{}", stderr(&measured));
}

#[test]
fn a_fifo_in_a_path_package_is_an_error_naming_it() {
    let home = IsolatedHome::new();
    init(&home);
    let pkg = path_package(&home);
    mkfifo(&pkg.join("skills/tool/pipe"));
    let measured = run_measured(
        &mut command(&home, None, &["add", "../pkg"]),
        Duration::from_secs(30),
    );
    let text = stderr(&measured);
    assert!(!measured.killed, "agentpack hung on a FIFO\n{text}");
    assert!(!measured.output.status.success(), "{text}");
    assert!(
        text.contains("skills/tool/pipe") && text.contains("FIFO"),
        "{text}"
    );
}

#[test]
fn broken_skill_front_matter_is_warned_about_and_never_names_a_path() {
    let home = IsolatedHome::new();
    init(&home);
    let pkg = home.project.parent().unwrap().join("pkg");
    write(
        &pkg,
        "SKILL.md",
        b"---\nname: ../../outside\ndescription: x\n---\nBody.\n",
    );
    write(
        &pkg,
        "skills/open/SKILL.md",
        b"---\nname: open\ndescription: never closed\n",
    );
    write(
        &pkg,
        "skills/bomb/SKILL.md",
        b"---\nname: bomb\na: &a [\"x\",\"x\",\"x\"]\nb: &b [*a,*a,*a]\nc: [*b,*b,*b]\n---\n",
    );
    let measured = run_measured(
        &mut command(&home, None, &["add", "../pkg", "--no-sync"]),
        DEADLINE,
    );
    let text = stderr(&measured);
    assert!(measured.output.status.success(), "{text}");
    assert!(
        text.contains("SKILL.md") && text.contains("is a path"),
        "{text}"
    );
    assert!(
        text.contains("skills/open/SKILL.md") && text.contains("not closed"),
        "{text}"
    );
    assert!(
        text.contains("skills/bomb/SKILL.md") && text.contains("aliases"),
        "{text}"
    );
    let lock = std::fs::read_to_string(home.project.join("pack.lock")).unwrap();
    assert!(!lock.contains("../../outside"), "{lock}");
}

#[test]
fn a_big_file_in_a_path_package_is_streamed() {
    let home = IsolatedHome::new();
    init(&home);
    let pkg = path_package(&home);
    let big = std::fs::File::create(pkg.join("big.bin")).unwrap();
    big.set_len(300 << 20).unwrap();
    let measured = run_measured(
        &mut command(&home, None, &["add", "../pkg", "--no-sync"]),
        DEADLINE,
    );
    assert!(measured.output.status.success(), "{}", stderr(&measured));
    assert!(
        measured.peak_kib < MAX_PEAK_KIB,
        "peak memory {} KiB",
        measured.peak_kib
    );
}

// ----- FIFOs in place of project files -----

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

#[test]
fn a_fifo_in_place_of_a_project_file_is_an_error_not_a_hang() {
    for (file, commands) in [
        (
            "pack.lock",
            &[
                &["sync"][..],
                &["lock"],
                &["mcp", "list"],
                &["remove", "x/y"],
            ][..],
        ),
        ("agentpack.toml", &[&["sync"][..], &["lock"]][..]),
    ] {
        let home = IsolatedHome::new();
        init(&home);
        let path = home.project.join(file);
        let _ = std::fs::remove_file(&path);
        mkfifo(&path);
        for args in commands {
            let measured = run_measured(&mut command(&home, None, args), Duration::from_secs(20));
            let text = stderr(&measured);
            assert!(
                !measured.killed,
                "agentpack {args:?} hung on a FIFO {file}\n{text}"
            );
            assert!(!measured.output.status.success(), "{args:?}: {text}");
            if args[0] == "remove" {
                continue; // refused before the lock is read: what matters is that it returns
            }
            // Project discovery takes a FIFO agentpack.toml for a missing one (no project here).
            let kind = if file == "pack.lock" { "FIFO" } else { file };
            assert!(
                text.contains(file) && text.contains(kind),
                "{args:?}: {text}"
            );
        }
    }
}

// ----- a lock record is never lost -----

fn npm_world() -> (IsolatedHome, agentpack_test_support::NpmRegistry) {
    use agentpack_test_support::{NpmPackage, NpmRegistry};
    let home = IsolatedHome::new();
    init(&home);
    let registry = NpmRegistry::start();
    registry.publish(
        NpmPackage::new("@demo/mcp", "1.1.0")
            .bin_script("demo-mcp", "#!/usr/bin/env node\nconsole.log('hi');\n"),
    );
    (home, registry)
}

fn run_with_registry(home: &IsolatedHome, registry: &str, args: &[&str]) -> Measured {
    let mut command = command(home, None, args);
    command.env("npm_config_registry", registry);
    run_measured(&mut command, DEADLINE)
}

fn assert_kept(home: &IsolatedHome, before: &str, measured: &Measured, asked_registry: bool) {
    let text = stderr(measured);
    assert!(measured.output.status.success(), "{text}");
    let after = std::fs::read_to_string(home.project.join("pack.lock")).unwrap();
    // The `[[mcp_servers]]` record named `demo`, with its `[[mcp_servers.tree]]` entries (up to the
    // next server record); `None` when there is none.
    let record = |lock: &str| -> Option<String> {
        let start = lock.find("[[mcp_servers]]\nname = \"demo\"")?;
        let rest = &lock[start + 1..];
        let end = rest.find("\n[[mcp_servers]]").map_or(rest.len(), |end| end);
        Some(rest[..end].to_owned())
    };
    let kept = record(&after);
    assert!(
        kept.is_some(),
        "the pinned record was lost:\n{after}\n{text}"
    );
    assert!(
        kept.as_deref().unwrap().contains("[[mcp_servers.tree]]"),
        "the record lost its tree:\n{after}"
    );
    assert_eq!(record(&after), record(before), "the record moved\n{text}");
    assert!(after.starts_with("lockfile_version = 4"), "{after}");
    // A pin that needs nothing from the registry is reused without asking it; one that does
    // (here: another registry is configured now) says the record was kept.
    assert_eq!(
        text.contains("record is kept as it was"),
        asked_registry,
        "{text}"
    );
}

/// `mcp add demo` of the npm server `@demo/mcp@latest` pinned against `url` (named in the server's
/// env); the lock after.
fn pin_demo_server(home: &IsolatedHome, url: &str) -> String {
    let server_registry = format!("npm_config_registry={url}");
    let added = run_with_registry(
        home,
        url,
        &[
            "mcp",
            "add",
            "demo",
            "--command",
            "npx",
            "--args",
            "-y",
            "--args",
            "@demo/mcp@latest",
            "--env",
            &server_registry,
            "--no-sync",
        ],
    );
    assert!(added.output.status.success(), "{}", stderr(&added));
    std::fs::read_to_string(home.project.join("pack.lock")).unwrap()
}

#[test]
fn an_unreachable_registry_keeps_pinned_npm_records_and_their_trees() {
    let (home, registry) = npm_world();
    let url = registry.url();
    let before = pin_demo_server(&home, &url);
    assert!(
        before.contains("version = \"1.1.0\"") && before.contains("[[mcp_servers.tree]]"),
        "{before}"
    );
    // The registry the server was pinned against goes away: the pin needs nothing from it.
    drop(registry);
    let local = run_with_registry(
        &home,
        &url,
        &[
            "mcp",
            "add",
            "local",
            "--command",
            "./run-server.sh",
            "--no-sync",
        ],
    );
    assert_kept(&home, &before, &local, false);

    // The server's env now names a registry that cannot be reached: the record stays, and says so.
    let unreachable = agentpack_test_support::npm_registry::unreachable_registry_url();
    let manifest_path = home.project.join("agentpack.toml");
    let manifest = std::fs::read_to_string(&manifest_path).unwrap();
    assert!(manifest.contains(&url), "{manifest}");
    std::fs::write(&manifest_path, manifest.replace(&url, &unreachable)).unwrap();
    let other = run_with_registry(
        &home,
        &unreachable,
        &[
            "mcp",
            "add",
            "other",
            "--command",
            "./other.sh",
            "--no-sync",
        ],
    );
    assert_kept(&home, &before, &other, true);
    let lock = run_with_registry(&home, &unreachable, &["lock"]);
    assert_kept(&home, &before, &lock, true);
}

// ----- the git protocol fallback is bounded too -----

#[test]
fn a_git_fetch_larger_than_the_download_cap_is_refused() {
    let github = agentpack_test_support::FakeGitHub::start();
    let repo = github.repo("acme", "big");
    repo.write("SKILL.md", "---\nname: big\ndescription: big\n---\n");
    // Incompressible bytes, so the pack is as large as the file.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let noise: Vec<u8> = (0..(2 << 20))
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    repo.write("noise.bin", noise);
    repo.commit("big");
    github.set_rest_down(Some(503));
    let home = IsolatedHome::new();
    init(&home);
    let mut add = home.command(&bin(), Some(&github));
    add.args(["add", "acme/big@main"])
        .env("AGENTPACK_MAX_DOWNLOAD_SIZE", "512K");
    let measured = run_measured(&mut add, DEADLINE);
    let text = stderr(&measured);
    assert!(!measured.killed, "{text}");
    assert!(!measured.output.status.success(), "{text}");
    assert!(
        text.contains("AGENTPACK_MAX_DOWNLOAD_SIZE") && text.contains("git fetch"),
        "{text}"
    );
    assert!(store_tmp_entries(&home).is_empty());
}

#[test]
fn a_fifo_in_place_of_the_overlay_mcp_json_never_hangs() {
    let home = IsolatedHome::new();
    init(&home);
    std::fs::create_dir_all(home.project.join(".agents")).unwrap();
    mkfifo(&home.project.join(".agents/mcp.json"));
    for args in [&["sync"][..], &["mcp", "list"]] {
        let measured = run_measured(&mut command(&home, None, args), Duration::from_secs(20));
        let text = stderr(&measured);
        assert!(
            !measured.killed,
            "agentpack {args:?} hung on a FIFO .agents/mcp.json\n{text}"
        );
        if args[0] == "sync" {
            // The overlay reader refuses it (it names the overlay, not the file: harness's message).
            assert!(!measured.output.status.success(), "{text}");
            assert!(text.contains(".agents"), "{text}");
        }
    }
}

// ----- issue 12 audit: the defaults, a real kill -9, devices, every front-matter case -----

/// With the documented default JSON cap (64 MiB, no `AGENTPACK_*` limit set), endless JSON is
/// refused under 100 MiB of memory, leaving nothing in `.tmp`: the small cap of the test above is
/// not what keeps memory low. (A tarball of 200,000 files at the default 100,000-file limit is not
/// run here: a debug build takes over 90 s for it on a loaded machine. Measured once with the
/// release build: refused at the limit in 8.2 s, peak 16 MiB, load average 4.8.)
#[test]
fn endless_json_at_the_default_cap_stays_under_100_mib() {
    refused_saying(
        Hostility::EndlessJson,
        &[],
        "AGENTPACK_MAX_JSON_SIZE",
        "larger than 64 MiB",
    );
}

/// A download really killed with SIGKILL mid-body leaves its work directory (the partial download
/// in it); the next `sync` removes it. Only the lock's age is aged past the documented ten seconds
/// (instead of waiting them out).
#[test]
fn a_download_killed_with_sigkill_is_cleaned_up_by_the_next_sync() {
    let server = HostileServer::start(Hostility::StallTarball);
    let home = IsolatedHome::new();
    init(&home);
    let tmp = home.agentpack_home.join("cache/store/v1/.tmp");
    let mut child = command(&home, Some(&server), &["add", "github.com/hostile/repo"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the download is under way: a work directory holding a file besides its lock.
    let started = std::time::Instant::now();
    let work = loop {
        let found = std::fs::read_dir(&tmp).ok().and_then(|entries| {
            entries.flatten().map(|e| e.path()).find(|dir| {
                dir.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("work-"))
                    && walkdir_files(dir).iter().any(|f| !f.ends_with(".lock"))
            })
        });
        if let Some(work) = found {
            break work;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no download started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(200));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(work.is_dir(), "the killed run left nothing to clean");
    let left = walkdir_files(&work);
    assert!(left.len() >= 2, "{left:?}");
    // Every work directory the killed run made (a download may use several) ages past ten seconds.
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    for entry in std::fs::read_dir(&tmp).unwrap().flatten() {
        let lock = entry.path().join(".lock");
        if lock.is_file() {
            std::fs::File::options()
                .write(true)
                .open(&lock)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
    }

    let out = command(&home, None, &["sync"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !work.exists(),
        "the killed download is still there: {left:?}"
    );
    assert_eq!(store_tmp_entries(&home), Vec::<String>::new());
}

/// Every regular file below `dir` (no links followed).
fn walkdir_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => stack.push(entry.path()),
                Ok(kind) if kind.is_file() => files.push(entry.path()),
                _ => {}
            }
        }
    }
    files
}

/// A device in place of a project file (reached through a symbolic link, as a regular user can
/// make one: `/dev/zero` never ends, `/dev/null` is empty) is an error naming the file, never a
/// hang or an endless read.
#[test]
fn a_device_in_place_of_a_project_file_is_an_error_not_a_hang() {
    for (file, device) in [
        ("pack.lock", "/dev/zero"),
        ("pack.lock", "/dev/null"),
        ("agentpack.toml", "/dev/zero"),
    ] {
        let home = IsolatedHome::new();
        init(&home);
        let path = home.project.join(file);
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(device, &path).unwrap();
        for args in [&["sync"][..], &["lock"], &["mcp", "list"]] {
            let measured = run_measured(&mut command(&home, None, args), Duration::from_secs(20));
            let text = stderr(&measured);
            assert!(
                !measured.killed,
                "agentpack {args:?} hung on {file} -> {device}\n{text}"
            );
            assert!(
                !measured.output.status.success(),
                "{args:?} with {file} -> {device}: {text}"
            );
            assert!(
                measured.peak_kib < MAX_PEAK_KIB,
                "{args:?} with {file} -> {device}: peak {} KiB",
                measured.peak_kib
            );
            if file == "pack.lock" {
                assert!(
                    text.contains(file) && text.contains("device"),
                    "{args:?} with {file} -> {device}: {text}"
                );
            }
        }
    }
}

/// The two broken front matters the suite above leaves out: a 1 MB `name` and a NUL byte. Each is
/// a warning naming the file; the package is added and no such name reaches the lock.
#[test]
fn a_huge_skill_name_and_a_nul_byte_are_warned_about() {
    let home = IsolatedHome::new();
    init(&home);
    let pkg = home.project.parent().unwrap().join("pkg");
    let huge = "n".repeat(1 << 20);
    write(
        &pkg,
        "skills/huge/SKILL.md",
        format!("---\nname: {huge}\ndescription: x\n---\nBody.\n").as_bytes(),
    );
    write(
        &pkg,
        "skills/nul/SKILL.md",
        b"---\nname: nul\0name\ndescription: x\n---\nBody.\n",
    );
    let measured = run_measured(
        &mut command(&home, None, &["add", "../pkg", "--no-sync"]),
        DEADLINE,
    );
    let text = stderr(&measured);
    assert!(measured.output.status.success(), "{text}");
    assert!(text.len() < 8 * 1024, "a {} byte message", text.len());
    assert!(text.contains("skills/huge/SKILL.md"), "{text}");
    assert!(
        text.contains("skills/nul/SKILL.md") && text.contains("NUL"),
        "{text}"
    );
    let lock = std::fs::read_to_string(home.project.join("pack.lock")).unwrap();
    assert!(
        !lock.contains("nnnnnnnnnnnnnnnn"),
        "the huge name is in the lock"
    );
    assert!(!lock.contains('\0'), "a NUL is in the lock");
}

/// Defect 9's first case: `add <github package>` while the registry of a pinned npm server cannot
/// be reached keeps the npm record and its tree, and says so.
#[test]
fn adding_a_github_package_while_the_registry_is_unreachable_keeps_the_npm_record() {
    let (home, registry) = npm_world();
    let url = registry.url();
    let before = pin_demo_server(&home, &url);
    assert!(before.contains("[[mcp_servers.tree]]"), "{before}");
    drop(registry);
    let unreachable = agentpack_test_support::npm_registry::unreachable_registry_url();
    let manifest_path = home.project.join("agentpack.toml");
    let manifest = std::fs::read_to_string(&manifest_path).unwrap();
    std::fs::write(&manifest_path, manifest.replace(&url, &unreachable)).unwrap();

    let github = agentpack_test_support::FakeGitHub::start();
    let repo = github.repo("acme", "skills");
    repo.write(
        "SKILL.md",
        "---\nname: demo-skill\ndescription: a skill\n---\nHi.\n",
    );
    repo.commit("skill");
    repo.tag("v1.0.0");
    let mut add = home.command(&bin(), Some(&github));
    add.env("npm_config_registry", &unreachable)
        .args(["add", "acme/skills@^1", "--no-sync"]);
    let measured = run_measured(&mut add, DEADLINE);
    assert_kept(&home, &before, &measured, true);
    let after = std::fs::read_to_string(home.project.join("pack.lock")).unwrap();
    assert!(
        after.contains("acme/skills"),
        "the package was added: {after}"
    );
}

/// The one page that names the limits (docs/src/limits.md) lists every `AGENTPACK_*` limit variable
/// the code reads, each with the code's default; the environment page lists each of them too.
#[test]
fn the_limits_page_names_every_variable_with_its_default() {
    use agentpack_builders::limits::{LimitKind, Limits};
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src");
    let page = std::fs::read_to_string(docs.join("limits.md")).unwrap();
    let environment = std::fs::read_to_string(docs.join("environment.md")).unwrap();
    let defaults = Limits::default();
    for kind in LimitKind::ALL {
        let variable = kind.variable();
        let row = page
            .lines()
            .find(|line| line.starts_with('|') && line.contains(&format!("`{variable}`")))
            .unwrap_or_else(|| panic!("limits.md has no row for {variable}"));
        let default = defaults.describe(kind);
        let default = default.trim_end_matches(":1");
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert!(
            cells.contains(&default),
            "limits.md gives {variable} another default than the code's {default}: {row}"
        );
        assert!(
            environment.contains(&format!("`{variable}`")),
            "environment.md does not list {variable}"
        );
    }
}
