//! A reader that closes stdout early (`agentpack mode list | head -1`) is not a failure: the command
//! ends quietly with success, as other Unix tools do, instead of panicking.

#![allow(clippy::unwrap_used)]

use agentpack_test_support::IsolatedHome;

fn run_with_closed_stdout(home: &IsolatedHome, args: &[&str]) -> std::process::Output {
    let (reader, writer) = nix::unistd::pipe().unwrap();
    drop(reader);
    home.command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
        .args(args)
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let home = IsolatedHome::new();
    let init = home
        .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
        .args(["init", "--name", "closed"])
        .output()
        .unwrap();
    assert!(init.status.success());
    for args in [
        &["completion", "bash"][..],
        &["--json", "mode", "list"][..],
        &["mode", "list"][..],
    ] {
        let output = run_with_closed_stdout(&home, args);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            output.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
