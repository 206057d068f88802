//! `agentpack init` and the command-line skeleton, through the real binary.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // test code: a panic is a failure; skips are printed

use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;

/// The binary with an isolated environment: no inherited agentpack or XDG settings.
fn agentpack(cwd: &Path, home: &Path) -> Command {
    let mut cmd = Command::cargo_bin("agentpack").unwrap();
    cmd.current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home);
    cmd
}

#[test]
fn init_writes_the_minimal_manifest_an_empty_v2_lock_and_the_home() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("my-project");
    std::fs::create_dir(&project).unwrap();
    let home = tmp.path().join("home");

    agentpack(&project, &home).arg("init").assert().success();

    assert_eq!(
        std::fs::read_to_string(project.join("agentpack.toml")).unwrap(),
        "name = \"my-project\"\nversion = \"0.0.1\"\n\n[dependencies]\n"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("pack.lock")).unwrap(),
        "lockfile_version = 2\n\n[meta]\nname = \"my-project\"\nversion = \"0.0.1\"\n"
    );
    // XDG default: $HOME/.local/share/agentpack
    assert!(home.join(".local/share/agentpack").is_dir());
}

#[test]
fn init_honours_name_version_and_the_home_variables() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    agentpack(tmp.path(), &home)
        .args(["init", "--name", "acme", "--version", "1.2.3"])
        .env("XDG_DATA_HOME", tmp.path().join("xdg"))
        .assert()
        .success();
    let manifest = std::fs::read_to_string(tmp.path().join("agentpack.toml")).unwrap();
    assert!(
        manifest.starts_with("name = \"acme\"\nversion = \"1.2.3\"\n"),
        "{manifest}"
    );
    assert!(tmp.path().join("xdg/agentpack").is_dir());
    assert!(!home.join(".local/share/agentpack").exists());

    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    agentpack(&other, &home)
        .arg("init")
        .env("XDG_DATA_HOME", tmp.path().join("xdg"))
        .env("AGENTPACK_HOME", tmp.path().join("explicit"))
        .assert()
        .success();
    assert!(
        tmp.path().join("explicit").is_dir(),
        "AGENTPACK_HOME wins over XDG_DATA_HOME"
    );
}

#[test]
fn init_refuses_an_existing_manifest_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = "# mine\nname = \"x\"\nversion = \"9.9.9\"\n";
    std::fs::write(tmp.path().join("agentpack.toml"), manifest).unwrap();
    agentpack(tmp.path(), &tmp.path().join("home"))
        .arg("init")
        .assert()
        .failure()
        .stdout("")
        .stderr(predicate::str::contains("agentpack.toml already exists"));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("agentpack.toml")).unwrap(),
        manifest
    );
    assert!(!tmp.path().join("pack.lock").exists());
    assert!(
        !tmp.path().join("home").exists(),
        "a refused init creates nothing"
    );
}

#[test]
fn init_refuses_to_replace_a_stray_lock() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("pack.lock"), "precious").unwrap();
    agentpack(tmp.path(), &tmp.path().join("home"))
        .arg("init")
        .assert()
        .failure()
        .stderr(predicate::str::contains("pack.lock already exists"));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("pack.lock")).unwrap(),
        "precious"
    );
    assert!(!tmp.path().join("agentpack.toml").exists());
}

#[test]
fn global_flags_are_accepted_before_and_after_the_subcommand() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("p");
    std::fs::create_dir(&project).unwrap();
    agentpack(tmp.path(), &tmp.path().join("home"))
        .args(["--quiet", "init", "--project-root", "p"])
        .assert()
        .success()
        .stderr("");
    assert!(project.join("agentpack.toml").is_file());
}

#[test]
fn version_and_completions() {
    let tmp = tempfile::tempdir().unwrap();
    agentpack(tmp.path(), tmp.path())
        .arg("--version")
        .assert()
        .success()
        .stdout(predicate::str::starts_with(format!(
            "agentpack {}",
            env!("CARGO_PKG_VERSION")
        )));
    for (shell, marker) in [
        ("bash", "_agentpack()"),
        ("zsh", "#compdef agentpack"),
        ("fish", "complete -c agentpack"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        agentpack(tmp.path(), tmp.path())
            .args(["completion", shell])
            .assert()
            .success()
            .stdout(predicate::str::contains(marker).and(predicate::str::contains("init")));
    }
}

#[test]
fn an_unknown_command_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    agentpack(tmp.path(), tmp.path())
        .arg("frobnicate")
        .assert()
        .code(2)
        .stdout("");
}

#[test]
fn init_refuses_a_version_that_is_not_semver_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    agentpack(tmp.path(), &tmp.path().join("home"))
        .args(["init", "--version", "one"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("is not a SemVer version"));
    assert!(!tmp.path().join("agentpack.toml").exists());
    assert!(!tmp.path().join("pack.lock").exists());
}

/// agentpack.toml and pack.lock are meant to be committed and shared: a new one gets the mode a
/// plain `open` gives under the user's umask (not a private 0600), and a rewrite keeps the mode.
#[test]
fn new_manifest_and_lock_follow_the_umask() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("shared");
    std::fs::create_dir(&project).unwrap();
    let home = tmp.path().join("home");
    let bin = assert_cmd::cargo::cargo_bin("agentpack");
    let with_umask = |umask: &str, args: &str| {
        let status = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("umask {umask}; exec '{}' {args}", bin.display()))
            .current_dir(&project)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .status()
            .unwrap();
        assert!(status.success(), "{args}");
    };
    let mode = |name: &str| {
        std::fs::metadata(project.join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    with_umask("022", "init");
    assert_eq!(mode("agentpack.toml"), 0o644);
    assert_eq!(mode("pack.lock"), 0o644);
    std::fs::remove_file(project.join("pack.lock")).unwrap();
    with_umask("027", "lock");
    assert_eq!(mode("pack.lock"), 0o640);
    std::fs::set_permissions(
        project.join("pack.lock"),
        std::fs::Permissions::from_mode(0o664),
    )
    .unwrap();
    let manifest = std::fs::read_to_string(project.join("agentpack.toml")).unwrap();
    std::fs::write(
        project.join("agentpack.toml"),
        manifest.replace("0.0.1", "0.0.2"),
    )
    .unwrap();
    let before = std::fs::read_to_string(project.join("pack.lock")).unwrap();
    with_umask("077", "lock");
    assert_ne!(
        std::fs::read_to_string(project.join("pack.lock")).unwrap(),
        before,
        "the lock was rewritten"
    );
    assert_eq!(mode("pack.lock"), 0o664, "an existing file keeps its mode");
}
