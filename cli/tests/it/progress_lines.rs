//! Progress on stderr (issue 12, defect 9): `lock` names each package it resolves unless
//! `--no-progress` or `AGENTPACK_NO_PROGRESS` says not to, and the elapsed-time spinner is drawn
//! only on a terminal (a pipe never gets it), never with `AGENTPACK_NO_PROGRESS` set.
//!
//! The spinner needs work that takes more than a second: an `add` against a server on 127.0.0.1
//! that stalls the download until a 1 s read timeout (retried) fails it. The terminal is `script`'s pty.

#![allow(clippy::unwrap_used)] // tests may unwrap (HELPERS.md)

use std::process::{Command, Output};

use agentpack_test_support::hostile_server::{HostileServer, Hostility};
use agentpack_test_support::{write, IsolatedHome};

/// What a drawn spinner leaves in the output: its label with the elapsed-time suffix.
const SPINNER_MARKS: [&str; 2] = ["resolving…", "syncing…"];

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("agentpack")
}

fn home_with_path_package() -> IsolatedHome {
    let home = IsolatedHome::new();
    write(
        &home.project.parent().unwrap().join("pkg/SKILL.md"),
        "---\nname: tool\ndescription: a tool\n---\nUse it.\n",
    );
    let out = home
        .command(&bin(), None)
        .args(["init", "--name", "demo"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = home
        .command(&bin(), None)
        .args(["add", "../pkg", "--no-sync"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    home
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn lock_names_each_package_unless_progress_is_off() {
    let home = home_with_path_package();
    let lock = |extra: &[&str], env: Option<(&str, &str)>| -> String {
        let mut command = home.command(&bin(), None);
        command.args(["lock", "--update"]).args(extra);
        if let Some((name, value)) = env {
            command.env(name, value);
        }
        let out = command.output().unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        stderr_of(&out)
    };
    assert!(
        lock(&[], None).contains("resolving pkg"),
        "no progress line"
    );
    for value in ["1", "true", "yes"] {
        let text = lock(&[], Some(("AGENTPACK_NO_PROGRESS", value)));
        assert!(
            !text.contains("resolving"),
            "AGENTPACK_NO_PROGRESS={value}: {text}"
        );
    }
    let text = lock(&["--no-progress"], None);
    assert!(!text.contains("resolving"), "--no-progress: {text}");
    // Unset, empty or "0" is not "off".
    assert!(lock(&[], Some(("AGENTPACK_NO_PROGRESS", "0"))).contains("resolving pkg"));
}

/// A stalled `add` run for several seconds, through `script` (a pty) when `on_terminal`; the
/// bytes the terminal (or the pipe of stderr) received.
fn slow_add(on_terminal: bool, no_progress: bool) -> String {
    let server = HostileServer::start(Hostility::StallTarball);
    let home = IsolatedHome::new();
    let out = home
        .command(&bin(), None)
        .args(["init", "--name", "demo"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut command: Command = if on_terminal {
        let mut script = home.command(std::path::Path::new("script"), None);
        let line = format!("{} add github.com/hostile/repo", bin().display());
        script.args(["-q", "-e", "-c", &line, "/dev/null"]);
        script
    } else {
        let mut add = home.command(&bin(), None);
        add.args(["add", "github.com/hostile/repo"]);
        add
    };
    command
        .env("AGENTPACK_GITHUB_API_URL", server.url())
        .env("AGENTPACK_GITHUB_URL", server.url())
        .env("AGENTPACK_READ_TIMEOUT", "1")
        .env("TERM", "xterm");
    if no_progress {
        command.env("AGENTPACK_NO_PROGRESS", "1");
    }
    let out = command.output().unwrap();
    assert!(!out.status.success(), "the stalled add succeeded");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_spinner_is_drawn_on_a_terminal_only_and_never_with_no_progress() {
    if Command::new("script").arg("--version").output().is_err() {
        agentpack_test_support::skip::skip("no `script` (util-linux) to give agentpack a terminal");
        return;
    }
    let drawn = |text: &str| SPINNER_MARKS.iter().any(|mark| text.contains(mark));
    let terminal = slow_add(true, false);
    assert!(drawn(&terminal), "no spinner on a terminal:\n{terminal}");
    let pipe = slow_add(false, false);
    assert!(!drawn(&pipe), "a spinner in a pipe:\n{pipe}");
    assert!(pipe.contains("AGENTPACK_READ_TIMEOUT"), "{pipe}");
    let off = slow_add(true, true);
    assert!(
        !drawn(&off),
        "a spinner with AGENTPACK_NO_PROGRESS=1:\n{off}"
    );
    assert!(off.contains("AGENTPACK_READ_TIMEOUT"), "{off}");
}
